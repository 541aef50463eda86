"""Deterministic axes: judgekit against a hand-written floor loop on the same tau-bench records.

    python benchmarks/bench_deterministic.py [--trajectories 10000] [--rounds 5] [--data DIR] [--profile]
                                             [--regex-floor]

Imports ``../shared/data/tau-bench-airline/gpt-4o-airline.even-tasks.json`` into a suite (as
``judgekit import tau-bench`` does) in a temporary folder and replicates its trajectories, ids
made unique, to about ``--trajectories`` of them. Then scores the suite two ways:

- judgekit: ``load_suite`` once, then every trajectory through judgekit's deterministic entry
  point (``judgekit.run.iter_deterministic`` when that exists, else
  ``judgekit.runner.iter_results``): strict JSON, pydantic models, reasons for every point;
- the floor: plain ``json.loads`` per line and the same task-success and tool-correctness rules
  written by hand, with jsonschema validators built once per rubric argument. It normalises
  answers the way judgekit does (``--regex-floor``: with the slower regexes judgekit used
  before, which makes the floor slower and the ratio smaller).

Both must give every trajectory the same scores (asserted before any timing counts). Rounds
alternate (judgekit first, then floor first, ...) and each pass is timed in CPU seconds of this
process; the verdict is the paired median of judgekit / floor per round against the target
ratio (1.3). Not part of the pytest suite.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import re
import statistics
import sys
import tempfile
import time
from datetime import date
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import yaml  # noqa: E402
from jsonschema import Draft202012Validator  # noqa: E402
from scipy.optimize import linear_sum_assignment  # noqa: E402

TARGET_RATIO = 1.3
DEFAULT_DATA = ROOT.parent / "shared" / "data"
SOURCE = Path("tau-bench-airline") / "gpt-4o-airline.even-tasks.json"

Scores = dict[str, tuple[float | None, float | None]]


# --- the suite ---------------------------------------------------------------------------------


def build_suite(source: Path, folder: Path, trajectories: int) -> tuple[Path, int]:
    """Import ``source`` into ``folder`` and replicate each trajectory file's lines, ids rewritten
    to stay unique, so the suite holds about ``trajectories`` runs. (suite path, runs)."""
    from judgekit.importers.tau_bench import import_tau_bench

    import_tau_bench(source, folder, registered=date(2024, 1, 1))
    suite = yaml.safe_load((folder / "suite.yaml").read_text(encoding="utf-8"))
    files = [folder / entry["file"] for entry in suite["trajectories"]]
    originals = {path: [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()] for path in files}
    count = sum(len(lines) for lines in originals.values())
    copies = max(1, round(trajectories / count))
    for path, lines in originals.items():
        out = []
        for copy in range(copies):
            for line in lines:
                record = json.loads(line)
                record["id"] = f"{record['id']}-copy-{copy:05d}"
                out.append(json.dumps(record, ensure_ascii=False, separators=(",", ":")))
        path.write_text("".join(line + "\n" for line in out), encoding="utf-8")
    return folder / "suite.yaml", count * copies


# --- judgekit ----------------------------------------------------------------------------------


def judgekit_entry():
    """(name, function(loaded) -> iterator of TrajectoryResult): ``judgekit.run.iter_deterministic``
    where it exists, else the older ``judgekit.runner.iter_results``."""
    try:
        from judgekit.run import iter_deterministic

        return "judgekit.run.iter_deterministic", iter_deterministic
    except ImportError:
        from judgekit.runner import iter_results  # type: ignore[import-not-found]

        return "judgekit.runner.iter_results", iter_results


def judgekit_scores(loaded, entry) -> Scores:
    scores: Scores = {}
    for result in entry(loaded):
        ts, tc = result.axes.get("task_success"), result.axes.get("tool_correctness")
        scores[result.trajectory_id] = (ts.score if ts else None, tc.score if tc else None)
    return scores


# --- the floor: the same rules, by hand --------------------------------------------------------

_THOUSANDS = re.compile(r",(?<=\d,)(?=\d)")
_THOUSANDS_LOOKBEHIND, _SPACES = re.compile(r"(?<=\d),(?=\d)"), re.compile(r"\s+")


def _normalise(text: str) -> str:
    """Case-folded, thousands separators dropped, whitespace collapsed: the fastest way known
    here, so the ratio shows what judgekit adds, not a slower way of doing the same."""
    return " ".join(_THOUSANDS.sub("", text.casefold()).split())


def _normalise_regex(text: str) -> str:
    """The same rule with the regexes judgekit used before (``--regex-floor``)."""
    return _SPACES.sub(" ", _THOUSANDS_LOOKBEHIND.sub("", text.casefold())).strip()


class FloorRubric:
    """What the floor needs of one rubric, with validators built once."""

    def __init__(self, data: dict[str, Any], normalise=_normalise):
        self.normalise = normalise
        ts, tc = data.get("task_success"), data.get("tool_correctness")
        for key in ("preconditions", "postconditions", "side_effects", "max_latency_s"):
            if ts and ts.get(key):
                raise SystemExit(f"the floor loop does not implement task_success.{key}")
        if tc and (tc.get("ordered") or (tc.get("forbidden") or {}).get("effects")):
            raise SystemExit("the floor loop does not implement ordered calls or forbidden effects")
        self.required = [normalise(str(value)) for value in ts.get("required_outputs", [])] if ts else None
        if tc is None:
            self.expected = None
            return
        self.expected = [
            (call["tool"], [(name, Draft202012Validator(schema)) for name, schema in (call.get("args") or {}).items()])
            for call in tc.get("expected_calls", [])
        ]
        self.in_scope = set(tc["in_scope"]) if tc.get("in_scope") is not None else None
        self.forbidden = set((tc.get("forbidden") or {}).get("tools", []))
        self.max_points = len(self.expected) + sum(len(args) for _, args in self.expected) + 2


def floor_rubrics(suite_path: Path, normalise=_normalise) -> list[tuple[Path, FloorRubric]]:
    """(trajectory file, rubric) for each entry of the suite, read with plain YAML."""
    suite = yaml.safe_load(suite_path.read_text(encoding="utf-8"))
    by_ref = {}
    for path in sorted((suite_path.parent / "rubrics").glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        by_ref[f"{data['id']}@{data['version']}"] = FloorRubric(data, normalise)
    return [(suite_path.parent / entry["file"], by_ref[entry["rubric"]]) for entry in suite["trajectories"]]


def _valid_args(args: list[tuple[str, Any]], call_args: dict[str, Any]) -> int:
    return sum(1 for name, validator in args if name in call_args and validator.is_valid(call_args[name]))


def floor_scores(entries: list[tuple[Path, FloorRubric]]) -> Scores:
    scores: Scores = {}
    for path, rubric in entries:
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                if not line.strip():
                    continue
                record = json.loads(line)
                ts_score = tc_score = None
                if rubric.required is not None:
                    output = rubric.normalise(record.get("output", ""))
                    ts_score = 1.0 if all(value in output for value in rubric.required) else 0.0
                if rubric.expected is not None:
                    succeeded = [call for call in record.get("calls", []) if call.get("error") is None]
                    in_scope = [c for c in succeeded if rubric.in_scope is None or c["tool"] in rubric.in_scope]
                    matrix = np.array(
                        [[1 + _valid_args(args, c.get("args", {})) if c["tool"] == tool else 0 for c in in_scope]
                         for tool, args in rubric.expected],
                        dtype=np.int64,
                    ).reshape(len(rubric.expected), len(in_scope))
                    rows, cols = linear_sum_assignment(matrix, maximize=True)
                    points = int(sum(matrix[r, c] for r, c in zip(rows, cols) if matrix[r, c] > 0))
                    points += len(in_scope) == len(rubric.expected)
                    points += not any(c["tool"] in rubric.forbidden for c in succeeded)
                    tc_score = points / rubric.max_points
                scores[record["id"]] = (ts_score, tc_score)
    return scores


# --- timing ------------------------------------------------------------------------------------


def cpu_seconds(fn) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trajectories", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the shared data folder (default ../shared/data)")
    parser.add_argument("--profile", action="store_true", help="also profile one judgekit pass (cProfile, top items)")
    parser.add_argument("--regex-floor", action="store_true",
                        help="also time a floor that normalises answers with the regexes judgekit used before "
                        "(a slower floor, as the issue's seems to have been); the verdict stays on the main floor")
    args = parser.parse_args()

    source = args.data / SOURCE
    if not source.is_file():
        print(f"bench_deterministic: {source} not found: this benchmark needs the tau-bench airline "
              "trajectories from the shared data folder (pass --data DIR)", file=sys.stderr)
        return 2

    from judgekit.suite import load_suite

    name, entry = judgekit_entry()
    with tempfile.TemporaryDirectory(prefix="bench-deterministic-") as tmp:
        suite_path, count = build_suite(source, Path(tmp), args.trajectories)
        loaded = load_suite(suite_path)
        floors = {"floor": floor_rubrics(suite_path)}
        if args.regex_floor:
            floors["regex floor"] = floor_rubrics(suite_path, _normalise_regex)
        print(f"{count} trajectories ({sum(p.stat().st_size for p, _ in floors['floor']) / 2**20:.0f} MiB of JSON "
              f"Lines), {len(floors['floor'])} rubrics; judgekit side: {name}")

        # Same scores first, or the timing means nothing (this pass also warms every side).
        ours = judgekit_scores(loaded, entry)
        if len(ours) != count:
            print(f"FAIL: judgekit scored {len(ours)} trajectories, expected {count}", file=sys.stderr)
            return 1
        for label, entries in floors.items():
            theirs = floor_scores(entries)
            if ours != theirs:
                differ = sorted(tid for tid in ours.keys() | theirs.keys() if ours.get(tid) != theirs.get(tid))
                print(f"FAIL: judgekit and the {label} differ on {len(differ)} trajectories, e.g. {differ[0]}: "
                      f"judgekit {ours.get(differ[0])}, {label} {theirs.get(differ[0])}", file=sys.stderr)
                return 1
        print(f"scores identical on all {count} trajectories "
              f"({sum(ts == 1.0 for ts, _ in ours.values())} pass task success)")

        sides = {"judgekit": lambda: judgekit_scores(loaded, entry)}
        sides.update({label: (lambda entries=entries: floor_scores(entries)) for label, entries in floors.items()})
        names = list(sides)
        times: dict[str, list[float]] = {side: [] for side in names}
        for rnd in range(args.rounds):
            order = names if rnd % 2 == 0 else names[::-1]  # alternate who goes first
            for side in order:
                times[side].append(cpu_seconds(sides[side]))
            print(f"round {rnd + 1}: " + ", ".join(f"{side} {times[side][-1]:.2f} CPU-s" for side in names))

        for side in names:
            rates = [count / t for t in times[side]]
            print(f"{side:>11}: {statistics.median(rates):,.0f} trajectories per CPU-second "
                  f"(median of {args.rounds}; {min(rates):,.0f}-{max(rates):,.0f})")
        ratios = {}
        for label in floors:
            paired = [j / f for j, f in zip(times["judgekit"], times[label])]
            ratios[label] = statistics.median(paired)
            print(f"      ratio: judgekit / {label} = {ratios[label]:.2f} "
                  f"(paired median; rounds {', '.join(f'{r:.2f}' for r in paired)})")
        if args.profile:
            profiler = cProfile.Profile()
            profiler.runcall(sides["judgekit"])
            pstats.Stats(profiler).sort_stats("tottime").print_stats(20)
        ratio = ratios["floor"]
        verdict = "MEETS" if ratio <= TARGET_RATIO else "MISSES"
        print(f"verdict: {verdict} the target: judgekit is {ratio:.2f}x the hand-written floor (target <= {TARGET_RATIO}x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
