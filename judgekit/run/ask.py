"""Asking one question: the judge's call, its retries, the reply's validation and provenance.

``ask`` is the unit every executor reuses, whatever runs it (this machine's event loop, a Ray
task, a batch worker): it never raises for what a judge does (a timeout, a provider error, a
reply that does not validate, a spent budget); each comes back as an unscored verdict with its
reason, and the ledger counts the calls, tokens and cost spent on it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, nullcontext
from typing import Any

from judgekit._util.clock import utc_now
from judgekit._util.text import redact
from judgekit._util.version import __version__
from judgekit.judge.backend import Backend, CallFailed, CallRequest, count_prompt_tokens, litellm_version
from judgekit.judge.target import Connection, JudgeTarget
from judgekit.run.jobs import JudgeJob, identity_of, model_mismatch
from judgekit.run.ledger import Ledger
from judgekit.run.pace import CallPace, Endpoint, LocalPacer, Pacer
from judgekit.suite import Budget
from judgekit.verdict import JudgeVerdict, Provenance, ReplyProblem, read_reply


def direct_connection(target: JudgeTarget) -> Connection:
    """A connection without an executor's help (tests, benchmarks): no embedded judge, and no
    key read but the target's own variable."""
    from judgekit.judge.resolve import Connector

    if target.embedded:
        raise RuntimeError("the embedded judge needs a Connector that can start it")
    return Connector(None)(target)


async def ask(
    job: JudgeJob,
    backend: Backend,
    connection: Connection | Callable[[JudgeTarget], Connection] | None = None,
    *,
    key: str | None = None,
    ledger: Ledger | None = None,
    budget: Budget | None = None,
    clock: Callable[[], float] = time.monotonic,
    slot: AbstractAsyncContextManager[Any] | None = None,
    answers: int = 1,
    pacer: Pacer | None = None,
) -> JudgeVerdict:
    """The judge's verdict on ``job``: called through ``backend``, the reply validated against the
    job's answer schema, with its provenance; never raises for what the judge does.

    ``connection``: where and with which key to call, or a function that makes it from the
    job's target (called only when a call is made); None: ``direct_connection``. ``key``: the
    verdict's cache key (default ``job.key``). ``ledger``: counts calls, tokens, cost, failed
    attempts and unscored verdicts (``answers`` of them: the jobs this one question answers).
    ``pacer``: the endpoint's rate and the budget, shared with the other calls of the run: each
    call waits for its turn there, and once the budget is spent nothing is called and the
    verdict is unscored (``budget``); None: a pacer of its own, holding ``budget`` against what
    ``ledger`` has spent. ``slot``: held around each call (a semaphore bounding the calls to one
    server); the time spent waiting for it or for the pacer is not the judge's latency, which
    ``clock`` measures. A reply the judge should be asked again for (not an answer) is retried
    ``spec.invalid_reply_retries`` times, then unscored (``parse_failure``).
    """
    key = job.key if key is None else key
    ledger = Ledger() if ledger is None else ledger
    if pacer is None:
        pacer = LocalPacer(budget=budget, spent_tokens=ledger.tokens, spent_usd=ledger.cost_usd)
    verdict = await _ask(job, backend, connection, key, ledger, pacer, clock, slot or nullcontext())
    if verdict.unscored_reason is not None:
        ledger.count_unscored(verdict.unscored_reason, answers)
    return verdict


async def _ask(job: JudgeJob, backend: Backend, connection: Connection | Callable[[JudgeTarget], Connection] | None,
               key: str, ledger: Ledger, pacer: Pacer, clock: Callable[[], float],
               slot: AbstractAsyncContextManager[Any]) -> JudgeVerdict:
    spec = job.judge.spec
    endpoint = Endpoint.of(job.judge)
    # Reserved as the dry run estimates a call: the prompt's counted tokens plus max_tokens.
    reserve = count_prompt_tokens(job.judge.litellm_model, job.prompt.messages) + spec.max_tokens \
        if endpoint.counts_tokens else 0
    if (spent := await pacer.acquire(endpoint, reserve)) is not None:
        return unscored(job, key, "budget", spent)

    if connection is None:
        connection = direct_connection(job.judge)
    elif not isinstance(connection, Connection):
        connection = connection(job.judge)
    request = call_request(job, connection, pace=CallPace(pacer, endpoint))
    started = clock()
    attempts = prompt_tokens = completion_tokens = 0
    cost: float | None = 0.0
    problem = ""
    queued_s = 0.0  # waiting for the endpoint's turn or a free slot on the server is not the judge's latency

    def latency() -> float:
        return clock() - started - queued_s

    for call in range(1 + spec.invalid_reply_retries):
        try:
            waiting = clock()
            if call:  # asking again is another call: its turn, and its tokens, on the endpoint
                await pacer.acquire(endpoint, reserve, check_budget=False)
            async with slot:
                queued_s += clock() - waiting
                reply = await backend.complete(request, max_attempts=spec.max_attempts)
        except CallFailed as failed:
            pacer.settle(endpoint, reserve, None, None)
            attempts += failed.attempts
            ledger.calls += failed.attempts
            ledger.count_failures(failed.failures)
            return unscored(job, key, failed.reason, failed.detail, attempts=attempts, latency_s=latency())
        attempts += reply.attempts
        ledger.calls += reply.attempts
        ledger.count_failures(reply.failures)
        ledger.prompt_tokens += reply.prompt_tokens
        ledger.completion_tokens += reply.completion_tokens
        prompt_tokens += reply.prompt_tokens
        completion_tokens += reply.completion_tokens
        # The embedded judge runs on this machine: no provider bill, so $0 (as the dry run
        # estimates it), not the "unknown" of a model litellm's cost map does not list.
        priced = 0.0 if job.judge.embedded else reply.cost_usd
        pacer.settle(endpoint, reserve, reply.prompt_tokens + reply.completion_tokens, priced)
        if priced is None:
            ledger.calls_without_cost += 1
            cost = None
        else:
            ledger.cost_usd += priced
            cost = None if cost is None else cost + priced
        usage = {
            "reported_model": reply.reported_model,
            "model_mismatch": model_mismatch(job.judge, reply.reported_model),
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "cost_usd": cost,
            "attempts": attempts,
        }
        outcome = read_reply(job.axis, reply.content, reply.refusal, reply.finish_reason, spec.max_tokens)
        if isinstance(outcome, ReplyProblem):
            if outcome.retry:  # not an answer; asked again while retries are left
                problem = outcome.detail
                continue
            return unscored(job, key, outcome.reason, outcome.detail, latency_s=latency(), **usage)
        return JudgeVerdict(
            axis=job.axis, status="scored", answer=outcome,
            provenance=provenance(job, key, latency_s=latency(), **usage),
        )
    return unscored(job, key, "parse_failure", problem, latency_s=latency(), **usage)


def call_request(job: JudgeJob, connection: Connection, *, pace: CallPace | None = None) -> CallRequest:
    """The request that asks ``job`` through ``connection``: online (``pace``: the endpoint's
    pacer, which every attempt waits on), and line by line in a batch (no pace)."""
    spec = job.judge.spec
    answer_format, extra_body = job.request_format()
    return CallRequest(
        model=job.judge.litellm_model,
        messages=job.prompt.messages,
        response_format=answer_format,
        extra_body=extra_body,
        temperature=spec.temperature,
        seed=spec.seed,
        max_tokens=spec.max_tokens,
        timeout_s=spec.timeout_s,
        api_base=connection.api_base,
        api_key=connection.api_key,
        pace=pace,
    )


def provenance(job: JudgeJob | dict[str, Any], key: str, **extra: Any) -> Provenance:
    """A verdict's provenance for ``job`` (or its ``identity_of``) under ``key``: its judge and
    rubric, judgekit's and litellm's versions, when it was made, and ``extra`` (usage, latency,
    attempts)."""
    return Provenance(
        **(job if isinstance(job, dict) else identity_of(job)),
        judgekit_version=__version__,
        litellm_version=litellm_version(),
        created_at=utc_now(),
        cache_key=key,
        **extra,
    )


def unscored(job: JudgeJob, key: str, reason: str, detail: str, **extra: Any) -> JudgeVerdict:
    """An unscored verdict on ``job`` for ``reason``; ``detail`` is masked and cut to 1000 characters."""
    return JudgeVerdict(
        axis=job.axis, status="unscored", unscored_reason=reason, detail=redact(detail)[:1000],
        provenance=provenance(job, key, **extra),
    )
