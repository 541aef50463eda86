"""Pacing judge calls: one rate per endpoint and one budget, shared by every call of a run.

An executor hands each question's ``ask`` a ``Pacer``. Before a call, ``acquire`` waits for the
endpoint's turn (one request, and the call's tokens: its prompt as the dry run counts them plus
``max_tokens``) and refuses once the budget is spent; after the reply, ``settle`` hands back
what the reservation overestimated (or takes what it underestimated) and adds the call's tokens
and cost to the budget's tally; a 429 with Retry-After makes ``slow_down`` pause the endpoint for
every call to it, instead of each call backing off on its own. ``LocalPacer`` does this in one
process; an executor that spreads calls over processes or machines implements the same protocol
in one place they all call (a Ray actor), so the rate and the budget hold for all of them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from judgekit.judge.spec import RateLimit
from judgekit.judge.target import JudgeTarget
from judgekit.run.ledger import budget_spent
from judgekit.suite import Budget

BURST_SHARE = 20
"""A minute's limit may be spent at once only up to 1/BURST_SHARE of it (at least 1); the rest
comes evenly. The pace is set so that no sliding minute holds more than the limit: a burst of
``b`` plus ``limit - b`` a minute spread evenly (a provider that counts by sliding minute never
answers 429 to a run paced at its own limit)."""


@dataclass(frozen=True)
class Endpoint:
    """What a rate counts calls against (``JudgeTarget.rate_key``, no secret) and its rate."""

    key: str
    rate: RateLimit | None = None

    @classmethod
    def of(cls, target: JudgeTarget) -> Endpoint:
        return cls(target.rate_key, target.spec.rate)

    @property
    def counts_tokens(self) -> bool:
        """Whether a call must say its tokens (counting them costs a tokenizer pass)."""
        return self.rate is not None and self.rate.tokens_per_minute is not None


@runtime_checkable
class Pacer(Protocol):
    """The rate of each endpoint and the budget of a run, shared by every call that holds it."""

    async def acquire(self, endpoint: Endpoint, tokens: int, *, check_budget: bool = True) -> str | None:
        """Wait until a call reserving ``tokens`` may go to ``endpoint`` (one request, and the
        tokens when its rate counts them); why it may not (the budget is spent) or None: go.
        ``check_budget=False`` for another attempt of a question already admitted: never refused."""
        ...

    def settle(self, endpoint: Endpoint, reserved: int, used: int | None, cost_usd: float | None) -> None:
        """A call that reserved ``reserved`` tokens spent ``used`` (None: unknown, no reply; the
        reservation stands) and cost ``cost_usd`` (None: unknown)."""
        ...

    def slow_down(self, endpoint: Endpoint, retry_after_s: float) -> None:
        """The endpoint answered 429 with Retry-After: no call goes to it for that long."""
        ...


class _Clock:
    """A seconds clock as pyrate-limiter reads one (``now()``: milliseconds, an int); duck-typed,
    so that pyrate-limiter is imported only by a run that sets a rate."""

    def __init__(self, clock: Callable[[], float]):
        self._clock = clock

    def now(self) -> int:
        return int(self._clock() * 1000)


def _bucket(per_minute: int, clock: Callable[[], float]):
    """A token bucket (pyrate-limiter's GCRA, constant state) that admits at most ``per_minute``
    in any sliding minute: a burst of ``per_minute // BURST_SHARE``, the rest evenly paced."""
    from pyrate_limiter import Duration, Rate, StateBucket, TokenBucket

    burst = max(1, per_minute // BURST_SHARE)
    return StateBucket([Rate(max(1, per_minute - burst), Duration.MINUTE, burst=burst)],
                       algorithm=TokenBucket(), clock=_Clock(clock))


@dataclass
class _Lane:
    """One endpoint's share of a ``LocalPacer``."""

    rate: RateLimit | None
    requests: object | None
    tokens: object | None
    paused_until: float = float("-inf")
    owed: int = 0  # tokens used beyond what was reserved (< 0: reserved beyond what was used)
    _turn: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None

    def turn_now(self) -> asyncio.Lock:
        """The lock calls take their turn by, in the order they came; one per event loop (an
        executor may serve runs on several loops, one after another)."""
        loop = asyncio.get_running_loop()
        if self._turn is None or self._turn[0] is not loop:
            self._turn = (loop, asyncio.Lock())
        return self._turn[1]


class LocalPacer:
    """``Pacer`` for one process: a token bucket per endpoint for its requests and one for its
    tokens (pyrate-limiter), shared by every call of the process's event loop; the budget
    against the tokens and cost that ``settle`` adds up (``spent_tokens``, ``spent_usd``: what
    was spent before). ``clock`` and ``sleep`` are injected so tests run in compressed time.
    """

    def __init__(self, *, budget: Budget | None = None, spent_tokens: int = 0, spent_usd: float = 0.0,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep):
        self.budget = budget
        self.spent_tokens = spent_tokens
        self.spent_usd = spent_usd
        self.clock = clock
        self.sleep = sleep
        self._lanes: dict[str, _Lane] = {}

    async def acquire(self, endpoint: Endpoint, tokens: int, *, check_budget: bool = True) -> str | None:
        if check_budget and (spent := budget_spent(self.budget, self.spent_tokens, self.spent_usd)) is not None:
            return spent
        lane = self._lane(endpoint)
        if lane.requests is None and lane.tokens is None:
            await self._unpaused(lane)  # no rate: only a 429's pause to wait out
        else:
            async with lane.turn_now():
                await self._unpaused(lane)
                if lane.tokens is not None and tokens:
                    wanted = tokens + lane.owed
                    lane.owed = min(0, wanted)  # a credit larger than this call is kept for the next
                    await self._take(lane, lane.tokens, max(0, wanted))
                if lane.requests is not None:
                    await self._take(lane, lane.requests, 1)
        return None

    def settle(self, endpoint: Endpoint, reserved: int, used: int | None, cost_usd: float | None) -> None:
        self.spent_tokens += used or 0
        self.spent_usd += cost_usd or 0.0
        lane = self._lanes.get(endpoint.key)
        if lane is not None and lane.tokens is not None and reserved and used is not None:
            lane.owed += used - reserved

    def slow_down(self, endpoint: Endpoint, retry_after_s: float) -> None:
        lane = self._lane(endpoint)
        lane.paused_until = max(lane.paused_until, self.clock() + retry_after_s)

    def _lane(self, endpoint: Endpoint) -> _Lane:
        lane = self._lanes.get(endpoint.key)
        if lane is None or lane.rate != endpoint.rate:  # planning allows one rate per endpoint
            rate = endpoint.rate
            rpm = rate.requests_per_minute if rate else None
            tpm = rate.tokens_per_minute if rate else None
            lane = _Lane(rate, _bucket(rpm, self.clock) if rpm else None, _bucket(tpm, self.clock) if tpm else None)
            if (old := self._lanes.get(endpoint.key)) is not None:
                lane.paused_until = old.paused_until
            self._lanes[endpoint.key] = lane
        return lane

    async def _unpaused(self, lane: _Lane) -> None:
        while (left := lane.paused_until - self.clock()) > 0:
            await self.sleep(left)

    async def _take(self, lane: _Lane, bucket, amount: int) -> None:
        """Take ``amount`` from ``bucket``, waiting as it says; a pause of the endpoint that
        comes meanwhile is waited out too. An amount above the bucket's burst is taken a burst
        at a time: a prompt larger than the burst still goes, at the bucket's pace."""
        from pyrate_limiter import RateItem

        burst = bucket.rates[0].burst
        while amount > 0:
            part = min(amount, burst)
            while True:
                await self._unpaused(lane)
                decision = bucket.put_decision(RateItem("judge", bucket.now(), part))
                if decision.allowed:
                    break
                await self.sleep(max(decision.retry_after_ms or 1, 1) / 1000)
            amount -= part


class CallPace:
    """One question's attempts paced on its endpoint (``judgekit.judge.backend.Pace``): a retry
    waits for its request's turn, and a 429 with Retry-After pauses the endpoint for all."""

    def __init__(self, pacer: Pacer, endpoint: Endpoint):
        self.pacer = pacer
        self.endpoint = endpoint

    async def next_attempt(self) -> None:
        await self.pacer.acquire(self.endpoint, 0, check_budget=False)

    def rate_limited(self, retry_after_s: float) -> None:
        self.pacer.slow_down(self.endpoint, retry_after_s)
