"""The run history at CI scale: compare against the last green build, file size, recording speed.

    python benchmarks/bench_history.py [--runs 1000] [--trajectories 1000] [--record-size 100000]
                                       [--repeat 5] [--workdir DIR] [--keep]

1. Fills a history with ``--runs`` runs of one suite, ``--trajectories`` trajectories each, on
   three axes (task success, tool correctness, faithfulness): 3,000,000 rows at the defaults.
   Scores are drawn from a seeded generator so runs differ the way real ones do (most rows the
   same as the run before, a few flipped; failures carry what they lost, as real rows do);
   every 10th run's gate fails, so "last green" has to skip some.
2. Times ``judgekit compare RUN_ID --baseline last-green`` done the way the CLI does it
   (open the history, read the newest run's rows and the last green run's, the noise estimate,
   the paired tests), ``--repeat`` times in one process, and once as a whole command.
3. Records one run of ``--record-size`` trajectories, two ways: from its record file (parse
   every line and measure the run again from its results, as ``judgekit history import``
   does) and from rows already in memory (as ``judgekit run --compare`` does).

Targets: compare < 1 s; recording 100,000 trajectories < 10 s; the file size is printed
against the stated budget (200 MB for 1,000 x 1,000).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

ROOT = Path(__file__).resolve().parent.parent
COMPARE_TARGET_S = 1.0
RECORD_TARGET_S = 10.0
SIZE_BUDGET_MB = 200.0
AXES = ("task_success", "tool_correctness", "faithfulness")


def header_footer(run_id: str, started: datetime, n: int, gate_passed: bool):
    from judgekit.gate import AxisGate, GateReport
    from judgekit.run.record import RunFooter, RunHeader, RubricEntry

    header = RunHeader(run_id=run_id, suite="bench", suite_file="suite.yaml", judgekit_version="bench",
                       started_at=started, rubrics={"bench@1": RubricEntry(sha256="0" * 64, file="r.yaml")})
    header.project.git_commit, header.project.git_dirty = f"{hash(run_id) & 0xFFFFFF:06x}", False
    gate = GateReport(passed=gate_passed, axes=[AxisGate(axis=a, gating_n=n, minimum=0.5, passed=gate_passed)
                                                 for a in AXES])
    footer = RunFooter(finished_at=started + timedelta(minutes=5), trajectories=n, summary={}, gate_report=gate)
    return header, footer


def synthetic_rows(run_id: str, n: int, rng, previous=None):
    """Rows of one run: each trajectory keeps its previous score with probability 0.97."""
    from judgekit.run.rows import AxisRow, RunRows

    rows = RunRows(run_id=run_id, suite="bench")
    lost = (("call count", "2 state-changing calls, expected exactly 1"),)
    for axis in AXES:
        before = previous.rows[axis] if previous is not None else None
        draws = rng.random(n)
        fresh = rng.random(n)
        for i in range(n):
            tid = f"traj-{i:06d}"
            if before is not None and draws[i] < 0.97:
                score = before[tid].score
            else:
                score = 1.0 if fresh[i] < 0.8 else (0.0 if axis == "task_success" else 0.75)
            rows.add(AxisRow(tid, axis, "scored", score, lost if score < 1 else (), None,
                             "f" * 64 if axis == "faithfulness" else None))
    rows.judges = {"f" * 64: {"faithfulness": "advisory"}}
    return rows


def fill(history_path: Path, runs: int, n: int) -> float:
    import numpy as np

    from judgekit.ci.history import History

    rng = np.random.default_rng(0)
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    previous = None
    began = time.perf_counter()
    with History(history_path) as store:
        for index in range(runs):
            run_id = f"run-{index:05d}"
            rows = synthetic_rows(run_id, n, rng, previous)
            header, footer = header_footer(run_id, start + timedelta(hours=index), n, gate_passed=index % 10 != 9)
            store._write(header, footer, rows, None)
            previous = rows
            if (index + 1) % 100 == 0:
                print(f"  filled {index + 1} runs ({time.perf_counter() - began:.0f} s)", flush=True)
    return time.perf_counter() - began


def compare_once(history_path: Path):
    from judgekit.ci.compare import ComparePolicy, compare
    from judgekit.ci.history import History, resolve_baseline

    with History(history_path, create=False) as store:
        newest = store.runs(limit=1)[0]
        rows = store.rows(newest.run_id)
        baseline, source = resolve_baseline("last-green", rows, store)
        return compare(rows, baseline, ComparePolicy(), baseline_source=source, noise=store.noise(rows.suite))


def make_record(path: Path, n: int) -> None:
    """A format 2 record of n trajectories, each a copy of a real example result with its own id,
    of a real suite written beside it, its footer what its results make (``history import``
    measures a record again and refuses one whose footer disagrees)."""
    from judgekit.results import CheckOutcome, TaskSuccessResult, ToolCorrectnessResult, ToolPoint, TrajectoryResult
    from judgekit.run.record import RubricEntry, RunHeader, line_of
    from judgekit.run.remeasure import Measure
    from judgekit.suite import load_suite

    shutil.copy(ROOT / "rubrics" / "update-email.yaml", path.parent / "rubric.yaml")
    (path.parent / "suite.yaml").write_text(
        "name: bench\nrubrics: [rubric.yaml]\ntrajectories: [{file: t.jsonl, rubric: update-email}]\n")
    loaded = load_suite(path.parent / "suite.yaml")
    rubric = loaded.rubrics["update-email@1.0.0"]
    header = RunHeader(run_id="record-100k", suite="bench", suite_file="suite.yaml", judgekit_version="bench",
                       started_at=datetime(2026, 12, 1, tzinfo=timezone.utc),
                       rubrics={rubric.ref: RubricEntry(sha256=rubric.sha256(), file="rubric.yaml")})
    ok = TrajectoryResult(
        trajectory_id="x", rubric=rubric.ref, rubric_sha256=rubric.sha256(), source="trajectories.jsonl:1",
        axes={"task_success": TaskSuccessResult(passed=True, score=1.0, checks=[
                  CheckOutcome(check="postcondition[0]", passed=True, reason="users/1/email equals alice@example.com")]),
              "tool_correctness": ToolCorrectnessResult(score=0.75, points=3, max_points=4, items=[
                  ToolPoint(point="call[0] update_user: tool", earned=True, reason="right tool"),
                  ToolPoint(point="call count", earned=False, reason="2 state-changing calls, expected exactly 1")])})
    template = line_of("result", ok)
    measure = Measure(loaded)
    for i in range(n):
        measure.add(ok.model_copy(update={"trajectory_id": f"t{i:07d}"}))
    footer = measure.footer(finished_at=datetime(2026, 12, 1, 0, 5, tzinfo=timezone.utc))
    with path.open("w") as handle:
        handle.write(line_of("header", header))
        for i in range(n):
            handle.write(template.replace('"trajectory_id":"x"', f'"trajectory_id":"t{i:07d}"', 1))
        handle.write(line_of("footer", footer))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--trajectories", type=int, default=1000)
    parser.add_argument("--record-size", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="bench-history-", dir=args.workdir))
    try:
        path = work / "history.sqlite"
        print(f"filling {args.runs} runs x {args.trajectories} trajectories x {len(AXES)} axes ...", flush=True)
        fill_s = fill(path, args.runs, args.trajectories)
        size_mb = sum(p.stat().st_size for p in work.glob("history.sqlite*")) / 1e6
        rows_total = args.runs * args.trajectories * len(AXES)
        print(f"filled in {fill_s:.1f} s; file {size_mb:.1f} MB ({1e6 * size_mb / rows_total:.1f} bytes per row); "
              f"budget {SIZE_BUDGET_MB:.0f} MB: {'met' if size_mb < SIZE_BUDGET_MB else 'MISSED'}")

        timings = []
        for _ in range(args.repeat):
            began = time.perf_counter()
            result = compare_once(path)
            timings.append(time.perf_counter() - began)
        median = statistics.median(timings)
        print(f"compare vs last green (in process): median {median:.3f} s over {args.repeat} "
              f"(min {min(timings):.3f}, max {max(timings):.3f}); baseline {result.baseline_source}; "
              f"flagged {result.flagged}; regressions {result.regressions_total}; "
              f"target < {COMPARE_TARGET_S} s: {'met' if median < COMPARE_TARGET_S else 'MISSED'}")
        newest = f"run-{args.runs - 1:05d}"
        began = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "judgekit", "compare", newest, "--history", str(path)],
                              capture_output=True, text=True)
        command_s = time.perf_counter() - began
        print(f"`judgekit compare {newest} --history H` as a command: {command_s:.3f} s (exit {done.returncode}, "
              "process start and imports included)")

        record = work / "record.jsonl"
        make_record(record, args.record_size)
        from judgekit.run.remeasure import run_rows
        from judgekit.ci.history import History
        from judgekit.run.record import read_run

        with History(work / "record.sqlite") as store:
            began = time.perf_counter()
            store.import_file(record)
            from_file = time.perf_counter() - began
        loaded = read_run(record)
        loaded._rows = run_rows(loaded)  # as run_suite(keep_rows=True) keeps them
        loaded.run_id = loaded._rows.run_id = "record-100k-b"
        with History(work / "record2.sqlite") as store:
            began = time.perf_counter()
            store.record(loaded)
            from_rows = time.perf_counter() - began
        print(f"recording {args.record_size} trajectories: from the record file {from_file:.2f} s (parse included), "
              f"from rows in memory {from_rows:.2f} s; target < {RECORD_TARGET_S} s: "
              f"{'met' if from_file < RECORD_TARGET_S else 'MISSED'}")
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
