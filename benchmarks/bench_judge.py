"""Judge-runner overhead: judgekit's JudgeRunner against a bare litellm.acompletion loop.

Both send the SAME 400 requests (same messages, same response_format, same parameters) at
concurrency 32 to a scripted OpenAI server in another process (no shared GIL) that answers
after 100 ms. The bare loop is handed the rendered messages; judgekit's timing includes
everything it adds: rendering the 400 prompts from their trajectories, cache keys, a fresh
on-disk verdict cache (every verdict is a call and a durable write), schema validation, retries,
provenance, a ledger. The runs alternate (bare, judgekit, bare, ...) and medians are reported:

    wall time of each, the ratio (target: judgekit <= 1.10 x bare),
    judgekit's own CPU per verdict beyond litellm's: (cpu_judgekit - cpu_bare) / 400 (target < 1.5 ms),
    the ideal wall time 400 * 0.1 / 32 s.

When a target is missed, one judgekit run is profiled with cProfile and the functions where
judgekit's own time goes are printed.

    python benchmarks/bench_judge.py [--verdicts 400] [--concurrency 32] [--latency 0.1] [--rounds 11]
                                     [--model PIN] [--one-core] [--control] [--profile]

``--one-core`` is a diagnostic, not the target's setting: it pins this process to CPU 0 and the
server to CPU 1 (Linux), so whatever judgekit does off the event loop (its cache writer thread,
SQLite, hashing) can no longer hide on the second core. Round-to-round noise is also smaller.
``--control`` runs the bare loop twice per round and reports the second against the first: how
far apart two identical runs land here, to read the judgekit ratio against.
"""

from __future__ import annotations

import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # before litellm is imported: no network

import argparse
import asyncio
import cProfile
import io
import json
import pstats
import statistics
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

from judgekit.cache.store import VerdictCache
from judgekit.judge.target import JudgeTarget
from judgekit.run.jobs import JudgeJob, response_format
from judgekit.run.judging import JudgeRunner
from judgekit.judge.spec import JudgeSpec
from judgekit.axes.faithfulness import faithfulness_sections
from judgekit.prompt import build_prompt
from judgekit.rubric.model import FaithfulnessCriteria, Rubric
from judgekit.testing import Reply, ScriptedOpenAIServer
from judgekit.trajectory import Trajectory

MODEL = "openai/judge-2024-08-06"
RATIO_TARGET = 1.10
CPU_TARGET_MS = 1.5
ANSWER = {"claims": [{"claim": "the account has seats", "supported": False, "evidence": []}]}


def trajectory(i: int) -> Trajectory:
    return Trajectory.model_validate({
        "id": f"bench-{i}",
        "prompt": f"How many seats and which plan does account {i} have?",
        "calls": [
            {"tool": "get_account", "args": {"id": i}, "result": {"id": i, "seats": i % 17, "plan": "pro"}},
            {"tool": "list_invoices", "args": {"account": i}, "result": [{"n": k, "usd": 10 * k} for k in range(3)]},
        ],
        "context": {"policy": "Accounts on pro pay per seat."},
        "output": f"Account {i} is on the pro plan with {i % 17} seats; its last invoice was $20.",
    })


def build_jobs(count: int, base_url: str, model: str = MODEL) -> list[JudgeJob]:
    rubric = Rubric(
        id="bench", version="1.0.0", registered=date(2026, 11, 30),
        faithfulness=FaithfulnessCriteria(guide="Every claim must be stated by a tool result or the context."),
    )
    spec = JudgeSpec(model=model, api_base=base_url)
    judge = JudgeTarget(spec=spec, litellm_model=model, model_pin=model, api_base=base_url)
    return [
        JudgeJob(rubric, "faithfulness", build_prompt("faithfulness", rubric.faithfulness.guide, trajectory(i), faithfulness_sections), judge)
        for i in range(count)
    ]


async def bare_loop(jobs: list[JudgeJob], concurrency: int) -> list[str]:
    import litellm

    semaphore = asyncio.Semaphore(concurrency)
    spec = jobs[0].judge.spec

    async def one(job: JudgeJob) -> str:
        async with semaphore:
            response = await litellm.acompletion(
                model=job.judge.litellm_model,
                messages=job.prompt.messages,
                response_format=response_format(job.response_schema),
                temperature=spec.temperature,
                seed=spec.seed,
                max_tokens=spec.max_tokens,
                timeout=spec.timeout_s,
                num_retries=0,
                api_base=job.judge.api_base,
                api_key="not-needed",
            )
            return response.choices[0].message.content

    return await asyncio.gather(*(one(job) for job in jobs))


def judgekit_run(count: int, base_url: str, concurrency: int, cache_root: Path, index: int, model: str = MODEL):
    jobs = build_jobs(count, base_url, model)  # prompts rendered from the trajectories: judgekit's work
    with VerdictCache(cache_root / f"cache-{index}") as cache:  # fresh: every verdict is a call
        runner = JudgeRunner(cache=cache, concurrency=concurrency)
        verdicts = asyncio.run(runner.run(jobs))
    assert all(v.status == "scored" for v in verdicts), runner.ledger.as_dict()
    assert runner.ledger.calls == len(jobs) and runner.ledger.cache_hits == 0
    return verdicts


def timed(fn):
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return time.perf_counter() - wall, time.process_time() - cpu, result


def profile_judgekit(jobs: list[JudgeJob], concurrency: int, cache_root: Path) -> str:
    profiler = cProfile.Profile()
    profiler.enable()
    judgekit_run(len(jobs), jobs[0].judge.api_base, concurrency, cache_root, 999, jobs[0].judge.model_pin)
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("cumulative").print_stats(r"judgekit[/\\](?!_testing)", 25)
    stats.sort_stats("tottime").print_stats(r"judgekit[/\\]|pydantic|diskcache|sqlite3|hashlib|json", 20)
    return out.getvalue()


def paired_ratios(base: list[tuple[float, float]], other: list[tuple[float, float]]) -> tuple[float, float, float]:
    """Median and quartiles of other's wall time over base's, round by round."""
    ratios = sorted(o / b for (b, _), (o, _) in zip(base, other, strict=True))
    low, _, high = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios * 3
    return statistics.median(ratios), low, high


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--verdicts", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--rounds", type=int, default=11, help="alternating rounds; identical rounds vary by up to 40%% here")
    parser.add_argument("--model", default=MODEL, help="the judge pin both sides send (default %(default)s)")
    parser.add_argument("--one-core", action="store_true", help="pin this process to CPU 0, the server to CPU 1 (diagnostic)")
    parser.add_argument("--profile", action="store_true", help="profile one judgekit run even if targets are met")
    parser.add_argument("--control", action="store_true",
                        help="also run the bare loop a second time each round and report bare vs bare: the noise floor")
    args = parser.parse_args(argv)
    n, conc = args.verdicts, args.concurrency
    ideal = n * args.latency / conc

    with ScriptedOpenAIServer.spawn(Reply.ok(ANSWER), default_delay_s=args.latency) as server, \
            tempfile.TemporaryDirectory(prefix="bench-judge-") as tmp:
        if args.one_core:
            os.sched_setaffinity(server.pid, {1})
            os.sched_setaffinity(0, {0})  # threads started from now on (litellm's, the writer) inherit it
        jobs = build_jobs(n, server.base_url, args.model)
        # Warm up both paths (litellm's lazy imports, the HTTP client pool) outside the timings.
        asyncio.run(bare_loop(jobs[:conc], conc))
        judgekit_run(conc, server.base_url, conc, Path(tmp), -1, args.model)

        bare, kit, control = [], [], []
        runs = ("bare", "kit", "control") if args.control else ("bare", "kit")
        for round_ in range(args.rounds):
            before = server.request_count
            # Alternate which goes first: both slow down as a process ages (litellm's state
            # grows), so always running one second would charge the drift to it.
            order = runs if round_ % 2 == 0 else runs[::-1]
            for which in order:
                if which in ("bare", "control"):
                    wall, cpu, contents = timed(lambda: asyncio.run(bare_loop(jobs, conc)))
                    assert len(contents) == n and json.loads(contents[0]) == ANSWER
                    (bare if which == "bare" else control).append((wall, cpu))
                else:
                    wall, cpu, verdicts = timed(lambda r=round_: judgekit_run(n, server.base_url, conc, Path(tmp), r, args.model))
                    kit.append((wall, cpu))
            assert server.request_count - before == len(runs) * n  # each sent every request, once
            print(f"round {round_ + 1}: bare {bare[-1][0]:.3f}s wall {bare[-1][1]:.3f}s cpu | "
                  f"judgekit {kit[-1][0]:.3f}s wall {kit[-1][1]:.3f}s cpu"
                  + (f" | control {control[-1][0]:.3f}s wall" if control else ""), flush=True)

        bare_wall, bare_cpu = statistics.median(w for w, _ in bare), statistics.median(c for _, c in bare)
        kit_wall, kit_cpu = statistics.median(w for w, _ in kit), statistics.median(c for _, c in kit)
        ratio = kit_wall / bare_wall
        extra_cpu_ms = (kit_cpu - bare_cpu) / n * 1000
        per_round = statistics.median(((kc - bc) / n * 1000) for (_, bc), (_, kc) in zip(bare, kit, strict=True))
        round_median, round_low, round_high = paired_ratios(bare, kit)
        print(f"\n{n} verdicts, concurrency {conc}, {args.latency * 1000:.0f} ms per reply; "
              f"ideal {ideal:.2f}s; medians of {args.rounds} alternating rounds; judge {args.model}"
              f"{'; one core' if args.one_core else ''}")
        print(f"bare litellm loop : {bare_wall:.3f}s wall, {bare_cpu:.3f}s cpu ({bare_cpu / n * 1000:.2f} ms/call)")
        print(f"judgekit runner   : {kit_wall:.3f}s wall, {kit_cpu:.3f}s cpu ({kit_cpu / n * 1000:.2f} ms/verdict)")
        print(f"ratio             : {ratio:.3f}x of the medians (target <= {RATIO_TARGET:.2f}x) "
              f"{'OK' if ratio <= RATIO_TARGET else 'MISSED'}; per round (each pair run back to back): "
              f"median {round_median:.3f}x, quartiles {round_low:.3f}-{round_high:.3f}x")
        print(f"judgekit CPU/verdict beyond litellm: {extra_cpu_ms:.3f} ms (median of per-round differences "
              f"{per_round:.3f} ms; target < {CPU_TARGET_MS} ms) {'OK' if extra_cpu_ms < CPU_TARGET_MS else 'MISSED'}")
        print(f"bare loop vs ideal: {bare_wall / ideal:.2f}x (litellm's own client cost at this concurrency)")
        if control:
            noise, low, high = paired_ratios(bare, control)
            print(f"A/A control (bare loop vs itself, same alternation): per round median {noise:.3f}x, "
                  f"quartiles {low:.3f}-{high:.3f}x")
        if args.profile or ratio > RATIO_TARGET or extra_cpu_ms >= CPU_TARGET_MS:
            print("\n--- cProfile of one judgekit run (judgekit's own functions) ---")
            print(profile_judgekit(jobs, conc, Path(tmp)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
