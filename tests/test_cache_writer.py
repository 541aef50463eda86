"""The cache's writer thread and the runner's plan: what is stored, when, and what is asked.

Verdicts are written by one thread in group commits, so the event loop never waits on SQLite.
These tests pin the contract: an awaited put is committed (another connection reads it), a
flush ends the gathering window, close() stores everything handed over even if nobody awaited
it, a failed write reaches the coroutine waiting on it, and a run asks each distinct question
once, stores every verdict before it returns, never holds more than `concurrency` verdicts
waiting to be stored, stops when the cache cannot store or a call fails unexpectedly, and runs
each call in its own context.
"""

from __future__ import annotations

import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # before anything imports litellm

import asyncio
import contextvars
import threading
import time
from dataclasses import replace
from datetime import date, datetime, timezone

import pytest

from judgekit.cache.store import VerdictCache
from judgekit.cache.writer import CacheWriter
from judgekit.judge.backend import LitellmBackend
from judgekit.judge.spec import JudgeSpec
from judgekit.judge.target import JudgeTarget
from judgekit.axes.faithfulness import faithfulness_sections
from judgekit.prompt import build_prompt
from judgekit.rubric.model import FaithfulnessCriteria, Rubric
from judgekit.run.jobs import JudgeJob
from judgekit.run.judging import JudgeRunner
from judgekit.testing import Reply, ScriptedOpenAIServer
from judgekit.trajectory import Trajectory
from judgekit.verdict import JudgeVerdict, Provenance

MODEL = "openai/judge-2024-08-06"
ANSWER = {"claims": [{"claim": "the account has 3 seats", "supported": False, "evidence": []}]}


def verdict(n: int, status: str = "scored", key: str | None = None) -> JudgeVerdict:
    """A verdict as the runner makes it: its provenance names the key it is stored under
    (``k<n>`` unless given), which the cache checks on every read."""
    provenance = Provenance(
        model_pin=MODEL, parameters={"temperature": 0}, rubric="r@1.0.0", rubric_sha256="a" * 64,
        template_sha256="b" * 64, judgekit_version="0", litellm_version="0",
        created_at=datetime(2026, 11, 30, tzinfo=timezone.utc), cache_key=key or f"k{n}",
    )
    if status == "scored":
        return JudgeVerdict(axis="faithfulness", status="scored", answer=ANSWER, provenance=provenance)
    return JudgeVerdict(axis="faithfulness", status="unscored", unscored_reason="timeout", provenance=provenance)


def stored(directory, keys: list[str]) -> list[bool]:
    """Read back through a fresh connection in this thread, as another process would."""
    with VerdictCache(directory) as reader:
        return [reader.get(key) is not None for key in keys]


# --- the writer --------------------------------------------------------------------------------


def test_an_awaited_put_is_committed(tmp_path):
    async def main():
        with VerdictCache(tmp_path) as cache, CacheWriter(cache, window_s=0.01) as writer:
            await asyncio.gather(*(writer.put(f"k{i}", verdict(i)) for i in range(5)))
            return stored(tmp_path, [f"k{i}" for i in range(5)])

    assert asyncio.run(main()) == [True] * 5


def test_flush_ends_the_gathering_window(tmp_path):
    async def main():
        with VerdictCache(tmp_path) as cache, CacheWriter(cache, window_s=60) as writer:
            started = time.monotonic()
            future = writer.put("k", verdict(1))
            writer.flush()
            await asyncio.wait_for(future, 10)
            return time.monotonic() - started

    assert asyncio.run(main()) < 10  # not the 60 s window


def test_close_stores_everything_handed_over(tmp_path):
    """Nobody awaits these puts (their coroutines were cancelled, say): close() still commits them."""

    async def main():
        with VerdictCache(tmp_path) as cache:
            writer = CacheWriter(cache, window_s=60)
            futures = [writer.put(f"k{i}", verdict(i)) for i in range(3)]
            writer.close()  # returns without waiting out the window
            return futures

    started = time.monotonic()
    asyncio.run(main())
    assert time.monotonic() - started < 10
    assert stored(tmp_path, ["k0", "k1", "k2"]) == [True] * 3


def test_a_failed_write_reaches_the_waiting_coroutine(tmp_path):
    class FullDisk(VerdictCache):
        def put_many(self, items):
            raise OSError(28, "No space left on device")

    async def main():
        with FullDisk(tmp_path) as cache, CacheWriter(cache, window_s=0.01) as writer:
            await writer.put("k", verdict(1))

    with pytest.raises(OSError, match="No space left"):
        asyncio.run(main())


def test_only_scored_verdicts_are_handed_over(tmp_path):
    async def main():
        with VerdictCache(tmp_path) as cache, CacheWriter(cache) as writer:
            writer.put("k", verdict(1, status="unscored"))

    with pytest.raises(ValueError, match="only validated verdicts"):
        asyncio.run(main())


def test_put_many_is_one_transaction(tmp_path):
    """All of a group or none: a verdict that cannot be stored takes its group back with it."""

    class Broken(JudgeVerdict):
        def model_dump_json(self, **kwargs):
            raise RuntimeError("cannot serialise")

    good = verdict(1, key="good")
    bad = Broken.model_validate(verdict(2, key="bad").model_dump())
    with VerdictCache(tmp_path) as cache:
        with pytest.raises(RuntimeError):
            cache.put_many([("good", good), ("bad", bad)])
        assert cache.get("good") is None
        cache.put_many([("good", good)])
        assert cache.get("good") is not None


# --- the runner's plan -------------------------------------------------------------------------


def job(seats: int, base_url: str) -> JudgeJob:
    rubric = Rubric(
        id="writer", version="1.0.0", registered=date(2026, 11, 30),
        faithfulness=FaithfulnessCriteria(guide="Every claim must be stated by a tool result."),
    )
    trajectory = Trajectory.model_validate({
        "id": f"t{seats}",
        "prompt": "How many seats does the account have?",
        "calls": [{"tool": "get_account", "args": {"id": 1}, "result": {"seats": seats}}],
        "output": f"The account has {seats} seats.",
    })
    judge = JudgeTarget(spec=JudgeSpec(model=MODEL), litellm_model=MODEL, model_pin=MODEL, api_base=base_url)
    prompt = build_prompt("faithfulness", rubric.faithfulness.guide, trajectory, faithfulness_sections)
    return JudgeJob(rubric, "faithfulness", prompt, judge)


def test_each_distinct_question_is_asked_once_and_stored_before_run_returns(tmp_path):
    with ScriptedOpenAIServer(Reply.ok(ANSWER)) as server:
        jobs = [job(seats, server.base_url) for seats in (1, 2, 1, 3, 1)]
        done: list[int] = []
        with VerdictCache(tmp_path) as cache:
            runner = JudgeRunner(cache=cache, concurrency=2, on_done=lambda: done.append(1))
            verdicts = asyncio.run(runner.run(jobs))
        assert server.request_count == 3
        assert runner.ledger.calls == 3 and runner.ledger.cache_hits == 0
        assert len(verdicts) == 5 and len(done) == 5
        assert verdicts[0] is verdicts[2] is verdicts[4]
        assert stored(tmp_path, [j.key for j in jobs]) == [True] * 5

        with VerdictCache(tmp_path) as cache:
            rerun = JudgeRunner(cache=cache, concurrency=2)
            again = asyncio.run(rerun.run(jobs))
        assert server.request_count == 3  # nothing asked
        assert rerun.ledger.cache_hits == 5  # counted per job, like unscored verdicts
        assert [v.answer for v in again] == [v.answer for v in verdicts]
        assert all(v.provenance.cache_hit and v.provenance.attempts == 0 for v in again)


class GatedCache(VerdictCache):
    """Commits only once the gate opens: a disk that stalls."""

    def __init__(self, directory, gate: threading.Event):
        super().__init__(directory)
        self.gate = gate

    def put_many(self, items):
        assert self.gate.wait(30), "the test never opened the gate"
        super().put_many(items)


def test_at_most_concurrency_verdicts_wait_to_be_stored_and_a_job_is_done_once_stored(tmp_path):
    """While no commit can finish, calls stop once `concurrency` verdicts wait for the writer
    (the bound on what a kill can lose); nothing counts as done before it is stored."""
    concurrency, questions = 2, 10
    gate, done = threading.Event(), []
    with ScriptedOpenAIServer(Reply.ok(ANSWER), default_delay_s=0.02) as server:
        jobs = [job(seats, server.base_url) for seats in range(questions)]
        with GatedCache(tmp_path, gate) as cache:
            runner = JudgeRunner(cache=cache, concurrency=concurrency, on_done=lambda: done.append(1))
            outcome: list = []
            thread = threading.Thread(target=lambda: outcome.append(asyncio.run(runner.run(jobs))))
            thread.start()
            try:
                # `concurrency` verdicts handed to the writer, and one more reply per task waiting for a slot...
                deadline = time.monotonic() + 30
                while server.request_count < 2 * concurrency and time.monotonic() < deadline:
                    time.sleep(0.01)
                time.sleep(0.5)  # ...and no more, however long the writer stalls (25 replies' time here)
                assert server.request_count == 2 * concurrency
                assert done == []
            finally:
                gate.set()
                thread.join(30)
    assert server.request_count == questions
    assert len(outcome[0]) == questions and len(done) == questions
    assert stored(tmp_path, [j.key for j in jobs]) == [True] * questions


def test_a_failed_write_stops_the_run(tmp_path):
    class FullDisk(VerdictCache):
        def put_many(self, items):
            raise OSError(28, "No space left on device")

    with ScriptedOpenAIServer(Reply.ok(ANSWER), default_delay_s=0.02) as server:
        jobs = [job(seats, server.base_url) for seats in range(20)]
        with FullDisk(tmp_path) as cache:
            runner = JudgeRunner(cache=cache, concurrency=2)
            with pytest.raises(OSError, match="No space left"):
                asyncio.run(runner.run(jobs))
        assert server.request_count < len(jobs)  # no more calls once nothing can be stored


def test_an_unexpected_error_in_a_call_stops_the_run_and_is_raised_as_itself(tmp_path):
    class Broken(LitellmBackend):
        calls = 0

        async def complete(self, request, **options):
            Broken.calls += 1
            if Broken.calls == 3:
                raise RuntimeError("a bug in the backend")
            return await super().complete(request, **options)

    with ScriptedOpenAIServer(Reply.ok(ANSWER), default_delay_s=0.05) as server:
        jobs = [job(seats, server.base_url) for seats in range(20)]
        with VerdictCache(tmp_path) as cache:
            runner = JudgeRunner(backend=Broken(), cache=cache, concurrency=2)
            with pytest.raises(RuntimeError, match="a bug in the backend"):  # not wrapped in a group
                asyncio.run(runner.run(jobs))
        assert server.request_count < len(jobs)  # the other calls were stopped, not all made


TRACE = contextvars.ContextVar("trace", default=None)


def test_each_call_runs_in_its_own_context(tmp_path):
    """A context variable one call sets (litellm stamps a trace id on each) never reaches the
    next call, even with one call at a time."""
    seen = []

    class Stamping(LitellmBackend):
        async def complete(self, request, **options):
            seen.append(TRACE.get())
            TRACE.set(request.messages[1]["content"][-40:])
            return await super().complete(request, **options)

    with ScriptedOpenAIServer(Reply.ok(ANSWER), default_delay_s=0.0) as server:
        jobs = [job(seats, server.base_url) for seats in range(4)]
        verdicts = asyncio.run(JudgeRunner(backend=Stamping(), cache=None, concurrency=1).run(jobs))
    assert [v.status for v in verdicts] == ["scored"] * 4
    assert seen == [None] * 4


def test_latency_leaves_out_time_queued_for_a_server_slot(tmp_path):
    """Three questions for a server with one slot: the last waits ~2 replies for the slot, but
    its latency is its own call's."""
    delay = 0.3
    with ScriptedOpenAIServer(Reply.ok(ANSWER), default_delay_s=delay) as server:
        jobs = [job(seats, server.base_url) for seats in (1, 2, 3)]
        jobs = [JudgeJob(j.rubric, j.axis, j.prompt, replace(j.judge, max_concurrency=1)) for j in jobs]
        runner = JudgeRunner(cache=None, concurrency=3)
        started = time.monotonic()
        verdicts = asyncio.run(runner.run(jobs))
        elapsed = time.monotonic() - started
    assert server.max_in_flight == 1
    assert elapsed >= 3 * delay
    latencies = sorted(v.provenance.latency_s for v in verdicts)
    assert all(delay <= latency < 2 * delay for latency in latencies), latencies
