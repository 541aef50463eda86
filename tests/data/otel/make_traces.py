"""Build OTLP/JSON GenAI traces for tests, from OpenAI-style chat messages.

``otel_trace_from_chat(messages, name=...)`` plays a chat transcript back as the spans an
instrumented agent would export: an ``invoke_agent`` root, one inference span per assistant
message (its input: every message before it; its output: that message) and one ``execute_tool``
span per tool call (arguments and result from the transcript). ``form="current"`` writes the
current semantic conventions (``gen_ai.input.messages`` / ``gen_ai.output.messages`` as JSON
strings, leading system messages as ``gen_ai.system_instructions``); ``form="events"`` the older
one (``gen_ai.system``, per-message span events whose body is ``gen_ai.event.content``).

Ids and times are derived from ``name``: the same call gives the same document. The trajectory
judgekit imports from it is ``trajectory_id(name)``. Spans are listed children first, root last,
as SDKs export them. ``python make_traces.py`` rewrites the checked-in fixture ``mixed.jsonl``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

T0 = 1_767_225_600 * 10**9  # 2026-01-01T00:00:00Z, in ns
STEP = 10**8  # 0.1 s between consecutive span boundaries


def _hex(text: str, size: int) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[: 2 * size]


def trace_id(name: str) -> str:
    return _hex(f"trace/{name}", 16)


def root_span_id(name: str) -> str:
    return _hex(f"root/{name}", 8)


def trajectory_id(name: str) -> str:
    """The id ``judgekit import otel-genai`` gives the run built from ``name``."""
    return f"{trace_id(name)}-{root_span_id(name)}"


def value(python: Any) -> dict[str, Any]:
    """A Python value as an OTLP/JSON AnyValue."""
    if isinstance(python, bool):
        return {"boolValue": python}
    if isinstance(python, int):
        return {"intValue": str(python)}
    if isinstance(python, float):
        return {"doubleValue": python}
    if isinstance(python, str):
        return {"stringValue": python}
    if isinstance(python, list):
        return {"arrayValue": {"values": [value(item) for item in python]}}
    if isinstance(python, dict):
        return {"kvlistValue": {"values": attributes(python)}}
    return {}


def attributes(mapping: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"key": key, "value": value(item)} for key, item in mapping.items() if item is not None]


def span(trace: str, span_id: str, parent: str | None, name: str, start: int, end: int,
         attrs: dict[str, Any], *, events: list[dict[str, Any]] | None = None, error: str | None = None) -> dict:
    raw: dict[str, Any] = {
        "traceId": trace, "spanId": span_id, "name": name, "kind": 1,
        "startTimeUnixNano": str(start), "endTimeUnixNano": str(end), "attributes": attributes(attrs),
    }
    if parent:
        raw["parentSpanId"] = parent
    if events:
        raw["events"] = events
    if error:
        raw["status"] = {"code": 2, "message": error}
    return raw


def document(spans: list[dict[str, Any]], service: str = "agent-service") -> dict[str, Any]:
    return {"resourceSpans": [{
        "resource": {"attributes": attributes({"service.name": service})},
        "scopeSpans": [{"scope": {"name": "make_traces", "version": "1"}, "spans": spans}],
    }]}


# --- chat messages -> semconv parts --------------------------------------------------------------


def _texts(content: Any) -> list[dict[str, Any]]:
    if content in (None, ""):
        return []
    if isinstance(content, str):
        return [{"type": "text", "content": content}]
    return [{"type": "text", "content": part.get("text", "")} for part in content if isinstance(part, dict)]


def _arguments(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text  # kept as the model wrote it


def to_parts(message: dict[str, Any]) -> dict[str, Any]:
    """One OpenAI chat message as a semconv ``{role, parts}`` message."""
    if message["role"] == "tool":
        return {"role": "tool", "parts": [{"type": "tool_call_response", "id": message["tool_call_id"],
                                           "response": message.get("content") or ""}]}
    parts = _texts(message.get("content"))
    for call in message.get("tool_calls") or []:
        parts.append({"type": "tool_call", "id": call["id"], "name": call["function"]["name"],
                      "arguments": _arguments(call["function"].get("arguments") or "{}")})
    return {"role": message["role"], "parts": parts}


def _event(name: str, body: dict[str, Any], at: int, system: str) -> dict[str, Any]:
    return {"name": name, "timeUnixNano": str(at),
            "attributes": attributes({"gen_ai.system": system, "gen_ai.event.content": json.dumps(body)})}


def _events(history: list[dict], output: dict | None, at: int, system: str) -> list[dict[str, Any]]:
    names = {"system": "gen_ai.system.message", "user": "gen_ai.user.message",
             "assistant": "gen_ai.assistant.message", "tool": "gen_ai.tool.message"}
    events = []
    for message in history:
        body = {"content": message.get("content")}
        if message.get("tool_calls"):
            body["tool_calls"] = message["tool_calls"]
        if message["role"] == "tool":
            body = {"content": message.get("content"), "id": message["tool_call_id"]}
        events.append(_event(names[message["role"]], body, at, system))
    if output is not None:
        choice = {"index": 0, "finish_reason": "tool_calls" if output.get("tool_calls") else "stop",
                  "message": {"content": output.get("content"), **({"tool_calls": output["tool_calls"]}
                                                                  if output.get("tool_calls") else {})}}
        events.append(_event("gen_ai.choice", choice, at, system))
    return events


# --- the trace -----------------------------------------------------------------------------------


def otel_trace_from_chat(messages: list[dict[str, Any]], *, name: str, agent: str = "support-agent",
                         model: str = "gpt-4o-mini-2024-07-18", form: str = "current",
                         tools: list[dict[str, Any]] | None = None, service: str = "agent-service") -> dict:
    """An OTLP/JSON traces document of one agent run replaying ``messages`` (see the module
    docstring). ``tools``: OpenAI tool definitions, recorded as ``gen_ai.tool.definitions``."""
    trace, root = trace_id(name), root_span_id(name)
    clock = iter(range(T0 + STEP, T0 + 10**6 * STEP, STEP))
    results = {m["tool_call_id"]: m.get("content") for m in messages if m["role"] == "tool"}
    spans: list[dict[str, Any]] = []
    turns = [n for n, m in enumerate(messages) if m["role"] == "assistant"]
    if not turns or turns[-1] != len(messages) - 1:
        turns.append(len(messages))  # the messages after the last answer reach the model too
    for k, at in enumerate(turns):
        output = messages[at] if at < len(messages) else None
        spans.append(_inference(trace, _hex(f"chat/{name}/{k}", 8), root, messages[:at], output,
                                (next(clock), next(clock)), model=model, form=form, tools=tools))
        for n, call in enumerate((output or {}).get("tool_calls") or []):
            start, end = next(clock), next(clock)
            spans.append(span(trace, _hex(f"tool/{name}/{k}/{n}", 8), root,
                              f"execute_tool {call['function']['name']}", start, end, {
                                  "gen_ai.operation.name": "execute_tool",
                                  "gen_ai.tool.name": call["function"]["name"], "gen_ai.tool.call.id": call["id"],
                                  "gen_ai.tool.call.arguments": call["function"].get("arguments") or "{}",
                                  "gen_ai.tool.call.result": results.get(call["id"]),
                              }))
    root_attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent, "gen_ai.request.model": model,
                  "gen_ai.conversation.id": name}
    root_attrs["gen_ai.provider.name" if form == "current" else "gen_ai.system"] = "openai"
    spans.append(span(trace, root, None, f"invoke_agent {agent}", T0, next(clock), root_attrs))
    return document(spans, service)


def _inference(trace: str, span_id: str, root: str, history: list[dict], output: dict | None, times: tuple[int, int],
               *, model: str, form: str, tools: list[dict] | None) -> dict[str, Any]:
    attrs: dict[str, Any] = {"gen_ai.operation.name": "chat", "gen_ai.request.model": model}
    if tools:
        attrs["gen_ai.tool.definitions"] = json.dumps(tools)
    if form == "events":
        attrs["gen_ai.system"] = "openai"
        return span(trace, span_id, root, f"chat {model}", *times, attrs,
                    events=_events(history, output, times[0], "openai"))
    # One leading system message goes in gen_ai.system_instructions; several stay messages.
    lead = 1 if history[:1] and history[0]["role"] == "system" and history[1:2] != [] and \
        history[1]["role"] != "system" else 0
    attrs["gen_ai.provider.name"] = "openai"
    if lead:
        attrs["gen_ai.system_instructions"] = json.dumps([p for m in history[:lead] for p in _texts(m.get("content"))])
    attrs["gen_ai.input.messages"] = json.dumps([to_parts(m) for m in history[lead:]])
    if output is not None:
        attrs["gen_ai.output.messages"] = json.dumps([{**to_parts(output), "finish_reason": "stop"}])
    return span(trace, span_id, root, f"chat {model}", *times, attrs)


# --- the checked-in fixture ---------------------------------------------------------------------

EMAIL_CHAT = [
    {"role": "system", "content": "You manage user accounts."},
    {"role": "user", "content": "Update my email to alice@example.com. I'm user 1."},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_get", "type": "function", "function": {"name": "get_user", "arguments": "{\"user_id\": 1}"}}]},
    {"role": "tool", "tool_call_id": "call_get", "content": "{\"id\": 1, \"email\": \"alice.old@example.org\"}"},
    {"role": "assistant", "content": "I will update it now.", "tool_calls": [
        {"id": "call_upd", "type": "function",
         "function": {"name": "update_user", "arguments": "{\"user_id\": 1, \"email\": \"alice@example.com\"}"}}]},
    {"role": "tool", "tool_call_id": "call_upd", "content": "{\"id\": 1, \"email\": \"alice@example.com\"}"},
    {"role": "assistant", "content": "Done: your email is now alice@example.com."},
]
EMAIL_TOOLS = [
    {"type": "function", "function": {"name": "get_user", "description": "Read a user.", "parameters": {
        "type": "object", "properties": {"user_id": {"type": "integer"}}, "required": ["user_id"]}}},
    {"type": "function", "function": {"name": "update_user", "description": "Change a user's fields.", "parameters": {
        "type": "object", "properties": {"user_id": {"type": "integer"}, "email": {"type": "string", "format": "email"}},
        "required": ["user_id"]}}},
]


def split_lines(documents: list[dict[str, Any]], per_line: int = 2) -> list[str]:
    """The spans of ``documents`` re-batched ``per_line`` to an OTLP document per line, in the
    order given (as a collector's file exporter writes batches)."""
    spans = [s for d in documents for rs in d["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]
    return [json.dumps(document(spans[i:i + per_line]), separators=(",", ":")) for i in range(0, len(spans), per_line)]


def interleave(*documents: dict[str, Any]) -> list[dict[str, Any]]:
    """The spans of several traces, alternated one by one (each trace's own order kept)."""
    lists = [[s for rs in d["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]] for d in documents]
    mixed = []
    while any(lists):
        for spans in lists:
            if spans:
                mixed.append(spans.pop(0))
    return [document(mixed)]


def mixed_fixture() -> list[str]:
    """Two interleaved runs (current and event form), a trace with no GenAI span, in 2-span lines."""
    current = otel_trace_from_chat(EMAIL_CHAT, name="email-current", tools=EMAIL_TOOLS)
    events = otel_trace_from_chat(EMAIL_CHAT, name="email-events", form="events")
    http_only = document([span(trace_id("http"), root_span_id("http"), None, "GET /health", T0, T0 + STEP,
                               {"http.request.method": "GET"})])
    return split_lines(interleave(current, events, http_only))


if __name__ == "__main__":
    target = Path(__file__).with_name("mixed.jsonl")
    target.write_text("".join(line + "\n" for line in mixed_fixture()), encoding="utf-8")
