"""Executing a window's judge questions: the ``Executor`` protocol and this machine's
``LocalExecutor`` (the executors a run can name are in ``judgekit.run.options``).

An executor answers a list of jobs with their verdicts, in job order; each question is asked
with ``judgekit.run.ask.ask``, whatever runs it. ``LocalExecutor`` adds what a run on one machine
wants: identical questions asked once, the store's answers and its rerun memo, bounded
concurrency, and each validated verdict handed to the store's writer thread the moment it exists,
without holding up the next call, so that a run killed at any point repeats no call whose
verdict was stored.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from functools import partial
from typing import Protocol, runtime_checkable

from judgekit.cache.base import VerdictStore
from judgekit.cache.writer import CacheWriter
from judgekit.errors import ConfigError
from judgekit.judge.backend import Backend, LitellmBackend
from judgekit.judge.resolve import Connector
from judgekit.judge.target import Connection, JudgeTarget
from judgekit.run.ask import ask
from judgekit.run.jobs import JudgeJob, differing_identity, model_mismatch
from judgekit.run.ledger import Ledger
from judgekit.run.memo import Memo, look_up_by_fingerprint
from judgekit.run.pace import LocalPacer, Pacer
from judgekit.suite import Budget
from judgekit.verdict import JudgeVerdict



@runtime_checkable
class Executor(Protocol):
    """Answers a window's judge questions: ``execute(jobs)`` gives their verdicts in job order,
    and ``ledger`` adds up what every window cost. ``LocalExecutor`` runs them on this
    machine's event loop; a Ray or queue-backed one can take its place, asking each question
    with ``judgekit.ask``. Subclass it to inherit ``close``."""

    ledger: Ledger
    """Calls, cache use, tokens and cost of every window executed so far."""

    async def execute(self, jobs: Sequence[JudgeJob]) -> list[JudgeVerdict]:
        """The verdicts of ``jobs``, in their order."""
        ...

    def close(self) -> None:
        """Done with the executor: release what it holds (servers, connections, the store).
        The default holds nothing."""
        return None


class LocalExecutor(Executor):
    """This machine's executor: identical questions asked once, the store's answers first,
    bounded concurrency, every verdict to the store's writer thread as it is validated, the
    budget. One executor serves every window of a run: its ledger adds up, and a small memo
    answers a question repeated in a later window when no store does.

    ``connect`` turns a job's target into its connection (address, key); by default a
    ``Connector`` that starts the embedded judge on first use and stops it on ``close``.
    ``progress(n)`` is called with each window's number of jobs and gives the callback to call
    once per job answered. ``pacer``: each endpoint's rate and the budget, shared by every call
    (default: a ``LocalPacer`` holding ``budget``); one passed in holds its own budget, so
    ``budget`` with it is refused.
    """

    def __init__(
        self,
        *,
        store: VerdictStore | None = None,
        backend: Backend | None = None,
        concurrency: int = 8,
        budget: Budget | None = None,
        progress: Callable[[int], Callable[[], None]] | None = None,
        clock: Callable[[], float] = time.monotonic,
        connect: Callable[[JudgeTarget], Connection] | None = None,
        pacer: Pacer | None = None,
    ):
        if pacer is not None and budget is not None:
            raise ConfigError("a run given its own pacer keeps its budget there: set the budget on the pacer, "
                              "not in the suite or with --budget-*")
        self._stack = ExitStack()
        self.store = store
        self.backend = backend or LitellmBackend()
        self.concurrency = concurrency
        self.budget = budget
        self.progress = progress
        self.clock = clock
        self.connect = connect or Connector(self._stack)
        self.ledger = Ledger()
        self.pacer = pacer or LocalPacer(budget=budget)
        self.refused: list[tuple[str, str]] = []  # (key, why) of cached verdicts not taken
        self._slots: dict[tuple[str, str | None], asyncio.Semaphore] = {}
        self._memo = Memo()
        self._prepared = False

    async def execute(self, jobs: Sequence[JudgeJob]) -> list[JudgeVerdict]:
        return await self._run(list(jobs), self.progress(len(jobs)) if self.progress else None)

    def close(self) -> None:
        try:
            self._stack.close()
        finally:
            try:
                self.backend.close()
            finally:
                if self.store is not None:
                    self.store.close()

    async def _run(self, jobs: list[JudgeJob], on_done: Callable[[], None] | None) -> list[JudgeVerdict]:
        """Verdicts in job order.

        First the plan, before any call: each job's cache key, one question per distinct key
        (jobs asking the same thing share its verdict), and the store's answers. Hashing and
        SQLite reads both release the GIL; done here, they do not stall the event loop while
        litellm's worker threads hold it.

        Then each open question gets its own task, at most ``concurrency`` of them alive at a
        time. A task hands its validated verdict to the store's writer thread and ends, making
        room for the next question; a job counts as done once its verdict is committed. At most
        ``concurrency`` verdicts wait to be committed at any time (a task that would exceed it
        asks the writer to commit now and waits), so a run killed at any moment loses at most
        2 x ``concurrency`` calls: those in flight and those answered but not yet stored. None
        whose verdict was stored repeats.

        A task per call, not long-lived workers: each call runs in its own copy of the run's
        context, so context variables one call sets (litellm stamps a trace id on each) cannot
        carry over to the next; and on the benchmark (benchmarks/bench_judge.py, paired rounds)
        a run took ~5% less wall and CPU than with 32 workers that went straight from one reply
        to their next call.
        """
        results: list[JudgeVerdict | None] = [None] * len(jobs)

        def answer(indexes: list[int], verdict: JudgeVerdict) -> None:
            for index in indexes:
                results[index] = verdict
                if on_done is not None:
                    on_done()

        def hit(indexes: list[int], cached: JudgeVerdict) -> None:
            self.ledger.cache_hits += len(indexes)
            cached.provenance.cache_hit = True
            cached.provenance.attempts = 0
            answer(indexes, cached)

        def fingerprints(indexes: list[int]) -> list[str]:
            return list(dict.fromkeys(fp for index in indexes if (fp := jobs[index].fingerprint) is not None))

        questions: dict[str, list[int]] = {}
        for index in self._by_fingerprint(jobs, hit):  # rendered only when the memo cannot answer
            questions.setdefault(jobs[index].key, []).append(index)

        open_questions: list[tuple[str, list[int]]] = []
        remember: list[tuple[str, str]] = []  # (fingerprint, key) of hits the memo did not know yet
        cached_verdicts = self._cached([(key, jobs[indexes[0]].axis) for key, indexes in questions.items()])
        for key, indexes in questions.items():
            cached = cached_verdicts.get(key)
            if cached is not None and (problem := _foreign(cached, jobs[indexes[0]])) is not None:
                self.refused.append((key, problem))
                self.ledger.count_refused(problem)
                cached = None
            if cached is None:
                open_questions.append((key, indexes))
                continue
            remember += [(fp, key) for fp in fingerprints(indexes)]
            hit(indexes, cached)
        # A read-only store (a checkout that cannot be written) serves its hits and stores nothing.
        writable = self.store is not None and self.store.writable
        if not open_questions:
            if remember and writable:
                with CacheWriter(self.store) as memo:
                    memo.remember(remember)
            return [r for r in results if r is not None]
        if not self._prepared:
            self.backend.prepare()  # imports (seconds) now, not inside the first timed call
            self._prepared = True

        writer = CacheWriter(self.store) if writable else None
        if writer is not None and remember:
            writer.remember(remember)
        calls = asyncio.Semaphore(self.concurrency)  # questions being asked
        unstored = asyncio.Semaphore(self.concurrency)  # verdicts handed to the writer, not yet committed
        storing: set[asyncio.Future[None]] = set()
        failures: list[BaseException] = []

        def committed(indexes: list[int], verdict: JudgeVerdict, future: asyncio.Future[None]) -> None:
            unstored.release()
            storing.discard(future)
            if future.cancelled():
                return
            if (error := future.exception()) is not None:
                failures.append(error)
            else:
                answer(indexes, verdict)

        async def question(key: str, indexes: list[int]) -> None:
            try:
                job = jobs[indexes[0]]
                verdict = await ask(job, self.backend, self.connect, key=key, ledger=self.ledger, pacer=self.pacer,
                                    clock=self.clock, slot=self._slot(job.judge), answers=len(indexes))
                if verdict.status == "scored" and writer is None:
                    self._memo.remember(key, verdict)  # no store keeps it for a later window
                if writer is None or verdict.status != "scored":
                    answer(indexes, verdict)
                    return
                # Waiting for the commit would hold this question's slot for up to the writer's
                # window (it commits in groups up to 0.1 s apart), so a task waits only when
                # ``concurrency`` verdicts are already waiting to be committed.
                if unstored.locked():
                    writer.flush()  # every slot waits on the writer: commit now, not at the window's end
                await unstored.acquire()
                future = writer.put(key, verdict, fingerprints(indexes))
                storing.add(future)
                future.add_done_callback(partial(committed, indexes, verdict))
            finally:
                calls.release()

        try:
            try:
                async with asyncio.TaskGroup() as asking:  # an error in one call cancels the others
                    for key, indexes in open_questions:
                        await calls.acquire()
                        if failures:  # a failed write stops the run: nothing more can be stored
                            calls.release()
                            break
                        asking.create_task(question(key, indexes))
            except BaseExceptionGroup as group:
                raise group.exceptions[0] from None  # as itself: callers catch judgekit's errors by type
            if storing:
                writer.flush()
                await asyncio.wait(set(storing))
        finally:
            if writer is not None:
                writer.close()  # stores what was handed over, even on cancellation
            if self.store is not None:
                self.ledger.cache_withheld = self.store.report().get("withheld", 0)
        if failures:
            raise failures[0]
        return [r for r in results if r is not None]

    def _by_fingerprint(self, jobs: list[JudgeJob], hit: Callable[[list[int], JudgeVerdict], None]) -> list[int]:
        """Answer (``hit``) the jobs whose fingerprint the store's memo names a stored verdict for,
        without rendering their prompts; the indexes of the others, in order. A verdict found
        this way is checked as any cached one is; one that is refused, or missing, leaves its
        jobs to be rendered and looked up by their own key (where a refusal is counted once)."""
        lookup = look_up_by_fingerprint(jobs, self.store)
        for reason in lookup.refused:
            self.ledger.count_refused(reason)
        rest = lookup.rest
        for key, cached, indexes in lookup.found:
            if _foreign(cached, jobs[indexes[0]]) is not None:
                rest.extend(indexes)
                continue
            for index in indexes:
                jobs[index].known_key = key
            hit(indexes, cached)
        return sorted(rest)

    def _cached(self, wanted: list[tuple[str, str]]) -> dict[str, JudgeVerdict]:
        """What this run and the store already hold for these questions, read in one go. The
        memo (verdicts this run asked for and no store could keep) comes first, and the store is
        not read for its keys: what a read-only store holds under them may be the entry refused
        when they were asked, and would be refused, and asked, again in every later window."""
        found = {key: verdict for key, _ in wanted if (verdict := self._memo.get(key)) is not None}
        if self.store is not None:
            before = len(self.store.refused)
            found |= self.store.get_many([(key, axis) for key, axis in wanted if key not in found])
            report = self.store.report()
            self.ledger.cache_dir = report.get("directory")
            self.ledger.cache_read_only = not self.store.writable
            for _, reason in list(self.store.refused)[before:]:
                self.ledger.count_refused(reason)
        return found

    def _slot(self, judge: JudgeTarget) -> asyncio.Semaphore:
        """Calls to one server never exceed its slots, so queued calls don't time out there."""
        key = (judge.model_pin, judge.api_base)
        if key not in self._slots:
            self._slots[key] = asyncio.Semaphore(judge.max_concurrency or self.concurrency)
        return self._slots[key]


def _foreign(cached: JudgeVerdict, job: JudgeJob) -> str | None:
    """Why a cached verdict is not this job's own (None when it is).

    The key already covers the judge, the rubric and the template; the provenance stored with
    the entry must say the same, or a tampered entry could claim another judge's identity (and
    so its approval). Whether the reported model matched the pin is worked out again, never
    taken from the entry.
    """
    if differing := differing_identity(cached, job):
        return f"its provenance names another judge or rubric ({', '.join(differing)})"
    cached.provenance.model_mismatch = model_mismatch(job.judge, cached.provenance.reported_model)
    return None
