"""The names judge runs were imported by before ``run/`` split them up: a job and its keys live
in ``jobs``, one question in ``ask``, the executors in ``execute``, the memo in ``memo``, the
ledger in ``ledger``. ``JudgeRunner`` is the local executor under its former name and arguments."""

from __future__ import annotations

import time
from collections.abc import Callable

from judgekit.cache.base import VerdictStore
from judgekit.judge.backend import Backend
from judgekit.judge.target import Connection, JudgeTarget
from judgekit.run.ask import direct_connection
from judgekit.run.execute import LocalExecutor
from judgekit.run.jobs import (
    FINGERPRINT_FORMAT,
    JSON_SPACE_CHARS,
    JudgeJob,
    answer_chars_bound,
    answer_schema,
    differing_identity,
    response_format,
)
from judgekit.run.ledger import Ledger
from judgekit.run.memo import MEMO_SIZE, MemoLookup, look_up_by_fingerprint
from judgekit.suite import Budget
from judgekit.verdict import JudgeVerdict

__all__ = [
    "FINGERPRINT_FORMAT", "JSON_SPACE_CHARS", "MEMO_SIZE", "JudgeJob", "JudgeRunner", "Ledger", "MemoLookup",
    "answer_chars_bound", "answer_schema", "differing_identity", "direct_connection", "look_up_by_fingerprint",
    "response_format",
]


class JudgeRunner(LocalExecutor):
    """``LocalExecutor`` with ``cache`` for its store, one ``on_done`` callback per job answered,
    ``run`` for ``execute``, and ``direct_connection`` as its default ``connect`` (no embedded
    judge)."""

    def __init__(
        self,
        *,
        backend: Backend | None = None,
        cache: VerdictStore | None = None,
        concurrency: int = 8,
        budget: Budget | None = None,
        on_done: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        connect: Callable[[JudgeTarget], Connection] = direct_connection,
    ):
        super().__init__(store=cache, backend=backend, concurrency=concurrency, budget=budget, clock=clock,
                         connect=connect)
        self.on_done = on_done

    @property
    def cache(self) -> VerdictStore | None:
        return self.store

    async def run(self, jobs: list[JudgeJob]) -> list[JudgeVerdict]:
        """Verdicts in job order (``LocalExecutor.execute``)."""
        return await self._run(list(jobs), self.on_done)
