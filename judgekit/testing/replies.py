"""Scripted replies of the fake OpenAI server: the models, how each becomes an HTTP answer, and
which reply a script gives each request (``Chooser``).

Public names are re-exported by ``judgekit.testing``; this module holds no network code.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

SCRIPT_FORMAT_VERSION = 1

ReplyKind = Literal[
    "ok",
    "malformed",
    "prose",
    "wrong_types",
    "missing_fields",
    "refusal",
    "rate_limit",
    "server_error",
    "slow",
    "drop",
    "raw",
    "auth_error",
]

# Kinds whose assistant message text the scripter must supply.
_NEEDS_CONTENT = {"ok", "prose", "wrong_types", "missing_fields", "slow", "raw"}
_NO_CONTENT = {"rate_limit", "server_error", "drop", "auth_error"}
DEFAULT_MALFORMED = '{"verdict": "pass", "reason": "unterminated'
DEFAULT_REFUSAL = "I can't help with that"


class Reply(BaseModel):
    """What the scripted server answers to one chat-completions request.

    Build one directly (``Reply(kind="ok", content="...")``) or with the named constructors
    (``Reply.ok({...})``, ``Reply.rate_limit(2)``...). Fields that do not apply to a kind are
    rejected rather than ignored.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: ReplyKind = Field(
        default="ok",
        description=(
            "ok/malformed/prose/wrong_types/missing_fields: HTTP 200 with `content` as the "
            "assistant text (the kind is only a label). refusal: HTTP 200, null content and "
            "`message.refusal` set. rate_limit: HTTP 429 with Retry-After. server_error: HTTP "
            "`status` (5xx). slow: wait `delay_s`, then HTTP 200 with `content`. drop: close the "
            "connection without any response. raw: HTTP 200 whose whole body is `content`, sent as "
            "it is (a response that is not a chat completion, `\"choices\": []`...). auth_error: "
            "HTTP 401 whose OpenAI error body echoes the request's API key (from its Authorization "
            "header), as OpenAI's \"Incorrect API key provided\" once did and some proxies still do."
        ),
    )
    content: str | None = Field(
        default=None,
        description=(
            "Assistant text. A mapping or list is stored as its JSON text. prose: the JSON that "
            "gets wrapped in prose. malformed: defaults to a truncated JSON object. refusal: the "
            "refusal text (default \"I can't help with that\")."
        ),
    )
    delay_s: float | None = Field(
        default=None,
        ge=0,
        description="Seconds to wait before answering; None uses the server's default_delay_s. "
        "Required and > 0 for slow.",
    )
    model: str | None = Field(
        default=None,
        description="Model name reported in the response; None echoes the requested model.",
    )
    status: int | None = Field(
        default=None, ge=500, le=599, description="server_error only: the HTTP status (default 500)."
    )
    retry_after_s: int | None = Field(
        default=None, ge=0, description="rate_limit only: the Retry-After header in seconds (default 1)."
    )
    finish_reason: Literal["stop", "length", "content_filter"] = Field(
        default="stop", description="choices[0].finish_reason of a 200 answer."
    )
    prompt_tokens: int | None = Field(
        default=None, ge=0, description="usage.prompt_tokens; None estimates ~4 characters a token."
    )
    completion_tokens: int | None = Field(
        default=None, ge=0, description="usage.completion_tokens; None estimates from the content."
    )

    @field_validator("content", mode="before")
    @classmethod
    def _json_text(cls, value: Any) -> Any:
        if isinstance(value, Mapping | list):
            return json.dumps(value, ensure_ascii=False)
        return value

    @model_validator(mode="after")
    def _fields_fit_kind(self) -> Reply:
        kind = self.kind
        if kind in _NEEDS_CONTENT and self.content is None:
            raise ValueError(f"{kind!r} replies need `content`")
        if kind in _NO_CONTENT and self.content is not None:
            raise ValueError(f"{kind!r} replies take no `content`")
        if kind == "slow" and not self.delay_s:
            raise ValueError("'slow' replies need `delay_s` > 0 (longer than the client timeout)")
        if self.status is not None and kind != "server_error":
            raise ValueError("`status` applies only to 'server_error' replies")
        if self.retry_after_s is not None and kind != "rate_limit":
            raise ValueError("`retry_after_s` applies only to 'rate_limit' replies")
        return self

    # Named constructors: the common cases in one short call.

    @classmethod
    def ok(cls, content: str | Mapping[str, Any] | list[Any], **fields: Any) -> Reply:
        """HTTP 200 whose assistant text is ``content`` (a mapping becomes its JSON)."""
        return cls(kind="ok", content=content, **fields)

    @classmethod
    def malformed(cls, content: str = DEFAULT_MALFORMED, **fields: Any) -> Reply:
        """HTTP 200 whose assistant text is not valid JSON."""
        return cls(kind="malformed", content=content, **fields)

    @classmethod
    def prose(cls, content: str | Mapping[str, Any], **fields: Any) -> Reply:
        """HTTP 200 whose assistant text wraps the JSON ``content`` in chatty prose."""
        return cls(kind="prose", content=content, **fields)

    @classmethod
    def wrong_types(cls, content: str | Mapping[str, Any], **fields: Any) -> Reply:
        """HTTP 200, JSON with fields of the wrong type (the scripter writes it)."""
        return cls(kind="wrong_types", content=content, **fields)

    @classmethod
    def missing_fields(cls, content: str | Mapping[str, Any], **fields: Any) -> Reply:
        """HTTP 200, JSON lacking required fields (the scripter writes it)."""
        return cls(kind="missing_fields", content=content, **fields)

    @classmethod
    def refusal(cls, content: str = DEFAULT_REFUSAL, **fields: Any) -> Reply:
        """HTTP 200 with ``message.refusal`` set and null ``message.content``."""
        return cls(kind="refusal", content=content, **fields)

    @classmethod
    def rate_limit(cls, retry_after_s: int = 1, **fields: Any) -> Reply:
        """HTTP 429 with ``Retry-After: <retry_after_s>`` and an OpenAI error body."""
        return cls(kind="rate_limit", retry_after_s=retry_after_s, **fields)

    @classmethod
    def server_error(cls, status: int = 500, **fields: Any) -> Reply:
        """HTTP ``status`` (5xx) with an OpenAI error body."""
        return cls(kind="server_error", status=status, **fields)

    @classmethod
    def slow(cls, content: str | Mapping[str, Any], delay_s: float, **fields: Any) -> Reply:
        """Wait ``delay_s`` (make it longer than the client timeout), then answer like ``ok``."""
        return cls(kind="slow", content=content, delay_s=delay_s, **fields)

    @classmethod
    def drop(cls, **fields: Any) -> Reply:
        """Read the request, then close the connection without any response."""
        return cls(kind="drop", **fields)

    @classmethod
    def auth_error(cls, **fields: Any) -> Reply:
        """HTTP 401 "Incorrect API key provided: <the request's key>" (an error body that echoes
        the key, for tests that it is never written or printed)."""
        return cls(kind="auth_error", **fields)

    @classmethod
    def raw(cls, body: str | Mapping[str, Any] | list[Any], **fields: Any) -> Reply:
        """HTTP 200 whose body is ``body`` verbatim (a mapping becomes its JSON), not wrapped in
        a chat completion: for servers that answer with something else."""
        return cls(kind="raw", content=body, **fields)


class ScriptSpec(BaseModel):
    """A declarative, JSON-serialisable script (for ``spawn`` and the ``serve`` command).

    ``mode="sequence"`` plays ``replies`` once in arrival order; requests after the last one get
    an HTTP 500 ``script_exhausted`` error. ``mode="cycle"`` starts again from the first reply,
    so one reply in cycle mode is a constant answer.
    """

    model_config = ConfigDict(extra="forbid")

    format_version: Literal[1] = Field(default=SCRIPT_FORMAT_VERSION, description="Always 1.")
    replies: list[Reply] = Field(min_length=1, description="The replies, in order.")
    mode: Literal["sequence", "cycle"] = Field(
        default="sequence", description="sequence: play once; cycle: repeat from the start."
    )

    @classmethod
    def constant(cls, reply: Reply) -> ScriptSpec:
        """Answer every request with ``reply``."""
        return cls(replies=[reply], mode="cycle")

    @classmethod
    def cycle(cls, replies: list[Reply]) -> ScriptSpec:
        """Play ``replies`` in order, forever."""
        return cls(replies=list(replies), mode="cycle")


# --- rendering ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rendered:
    """An HTTP answer; ``body is None`` means close the connection without one."""

    status: int
    body: bytes | None
    headers: tuple[tuple[str, str], ...] = ()


def _estimate_tokens(text: str) -> int:
    return max(1, (len(text) + 3) // 4)


def _prompt_tokens(request: Mapping[str, Any]) -> int:
    total = 3  # every reply is primed with <|start|>assistant
    for message in request.get("messages") or []:
        total += 3  # role and separators
        content = message.get("content") if isinstance(message, Mapping) else None
        if isinstance(content, str):
            total += _estimate_tokens(content)
        elif isinstance(content, list):
            for part in content:
                if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                    total += _estimate_tokens(part["text"])
    return total


def _prose(json_text: str) -> str:
    return (
        "Sure! Here is my assessment of the agent's run.\n\n"
        f"```json\n{json_text}\n```\n\n"
        "Let me know if you would like me to explain any part of it."
    )


def error_body(message: str, type_: str, code: str | None) -> bytes:
    """An OpenAI-style error body."""
    payload = {"error": {"message": message, "type": type_, "param": None, "code": code}}
    return json.dumps(payload).encode()


def render(reply: Reply, request: Mapping[str, Any], *, created: int, api_key: str | None = None) -> Rendered:
    """Turn a reply into the HTTP answer to ``request`` (the parsed chat-completions body);
    ``api_key`` is the key its Authorization header carried (echoed by ``auth_error`` only)."""
    if reply.kind == "drop":
        return Rendered(status=0, body=None)
    if reply.kind == "raw":
        assert reply.content is not None  # guaranteed by Reply's validator
        return Rendered(200, reply.content.encode("utf-8", "surrogatepass"))
    if reply.kind == "rate_limit":
        seconds = reply.retry_after_s if reply.retry_after_s is not None else 1
        body = error_body(
            f"Rate limit reached for requests. Please try again in {seconds}s.",
            "requests",
            "rate_limit_exceeded",
        )
        return Rendered(429, body, (("Retry-After", str(seconds)),))
    if reply.kind == "auth_error":
        body = error_body(
            f"Incorrect API key provided: {api_key or ''}. You can find your API key at "
            "https://platform.openai.com/account/api-keys.",
            "invalid_request_error",
            "invalid_api_key",
        )
        return Rendered(401, body)
    if reply.kind == "server_error":
        body = error_body(
            "The server had an error while processing your request. Sorry about that!",
            "server_error",
            None,
        )
        return Rendered(reply.status or 500, body)

    if reply.kind == "refusal":
        text = reply.content or DEFAULT_REFUSAL
        message: dict[str, Any] = {"role": "assistant", "content": None, "refusal": text}
    else:
        assert reply.content is not None  # guaranteed by Reply's validator
        text = _prose(reply.content) if reply.kind == "prose" else reply.content
        message = {"role": "assistant", "content": text, "refusal": None}
    prompt_tokens = reply.prompt_tokens if reply.prompt_tokens is not None else _prompt_tokens(request)
    completion_tokens = (
        reply.completion_tokens if reply.completion_tokens is not None else _estimate_tokens(text)
    )
    payload = {
        "id": "chatcmpl-" + secrets.token_hex(12),
        "object": "chat.completion",
        "created": created,
        "model": reply.model or str(request.get("model") or "unknown"),
        "system_fingerprint": "fp_judgekit_scripted",
        "choices": [
            {"index": 0, "message": message, "logprobs": None, "finish_reason": reply.finish_reason}
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }
    return Rendered(200, json.dumps(payload, ensure_ascii=False).encode())


ScriptFunction = Callable[[dict[str, Any], int], Reply]
Script = Reply | Sequence[Reply] | ScriptSpec | ScriptFunction


class Chooser:
    """Picks the reply for request number ``n`` (0-based, in arrival order)."""

    def __init__(self, script: Script):
        if isinstance(script, Reply):
            script = ScriptSpec.constant(script)
        elif isinstance(script, Sequence) and not isinstance(script, str | bytes):
            script = ScriptSpec(replies=list(script), mode="sequence")
        if isinstance(script, ScriptSpec):
            self._spec: ScriptSpec | None = script
            self._function: ScriptFunction | None = None
        elif callable(script):
            self._spec = None
            self._function = script
        else:
            raise TypeError(
                "script must be a Reply, a list of Reply, a ScriptSpec or a function "
                f"(request_json, n) -> Reply; got {type(script).__name__}"
            )

    @property
    def spec(self) -> ScriptSpec | None:
        return self._spec

    def choose(self, request: dict[str, Any], n: int) -> Reply:
        if self._function is not None:
            reply = self._function(request, n)
            if not isinstance(reply, Reply):
                raise TypeError(f"script function returned {type(reply).__name__}, not Reply")
            return reply
        assert self._spec is not None
        replies = self._spec.replies
        if self._spec.mode == "cycle":
            return replies[n % len(replies)]
        if n >= len(replies):
            raise ScriptExhausted(f"script exhausted: request #{n + 1} but only {len(replies)} replies")
        return replies[n]


class ScriptExhausted(Exception):
    """A ``sequence`` script has no reply left for the request."""
