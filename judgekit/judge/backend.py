"""The litellm backend: the only module that imports litellm.

One call = one chat completion at temperature 0 with a JSON-schema response format, retried
with tenacity on transient faults (429 honouring Retry-After, 5xx, timeouts, dropped
connections) with exponential backoff and jitter, a bounded number of attempts. ``sleep`` is
injected so tests run retries without waiting. A request may carry a ``Pace`` (its endpoint's
shared rate): each retry then waits for its turn there, and a 429 with Retry-After pauses the
endpoint for every call to it instead of this call alone.
"""

from __future__ import annotations

import asyncio
import math
import os
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol

from judgekit.runtime import after_heavy_import

MAX_RETRY_AFTER_S = 60.0
_UNPRICED: set[str | None] = set()  # models litellm's cost map cannot price


class Pace(Protocol):
    """One call's share of its endpoint's rate (``judgekit.run.pace`` makes them)."""

    async def next_attempt(self) -> None:
        """Wait until the endpoint may be called again (a retry is one more request)."""
        ...

    def rate_limited(self, retry_after_s: float) -> None:
        """The endpoint answered 429 with Retry-After: every call to it waits that long."""
        ...


@dataclass
class CallRequest:
    model: str
    messages: list[dict[str, str]]
    response_format: dict[str, Any] | None
    temperature: float
    seed: int
    max_tokens: int
    timeout_s: float
    api_base: str | None = None
    api_key: str | None = None
    extra_body: dict[str, Any] | None = None
    """Fields the OpenAI API does not name, sent in the request body as they are (llama.cpp's
    ``grammar`` for the embedded judge)."""
    pace: Pace | None = None
    """The endpoint's shared rate, which retries wait on (None: each retry backs off alone)."""


@dataclass
class RawReply:
    content: str | None
    refusal: str | None
    reported_model: str | None
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None
    attempts: int
    finish_reason: str | None = None
    failures: tuple[str, ...] = ()  # why each earlier attempt got no reply ('timeout' | 'provider_error')


class Backend(Protocol):
    """What answers judge calls: litellm here; a remote worker or a test double elsewhere."""

    async def complete(self, request: CallRequest, *, max_attempts: int | None = None) -> RawReply:
        """One reply, or CallFailed('timeout' | 'provider_error') after bounded attempts."""
        ...

    def prepare(self) -> None:
        """Get ready to call (imports, connections) before the first timed call."""
        ...

    def close(self) -> None:
        """Release what is bound to this run's event loop (pooled connections)."""
        ...


class CallFailed(Exception):
    """A call that did not produce a reply: ``reason`` is 'timeout' or 'provider_error', that of
    the last attempt; ``failures`` holds each attempt's."""

    def __init__(self, reason: str, detail: str, failures: tuple[str, ...]):
        super().__init__(detail)
        self.reason = reason
        self.detail = detail
        self.failures = failures

    @property
    def attempts(self) -> int:
        return len(self.failures)


_IMPORTED = False


def _litellm():
    """litellm, imported on first use (seconds, ~200 MB): never when every verdict is cached."""
    global _IMPORTED
    if not _IMPORTED:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # never fetch the price map
    import litellm

    if not _IMPORTED:
        _IMPORTED = True
        litellm.suppress_debug_info = True
        litellm.telemetry = False
        after_heavy_import()
    return litellm


@lru_cache(maxsize=1)
def litellm_version() -> str:
    from importlib.metadata import version

    return version("litellm")


def _retry_after(exc: BaseException) -> float | None:
    for headers in (
        getattr(getattr(exc, "response", None), "headers", None),
        getattr(exc, "litellm_response_headers", None),
        getattr(exc, "headers", None),
    ):
        if not headers:
            continue
        value = headers.get("retry-after") or headers.get("Retry-After")
        if value is None:
            continue
        try:
            return min(max(float(value), 0.0), MAX_RETRY_AFTER_S)
        except ValueError:
            continue
    return None


def count_prompt_tokens(model: str, messages: list[dict[str, str]]) -> int:
    """The prompt's tokens as litellm's ``token_counter`` counts them for ``model`` (its default
    tokenizer for a model it does not know: an approximation)."""
    return int(_litellm().token_counter(model=model, messages=messages))


def _is_rate_limit(exc: BaseException) -> bool:
    return isinstance(exc, _litellm().RateLimitError) or getattr(exc, "status_code", None) == 429


def _report(exc: BaseException, pace: Pace | None) -> None:
    """A 429 with Retry-After pauses its endpoint for every call to it (the last attempt's too:
    the provider asked every caller to wait), when the call is paced."""
    if pace is not None and _is_rate_limit(exc) and (after := _retry_after(exc)) is not None:
        pace.rate_limited(after)


def _is_transient(exc: BaseException) -> bool:
    litellm = _litellm()
    transient = (
        litellm.RateLimitError,
        litellm.InternalServerError,
        litellm.ServiceUnavailableError,
        litellm.APIConnectionError,
        litellm.Timeout,
        asyncio.TimeoutError,
    )
    if isinstance(exc, transient):
        return True
    status = getattr(exc, "status_code", None)
    return isinstance(status, int) and status >= 500


def _describe(exc: BaseException | None) -> str:
    """One line for a failed call. litellm puts a Python traceback (and the raw reply) inside
    the message of a reply it could not read: keep what comes before it.

    Cut only far past what a verdict keeps (jobs.py masks secrets, then keeps 1,000
    characters): a key an error body echoes must be whole when it is masked, not cut in two."""
    text = f"{type(exc).__name__}: {exc}".split("Traceback (most recent call last)")[0]
    return " ".join(text[:20_000].split())


def _failure_reason(exc: BaseException) -> str:
    litellm = _litellm()
    return "timeout" if isinstance(exc, (litellm.Timeout, asyncio.TimeoutError)) else "provider_error"


class LitellmBackend:
    """Calls any provider litellm supports, or an OpenAI-compatible ``api_base``."""

    def __init__(
        self,
        *,
        max_attempts: int = 4,
        backoff_base_s: float = 0.5,
        backoff_max_s: float = 20.0,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rng: random.Random | None = None,
    ):
        self.max_attempts = max_attempts
        self.backoff_base_s = backoff_base_s
        self.backoff_max_s = backoff_max_s
        self.sleep = sleep
        self.rng = rng or random.Random(0)

    def prepare(self) -> None:
        """Import litellm now (seconds), not inside the first timed call, and start the run with
        fresh HTTP clients: a connection pooled by earlier calls in this process (on another
        event loop, or to a server that has stopped since and whose port was given to a new one)
        is never tried, so it never costs a failed attempt."""
        _litellm().in_memory_llm_clients_cache.flush_cache()

    def close(self) -> None:
        """litellm keeps its HTTP clients across calls, and a client's pooled connections belong
        to the event loop that made them: dropped at the end of a run, the next run (another
        loop, in the same process) starts with fresh ones instead of failing an attempt on a
        dead connection."""
        if _IMPORTED:
            _litellm().in_memory_llm_clients_cache.flush_cache()

    def _backoff(self, exc: BaseException | None, attempt_number: int, pace: Pace | None = None) -> float:
        """Retry-After when the server gave one; otherwise exponential backoff with full jitter.
        0 for a 429's Retry-After with a ``pace``: it paused the whole endpoint there (``_report``),
        and the retry waits for its turn on the pace."""
        after = _retry_after(exc) if exc is not None else None
        if after is not None and pace is not None and _is_rate_limit(exc):
            return 0.0
        if after is not None:
            return after
        cap = min(self.backoff_max_s, self.backoff_base_s * 2 ** (attempt_number - 1))
        return self.rng.uniform(0, cap)

    async def complete(self, request: CallRequest, *, max_attempts: int | None = None) -> RawReply:
        """One reply, or CallFailed('timeout' | 'provider_error') after bounded attempts."""
        litellm = _litellm()
        max_attempts = max_attempts or self.max_attempts
        kwargs = completion_kwargs(request)

        async def call():
            # A safety net over litellm's own timeout (no extra task, unlike wait_for).
            async with asyncio.timeout(request.timeout_s + 5):
                return await litellm.acompletion(**kwargs)

        # The first attempt runs bare: most calls succeed, and tenacity's bookkeeping costs
        # about as much as judgekit's own work per verdict. Retries go through tenacity.
        try:
            response = await call()
        except Exception as exc:  # noqa: BLE001 - classified just below
            _report(exc, request.pace)
            if not _is_transient(exc) or max_attempts == 1:
                raise CallFailed(_failure_reason(exc), _describe(exc), (_failure_reason(exc),)) from None
            return await self._retry(call, exc, max_attempts, request.pace)
        return self._read(response, failures=())

    async def _retry(self, call, first_failure: BaseException, max_attempts: int, pace: Pace | None) -> RawReply:
        from tenacity import AsyncRetrying, RetryError, retry_if_exception, stop_after_attempt

        if delay := self._backoff(first_failure, 1, pace):
            await self.sleep(delay)
        failures = [_failure_reason(first_failure)]

        async def wait(seconds: float) -> None:
            if seconds > 0:  # 0: the pace waits instead (a 429 paused the endpoint there)
                await self.sleep(seconds)

        retrying = AsyncRetrying(
            stop=stop_after_attempt(max_attempts - 1),
            wait=lambda state: self._backoff(state.outcome.exception(), state.attempt_number + 1, pace),
            retry=retry_if_exception(_is_transient),
            sleep=wait,
            reraise=False,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    if pace is not None:
                        await pace.next_attempt()
                    try:
                        response = await call()
                    except Exception as exc:
                        failures.append(_failure_reason(exc))
                        _report(exc, pace)
                        raise
        except RetryError as exc:
            last = exc.last_attempt.exception()
            raise CallFailed(_failure_reason(last), _describe(last), tuple(failures)) from None
        except Exception as exc:  # noqa: BLE001 - a provider refusing the request (4xx) is not transient
            raise CallFailed(_failure_reason(exc), _describe(exc), tuple(failures)) from None
        return self._read(response, failures=tuple(failures))

    def _cost(self, response: Any) -> float | None:
        """From litellm's offline cost map; None (unknown, not zero) for a model it cannot price.

        litellm prices every response it returns (``_hidden_params["response_cost"]``, its
        documented place for it); that figure is used as it is, since pricing it again costs
        0.6 ms of CPU per reply (measured alone). Only when litellm left it out is the cost map asked
        here. Models it cannot price are remembered for the process: the failing lookup walks
        the whole cost map (tens of milliseconds the first time)."""
        hidden = getattr(response, "_hidden_params", None)
        priced = hidden.get("response_cost") if isinstance(hidden, dict) else None
        if priced is not None:
            try:
                cost = float(priced)
            except (TypeError, ValueError):
                return None
            return cost if math.isfinite(cost) and cost >= 0 else None
        model = getattr(response, "model", None)
        if model in _UNPRICED:
            return None
        try:
            return float(_litellm().completion_cost(completion_response=response))
        except Exception:  # noqa: BLE001 - litellm raises several kinds for an unknown model
            _UNPRICED.add(model)
            return None

    def _read(self, response: Any, failures: tuple[str, ...]) -> RawReply:
        """Whatever a reply holds, it becomes a RawReply or this call's CallFailed: one reply
        never aborts the run. ``_reply`` checks every field it reads, so the last resort here
        is for a reply no check foresaw."""
        try:
            return self._reply(response, failures)
        except CallFailed:
            raise
        except Exception as exc:  # noqa: BLE001 - see above
            raise CallFailed("provider_error", f"could not read the reply: {_describe(exc)}",
                             (*failures, "provider_error")) from None

    def _reply(self, response: Any, failures: tuple[str, ...]) -> RawReply:
        return reply_of(response, failures, self._cost)


def completion_kwargs(request: CallRequest) -> dict[str, Any]:
    """litellm's ``completion`` arguments for ``request``: its ``request_params`` and how to send
    them (model as litellm names it, timeout, server, key; no retries: ours)."""
    kwargs: dict[str, Any] = {"model": request.model, **request_params(request), "timeout": request.timeout_s,
                              "num_retries": 0}  # we retry, so backoff and Retry-After are ours
    if request.api_base:
        kwargs["api_base"] = request.api_base
    if request.api_key:
        kwargs["api_key"] = request.api_key
    if request.extra_body:
        kwargs["extra_body"] = request.extra_body
    return kwargs


def request_params(request: CallRequest) -> dict[str, Any]:
    """What a chat-completions request asks, besides its model: the messages, the sampling
    parameters and the response format (an online call and a batch line send the same)."""
    params: dict[str, Any] = {
        "messages": request.messages,
        "temperature": request.temperature,
        "seed": request.seed,
        "max_tokens": request.max_tokens,
    }
    if request.response_format is not None:
        params["response_format"] = request.response_format
    return params


def reply_of(response: Any, failures: tuple[str, ...] = (),
             cost: Callable[[Any], float | None] = lambda response: None) -> RawReply:
    """The parts of a chat completion judgekit reads, each checked: a server may send anything
    with HTTP 200 (``"choices": []``, a number for content), and such a reply is that verdict's
    provider_error (``CallFailed``), never a crash of the run. ``cost(response)`` prices it."""
    choices = getattr(response, "choices", None)
    if not isinstance(choices, list) or not choices:
        raise CallFailed("provider_error", "malformed reply: it holds no choice", (*failures, "provider_error"))
    message = getattr(choices[0], "message", None)
    content = getattr(message, "content", None)
    refusal = getattr(message, "refusal", None)
    if message is None or not isinstance(content, str | None) or not isinstance(refusal, str | None):
        raise CallFailed("provider_error", "malformed reply: its message is not text",
                         (*failures, "provider_error"))
    usage = getattr(response, "usage", None)
    reported = getattr(response, "model", None)
    finish_reason = getattr(choices[0], "finish_reason", None)
    return RawReply(
        content=content,
        refusal=refusal,
        reported_model=reported if isinstance(reported, str) else None,
        prompt_tokens=_count(getattr(usage, "prompt_tokens", 0)),
        completion_tokens=_count(getattr(usage, "completion_tokens", 0)),
        cost_usd=cost(response),
        attempts=len(failures) + 1,
        failures=failures,
        finish_reason=finish_reason if isinstance(finish_reason, str) else None,
    )


def _count(value: Any) -> int:
    """A token count as reported; anything but a non-negative integer counts as 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
