"""An all-cached rerun: how fast judgekit serves stored faithfulness verdicts, beyond the
deterministic work of the same run.

    python benchmarks/bench_cached_rerun.py [--trajectories 4000] [--rounds 5] [--no-profile]
                                            [--profile-lines 25] [--workdir DIR] [--keep]
                                            [--context-chars N] [--rendered]

The suite of ``bench_run_judged.py`` (small unique trajectories; tool correctness scored here,
faithfulness asked of ``openai/judge-2024-08-06`` at a ``judgekit.testing.ScriptedOpenAIServer``
that answers with valid answers), at 4,000 trajectories:

1. a first run, ``judgekit run SUITE --format jsonl --cache-dir DIR``, fills the verdict cache
   (4,000 calls, asserted);
2. the server is stopped: from here on no call can succeed (the judge's ``api_base`` names a
   closed port, and the cache key includes it, so the rerun asks exactly the cached questions);
3. rounds, alternating which goes first: each a fresh ``python`` subprocess that imports
   ``judgekit.run`` and then times ``run_suite(SUITE, options=RunOptions(cache_dir=DIR),
   keep_results=False)`` (the cached rerun) or ``run_suite(SUITE_DETERMINISTIC,
   options=RunOptions(use_cache=False), keep_results=False)`` (the same trajectories under the
   same rubric without its faithfulness section: the deterministic work alone). The subprocess
   asserts the rerun made 0 calls, had 4,000 cache hits, and that ``"litellm" not in
   sys.modules`` afterwards, and prints it;
4. verdicts/s beyond the deterministic work = 4000 / (t_cached - t_deterministic), wall time
   inside the subprocess, per round; the median over rounds is the figure and the verdict
   (target >= 5,000 verdicts/s). The same from CPU time (``process_time``, all threads) is
   printed beside it: on a shared machine it moves less than wall time;
``--context-chars N`` gives each trajectory a context text of about N characters (long
prompts, as real runs have). ``--rendered`` adds a third side to every round: the cached rerun
on a copy of the cache without its fingerprint entries, so that every prompt is rendered and
hashed to find its key, as before the memo (the copy is made before the timing starts, fresh
each round, since that run learns the fingerprints again).

5. the cached rerun is profiled once, and the deterministic run once the same way (cProfile in
   every thread: ``run_suite`` plans windows on a worker thread via ``asyncio.to_thread``):
   the cached rerun's top ``--profile-lines`` by cumulative and by own time, then the functions
   that took most extra time in the cached rerun than in the deterministic run (where the
   cached verdicts' own cost goes), whatever the verdict.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_run_judged import CountingJudge, ledger_of, write_suites
from bench_run_memory import judgekit_command

TARGET_VERDICTS_PER_S = 5000.0
DEFAULT_TRAJECTORIES = 4000

# One timed run in a fresh interpreter. argv: mode (cached|deterministic), suite, cache dir,
# expected trajectories, profile path ("" for none), profile lines.
RUN_SCRIPT = r"""
import json, sys, time
mode, suite, cache_dir, expected, profile_path, lines = sys.argv[1:7]
expected, lines = int(expected), int(lines)
from pathlib import Path
from judgekit.run import RunOptions, run_suite
from judgekit.runtime import init

init(tune_gc=True)  # the process set-up `judgekit run` does, in both modes
options = RunOptions(cache_dir=Path(cache_dir)) if mode == "cached" else RunOptions(use_cache=False)
profiles = []
if profile_path:
    import cProfile, threading

    def start_profiling(frame, event, arg):  # the first event of each new thread
        profile = cProfile.Profile()
        profiles.append((threading.current_thread().name, profile))
        profile.enable()  # replaces this hook for the thread

    threading.setprofile(start_profiling)
    main_profile = cProfile.Profile()
    profiles.append(("MainThread", main_profile))
    main_profile.enable()
modules_before = set(sys.modules)
wall0, cpu0 = time.perf_counter(), time.process_time()
record = run_suite(suite, options=options, keep_results=False)
wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
imported = sorted(set(sys.modules) - modules_before)
if profile_path:
    main_profile.disable()
    threading.setprofile(None)
    import io, pstats
    out = io.StringIO()
    waits = ("poll' of 'select.epoll", "get' of '_queue.SimpleQueue", "acquire' of '_thread.lock")
    for name, profile in profiles:
        profile.create_stats()
        total = sum(entry[2] for entry in profile.stats.values())
        waited = sum(entry[2] for key, entry in profile.stats.items() if any(w in key[2] for w in waits))
        print(f"thread {name}: {len(profile.stats)} functions, {total:.3f} s own time of which "
              f"{waited:.3f} s waiting (epoll, queue, lock)", file=out)
    packages = sorted({name.split(".")[0] for name in imported})
    print(f"modules first imported during the timed run: {len(imported)} (packages: {', '.join(packages)})", file=out)
    merged = pstats.Stats(*[p for _, p in profiles if p.stats], stream=out)
    merged.dump_stats(profile_path + ".pstats")
    merged.strip_dirs()
    for order in ("cumulative", "tottime"):
        print(f"\n=== {mode} run, all threads merged, top {lines} by {order} ===", file=out)
        merged.sort_stats(order).print_stats(lines)
    Path(profile_path).write_text(out.getvalue())
litellm_loaded = "litellm" in sys.modules
ledger = record.ledger
faith = record.summary.get("faithfulness")
report = {
    "mode": mode, "wall_s": wall, "cpu_s": cpu, "trajectories": record.trajectories,
    "calls": ledger.calls if ledger else None, "cache_hits": ledger.cache_hits if ledger else None,
    "faithfulness_scored": faith.scored if faith else 0, "litellm_in_sys_modules": litellm_loaded,
    "modules_imported": len(imported),
}
print(json.dumps(report))
assert record.trajectories == expected, f"{record.trajectories} results, expected {expected}"
if mode == "cached":
    assert ledger is not None and ledger.calls == 0, f"the cached rerun made {ledger and ledger.calls} call(s)"
    assert ledger.cache_hits == expected, f"{ledger.cache_hits} cache hits, expected {expected}"
    assert faith is not None and faith.scored == expected, f"faithfulness scored {faith and faith.scored}"
    assert not litellm_loaded, "litellm was imported by an all-cached rerun"
else:
    assert ledger is None and faith is None, "the deterministic suite asked a judge"
"""


def timed(mode: str, suite: Path, cache: Path, expected: int, *, profile: Path | None = None,
          lines: int = 25) -> dict:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    command = [sys.executable, "-c", RUN_SCRIPT, mode, str(suite), str(cache), str(expected), str(profile or ""),
               str(lines)]
    done = subprocess.run(command, check=False, capture_output=True, text=True, env=env, timeout=600)
    report = None
    for line in done.stdout.splitlines():
        if line.startswith("{"):
            report = json.loads(line)
    if done.returncode != 0 or report is None:
        raise AssertionError(f"{mode} run failed ({done.returncode}): {report}\n{done.stderr.strip()[-3000:]}")
    return report


def without_fingerprints(cache: Path, copy: Path) -> Path:
    """A fresh copy of ``cache`` without its fingerprint entries: a rerun on it renders every prompt."""
    import sqlite3

    from judgekit.cache.store import FINGERPRINT_PREFIX

    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(cache, copy)
    with sqlite3.connect(copy / "cache.db") as conn:
        conn.execute("DELETE FROM Cache WHERE substr(key, 1, ?) = ?", (len(FINGERPRINT_PREFIX), FINGERPRINT_PREFIX))
    conn.close()
    return copy


def _where(key: tuple[str, int, str]) -> str:
    filename, line, name = key
    if filename == "~":
        return name  # a built-in
    parts = Path(filename).parts
    return f"{'/'.join(parts[-2:])}:{line}({name})"


def profile_difference(cached: Path, deterministic: Path, lines: int) -> str:
    """Functions by how much more time they took in the cached rerun than in the deterministic
    run (both profiled the same way): where the cached verdicts' own time goes."""
    import pstats

    a, b = pstats.Stats(str(cached)).stats, pstats.Stats(str(deterministic)).stats
    rows = []
    for key in a.keys() | b.keys():
        _, nc_a, tt_a, ct_a, _ = a.get(key, (0, 0, 0.0, 0.0, {}))
        _, nc_b, tt_b, ct_b, _ = b.get(key, (0, 0, 0.0, 0.0, {}))
        rows.append((key, nc_a, nc_b, tt_a - tt_b, ct_a - ct_b))
    waits = ("select.epoll", "_queue.SimpleQueue", "_thread.lock")
    rows = [row for row in rows if not any(w in row[0][2] for w in waits)]
    out = []
    for label, index in (("cumulative", 4), ("own (tottime)", 3)):
        out.append(f"\n=== cached rerun minus deterministic run: top {lines} by extra {label} time "
                   f"(waits on epoll/queue/lock left out) ===")
        out.append(f"{'calls cached':>12} {'calls det':>10} {'+tottime s':>10} {'+cumtime s':>10}  function")
        for key, nc_a, nc_b, dtt, dct in sorted(rows, key=lambda row: row[index], reverse=True)[:lines]:
            out.append(f"{nc_a:>12} {nc_b:>10} {dtt:>10.3f} {dct:>10.3f}  {_where(key)}")
    return "\n".join(out)


def main() -> int:
    from judgekit.testing import ScriptedOpenAIServer

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trajectories", type=int, default=DEFAULT_TRAJECTORIES)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-profile", action="store_true")
    parser.add_argument("--profile-lines", type=int, default=25)
    parser.add_argument("--workdir", type=Path, help="scratch folder (default: a new one in TMPDIR)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")
    parser.add_argument("--context-chars", type=int, default=0, help="a context text of about N characters per trajectory")
    parser.add_argument("--rendered", action="store_true",
                        help="also time the rerun on a copy of the cache without its fingerprint entries")
    args = parser.parse_args()
    count = args.trajectories
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")

    work = args.workdir or Path(tempfile.mkdtemp(prefix="judgekit-bench-cached-"))
    cache = work / "cache"
    try:
        judge = CountingJudge()
        stop = threading.Event()
        with ScriptedOpenAIServer(judge) as server:
            judge.forget_requests(server, stop)
            suite, deterministic = write_suites(work / "suite", count, server.base_url, context_chars=args.context_chars)
            started = time.monotonic()
            command = [*judgekit_command(), "run", str(suite), "--format", "jsonl", "--cache-dir", str(cache)]
            first = subprocess.run(command, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                   env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
            stop.set()
            url = server.base_url
        # Out of the ``with``: the server is stopped, its port closed; no call can succeed now.
        if first.returncode != 0:
            raise AssertionError(f"first run exited {first.returncode}: {first.stderr.strip()[-2000:]}")
        calls, hits, unscored = ledger_of(first.stderr)
        assert calls == count == judge.calls and hits == 0 and unscored == "none", (calls, hits, unscored, judge.calls)
        print(f"first run (fills the cache): {count:,} calls in {time.monotonic() - started:.1f} s; "
              f"server at {url} now stopped", flush=True)

        cached_s, deterministic_s, rates, cpu_rates, rendered_rates = [], [], [], [], []
        sides = ("cached", "deterministic", "rendered") if args.rendered else ("cached", "deterministic")
        for round_no in range(args.rounds):
            order = sides if round_no % 2 == 0 else sides[::-1]
            got = {}
            for mode in order:
                if mode == "rendered":
                    got[mode] = timed("cached", suite, without_fingerprints(cache, work / "cache-rendered"), count)
                else:
                    got[mode] = timed(mode, suite if mode == "cached" else deterministic, cache, count)
            if args.rendered:
                beyond_rendered = got["rendered"]["wall_s"] - got["deterministic"]["wall_s"]
                rendered_rates.append(count / beyond_rendered if beyond_rendered > 0 else float("inf"))
                print(f"round {round_no + 1}: rendered rerun (no fingerprints) {got['rendered']['wall_s']:.3f} s -> "
                      f"{rendered_rates[-1]:,.0f} verdicts/s beyond the deterministic work", flush=True)
            c, d = got["cached"]["wall_s"], got["deterministic"]["wall_s"]
            cached_s.append(c)
            deterministic_s.append(d)
            beyond = c - d
            rate = count / beyond if beyond > 0 else float("inf")
            rates.append(rate)
            cpu_beyond = got["cached"]["cpu_s"] - got["deterministic"]["cpu_s"]
            cpu_rates.append(count / cpu_beyond if cpu_beyond > 0 else float("inf"))
            print(f"round {round_no + 1} ({order[0]} first): cached rerun {c:.3f} s (cpu "
                  f"{got['cached']['cpu_s']:.3f}), deterministic {d:.3f} s (cpu {got['deterministic']['cpu_s']:.3f}), "
                  f"beyond {beyond * 1000:.0f} ms -> {rate:,.0f} verdicts/s; calls {got['cached']['calls']}, "
                  f"hits {got['cached']['cache_hits']}, \"litellm\" in sys.modules: "
                  f"{got['cached']['litellm_in_sys_modules']}; modules imported in the timed run: cached "
                  f"{got['cached']['modules_imported']}, deterministic {got['deterministic']['modules_imported']}",
                  flush=True)
        median_rate = statistics.median(rates)
        print(f"\nmedians over {args.rounds} rounds: cached rerun {statistics.median(cached_s):.3f} s, "
              f"deterministic {statistics.median(deterministic_s):.3f} s; per-round rates "
              f"{', '.join(f'{r:,.0f}' for r in rates)}; median {median_rate:,.0f} verdicts/s beyond "
              f"the deterministic work ({statistics.median(cached_s) / count * 1e6:.0f} us per trajectory "
              f"all in, {(statistics.median(cached_s) - statistics.median(deterministic_s)) / count * 1e6:.0f} us "
              f"per cached verdict)")
        print(f"by CPU time (process_time, all threads; steadier on a shared machine): per-round rates "
              f"{', '.join(f'{r:,.0f}' for r in cpu_rates)}; median {statistics.median(cpu_rates):,.0f} verdicts/s "
              f"per CPU-second beyond the deterministic work")

        if args.rendered:
            paired = [r / x for r, x in zip(rates, rendered_rates)]
            print(f"with fingerprints / rendered: {statistics.median(paired):.2f}x the verdicts/s (paired median; "
                  f"rounds {', '.join(f'{x:.2f}' for x in paired)}); rendered median "
                  f"{statistics.median(rendered_rates):,.0f} verdicts/s")

        if not args.no_profile:
            profile, baseline = work / "profile-cached.txt", work / "profile-deterministic.txt"
            report = timed("cached", suite, cache, count, profile=profile, lines=args.profile_lines)
            base = timed("deterministic", deterministic, cache, count, profile=baseline, lines=args.profile_lines)
            print(f"\nprofile of one cached rerun (cProfile on in every thread; {report['wall_s']:.3f} s wall under "
                  f"the profiler, deterministic run {base['wall_s']:.3f} s; calls {report['calls']}, "
                  f"\"litellm\" in sys.modules: {report['litellm_in_sys_modules']}):")
            print(profile.read_text())
            print(profile_difference(Path(f"{profile}.pstats"), Path(f"{baseline}.pstats"), args.profile_lines))
    finally:
        if not args.keep and args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)

    verdict = "PASS" if median_rate >= TARGET_VERDICTS_PER_S else "MISS"
    print(f"{verdict} (>= {TARGET_VERDICTS_PER_S:,.0f} verdicts/s beyond the deterministic work, all cached, 0 calls, "
          f"no litellm): median {median_rate:,.0f} verdicts/s over {args.rounds} paired rounds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
