"""Inspect AI eval logs for the tests, written by hand after Inspect's published schema.

Follows log format version 2 as inspect_ai 0.3.x writes it (``EvalLog``, ``EvalSample``,
``ChatMessage*``, ``ToolEvent``, ``StoreEvent``, ``StateEvent``, span events). Both files here
load with ``inspect_ai.log.read_eval_log`` (checked with inspect_ai 0.3.285).

    python tests/data/inspect/make_logs.py     # rewrites agent.eval and agent.json beside it

- ``agent_log()``: the fixture log (``agent.eval`` / ``agent.json``): a tool run joined in and out
  of order, nested spans repeating a store change, attachments, failed calls of every kind, a
  tool payload sent as a user message, a second epoch with no events, and an older-style sample
  whose store changes appear only in (nested) StateEvents.
- ``inspect_log_from_chat(messages, ...)``: the same run as an OpenAI-style chat transcript,
  written as an Inspect log, so that both importers can be compared.
- ``write_eval_log`` / ``write_json_log``: either form of a log, deterministically (fixed zip
  times, sorted members as Inspect writes them).
"""

from __future__ import annotations

import copy
import json
import zipfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CREATED = "2025-03-04T10:00:00+00:00"
ZIP_TIME = (2025, 3, 4, 10, 0, 0)


# --- pieces -------------------------------------------------------------------------------------


def eval_spec(task: str, model: str, created: str = CREATED) -> dict[str, Any]:
    return {
        "eval_id": f"eval-{task}",
        "run_id": "run-1",
        "created": created,
        "task": task,
        "task_id": f"{task}-id",
        "task_version": 0,
        "dataset": {"name": task, "samples": 1},
        "model": model,
        "config": {},
        "packages": {"inspect_ai": "0.3.85"},
    }


def eval_log(samples: list[dict[str, Any]], *, task: str = "agent", model: str = "openai/gpt-4o-mini",
             created: str = CREATED) -> dict[str, Any]:
    """A whole log (the .json form) holding ``samples``."""
    return {
        "version": 2,
        "status": "success",
        "eval": eval_spec(task, model, created),
        "plan": {"name": "plan", "steps": [{"solver": "generate", "params": {}}], "config": {}},
        "results": {"total_samples": len(samples), "completed_samples": len(samples), "scores": []},
        "stats": {"started_at": created, "completed_at": created, "model_usage": {}},
        "samples": samples,
    }


def event(kind: str, at: str, **fields: Any) -> dict[str, Any]:
    return {"timestamp": at, "working_start": 0.0, "event": kind, **fields}


def span(span_id: str, parent: str | None, name: str, kind: str, at: str) -> dict[str, Any]:
    begin = {"id": span_id, "type": kind, "name": name, "span_id": span_id}
    if parent:
        begin["parent_id"] = parent
    return event("span_begin", at, **begin)


def span_end(span_id: str, at: str) -> dict[str, Any]:
    return event("span_end", at, id=span_id, span_id=span_id)


def tool_event(call_id: str, function: str, arguments: dict[str, Any], result: Any, started: str,
               completed: str, span_id: str, **extra: Any) -> dict[str, Any]:
    located = {"span_id": span_id} if span_id else {}
    return event("tool", started, type="function", id=call_id, function=function, arguments=arguments,
                 result=result, events=[], completed=completed, **located, **extra)


def assistant(content: Any, *calls: dict[str, Any], message_id: str | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"content": content, "source": "generate", "role": "assistant"}
    if calls:
        message["tool_calls"] = list(calls)
    if message_id:
        message["id"] = message_id
    return message


def call(call_id: str, function: str, arguments: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"id": call_id, "function": function, "arguments": arguments, "type": "function", **extra}


def tool(call_id: str, function: str, content: Any, **extra: Any) -> dict[str, Any]:
    return {"content": content, "role": "tool", "tool_call_id": call_id, "function": function, **extra}


def output(text: str, model: str = "openai/gpt-4o-mini") -> dict[str, Any]:
    choices = [{"message": assistant(text), "stop_reason": "stop"}] if text else []
    return {"model": model, "choices": choices, "completion": text}


# --- the fixture log ----------------------------------------------------------------------------

T = "2025-03-04T10:00:0{}+00:00".format


NOTE = "Prefers email over phone. " * 5  # over 100 characters: Inspect logs it as an attachment


def _email_sample() -> dict[str, Any]:
    """Sample 1, epoch 1: two calls answered out of order, store changes in nested spans."""
    user = {"email": "a@x.com", "name": "Alice", "note": "attachment://n1"}
    # Each span logs the diff of the store between its start and its end, so an enclosing span
    # repeats its children's changes; only the root span's are replayed. Replaying the inner
    # ones as well would fail (their replace finds no user on the empty store) or repeat the
    # audit entry.
    inner = [{"op": "replace", "path": "/users/1/email", "value": "new@x.com", "replaced": "a@x.com"},
             {"op": "add", "path": "/audit/0", "value": "email changed"}]
    root = [{"op": "add", "path": "/users", "value": {"1": {**user, "email": "new@x.com"}}},
            {"op": "add", "path": "/audit", "value": ["email changed"]}]
    return {
        "id": 1,
        "epoch": 1,
        "input": "Change my email to new@x.com. I am user 1.",
        "target": "new@x.com",
        "messages": [
            {"id": "m0", "content": "You are a support agent.", "role": "system"},
            {"id": "m1", "content": "Change my email to new@x.com. I am user 1.", "source": "input", "role": "user"},
            assistant("Let me look.", call("c1", "get_user", {"user_id": 1}),
                      call("c2", "update_user", {"user_id": 1, "email": "new@x.com"})),
            tool("c2", "update_user", '{"ok": true}'),
            tool("c1", "get_user", '{"id": 1, "email": "a@x.com", "note": "trunc'),
            assistant([{"type": "text", "text": "Updated. "}, {"type": "reasoning", "reasoning": "hidden"},
                       {"type": "text", "text": "Anything else?"}]),
            {"id": "m6", "content": "No, thanks.", "role": "user"},
            assistant("Your email is now new@x.com."),
        ],
        "output": output("Your email is now new@x.com."),
        "scores": {"includes": {"value": "C", "answer": "new@x.com", "explanation": "found"}},
        "metadata": {"difficulty": "easy"},
        "store": {"users": {"1": {"email": "new@x.com", "name": "Alice", "note": NOTE}}, "audit": ["email changed"]},
        "events": [
            span("init", None, "init", "init", T(0)),
            event("sample_init", T(0), span_id="init", sample={"input": "...", "id": 1}, state={"store": {}}),
            span_end("init", T(0)),
            span("solvers", None, "solvers", "solvers", T(1)),
            span("setup", "solvers", "setup", "solver", T(1)),
            event("store", T(1), span_id="setup", changes=[{"op": "add", "path": "/users", "value": {"1": user}},
                                                          {"op": "add", "path": "/audit", "value": []}]),
            span_end("setup", T(1)),
            span("gen", "solvers", "generate", "solver", T(1)),
            tool_event("c1", "get_user", {"user_id": 1}, '{"id": 1, "email": "a@x.com", "note": "truncated in the message"}',
                       T(2), T(3), "gen", message_id="m4"),
            tool_event("c2", "update_user", {"user_id": 1, "email": "attachment://e1"}, {"type": "text", "text": '{"ok": true}'},
                       T(3), T(4), "gen"),
            span("toolspan", "gen", "update_user", "tool", T(3)),
            event("store", T(4), span_id="toolspan", changes=inner),
            span_end("toolspan", T(4)),
            tool_event("c9", "audit_log", {}, "ran by a solver", T(5), T(5), "gen"),
            event("store", T(5), span_id="gen", changes=inner),
            event("state", T(5), span_id="gen", changes=[{"op": "replace", "path": "/store/users/1/email", "value": "new@x.com"}]),
            span_end("gen", T(5)),
            event("store", T(6), span_id="solvers", changes=root),
            span_end("solvers", T(6)),
        ],
        "model_usage": {"openai/gpt-4o-mini": {"input_tokens": 120, "output_tokens": 30, "total_tokens": 150}},
        "total_time": 4.5,
        "working_time": 4.0,
        "attachments": {"n1": NOTE, "e1": "new@x.com"},
    }


def _refund_sample() -> dict[str, Any]:
    """Sample "refund-2": input as messages, every kind of failed call, an early stop."""
    return {
        "id": "refund-2",
        "epoch": 1,
        "input": [{"content": "Be careful with refunds.", "role": "system"},
                  {"content": "Refund order 7.", "role": "user", "source": "input"}],
        "target": ["refused", "approval"],
        "messages": [
            {"content": "Be careful with refunds.", "role": "system"},
            {"content": "Refund order 7.", "role": "user", "source": "input"},
            assistant("", call("r1", "refund", {"order": 7}), call("r2", "lookup", {}, parse_error="Expecting value: line 1"),
                      call("r3", "notify", {"order": 7}), call("r4", "escalate", {"order": 7})),
            tool("r1", "refund", "", error={"type": "permission", "message": "refunds need approval"}),
            tool("r2", "lookup", "", error={"type": "parsing", "message": "Expecting value: line 1"}),
            tool("r3", "notify", "sent"),
            tool("r4", "escalate", "queued", tool_error="escalations are closed"),
            {"content": [{"type": "image", "image": "data:image/png;base64,AAAA"}], "role": "user", "tool_call_id": ["r3"]},
            assistant("I could not refund it."),
        ],
        "output": output(""),
        "scores": {"match": {"value": 0}},
        "events": [
            event("sample_init", T(0), sample={"input": "...", "id": "refund-2"}, state={"store": {}}),
            tool_event("r1", "refund", {"order": 7}, "", T(1), T(2), None,
                       error={"type": "approval", "message": "the approver refused"}),
            tool_event("r3", "notify", {"order": 7}, "", T(2), T(3), None, failed=True),
        ],
        "error": {"message": "RuntimeError('boom')", "traceback": "Traceback...", "traceback_ansi": "Traceback..."},
        "limit": {"type": "message", "limit": 10},
        "total_time": 2.0,
    }


def _second_epoch() -> dict[str, Any]:
    """Sample 1, epoch 2: no events at all (so no world), no output.completion."""
    first = _email_sample()
    return {
        "id": 1,
        "epoch": 2,
        "input": first["input"],
        "target": first["target"],
        "messages": first["messages"][:2] + [assistant("I cannot do that.")],
        "output": {"model": "openai/gpt-4o-mini", "choices": [], "completion": ""},
    }


def _state_only_sample() -> dict[str, Any]:
    """Sample 3: an older log with steps, no spans and no StoreEvent: the store changes are
    read from the outermost StateEvents (the nested one repeats them)."""
    return {
        "id": 3,
        "epoch": 1,
        "input": "Count to two.",
        "target": "2",
        "messages": [{"content": "Count to two.", "role": "user"}, assistant("1, 2")],
        "output": output("1, 2"),
        "events": [
            event("sample_init", T(0), sample={"input": "Count to two.", "id": 3}, state={"store": {}}),
            event("step", T(0), action="begin", name="prepare", type="solver"),
            event("state", T(0), changes=[{"op": "add", "path": "/store/steps", "value": []}]),
            event("step", T(0), action="end", name="prepare", type="solver"),
            event("step", T(0), action="begin", name="counter", type="solver"),
            event("step", T(0), action="begin", name="inner", type="solver"),
            event("state", T(1), changes=[{"op": "add", "path": "/store/steps/0", "value": "one"}]),
            event("step", T(1), action="end", name="inner", type="solver"),
            event("state", T(2), changes=[{"op": "add", "path": "/store/steps/0", "value": "one"},
                                           {"op": "add", "path": "/messages/1", "value": {"role": "assistant", "content": "1"}}]),
            event("step", T(2), action="end", name="counter", type="solver"),
            event("step", T(3), action="begin", name="again", type="solver"),
            event("state", T(3), changes=[{"op": "add", "path": "/store/steps/1", "value": "two"},
                                           {"op": "add", "path": "/store/done", "value": True}]),
            event("step", T(3), action="end", name="again", type="solver"),
        ],
    }


def agent_log() -> dict[str, Any]:
    samples = [_email_sample(), _state_only_sample(), _refund_sample(), _second_epoch()]  # Inspect's order
    return eval_log(samples, task="agent/support")


# --- a chat transcript as an Inspect log --------------------------------------------------------


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content or ""


def inspect_sample_from_chat(messages: list[dict[str, Any]], *, sample_id: int | str = 1, epoch: int = 1,
                             target: str = "", metadata: dict[str, Any] | None = None,
                             tool_events: bool = False, store: dict[str, Any] | None = None) -> dict[str, Any]:
    """One Inspect sample holding the OpenAI-style ``messages`` (``tool_calls`` with JSON-text
    ``arguments``, ``tool`` messages with ``tool_call_id``). The input is the first user message.

    ``tool_events``: also log a ToolEvent per call (with start and end times, which an OpenAI
    transcript cannot carry: leave it off to compare the two imports). ``store``: the initial
    store, logged in a ``sample_init`` event.
    """
    converted, events, clock = [], [], 0
    for message in messages:
        role = message["role"]
        if role == "assistant":
            calls = [call(c["id"], c["function"]["name"], json.loads(c["function"].get("arguments") or "{}"))
                     for c in message.get("tool_calls") or []]
            converted.append(assistant(message.get("content") or "", *calls))
        elif role == "tool":
            converted.append(tool(message["tool_call_id"], message.get("name") or "", message.get("content") or ""))
        else:
            converted.append({"content": message.get("content") or "", "role": role})
    if tool_events:
        results = {m["tool_call_id"]: m["content"] for m in converted if m["role"] == "tool"}
        for message in converted:
            for c in message.get("tool_calls") or []:
                clock += 1
                events.append(tool_event(c["id"], c["function"], c["arguments"], results.get(c["id"], ""),
                                         f"2025-03-04T10:00:{clock:02d}+00:00", f"2025-03-04T10:00:{clock:02d}.5+00:00", None))
    if store is not None:
        events.insert(0, event("sample_init", "2025-03-04T10:00:00+00:00", sample={"input": ""}, state={"store": store}))
    answers = [_text(m.get("content")) for m in converted if m["role"] == "assistant" and _text(m.get("content"))]
    first_user = next((m for m in converted if m["role"] == "user"), {"content": ""})
    sample = {
        "id": sample_id,
        "epoch": epoch,
        "input": _text(first_user["content"]),
        "target": target,
        "messages": converted,
        "output": output(answers[-1] if answers else ""),
        "events": events,
    }
    if metadata:
        sample["metadata"] = metadata
    return sample


def inspect_log_from_chat(messages: list[dict[str, Any]], *, task: str = "chat", model: str = "openai/gpt-4o-mini",
                          **sample: Any) -> dict[str, Any]:
    """A one-sample Inspect log (the .json form; ``write_eval_log`` makes the .eval) of the
    OpenAI-style ``messages``; ``sample`` goes to ``inspect_sample_from_chat``. Its trajectory
    id is ``{sample_id}_epoch_{epoch}``."""
    return eval_log([inspect_sample_from_chat(messages, **sample)], task=task, model=model)


# --- writing ------------------------------------------------------------------------------------


def write_json_log(log: dict[str, Any], path: Path) -> Path:
    path.write_text(json.dumps(log, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def _member(archive: zipfile.ZipFile, name: str, value: Any) -> None:
    info = zipfile.ZipInfo(name, date_time=ZIP_TIME)
    info.compress_type = zipfile.ZIP_DEFLATED
    archive.writestr(info, json.dumps(value, indent=2, ensure_ascii=False))


def write_eval_log(log: dict[str, Any], path: Path, *, header: bool = True) -> Path:
    """The .eval form: ``_journal/start.json``, ``samples/{id}_epoch_{n}.json``, ``summaries.json``
    and ``header.json`` (``header=False``: a log still being written, with only the journal)."""
    log = copy.deepcopy(log)
    samples = log.pop("samples", None) or []
    with zipfile.ZipFile(path, "w") as archive:
        _member(archive, "_journal/start.json", {"version": log["version"], "eval": log["eval"], "plan": log["plan"]})
        for sample in samples:
            _member(archive, f"samples/{sample['id']}_epoch_{sample['epoch']}.json", sample)
        summaries = [{"id": s["id"], "epoch": s["epoch"], "input": s["input"], "target": s["target"],
                      "scores": s.get("scores"), "completed": True} for s in samples]
        _member(archive, "summaries.json", summaries)
        if header:
            _member(archive, "header.json", log)
    return path


def main() -> None:
    log = agent_log()
    write_json_log(log, HERE / "agent.json")
    write_eval_log(log, HERE / "agent.eval")
    print(f"wrote {HERE / 'agent.json'} and {HERE / 'agent.eval'}")


if __name__ == "__main__":
    main()
