"""A Markdown summary of a run, fit for a CI job summary or a pull-request comment.

On top, one line: the gate's verdict and the comparison's. Then the per-axis table against the
baseline (mean, baseline mean, change, pass rate, the paired test, the flag and why), the
trajectories that got worse with what each lost, the trajectories in one run only, each
judge's approval status, and the cost.

Everything taken from a record (ids, claims, reasons) is hostile: it is escaped so that it
cannot end a table cell, open a code span, inject HTML or mention anyone.
"""

from __future__ import annotations

import re
from pathlib import Path

from judgekit._util.text import _UNSAFE, printable, redact

REGRESSION_ROWS = 30
LOST_SHOWN = 3
IDS_SHOWN = 10
CELL_CHARS = 300

_SURROGATE = re.compile("[\ud800-\udfff]")  # half a character: no encoder writes it
_UNSHOWN = re.compile(f"[{_UNSAFE}\ud800-\udfff]")
"""What is never shown as it is: ``printable``'s list and lone surrogates (``judgekit.safety.report``
puts U+FFFD in their place in its HTML)."""
_HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_MARKDOWN = set("\\`*_[]|~")
"""Emphasis, code spans, links, escapes and cell ends: what can change markup in mid-line (a
record's text never starts a line here, so block markers need nothing)."""


def escape(text: object, limit: int = CELL_CHARS) -> str:
    """``text`` as literal Markdown on one line: safe in a table cell and in a sentence."""
    text = redact(str(text))  # before the cut and the escapes: a key cut or escaped no longer looks like one
    if len(text) > limit:
        text = text[: limit - 1] + "\u2026"
    # Control and bidirectional characters (text that reads otherwise than it is) shown
    # escaped (``printable``: "\\u202e", as everywhere judgekit writes); lone surrogates as U+FFFD.
    text = _SURROGATE.sub("\ufffd", printable(re.sub(r"\r\n|[\r\n\u2028\u2029]", " ", text)))
    out = []
    for i, ch in enumerate(text):
        if ch in _HTML:
            out.append(_HTML[ch])
        elif ch in _MARKDOWN:
            out.append("\\" + ch)
        elif ch == "@" and (i == 0 or not text[i - 1].isalnum()):
            out.append("@&#8203;")  # a zero-width space after it: a record's text mentions no one
        else:
            out.append(ch)
    return "".join(out)


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    lines.extend("| " + " | ".join(row) + " |" for row in rows)
    return lines


def _num(value: float | None, digits: int = 3) -> str:
    return "\u2013" if value is None else f"{value:.{digits}f}"


def _pct(value: float | None) -> str:
    return "\u2013" if value is None else f"{100 * value:.1f}%"


def _change(mean: float | None, baseline: float | None) -> str:
    if mean is None or baseline is None:
        return "\u2013"
    if baseline == 0:
        return f"{mean - baseline:+.3f}"
    return f"{100 * (mean - baseline) / baseline:+.1f}%"


def _test(test) -> str:
    if test is None:
        return "\u2013"
    name = "McNemar" if test.method == "mcnemar_exact" else "bootstrap"
    return f"{name} p = {test.p_value:.3g}, 95% CI [{test.ci_low:+.3f}, {test.ci_high:+.3f}] (n = {test.n})"


def _own_figures(record) -> dict[str, tuple[int, int, int, float | None, float | None]]:
    """Axis -> (scored, unscored, errors, mean, full-marks rate) of the record on its own."""
    from judgekit.run.rows import FULL_MARKS

    tallies: dict[str, list] = {}
    for result in record.results:
        for name, res in result.axes.items():
            tally = tallies.setdefault(name, [0, 0, 0, 0.0, 0])
            if res.status == "scored":
                tally[0] += 1
                tally[3] += res.score
                tally[4] += res.score >= FULL_MARKS
            elif res.status == "unscored":
                tally[1] += 1
            else:
                tally[2] += 1
    return {name: (s, u, e, total / s if s else None, full / s if s else None)
            for name, (s, u, e, total, full) in tallies.items()}


def _gate_cell(gate) -> str:
    if gate is None:
        return "\u2013"
    if gate.gating_n == 0 and gate.advisory and gate.passed:
        return "advisory (not gating)"
    if gate.value is None:
        return "pass" if gate.passed else "**FAIL**"
    if gate.passed:
        return f"pass ({gate.value:.3f} \u2265 {gate.minimum:g})"
    if gate.value < gate.minimum:
        return f"**FAIL** ({gate.value:.3f} < {gate.minimum:g})"
    return f"**FAIL** ({len(gate.reasons)} reason(s) above)"


def _verdict(data) -> str:
    record, comparison = data.record, data.comparison
    gate = record.gate_report
    parts = [f"**{escape(record.suite, 120)}**"]
    green = gate is not None and gate.passed and (comparison is None or comparison.passed)
    parts.append("**GREEN**" if green else "**RED**")
    parts.append("gate: " + ("not decided" if gate is None else "passed" if gate.passed else "**failed**"))
    if comparison is not None:
        if comparison.baseline is None:
            text = f"compare: no baseline ({escape(comparison.baseline_source, 80)})"
        else:
            text = (f"compare with {escape(comparison.against, 160)}: "
                    + ("passed" if comparison.passed else "**failed**"))
        flagged = comparison.flagged
        if flagged:
            text += f", flagged: {', '.join(escape(name, 60) for name in flagged)}"
        parts.append(text)
    parts.append(f"run {escape(record.run_id, 80)}, {record.trajectories} trajectories")
    return " \u00b7 ".join(parts)


def _reasons(data) -> list[str]:
    record, comparison = data.record, data.comparison
    lines = []
    if record.gate_report is not None:
        lines += [f"- gate: {escape(r)}" for r in record.gate_report.reasons]
        lines += [f"- gate, {escape(a.axis, 60)}: {escape(r)}" for a in record.gate_report.axes for r in a.reasons]
    if comparison is not None:
        lines += [f"- compare: {escape(r)}" for r in comparison.reasons]
        lines += [f"- note: {escape(r)}" for r in comparison.notes]
    return lines


def _axes(data) -> list[str]:
    from judgekit.axes.table import AXES

    record, comparison = data.record, data.comparison
    own = _own_figures(record)
    gates = {a.axis: a for a in record.gate_report.axes} if record.gate_report is not None else {}
    compared = {a.axis: a for a in comparison.axes} if comparison is not None else {}
    names = [n for n in AXES if n in own or n in compared] + sorted((set(own) | set(compared)) - set(AXES))
    with_baseline = comparison is not None and comparison.baseline is not None
    head = ["Axis", "Mean"] + (["Baseline", "Change"] if with_baseline else []) + ["Pass rate"]
    head += (["Paired test"] if with_baseline else []) + ["Scored / unscored / errors", "Gate", "Flag"]
    rows = []
    for name in names:
        row = compared.get(name)
        scored, unscored, errors, mean, rate = own.get(name, (0, 0, 0, None, None))
        advisory = row.advisory if row is not None else bool(gates.get(name) and gates[name].advisory
                                                                 and not gates[name].gating_n)
        label = escape(name, 60) + (" *(advisory)*" if advisory else "")
        axis = AXES.get(name)
        rate_label = "" if axis is None or axis.binary else " full marks"
        if row is not None and row.mean is not None:
            mean, rate = row.mean, row.pass_rate
        cells = [label, _num(mean)]
        if with_baseline:
            cells += [_num(row.baseline_mean if row else None), _change(mean, row.baseline_mean if row else None)]
        rate_text = _pct(rate) + (rate_label if rate is not None else "")
        if with_baseline and row is not None and row.baseline_pass_rate is not None:
            rate_text += f" (was {_pct(row.baseline_pass_rate)})"
        cells.append(rate_text)
        if with_baseline:
            cells.append(_test(row.test if row else None))
        cells.append(f"{scored} / {unscored} / {errors}")
        cells.append(_gate_cell(gates.get(name)))
        if row is not None and row.flagged:
            cells.append("**FLAGGED**: " + "; ".join(escape(r, 400) for r in row.reasons)
                         + (" (advisory: not failing)" if row.advisory else ""))
        elif row is not None and row.reasons:
            cells.append("; ".join(escape(r, 400) for r in row.reasons))
        else:
            cells.append("")
        rows.append(cells)
    if with_baseline:
        shared = max((row.shared for row in compared.values()), default=0)
        caption = (f"Means and pass rates over the trajectories both runs scored (up to {shared}); "
                   "a graded axis passes a trajectory on full marks, the gate reads its mean.")
    else:
        caption = "A graded axis passes a trajectory on full marks; the gate reads its mean."
    return ["### Axes", "", *_table(head, rows), "", caption]


def _regressions(comparison) -> list[str]:
    if comparison is None or comparison.baseline is None:
        return []
    total = comparison.regressions_total
    if not total:
        return ["### Regressions", "", "No trajectory got worse on any axis."]
    flipped = sum(r.flipped for r in comparison.regressions)
    lines = ["### Regressions", "",
             f"{total} trajectory-axis result(s) got worse ({flipped} of those listed flipped from pass to fail)."]
    rows = []
    for reg in comparison.regressions[:REGRESSION_ROWS]:
        lost = [escape(item, 200) for item in reg.lost[:LOST_SHOWN]]
        if len(reg.lost) > LOST_SHOWN:
            lost.append(f"and {len(reg.lost) - LOST_SHOWN} more")
        if reg.status != "scored":
            lost.insert(0, f"now {escape(reg.status, 20)}: {escape(reg.note or '', 200)}")
        rows.append([escape(reg.trajectory_id, 120), escape(reg.axis, 60), _num(reg.baseline_score),
                     _num(reg.score), "**yes**" if reg.flipped else "no", "; ".join(lost) or "\u2013"])
    lines += ["", *_table(["Trajectory", "Axis", "Baseline", "Now", "Flipped", "What it lost"], rows)]
    if total > REGRESSION_ROWS:
        lines += ["", f"... and {total - REGRESSION_ROWS} more."]
    return lines


def _one_sided(comparison) -> list[str]:
    if comparison is None or comparison.baseline is None:
        return []
    if not comparison.only_in_run_total and not comparison.only_in_baseline_total:
        return []
    lines = ["### Trajectories in one run only", "",
             (f"{comparison.only_in_run_total} only in this run, {comparison.only_in_baseline_total} only in the "
              "baseline: listed, not compared."), ""]
    for label, ids, total in (("only in this run", comparison.only_in_run, comparison.only_in_run_total),
                              ("only in the baseline", comparison.only_in_baseline, comparison.only_in_baseline_total)):
        if total:
            shown = ", ".join(escape(tid, 80) for tid in ids[:IDS_SHOWN])
            more = f" and {total - min(len(ids), IDS_SHOWN)} more" if total > min(len(ids), IDS_SHOWN) else ""
            lines.append(f"- {label}: {shown}{more}")
    return lines


def _judges(judges) -> list[str]:
    if not judges:
        return []
    rows = []
    for judge in judges:
        if judge.kappa is None:
            kappa = "no calibration"
        else:
            kappa = (f"{judge.kappa:.2f} [{_num(judge.kappa_low, 2)}, {_num(judge.kappa_high, 2)}]"
                     if judge.kappa_high is not None else
                     f"{judge.kappa:.2f} (lower bound {_num(judge.kappa_low, 2)})")
            if judge.labelled is not None:
                kappa += f" on {judge.labelled} labels"
        status = "approved" if judge.status == "approved" else "**advisory**"
        rows.append([escape(judge.axis, 60), escape(judge.model_pin, 120), escape(judge.rubric, 120), status, kappa,
                     str(judge.verdicts), escape("; ".join(filter(None, [judge.reason, judge.family_note])), 400)])
    return ["### Judges", "",
            *_table(["Axis", "Judge", "Rubric", "Status", "Kappa (95% CI)", "Verdicts", "Why"], rows)]


def cost_line(ledger) -> str:
    """The ledger in one sentence; an unknown cost is said so, never shown as $0."""
    if ledger is None:
        return "Nothing was judged: no judge call, no cost."
    unknown = ledger.calls_without_cost
    if unknown and ledger.cost_usd == 0:
        cost = f"cost unknown ({unknown} call(s) the price map could not price)"
    elif unknown:
        cost = f"cost ${ledger.cost_usd:.4f} plus {unknown} call(s) of unknown cost"
    else:
        cost = f"cost ${ledger.cost_usd:.4f}"
    return (f"{ledger.calls} judge call(s), {ledger.cache_hits} cache hit(s), {ledger.tokens:,} tokens "
            f"({ledger.prompt_tokens:,} prompt, {ledger.completion_tokens:,} completion), {cost}.")


def render_markdown(data) -> str:
    """The Markdown summary of ``data`` (a ``judgekit.report.ReportInput``)."""
    record = data.record
    lines = [f"## judgekit: {_verdict(data)}", ""]
    reasons = _reasons(data)
    if reasons:
        lines += [*reasons, ""]
    lines += [*_axes(data), ""]
    for part in (_regressions(data.comparison), _one_sided(data.comparison), _judges(data.judges)):
        if part:
            lines += [*part, ""]
    lines += ["### Cost", "", cost_line(record.ledger), ""]
    return "\n".join(lines)


def write_markdown(data, path: str | Path) -> None:
    """Write the Markdown summary of ``data`` to ``path`` (atomically, secrets masked)."""
    from judgekit.report.writer import write_report

    write_report(path, render_markdown(data))
