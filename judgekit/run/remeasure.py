"""A run measured again from its results: nothing a record's footer claims is trusted where
its results can say it.

A run record's results are what was measured. Everything else in it is derived from them: the
count, the summary per axis, the judges seen and whether each one gated, the gate's report, and
the rows the history and ``compare`` read. ``Measure`` derives all of it, one result at a time,
under the suite the run belongs to (its gate policy and approval thresholds read from the suite
file, each judge's approval re-derived from its evidence). A run makes its own footer with it;
a record read back from a file (``remeasure``: ``history import``, ``compare`` and ``report``
of a record file, a baseline file) is measured again with it and refused (``InputError``, exit
2, naming what disagrees) when:

- its footer's count, summary, judges or gate report disagree with its results;
- its header's gate policy, approval thresholds or calibration folder are not the suite's, or it
  names another suite;
- a result names a rubric hash other than the header's;
- it started in the future (or after it finished), or finished after now.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from judgekit._util.clock import as_utc, utc_now
from judgekit.run.rows import RunRows, judge_fingerprint, rows_of
from judgekit.errors import InputError
from judgekit.gate import Gate
from judgekit.judge.family import same_family
from judgekit.results import TrajectoryResult
from judgekit.run.record import JudgeSeen, RunFooter, RunHeader, RunRecord, RunStream, SummaryBuilder, open_run
from judgekit.suite import LoadedSuite, load_suite

CLOCK_SKEW = timedelta(minutes=5)
"""How far a recorded time may lie ahead of this machine's clock (two machines' clocks differ)."""


class Measure:
    """What a run's results make of it, fed one result at a time: the summary, the judges seen
    (and whether each gated), the gate, and (``keep_rows``) the rows ``compare`` reads.

    ``loaded`` None (a record whose suite file is gone, read for a report): no gate is decided
    and every judge advises, since no approval can be re-derived without the suite. ``path``:
    the record file the results are read from, which a refusal of one of them names (with the
    line ``add`` is given)."""

    def __init__(self, loaded: LoadedSuite | None, *, keep_rows: bool = False, calibration_dir: Path | None = None,
                 suite_name: str = "", path: Path | None = None):
        self.path = path
        self.gate = None
        if loaded is not None:
            suite = loaded.suite
            suite_name = suite.name
            self.gate = Gate(suite.gate, calibration_dir or loaded.resolve(suite.calibration_dir),
                             thresholds=suite.approval)
        self.summary = SummaryBuilder()
        self.count = 0
        self.rows = RunRows(run_id="", suite=suite_name) if keep_rows else None
        self._judges: dict[str, JudgeSeen] = {}

    def add(self, result: TrajectoryResult, line: int | None = None) -> None:
        """Count ``result`` in (``line``: where the record file holds it, when read from one)."""
        self.count += 1
        self.summary.add(result)
        if self.gate is not None:
            self.gate.add(result)
        for name, res in result.axes.items():
            if res.judge is None:
                continue
            key = self.gate.approval_of(res.judge)[0] if self.gate is not None else judge_fingerprint(res.judge)
            seen = self._judges.get(key)
            if seen is None:
                seen = self._judges[key] = JudgeSeen(fingerprint=key, model_pin=res.judge.model_pin,
                                                     endpoint=res.judge.endpoint, rubric=res.judge.rubric, axes={},
                                                     verdicts=0)
            seen.verdicts += 1
            if same_family(res.judge.model_pin, result.metadata) is not None:
                seen.same_family += 1
            if name not in seen.axes:
                gates = self.gate is not None and self.gate.judge_gates(res.judge, name)
                seen.axes[name] = "approved" if gates else "advisory"
        if self.rows is not None:
            if result.trajectory_id in self.rows.ids:
                raise InputError(f"trajectory id {result.trajectory_id[:200]!r} appears twice in the run: a run holds "
                                 "each trajectory once", self.path, line)
            self.rows.ids.add(result.trajectory_id)
            for row in rows_of(result):
                self.rows.add(row)

    def judges(self) -> list[JudgeSeen]:
        return [self._judges[key] for key in sorted(self._judges)]

    def footer(self, *, finished_at: datetime, ledger=None) -> RunFooter:
        """The footer these results make (``finished_at`` and ``ledger``: what only the run knew)."""
        return RunFooter(finished_at=finished_at, trajectories=self.count, summary=self.summary.summary(),
                         ledger=ledger, judges=self.judges(),
                         gate_report=self.gate.report() if self.gate is not None else None)

    def rows_of(self, header: RunHeader, footer: RunFooter) -> RunRows:
        """The run's rows, named by its header (needs ``keep_rows``)."""
        rows = self.rows
        rows.run_id, rows.started_at, rows.git_commit = header.run_id, header.started_at, header.project.git_commit
        rows.rubrics = {ref: entry.sha256 for ref, entry in header.rubrics.items()}
        rows.trajectories = footer.trajectories
        rows.gate_passed = footer.gate_report.passed if footer.gate_report is not None else None
        rows.judges = {seen.fingerprint: dict(seen.axes) for seen in footer.judges}
        return rows


@dataclass
class Remeasured:
    """A run record as measured again: its header, the footer its results make, its rows."""

    header: RunHeader
    footer: RunFooter
    rows: RunRows | None
    results: list[TrajectoryResult] | None = None
    suite_missing: bool = False
    """The suite file it names is not there: its count and summary were measured again, its gate
    could not be (the footer holds none) and every judge is advisory."""


def _first_difference(claimed: Any, measured: Any, where: str = "") -> str | None:
    """Where two derived values first differ, in words (None: they are equal)."""
    if isinstance(claimed, BaseModel) and isinstance(measured, BaseModel):
        claimed, measured = claimed.model_dump(mode="json"), measured.model_dump(mode="json")
    if isinstance(claimed, dict) and isinstance(measured, dict):
        for key in sorted(set(claimed) | set(measured), key=str):
            if key not in claimed or key not in measured:
                return f"{where}{key} is {'missing from the record' if key not in claimed else 'not in the results'}"
            found = _first_difference(claimed[key], measured[key], f"{where}{key}.")
            if found:
                return found
        return None
    if isinstance(claimed, list) and isinstance(measured, list):
        if len(claimed) != len(measured):
            return f"{where.rstrip('.')} holds {len(claimed)} entries in the record, {len(measured)} measured again"
        for index, (a, b) in enumerate(zip(claimed, measured)):
            found = _first_difference(a, b, f"{where}{index}.")
            if found:
                return found
        return None
    if claimed != measured:
        return f"{where.rstrip('.')} is {str(claimed)[:80]} in the record, {str(measured)[:80]} measured again"
    return None


def check_header(header: RunHeader, loaded: LoadedSuite | None, path: Path | None, *,
                 now: Callable[[], datetime] = utc_now) -> None:
    """InputError when the header is not a run of ``loaded`` under its thresholds (None: its suite
    is not there to say), or its start lies in the future."""
    if as_utc(header.started_at) > now() + CLOCK_SKEW:
        raise InputError(f"the record says it started {header.started_at.isoformat()}, in the future", path)
    if loaded is None:
        return
    suite = loaded.suite
    if header.suite != suite.name:
        raise InputError(f"the record is a run of suite {header.suite[:200]!r}, but the suite file it names is "
                         f"{suite.name[:200]!r}", path)
    for what, claimed, actual in (("gate policy", header.gate, suite.gate), ("approval thresholds", header.approval,
                                                                            suite.approval)):
        differs = _first_difference(claimed, actual)
        if differs:
            raise InputError(f"the record's {what} is not its suite's ({differs.replace('measured again', 'in the suite')})"
                             ": it was not gated under this suite's thresholds", path)
    claimed_dir = Path(header.calibration_dir)  # format 1 named the folder itself, absolute
    if (claimed_dir.resolve() != loaded.resolve(suite.calibration_dir) if claimed_dir.is_absolute()
            else header.calibration_dir != suite.calibration_dir):
        raise InputError(f"the record's calibration folder ({header.calibration_dir[:200]!r}) is not its suite's "
                         f"({suite.calibration_dir!r}): its judges' approvals are the suite's", path)


def _decided(report) -> dict[str, Any]:
    """A gate report without the advice it gives in words (the command that would approve a
    judge names this machine's paths)."""
    data = report.model_dump(mode="json")
    for axis in data["axes"]:
        for advisory in axis["advisory"]:
            advisory.pop("command")
    return data


def check_footer(claimed: RunFooter, measured: RunFooter, path: Path | None, *,
                 started_at: datetime | None = None, migrated: bool = False,
                 now: Callable[[], datetime] = utc_now) -> None:
    """InputError naming the first derived part of ``claimed`` that disagrees with ``measured``,
    or a finish after now or before the start. ``migrated``: a format 1 record, which kept
    neither the judges seen nor the gate."""
    if as_utc(claimed.finished_at) > now() + CLOCK_SKEW:
        raise InputError(f"the record says it finished {claimed.finished_at.isoformat()}, in the future", path)
    if started_at is not None and as_utc(claimed.finished_at) < as_utc(started_at):
        raise InputError("the record says it finished before it started", path)
    parts = [("trajectories", claimed.trajectories, measured.trajectories),
             ("summary", claimed.summary, measured.summary)]
    if not migrated:
        parts += [("judges", claimed.judges, measured.judges),
                  ("gate_report", _decided(claimed.gate_report) if claimed.gate_report is not None else None,
                   _decided(measured.gate_report))]
    for name, a, b in parts:
        differs = _first_difference(a, b, f"{name}.")
        if differs:
            raise InputError(f"the footer disagrees with the record's own results: {differs}", path)


def remeasure(record: RunRecord | RunStream, *, loaded: LoadedSuite | None = None, keep_rows: bool = True,
              keep_results: bool = False, calibration_dir: Path | None = None, suite_optional: bool = False,
              now: Callable[[], datetime] = utc_now) -> Remeasured:
    """``record`` (a ``RunRecord``, or a stream from ``open_run``, read once) measured again under
    its suite (``loaded``, else the suite file it names); InputError for anything it claims that
    its results do not bear out. The footer returned is the one its results make. A record
    names its own suite file: whoever brings in records it did not make pins the suite
    (``loaded``; ``--suite`` on the command line), or a record could name a lenient one.

    ``suite_optional`` (reports): when the suite file is not there, measure what needs no suite
    (the count and the summary) and return a footer with no judges and no gate, rather than
    refusing the record; ``suite_missing`` says so."""
    path = record.path
    header = record.header
    missing = loaded is None and suite_optional and not record.suite_path().is_file()
    if not missing:
        loaded = loaded or load_suite(record.suite_path())
    check_header(header, loaded, path, now=now)
    measure = Measure(loaded, keep_rows=keep_rows, calibration_dir=calibration_dir, suite_name=header.suite, path=path)
    kept: list[TrajectoryResult] | None = [] if keep_results else None
    for result in record.results:
        line = record.line_no if isinstance(record, RunStream) else None  # a format 1 record is one document
        entry = header.rubrics.get(result.rubric)
        if entry is None or entry.sha256 != result.rubric_sha256:
            raise InputError(f"result {result.trajectory_id[:200]!r} names rubric {result.rubric[:200]} with a hash the "
                             "header does not list", path, line)
        measure.add(result, line)
        if kept is not None:
            kept.append(result)
    claimed = record.footer
    footer = measure.footer(finished_at=claimed.finished_at, ledger=claimed.ledger)
    check_footer(claimed, footer, path, started_at=header.started_at, now=now,
                 migrated=missing or getattr(record, "_migrated_from", None) is not None)
    return Remeasured(header=header, footer=footer, rows=measure.rows_of(header, footer) if keep_rows else None,
                      results=kept, suite_missing=missing)


def remeasured_file(path: str | Path, **kwargs) -> Remeasured:
    """The run record file at ``path``, measured again (see ``remeasure``)."""
    opened = open_run(path)
    try:
        return remeasure(opened, **kwargs)
    finally:
        if isinstance(opened, RunStream):
            opened.close()


def read_remeasured(path: str | Path, *, suite_optional: bool = False, loaded: LoadedSuite | None = None) -> RunRecord:
    """The run record file at ``path``, whole, once its footer is borne out by its results (its
    rows kept: ``run_rows`` reads them). ``suite_optional``: see ``remeasure``; the record's
    ``suite_missing`` says whether its suite was there."""
    found = remeasured_file(path, keep_rows=True, keep_results=True, suite_optional=suite_optional, loaded=loaded)
    record = RunRecord.of(found.header, found.results, found.footer)
    record._source = Path(path)
    record._rows = found.rows
    record._suite_missing = found.suite_missing
    return record


def run_rows(record: RunRecord | RunStream) -> RunRows:
    """The rows ``compare`` reads of a run: as the run made them (``run_suite(keep_rows=True)``),
    else measured again from its results (``remeasure``), refused when its footer disagrees."""
    if isinstance(record, RunRecord) and record._rows is not None:
        return record._rows
    return remeasure(record).rows
