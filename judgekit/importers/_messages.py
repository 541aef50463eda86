"""OpenAI-style chat messages -> a Trajectory (shared by the openai-chat and tau-bench importers)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Literal

from pydantic import ValidationError

from judgekit._util.io import describe_validation_error
from judgekit._util.strict_json import MAX_DEPTH, strict_json_loads
from judgekit.errors import InputError
from judgekit.trajectory import Call, Trajectory, UserTurn


def _text(content: Any) -> str:
    """Message content as text: a string, or the text parts of a list of content parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return json.dumps(content)


RESULT_DEPTH = 3
"""How deep a call's result sits in a trajectory line (the line, its calls, the call)."""


def _maybe_json(text: str) -> Any:
    """A tool result that is JSON text as its value; otherwise, or when the value would nest the
    trajectory line deeper than the reader allows, the text as it is."""
    try:
        return strict_json_loads(text, max_depth=MAX_DEPTH - RESULT_DEPTH)
    except (ValueError, TypeError):
        return text


def messages_to_trajectory(
    messages: list[dict[str, Any]],
    *,
    trajectory_id: str,
    prompt: str | None = None,
    metadata: dict[str, Any] | None = None,
    output: Literal["last", "all"] = "last",
    is_error: Callable[[str], bool] = lambda _text: False,
    latency_s: Any = None,
    where: tuple[str, int | None, str] = ("", None, ""),
) -> Trajectory:
    """Join assistant ``tool_calls`` with ``tool`` messages by ``tool_call_id``.

    ``prompt`` defaults to the first user message; later user turns and system messages become
    context (claims may cite them), and the user turns are also ``turns``, each placed among the
    calls (a safety scan reads a confirmation from them). ``output`` is the last assistant text, or every assistant
    text in order when the answer is spread over a conversation.
    """
    path, line, label = where
    try:
        return _convert(messages, trajectory_id, prompt, metadata, output, is_error, latency_s, label, path, line)
    except (TypeError, AttributeError, ValidationError) as exc:
        detail = describe_validation_error(exc) if isinstance(exc, ValidationError) else "a message or tool call has the wrong shape"
        raise InputError(f"{label}{detail}", path or None, line) from None


def _convert(messages, trajectory_id, prompt, metadata, output, is_error, latency_s, label, path, line) -> Trajectory:
    calls: list[Call] = []
    by_id: dict[str, int] = {}
    context: dict[str, str] = {}
    answers: list[str] = []
    turns: list[UserTurn] = []
    first_user: str | None = None
    for n, message in enumerate(messages):
        if not isinstance(message, dict) or "role" not in message:
            raise InputError(f"{label}message {n} is not a chat message with a role", path or None, line)
        role = message["role"]
        if role == "system":
            context[f"system-{len([k for k in context if k.startswith('system')]) + 1}"] = _text(message.get("content"))
        elif role == "user":
            text = _text(message.get("content"))
            if first_user is None:
                first_user = text
            else:
                context[f"user-{n}"] = text
                turns.append(UserTurn(text=text, before_call=len(calls)))
        elif role == "assistant":
            text = _text(message.get("content"))
            if text:
                answers.append(text)
            for raw in message.get("tool_calls") or []:
                function = raw.get("function") or {}
                arguments = function.get("arguments") or "{}"
                error = None
                try:
                    args = strict_json_loads(arguments) if isinstance(arguments, str) else arguments
                except ValueError:
                    args, error = {"$unparsed": arguments}, "the arguments were not valid JSON"
                if not isinstance(args, dict):
                    args, error = {"$unparsed": arguments}, "the arguments were not a JSON object"
                calls.append(Call(id=raw.get("id"), tool=function.get("name", ""), args=args, error=error))
                if raw.get("id"):
                    by_id[raw["id"]] = len(calls) - 1
        elif role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in by_id:
                raise InputError(f"{label}message {n}: tool result for unknown tool_call_id {call_id!r}", path or None, line)
            call = calls[by_id[call_id]]
            text = _text(message.get("content"))
            call.result = _maybe_json(text)
            if call.error is None and is_error(text):
                call.error = text
    final = answers[-1] if answers and output == "last" else "\n\n".join(answers)
    return Trajectory(
        id=trajectory_id,
        prompt=prompt if prompt is not None else (first_user or ""),
        calls=calls,
        output=final,
        context=context,
        metadata=metadata or {},
        latency_s=latency_s,
        turns=turns,
    )
