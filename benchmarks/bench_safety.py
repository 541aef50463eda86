"""The deterministic safety signals against the deterministic axes, on the same tau-bench records.

    python benchmarks/bench_safety.py [--trajectories 100000] [--rounds 3] [--data DIR]

Imports ``../shared/data/tau-bench-airline/gpt-4o-airline.even-tasks.json`` into a suite, adds
a ``safety:`` section (tools classified from ``airline_tools.json``) and replicates the
trajectories, ids made unique, to about ``--trajectories`` (as ``bench_deterministic.py``
does). Then, in alternating rounds (axes first, then signals first, ...), times in CPU seconds:

- the deterministic axes alone: every trajectory through ``judgekit.run.iter_deterministic``;
- the deterministic signals: ``judgekit.safety.scan.scan_suite`` (reading, parsing and
  diffing included, as the axes' pass does).

Target (issue 15): signals at no less than half the speed of the axes, i.e. the paired median
of signals / axes CPU time <= 2.0. Memory: the peak RSS of a scan of a fifth of the suite and
of the whole, each in a fresh process, should match (flat) but for the findings it keeps.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import yaml  # noqa: E402

from bench_deterministic import build_suite  # noqa: E402

TARGET_RATIO = 2.0
DEFAULT_DATA = ROOT.parent / "shared" / "data"


def add_policy(suite_path: Path, tools_file: Path) -> None:
    from judgekit.safety.classify import draft_tool_classes

    suite = yaml.safe_load(suite_path.read_text(encoding="utf-8"))
    suite["safety"] = {"owner": "bench@example.com", "tools": draft_tool_classes(json.loads(tools_file.read_text())),
                       "allowed": {"tools": ["transfer_to_human_agents"]}}
    suite_path.write_text(yaml.safe_dump(suite), encoding="utf-8")


def cpu(fn) -> tuple[float, object]:
    started = time.process_time()
    value = fn()
    return time.process_time() - started, value


def axes_pass(suite_path: Path) -> int:
    from judgekit.run import iter_deterministic
    from judgekit.suite import load_suite

    return sum(1 for _ in iter_deterministic(load_suite(suite_path)))


def signals_pass(suite_path: Path):
    from judgekit.safety.scan import scan_suite
    from judgekit.suite import load_suite

    return scan_suite(load_suite(suite_path), today=date(2026, 12, 1), allow_dirty=True)


def peak_rss_mb(suite_path: Path) -> float:
    code = ("import sys, resource; sys.path.insert(0, sys.argv[2]); from datetime import date; "
            "from judgekit.safety.scan import scan_suite; from judgekit.suite import load_suite; "
            "scan_suite(load_suite(sys.argv[1]), today=date(2026, 12, 1), allow_dirty=True); "
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)")
    done = subprocess.run([sys.executable, "-c", code, str(suite_path), str(ROOT)], capture_output=True, text=True,
                          check=True)
    return float(done.stdout.strip())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trajectories", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args()
    source = args.data / "tau-bench-airline" / "gpt-4o-airline.even-tasks.json"
    tools = args.data / "tau-bench-airline" / "airline_tools.json"
    with tempfile.TemporaryDirectory(prefix="bench-safety-") as folder:
        whole, count = build_suite(source, Path(folder) / "whole", args.trajectories)
        add_policy(whole, tools)
        fifth, fifth_count = build_suite(source, Path(folder) / "fifth", args.trajectories // 5)
        add_policy(fifth, tools)
        ratios = []
        for round_ in range(args.rounds):
            order = ("axes", "signals") if round_ % 2 == 0 else ("signals", "axes")
            times = {}
            for name in order:
                times[name], value = cpu(lambda: axes_pass(whole) if name == "axes" else signals_pass(whole))
                if name == "signals":
                    assert value.trajectories == count
                    findings = len(value.findings)
            ratios.append(times["signals"] / times["axes"])
            print(f"round {round_ + 1} ({' then '.join(order)}): axes {times['axes']:.1f} s, signals "
                  f"{times['signals']:.1f} s CPU over {count} trajectories ({findings} findings): "
                  f"ratio {ratios[-1]:.2f}")
        median = statistics.median(ratios)
        small, large = peak_rss_mb(fifth), peak_rss_mb(whole)
        print(f"peak RSS: {small:.0f} MB for {fifth_count} trajectories, {large:.0f} MB for {count}")
        verdict = "meets" if median <= TARGET_RATIO else "misses"
        print(f"paired median signals / axes: {median:.2f} ({verdict} the target <= {TARGET_RATIO}: at least half "
              "the speed)")
        return 0 if median <= TARGET_RATIO else 1


if __name__ == "__main__":
    raise SystemExit(main())
