"""Peak memory and speed of a judged run: ``judgekit run SUITE --format jsonl --cache-dir DIR``.

    python benchmarks/bench_run_judged.py [--trajectories 20000] [--full] [--concurrency C]
                                          [--interval 0.2] [--workdir DIR] [--keep]

A suite of small self-made trajectories (a prompt, one ``get_order`` call with its result, an
answer), each unique, under one rubric with a tool-correctness section (scored here) and a
faithfulness section (asked of the judge): one judge question per trajectory, no two alike,
into an empty verdict cache. The judge is ``openai/judge-2024-08-06`` at the ``api_base`` of a
``judgekit.testing.ScriptedOpenAIServer`` on 127.0.0.1 in this process; it answers each request
with a valid faithfulness answer built from the prompt (one claim citing the order's status in
R0, which judgekit's citation check accepts, and one unsupported aside), so every verdict is
scored and stored.

judgekit runs as a subprocess, stdout to /dev/null; its RSS (only judgekit's: the server's
memory is this process's) is sampled from ``/proc/PID/status`` every ``--interval`` s as in
``bench_run_memory.py``. Printed: wall, CPU, verdicts per second of wall, peak RSS, the RSS
curve, and the slope of RSS over the second half (bytes per verdict). Asserted: every verdict
was a call (the server's count, the ledger on stderr), none unscored.

Target: peak RSS < 400 MB at 100,000 trajectories (``--full``); the default 20,000 takes
~2-3 minutes and the verdict line says it is not the target's size.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_run_memory import (
    MB,
    judgekit_command,
    print_measured,
    run_sampled,
    trace_growth,
)

MODEL = "openai/judge-2024-08-06"
DEFAULT_TRAJECTORIES = 20_000
FULL_TRAJECTORIES = 100_000
PEAK_TARGET_MB = 400.0
TOOL_GUIDE = ("One point for the order lookup, one for a valid order id, one when exactly one lookup "
              "succeeded, one when no forbidden tool was used.")
FAITH_GUIDE = ("Split the answer into atomic claims. A claim is supported only when the order lookup "
               "states it; cite the result and quote the words.")
CARRIERS = ("DHL", "UPS", "FedEx", "La Poste", "Royal Mail")


# --- the suite -----------------------------------------------------------------------------------


POLICY_WORDS = ("refund", "order", "carrier", "within", "days", "the", "customer", "may", "request", "a",
                "replacement", "unless", "shipped", "label", "policy", "applies", "to", "all", "items")


def trajectory(i: int, context_chars: int = 0) -> dict[str, Any]:
    """One order-status run; ``context_chars``: also a policy text of about that length in its
    context (a long prompt, as real runs have: the faithfulness judge is shown the context)."""
    order = f"ord-{i:07d}"
    carrier = CARRIERS[i % len(CARRIERS)]
    eta = f"2026-12-{1 + i % 28:02d}"
    record = {
        "id": f"order-{i:07d}",
        "prompt": f"Where is my order {order}? I placed it last week.",
        "calls": [{"tool": "get_order", "args": {"order_id": order},
                   "result": {"order_id": order, "status": "shipped", "carrier": carrier, "eta": eta,
                              "items": 1 + i % 4}}],
        "output": f"Your order {order} has shipped with {carrier} and should arrive on {eta}.",
        "metadata": {"bench": "judged"},
    }
    if context_chars:
        words, size, n = [], 0, i
        while size < context_chars:
            n = (n * 1103515245 + 12345) % 2**31  # the same text for the same i, different for another
            words.append(POLICY_WORDS[n % len(POLICY_WORDS)])
            size += len(words[-1]) + 1
        record["context"] = {"policy": " ".join(words)}
    return record


def rubric(rubric_id: str, *, faithfulness: bool) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": rubric_id,
        "version": "1.0.0",
        "registered": "2026-12-01",
        "description": "Answer an order-status question from one lookup.",
        "tool_correctness": {
            "guide": TOOL_GUIDE,
            "expected_calls": [{"tool": "get_order", "args": {"order_id": {"type": "string",
                                                                           "pattern": "^ord-[0-9]+$"}}}],
            "forbidden": {"tools": ["cancel_order"]},
        },
    }
    if faithfulness:
        data["faithfulness"] = {"guide": FAITH_GUIDE}
    return data


def write_suites(folder: Path, trajectories: int, api_base: str, *,
                 concurrency: int | None = None, context_chars: int = 0) -> tuple[Path, Path]:
    """``folder/suite.yaml`` (tool correctness + faithfulness, judged at ``api_base``) and
    ``folder/suite-deterministic.yaml`` (the same trajectories, tool correctness only).
    The trajectories are written one at a time. (judged suite, deterministic suite)."""
    import yaml

    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "trajectories.jsonl", "w", encoding="utf-8", buffering=4 * MB) as out:
        out.writelines(json.dumps(trajectory(i, context_chars), separators=(",", ":")) + "\n"
                       for i in range(trajectories))
    (folder / "rubric-judged.yaml").write_text(yaml.safe_dump(rubric("bench-orders", faithfulness=True),
                                                              sort_keys=False), encoding="utf-8")
    (folder / "rubric-deterministic.yaml").write_text(
        yaml.safe_dump(rubric("bench-orders-deterministic", faithfulness=False), sort_keys=False), encoding="utf-8")
    judged = {
        "name": f"bench judged ({trajectories})",
        "rubrics": ["rubric-judged.yaml"],
        "trajectories": [{"file": "trajectories.jsonl", "rubric": "bench-orders"}],
        "judge": {"model": MODEL, "api_base": api_base},
    }
    if concurrency:
        judged["concurrency"] = concurrency
    deterministic = {
        "name": f"bench deterministic ({trajectories})",
        "rubrics": ["rubric-deterministic.yaml"],
        "trajectories": [{"file": "trajectories.jsonl", "rubric": "bench-orders-deterministic"}],
    }
    (folder / "suite.yaml").write_text(yaml.safe_dump(judged, sort_keys=False), encoding="utf-8")
    (folder / "suite-deterministic.yaml").write_text(yaml.safe_dump(deterministic, sort_keys=False), encoding="utf-8")
    return folder / "suite.yaml", folder / "suite-deterministic.yaml"


# --- the judge -----------------------------------------------------------------------------------


def data_items(user_message: str) -> dict[str, str]:
    """Every data item of a rendered prompt: id -> decoded text."""
    from judgekit.testing import prompt_items

    return prompt_items(user_message)


def faithfulness_answer(request: dict[str, Any]) -> dict[str, Any]:
    """A valid faithfulness answer for this prompt: the shipping claim cites R0's status (a quote
    that occurs in R0 and is over 8 characters), and an aside is unsupported."""
    items = data_items(request["messages"][1]["content"])
    result = items.get("R0", "")
    start = result.find('"status"')
    if start < 0:
        return {"claims": [{"claim": items.get("O", "")[:80], "supported": False, "evidence": []}]}
    quote = result[start:start + len('"status": "shipped"')]
    return {"claims": [
        {"claim": items.get("O", "")[:80], "supported": True, "evidence": [{"id": "R0", "quote": quote}]},
        {"claim": "the customer will be pleased", "supported": False, "evidence": []},
    ]}


class CountingJudge:
    """The server's script: a valid answer per request, counted here. The server keeps every
    request it parsed (``server.requests``); ``forget`` drops them now and then so this process
    does not grow by a few KB per call (its memory is not the one measured, but the machine is shared)."""

    def __init__(self) -> None:
        self.calls = 0
        self._lock = threading.Lock()

    def __call__(self, request: dict[str, Any], n: int):
        from judgekit.testing import Reply

        with self._lock:
            self.calls += 1
        return Reply.ok(faithfulness_answer(request))

    def forget_requests(self, server, stop: threading.Event, every_s: float = 2.0) -> threading.Thread:
        def loop() -> None:
            while not stop.wait(every_s):
                server.reset()

        thread = threading.Thread(target=loop, daemon=True)
        thread.start()
        return thread


LEDGER_LINE = re.compile(r"^judge: (\d+) call\(s\), (\d+) cache hit\(s\)", re.MULTILINE)
UNSCORED = re.compile(r"^(\w+): \d+ scored.*?, (\d+ unscored(?: \([^)]*\))?)", re.MULTILINE)


def ledger_of(stderr: str) -> tuple[int, int, str]:
    """(calls, cache hits, unscored) from what the CLI prints on stderr beside JSON Lines: the
    judge's line, and each axis's line (its unscored results and why; "none" when no axis has one)."""
    match = LEDGER_LINE.search(stderr)
    if match is None:
        raise AssertionError(f"no ledger line on stderr: {stderr.strip()[-2000:]}")
    unscored = "; ".join(f"{axis} {said}" for axis, said in UNSCORED.findall(stderr)) or "none"
    return int(match.group(1)), int(match.group(2)), unscored


# --- main ----------------------------------------------------------------------------------------


def check_and_print(m, served: int, count: int) -> None:
    """Every question was a call, every verdict scored; then the figures."""
    if m.rc != 0:
        raise AssertionError(f"judgekit run exited {m.rc}: {m.stderr.strip()[-2000:]}")
    calls, hits, unscored = ledger_of(m.stderr)
    assert calls == count and hits == 0, f"ledger: {calls} calls, {hits} hits for {count} unique questions"
    assert served == count, f"the server answered {served} requests for {count} questions"
    assert unscored == "none", f"unscored verdicts: {unscored} (the scripted answers should all be valid)"
    print_measured("  judged run ", m, count)
    print(f"  {count / m.wall_s:,.0f} verdicts/s of wall ({m.cpu_s / count * 1000:.2f} ms judgekit CPU per "
          f"verdict); ledger: {calls:,} calls, {hits} cache hits, unscored: {unscored}", flush=True)


def main() -> int:
    from judgekit.testing import ScriptedOpenAIServer

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trajectories", type=int, default=DEFAULT_TRAJECTORIES)
    parser.add_argument("--full", action="store_true", help=f"{FULL_TRAJECTORIES:,} trajectories (the target's size)")
    parser.add_argument("--concurrency", type=int, help="judge calls in flight (default: the suite's default, 8)")
    parser.add_argument("--interval", type=float, default=0.2, help="seconds between RSS samples")
    parser.add_argument("--workdir", type=Path, help="scratch folder (default: a new one in TMPDIR)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")
    parser.add_argument("--tracemalloc", type=int, metavar="N",
                        help="also judge N more trajectories through run_suite under tracemalloc (into a fresh cache) "
                             "and print the allocation sites that grew most (slow: ~0.2 s a verdict)")
    args = parser.parse_args()
    count = FULL_TRAJECTORIES if args.full else args.trajectories

    work = args.workdir or Path(tempfile.mkdtemp(prefix="judgekit-bench-judged-"))
    judge = CountingJudge()
    stop = threading.Event()
    try:
        with ScriptedOpenAIServer(judge) as server:
            judge.forget_requests(server, stop)
            suite, _ = write_suites(work / "suite", count, server.base_url, concurrency=args.concurrency)
            cache = work / "cache"
            print(f"judgekit run SUITE --format jsonl --cache-dir DIR > /dev/null: {count:,} trajectories, one "
                  f"faithfulness question each, judge {MODEL} at {server.base_url} (in this process); "
                  f"RSS every {args.interval} s", flush=True)
            m = run_sampled([*judgekit_command(), "run", str(suite), "--format", "jsonl", "--cache-dir", str(cache)],
                            interval=args.interval, env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
            served = judge.calls
            check_and_print(m, served, count)
            if args.tracemalloc:
                traced, _ = write_suites(work / "traced", args.tracemalloc, server.base_url,
                                         concurrency=args.concurrency)
                trace_growth(traced, args.tracemalloc, work / "traced-cache")
            stop.set()
    finally:
        stop.set()
        if not args.keep and args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)

    scope = "" if count >= FULL_TRAJECTORIES else f" [at {count:,}, not the target's {FULL_TRAJECTORIES:,}: --full]"
    target = f"peak RSS < {PEAK_TARGET_MB:.0f} MB at {FULL_TRAJECTORIES:,}"
    verdict = "PASS" if m.peak_mb < PEAK_TARGET_MB else "MISS"
    print(f"{verdict} ({target}): peak {m.peak_mb:.0f} MB, {count / m.wall_s:,.0f} verdicts/s, "
          f"wall {m.wall_s:.0f} s{scope}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
