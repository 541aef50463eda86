"""The dashboard's plots, drawn by matplotlib as deterministic SVG (a fixed hash salt, no date)
and inlined: the trend over the history, the change against the baseline, this run's scores,
the judges' calibration and the cost. Labels from a record go in as plain text (``_plain``):
matplotlib escapes them, and math parsing is off."""

from __future__ import annotations

import re

from judgekit.report._dashboard_axes import _AxisView
from judgekit.report._dashboard_text import _change, _e, _num, _plain
from judgekit.run.rows import FULL_MARKS

PASS, FAIL, GREY, AMBER = "#1a7f37", "#cf222e", "#8c959f", "#bc4c00"
"""The plots' colours (the page's own are in ``assets/dashboard.css``)."""
_RC = {
    "svg.fonttype": "none", "svg.hashsalt": "judgekit", "text.parse_math": False, "font.size": 9,
    "axes.spines.top": False, "axes.spines.right": False, "axes.titlesize": 10, "axes.titleweight": "bold",
    "figure.dpi": 72,
}
_AXIS_COLOURS = ("#0969da", "#8250df", "#bf3989", "#1b7c83", "#9a6700", "#57606a")


def _svg(fig, key: str) -> str:
    """The figure as inline SVG text: no XML prolog or DTD (it names a URL), ids made unique to
    the figure (several SVGs share one document)."""
    import io

    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    text = buffer.getvalue()
    text = text[text.index("<svg"):]
    text = re.sub(r'\bid="([^"]+)"', lambda m: f'id="{key}-{m[1]}"', text)
    text = re.sub(r'url\(#([^)]+)\)', lambda m: f"url(#{key}-{m[1]})", text)
    text = re.sub(r'href="#([^"]+)"', lambda m: f'href="#{key}-{m[1]}"', text)
    return text.replace("<svg ", f'<svg role="img" aria-labelledby="{key}-title" ', 1).replace(
        ">", f'><title id="{key}-title">{key.replace("-", " ")}</title>', 1)


def _figure(width: float, height: float):
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def _plots(data, views: list[_AxisView]) -> str:
    import matplotlib

    with matplotlib.rc_context(_RC):
        blocks = [("plot-trend", "Trend over the history", _trend_plot(data, views))]
        if data.comparison is not None:
            blocks.append(("plot-drops", "Change against the baseline", _drops_plot(data, views)))
        blocks.append(("plot-distribution", "This run: scores per trajectory", _distribution_plot(views)))
    out = []
    for key, title, body in blocks:
        out.append(f'<figure class="plot" id="{key}"><figcaption>{_e(title)}</figcaption>{body}</figure>')
    return f'<section id="plots"><h2>Plots</h2><div class="plots">{"".join(out)}</div></section>'


def _trend_plot(data, views: list[_AxisView]) -> str:
    figure = _trend_figure(data, views)
    return figure if isinstance(figure, str) else _svg(figure, "plot-trend")


def _trend_figure(data, views: list[_AxisView]):
    """The trend: a panel per axis, its mean run by run, green builds filled; its legend below
    the panels, never over the data. A note (text) instead when there is nothing to draw."""
    runs = list(reversed(data.trend))  # oldest first
    if len(runs) == 1:
        return ('<p class="note">Only one run of this suite in the history: a trend needs two. Each run recorded '
                '(<code>judgekit run --record</code> or <code>--compare</code>) adds a point.</p>')
    if not runs:
        return ('<p class="note">No history for this suite: record runs (<code>judgekit run --record</code> or '
                '<code>judgekit history import RUN.json</code>) to see a trend.</p>')
    if not views:
        return '<p class="note">This run scored no axis: there is no trend to draw for it.</p>'
    fig = _figure(6.4, 1.2 + 1.3 * len(views))
    panels = fig.subplots(len(views), 1, sharex=True, squeeze=False)[:, 0]
    xs = list(range(1, len(runs) + 1))
    current = next((x for x, run in zip(xs, runs) if run.run_id == data.record.run_id), None)
    for i, (ax, view) in enumerate(zip(panels, views)):
        ys = [run.axes.get(view.name, {}).get("mean_score") for run in runs]
        colour = _AXIS_COLOURS[i % len(_AXIS_COLOURS)]
        pts = [(x, y) for x, y in zip(xs, ys) if y is not None]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], color=colour, lw=1.4,
                    ls="--" if view.advisory == "advisory" else "-")
        green = [(x, y) for x, y, run in zip(xs, ys, runs) if y is not None and run.green]
        other = [(x, y) for x, y, run in zip(xs, ys, runs) if y is not None and not run.green]
        if green:
            ax.scatter([p[0] for p in green], [p[1] for p in green], s=36, color=PASS, zorder=3, label="green build")
        if other:
            ax.scatter([p[0] for p in other], [p[1] for p in other], s=30, facecolors="white", edgecolors=FAIL,
                       linewidths=1.3, zorder=3, label="not green")
        if current is not None:
            ax.axvline(current, color=GREY, lw=0.8, ls=":")
        ax.set_ylim(-0.05, 1.05)
        ax.set_ylabel("mean")
        title = _plain(view.name) + (" (advisory)" if view.advisory else "")
        if view.flagged:
            title += f" — FLAGGED: {_change(view.comparison.relative_drop)}"
        ax.set_title(title, loc="left", color=FAIL if view.flagged else "black")
        ax.grid(axis="y", color="#d0d7de", lw=0.5)
    shown = {}
    for ax in panels:  # each kind of point once, whichever panel has it
        for handle, label in zip(*ax.get_legend_handles_labels()):
            shown.setdefault(label, handle)
    if shown:
        fig.legend(list(shown.values()), list(shown), loc="outside lower center", fontsize=8, frameon=False,
                   ncol=len(shown))
    panels[-1].set_xlabel("run, oldest to newest (dotted line: this run)")
    from matplotlib.ticker import MaxNLocator

    panels[-1].xaxis.set_major_locator(MaxNLocator(integer=True, nbins=10))
    return fig


def _drops_plot(data, views: list[_AxisView]) -> str:
    c = data.comparison
    compared = [v for v in views if v.comparison is not None and v.comparison.relative_drop is not None]
    if c is None or c.baseline is None or not compared:
        return '<p class="note">No baseline to compare with: nothing to show.</p>'
    fig = _figure(6.4, 0.9 + 0.5 * len(compared))
    ax = fig.subplots()
    names = [_plain(v.name) for v in compared][::-1]
    changes = [-100 * v.comparison.relative_drop for v in compared][::-1]
    colours = [FAIL if v.flagged else (GREY if v.advisory else "#0969da") for v in compared][::-1]
    changes = [x + 0.0 if abs(x) >= 0.05 else 0.0 for x in changes]  # no "-0.0%"
    ax.barh(names, changes, color=colours, height=0.6)
    limit = max(v.comparison.max_drop for v in compared)
    ax.axvline(-100 * limit, color=FAIL, lw=1, ls="--")
    ax.axvline(0, color="black", lw=0.8)
    span = max([abs(x) for x in changes] + [100 * limit]) * 1.35 + 1
    ax.set_xlim(-span, span)
    for y, v in enumerate(compared[::-1]):
        label = f"{_change(v.comparison.relative_drop)}  ({_num(v.comparison.baseline_mean)} → {_num(v.comparison.mean)})"
        if v.flagged:
            label += "  FLAGGED"
        ax.text(0.02 * span, y, label, va="center", ha="left", fontsize=8, color=FAIL if v.flagged else "black")
    ax.set_xlabel(f"change of the mean, % of the baseline (dashed: the {100 * limit:g}% drop that flags)")
    return _svg(fig, "plot-drops")


def _distribution_plot(views: list[_AxisView]) -> str:
    if not any(v.scores for v in views):
        return '<p class="note">Nothing was scored.</p>'
    fig = _figure(6.4, 2.3)
    panels = fig.subplots(1, len(views), squeeze=False)[0]
    for i, (ax, view) in enumerate(zip(panels, views)):
        colour = FAIL if view.flagged else _AXIS_COLOURS[i % len(_AXIS_COLOURS)]
        if view.binary:
            passed = sum(s >= FULL_MARKS for s in view.scores)
            ax.bar(["fail", "pass"], [len(view.scores) - passed, passed], color=[FAIL, PASS], width=0.6)
        else:
            bins = [k / 10 for k in range(11)]
            ax.hist(view.scores, bins=bins, color=colour, edgecolor="white")
            ax.set_xlim(0, 1)
            ax.set_xlabel("score")
        s = view.summary
        extra = f"\n{s.unscored} unscored, {s.errors} errors" if s and (s.unscored or s.errors) else ""
        ax.set_title(_plain(view.name) + (" FLAGGED" if view.flagged else "") + extra, fontsize=9,
                     color=FAIL if view.flagged else "black")
        if i == 0:
            ax.set_ylabel("trajectories")
    return _svg(fig, "plot-distribution")


def _calibration_plot(measured: list) -> str:
    """Each measured judge's kappa with its interval, as a figure (green approved, grey advisory)."""
    import matplotlib

    with matplotlib.rc_context(_RC):
        fig = _figure(6.4, 0.8 + 0.3 * len(measured))
        ax = fig.subplots()
        for y, j in enumerate(measured):
            low = j.kappa - (j.kappa_low if j.kappa_low is not None else j.kappa)
            high = (j.kappa_high if j.kappa_high is not None else j.kappa) - j.kappa
            ax.errorbar([j.kappa], [y], xerr=[[low], [high]], fmt="o", capsize=3,
                        color=PASS if j.status == "approved" else GREY)
        ax.set_yticks(range(len(measured)), [_plain(f"{j.axis} · {j.rubric}")[:40] for j in measured])
        ax.set_ylim(-0.6, len(measured) - 0.4)
        ax.set_xlim(-0.05, 1.05)
        ax.set_xlabel("Cohen's kappa with people (bar: to its 95% lower bound)")
        return (f'<figure class="plot" id="plot-calibration"><figcaption>Calibration: green approved, grey '
                f'advisory</figcaption>{_svg(fig, "plot-calibration")}</figure>')


def _cost_plot(ledger) -> str:
    """The judge questions of the run as one bar: priced calls, calls of unknown cost, cache hits."""
    import matplotlib

    with matplotlib.rc_context(_RC):
        fig = _figure(6.4, 0.9)
        ax = fig.subplots()
        priced = max(ledger.calls - ledger.calls_without_cost, 0)
        left = 0
        for n, label, colour in ((priced, "priced", "#0969da"), (ledger.calls_without_cost, "unknown cost", AMBER),
                                 (ledger.cache_hits, "cache hits", PASS)):
            if n:
                ax.barh([0], [n], left=left, color=colour, height=0.6)
                ax.text(left + n / 2, 0, f"{label}: {n}", ha="center", va="center", color="white", fontsize=8,
                        fontweight="bold")
                left += n
        ax.set_yticks([])
        ax.set_xlim(0, max(left, 1))
        ax.set_xlabel("judge questions: calls to a judge (priced or of unknown cost) and cache hits")
        ax.spines["left"].set_visible(False)
        return f'<figure class="plot" id="plot-cost">{_svg(fig, "plot-cost")}</figure>'
