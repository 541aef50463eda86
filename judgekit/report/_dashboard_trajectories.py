"""The dashboard's table of trajectories: regressions and failures first, a row per
trajectory with a cell per axis and the tokens the filter script reads, each opening to its
checks, lost points and claims with their citations."""

from __future__ import annotations

import json

from judgekit.axes.table import AXES
from judgekit.report._dashboard_axes import _AxisView
from judgekit.report._dashboard_text import _anchor, _e, _num
from judgekit.run.rows import FULL_MARKS


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
