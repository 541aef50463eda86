"""The HTML dashboard: one self-contained file a person reads in a browser, offline.

On top, the verdict (gate and comparison) in one banner, then each axis as a card and a table
against the baseline, what regressed, the plots, each judge's calibration status, the cost
ledger, and a table of trajectories that can be filtered, each opening its checks, lost points
and claims with their citations.

**Why matplotlib, drawn as SVG.** The plots are drawn server-side by matplotlib (well kept,
no network, deterministic SVG with a fixed hash salt and no date) and inlined as ``<svg>`` text,
so the page carries no plotting library, loads nothing, and its plots show with scripts
disabled. The only script is a few lines of plain JavaScript for the trajectory filter.
The style sheet and that script are package data (``judgekit/report/assets``), inlined into
the page.

This module assembles the page (banner, comparison, judges, cost); its other parts live beside
it: ``_dashboard_axes`` (the cards and the axis table), ``_dashboard_plots`` (the SVG plots),
``_dashboard_trajectories`` (the filterable table) and ``_dashboard_text`` (escaping and
formatting of record text).

Everything read from a record is hostile: every piece of text, in the page, its attributes
and its plots, has its control and bidirectional characters shown escaped (``\\u202e``, as on
the terminal) and is then HTML-escaped; the page's Content-Security-Policy forbids any load from
the network, and long texts are cut.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from pathlib import Path

from judgekit.report._dashboard_axes import _axes_table, _axis_views, _AxisView, _cards
from judgekit.report._dashboard_plots import _calibration_plot, _cost_plot, _plots
from judgekit.report._dashboard_text import _anchor, _e, _num
from judgekit.report._dashboard_trajectories import _trajectories

MAX_TRAJECTORIES = 2000
"""Trajectories listed on the page (regressions and failures first); the rest are counted."""
CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"


@cache
def _asset(name: str) -> str:
    """A file of ``judgekit/report/assets`` (the page's style sheet and its one script), as text."""
    return resources.files("judgekit.report").joinpath("assets").joinpath(name).read_text(encoding="utf-8")


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
        lines.append(f"Compared with {comparison.against}: no gating axis dropped.")
    return ok, lines


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
    from judgekit.report.writer import write_report

    write_report(path, render_html(data, max_trajectories=max_trajectories))


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
        parts.append(f'<p>Baseline <b>{_e(c.against)}</b>, commit '
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
            f'<td>{_e(j.reason)}{_family(j)}</td></tr>')
    measured = [j for j in judges if j.kappa is not None]
    plot = _calibration_plot(measured) if measured else ""
    head = ("<tr><th>axis</th><th>rubric</th><th>model</th><th>status</th><th>kappa (95%)</th><th>verdicts</th>"
            "<th>why</th></tr>")
    return (f'<section id="judges"><h2>Judges and calibration</h2><div class="scroll"><table id="judge-table">'
            f'<thead>{head}</thead><tbody>{"".join(rows)}</tbody></table></div>{plot}'
            '<p class="note">An advisory judge is shown, never gating: only a judge whose exact fingerprint '
            'calibration approved may fail the gate.</p></section>')


def _family(judge) -> str:
    """The judge's same-family note, as a flagged line of its row's "why" cell (empty: none)."""
    if not judge.family_note:
        return ""
    return f'<br><span class="tag" data-field="same-family">{_e(judge.family_note)}</span>'


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
    rows += [(f"cache refused: {why}", n) for why, n in ledger.cache_refused.items()]
    if ledger.cache_withheld:
        rows.append(("verdicts not cached (held a secret)", ledger.cache_withheld))
    body = "".join(f'<tr><th scope="row">{_e(k)}</th><td data-field="{_e(k)}">{_e(v)}</td></tr>' for k, v in rows)
    plot = _cost_plot(ledger)
    return (f'<section id="cost"><h2>Cost</h2><p id="cost-total" data-cost="{_e(cost)}"><b>{_e(cost)}</b> for '
            f'{ledger.calls} judge call(s), {ledger.cache_hits} cache hit(s), {ledger.tokens} tokens.</p>'
            f'<div class="scroll"><table id="ledger-table"><tbody>{body}</tbody></table></div>{plot}</section>')
