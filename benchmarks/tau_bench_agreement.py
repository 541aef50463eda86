"""Agreement of judgekit's deterministic axes with tau-bench's own outcome labels.

    python benchmarks/tau_bench_agreement.py [DATA] [--min-agree N]

DATA is the folder holding ``gpt-4o-airline.even-tasks.json`` (or that file itself); default
``../shared/data/tau-bench-airline`` next to the repository. The runs are imported as
``judgekit import tau-bench`` does (into a temporary folder), the suite is scored, and a run
counts as a success when tool correctness is 1.0 and task success passed -- one rule for every
task, no task id special-cased. tau-bench's ``reward`` is read only to compare.

Prints the 2x2 confusion matrix and, for every disagreement, the points the run lost and the
task checks it failed. Exit 1 when fewer than ``--min-agree`` runs agree. Not part of pytest.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from judgekit.errors import JudgekitError  # noqa: E402
from judgekit.importers.tau_bench import import_tau_bench  # noqa: E402
from judgekit.results import TrajectoryResult  # noqa: E402
from judgekit.run.plan import check_registration, iter_deterministic  # noqa: E402
from judgekit.suite import load_suite  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "tau-bench-airline"
SOURCE = "gpt-4o-airline.even-tasks.json"


def predicted_success(result: TrajectoryResult) -> bool:
    """Tool correctness 1.0, and task success passed where the task names outputs (a task
    without outputs has no task-success axis: the import leaves it out rather than pass it
    with nothing checked). The rule of tests/test_tau_bench.py."""
    tool, task = result.axes.get("tool_correctness"), result.axes.get("task_success")
    task_ok = task is None or (task.status == "scored" and task.passed)
    return bool(tool and tool.status == "scored" and tool.score == 1.0 and task_ok)


def score(src: Path) -> list[TrajectoryResult]:
    with tempfile.TemporaryDirectory(prefix="tau-bench-") as out:
        import_tau_bench(src, Path(out))
        loaded = load_suite(Path(out))
        check_registration(loaded)
        return list(iter_deterministic(loaded))


def explain(result: TrajectoryResult) -> list[str]:
    lines = []
    tool = result.axes.get("tool_correctness")
    if tool is not None and tool.status == "scored":
        lines.append(f"    tool_correctness {tool.points}/{tool.max_points}")
        lines += [f"      lost {item.point}: {item.reason}" for item in tool.lost]
    elif tool is not None:
        lines.append(f"    tool_correctness error: {tool.error}")
    task = result.axes.get("task_success")
    if task is not None and task.status == "scored":
        lines.append(f"    task_success {'passed' if task.passed else 'failed'}")
        lines += [f"      failed {c.check}: {c.reason}" for c in task.checks if not c.passed]
    elif task is not None:
        lines.append(f"    task_success error: {task.error}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", nargs="?", type=Path, default=DEFAULT_DATA, help=f"default: {DEFAULT_DATA}")
    parser.add_argument("--min-agree", type=int, default=95, help="exit 1 below this many agreeing runs")
    args = parser.parse_args(argv)
    src = args.data / SOURCE if args.data.is_dir() else args.data
    try:
        results = score(src)
    except JudgekitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    matrix = Counter((predicted_success(r), r.metadata.get("reward") == 1.0) for r in results)
    agree = matrix[(True, True)] + matrix[(False, False)]
    print(f"{src.name}: {len(results)} runs; judgekit (rows) vs tau-bench reward (columns)")
    print(f"{'':>16}{'reward 1':>10}{'reward 0':>10}")
    print(f"{'judgekit pass':>16}{matrix[(True, True)]:>10}{matrix[(True, False)]:>10}")
    print(f"{'judgekit fail':>16}{matrix[(False, True)]:>10}{matrix[(False, False)]:>10}")
    print(f"agreement: {agree}/{len(results)} ({agree / max(len(results), 1):.0%})")
    disagreements = [r for r in results if predicted_success(r) != (r.metadata.get("reward") == 1.0)]
    if disagreements:
        print("\ndisagreements:")
    for result in disagreements:
        verdict = "pass" if predicted_success(result) else "fail"
        print(f"  {result.trajectory_id}: judgekit {verdict}, tau-bench reward {result.metadata.get('reward')}")
        for line in explain(result):
            print(line)
    return 0 if agree >= args.min_agree else 1


if __name__ == "__main__":
    sys.exit(main())
