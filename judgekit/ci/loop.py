"""The CI loop after a run: record it, compare it with its baseline, write its reports, and say
what it means as an exit code.

``finish`` is what ``judgekit run --gate --compare --junit ...`` does once the suite has run,
as one call a nightly job, the pytest plugin or a notebook can make too::

    import judgekit

    record = judgekit.run_suite("examples/email-update")
    outcome = judgekit.finish(record, history=".judgekit/history.sqlite", policy=judgekit.ComparePolicy(),
                              reports=judgekit.Reports(markdown="summary.md"))
    print(outcome.status)       # GREEN or RED, and why: the line `judgekit run` ends with
    raise SystemExit(outcome.exit_code)

Exit codes (the CLI's, ``judgekit.ci.exit_codes``): 0 ok, 1 the gate failed (when it counts) or
the comparison flagged or failed, 2 some trajectory could not be scored (bad input; it wins over 1).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from judgekit.ci.exit_codes import EXIT_GATE_FAILED, EXIT_INPUT, EXIT_OK

if TYPE_CHECKING:
    from judgekit.ci.compare import ComparePolicy, Comparison
    from judgekit.ci.history import History, RunInfo
    from judgekit.gate import GateReport
    from judgekit.run.record import RunRecord

__all__ = ["EXIT_GATE_FAILED", "EXIT_INPUT", "EXIT_OK", "Outcome", "Reports", "compare_with_baseline", "finish",
           "write_run_reports"]


Notify = Callable[[str, object], None]
"""Told of each step as it is done: ("compared", Comparison), ("recorded", RunInfo), ("wrote", Path)."""


@dataclass(frozen=True)
class Reports:
    """Which reports to write, and where (None: not written)."""

    junit: str | Path | None = None
    """JUnit XML: a testcase per trajectory and axis."""
    markdown: str | Path | None = None
    """A Markdown summary (a CI job summary, a pull-request comment)."""
    html: str | Path | None = None
    """The HTML dashboard (one self-contained file)."""

    def targets(self) -> dict[str, Path]:
        """Kind -> path of each report asked for, in the order they are written."""
        return {kind: Path(path) for kind, path in
                (("junit", self.junit), ("markdown", self.markdown), ("html", self.html)) if path is not None}

    def __bool__(self) -> bool:
        return bool(self.targets())


@dataclass(frozen=True)
class Outcome:
    """What a finished run means: its gate, its comparison, what was recorded and written, and
    the exit code a CI job ends with."""

    gate: GateReport | None
    """The gate report decided at run time (None: a record without one)."""
    comparison: Comparison | None
    """The comparison with the baseline (None: none was asked for)."""
    recorded: RunInfo | None
    """The run as the history recorded it (None: no history given)."""
    written: tuple[Path, ...]
    """The reports written, in order."""
    exit_code: int
    """0 ok, 1 the gate or the comparison failed, 2 some trajectory could not be scored."""
    meaning: str
    """The exit code in words."""

    @property
    def passed(self) -> bool:
        return self.exit_code == EXIT_OK

    @property
    def green(self) -> bool:
        """Green as the history records a run: its gate passed and its comparison (when it was
        compared) did not fail, whether or not the gate counts in the exit code."""
        return (self.gate is not None and self.gate.passed
                and (self.comparison is None or self.comparison.passed))

    @property
    def reasons(self) -> list[str]:
        """Why the run is not green, each its own sentence: the gate's shortfalls, then the
        comparison's (empty when it is green)."""
        reasons = []
        if self.gate is None:
            reasons.append("gate: not decided for this run")
        else:
            reasons += [f"gate: {why}" for why in self.gate.reasons]
            reasons += [f"gate: {axis.axis}: {why}" for axis in self.gate.axes for why in axis.reasons]
        if self.comparison is not None:
            reasons += [f"compare: {why}" for why in self.comparison.reasons]
        return reasons

    @property
    def status(self) -> str:
        """The run in one line: GREEN or RED and why (the gate's shortfalls, the comparison's
        reasons and flags), and what the exit code makes of it when that is not plain: a red
        gate that does not count (``gate=False``), bad input (exit 2). The line ``judgekit run``
        ends with; what green means is ``green``."""
        said = ["the gate passed", _compared(self.comparison)] if self.green else self.reasons
        c = self.comparison
        advisory = [a.axis for a in c.axes if a.flagged and a.advisory] if c is not None else []
        if advisory:
            said.append(f"flagged but advisory (not gating): {', '.join(advisory)}")
        head = "GREEN" if self.green else "RED"
        if self.exit_code == EXIT_INPUT:
            head += f" (exit {EXIT_INPUT}: {self.meaning})"
        elif not self.green and self.exit_code == EXIT_OK:
            head += " (not gated: exit 0)"
        return head + ": " + "; ".join(part for part in said if part)


def _compared(comparison: Comparison | None) -> str:
    """What a passed comparison rests on, in a few words ('' when there was none)."""
    if comparison is None:
        return ""
    if comparison.baseline is None:
        return f"{comparison.against}: nothing compared"
    return f"no gating axis dropped against {comparison.against}"


def compare_with_baseline(rows, history: History | None, baseline: str, policy: ComparePolicy, *, suite=None
                          ) -> Comparison:
    """The comparison of ``rows`` (``RunRows``) with the baseline ``baseline`` names ('last-green',
    a run id in ``history``, or a run record file), the run-to-run noise taken from ``history``;
    ``suite``: the ``LoadedSuite`` a baseline file is measured under (default: the one it names).
    InputError when a named baseline is not there."""
    from judgekit.ci.compare import compare
    from judgekit.ci.history import resolve_baseline

    base, source = resolve_baseline(baseline, rows, history, suite=suite)
    noise = history.noise(rows.suite, exclude=rows.run_id) if history is not None else None
    return compare(rows, base, policy, baseline_source=source, noise=noise)


def write_run_reports(record, reports: Reports, *, comparison: Comparison | None = None, history: History | None = None,
                  calibration_dir: Path | None = None) -> list[Path]:
    """Render each report ``reports`` asks for of ``record`` (with its comparison, the suite's
    trend from ``history`` and its judges' calibration status) and write it through the one
    writer, ``judgekit.report.write_report`` (secrets masked, atomically); the paths written."""
    from judgekit.report import render_reports, report_input, write_report

    data = report_input(record, comparison=comparison, history=history, calibration_dir=calibration_dir)
    targets = reports.targets()
    written = []
    for kind, text in render_reports(data, targets):
        write_report(targets[kind], text)
        written.append(targets[kind])
    return written


def _exit(record, gate: bool, comparison: Comparison | None) -> tuple[int, str]:
    errors = sum(axis.errors for axis in record.summary.values())
    if errors:
        return EXIT_INPUT, f"{errors} trajectory axis/axes could not be scored (bad input)"
    if gate and record.gate_report is not None and not record.gate_report.passed:
        return EXIT_GATE_FAILED, "the gate failed"
    if comparison is not None and not comparison.passed:
        return EXIT_GATE_FAILED, "the comparison with the baseline flagged or failed"
    return EXIT_OK, "ok"


def finish(record: RunRecord, *, history: History | str | Path | None = None, policy: ComparePolicy | None = None,
           baseline: str = "last-green", reports: Reports | None = None, gate: bool = True,
           notify: Notify | None = None) -> Outcome:
    """After a run: compare ``record`` with its baseline (when ``policy`` is given), record it in
    ``history`` (when given: a ``History``, left open, or its path, opened, created if need be,
    and closed), write ``reports``, and return what it all means.

    ``record``: a ``RunRecord`` from ``run_suite`` (with ``keep_rows=True`` it is compared and
    recorded with the rows the run made, else measured again from its results first; reports
    need its results kept). ``baseline``:
    'last-green' (the suite's newest green run in the history), a run id there, or a run record
    file. ``gate``: a failed gate makes the exit code 1 (the gate report is in the outcome
    either way). ``notify``: told of each step as it is done (see ``Notify``), so a caller can
    show it before the next one starts. A run is recorded green when its gate passed and its
    comparison did not fail. Raises InputError when the baseline named is not there.
    """
    if isinstance(history, (str, Path)):
        from judgekit.ci.history import History

        with History(history, create=True) as opened:
            return finish(record, history=opened, policy=policy, baseline=baseline, reports=reports, gate=gate,
                          notify=notify)
    tell = notify or (lambda step, value: None)
    comparison = None
    recorded = None
    if policy is not None:
        from judgekit.run.remeasure import run_rows

        comparison = compare_with_baseline(run_rows(record), history, baseline, policy)
        tell("compared", comparison)
    if history is not None:
        recorded = history.record(record, compare_passed=comparison.passed if comparison else None)
        tell("recorded", recorded)
    written: list[Path] = []
    if reports:
        for path in write_run_reports(record, reports, comparison=comparison, history=history):
            written.append(path)
            tell("wrote", path)
    code, meaning = _exit(record, gate, comparison)
    return Outcome(gate=record.gate_report, comparison=comparison, recorded=recorded, written=tuple(written),
                   exit_code=code, meaning=meaning)
