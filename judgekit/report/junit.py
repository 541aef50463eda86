"""JUnit XML of a run: one testcase per trajectory and axis, one testsuite per axis.

What a testcase says is what the gate reads of that verdict:

- scored and passed (a binary axis's pass; a graded axis's full marks): a plain testcase;
- scored and short of it: ``<failure>``, its message the score and what was lost (the failed
  check, the lost point, the unsupported claim), its text every one of them;
- the judge gave no valid verdict: ``<skipped message="unscored: ...">``;
- the judge is not approved for the axis: ``<skipped message="advisory: ...">`` with the gate's
  reason, except where the axis keeps a deterministic part that gates in its place (task
  success: its deterministic checks), which passes or fails on that part alone;
- bad input: ``<error>``.

A graded axis passes the gate on its mean score, not per trajectory: its testsuite's
``<properties>`` say that a testcase passes on full marks, and what the gate decided.
``outcomes`` gives the same decisions to other readers (the pytest plugin).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from judgekit._util.text import printable, redact
from judgekit.run.rows import FULL_MARKS

MESSAGE_CHARS = 1000
"""The most a failure's message attribute holds (its text holds everything)."""

Kind = Literal["passed", "failed", "skipped", "error"]
NO_ANSWER = ("provider_error", "timeout")
"""Unscored reasons that mean the judge never answered: errors, not skipped verdicts."""

# XML 1.0 allows tab, newline, carriage return and these ranges; anything else (control
# characters, lone surrogates, U+FFFE/U+FFFF) makes the file unreadable to every parser.
# ``printable`` has escaped the control characters already.
_NOT_XML = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_safe(text: object) -> str:
    """``text`` as a CI's test report may show it: each control and bidirectional character
    (``printable``) and each character XML 1.0 forbids written as a visible escape
    (``\\x01``, ``\\u202e``)."""
    return _NOT_XML.sub(lambda m: f"\\u{ord(m.group()):04x}", printable(str(text)))


@dataclass(frozen=True)
class Outcome:
    """One trajectory on one axis, as a test: passed, failed, skipped or error, and why."""

    trajectory_id: str
    axis: str
    kind: Kind
    message: str = ""
    """One line: why it failed, was skipped or is an error (empty when it passed)."""
    details: tuple[str, ...] = ()
    """Each thing it lost ("what: why"), for a failure."""
    headline: str = ""
    """A failure's message without the list of what it lost."""
    score: float | None = None
    advisory: bool = False
    """The axis's judge is not approved: what gated (if anything) is the deterministic part."""


@dataclass
class _Judges:
    """Which judges gated on which axes, and the gate's advisory reasons, of one record."""

    approved: dict[str, dict[str, str]] = field(default_factory=dict)
    reasons: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    allow_mismatch: bool = False

    @classmethod
    def of(cls, record) -> _Judges:
        found = cls(approved={seen.fingerprint: dict(seen.axes) for seen in record.judges},
                    allow_mismatch=bool(getattr(record.gate, "allow_model_mismatch", False)))
        if record.gate_report is not None:
            for axis in record.gate_report.axes:
                for item in axis.advisory:
                    found.reasons.setdefault((axis.axis, item.rubric), []).append(item.reason)
        return found

    def advisory_reason(self, axis: str, rubric: str, provenance) -> str | None:
        """Why this verdict's judge does not gate ``axis`` (None: it gates)."""
        from judgekit.run.rows import judge_fingerprint

        mismatch = provenance.model_mismatch and not self.allow_mismatch
        status = self.approved.get(judge_fingerprint(provenance), {}).get(axis)
        if status == "approved" and not mismatch:
            return None
        reasons = self.reasons.get((axis, rubric), [])
        # The gate words a model mismatch its own way; pick the reason that matches this verdict.
        matching = [r for r in reasons if r.startswith("the API reported model") == mismatch]
        if matching:
            return matching[0]
        if mismatch:
            return (f"the API reported model {provenance.reported_model!r}, not the pinned "
                    f"{provenance.model_pin!r}")
        if status is None:
            return "the run record holds no approval status for this judge"
        return "the judge is not approved for this axis"


def _lost_lines(axis, res) -> tuple[str, ...]:
    return tuple(f"{what}: {why}" if why else what for what, why in axis.lost(res))


def _message(head: str, lines: tuple[str, ...]) -> str:
    text = redact(head + (" - lost: " + "; ".join(lines) if lines else ""))  # before the cut
    return text if len(text) <= MESSAGE_CHARS else text[: MESSAGE_CHARS - 3] + "..."


def _outcome(result, name: str, res, judges: _Judges) -> Outcome:
    from judgekit.axes.table import axis_named

    axis = axis_named(name)
    tid = result.trajectory_id
    if res.status == "error":
        return Outcome(tid, name, "error", f"error: {res.error or 'the axis could not be scored'}")
    reason = judges.advisory_reason(name, result.rubric, res.judge) if res.judge is not None else None
    if res.status == "unscored" and res.unscored_reason in NO_ANSWER:
        # The judge never answered: no verdict at all, so neither a skip nor advisory.
        return Outcome(tid, name, "error", f"error: the judge did not answer ({res.unscored_reason}): "
                                           f"{res.error or 'no reply'}")
    if reason is not None:
        fallback = axis.fallback_value(res)
        if fallback is None:
            shown = f" (its score {res.score:.3f} does not gate)" if res.score is not None else ""
            return Outcome(tid, name, "skipped", f"advisory: {reason}{shown}", score=res.score, advisory=True)
        # Only the deterministic part gates: pass or fail on it, and say the judge did not count.
        if fallback >= FULL_MARKS:
            return Outcome(tid, name, "passed", score=res.score, advisory=True)
        lines = _lost_lines(axis, res)
        head = f"failed its deterministic checks (the judge's verdict is advisory: {reason})"
        return Outcome(tid, name, "failed", _message(head, lines), details=lines, headline=head, score=res.score,
                       advisory=True)
    if res.status == "unscored":
        return Outcome(tid, name, "skipped", f"unscored: {res.unscored_reason or 'no valid verdict'}")
    if res.score is not None and res.score >= FULL_MARKS:
        return Outcome(tid, name, "passed", score=res.score)
    lines = _lost_lines(axis, res)
    if axis.binary:
        head = f"failed (score {res.score:g}): {len(lines)} check(s) failed"
    else:
        head = f"not full marks (score {res.score:.3f})"
    return Outcome(tid, name, "failed", _message(head, lines), details=lines, headline=head, score=res.score)


def outcomes(record) -> Iterator[Outcome]:
    """Every trajectory x axis of ``record`` (a ``RunRecord``) as a test outcome, in record order."""
    judges = _Judges.of(record)
    for result in record.results:
        for name, res in result.axes.items():
            yield _outcome(result, name, res, judges)


def outcome_map(record) -> dict[tuple[str, str], Outcome]:
    """``outcomes`` by (trajectory id, axis)."""
    return {(o.trajectory_id, o.axis): o for o in outcomes(record)}


# --- the XML ------------------------------------------------------------------------------------


def _set(element, **attrs: object) -> None:
    for key, value in attrs.items():
        element.set(key, xml_safe(value))


def _properties(suite_el, props: list[tuple[str, str]]) -> None:
    from xml.etree import ElementTree as ET

    holder = ET.SubElement(suite_el, "properties")
    for name, value in props:
        _set(ET.SubElement(holder, "property"), name=name, value=value)


def _axis_properties(data, name: str) -> list[tuple[str, str]]:
    from judgekit.axes.table import AXES

    record = data.record
    axis = AXES.get(name)
    props = [("run_id", record.run_id), ("suite", record.suite)]
    if axis is not None:
        props.append(("kind", axis.kind))
        props.append(("pass", "pass (binary)" if axis.binary else
                      "full marks (score >= 1.0); the gate reads the axis's mean score, not each trajectory"))
    gate = next((a for a in record.gate_report.axes if a.axis == name), None) if record.gate_report else None
    if gate is not None:
        figure = axis.figure if axis is not None else "value"
        value = "no gating verdict" if gate.value is None else f"{figure} {gate.value:.4f}"
        props.append(("gate", ("passed" if gate.passed else "failed") + f": {value}, minimum {gate.minimum}"
                      + "".join(f"; {r}" for r in gate.reasons)))
        if gate.advisory:
            props.append(("advisory", "; ".join(f"{a.rubric}: {a.reason}" for a in gate.advisory)))
    comparison = data.comparison
    if comparison is not None:
        props.append(("comparison", "passed" if comparison.passed else "failed"))
        if comparison.baseline is not None:
            props.append(("baseline_run_id", comparison.baseline.run_id))
        row = next((a for a in comparison.axes if a.axis == name), None)
        if row is not None:
            props.append(("flagged", ("yes: " + "; ".join(row.reasons)) if row.flagged else "no"))
            if row.mean is not None:
                props.append(("mean", f"{row.mean:.4f}"))
            if row.baseline_mean is not None:
                props.append(("baseline_mean", f"{row.baseline_mean:.4f}"))
    return props


def junit_tree(data):
    """The ``<testsuites>`` element of ``data`` (a ``judgekit.report.ReportInput``)."""
    from xml.etree import ElementTree as ET

    from judgekit.axes.table import AXES

    record = data.record
    by_axis: dict[str, list[Outcome]] = {}
    for outcome in outcomes(record):
        by_axis.setdefault(outcome.axis, []).append(outcome)
    order = [name for name in AXES if name in by_axis] + sorted(set(by_axis) - set(AXES))
    root = ET.Element("testsuites")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for name in order:
        cases = by_axis[name]
        classname = f"{record.suite}.{name}"
        counts = {"tests": len(cases), "failures": sum(c.kind == "failed" for c in cases),
                  "errors": sum(c.kind == "error" for c in cases), "skipped": sum(c.kind == "skipped" for c in cases)}
        suite_el = ET.SubElement(root, "testsuite")
        _set(suite_el, name=classname, **counts, timestamp=record.started_at.isoformat())
        _properties(suite_el, _axis_properties(data, name))
        for case in cases:
            case_el = ET.SubElement(suite_el, "testcase")
            _set(case_el, classname=classname, name=case.trajectory_id)
            if case.kind == "failed":
                failure = ET.SubElement(case_el, "failure")
                _set(failure, message=case.message, type="judgekit.lost")
                failure.text = xml_safe("\n".join((case.headline, *case.details)))
            elif case.kind == "skipped":
                _set(ET.SubElement(case_el, "skipped"), message=case.message)
            elif case.kind == "error":
                error = ET.SubElement(case_el, "error")
                _set(error, message=case.message, type="judgekit.input_error")
                error.text = xml_safe(case.message)
        for key in totals:
            totals[key] += counts[key]
    if not by_axis:  # an empty run is never an all-green report
        reasons = (record.gate_report.reasons if record.gate_report is not None else []) or [
            "the run scored nothing: an empty run never passes"]
        suite_el = ET.SubElement(root, "testsuite")
        _set(suite_el, name=f"{record.suite}.run", tests=1, failures=0, errors=1, skipped=0,
             timestamp=record.started_at.isoformat())
        case_el = ET.SubElement(suite_el, "testcase")
        _set(case_el, classname=f"{record.suite}.run", name="run")
        error = ET.SubElement(case_el, "error")
        _set(error, message="; ".join(reasons), type="judgekit.empty_run")
        totals.update(tests=1, errors=1)
    _set(root, name=record.suite, **totals)
    return root


def render_junit(data) -> str:
    """The JUnit XML of ``data`` as text (UTF-8 declared)."""
    from xml.etree import ElementTree as ET

    tree = ET.ElementTree(junit_tree(data))
    ET.indent(tree, space="  ")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(tree.getroot(), encoding="unicode") + "\n"


def write_junit(data, path: str | Path) -> None:
    """Write the JUnit XML of ``data`` to ``path`` (atomically, secrets masked)."""
    from judgekit.report.writer import write_report

    write_report(path, render_junit(data))
