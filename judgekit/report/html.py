"""The HTML dashboard: one self-contained file a person reads in a browser, offline.

On top, the verdict (gate and comparison) in one banner, then each axis as a card and a table
against the baseline, what regressed, the plots, each judge's calibration status, the cost
ledger, and a table of trajectories that can be filtered, each opening its checks, lost points
and claims with their citations.

**Why matplotlib, drawn here as SVG.** The plots are drawn server-side by matplotlib (well kept,
no network, deterministic SVG with a fixed hash salt and no date) and inlined as ``<svg>`` text,
so the page carries no plotting library, loads nothing, and its plots show with scripts
disabled. The only script is a few lines of plain JavaScript for the trajectory filter.
The style sheet and that script are package data (``judgekit/report/assets``), inlined into
the page.

Everything read from a record is hostile: every piece of text, in the page, its attributes
and its plots, has its control and bidirectional characters shown escaped (``\\u202e``, as on
the terminal) and is then HTML-escaped; the page's Content-Security-Policy forbids any load from
the network, and long texts are cut.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

from judgekit._util.text import printable, redact
from judgekit.axes.table import AXES, axis_named
from judgekit.run.rows import FULL_MARKS

MAX_TRAJECTORIES = 2000
"""Trajectories listed on the page (regressions and failures first); the rest are counted."""
MAX_TEXT = 2000
"""Characters of one text from a record (a claim, a quote, a reason) shown before it is cut."""
CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"
PASS, FAIL, GREY, AMBER = "#1a7f37", "#cf222e", "#8c959f", "#bc4c00"


@cache
def _asset(name: str) -> str:
    """A file of ``judgekit/report/assets`` (the page's style sheet and its one script), as text."""
    return resources.files("judgekit.report").joinpath("assets").joinpath(name).read_text(encoding="utf-8")


def _plain(value) -> str:
    """Text from a record as the page shows it, before HTML escaping (matplotlib escapes a
    plot's labels itself): secrets masked, control and bidirectional characters escaped."""
    return printable(redact(str(value)))


def _e(value) -> str:
    """Escaped text from a record, cut at ``MAX_TEXT`` characters."""
    text = _plain(value)  # masked before the cut: half a key no longer looks like one
    if len(text) > MAX_TEXT:
        text = text[:MAX_TEXT] + f"… ({len(text) - MAX_TEXT} more characters)"
    return html.escape(text, quote=True)


def _num(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def _td(axis: str, name: str, text: str, value=None, cls: str = "") -> str:
    """A table cell a test (or a script) can read: ``data-axis``, ``data-field`` and the raw value."""
    raw = "" if value is None else f' data-value="{_e(value)}"'
    klass = f' class="{cls}"' if cls else ""
    return f'<td data-axis="{_e(axis)}" data-field="{name}"{raw}{klass}>{text}</td>'


# --- what the page says about each axis ---------------------------------------------------


@dataclass
class _AxisView:
    name: str
    binary: bool
    summary: object | None  # AxisSummary
    gate: object | None  # AxisGate
    comparison: object | None  # AxisComparison
    full_marks: int
    scores: list[float]

    @property
    def mean(self) -> float | None:
        return self.summary.mean_score if self.summary is not None else None

    @property
    def pass_rate(self) -> float | None:
        scored = self.summary.scored if self.summary is not None else 0
        return self.full_marks / scored if scored else None

    @property
    def advisory(self) -> str:
        """'' (gates), 'advisory' (nothing of it gates) or 'partly advisory'."""
        if self.gate is not None and self.gate.advisory:
            return "advisory" if self.gate.gating_n == 0 else "partly advisory"
        if self.comparison is not None and self.comparison.advisory:
            return "advisory"
        return ""

    @property
    def flagged(self) -> bool:
        return bool(self.comparison is not None and self.comparison.flagged)

    @property
    def state(self) -> str:
        """'fail', 'flagged', 'advisory' or 'pass': the card's colour."""
        if self.gate is not None and not self.gate.passed:
            return "fail"
        if self.flagged:
            return "flagged"
        if self.advisory == "advisory":
            return "advisory"
        return "pass" if self.gate is not None else "advisory"


def _axis_views(data) -> list[_AxisView]:
    record = data.record
    gates = {g.axis: g for g in record.gate_report.axes} if record.gate_report is not None else {}
    compared = {a.axis: a for a in data.comparison.axes} if data.comparison is not None else {}
    names = [name for name in AXES if name in record.summary or name in compared]
    names += sorted(set(record.summary) - set(names))
    views = {name: _AxisView(name, name in AXES and axis_named(name).binary, record.summary.get(name),
                             gates.get(name), compared.get(name), 0, []) for name in names}
    for result in record.results:
        for name, res in result.axes.items():
            view = views.get(name)
            if view is not None and res.status == "scored" and res.score is not None:
                view.scores.append(res.score)
                view.full_marks += res.score >= FULL_MARKS
    return list(views.values())


def _verdict(data) -> tuple[bool, list[str]]:
    """Whether the run is green, and the sentences that say why not (or what it rests on)."""
    record = data.record
    lines: list[str] = []
    ok = True
    report = record.gate_report
    if report is None:
        ok = False
        lines.append("The gate was not decided for this run.")
    elif not report.passed:
        ok = False
        lines.extend(f"Gate: {why}" for why in report.reasons)
        lines.extend(f"Gate: {axis.axis}: {why}" for axis in report.axes if not axis.passed for why in axis.reasons)
    comparison = data.comparison
    if comparison is None:
        lines.append("Not compared with a baseline.")
    elif not comparison.passed:
        ok = False
        lines.extend(f"Comparison: {why}" for why in comparison.reasons)
    elif comparison.baseline is not None:
        lines.append(f"Compared with {comparison.baseline.run_id} ({comparison.baseline_source}): no gating axis dropped.")
    return ok, lines


# --- the page -----------------------------------------------------------------------------


def render_html(data, *, max_trajectories: int = MAX_TRAJECTORIES) -> str:
    """The dashboard of ``data`` (a ``judgekit.report.ReportInput``) as one HTML document."""
    record = data.record
    views = _axis_views(data)
    ok, lines = _verdict(data)
    word = "PASS" if ok else "FAIL"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{word} · {_e(record.suite)} · judgekit</title>",
        f"<style>\n{_asset('dashboard.css')}</style></head><body>",
        _banner(data, ok, lines, views),
        '<main>',
        _axes_table(data, views),
        _changes(data),
        _plots(data, views),
        _judges(data),
        _ledger(record.ledger),
        _trajectories(data, views, max_trajectories),
        '</main>',
        (f'<footer>judgekit {_e(record.judgekit_version)} · run record format {record.format_version} · '
         'plots drawn by matplotlib as inline SVG; this page loads nothing from the network.</footer>'),
        f"<script>\n{_asset('dashboard.js')}</script>",
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def write_html(data, path: str | Path, *, max_trajectories: int = MAX_TRAJECTORIES) -> None:
    """Render ``data`` and replace ``path`` with it atomically (secrets masked)."""
    from judgekit._util.files import write_text_atomically

    write_text_atomically(path, render_html(data, max_trajectories=max_trajectories))


def _banner(data, ok: bool, lines: list[str], views: list[_AxisView]) -> str:
    record = data.record
    project = record.project
    commit = project.git_commit[:12] if project.git_commit else "unknown"
    if project.git_dirty:
        commit += " (uncommitted changes)"
    duration = (record.finished_at - record.started_at).total_seconds()
    gate = record.gate_report
    gate_text = "not decided" if gate is None else ("passed" if gate.passed else "failed")
    comparison = data.comparison
    if comparison is None:
        compare_text = "not run (no baseline given)"
    else:
        against = f" against {comparison.baseline.run_id}" if comparison.baseline is not None else ""
        compare_text = ("passed" if comparison.passed else "failed") + _e(against)
    word = "PASS" if ok else "FAIL"
    items = "".join(f"<li>{_e(line)}</li>" for line in lines)
    meta = [("run", record.run_id), ("commit", commit), ("started", record.started_at.isoformat(timespec="seconds")),
            ("trajectories", str(record.trajectories))]
    if duration >= 0:
        meta.insert(3, ("took", f"{duration:.1f} s"))
    if project.ci_build:
        meta.append(("CI build", project.ci_build))
    meta_html = "".join(f"<span><b>{_e(k)}</b> {_e(v)}</span>" for k, v in meta)
    return (
        f'<header id="verdict" class="banner {"green" if ok else "red"}" data-verdict="{word.lower()}">'
        f'<div class="headline"><span class="word">{word}</span>'
        f'<span class="suite">{_e(record.suite)}</span></div>'
        f'<p class="status"><span id="gate-status" data-passed="{gate_text}">gate {gate_text}</span> · '
        f'<span id="compare-status">comparison {compare_text}</span></p>'
        f'<ul class="reasons">{items}</ul><p class="meta">{meta_html}</p></header>'
        + _cards(views)
    )


def _cards(views: list[_AxisView]) -> str:
    cards = []
    for view in views:
        s = view.summary
        scored = s.scored if s is not None else 0
        if view.binary:
            figure, sub = _pct(view.pass_rate), f"pass rate · {view.full_marks} of {scored} passed"
        else:
            figure, sub = _num(view.mean), f"mean score · {view.full_marks} of {scored} at full marks"
        if s is not None and (s.unscored or s.errors):
            sub += f" · {s.unscored} unscored, {s.errors} errors"
        gate = view.gate
        if gate is None:
            gate_line = "not gated"
        elif gate.gating_n == 0 and gate.advisory:
            gate_line = f"advisory: not gating (advisory value {_num(gate.advisory_value)})"
        else:
            word = "passes" if gate.passed else "fails"
            gate_line = f"gate {word}: {'pass rate' if view.binary else 'mean'} {_num(gate.value)} vs minimum {_num(gate.minimum, 2)}"
        change = ""
        c = view.comparison
        if c is not None and c.relative_drop is not None:
            arrow = "▼" if c.relative_drop > 0 else ("▲" if c.relative_drop < 0 else "=")
            change = (f'<div class="change">{arrow} {abs(100 * c.relative_drop):.1f}% vs baseline '
                      f'{_num(c.baseline_mean)}{" — FLAGGED" if c.flagged else ""}</div>')
        cards.append(
            f'<div class="card {view.state}" data-axis="{_e(view.name)}"><div class="name">{_e(view.name)}'
            f'{" <i>" + view.advisory + "</i>" if view.advisory else ""}</div>'
            f'<div class="big">{figure}</div><div class="sub">{_e(sub)}</div>'
            f'{change}<div class="gate">{_e(gate_line)}</div></div>'
        )
    return f'<div class="cards">{"".join(cards)}</div>'


def _axes_table(data, views: list[_AxisView]) -> str:
    rows = []
    for v in views:
        s, c = v.summary, v.comparison
        drop = c.relative_drop if c is not None else None
        flag_text = "flagged: " + _e("; ".join(c.reasons)) if v.flagged else ("—" if c is None else "no")
        test = ""
        if c is not None and c.test is not None:
            t = c.test
            test = f"{t.method.replace('_', ' ')} p={t.p_value:.3g}, Δ in [{t.ci_low:+.3f}, {t.ci_high:+.3f}]"
        gate = v.gate
        gate_text = "—" if gate is None else ("pass" if gate.passed else "FAIL: " + _e("; ".join(gate.reasons)))
        rows.append(
            f'<tr class="{v.state}"><th scope="row">{_e(v.name)}</th>'
            + _td(v.name, "mean", _num(v.mean), v.mean)
            + _td(v.name, "pass_rate", _pct(v.pass_rate), v.pass_rate)
            + _td(v.name, "scored", str(s.scored if s else 0), s.scored if s else 0)
            + _td(v.name, "unscored", str(s.unscored if s else 0), s.unscored if s else 0)
            + _td(v.name, "errors", str(s.errors if s else 0), s.errors if s else 0)
            + _td(v.name, "baseline_mean", _num(c.baseline_mean if c else None), c.baseline_mean if c else None)
            + _td(v.name, "drop_pct", "—" if drop is None else f"{100 * drop:+.1f}%",
                  None if drop is None else 100 * drop, "bad" if v.flagged else "")
            + _td(v.name, "flagged", flag_text, "yes" if v.flagged else "no", "bad" if v.flagged else "")
            + _td(v.name, "test", _e(test) or "—")
            + _td(v.name, "gate", gate_text, "pass" if gate is not None and gate.passed else "fail")
            + _td(v.name, "advisory", _e(v.advisory) or "gating", v.advisory or "gating")
            + "</tr>"
        )
    head = ("<tr><th>axis</th><th>mean score</th><th>pass rate / full marks</th><th>scored</th><th>unscored</th>"
            "<th>errors</th><th>baseline mean</th><th>drop</th><th>flagged</th><th>paired test</th><th>gate</th>"
            "<th>gating?</th></tr>")
    note = ('<p class="note">Drop is relative to the baseline mean over the trajectories both runs scored '
            '(positive: worse). Unscored and error results are never pass or fail.</p>')
    return (f'<section id="axes"><h2>Axes</h2><div class="scroll"><table id="axis-table">'
            f'<thead>{head}</thead><tbody>{"".join(rows)}</tbody></table></div>{note}</section>')


def _changes(data) -> str:
    c = data.comparison
    if c is None:
        return ('<section id="changes"><h2>Against the baseline</h2><p class="note">Not compared: run '
                '<code>judgekit compare RUN</code> or <code>judgekit run --compare</code> to compare with the '
                'last green build.</p></section>')
    parts = []
    if c.baseline is None:
        parts.append(f'<p>No baseline ({_e(c.baseline_source)}).</p>')
    else:
        b = c.baseline
        parts.append(f'<p>Baseline <b>{_e(b.run_id)}</b> ({_e(c.baseline_source)}), commit '
                     f'{_e((b.git_commit or "unknown")[:12])}, {b.trajectories} trajectories.</p>')
    for why in c.reasons:
        parts.append(f'<p class="bad">✗ {_e(why)}</p>')
    for note in c.notes:
        parts.append(f'<p class="note">{_e(note)}</p>')
    if c.regressions:
        flips = sum(r.flipped for r in c.regressions)
        items = []
        for r in c.regressions[:50]:
            lost = "; ".join(r.lost) or (r.note or "lower score")
            items.append(f'<li><a href="#t-{_e(_anchor(r.trajectory_id))}" data-open>{_e(r.trajectory_id)}</a> '
                         f'<b>{_e(r.axis)}</b> {_num(r.baseline_score, 2)} → {_num(r.score, 2)}'
                         f'{" (passed before)" if r.flipped else ""}: {_e(lost)}</li>')
        more = c.regressions_total - min(len(c.regressions), 50)
        parts.append(f'<h3>{c.regressions_total} trajectory-axis regression(s), {flips} listed flip(s) from pass</h3>'
                     f'<ul class="regressions">{"".join(items)}</ul>'
                     + (f'<p class="note">{more} more not listed here.</p>' if more > 0 else ""))
    elif c.baseline is not None:
        parts.append('<p>No trajectory got worse on any axis.</p>')
    if c.only_in_run_total or c.only_in_baseline_total:
        parts.append(f'<p class="note">{c.only_in_run_total} id(s) only in this run, {c.only_in_baseline_total} '
                     'only in the baseline: listed in the comparison, not compared.</p>')
    return f'<section id="changes"><h2>Against the baseline</h2>{"".join(parts)}</section>'


def _anchor(trajectory_id: str) -> str:
    """A stable, safe anchor for a trajectory id (ids are hostile text)."""
    import hashlib

    return hashlib.sha256(trajectory_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]


# --- plots ----------------------------------------------------------------------------------


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
            title += f" — FLAGGED: down {100 * view.comparison.relative_drop:.1f}%"
        ax.set_title(title, loc="left", color=FAIL if view.flagged else "black")
        ax.grid(axis="y", color="#d0d7de", lw=0.5)
    panels[0].legend(loc="lower left", fontsize=8, frameon=False, ncol=2)
    panels[-1].set_xlabel("run, oldest to newest (dotted line: this run)")
    from matplotlib.ticker import MaxNLocator

    panels[-1].xaxis.set_major_locator(MaxNLocator(integer=True, nbins=10))
    return _svg(fig, "plot-trend")


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
    for y, (x, v) in enumerate(zip(changes, compared[::-1])):
        label = f"{x:+.1f}%  ({_num(v.comparison.baseline_mean)} → {_num(v.comparison.mean)})"
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


# --- judges and cost ------------------------------------------------------------------------


def _judges(data) -> str:
    judges = data.judges
    if not judges:
        return ('<section id="judges"><h2>Judges</h2><p class="note">No judge answered in this run: every axis '
                'was scored deterministically.</p></section>')
    rows = []
    for j in judges:
        kappa = "no calibration" if j.kappa is None else (
            f"{j.kappa:.2f} [{_num(j.kappa_low, 2)}, {_num(j.kappa_high, 2)}] on {j.labelled} labels"
            if j.kappa_high is not None else
            f"{j.kappa:.2f} (lower bound {_num(j.kappa_low, 2)}) on {j.labelled} labels")
        rows.append(
            f'<tr class="{"pass" if j.status == "approved" else "advisory"}"><td>{_e(j.axis)}</td>'
            f'<td>{_e(j.rubric)}</td><td><code>{_e(j.model_pin)}</code></td>'
            f'<td data-field="judge-status">{_e(j.status)}</td><td>{_e(kappa)}</td><td>{j.verdicts}</td>'
            f'<td>{_e(j.reason)}</td></tr>')
    plot = ""
    measured = [j for j in judges if j.kappa is not None]
    if measured:
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
            plot = (f'<figure class="plot" id="plot-calibration"><figcaption>Calibration: green approved, grey '
                    f'advisory</figcaption>{_svg(fig, "plot-calibration")}</figure>')
    head = ("<tr><th>axis</th><th>rubric</th><th>model</th><th>status</th><th>kappa (95%)</th><th>verdicts</th>"
            "<th>why</th></tr>")
    return (f'<section id="judges"><h2>Judges and calibration</h2><div class="scroll"><table id="judge-table">'
            f'<thead>{head}</thead><tbody>{"".join(rows)}</tbody></table></div>{plot}'
            '<p class="note">An advisory judge is shown, never gating: only a judge whose exact fingerprint '
            'calibration approved may fail the gate.</p></section>')


def cost_text(ledger) -> str:
    """The run's cost in words: unknown calls are never counted as $0."""
    if ledger.calls_without_cost and ledger.calls_without_cost >= ledger.calls:
        return "unknown"
    text = f"${ledger.cost_usd:.4f}"
    if ledger.calls_without_cost:
        text = f"at least {text} ({ledger.calls_without_cost} call(s) of unknown cost)"
    return text


def _ledger(ledger) -> str:
    if ledger is None:
        return ('<section id="cost"><h2>Cost</h2><p class="note" id="cost-total" data-cost="none">No judge was '
                'called: nothing spent.</p></section>')
    cost = cost_text(ledger)
    rows = [("judge calls (retries included)", ledger.calls), ("answered by the cache", ledger.cache_hits),
            ("prompt tokens", ledger.prompt_tokens), ("completion tokens", ledger.completion_tokens),
            ("cost", cost), ("calls of unknown cost", ledger.calls_without_cost)]
    rows += [(f"failed attempts: {why}", n) for why, n in ledger.failed_attempts.items()]
    rows += [(f"unscored: {why}", n) for why, n in ledger.unscored.items()]
    rows += [(f"cache refused: {why}", n) for why, n in ledger.cache_refused.items()]
    if ledger.cache_withheld:
        rows.append(("verdicts not cached (held a secret)", ledger.cache_withheld))
    body = "".join(f'<tr><th scope="row">{_e(k)}</th><td data-field="{_e(k)}">{_e(v)}</td></tr>' for k, v in rows)
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
        plot = f'<figure class="plot" id="plot-cost">{_svg(fig, "plot-cost")}</figure>'
    return (f'<section id="cost"><h2>Cost</h2><p id="cost-total" data-cost="{_e(cost)}"><b>{_e(cost)}</b> for '
            f'{ledger.calls} judge call(s), {ledger.cache_hits} cache hit(s), {ledger.tokens} tokens.</p>'
            f'<div class="scroll"><table id="ledger-table"><tbody>{body}</tbody></table></div>{plot}</section>')


# --- trajectories ---------------------------------------------------------------------------


def _cell_state(res) -> str:
    if res.status != "scored":
        return res.status
    return "pass" if res.score is not None and res.score >= FULL_MARKS else "fail"


def _cell_text(name: str, res) -> str:
    if res.status == "unscored":
        return f"unscored ({res.unscored_reason})"
    if res.status == "error":
        return "error"
    axis = AXES.get(name)
    if axis is not None and axis.binary:
        return "PASS" if res.score >= FULL_MARKS else "FAIL"
    return f"{res.score:.2f}"


def _trajectories(data, views: list[_AxisView], limit: int) -> str:
    record = data.record
    names = [v.name for v in views]
    regressed: dict[str, list] = {}
    if data.comparison is not None:
        for r in data.comparison.regressions:
            regressed.setdefault(r.trajectory_id, []).append(r)

    def rank(item):
        index, result = item
        if result.trajectory_id in regressed:
            return (0, index)
        bad = any(_cell_state(res) != "pass" for res in result.axes.values())
        return (1 if bad else 2, index)

    ordered = sorted(enumerate(record.results), key=rank)
    shown = ordered[:limit]
    left_out = len(ordered) - len(shown)
    rows = []
    for _, result in shown:
        rows.append(_trajectory_row(result, names, regressed.get(result.trajectory_id, [])))
    axis_options = "".join(f'<option value="{_e(n)}">{_e(n)}</option>' for n in names)
    status_options = "".join(f'<option value="{v}">{label}</option>' for v, label in (
        ("", "any status"), ("fail", "failing"), ("pass", "passing (all axes, or the axis chosen)"),
        ("unscored", "unscored"), ("error", "error"), ("regressed", "regressed against the baseline")))
    head = "".join(f"<span>{_e(n)}</span>" for n in names)
    note = (f"{len(shown)} of {len(ordered)} trajectories listed, regressions and failures first"
            + (f"; <b>{left_out} left out</b> (all passing or later in the order): the run record holds them all."
               if left_out else ".")
            + " Open a row for its checks, lost points and claims with their citations. The run record keeps the "
            "checks, not the end-state diff itself: the side_effects check names each changed path it refused, "
            "and <code>judgekit diff BEFORE AFTER</code> shows the whole diff.")
    return (
        f'<section id="trajectories"><h2>Trajectories</h2><p class="note" id="left-out" data-left-out="{left_out}">'
        f'{note}</p>'
        f'<div id="filters" class="filters" hidden><input id="f-text" type="search" '
        'placeholder="filter: trajectory id, rubric or text" aria-label="filter text">'
        f'<select id="f-axis" aria-label="axis"><option value="*">any axis</option>{axis_options}</select>'
        f'<select id="f-status" aria-label="status">{status_options}</select> <span id="f-count"></span></div>'
        f'<div class="tlist" style="--axes:{len(names)}"><div class="thead"><span>trajectory</span>'
        f'<span>rubric</span>{head}</div>{"".join(rows)}</div></section>'
    )


def _trajectory_row(result, names: list[str], regressions: list) -> str:
    tokens = set()
    cells = []
    states = []
    for name in names:
        res = result.axes.get(name)
        if res is None:
            cells.append('<span class="cell na">—</span>')
            continue
        state = _cell_state(res)
        states.append(state)
        tokens.update({f"{name}:{state}", f"{name}:any"})
        if state != "pass":
            tokens.add(f"*:{state}")
        cells.append(f'<span class="cell {state}" data-axis="{_e(name)}">{_e(_cell_text(name, res))}</span>')
    if states and all(s == "pass" for s in states):
        tokens.add("*:pass")
    for r in regressions:
        tokens.update({f"{r.axis}:regressed", "*:regressed"})
    tid = result.trajectory_id
    search = f"{tid} {result.rubric}".lower()
    tag = ' <span class="tag">▼ regressed</span>' if regressions else ""
    body = [f'<p class="src">source {_e(result.source)} · rubric {_e(result.rubric)}</p>']
    for r in regressions:
        lost = "; ".join(r.lost) or (r.note or "lower score")
        body.append(f'<p class="bad">▼ {_e(r.axis)}: {_num(r.baseline_score, 2)} in the baseline → '
                    f'{_num(r.score, 2)}{" (it passed before)" if r.flipped else ""}. What it lost: {_e(lost)}</p>')
    for name, res in result.axes.items():
        body.append(_axis_detail(name, res))
    if result.metadata:
        meta = json.dumps(result.metadata, ensure_ascii=False, sort_keys=True, default=str)
        body.append(f'<p class="meta-line">metadata (never scored): <code>{_e(meta)}</code></p>')
    return (
        f'<details class="traj" id="t-{_anchor(tid)}" data-tid="{_e(tid)}" data-search="{_e(search)}" '
        f'data-states="{_e(" ".join(sorted(tokens)))}"><summary><span class="tid">{_e(tid)}{tag}</span>'
        f'<span class="rub">{_e(result.rubric)}</span>{"".join(cells)}</summary>'
        f'<div class="tbody">{"".join(body)}</div></details>'
    )


def _axis_detail(name: str, res) -> str:
    state = _cell_state(res)
    head = f'<h4 class="{state}">{_e(name)}: {_e(_cell_text(name, res))}'
    if res.source == "judge" or res.judge is not None:
        j = res.judge
        head += f' <small>judged by {_e(j.model_pin)}{" (cached)" if j.cache_hit else ""}</small>' if j else ""
    head += "</h4>"
    parts = [head]
    if res.status == "error":
        parts.append(f'<p class="bad">error: {_e(res.error)}</p>')
    if res.status == "unscored":
        parts.append(f'<p>unscored: {_e(res.unscored_reason)} — never pass or fail.'
                     + (f" {_e(res.error)}" if res.error else "") + "</p>")
    checks = getattr(res, "checks", None)
    if checks:
        items = "".join(
            f'<li class="{"pass" if c.passed else "fail"}">{"✓" if c.passed else "✗"} <b>{_e(c.check)}</b> '
            f'{_e(c.reason)}{" <small>(judge)</small>" if c.source == "judge" else ""}</li>' for c in checks)
        parts.append(f'<ul class="checks">{items}</ul>')
    elif checks is not None and res.status == "scored":
        parts.append('<p class="note">No check recorded for this axis.</p>')
    items = getattr(res, "items", None)
    if items:
        lost = [i for i in items if not i.earned]
        earned = [i for i in items if i.earned]
        parts.append(f'<p>{res.points}/{res.max_points} points' + (
            f" · calls {res.counts.calls_total} ({res.counts.calls_failed} failed), in scope "
            f"{res.counts.calls_in_scope}, expected {res.counts.calls_expected}" if res.counts else "") + "</p>")
        if lost:
            parts.append('<ul class="checks">' + "".join(
                f'<li class="fail">✗ lost <b>{_e(i.point)}</b> {_e(i.reason)}</li>' for i in lost) + "</ul>")
        if earned:
            parts.append(f'<details class="earned"><summary>{len(earned)} point(s) earned</summary><ul class="checks">'
                         + "".join(f'<li class="pass">✓ <b>{_e(i.point)}</b> {_e(i.reason)}</li>' for i in earned)
                         + "</ul></details>")
    claims = getattr(res, "claims", None)
    if claims is not None and res.status == "scored":
        parts.append(f'<p>{res.supported}/{res.claims_total} claims supported'
                     + (f", {res.citation_errors} citation error(s)" if res.citation_errors else "") + "</p>")
        out = []
        for claim in claims:
            cites = "".join(f'<blockquote><b>{_e(ev.get("id", "?"))}</b> “{_e(ev.get("quote", ""))}”</blockquote>'
                            for ev in claim.evidence)
            err = f'<p class="bad">citation error: {_e(claim.citation_error)}</p>' if claim.citation_error else ""
            out.append(f'<li class="{"pass" if claim.supported else "fail"}">{"✓" if claim.supported else "✗"} '
                       f'<span class="claim">{_e(claim.claim)}</span>{cites}{err}</li>')
        parts.append(f'<ul class="checks claims">{"".join(out)}</ul>')
    return f'<div class="axis-detail">{"".join(parts)}</div>'
