"""Test judges without a provider: a scripted OpenAI-compatible server on 127.0.0.1.

The server speaks the OpenAI chat-completions API over real HTTP/1.1 (keep-alive,
Content-Length), so litellm, the openai SDK and raw httpx talk to it exactly as they would to a
provider. It plays scripted replies, faults included, and records what it received::

    import litellm
    from judgekit.testing import Reply, ScriptedOpenAIServer

    script = [Reply.ok({"verdict": "pass", "reason": "booked"}), Reply.rate_limit(retry_after_s=2)]
    with ScriptedOpenAIServer(script) as server:
        response = await litellm.acompletion(
            model="openai/test-model", api_base=server.base_url, api_key="x",
            messages=[{"role": "user", "content": "..."}], num_retries=0,
        )
        assert server.request_count == 1
        assert server.requests[0]["temperature"] == 0

Endpoints: ``POST /v1/chat/completions`` (and ``/chat/completions``), ``GET /v1/models``,
``GET /_judgekit/stats`` (counts as JSON). Streaming requests get HTTP 400. The OpenAI files and
batches endpoints (``/v1/files``, ``/v1/batches``) answer each batched request with the same
script, scripted on ``server.batches`` (``judgekit.testing.batches``: states, error files,
hostile output).

Reply kinds (``Reply.kind``; each has a named constructor, e.g. ``Reply.refusal()``):

=================  ==============================================================================
``ok``             HTTP 200; ``content`` is the assistant text (typically a JSON verdict).
``malformed``      HTTP 200; text that is not valid JSON (a truncated object by default).
``prose``          HTTP 200; the JSON ``content`` wrapped in "Sure! Here is ..." prose.
``wrong_types``    HTTP 200; the scripter's JSON with wrongly typed fields (a label only).
``missing_fields`` HTTP 200; the scripter's JSON lacking fields (a label only).
``refusal``        HTTP 200; ``message.content`` null, ``message.refusal`` set (OpenAI style).
``rate_limit``     HTTP 429; ``Retry-After: <retry_after_s>``; OpenAI error body.
``server_error``   HTTP ``status`` (500 by default, any 5xx); OpenAI error body.
``slow``           waits ``delay_s`` (make it exceed the client timeout), then answers like ok.
``drop``           reads the request, then closes the connection without any response.
``raw``            HTTP 200 whose whole body is ``content``, verbatim (``"choices": []``, not JSON...).
``auth_error``     HTTP 401, OpenAI's "Incorrect API key provided: <key>" body echoing the request's
                   bearer key (tests that a key a server echoes is never written or printed).
=================  ==============================================================================

Every reply may set ``delay_s`` (latency; None uses ``default_delay_s``) and ``model`` (the
name reported back; None echoes the requested model). 200 answers carry ``id``, ``created``,
``choices[0].finish_reason`` and ``usage`` (about 4 characters a token, or set
``prompt_tokens``/``completion_tokens``).

Scripts: a ``Reply`` (answered to every request), a list of ``Reply`` (played once in arrival
order, thread-safe), a ``ScriptSpec`` (declarative, JSON-serialisable: ``mode`` "sequence" or
"cycle"), or a function ``(request_json: dict, n: int) -> Reply`` with ``n`` the 0-based arrival
number; decide on the request content to make faults independent of concurrency order. A
script that cannot answer (list exhausted, function raised) gets HTTP 500 and is listed in
``server.script_errors``.

What was received: ``server.request_count`` (chat-completions requests, total),
``server.request_count_by_kind`` (per reply kind, plus ``bad_request`` / ``script_error``),
``server.requests`` (the parsed JSON bodies), ``server.max_in_flight`` (most requests held at
once: 32 means 32 concurrent clients were not queued), ``server.in_flight`` and
``server.reset()``.

Concurrency without timing: ``server.hold()`` keeps every request in flight, unanswered, until
``server.release()``; ``server.wait_for_in_flight(n, timeout_s)`` returns True once ``n`` are
in flight at once (False when the limit passes: they were queued somewhere). ``stop()``
releases held requests and drops their replies.

Lifecycle: a context manager, or ``start()`` / ``stop()``. Stopping closes keep-alive
connections, drops replies still waiting out a delay and joins every thread.

In another process (benchmarks; the server then shares no GIL with the client)::

    with ScriptedOpenAIServer.spawn(Reply.ok("{}"), default_delay_s=0.1) as server:
        ...  # server.base_url, server.request_count (read over HTTP)

or from a shell, printing the base URL on the first stdout line::

    python -m judgekit.testing serve --port 0 --delay 0.1 --reply-file script.json
    python -m judgekit.testing serve --reply '{"kind": "ok", "content": {"verdict": "pass"}}'

where ``script.json`` is a ``ScriptSpec``, e.g.
``{"mode": "cycle", "replies": [{"kind": "ok", "content": "{}"}, {"kind": "rate_limit"}]}``.
"""

from __future__ import annotations

import json
import re

from judgekit.testing.replies import (
    SCRIPT_FORMAT_VERSION,
    Reply,
    ReplyKind,
    ScriptSpec,
)
from judgekit.testing.ratelimit import RequestsPerMinute
from judgekit.testing.server import Script, ScriptedOpenAIServer, ScriptFunction
from judgekit.testing.spawn import SpawnedScriptedServer

__all__ = [
    "SCRIPT_FORMAT_VERSION",
    "Reply",
    "ReplyKind",
    "RequestsPerMinute",
    "Script",
    "ScriptFunction",
    "ScriptSpec",
    "ScriptedOpenAIServer",
    "SpawnedScriptedServer",
    "prompt_items",
]

_DATA_LINE = re.compile(r'^([A-Z]\d*) = (".*")$')


def prompt_items(user_message: str) -> dict[str, str]:
    """Every data item of a rendered judge prompt (``P``, ``R0``, ``D3``...): id -> decoded text.
    For scripted judges that answer from what they were shown."""
    items = {}
    for line in user_message.splitlines():
        if match := _DATA_LINE.match(line):
            items[match.group(1)] = json.loads(match.group(2))
    return items


