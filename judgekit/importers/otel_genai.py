"""``judgekit import otel-genai``: OpenTelemetry GenAI traces (OTLP/JSON), one trajectory per agent run.

SRC is OTLP/JSON trace data (``{"resourceSpans": [{"scopeSpans": [{"spans": [...]}]}]}``): one
document, or JSON Lines of them as the collector's file exporter writes. Writes
``OUT/trajectories.jsonl`` and a ``suite.yaml`` to fill in (the import writer's); with
``--draft-rubric`` also ``OUT/drafts/draft-<agent>.yaml``.

Conventions followed: the OpenTelemetry GenAI semantic conventions (Development status) as
published in open-telemetry/semantic-conventions ``docs/gen-ai/`` after v1.36.0 (the
``gen_ai_latest_experimental`` form: ``gen-ai-spans.md``, ``gen-ai-agent-spans.md`` and the input
and output messages JSON schemas), attribute names checked against the Python package
opentelemetry-semantic-conventions 0.66b2; and the older event-based form of v1.36.0 and before.

The mapping:

- **a run** is the outermost ``invoke_agent`` span of a trace (``gen_ai.operation.name``, or a span
  name starting ``invoke_agent``); a trace with no agent span is one run from its root when it holds
  an inference or tool span. Spans under a nested ``invoke_agent`` (a sub-agent) are not part of
  the outer run (lost, except for the tool call that started it, if there is one). Traces without
  any GenAI span are skipped.
- **id**: ``<trace_id>-<root span id>`` (hex): unique and stable whatever else the file holds.
  ``gen_ai.conversation.id`` is kept in metadata (several runs, one per turn, often share it).
- **messages**: each inference span (``chat``, ``text_completion``, ``generate_content``, or any
  span carrying messages) gives its input and output messages: ``gen_ai.system_instructions``,
  ``gen_ai.input.messages``, ``gen_ai.output.messages`` (JSON strings or structured values; parts
  ``text``, ``tool_call``, ``tool_call_response``), or, in the older form, its span events
  ``gen_ai.system.message``, ``gen_ai.user.message``, ``gen_ai.assistant.message`` (with
  ``tool_calls``), ``gen_ai.tool.message`` and ``gen_ai.choice``, whose body is read from the
  ``gen_ai.event.content`` attribute (JSON) or from the event's attributes. The spans are read in
  start order and joined into one transcript: the part of a span's input that repeats the
  transcript so far is skipped, the rest and its output are appended (a tool call or tool result
  whose id is already there is not added twice). Without any, the run span's own messages are
  used. The transcript becomes the trajectory as ``judgekit import openai-chat`` makes it: the
  first user message is the prompt, later ones are turns (and context), system messages context,
  the last assistant text the output.
- **calls**: the transcript's tool calls, joined with ``execute_tool`` spans by
  ``gen_ai.tool.call.id`` (or, for spans without one, by tool name in order). A span gives the
  call its ``started_at``/``ended_at``, its error (``error.type`` or status ERROR, with the status
  message) and, when the messages did not hold one, its result (``gen_ai.tool.call.result``). An
  ``execute_tool`` span that matches no tool call (content capture off, or a tool the framework
  ran itself) becomes a call of its own from ``gen_ai.tool.name`` / ``gen_ai.tool.call.arguments``,
  appended after the transcript's calls in start order.
- **metadata**: ``otel: {trace_id, span_id}`` of the run's root, ``agent`` (``gen_ai.agent.name``),
  ``agent_id``, ``model`` (request model, else response model), ``system``
  (``gen_ai.provider.name``, else the older ``gen_ai.system``), ``conversation_id`` and
  ``imported_from`` (file:line). ``latency_s``: the root span's duration.
- **--draft-rubric**: ``gen_ai.tool.definitions`` (on the agent or inference spans) drafts, per
  agent, a tool-correctness rubric: one expected call per declared tool, each parameter checked
  against its declared JSON Schema, no expected value. A draft (version ``0.1.0-draft``) is not
  pre-registered: it is written in ``drafts/``, outside any lock, for its author to cut down to the
  calls the task needs, pin the values, and move into ``rubrics/``. The first definition of a tool
  seen in the file is kept. ``--registered`` dates it; else the day the earliest run started.

Lost: spans that are not GenAI (HTTP, database) and their attributes; token usage, request
parameters, finish reasons; message parts other than text and tool calls (images, files,
reasoning); events recorded as OTLP log records rather than span events, and the oldest content
events (``gen_ai.content.prompt`` / ``gen_ai.content.completion``); links; resource attributes.
The world's state is not in a trace: a rubric scores these trajectories on tool correctness,
required outputs and faithfulness.

Memory: the file is read one line (one OTLP document) at a time; a file that is one JSON document
spread over lines is read whole, so it is held to the size of one line (256 MiB). Spans are
buffered per trace until the document holding the trace's root span (the one without a parent) is
read, which SDKs export last (within one document the order does not matter: a batch is grouped by
instrumentation scope, so the root may come before its children there); the trace is then
converted and dropped, and only its id is kept (about 150 bytes),
so that a span arriving after its root is refused rather than made into a second, partial run. A
trace whose root is not in the file (its parent is in another service's export) stays buffered to
the end of the file. So memory holds one document, the open traces and the ids of closed ones,
never the file: 58 MB of 6,000 interleaved runs import at a 36 MB peak RSS.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from judgekit._util.io import (
    MAX_LINE_BYTES,
    describe_validation_error,
    iter_json_lines,
    open_regular_file,
    read_json,
)
from judgekit._util.strict_json import strict_json_loads
from judgekit.errors import InputError
from judgekit.importers._messages import messages_to_trajectory
from judgekit.importers._writer import DEFAULT_REGISTERED, ImportWriter, file_name
from judgekit.rubric.model import Rubric
from judgekit.trajectory import Call, Trajectory

INFERENCE_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})
MESSAGE_ATTRIBUTES = ("gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions")
INPUT_EVENTS = {"gen_ai.system.message": "system", "gen_ai.user.message": "user",
                "gen_ai.assistant.message": "assistant", "gen_ai.tool.message": "tool"}
OUTPUT_EVENT = "gen_ai.choice"
STATUS_ERROR = (2, "STATUS_CODE_ERROR")
DRAFT_GUIDE = (
    "DRAFT, not pre-registered: every tool the agent declared is listed with its declared parameter "
    "schemas. Keep only the calls the task needs, pin the argument values the task requires, then "
    "move this file into rubrics/ and lock it. One point per expected call made with the right tool, "
    "one per argument valid against its schema, one for the call count, one for no forbidden tool."
)


class _Bad(ValueError):
    """A malformed OTLP value; the caller adds the file and line."""


# --- OTLP/JSON values ---------------------------------------------------------------------------


def _any_value(value: Any) -> Any:
    """An OTLP/JSON ``AnyValue`` as a Python value (``{}`` is null; int64 may be a string)."""
    if not isinstance(value, dict) or len(value) > 1:
        raise _Bad("an attribute value must be an object with one of stringValue, intValue, ...")
    if not value:
        return None
    kind, inner = next(iter(value.items()))
    if kind == "stringValue" and isinstance(inner, str):
        return inner
    if kind == "boolValue" and isinstance(inner, bool):
        return inner
    if kind == "intValue" and isinstance(inner, (int, str)) and not isinstance(inner, bool):
        return _integer(inner, "intValue")
    if kind == "doubleValue" and isinstance(inner, (int, float)) and not isinstance(inner, bool):
        return float(inner)
    if kind == "bytesValue" and isinstance(inner, str):
        return inner  # kept base64, as written
    if kind == "arrayValue" and isinstance(inner, dict):
        return [_any_value(item) for item in _list(inner, "values")]
    if kind == "kvlistValue" and isinstance(inner, dict):
        return _attributes(inner.get("values"))
    raise _Bad(f"unknown or malformed attribute value {kind!r}")


def _integer(value: Any, name: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and re.fullmatch(r"-?\d{1,20}", value):
        return int(value)
    raise _Bad(f"{name} must be an integer (or its decimal string), not {str(value)[:40]!r}")


def _attributes(items: Any) -> dict[str, Any]:
    if items is None:
        return {}
    if not isinstance(items, list):
        raise _Bad("attributes must be a list of {key, value}")
    found: dict[str, Any] = {}
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("key"), str):
            raise _Bad("an attribute must be an object with a string key")
        found[item["key"]] = _any_value(item.get("value", {}))
    return found


def _list(holder: Any, key: str) -> list[Any]:
    if not isinstance(holder, dict):
        raise _Bad(f"expected an object holding {key!r}")
    value = holder.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise _Bad(f"{key} must be a list")
    return value


def _hex_id(value: Any, size: int, name: str) -> str:
    """A trace (16 bytes) or span (8 bytes) id as lowercase hex. OTLP/JSON writes hex; the
    protobuf JSON mapping's base64 is accepted too."""
    if isinstance(value, str):
        if re.fullmatch(f"[0-9a-fA-F]{{{2 * size}}}", value):
            text = value.lower()
        else:
            try:
                raw = base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError):
                raw = b""
            text = raw.hex() if len(raw) == size else ""
        if text and text.strip("0"):
            return text
    raise _Bad(f"{name} {str(value)[:40]!r} is not a valid id ({2 * size} hex digits, not all zero)")


def _nanos(value: Any, name: str) -> int | None:
    if value in (None, "", 0, "0"):
        return None
    nanos = _integer(value, name)
    if nanos < 0:
        raise _Bad(f"{name} must not be negative")
    return nanos


def _time(nanos: int | None) -> datetime | None:
    if nanos is None:
        return None
    try:
        whole = datetime.fromtimestamp(nanos // 10**9, tz=timezone.utc)
    except (OverflowError, OSError, ValueError):
        raise _Bad(f"time {nanos} ns is out of range") from None
    return whole + timedelta(microseconds=(nanos % 10**9) // 1000)


def _json_value(value: Any, name: str) -> Any:
    """An attribute that holds JSON: a JSON string, or the structured value itself."""
    if isinstance(value, str):
        try:
            return strict_json_loads(value)
        except ValueError as exc:
            raise _Bad(f"{name} is not valid JSON: {exc}") from None
    return value


# --- spans --------------------------------------------------------------------------------------


@dataclass
class _Span:
    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    start_ns: int | None
    end_ns: int | None
    attrs: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]]
    error: str | None
    line: int | None

    @property
    def operation(self) -> str:
        op = self.attrs.get("gen_ai.operation.name")
        return op if isinstance(op, str) and op else self.name.split(" ", 1)[0]

    @property
    def order(self) -> tuple[int, int, str]:
        return (self.start_ns or 0, self.end_ns or 0, self.span_id)

    def is_agent(self) -> bool:
        return self.operation == "invoke_agent"

    def is_tool(self) -> bool:
        return self.operation == "execute_tool"

    def is_inference(self) -> bool:
        return (self.operation in INFERENCE_OPERATIONS or any(a in self.attrs for a in MESSAGE_ATTRIBUTES)
                or any(name in INPUT_EVENTS or name == OUTPUT_EVENT for name, _ in self.events))


def _span(raw: Any, line: int | None) -> _Span:
    if not isinstance(raw, dict):
        raise _Bad("a span must be an object")
    trace_id = _hex_id(raw.get("traceId"), 16, "traceId")
    span_id = _hex_id(raw.get("spanId"), 8, "spanId")
    where = f"span {span_id}: "
    try:
        parent = raw.get("parentSpanId")
        attrs = _attributes(raw.get("attributes"))
        events = [_event(event) for event in _list(raw, "events")]
        status = raw.get("status") or {}
        if not isinstance(status, dict):
            raise _Bad("status must be an object")
        return _Span(
            trace_id=trace_id, span_id=span_id, parent_id=_hex_id(parent, 8, "parentSpanId") if parent else None,
            name=str(raw.get("name", "")), start_ns=_nanos(raw.get("startTimeUnixNano"), "startTimeUnixNano"),
            end_ns=_nanos(raw.get("endTimeUnixNano"), "endTimeUnixNano"), attrs=attrs, events=events,
            error=_error_of(attrs, status), line=line,
        )
    except _Bad as exc:
        raise _Bad(where + str(exc)) from None


def _event(raw: Any) -> tuple[str, dict[str, Any]]:
    if not isinstance(raw, dict):
        raise _Bad("a span event must be an object")
    return str(raw.get("name", "")), _attributes(raw.get("attributes"))


def _error_of(attrs: dict[str, Any], status: dict[str, Any]) -> str | None:
    kind = attrs.get("error.type")
    message = status.get("message") if status.get("code") in STATUS_ERROR else None
    if kind is None and status.get("code") not in STATUS_ERROR:
        return None
    parts = [str(part) for part in (kind, message) if part]
    return ": ".join(parts) or "the span's status is ERROR"


def _documents(src: Path) -> Iterator[tuple[int | None, Any]]:
    """(line or None, OTLP document): JSON Lines streamed, else the one document read whole."""
    with open_regular_file(src, expected="an OTLP JSON file") as handle:
        first = b""
        while not first.strip() and (chunk := handle.readline(MAX_LINE_BYTES + 1)):
            first = chunk
    if not first.strip():
        return
    try:
        strict_json_loads(first)
    except ValueError:  # a document spread over lines: read whole, bounded as one JSON Lines line is
        yield None, read_json(src, max_bytes=MAX_LINE_BYTES, expected="one OTLP JSON document (JSON Lines "
                              "stream: write one document a line for a larger file)")
        return
    yield from iter_json_lines(src, expected="an OTLP JSON Lines file")


def _spans_of(document: Any, line: int | None) -> Iterator[_Span]:
    if not isinstance(document, dict):
        raise _Bad('not an OTLP JSON traces document (expected {"resourceSpans": [...]})')
    for resource_spans in _list(document, "resourceSpans"):
        for scope_spans in _list(resource_spans, "scopeSpans"):
            for raw in _list(scope_spans, "spans"):
                yield _span(raw, line)


def _where(src: Path, line: int | None) -> str:
    return f"{src.name}:{line}" if line is not None else src.name


class _TraceBuffer:
    """Spans per open trace; a trace is handed out (and forgotten) when its root span arrives."""

    def __init__(self, src: Path):
        self.src = src
        self.open: dict[str, list[_Span]] = {}
        self.closed: dict[str, int | None] = {}  # trace id -> line of its root

    def add(self, spans: list[_Span]) -> list[list[_Span]]:
        """Add one document's spans; hand out the traces whose root span it holds. Within a
        document the order does not matter: the SDK groups a batch by scope, not by time."""
        roots: dict[str, int | None] = {}
        for span in spans:
            if span.trace_id in self.closed:
                raise InputError(
                    f"span {span.span_id} of trace {span.trace_id} comes after the trace's root span (line "
                    f"{self.closed[span.trace_id]}): a trace is converted when its root is read, so its spans must "
                    "come before it or with it (as SDKs export them)", self.src, span.line)
            self.open.setdefault(span.trace_id, []).append(span)
            if span.parent_id is None:
                roots.setdefault(span.trace_id, span.line)
        self.closed.update(roots)
        return [self.open.pop(trace_id) for trace_id in roots]

    def rest(self) -> Iterator[list[_Span]]:
        """Traces whose root never came, in the order they were first seen."""
        while self.open:
            trace_id = next(iter(self.open))
            yield self.open.pop(trace_id)


# --- runs ---------------------------------------------------------------------------------------


@dataclass
class _Run:
    root: _Span
    scope: list[_Span] = field(default_factory=list)

    @property
    def inference(self) -> list[_Span]:
        return sorted((s for s in self.scope if s.is_inference() and not s.is_agent()), key=lambda s: s.order)

    @property
    def tools(self) -> list[_Span]:
        return sorted((s for s in self.scope if s.is_tool()), key=lambda s: s.order)


def _runs(spans: list[_Span], src: Path) -> list[_Run]:
    """The runs of one trace: its outermost agent spans, else its roots that hold GenAI spans."""
    by_id: dict[str, _Span] = {}
    for span in spans:
        if span.span_id in by_id:
            raise InputError(f"span id {span.span_id} appears twice in trace {span.trace_id}", src, span.line)
        by_id[span.span_id] = span
    children: dict[str, list[_Span]] = {}
    for span in spans:
        if span.parent_id in by_id:
            children.setdefault(span.parent_id, []).append(span)
    tops = sorted((s for s in spans if s.parent_id not in by_id), key=lambda s: s.order)
    _no_cycle(spans, tops, children, src)
    runs: list[_Run] = []
    for top in tops:
        agents = _outermost_agents(top, children)
        for root in agents or [top]:
            run = _Run(root, _scope(root, children))
            if agents or any(s.is_inference() or s.is_tool() for s in run.scope):
                runs.append(run)
    return sorted(runs, key=lambda run: run.root.order)


def _no_cycle(spans: list[_Span], tops: list[_Span], children: dict[str, list[_Span]], src: Path) -> None:
    """Refuse spans no top span leads to: their parentSpanIds make a loop (a span that is its own
    ancestor), which would otherwise drop them, and every GenAI span under them, unsaid."""
    reached, stack = set(), list(tops)
    while stack:
        span = stack.pop()
        reached.add(span.span_id)
        stack.extend(children.get(span.span_id, []))
    if len(reached) < len(spans):
        span = min((s for s in spans if s.span_id not in reached), key=lambda s: s.order)
        raise InputError(f"span {span.span_id} of trace {span.trace_id} is its own ancestor (its parentSpanId "
                         "chain loops back to it): not a tree of spans", src, span.line)


def _outermost_agents(top: _Span, children: dict[str, list[_Span]]) -> list[_Span]:
    found, stack = [], [top]
    while stack:  # iterative: a hostile trace may nest deeper than the recursion limit
        span = stack.pop()
        if span.is_agent():
            found.append(span)
            continue
        stack.extend(children.get(span.span_id, []))
    return found


def _scope(root: _Span, children: dict[str, list[_Span]]) -> list[_Span]:
    """``root`` and its descendants, less what lies under a nested agent span."""
    scope, stack = [root], list(children.get(root.span_id, []))
    while stack:
        span = stack.pop()
        scope.append(span)
        if not span.is_agent():
            stack.extend(children.get(span.span_id, []))
    return scope


# --- messages -----------------------------------------------------------------------------------


def _as_text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _arguments(value: Any) -> Any:
    """Tool-call arguments as the OpenAI format carries them: a JSON string."""
    return value if isinstance(value, str) else json.dumps({} if value is None else value, ensure_ascii=False)


def _from_parts(message: Any) -> list[dict[str, Any]]:
    """One semconv message (``{role, parts}``) as OpenAI-style chat messages."""
    if not isinstance(message, dict):
        raise _Bad("a message must be an object with role and parts")
    role, parts = message.get("role"), message.get("parts") or []
    if not isinstance(parts, list) or not all(isinstance(part, dict) for part in parts):
        raise _Bad("a message's parts must be a list of objects")
    text = "".join(_as_text(p.get("content")) for p in parts if p.get("type") == "text")
    calls = [{"id": p.get("id"), "type": "function",
              "function": {"name": p.get("name", ""), "arguments": _arguments(p.get("arguments"))}}
             for p in parts if p.get("type") == "tool_call"]
    results = [{"role": "tool", "tool_call_id": p.get("id"), "content": _as_text(p.get("response", p.get("result")))}
               for p in parts if p.get("type") == "tool_call_response"]
    out: list[dict[str, Any]] = list(results)
    if text or calls or not results:
        chat: dict[str, Any] = {"role": role, "content": text}
        if calls:
            chat["tool_calls"] = calls
        out.append(chat)
    return out


def _message_list(value: Any, name: str) -> list[dict[str, Any]]:
    value = _json_value(value, name)
    if not isinstance(value, list):
        raise _Bad(f"{name} must be a list of messages")
    return [chat for message in value for chat in _from_parts(message)]


def _system(value: Any) -> list[dict[str, Any]]:
    value = _json_value(value, "gen_ai.system_instructions")
    if isinstance(value, list):
        value = "".join(_as_text(p.get("content")) for p in value if isinstance(p, dict) and p.get("type") == "text")
    return [{"role": "system", "content": _as_text(value)}]


def _event_body(attrs: dict[str, Any]) -> dict[str, Any]:
    """The body of an older message event: ``gen_ai.event.content`` (JSON), else its attributes."""
    if "gen_ai.event.content" in attrs:
        body = _json_value(attrs["gen_ai.event.content"], "gen_ai.event.content")
        if not isinstance(body, dict):
            raise _Bad("gen_ai.event.content must be a JSON object")
        return body
    return attrs


def _event_message(role: str, body: dict[str, Any]) -> dict[str, Any]:
    if role == "tool":
        return {"role": "tool", "tool_call_id": body.get("id"), "content": _as_text(body.get("content"))}
    chat: dict[str, Any] = {"role": role, "content": body.get("content") or ""}
    tool_calls = _json_value(body.get("tool_calls"), "tool_calls") if role == "assistant" else None
    if tool_calls:
        if not isinstance(tool_calls, list) or not all(isinstance(c, dict) for c in tool_calls):
            raise _Bad("tool_calls must be a list of objects")
        if not all(isinstance(c.get("function") or {}, dict) for c in tool_calls):
            raise _Bad("a tool call's function must be an object with name and arguments")
        chat["tool_calls"] = [{**call, "function": {**(call.get("function") or {}), "arguments": _arguments(
            (call.get("function") or {}).get("arguments"))}} for call in tool_calls]
    return chat


def _span_messages(span: _Span) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(input, output) messages of one span, in the current form or the older event form."""
    attrs = span.attrs
    if any(name in attrs for name in MESSAGE_ATTRIBUTES):
        inputs = _system(attrs["gen_ai.system_instructions"]) if "gen_ai.system_instructions" in attrs else []
        if "gen_ai.input.messages" in attrs:
            inputs += _message_list(attrs["gen_ai.input.messages"], "gen_ai.input.messages")
        outputs = (_message_list(attrs["gen_ai.output.messages"], "gen_ai.output.messages")
                   if "gen_ai.output.messages" in attrs else [])
        return inputs, outputs
    inputs, outputs = [], []
    for name, event_attrs in span.events:
        if name in INPUT_EVENTS:
            inputs.append(_event_message(INPUT_EVENTS[name], _event_body(event_attrs)))
        elif name == OUTPUT_EVENT:
            message = _json_value(_event_body(event_attrs).get("message") or {}, "message")
            if not isinstance(message, dict):
                raise _Bad("gen_ai.choice's message must be an object")
            outputs.append(_event_message("assistant", message))
    return inputs, outputs


def _ids(message: dict[str, Any]) -> set[str]:
    """The tool call ids a message carries. Only strings: another value is left for the
    conversion, which refuses it with its place."""
    if message.get("role") == "tool":
        ids = [message.get("tool_call_id")]
    else:
        ids = [call.get("id") for call in message.get("tool_calls") or []]
    return {i for i in ids if isinstance(i, str) and i}


def _transcript(spans: Iterable[_Span]) -> list[dict[str, Any]]:
    """The inference spans' messages joined into one conversation (see the module docstring)."""
    transcript: list[dict[str, Any]] = []
    seen: set[str] = set()  # tool call ids, and "result:<id>" for their results
    for span in spans:
        inputs, outputs = _span_messages(span)
        common = 0
        while common < min(len(inputs), len(transcript)) and inputs[common] == transcript[common]:
            common += 1
        for message in inputs[common:] + outputs:
            keys = {("result:" if message.get("role") == "tool" else "") + i for i in _ids(message)}
            if keys and keys <= seen:
                continue  # the same tool call or result, carried again in a later span's history
            seen |= keys
            transcript.append(message)
    return transcript


# --- calls --------------------------------------------------------------------------------------


def _tool_name(span: _Span) -> str:
    name = span.attrs.get("gen_ai.tool.name")
    return str(name) if name else span.name.removeprefix("execute_tool").strip()


def _maybe_json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return strict_json_loads(value)
        except ValueError:
            return value
    return value


def _call_from_span(span: _Span) -> Call:
    raw = span.attrs.get("gen_ai.tool.call.arguments")
    args, error = _maybe_json(raw), span.error
    if raw is None:
        args = {}
    elif not isinstance(args, dict):
        args, error = {"$unparsed": raw}, error or "the arguments were not a JSON object"
    call_id = span.attrs.get("gen_ai.tool.call.id")
    return Call(id=str(call_id) if call_id else None, tool=_tool_name(span), args=args,
                result=_maybe_json(span.attrs.get("gen_ai.tool.call.result")), error=error,
                started_at=_time(span.start_ns), ended_at=_time(span.end_ns))


def _with_span(call: Call, span: _Span) -> Call:
    result = call.result
    if result is None and "gen_ai.tool.call.result" in span.attrs:
        result = _maybe_json(span.attrs["gen_ai.tool.call.result"])
    return call.model_copy(update={"error": call.error or span.error, "result": result,
                                   "started_at": _time(span.start_ns), "ended_at": _time(span.end_ns)})


def _join_tool_spans(calls: list[Call], spans: list[_Span]) -> list[Call]:
    """Each ``execute_tool`` span joined with its call (by id, else by name in order); spans
    that match none become calls of their own, after the others."""
    calls = list(calls)
    by_id = {call.id: n for n, call in enumerate(calls) if call.id}
    by_tool: dict[str, deque[int]] = {}  # a queue per tool, so that joining by name stays linear
    for n, call in enumerate(calls):
        by_tool.setdefault(call.tool, deque()).append(n)
    used: set[int] = set()
    extra: list[Call] = []
    for span in spans:
        call_id = span.attrs.get("gen_ai.tool.call.id")
        n = by_id.get(str(call_id)) if call_id else None
        if n is None and not call_id:
            queue = by_tool.get(_tool_name(span), deque())
            while queue and queue[0] in used:
                queue.popleft()
            n = queue[0] if queue else None
        if n is None or n in used:
            extra.append(_call_from_span(span))
            continue
        used.add(n)
        calls[n] = _with_span(calls[n], span)
    return calls + extra


# --- trajectories -------------------------------------------------------------------------------


def _first(spans: Iterable[_Span], *names: str) -> Any:
    for span in spans:
        for name in names:
            if span.attrs.get(name) not in (None, ""):
                return span.attrs[name]
    return None


def _metadata(run: _Run, src: Path) -> dict[str, Any]:
    ordered = [run.root, *run.inference, *sorted(run.scope, key=lambda s: s.order)]
    found = {
        "otel": {"trace_id": run.root.trace_id, "span_id": run.root.span_id},
        "agent": _first(ordered, "gen_ai.agent.name"),
        "agent_id": _first(ordered, "gen_ai.agent.id"),
        "model": _first(ordered, "gen_ai.request.model") or _first(ordered, "gen_ai.response.model"),
        "system": _first(ordered, "gen_ai.provider.name") or _first(ordered, "gen_ai.system"),
        "conversation_id": _first(ordered, "gen_ai.conversation.id"),
        "imported_from": _where(src, run.root.line),
    }
    return {key: value for key, value in found.items() if value is not None}


def _trajectory(run: _Run, src: Path) -> Trajectory:
    root = run.root
    label = f"trace {root.trace_id} span {root.span_id}: "
    try:
        messages = _transcript(run.inference)
        if not messages and root.is_agent():
            messages = _transcript([root])
    except _Bad as exc:
        raise InputError(label + str(exc), src, root.line) from None
    timed = root.start_ns and root.end_ns and root.end_ns >= root.start_ns
    latency = (root.end_ns - root.start_ns) / 1e9 if timed else None
    trajectory = messages_to_trajectory(
        messages, trajectory_id=f"{root.trace_id}-{root.span_id}", metadata=_metadata(run, src),
        latency_s=latency, where=(str(src), root.line, label))
    try:
        calls = _join_tool_spans(trajectory.calls, run.tools)
        return trajectory.model_copy(update={"calls": calls})
    except _Bad as exc:
        raise InputError(label + str(exc), src, root.line) from None


def _iter_runs(src: Path) -> Iterator[_Run]:
    buffer = _TraceBuffer(src)
    for line, document in _documents(src):
        try:
            spans = list(_spans_of(document, line))
        except _Bad as exc:
            raise InputError(str(exc), src, line) from None
        for trace in buffer.add(spans):
            yield from _runs(trace, src)
    for trace in buffer.rest():
        yield from _runs(trace, src)


# --- draft rubrics ------------------------------------------------------------------------------


class _Drafts:
    """Declared tools per agent (first definition wins), for ``--draft-rubric``."""

    def __init__(self) -> None:
        self.tools: dict[str, dict[str, dict[str, Any]]] = {}
        self.earliest: int | None = None

    def add(self, run: _Run, agent: Any, src: Path) -> None:
        if run.root.start_ns is not None:
            self.earliest = min(self.earliest or run.root.start_ns, run.root.start_ns)
        # gen_ai.agent.name is any attribute value in a hostile file: named by its text
        declared = self.tools.setdefault(str(agent) if agent not in (None, "") else "agent", {})
        for span in [run.root, *run.inference]:
            if "gen_ai.tool.definitions" not in span.attrs:
                continue
            try:
                definitions = _json_value(span.attrs["gen_ai.tool.definitions"], "gen_ai.tool.definitions")
            except _Bad as exc:
                raise InputError(f"span {span.span_id}: {exc}", src, span.line) from None
            for name, parameters in _declared(definitions, span, src):
                declared.setdefault(name, parameters)

    def rubrics(self, registered: date | None, src: Path) -> Iterator[Rubric]:
        if registered is None:
            registered = _time(self.earliest).date() if self.earliest else DEFAULT_REGISTERED
        taken: set[str] = set()
        for agent, tools in sorted(self.tools.items()):
            if tools:
                yield _draft(agent, _slug(agent, taken, src), tools, registered, src)


def _declared(definitions: Any, span: _Span, src: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """(name, parameters schema) of each tool definition: flat (semconv's example) or OpenAI's
    ``{"type": "function", "function": {...}}``."""
    if not isinstance(definitions, list):
        raise InputError(f"span {span.span_id}: gen_ai.tool.definitions must be a list", src, span.line)
    for definition in definitions:
        inner = definition.get("function", definition) if isinstance(definition, dict) else None
        if not isinstance(inner, dict) or not isinstance(inner.get("name"), str):
            raise InputError(f"span {span.span_id}: a tool definition without a name", src, span.line)
        parameters = inner.get("parameters") or inner.get("input_schema") or {}
        parameters = parameters if isinstance(parameters, dict) else {}
        if not isinstance(parameters.get("properties") or {}, dict):
            raise InputError(f"span {span.span_id}: tool {inner['name']!r}: the properties of its parameters must be "
                             "an object (parameter name -> JSON Schema)", src, span.line)
        yield inner["name"], parameters


def _slug(agent: str, taken: set[str], src: Path) -> str:
    """The agent's name as a rubric id part. Two agents that would share one ("Support Agent",
    "support-agent"; any two names without ASCII letters) keep apart by a hash of the name: the
    second draft would otherwise replace the first without a word."""
    slug = file_name(agent, "agent", lower=True)
    if slug in taken:
        slug = f"{slug}-{hashlib.sha256(agent.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}"
    if slug in taken:  # a name made to look like another's hashed one: refused, never replaced
        raise InputError(f"agent {agent[:200]!r} would be written as {slug!r}, which another agent's draft has: "
                         "rename one", src)
    taken.add(slug)
    return slug


def _draft(agent: str, slug: str, tools: dict[str, dict[str, Any]], registered: date, src: Path) -> Rubric:
    expected = [{"tool": name, "args": dict((parameters.get("properties") or {}).items())}
                for name, parameters in tools.items()]
    try:
        return Rubric.model_validate({
            "id": f"draft-{slug}", "version": "0.1.0-draft", "registered": registered,
            "description": f"DRAFT drafted from the tools agent {agent!r} declared (gen_ai.tool.definitions); "
                           "not pre-registered.",
            "tool_correctness": {"guide": DRAFT_GUIDE, "expected_calls": expected, "in_scope": list(tools)},
        })
    except ValidationError as exc:
        raise InputError(f"the tools agent {agent!r} declared do not make a rubric: "
                         f"{describe_validation_error(exc)}", src) from None


# --- the importer -------------------------------------------------------------------------------


def import_otel_genai(src: Path, out: Path, *, registered: date | None = None,
                      draft_rubric: bool = False) -> list[Path]:
    src = Path(src)
    drafts = _Drafts() if draft_rubric else None
    with ImportWriter(out) as writer:
        sink = writer.trajectories("trajectories.jsonl", suite_name=f"OpenTelemetry GenAI import of {src.name}")
        for run in _iter_runs(src):
            trajectory = _trajectory(run, src)
            sink.add(trajectory)
            if drafts is not None:
                drafts.add(run, trajectory.metadata.get("agent"), src)
        if sink.count == 0:
            raise InputError("no GenAI run found: no invoke_agent, inference or execute_tool span "
                             "(is this OTLP trace data from a GenAI instrumentation?)", src)
        if drafts is not None:
            rubrics = list(drafts.rubrics(registered, src))
            if not rubrics:
                raise InputError("--draft-rubric: no gen_ai.tool.definitions in any run (recording them is "
                                 "opt-in in most instrumentations)", src)
            for rubric in rubrics:
                writer.text(f"drafts/{rubric.id}.yaml", "# DRAFT: not pre-registered, not locked. Complete it, "
                            "then move it into rubrics/ and lock it.\n" + rubric.to_yaml())
    return writer.written
