"""The dashboard's axes: what the page says about each axis (its summary, gate and comparison,
and the scores of its trajectories), as the cards under the banner and the table against the
baseline."""

from __future__ import annotations

from dataclasses import dataclass

from judgekit.axes.table import AXES, axis_named
from judgekit.report._dashboard_text import _change, _e, _num, _pct, _td
from judgekit.run.rows import FULL_MARKS


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
    def gate_word(self) -> str:
        """The gate on this axis in a word: 'advisory' when nothing of it gates (never pass or
        fail: its value decides nothing), else 'pass' or 'fail'; '' when no gate was decided."""
        if self.gate is None:
            return ""
        if self.gate.gating_n == 0 and self.gate.advisory:
            return "advisory"
        return "pass" if self.gate.passed else "fail"

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
        elif view.gate_word == "advisory":
            gate_line = f"advisory: not gating (advisory value {_num(gate.advisory_value)})"
        else:
            word = "passes" if gate.passed else "fails"
            gate_line = f"gate {word}: {'pass rate' if view.binary else 'mean'} {_num(gate.value)} vs minimum {_num(gate.minimum, 2)}"
        change = ""
        c = view.comparison
        if c is not None and c.relative_drop is not None:
            change = (f'<div class="change">{_change(c.relative_drop)} vs baseline '
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
        word = v.gate_word
        if word == "fail":
            gate_text = "FAIL: " + _e("; ".join(v.gate.reasons))
        else:
            gate_text = {"": "—", "advisory": "advisory (not gating)", "pass": "pass"}[word]
        rows.append(
            f'<tr class="{v.state}"><th scope="row">{_e(v.name)}</th>'
            + _td(v.name, "mean", _num(v.mean), v.mean)
            + _td(v.name, "pass_rate", _pct(v.pass_rate), v.pass_rate)
            + _td(v.name, "scored", str(s.scored if s else 0), s.scored if s else 0)
            + _td(v.name, "unscored", str(s.unscored if s else 0), s.unscored if s else 0)
            + _td(v.name, "errors", str(s.errors if s else 0), s.errors if s else 0)
            + _td(v.name, "baseline_mean", _num(c.baseline_mean if c else None), c.baseline_mean if c else None)
            + _td(v.name, "change_pct", _change(drop), None if drop is None else round(-100 * drop, 6),
                  "bad" if v.flagged else "")
            + _td(v.name, "flagged", flag_text, "yes" if v.flagged else "no", "bad" if v.flagged else "")
            + _td(v.name, "test", _e(test) or "—")
            + _td(v.name, "gate", gate_text, word or None)
            + _td(v.name, "advisory", _e(v.advisory) or "gating", v.advisory or "gating")
            + "</tr>"
        )
    head = ("<tr><th>axis</th><th>mean score</th><th>pass rate / full marks</th><th>scored</th><th>unscored</th>"
            "<th>errors</th><th>baseline mean</th><th>change</th><th>flagged</th><th>paired test</th><th>gate</th>"
            "<th>gating?</th></tr>")
    note = ('<p class="note">Change: of the mean, relative to the baseline mean over the trajectories both runs '
            'scored; a drop is negative (▼). An advisory axis (its judge is not approved) is shown, never '
            'gating: its gate says advisory, not pass or fail. Unscored and error results are never pass or '
            'fail.</p>')
    return (f'<section id="axes"><h2>Axes</h2><div class="scroll"><table id="axis-table">'
            f'<thead>{head}</thead><tbody>{"".join(rows)}</tbody></table></div>{note}</section>')
