"""How fast `judgekit --help` starts (target: median < 0.3 s), and which imports cost the most.

Runs the installed console script 10 times in fresh processes and reports the median wall
time. When the target is missed, it runs ``python -X importtime -c "import judgekit.cli"`` and
prints the imports with the largest cumulative time, so the slow one can be made lazy.

    python benchmarks/bench_cli_startup.py [--runs 10] [--top 15] [--importtime]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

TARGET_S = 0.3


def time_command(command: list[str], runs: int, expect: str = "") -> list[float]:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        proc = subprocess.run(command, capture_output=True, text=True, timeout=120)
        times.append(time.perf_counter() - started)
        assert proc.returncode == 0, proc.stderr
        assert expect in proc.stdout
    return times


def import_times(module: str, top: int) -> tuple[list[tuple[int, int, str]], int]:
    """(cumulative us, self us, module) of the costliest imports, and the total."""
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONDONTWRITEBYTECODE": "1"}
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", f"import {module}"],
                          capture_output=True, text=True, timeout=120, env=env)
    rows = []
    for line in proc.stderr.splitlines():
        match = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)", line)
        if match:
            rows.append((int(match.group(2)), int(match.group(1)), len(match.group(3)), match.group(4)))
    total = sum(cumulative for cumulative, _, depth, _ in rows if depth == 1)
    top_level = sorted(((c, s, m) for c, s, d, m in rows if d <= 3), reverse=True)[:top]
    return top_level, total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--importtime", action="store_true", help="show the import breakdown even when fast")
    args = parser.parse_args(argv)

    script = shutil.which("judgekit")
    command = [script, "--help"] if script else [sys.executable, "-m", "judgekit.cli", "--help"]
    time_command(command, 1, "Usage:")  # warm the OS file cache
    times = time_command(command, args.runs, "Usage:")
    median = statistics.median(times)
    baseline = statistics.median(time_command([sys.executable, "-c", "pass"], args.runs))
    ok = median < TARGET_S
    print(f"`{' '.join(os.path.basename(c) for c in command)}`: median {median:.3f}s over {args.runs} runs "
          f"(min {min(times):.3f}s, max {max(times):.3f}s); target < {TARGET_S}s: {'OK' if ok else 'MISSED'}")
    print(f"bare interpreter start (python -c pass): median {baseline:.3f}s")
    if not ok or args.importtime:
        rows, total = import_times("judgekit.cli", args.top)
        print(f"\npython -X importtime -c 'import judgekit.cli': {total / 1e6:.3f}s of imports; costliest "
              "(cumulative, nested up to 3 levels):")
        for cumulative, own, module in rows:
            print(f"  {cumulative / 1000:8.1f} ms cumulative {own / 1000:7.1f} ms self  {module}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
