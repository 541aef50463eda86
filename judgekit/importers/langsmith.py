"""``judgekit import langsmith``: LangSmith / LangChain run trees, with human feedback as labels.

Follows the ``Run`` and ``Feedback`` schemas of the LangSmith Python SDK
(``langsmith/schemas.py``, the 0.4 line): a run has ``id``, ``name``, ``run_type`` (chain, llm,
tool, retriever, prompt, parser, embedding), ``inputs``, ``outputs``, ``error``, ``start_time``,
``end_time``, ``parent_run_id``, ``trace_id``, ``dotted_order`` ({time}{run id}, dot-joined from
the root down), ``extra.metadata`` and ``tags``; feedback has ``id``, ``run_id``, ``trace_id``,
``key``, ``score``, ``value``, ``comment``, ``created_at``, ``feedback_config`` and
``feedback_source`` ({type: api | app | model, user_id, user_name}; ``source`` is read too).

SRC is a JSON Lines file or a JSON list holding runs and, optionally, feedback (a record with a
``run_type`` is a run; one with a ``key`` and a ``run_id`` or ``trace_id`` is feedback), or a
folder with ``runs.jsonl`` (or ``runs.json``) and, optionally, ``feedback.jsonl`` (or
``feedback.json``). A run may hold its descendants nested in ``child_runs`` (a run tree, as
``Client.read_run(..., load_child_runs=True)`` gives it): they are read as runs of its trace.

Runs -> ``OUT/trajectories.jsonl`` (and the import writer's ``OUT/suite.yaml`` to fill in: a run
carries no criteria), one trajectory per root run (no ``parent_run_id``), id = the
root's run id (one that heads two traces is an error), in the order the traces appear:

- a run's trace is its ``trace_id``, else the run id at the head of its ``dotted_order``, else
  (a root) its own id. The runs of a trace are ordered by ``dotted_order`` (a run without one
  gets ``<parent's>.<start_time><id>``, as LangSmith builds it): the order they ran in, parents
  before children. A ``dotted_order`` that does not extend its parent's is an error;
- ``calls``: every ``tool`` run at any depth, in that order: ``name`` -> tool, ``inputs`` -> args,
  ``outputs`` -> result (LangChain's ``{"output": x}`` unwrapped; a tool message gives its
  content, JSON-decoded when it is JSON), ``error`` -> error (also a tool message with
  ``status: error``), ``start_time``/``end_time``; the id is the tool call id when known;
- ``prompt`` from the root's ``inputs``: ``input`` or ``question`` when text, else the last
  user message of ``messages`` (OpenAI ``role`` or LangChain ``type``/serialized messages; the
  messages before it go to context as ``message-<n>``), else the only text value, else the
  inputs as JSON. ``output`` from the root's ``outputs``: ``output`` or ``answer``, the last
  assistant message of ``messages``, an llm run's ``generations``/``choices``, the only text
  value, else the outputs as JSON;
- ``retriever`` runs' ``documents`` -> context (``doc-<n>``: their ``page_content``);
- tool calls that llm runs asked for (LangChain ``tool_calls``, OpenAI ``tool_calls``) and that
  no later tool run of that name (or tool call id) answered are *not* calls: nothing shows they
  ran. They are kept in ``metadata.untraced_tool_calls`` (name, args, id, llm run id);
- ``metadata``: ``run_id``, ``trace_id``, ``name``, ``run_type``, ``tags``, ``metadata`` (the
  root's ``extra.metadata``), ``error`` (the root's), ``runs`` (how many), ``source``;
  ``latency_s`` = the root's ``end_time - start_time``.
Lost: chain/llm/prompt/parser runs other than as above, token counts and costs, events,
attachments, ``serialized``, feedback stats.

Feedback -> ``OUT/labels.jsonl`` (``judgekit.calibration.labels.Label``) when the input holds
any (a labels file: copy it to ``calibration/<rubric-id>/labels.jsonl`` of the suite it
calibrates). Only human feedback (``feedback_source.type`` in ``human_sources=``: ``app``, the
UI's annotations, and ``api``, logged by code such as a thumbs-up widget, by default; pass
``("app",)`` when your API feedback is not a person's; ``model`` is an evaluator) on a root run
(or on a trace) becomes a label,
with ``labeler`` = the source's ``user_name``, else ``user_id``, else ``langsmith-<type>``,
``labeler_kind`` ``person`` (only the sources named a person's become labels),
``labeled_at`` = ``created_at``, ``note`` = ``comment``. Keys map to axes by ``FEEDBACK_AXES``
(override with ``feedback_axes=``); task success takes pass/fail (``score`` true/false or 1/0,
or ``value`` "pass"/"fail"), the graded axes a score in [0, 1] (scaled by ``feedback_config``'s
min and max when it gives them). The same labeler on the same item twice: the latest
``created_at`` wins. Everything else is not guessed but listed, with why, in
``OUT/feedback-unmapped.jsonl``: unknown keys, model feedback, feedback on a step of a trace or
on a run not in the input, scores that do not fit the axis, superseded labels.

Streaming: runs are read one at a time and one trace's runs are held at a time, so the input
must be grouped by trace (as an export by trace is); a trace that comes back after another is an
error saying so. Also held: the id of every trace seen, and the labels (small) until they are
written sorted. A JSON list is one document, read whole (up to 1 GiB; JSON Lines is streamed).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from judgekit._util.io import MAX_FILE_BYTES, canonical_json, describe_validation_error, iter_json_lines, \
    open_regular_file, read_json
from judgekit._util.strict_json import strict_json_loads
from judgekit.calibration.labels import Label
from judgekit.errors import InputError
from judgekit.importers._writer import ImportWriter
from judgekit.trajectory import Call, Trajectory

#: Feedback key -> the axis its labels score (keys used by LangSmith's and LangChain's evaluators
#: and judgekit's own axis names). Any other key is reported, never guessed.
FEEDBACK_AXES: dict[str, str] = {
    "task_success": "task_success", "success": "task_success", "correctness": "task_success",
    "correct": "task_success",
    "tool_correctness": "tool_correctness", "trajectory_accuracy": "tool_correctness",
    "faithfulness": "faithfulness", "groundedness": "faithfulness", "grounded": "faithfulness",
}
BINARY_AXES = ("task_success",)
HUMAN_SOURCES = ("api", "app")
_ROLES = {"human": "user", "user": "user", "ai": "assistant", "assistant": "assistant", "system": "system",
          "tool": "tool", "function": "tool", "HumanMessage": "user", "AIMessage": "assistant",
          "SystemMessage": "system", "ToolMessage": "tool", "AIMessageChunk": "assistant"}


@dataclass(frozen=True)
class _At:
    """Where a record is: its file, its line (JSON Lines) or its place in a JSON list."""

    path: Path
    line: int | None
    record: int

    def error(self, message: str) -> InputError:
        """An error here: a JSON Lines line is named by InputError, a JSON list's record in the message."""
        where = "" if self.line is not None else f"record {self.record}: "
        return InputError(where + message, self.path, self.line)

    def __str__(self) -> str:
        return f"{self.path.name}:{self.line}" if self.line is not None else f"{self.path.name} record {self.record}"


@dataclass
class _Run:
    at: _At
    data: dict[str, Any]
    order: str = ""

    @property
    def id(self) -> str:
        return str(self.data["id"])

    @property
    def parent(self) -> str | None:
        parent = self.data.get("parent_run_id")
        return str(parent) if parent else None


# --- reading records ---------------------------------------------------------------------------


def _records(path: Path) -> Iterator[tuple[_At, Any]]:
    """Every record with where it is: JSON Lines streamed, a JSON list read whole."""
    with open_regular_file(path, expected="a JSON or JSON Lines file") as handle:
        head = handle.read(4096).lstrip()
    if head.startswith(b"["):
        for n, record in enumerate(read_json(path, max_bytes=MAX_FILE_BYTES)):
            yield _At(path, None, n), record
        return
    for n, (line, record) in enumerate(iter_json_lines(path)):
        yield _At(path, line, n), record


def _kind(record: Any) -> str:
    if isinstance(record, dict) and "run_type" in record:
        return "run"
    if isinstance(record, dict) and "key" in record and ("run_id" in record or "trace_id" in record):
        return "feedback"
    return "neither"


def _layout(src: Path) -> tuple[Path, Path | None, bool]:
    """(runs file, feedback file or None, whether the runs file also holds the feedback)."""
    if not src.is_dir():
        return src, src, True
    runs = next((src / n for n in ("runs.jsonl", "runs.json") if (src / n).is_file()), None)
    if runs is None:
        raise InputError("a LangSmith export folder needs runs.jsonl (or runs.json)", src)
    feedback = next((src / n for n in ("feedback.jsonl", "feedback.json") if (src / n).is_file()), None)
    return runs, feedback, False


# --- traces ------------------------------------------------------------------------------------


def _dotted_head(order: str) -> str | None:
    head = order.split(".", 1)[0]
    return head[head.index("Z") + 1:] if "Z" in head else None


def _trace_key(run: dict[str, Any]) -> str | None:
    if run.get("trace_id"):
        return str(run["trace_id"])
    head = _dotted_head(run["dotted_order"]) if isinstance(run.get("dotted_order"), str) else None
    if head:
        return head
    return None if run.get("parent_run_id") else str(run["id"])


def _check_run(record: dict[str, Any], at: _At) -> _Run:
    for key in ("id", "name", "run_type"):
        if not isinstance(record.get(key), str) or not record[key]:
            raise at.error(f"a run needs a non-empty string {key!r}")
    for key in ("inputs", "outputs", "extra"):
        if record.get(key) is not None and not isinstance(record[key], dict):
            raise at.error(f"run {record['id']}: {key!r} must be an object")
    return _Run(at, record)


def _traces(path: Path, mixed: bool, seen: dict[str, int]) -> Iterator[list[_Run]]:
    """The runs of each trace, one trace at a time (the input grouped by trace). ``seen`` counts
    the records of each kind; feedback is skipped here (read in a second pass) when ``mixed``."""
    group: list[_Run] = []
    current: str | None = None
    done: set[str] = set()
    for at, record in _records(path):
        kind = _kind(record)
        seen[kind] = seen.get(kind, 0) + 1
        if kind == "feedback" and mixed:
            continue
        if kind == "feedback":
            raise at.error("feedback in the runs file: in a folder it belongs in feedback.jsonl")
        if kind == "neither":
            raise at.error("neither a run (no 'run_type') nor feedback (no 'key' with a 'run_id')")
        for data in _tree(record, at):
            run = _check_run(data, at)
            key = _trace_key(data)
            if key is None:
                raise at.error(f"run {run.id} has a parent but no trace_id or dotted_order naming its root: its "
                               "trace is unknown")
            if key != current:
                if group:
                    yield group
                if key in done:
                    raise at.error(f"trace {key} appears again after other traces: group the runs by trace "
                                   "(sort the export by trace_id, then dotted_order)")
                done.add(key)
                group, current = [], key
            group.append(run)
    if group:
        yield group


def _tree(record: dict[str, Any], at: _At) -> Iterator[dict[str, Any]]:
    """A run, then the runs nested in its ``child_runs`` (depth first), each without them; a nested
    run that names no parent or trace gets the id and the trace of the run it is nested in."""
    stack = [record]
    while stack:
        run = stack.pop()
        children = run.pop("child_runs", None) or []
        if not isinstance(children, list):
            raise at.error(f"run {run.get('id')}: 'child_runs' must be a list of runs")
        yield run
        for child in reversed(children):
            if _kind(child) != "run":
                raise at.error(f"run {run.get('id')}: 'child_runs' holds something that is not a run (no 'run_type')")
            stack.append({**child, "parent_run_id": child.get("parent_run_id") or run.get("id"),
                          "trace_id": child.get("trace_id") or _trace_key(run)})


def _ordered(group: list[_Run]) -> tuple[_Run, list[_Run]]:
    """The root and every run in dotted order (parents before children, in the order they ran)."""
    runs: dict[str, _Run] = {}
    for run in group:
        if run.id in runs:
            raise run.at.error(f"run {run.id} appears twice")
        runs[run.id] = run
    roots = [run for run in group if run.parent is None]
    if len(roots) != 1:
        raise group[0].at.error(f"the trace of run {group[0].id} has {len(roots)} root runs (runs without "
                                "parent_run_id); expected one")
    for run in group:
        _order_of(run, runs)
    return roots[0], sorted(group, key=lambda run: run.order)


def _order_of(run: _Run, runs: dict[str, _Run]) -> None:
    """Give ``run`` (and its ancestors) their dotted order; iterative, so depth is no limit."""
    chain = [run]  # run, its parent, ... up to the first one already ordered (or the root)
    while not chain[-1].order and chain[-1].parent is not None:
        if chain[-1].parent not in runs:
            raise chain[-1].at.error(f"run {chain[-1].id}: parent run {chain[-1].parent} is not in its trace")
        chain.append(runs[chain[-1].parent])
        if len(chain) > len(runs):
            raise run.at.error(f"run {run.id}: parent_run_id loops back on itself")
    for child in reversed(chain):
        if child.order:
            continue
        parent = runs[child.parent].order if child.parent is not None else None
        given = child.data.get("dotted_order")
        if isinstance(given, str) and given:
            if parent is not None and not given.startswith(parent + "."):
                raise child.at.error(f"run {child.id}: dotted_order does not extend its parent's")
            child.order = given
        else:
            own = f"{_stamp(child)}{child.id}"
            child.order = own if parent is None else f"{parent}.{own}"


def _time(value: Any) -> datetime:
    """An ISO 8601 time as naive UTC (a time without an offset is taken as UTC, as LangSmith writes it)."""
    return _utc(datetime.fromisoformat(str(value).replace("Z", "+00:00")))


def _stamp(run: _Run) -> str:
    """LangSmith's dotted-order time: start_time in UTC as %Y%m%dT%H%M%S%fZ."""
    try:
        return _time(run.data["start_time"]).strftime("%Y%m%dT%H%M%S%fZ")
    except (KeyError, ValueError, TypeError):
        raise run.at.error(f"run {run.id} has neither a dotted_order nor a valid start_time: its place in "
                           "the trace is unknown") from None


# --- messages and shapes -----------------------------------------------------------------------


def _message(value: Any) -> dict[str, Any] | None:
    """A chat message as {role, text, tool_calls, tool_call_id, status}, or None if not one."""
    if not isinstance(value, dict):
        return None
    if value.get("lc") == 1 and isinstance(value.get("kwargs"), dict) and value.get("id") \
            and isinstance(value["id"], list):
        return _message({**value["kwargs"], "type": value["id"][-1]})
    role = _ROLES.get(str(value.get("role") or value.get("type") or ""))
    if role is None or "content" not in value:
        return None
    extra = value.get("additional_kwargs") if isinstance(value.get("additional_kwargs"), dict) else {}
    calls = value.get("tool_calls") or extra.get("tool_calls") or []
    calls = calls if isinstance(calls, list) else []
    return {"role": role, "text": _text(value.get("content")), "tool_calls": [_tool_call(c) for c in calls],
            "tool_call_id": value.get("tool_call_id"), "status": value.get("status")}


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part if isinstance(part, str) else str(part.get("text", "")) for part in content
                       if isinstance(part, (str, dict)))
    return canonical_json(content)


def _tool_call(raw: Any) -> dict[str, Any]:
    """LangChain {name, args, id} or OpenAI {id, function: {name, arguments}} -> {name, args, id}."""
    if not isinstance(raw, dict):
        return {"name": "", "args": {}, "id": None}
    function = raw.get("function") if isinstance(raw.get("function"), dict) else {}
    args = raw.get("args", function.get("arguments", {}))
    if isinstance(args, str):
        args = _maybe_json(args)
    call_id = raw.get("id")
    return {"name": str(raw.get("name") or function.get("name") or ""), "args": args,
            "id": None if call_id is None else str(call_id)}


def _maybe_json(text: str) -> Any:
    try:
        return strict_json_loads(text)
    except (ValueError, TypeError):
        return text


def _messages(value: Any) -> list[dict[str, Any]]:
    """Messages in a list (or LangChain's list of lists), in order."""
    if not isinstance(value, list):
        return []
    flat = [m for item in value for m in (item if isinstance(item, list) else [item])]
    return [m for m in map(_message, flat) if m is not None]


def _llm_messages(outputs: dict[str, Any]) -> list[dict[str, Any]]:
    """The messages an llm run produced: LangChain generations, OpenAI choices, or a message."""
    found = [g.get("message") for gs in outputs.get("generations") or [] for g in (gs if isinstance(gs, list) else [gs])
             if isinstance(g, dict)]
    found += [c.get("message") for c in outputs.get("choices") or [] if isinstance(c, dict)]
    found += [outputs, outputs.get("output")]
    return [m for m in map(_message, found) if m is not None]


def _llm_text(outputs: dict[str, Any]) -> str | None:
    texts = [m["text"] for m in _llm_messages(outputs) if m["role"] == "assistant"]
    texts += [g["text"] for gs in outputs.get("generations") or [] for g in (gs if isinstance(gs, list) else [gs])
              if isinstance(g, dict) and isinstance(g.get("text"), str) and not g.get("message")]
    return texts[-1] if texts else None


def _prompt(inputs: dict[str, Any]) -> tuple[str, dict[str, str]]:
    for key in ("input", "question"):
        if isinstance(inputs.get(key), str):
            return inputs[key], {}
        if (message := _message(inputs.get(key))) is not None:
            return message["text"], {}
    messages = _messages(inputs.get("messages"))
    users = [n for n, m in enumerate(messages) if m["role"] == "user"]
    if users:
        last = users[-1]
        return messages[last]["text"], {f"message-{n}": m["text"] for n, m in enumerate(messages[:last]) if m["text"]}
    return _only_text(inputs), {}


def _output(outputs: dict[str, Any]) -> str:
    for key in ("output", "answer"):
        if isinstance(outputs.get(key), str):
            return outputs[key]
        if (message := _message(outputs.get(key))) is not None:
            return message["text"]
    answers = [m["text"] for m in _messages(outputs.get("messages")) if m["role"] == "assistant" and m["text"]]
    if answers:
        return answers[-1]
    text = _llm_text(outputs)
    return text if text is not None else _only_text(outputs)


def _only_text(value: dict[str, Any]) -> str:
    texts = [v for v in value.values() if isinstance(v, str)]
    if len(texts) == 1 and len(value) == 1:
        return texts[0]
    return canonical_json(value) if value else ""


# --- one trace -> one trajectory ---------------------------------------------------------------


@dataclass
class _Trace:
    calls: list[Call] = field(default_factory=list)
    context: dict[str, str] = field(default_factory=dict)
    asked: list[dict[str, Any]] = field(default_factory=list)  # tool calls llm runs asked for


def _tool_result(outputs: Any) -> tuple[Any, str | None, str | None]:
    """(result, error from a tool message, tool call id)."""
    value = outputs.get("output", outputs) if isinstance(outputs, dict) and set(outputs) == {"output"} else outputs
    message = _message(value)
    if message is None or message["role"] != "tool":
        return value, None, None
    error = message["text"] if message["status"] == "error" else None
    call_id = message["tool_call_id"]
    return _maybe_json(message["text"]), error, None if call_id is None else str(call_id)


def _add_run(trace: _Trace, run: _Run) -> None:
    data = run.data
    if data["run_type"] == "tool":
        result, message_error, call_id = _tool_result(data.get("outputs"))
        asked_id = _answer(trace, data["name"], call_id)
        trace.calls.append(Call(id=call_id or asked_id, tool=data["name"], args=data.get("inputs") or {},
                                result=result, error=data.get("error") or message_error,
                                started_at=data.get("start_time"), ended_at=data.get("end_time")))
    elif data["run_type"] == "retriever":
        for doc in (data.get("outputs") or {}).get("documents") or []:
            if isinstance(doc, dict) and isinstance(doc.get("page_content"), str):
                trace.context[f"doc-{len(trace.context) + 1}"] = doc["page_content"]  # it holds documents only
    elif data["run_type"] == "llm":
        for message in _llm_messages(data.get("outputs") or {}):
            trace.asked += [{**call, "llm_run_id": run.id} for call in message["tool_calls"]]


def _answer(trace: _Trace, name: str, call_id: str | None) -> str | None:
    """Mark the tool call this tool run answers (by id, else the first asked of that name)."""
    for n, asked in enumerate(trace.asked):
        if (call_id is not None and asked["id"] == call_id) or (call_id is None and asked["name"] == name):
            return trace.asked.pop(n)["id"]
    return None


def _trajectory(group: list[_Run]) -> Trajectory:
    root, ordered = _ordered(group)
    trace = _Trace()
    try:
        for run in ordered:
            _add_run(trace, run)
        data = root.data
        prompt, context = _prompt(data.get("inputs") or {})
        metadata = {"run_id": root.id, "trace_id": str(data.get("trace_id") or root.id), "name": data["name"],
                    "run_type": data["run_type"], "tags": data.get("tags") or [],
                    "metadata": (data.get("extra") or {}).get("metadata") or {}, "runs": len(group),
                    "source": root.at.path.name}
        if data.get("error"):
            metadata["error"] = data["error"]
        if trace.asked:
            metadata["untraced_tool_calls"] = trace.asked
        return Trajectory(id=root.id, prompt=prompt, calls=trace.calls, output=_output(data.get("outputs") or {}),
                          context={**context, **trace.context}, metadata=metadata, latency_s=_latency(data))
    except ValidationError as exc:
        raise root.at.error(f"trace {root.id}: {describe_validation_error(exc)}") from None
    except (TypeError, AttributeError):  # a value of a shape none of the readers above expects
        raise root.at.error(f"trace {root.id}: a run's inputs or outputs have a shape this importer cannot "
                            "read") from None


def _latency(root: dict[str, Any]) -> float | None:
    """The root's end_time - start_time in seconds; None when either is missing or unreadable."""
    try:
        seconds = (_time(root["end_time"]) - _time(root["start_time"])).total_seconds()
    except (KeyError, ValueError, TypeError):
        return None
    return seconds if seconds >= 0 else None


# --- feedback -> labels ------------------------------------------------------------------------


def _feedback(path: Path, mixed: bool) -> Iterator[tuple[_At, dict[str, Any]]]:
    for at, record in _records(path):
        kind = _kind(record)
        if kind == "feedback":
            yield at, record
        elif not mixed:
            raise at.error("not feedback: a feedback record needs a 'key' and a 'run_id' or 'trace_id'")


def _label(record: dict[str, Any], axis: str, human_sources: tuple[str, ...]) -> Label | str:
    """The label a feedback record gives, or why it gives none."""
    source = record.get("feedback_source") or record.get("source")
    source = {"type": source} if isinstance(source, str) else source if isinstance(source, dict) else {}
    kind = source.get("type")
    if kind not in human_sources:
        return f"feedback_source type {kind!r} is not a person's ({', '.join(human_sources)})"
    labeler = source.get("user_name") or source.get("user_id") or f"langsmith-{kind}"
    common = {"trajectory_id": str(record.get("run_id") or record.get("trace_id")), "axis": axis,
              "labeler": str(labeler), "labeler_kind": "person", "labeled_at": record.get("created_at"), "note": record.get("comment")}
    score, value = record.get("score"), record.get("value")
    if axis in BINARY_AXES:
        if score in (True, False, 0, 1):
            return Label(**common, label="pass" if score else "fail")
        if score is None and value in ("pass", "fail"):
            return Label(**common, label=value)
        return f"{axis} takes pass/fail (score true/false or 1/0), not score {score!r}"
    if isinstance(score, bool):
        return Label(**common, score=float(score))
    if isinstance(score, (int, float)):
        config = record.get("feedback_config") if isinstance(record.get("feedback_config"), dict) else {}
        low, high = config.get("min"), config.get("max")
        scaled = score
        if isinstance(low, (int, float)) and isinstance(high, (int, float)) and high > low:
            try:
                scaled = (score - low) / (high - low)
            except OverflowError:  # an integer too large for a float: off any scale
                scaled = float("inf")
        if 0 <= scaled <= 1:
            return Label(**common, score=float(scaled))
    return f"{axis} takes a score in [0, 1] (or a scale in feedback_config min/max), not {score!r}"


def _labels(path: Path, mixed: bool, roots: set[str], axes: Mapping[str, str],
            human_sources: tuple[str, ...]) -> tuple[list[Label], list[dict[str, Any]]]:
    """The labels (sorted by trajectory, axis, labeler) and the feedback that gave none, with why."""
    kept: dict[tuple[str, str, str], tuple[tuple[datetime, str], dict[str, Any], Label]] = {}
    unmapped: list[dict[str, Any]] = []
    for at, record in _feedback(path, mixed):
        if not isinstance(record["key"], str):
            raise at.error("'key' must be a string")
        note = {"feedback_id": record.get("id"), "key": record["key"], "run_id": record.get("run_id"),
                "source": str(at)}
        if record["key"] not in axes:
            known = ", ".join(sorted(axes))
            unmapped.append({**note, "reason": f"key {record['key']!r} maps to no axis (known: {known})"})
            continue
        if str(record.get("run_id") or record.get("trace_id")) not in roots:
            unmapped.append({**note, "reason": "not on a root run of this input (a step inside a trace, or a run "
                                               "not in it)"})
            continue
        try:
            label = _label(record, axes[record["key"]], human_sources)
        except ValidationError as exc:
            raise at.error(describe_validation_error(exc)) from None
        if isinstance(label, str):
            unmapped.append({**note, "reason": label})
            continue
        # ties on time and id go to the record's content, so the order of the feedback does not matter
        entry = ((_utc(label.labeled_at), str(record.get("id") or ""), canonical_json(record)), note, label)
        slot = (label.trajectory_id, label.axis, label.labeler)
        if slot in kept:  # the same person on the same item again: the later one stands
            older, entry = sorted([kept[slot], entry], key=lambda item: item[0])
            unmapped.append({**older[1], "reason": "superseded by a later label from the same labeler"})
        kept[slot] = entry
    return [kept[slot][2] for slot in sorted(kept)], unmapped


def _utc(moment: datetime | None) -> datetime:
    if moment is None:
        return datetime.min
    if moment.tzinfo is None:
        return moment
    try:
        return moment.astimezone(timezone.utc).replace(tzinfo=None)
    except OverflowError:  # within a day of year 1 or 9999, its UTC is off the calendar: the nearest end
        return datetime.min if moment.year == 1 else datetime.max


# --- the import --------------------------------------------------------------------------------


def import_langsmith(src: Path, out: Path, *, feedback_axes: Mapping[str, str] | None = None,
                     human_sources: tuple[str, ...] = HUMAN_SOURCES) -> list[Path]:
    src = Path(src)
    runs_path, feedback_path, mixed = _layout(src)
    axes = dict(FEEDBACK_AXES if feedback_axes is None else feedback_axes)
    roots: set[str] = set()
    seen: dict[str, int] = {}
    with ImportWriter(out) as writer:
        sink = writer.trajectories("trajectories.jsonl", suite_name=f"LangSmith import of {src.name}")
        for group in _traces(runs_path, mixed, seen):
            trajectory = _trajectory(group)
            if trajectory.id in roots:  # its feedback, and the trajectory id, would name two runs
                root = next(run for run in group if run.id == trajectory.id)
                raise root.at.error(f"root run {trajectory.id} heads two traces: run ids must be unique")
            roots.add(trajectory.id)
            sink.add(trajectory)
        if feedback_path is not None and (not mixed or seen.get("feedback")):
            labels, unmapped = _labels(feedback_path, mixed, roots, axes, human_sources)
            writer.text("labels.jsonl", "".join(label.model_dump_json(exclude_none=True) + "\n" for label in labels))
            writer.text("feedback-unmapped.jsonl", "".join(json.dumps(u, sort_keys=True) + "\n" for u in unmapped))
    return writer.written
