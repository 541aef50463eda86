"""judgekit: score AI-agent trajectories against pre-registered rubrics on independent axes.

The library API::

    import judgekit

    record = judgekit.run_suite("examples/email-update")          # or: await judgekit.run_suite_async(...)
    report = judgekit.gate(record)                                # the gate (also embedded in the record)
    outcomes = judgekit.calibrate_suite(loaded, "labels.jsonl", ...)
    with judgekit.History(".judgekit/history.sqlite") as history:      # the CI loop
        rows = judgekit.run_rows(record)
        baseline = history.last_green(record.suite)
        comparison = judgekit.compare_runs(rows, history.rows(baseline.run_id) if baseline else None)
        history.record(record, compare_passed=comparison.passed, rows=rows)
    outcome = judgekit.finish(record, history=".judgekit/history.sqlite",   # or all of it in one call
                              policy=judgekit.ComparePolicy(), reports=judgekit.Reports(junit="junit.xml"))

Names are imported on first use, so ``import judgekit`` (and the CLI) stays fast.
"""

from importlib import import_module
from typing import Any

from judgekit._util.version import __version__
from judgekit.errors import ConfigError, InputError, JudgekitError

_LAZY = {
    "load_suite": "judgekit.suite",
    "LoadedSuite": "judgekit.suite",
    "Suite": "judgekit.suite",
    "GatePolicy": "judgekit.suite",
    "Rubric": "judgekit.rubric.model",
    "load_rubric": "judgekit.rubric.model",
    "Trajectory": "judgekit.trajectory",
    "run_suite": "judgekit.run",
    "run_suite_async": "judgekit.run",
    "plan_run": "judgekit.run",
    "iter_plans": "judgekit.run",
    "merge": "judgekit.run",
    "RunPlan": "judgekit.run",
    "RunOptions": "judgekit.run",
    "RunRecord": "judgekit.run",
    "Executor": "judgekit.run",
    "LocalExecutor": "judgekit.run",
    "ask": "judgekit.run",
    "Ledger": "judgekit.run",
    "Pacer": "judgekit.run",
    "LocalPacer": "judgekit.run",
    "read_run": "judgekit.run",
    "open_run": "judgekit.run",
    "TrajectoryResult": "judgekit.results",
    "JudgeVerdict": "judgekit.verdict",
    "Provenance": "judgekit.verdict",
    "gate": "judgekit.gate",
    "GateReport": "judgekit.gate",
    "calibrate": "judgekit.calibration.calibrate",
    "calibrate_suite": "judgekit.run.calibrate",
    "ApprovalRecord": "judgekit.calibration.approval_record",
    "Axis": "judgekit.axes.table",
    "AXES": "judgekit.axes.table",
    "compare_runs": "judgekit.ci.compare",
    "run_rows": "judgekit.run.remeasure",
    "Comparison": "judgekit.ci.compare",
    "ComparePolicy": "judgekit.ci.compare",
    "History": "judgekit.ci.history",
    "finish": "judgekit.ci.loop",
    "Outcome": "judgekit.ci.loop",
    "Reports": "judgekit.ci.loop",
    "report_input": "judgekit.report",
    "write_reports": "judgekit.report",
}

__all__ = ["ConfigError", "InputError", "JudgekitError", "__version__", *sorted(_LAZY)]


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'judgekit' has no attribute {name!r}")
    value = getattr(import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
