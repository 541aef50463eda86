"""The cache's writer process and the runner's plan: what is stored, when, and what is asked.

Verdicts are written by a process of their own in group commits, so neither the event loop nor
the GIL waits on SQLite. These tests pin the contract: an awaited put is committed (another
connection reads it), close() stores everything handed over even if nobody awaited it, a failed
commit or a writer that cannot start reaches the coroutine waiting on it, the writer dies with
its run, and a run asks each distinct question
once, stores every verdict before it returns, never holds more than `concurrency` verdicts
waiting to be stored, and stops when the cache cannot store.
"""

from __future__ import annotations

import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # before anything imports litellm

import asyncio
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import replace
from datetime import date, datetime, timezone
from pathlib import Path
from types import SimpleNamespace

import pytest

from judgekit.cache import CacheWriteError, CacheWriter, VerdictCache
from judgekit.judge.jobs import JudgeJob, JudgeRunner, ResolvedJudge
from judgekit.judge.spec import JudgeSpec
from judgekit.prompt import build_prompt
from judgekit.rubric import FaithfulnessCriteria, Rubric
from judgekit.testing import Reply, ScriptedOpenAIServer
from judgekit.trajectory import Trajectory
from judgekit.verdict import JudgeVerdict, Provenance

MODEL = "openai/judge-2024-08-06"
ANSWER = {"claims": [{"claim": "the account has 3 seats", "supported": False, "evidence": []}]}


def verdict(n: int, status: str = "scored") -> JudgeVerdict:
    provenance = Provenance(
        model_pin=MODEL, parameters={"temperature": 0}, rubric="r@1.0.0", rubric_sha256="a" * 64,
        template_sha256="b" * 64, judgekit_version="0", litellm_version="0",
        created_at=datetime(2026, 11, 30, tzinfo=timezone.utc), cache_key=f"{n:064x}",
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
        with VerdictCache(tmp_path) as cache:
            writer = await CacheWriter.start(cache)
            await asyncio.gather(*(writer.put(f"k{i}", verdict(i)) for i in range(5)))
            committed = stored(tmp_path, [f"k{i}" for i in range(5)])
            await writer.close()
            return committed

    assert asyncio.run(main()) == [True] * 5


def test_stored_verdicts_read_back_as_they_were_put(tmp_path):
    async def main():
        with VerdictCache(tmp_path) as cache:
            writer = await CacheWriter.start(cache)
            await writer.put("k", verdict(7))
            await writer.close()

    asyncio.run(main())
    with VerdictCache(tmp_path) as reader:
        assert reader.get("k") == verdict(7)


def test_close_stores_everything_handed_over(tmp_path):
    """Nobody awaits these puts (their coroutines were cancelled, say): close() still commits them."""

    async def main():
        with VerdictCache(tmp_path) as cache:
            writer = await CacheWriter.start(cache)
            for i in range(3):
                writer.put(f"k{i}", verdict(i))
            await writer.close()

    asyncio.run(main())
    assert stored(tmp_path, ["k0", "k1", "k2"]) == [True] * 3


class WriteLock:
    """Another process's connection holding the cache database's write lock."""

    def __init__(self, directory):
        self.connection = sqlite3.connect(Path(directory) / "cache.db", isolation_level=None)

    def take(self) -> None:
        self.connection.execute("BEGIN IMMEDIATE")

    def release(self) -> None:
        if self.connection.in_transaction:
            self.connection.rollback()
        self.connection.close()


def test_a_failed_commit_reaches_the_waiting_coroutine(tmp_path):
    """Another process holds the database's write lock longer than the writer may wait."""

    async def main(lock: WriteLock):
        with VerdictCache(tmp_path, busy_timeout_s=0.2) as cache:
            writer = await CacheWriter.start(cache)
            try:
                await writer.put("first", verdict(1))
                lock.take()
                await writer.put("second", verdict(2))
            finally:
                lock.release()
                await writer.close()

    VerdictCache(tmp_path).close()  # the database exists before the lock is taken
    with pytest.raises(CacheWriteError, match=r"could not commit 1 verdict.*Timeout: Database timeout"):
        asyncio.run(main(WriteLock(tmp_path)))
    assert stored(tmp_path, ["first", "second"]) == [True, False]


def test_a_writer_that_cannot_start_fails_its_puts_and_says_why(tmp_path):
    not_a_directory = tmp_path / "file"
    not_a_directory.write_text("")

    async def main():
        writer = await CacheWriter.start(SimpleNamespace(directory=not_a_directory, busy_timeout_s=1.0))
        with pytest.raises(CacheWriteError, match="ended"):
            await writer.put("k", verdict(1))
        with pytest.raises(CacheWriteError, match=r"exit code 1\): [\w.]+Error"):
            await writer.close()

    asyncio.run(main())


def test_only_scored_verdicts_are_handed_over(tmp_path):
    async def main():
        with VerdictCache(tmp_path) as cache:
            writer = await CacheWriter.start(cache)
            try:
                writer.put("k", verdict(1, status="unscored"))
            finally:
                await writer.close()

    with pytest.raises(ValueError, match="only validated verdicts"):
        asyncio.run(main())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the kernel's parent-death signal is Linux's")
def test_the_writer_dies_with_its_run(tmp_path):
    """A run killed with SIGKILL takes its writer with it: nothing is committed after the kill."""
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent(f"""
        import asyncio, os, sys
        from judgekit.cache import CacheWriteError, CacheWriter, VerdictCache

        async def main():
            with VerdictCache({str(tmp_path / "cache")!r}) as cache:
                writer = await CacheWriter.start(cache)
                print(writer._transport.get_pid(), flush=True)
                await asyncio.sleep(60)

        asyncio.run(main())
    """))
    run = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        writer_pid = int(run.stdout.readline())
        os.kill(writer_pid, 0)  # alive while its run is
    finally:
        run.kill()
        run.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(writer_pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.01)
    raise AssertionError("the writer outlived its run")


def test_put_many_is_one_transaction(tmp_path):
    """All of a group or none: a verdict that cannot be stored takes its group back with it."""

    class Broken(JudgeVerdict):
        def model_dump_json(self, **kwargs):
            raise RuntimeError("cannot serialise")

    good = verdict(1)
    bad = Broken.model_validate(verdict(2).model_dump())
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
    judge = ResolvedJudge(spec=JudgeSpec(model=MODEL), litellm_model=MODEL, model_pin=MODEL,
                          api_base=base_url, api_key="not-needed")
    return JudgeJob(rubric, "faithfulness", build_prompt("faithfulness", rubric.faithfulness.guide, trajectory, None), judge)


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


@pytest.fixture
def writers(monkeypatch) -> list[CacheWriter]:
    """The cache writers runs start, for a test to stop or kill their processes."""
    started: list[CacheWriter] = []
    start = CacheWriter.start.__func__

    async def recording_start(cls, cache):
        writer = await start(cls, cache)
        started.append(writer)
        return writer

    monkeypatch.setattr(CacheWriter, "start", classmethod(recording_start))
    return started


def wait_until(condition, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


@pytest.mark.skipif(sys.platform == "win32", reason="stops the writer with SIGSTOP")
def test_at_most_concurrency_verdicts_wait_to_be_stored_and_a_job_is_done_once_stored(tmp_path, writers):
    """While the writer cannot commit (its process is stopped: a stalled disk, say), the workers
    stop once `concurrency` verdicts wait for it (the bound on what a kill can lose); nothing
    counts as done before it is stored."""
    concurrency, questions = 2, 10
    done: list[int] = []
    with ScriptedOpenAIServer(Reply.ok(ANSWER), default_delay_s=0.05) as server:
        jobs = [job(seats, server.base_url) for seats in range(questions)]
        with VerdictCache(tmp_path) as cache:
            runner = JudgeRunner(cache=cache, concurrency=concurrency, on_done=lambda: done.append(1))
            outcome: list = []
            thread = threading.Thread(target=lambda: outcome.append(asyncio.run(runner.run(jobs))))
            thread.start()
            wait_until(lambda: writers)
            pid = writers[0]._transport.get_pid()
            os.kill(pid, signal.SIGSTOP)  # before the first reply arrives: nothing is committed
            try:
                time.sleep(1.0)  # 20 replies' time: the workers have long stopped
                # `concurrency` verdicts handed to the writer, and one more reply per worker waiting for a slot.
                assert server.request_count == 2 * concurrency
                assert done == []
            finally:
                os.kill(pid, signal.SIGCONT)
                thread.join(60)
    assert server.request_count == questions
    assert len(outcome[0]) == questions and len(done) == questions
    assert stored(tmp_path, [j.key for j in jobs]) == [True] * questions


def test_a_writer_that_dies_stops_the_run(tmp_path, writers):
    with ScriptedOpenAIServer(Reply.ok(ANSWER), default_delay_s=0.05) as server:
        jobs = [job(seats, server.base_url) for seats in range(40)]
        with VerdictCache(tmp_path) as cache:
            runner = JudgeRunner(cache=cache, concurrency=2)

            async def main():
                run = asyncio.create_task(runner.run(jobs))
                while server.request_count < 4:
                    await asyncio.sleep(0.01)
                writers[0]._transport.kill()  # the writer is killed (out of memory, say)
                await run

            with pytest.raises(CacheWriteError, match="the cache writer process ended"):
                asyncio.run(main())
        assert server.request_count < len(jobs)  # no more calls once nothing can be stored


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
