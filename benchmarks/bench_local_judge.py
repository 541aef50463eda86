"""The README's main command with the embedded judge: wall time and valid-verdict rate.

Runs ``judgekit run examples/email-update --out run.json`` as a new user would (a subprocess,
no keys, a fresh copy of the example in a temporary folder each round, so no verdict comes
from a cache), and reports per round and as the median of the rounds:

    wall time of the whole command (interpreter start, imports, model load, judging, report),
    the valid-verdict rate of its faithfulness questions (scored / judged),
    the load average of the machine before the round (the cores may be shared).

Target (issue 14): median wall under 30 s on two cores and at least 90% valid verdicts.

    python benchmarks/bench_local_judge.py [--rounds 3] [--env NAME=VALUE ...] [--env-b NAME=VALUE ...]

``--env-b`` runs a second configuration in paired alternation with the first (A, B, A, B, ...),
to compare one lever at a time on a machine whose load drifts (e.g. ``--env-b
JUDGEKIT_LOCAL_PROMPT_THREADS=1``).
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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from judgekit.run.record import read_run  # noqa: E402  (the record reader; not part of what is timed)
COMMAND = ["run", "examples/email-update", "--out", "run.json"]


def one_round(extra_env: dict[str, str]) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-local-judge-") as folder:
        work = Path(folder)
        for part in ("examples", "rubrics", "calibration"):
            shutil.copytree(ROOT / part, work / part)
        env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", **extra_env}
        load = os.getloadavg()[0]
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "judgekit", *COMMAND], cwd=work, env=env,
                              capture_output=True, text=True, timeout=900)
        wall = time.monotonic() - started
        if done.returncode not in (0, 1):
            raise SystemExit(f"judgekit run failed ({done.returncode}):\n{done.stderr[-3000:]}")
        results = read_run(work / "run.json").model_dump(mode="json")["results"]
        faithfulness = [r["axes"]["faithfulness"] for r in results if "faithfulness" in r["axes"]]
        scored = sum(1 for axis in faithfulness if axis.get("status") == "scored")
        return {"wall_s": wall, "scored": scored, "judged": len(faithfulness), "load": load}


def parse_env(pairs: list[str]) -> dict[str, str]:
    return dict(pair.split("=", 1) for pair in pairs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--env", action="append", default=[], help="NAME=VALUE for configuration A")
    parser.add_argument("--env-b", action="append", default=None, help="NAME=VALUE for configuration B")
    args = parser.parse_args()
    configs = {"A": parse_env(args.env)}
    if args.env_b is not None:
        configs["B"] = parse_env(args.env_b)
    rounds: dict[str, list[dict]] = {name: [] for name in configs}
    for index in range(args.rounds):
        for name, env in configs.items():
            result = one_round(env)
            rounds[name].append(result)
            print(f"round {index + 1} {name}: {result['wall_s']:.1f} s, {result['scored']}/{result['judged']} valid, "
                  f"load {result['load']:.2f}", flush=True)
    for name, results in rounds.items():
        wall = statistics.median(r["wall_s"] for r in results)
        valid = sum(r["scored"] for r in results) / max(1, sum(r["judged"] for r in results))
        load = statistics.median(r["load"] for r in results)
        label = " ".join(f"{k}={v}" for k, v in configs[name].items()) or "defaults"
        verdict = "meets" if wall < 30 and valid >= 0.9 else "misses"
        print(f"{name} ({label}): median wall {wall:.1f} s over {len(results)} rounds, valid {valid:.0%}, "
              f"median load {load:.2f} on {os.cpu_count()} cores: {verdict} the target (< 30 s, >= 90%)")


if __name__ == "__main__":
    main()
