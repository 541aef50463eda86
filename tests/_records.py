"""Run records built in memory for tests of what reads them (reports, compare): a record edited
by a test either gets the footer its results make (``refooted``: what a run with those results
would have written), or is read as it claims (``rows_as_claimed``: a report's rendering of a
claim, where the test is about the rendering, not about trust)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from judgekit.run.rows import RunRows, rows_of
from judgekit.run.record import RunRecord
from judgekit.run.remeasure import Measure
from judgekit.suite import load_suite


def refooted(record: RunRecord) -> RunRecord:
    """``record`` with the footer its results make under its suite (the ledger and finish time kept)."""
    measure = Measure(load_suite(record.suite_path()))
    for result in record.results:
        measure.add(result)
    footer = measure.footer(finished_at=record.finished_at, ledger=record.ledger)
    for name in type(footer).model_fields:
        setattr(record, name, getattr(footer, name))
    return record


def rows_as_claimed(record: RunRecord) -> RunRows:
    """The rows of an in-memory record, its footer's judges and gate taken at their word."""
    rows = RunRows(run_id=record.run_id, suite=record.suite, started_at=record.started_at,
                   git_commit=record.project.git_commit,
                   rubrics={ref: entry.sha256 for ref, entry in record.rubrics.items()})
    for result in record.results:
        for row in rows_of(result):
            rows.add(row)
        rows.ids.add(result.trajectory_id)
    rows.trajectories = record.trajectories
    rows.gate_passed = record.gate_report.passed if record.gate_report is not None else None
    rows.judges = {seen.fingerprint: dict(seen.axes) for seen in record.judges}
    return rows


def refoot_file(path: Path, original: Path) -> Path:
    """The record file at ``path`` (lines of ``original`` edited by a test, written elsewhere)
    with its suite named from its own folder and the footer its results make."""
    import json
    import os

    from judgekit.results import TrajectoryResult

    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    header = lines[0]["header"]
    suite = (original.parent / header["suite_file"]).resolve()
    header["suite_file"] = os.path.relpath(suite, path.parent)
    measure = Measure(load_suite(suite))
    for line in lines[1:-1]:
        measure.add(TrajectoryResult.model_validate(line["result"]))
    claimed = lines[-1]["footer"]
    footer = measure.footer(finished_at=datetime.fromisoformat(claimed["finished_at"]))
    lines[-1] = {"footer": {**footer.model_dump(mode="json"), "ledger": claimed["ledger"]}}
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path
