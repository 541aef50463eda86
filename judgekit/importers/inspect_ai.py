"""``judgekit import inspect``: Inspect AI eval logs (.eval or .json), one trajectory per sample and epoch.

Follows Inspect AI's log format version 2 as inspect_ai 0.3.x writes it (read from its sources
up to 0.3.285: ``EvalLog``, ``EvalSample``, ``ChatMessage*``, ``ToolEvent``, ``StoreEvent``,
``StateEvent``, ``SpanBeginEvent``). SRC is one log, in either form (told apart by its first
bytes, not its name):

- ``.eval``: a zip. ``header.json`` (the log without its samples; ``_journal/start.json`` in a
  log still being written) gives the eval spec, then ``samples/{id}_epoch_{n}.json`` are read one
  at a time (the id is not escaped there: ``samples/test/algebra/1_epoch_1.json`` is sample
  ``test/algebra/1``), in Inspect's own reading order: epoch, then id, integer ids by value
  (an id of digits in quotes sorts by value too: a member's name cannot tell it from an
  integer; Inspect sorts it as text). A name written twice is read once, its last copy (a
  requeued sample, as Inspect reads it). Members are DEFLATE- or zstd-compressed (Inspect's
  current default, which Python's zipfile reads only from 3.14: decoded with ``zstandard``,
  Inspect's own decoder). ``summaries.json``,
  ``reductions.json`` and the journal are not read. A member may not say it is shorter than it
  is. The experimental chunked layout (``.eval2``: ``samples/{id}_epoch_{n}/sample.json`` and
  its pieces) and format versions above 2 are refused.
- ``.json``: the whole log in one document. It is streamed: each element of ``samples`` is
  cut out of the byte stream and parsed on its own, so memory holds one sample, whatever the
  file's size. ``eval`` must come before ``samples`` (Inspect writes it so); ``samples: null``
  is a log without samples. Of the other top-level values (at most 1000 keys) only ``version``
  and ``eval`` are kept; the rest are checked and dropped.

Every piece is parsed as strict JSON (duplicate keys, NaN, lone surrogates and deep nesting are
refused; so is a field of the wrong type), and no piece may be longer than
``judgekit._util.io.MAX_LINE_BYTES``; an error names the file, the sample (its number, id and epoch,
and in a ``.json`` log its line) and what is wrong, and a failed import writes nothing.

Mapping, per sample:

- ``id``: ``{sample id}_epoch_{epoch}`` (Inspect's own name for the sample's file); a repeat
  within the log is refused.
- ``prompt``: the input when it is a string, else the first user message of the input.
- ``calls``: the assistant messages' ``tool_calls`` in order, each joined to its tool message
  by ``ChatMessageTool.tool_call_id`` (the result) and to its ``ToolEvent`` by id: the event
  gives the result as the tool returned it (untruncated), ``started_at`` (its ``timestamp``) and
  ``ended_at`` (``completed``). A call id used again (older logs named calls by their function)
  joins in turn: a tool message to the latest call with its id, the n-th event with an id to
  the n-th call with it. ``error``: the event's or the tool message's ``ToolCallError``
  (``"type: message"``, the type left out when ``unknown``), a ``parse_error`` of the call's
  arguments, an older log's ``tool_error``, or a hard failure
  (``failed``). The arguments are the assistant's (what the agent sent); the event's fill in
  only when the message has none. A tool event with no call in the conversation (a tool a
  solver ran itself) is left out.
- ``output``: ``output.completion``, else the last assistant text.
- ``context`` and ``turns``: system messages and later user messages, as for openai-chat
  (``judgekit.importers._messages``; ``user-N`` counts the messages kept). A user message that
  carries a tool's payload (``tool_call_id`` set: an image a tool returned) is part of that
  tool's result, not a turn, and is left out.
- ``latency_s``: ``total_time``.
- ``metadata`` (labels, never scored): source file, task, model, sample id, epoch, eval and run
  ids, created, target, Inspect's own score values, the sample's metadata, and the sample's
  error and limit when it stopped early.
- ``world``: the sample's store, where the log records it: ``before`` is the store in the
  ``sample_init`` event's state (else empty), ``after`` that store with the recorded JSON Patch
  changes replayed. Those are the ``StoreEvent`` changes of root spans and events outside any
  span (inner spans repeat what their root span records: Inspect's own replay rule), or, in a
  log with no ``StoreEvent``, the ``/store`` changes of the outermost ``StateEvent``\\ s. A sample
  with neither an initial state nor a store change has no world. Each side is a JSON file
  ``trajectories/worlds/<sha256 of its canonical JSON>.json``: identical worlds are one file,
  and a name never depends on other samples. ``attachment://`` references are resolved from the
  sample's ``attachments`` wherever they are used, up to ``MAX_LINE_BYTES`` characters per
  sample in all (one attachment named over and over is refused, not multiplied). A StateEvent
  move out of the store (older logs' patches pair equal values across the state) is a removal;
  a move or copy into it from elsewhere is refused. Store copies may add at most a snapshot's
  limit (``DEFAULT_MAX_SNAPSHOT_BYTES``) to a world: a patch copying the store into itself
  doubles it each time.

Writes ``trajectories/<task>.jsonl`` (the task name as the import writer's ``file_name`` gives
it: characters other than ASCII letters, digits, ``.``, ``_`` and ``-`` become ``-``; a name
then empty, over 100 characters or a Windows device name ends in a hash), plus the world files, and no rubric: an Inspect
log holds its scorers' results, not criteria judgekit could pre-register, so a rubric must be
written by hand (see docs/guides/importers.md), in the ``suite.yaml`` to fill in that the import writer
leaves beside them. Logs of other tasks imported into the same ``--out`` stay;
a second log of the same task replaces the first's file.

Lost: Inspect's scores beyond their values (answers, explanations, reducers, metrics), model
usage and cost, model events (every model call's input and output; the conversation is read
from ``messages``), sandbox, approval, info, logger, error and other events, the store of
subtasks, the plan and generation config, tool views, and a ToolEvent's arguments where they
differ from the assistant's (an approver's edit). Inspect's final ``store`` field is not read:
the replay gives it, and gives the before side too.
"""

from __future__ import annotations

import copy
import json
import re
import struct
import zipfile
import zlib
from collections import defaultdict, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from pydantic import ValidationError

from judgekit._util.io import (
    MAX_LINE_BYTES,
    describe_validation_error,
    open_regular_file,
    sha256_json,
)
from judgekit._util.strict_json import MAX_DEPTH, check_tree, strict_json_loads
from judgekit.world.snapshot_files import DEFAULT_MAX_SNAPSHOT_BYTES
from judgekit.errors import InputError
from judgekit.importers._json_patch import Patch, PatchError, pointer
from judgekit.importers._json_stream import JsonCursor as _JsonCursor
from judgekit.importers._messages import _maybe_json, _text, messages_to_trajectory
from judgekit.importers._writer import ImportWriter, file_name
from judgekit.trajectory import Call, Trajectory, World

MAX_LOG_VERSION = 2
_ZIP_MAGIC = b"PK\x03\x04"
_ZIP_ZSTANDARD = 93  # the zip compression method number of Zstandard
_LOCAL_HEADER = struct.Struct("<4s2B4HL2L2H")  # a zip member's local file header (APPNOTE 4.3.7)
# Inspect does not escape the id in a member's name: an id may hold "/" (samples/a/b_epoch_1.json).
_SAMPLE_MEMBER = re.compile(r"^samples/(?P<id>.+)_epoch_(?P<epoch>\d+)\.json\Z", re.DOTALL)
_CHUNKED_SAMPLE = re.compile(r"^samples/.+_epoch_\d+/sample\.json\Z", re.DOTALL)  # its shell member
_ATTACHMENT = ("attachment://", "tc://")  # tc:// is the older spelling Inspect still resolves
_CHUNK = 1 << 20  # bytes read at a time from a .json log
_BUFFER = 1 << 20
_MAX_RESOLVED = MAX_LINE_BYTES  # attachment text put in one sample's place, in all (its line's limit)
_MAX_WORLD_BYTES = DEFAULT_MAX_SNAPSHOT_BYTES  # what store copies may add (a snapshot's limit)
_HEADER_KEYS = ("version", "eval")  # what _Spec reads of the log
_MAX_TOP_LEVEL_KEYS = 1000  # of a .json log (an EvalLog has about 15)


@dataclass(frozen=True)
class _Where:
    """Where a sample is, for errors: a label (ending in ": ") and a line in a .json log."""

    label: str
    line: int | None = None

    def error(self, src: Path, message: str) -> InputError:
        return InputError(self.label + message, src, self.line)


# --- reading: .eval -----------------------------------------------------------------------------


def _zstd_member(handle: IO[bytes], info: zipfile.ZipInfo) -> bytes:
    """A zstd-compressed member (Inspect's default since it moved off DEFLATE), which Python's
    zipfile cannot decompress before 3.14: its local header is read here, its data decoded
    by zstandard (Inspect's own decoder) across frames, and its CRC checked."""
    import zstandard

    if info.flag_bits & 0x1:
        raise zipfile.BadZipFile("the member is encrypted")
    if info.compress_size > MAX_LINE_BYTES:
        raise zipfile.BadZipFile(f"{info.compress_size} compressed bytes, more than the {MAX_LINE_BYTES} allowed")
    handle.seek(info.header_offset)
    header = handle.read(_LOCAL_HEADER.size)
    if len(header) != _LOCAL_HEADER.size or header[:4] != _ZIP_MAGIC:
        raise zipfile.BadZipFile("bad local file header")
    *_, name_length, extra_length = _LOCAL_HEADER.unpack(header)
    handle.seek(info.header_offset + _LOCAL_HEADER.size + name_length + extra_length)
    compressed = handle.read(info.compress_size)
    try:
        with zstandard.ZstdDecompressor().stream_reader(compressed, read_across_frames=True) as reader:
            raw = reader.read(info.file_size + 1)  # no further than the directory says (checked)
    except zstandard.ZstdError as exc:
        raise zipfile.BadZipFile(f"zstd: {exc}") from None
    if len(raw) != info.file_size:
        raise zipfile.BadZipFile(f"{'more' if len(raw) > info.file_size else 'fewer'} bytes than the {info.file_size} stated")
    if zlib.crc32(raw) != info.CRC:
        raise zipfile.BadZipFile("CRC check failed")
    return raw


def _read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, handle: IO[bytes], src: Path, where: _Where) -> Any:
    if info.file_size > MAX_LINE_BYTES:
        raise where.error(src, f"is {info.file_size} bytes, more than the {MAX_LINE_BYTES} allowed")
    try:
        if info.compress_type == _ZIP_ZSTANDARD:
            raw = _zstd_member(handle, info)
        else:
            with archive.open(info) as member:
                raw = member.read(MAX_LINE_BYTES + 1)
    except (zipfile.BadZipFile, NotImplementedError, RuntimeError, OSError, EOFError, zlib.error) as exc:
        # a bad CRC or header, an unknown method, encryption (RuntimeError), corrupt data
        raise where.error(src, f"cannot be read from the zip: {exc}") from None
    if len(raw) > MAX_LINE_BYTES:
        raise where.error(src, f"is more than the {MAX_LINE_BYTES} bytes allowed")
    return _parse(raw, src, where)


def _sample_order(info: zipfile.ZipInfo) -> tuple[int, str]:
    """Inspect's reading order (``sort_samples``): epoch, then id, integer ids zero-filled (here
    every id of digits: a member's name cannot tell an integer from a string of digits)."""
    match = _SAMPLE_MEMBER.match(info.filename)
    assert match is not None
    sample_id = match["id"]
    return int(match["epoch"]), sample_id.zfill(20) if sample_id.isdigit() else sample_id


def _eval_log(handle: IO[bytes], src: Path) -> Iterator[tuple[dict[str, Any], Any, _Where]]:
    try:
        archive = zipfile.ZipFile(handle)
    except (zipfile.BadZipFile, OSError) as exc:
        raise InputError(f"not a readable zip, expected an Inspect .eval log ({exc})", src) from None
    with archive:
        members = {info.filename: info for info in archive.infolist()}  # a name written twice: the last
        name = "header.json" if "header.json" in members else "_journal/start.json"
        if name not in members:
            raise InputError("neither header.json nor _journal/start.json: not an Inspect .eval log", src)
        header = _read_member(archive, members[name], handle, src, _Where(f"{name}: "))
        if not isinstance(header, dict):
            raise InputError(f"{name}: expected a JSON object", src)
        if any(_CHUNKED_SAMPLE.match(n) for n in members):
            raise InputError("chunked samples (samples/{id}_epoch_{n}/sample.json, the experimental .eval2 layout): "
                             "convert the log with `inspect log convert --to eval` first", src)
        samples = sorted((i for n, i in members.items() if _SAMPLE_MEMBER.match(n)), key=_sample_order)
        for info in samples:
            where = _Where(f"{info.filename}: ")
            yield header, _read_member(archive, info, handle, src, where), where


# --- reading: .json, streamed (judgekit.importers._json_stream) -------------------------------


def _json_log(handle: IO[bytes], src: Path) -> Iterator[tuple[dict[str, Any], Any, _Where]]:
    cursor = _JsonCursor(handle, src, chunk=_CHUNK, max_value=MAX_LINE_BYTES)
    header: dict[str, Any] = {}  # what a sample needs of the log; other values are checked, then dropped
    keys: set[str] = set()
    cursor.expect(b"{")
    if cursor.peek() == ord("}"):
        raise InputError("an empty JSON object, not an Inspect log", src, cursor.line())
    while True:
        raw_key, line = cursor.value()
        key = _parse(raw_key, src, _Where("", line))
        if not isinstance(key, str):
            raise InputError(f"invalid JSON: an invalid key {key!r}", src, line)
        if key in keys:
            raise InputError(f"invalid JSON: a duplicate key {key!r}", src, line)
        if len(keys) == _MAX_TOP_LEVEL_KEYS:
            raise InputError(f"more than {_MAX_TOP_LEVEL_KEYS} top-level keys: not an Inspect log", src, line)
        keys.add(key)
        cursor.expect(b":")
        if key == "samples":
            if "eval" not in header:
                raise InputError("'samples' comes before 'eval': cannot stream this log", src, line)
            yield from _json_samples(cursor, header)
        else:
            raw, line = cursor.value()
            value = _parse(raw, src, _Where(f"{key}: ", line))
            if key in _HEADER_KEYS:
                header[key] = value
        cursor.drop()
        if cursor.expect(b",}") == ord("}"):
            break
    if cursor.peek() is not None:
        raise cursor.error("extra data after the log")


def _json_samples(cursor: _JsonCursor, header: dict[str, Any]) -> Iterator[tuple[dict[str, Any], Any, _Where]]:
    if cursor.peek() == ord("n"):  # "samples": null, a log without samples
        raw, line = cursor.value()
        if _parse(raw, cursor.src, _Where("samples: ", line)) is None:
            return
    cursor.expect(b"[")
    if cursor.peek() == ord("]"):
        cursor.pos += 1
        return
    n = 0
    while True:
        n += 1
        raw, line = cursor.value()
        cursor.drop()
        where = _Where(f"sample {n}: ", line)
        yield header, _parse(raw, cursor.src, where), where
        if cursor.expect(b",]") == ord("]"):
            return


# --- reading: either ----------------------------------------------------------------------------


def _parse(raw: bytes, src: Path, where: _Where) -> Any:
    try:
        return strict_json_loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise where.error(src, "not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        line = where.line + exc.lineno - 1 if where.line is not None else None
        raise InputError(f"{where.label}invalid JSON: {exc.msg} (column {exc.colno})", src, line) from None
    except ValueError as exc:
        raise where.error(src, f"invalid JSON: {exc}") from None


def _read_log(src: Path) -> Iterator[tuple[dict[str, Any], Any, _Where]]:
    """(header, sample, where) for each sample, one at a time; the header is read first."""
    with open_regular_file(src, expected="an Inspect log (.eval or .json)", buffering=_BUFFER) as handle:
        magic = handle.peek(4)[:4]
        yield from (_eval_log if magic == _ZIP_MAGIC else _json_log)(handle, src)


@dataclass(frozen=True)
class _Spec:
    """What every sample of the log shares: the eval spec's task, model and provenance."""

    task: str
    labels: dict[str, Any]

    @classmethod
    def of(cls, header: dict[str, Any], src: Path) -> _Spec:
        version = header.get("version", MAX_LOG_VERSION)
        if not isinstance(version, int) or version > MAX_LOG_VERSION:
            raise InputError(f"log format version {version!r}: this importer reads versions up to {MAX_LOG_VERSION}", src)
        spec = header.get("eval")
        if not isinstance(spec, dict) or not isinstance(spec.get("task"), str) or not spec["task"]:
            raise InputError("the log's eval spec has no task name ('eval.task')", src)
        packages = spec.get("packages") if isinstance(spec.get("packages"), dict) else {}
        labels = {
            "source": src.name,
            "task": spec["task"],
            "model": spec.get("model"),
            "eval_id": spec.get("eval_id"),
            "run_id": spec.get("run_id"),
            "created": spec.get("created"),
            "inspect_ai": packages.get("inspect_ai"),
        }
        return cls(spec["task"], {k: v for k, v in labels.items() if v not in (None, "")})

    @property
    def file_name(self) -> str:
        return file_name(self.task, "task")


# --- one sample -> one trajectory ---------------------------------------------------------------


def _resolver(sample: dict[str, Any], where: _Where, src: Path) -> Callable[[Any], Any]:
    """Replaces ``attachment://<key>`` strings with the sample's attachment (unknown keys stay).

    What is put in place is counted: one attachment named over and over would otherwise make
    a small sample a trajectory line too long to read back (or to hold)."""
    attachments = sample.get("attachments")
    if not isinstance(attachments, dict) or not attachments:
        return lambda value: value
    if not all(isinstance(text, str) for text in attachments.values()):
        raise where.error(src, "'attachments' must map keys to strings")
    left = [_MAX_RESOLVED]

    def attachment(value: str) -> str:
        for prefix in _ATTACHMENT:
            if value.startswith(prefix) and value[len(prefix):] in attachments:
                text = attachments[value[len(prefix):]]
                left[0] -= len(text)
                if left[0] < 0:
                    raise where.error(src, f"the attachments it refers to come to more than {_MAX_RESOLVED} characters in all")
                return text
        return value

    def resolve(value: Any) -> Any:
        if isinstance(value, str):
            return attachment(value)
        if isinstance(value, list):
            return [resolve(v) for v in value]
        if isinstance(value, dict):
            return {k: resolve(v) for k, v in value.items()}
        return value

    return resolve


def _chat_message(message: Any) -> dict[str, Any] | None:
    """An Inspect ChatMessage in the OpenAI shape ``messages_to_trajectory`` reads."""
    if not isinstance(message, dict):
        return message  # refused there, with the message's number
    role = message.get("role")
    if role == "user" and message.get("tool_call_id"):
        return None  # a tool's payload (an image...) sent as a user message
    if role == "assistant":
        calls = [
            {"id": c.get("id"), "type": "function", "function": {"name": c.get("function", ""), "arguments": c.get("arguments") or {}}}
            if isinstance(c, dict) else c
            for c in message.get("tool_calls") or []
        ]
        return {"role": role, "content": message.get("content"), "tool_calls": calls}
    if role == "tool":
        return {"role": role, "tool_call_id": message.get("tool_call_id"), "content": message.get("content")}
    return {"role": role, "content": message.get("content")}


def _error_text(error: Any) -> str | None:
    if isinstance(error, dict):
        kind, text = error.get("type"), str(error.get("message", ""))
        return f"{kind}: {text}" if kind and kind != "unknown" else text
    return str(error) if error else None


def _call_errors(messages: list[Any]) -> list[str | None]:
    """Each call's error, in call order: its arguments' parse error, else its tool message's
    error (a tool message belongs to the latest call with its id, as for its result)."""
    errors: list[str | None] = []
    latest: dict[str, int] = {}
    for message in messages:
        if not isinstance(message, dict):
            continue
        if message.get("role") == "assistant":
            for call in message.get("tool_calls") or []:
                parse_error = call.get("parse_error") if isinstance(call, dict) else None
                errors.append(f"parsing: {parse_error}" if parse_error else None)
                if isinstance(call, dict) and isinstance(call.get("id"), str):
                    latest[call["id"]] = len(errors) - 1
        elif message.get("role") == "tool":
            text = _error_text(message.get("error") or message.get("tool_error"))
            at = latest.get(message.get("tool_call_id"))
            if text and at is not None and errors[at] is None:
                errors[at] = text
    return errors


def _tool_events(events: list[Any]) -> dict[str, deque[dict[str, Any]]]:
    """The ToolEvents by call id, each id's in the order they ran (a call id may be reused)."""
    by_id: dict[str, deque[dict[str, Any]]] = defaultdict(deque)
    for e in events:
        if isinstance(e, dict) and e.get("event") == "tool" and isinstance(e.get("id"), str):
            by_id[e["id"]].append(e)
    return by_id


def _tool_result(result: Any) -> Any:
    if isinstance(result, str):
        return _maybe_json(result)
    if isinstance(result, (dict, list)):  # content parts: their text
        return _maybe_json(_text(result if isinstance(result, list) else [result]))
    return result


def _joined(call: Call, event: dict[str, Any] | None, error: str | None) -> Call:
    """``call`` with its ToolEvent's result, times and error, and the messages' error."""
    fields = call.model_dump(exclude_defaults=True)
    if event is not None:
        if "result" in event:
            fields["result"] = _tool_result(event["result"])
        if not call.args and isinstance(event.get("arguments"), dict):
            fields["args"] = event["arguments"]
        fields["started_at"] = event.get("timestamp")
        fields["ended_at"] = event.get("completed")
        error = _error_text(event.get("error")) or error or ("the tool call failed" if event.get("failed") else None)
    fields["error"] = fields.get("error") or error
    return Call.model_validate(fields)


def _score_values(scores: Any) -> dict[str, Any]:
    if not isinstance(scores, dict):
        return {}
    return {name: score.get("value") for name, score in scores.items() if isinstance(score, dict)}


def _labels(spec: _Spec, sample: dict[str, Any]) -> dict[str, Any]:
    error, limit = sample.get("error"), sample.get("limit")
    labels = {
        **spec.labels,
        "sample_id": sample["id"],
        "epoch": sample["epoch"],
        "target": sample.get("target"),
        "scores": _score_values(sample.get("scores")),
        "sample_metadata": sample.get("metadata"),
        "error": error.get("message") if isinstance(error, dict) else error,
        "limit": limit.get("type") if isinstance(limit, dict) else limit,
    }
    return {k: v for k, v in labels.items() if v not in (None, "", {}, [])}


def _check_sample(sample: Any, where: _Where, src: Path) -> _Where:
    if not isinstance(sample, dict):
        raise where.error(src, "a sample must be a JSON object")
    sample_id, epoch = sample.get("id"), sample.get("epoch")
    if not isinstance(sample_id, (int, str)) or isinstance(sample_id, bool) or sample_id == "":
        raise where.error(src, "the sample has no id (an integer or a string)")
    if not isinstance(epoch, int) or isinstance(epoch, bool):
        raise where.error(src, "the sample has no epoch (an integer)")
    where = _Where(f"{where.label}sample {sample_id!r}, epoch {epoch}: ", where.line)
    for key, kinds in (("messages", list), ("events", list), ("output", dict), ("input", (str, list))):
        if key in sample and not isinstance(sample[key], kinds):
            raise where.error(src, f"'{key}' has the wrong type")
    return where


def _prompt(sample_input: Any) -> str | None:
    if isinstance(sample_input, str):
        return sample_input
    first = next((m for m in sample_input or [] if isinstance(m, dict) and m.get("role") == "user"), None)
    return _text(first.get("content")) if first else None


def _trajectory(spec: _Spec, sample: dict[str, Any], resolve: Callable[[Any], Any], where: _Where, src: Path) -> Trajectory:
    sample_input = resolve(sample.get("input"))
    messages = resolve(sample.get("messages") or (sample_input if isinstance(sample_input, list) else []))
    chat = [m for m in map(_chat_message, messages) if m is not None]
    trajectory = messages_to_trajectory(
        chat,
        trajectory_id=f"{sample['id']}_epoch_{sample['epoch']}",
        prompt=_prompt(sample_input),
        metadata=_labels(spec, sample),
        latency_s=sample.get("total_time"),
        where=(str(src), where.line, where.label),
    )
    events = _tool_events(sample.get("events") or [])
    errors = _call_errors(messages)
    completion = resolve((sample.get("output") or {}).get("completion"))
    try:
        calls = [_joined(c, resolve(events[c.id].popleft()) if events.get(c.id) else None, error)
                 for c, error in zip(trajectory.calls, errors, strict=True)]
    except ValidationError as exc:
        raise where.error(src, f"a tool event: {describe_validation_error(exc)}") from None
    output = completion if isinstance(completion, str) and completion else trajectory.output
    return trajectory.model_copy(update={"calls": calls, "output": output})


# --- the store: JSON Patch replay (judgekit.importers._json_patch) ------------------------------


def _depths(events: list[Any]) -> list[int]:
    """How deep each event sits: in spans (a root span is 1) or, in older logs, in steps."""
    parents = {e.get("id"): e.get("parent_id") for e in events if isinstance(e, dict) and e.get("event") == "span_begin"}

    def span_depth(span_id: Any) -> int:
        depth, seen = 1, {span_id}
        while (span_id := parents.get(span_id)) is not None and span_id not in seen:  # a loop ends
            seen.add(span_id)
            depth += 1
        return depth

    depths, steps = [], 0
    for event in events:
        event = event if isinstance(event, dict) else {}
        if event.get("event") == "step":
            steps += -1 if event.get("action") == "end" else 1
        depths.append(span_depth(event["span_id"]) if event.get("span_id") else steps)
    return depths


def _store_changes(events: list[Any]) -> list[dict[str, Any]]:
    """The changes to replay, in order (see the module docstring for which)."""
    depths = _depths(events)
    chosen = [(d, e) for d, e in zip(depths, events) if isinstance(e, dict) and e.get("event") == "store"]
    if chosen:
        return [c for d, e in chosen if d <= 1 for c in e.get("changes") or []]
    state = [(d, [_in_store(c) for c in e.get("changes") or [] if _touches_store(c) or _moves_out_of_store(c)])
             for d, e in zip(depths, events) if isinstance(e, dict) and e.get("event") == "state"]
    state = [(d, changes) for d, changes in state if changes]
    top = min((d for d, _ in state), default=0)
    return [c for d, changes in state if d == top for c in changes]


def _touches_store(change: Any) -> bool:
    path = change.get("path", "") if isinstance(change, dict) else ""
    return path == "/store" or path.startswith("/store/")


def _moves_out_of_store(change: Any) -> bool:
    if not isinstance(change, dict) or change.get("op") != "move":
        return False
    source = change.get("from", change.get("from_"))
    return isinstance(source, str) and _touches_store({"path": source})


def _in_store(change: dict[str, Any]) -> dict[str, Any]:
    """A StateEvent change to the store, as a change to the store alone."""
    if not _touches_store(change):  # a move out of the store (jsonpatch pairs equal values into moves)
        return {"op": "remove", "path": pointer(change, "from")[len("/store"):]}
    moved = {**change, "path": change["path"][len("/store"):]}
    if change.get("op") in ("move", "copy"):
        source = pointer(change, "from")
        if not _touches_store({"path": source}):
            raise PatchError(f"a state change copies {source!r} into the store")
        moved.pop("from_", None)
        moved["from"] = source[len("/store"):]
    return moved


def _world(sample: dict[str, Any], resolve: Callable[[Any], Any], where: _Where, src: Path) -> tuple[Any, Any] | None:
    events = sample.get("events") or []
    init = next((e for e in events if isinstance(e, dict) and e.get("event") == "sample_init"), None)
    state = init.get("state") if init else None
    before = resolve(state.get("store", {})) if isinstance(state, dict) else None
    try:
        changes = _store_changes(events)
        if before is None and not changes:
            return None
        before = {} if before is None else before
        after = Patch(copy.deepcopy(before), max_growth=_MAX_WORLD_BYTES)
        for n, change in enumerate(changes, 1):
            if not isinstance(change, dict):
                raise PatchError(f"store change {n} is not an object")
            try:
                after.apply(resolve(change))
            except ValueError as exc:  # PatchError, or a JSON pointer's
                raise PatchError(f"store change {n} ({change.get('op')} {change.get('path')!r}): {exc}") from None
        try:  # each change is shallow enough, but one can add under another: as deep as any JSON read
            check_tree(after.doc, surrogates=False)
        except ValueError as exc:
            raise PatchError(f"the store the changes make is {exc}") from None
    except PatchError as exc:
        raise where.error(src, f"cannot replay the store: {exc}") from None
    return before, after.doc


# --- the import ---------------------------------------------------------------------------------


class _Worlds:
    """World snapshots as content-addressed JSON files beside the trajectory file."""

    def __init__(self, writer: ImportWriter):
        self.writer = writer
        self.names: set[str] = set()

    def spec(self, value: Any) -> dict[str, str]:
        name = f"worlds/{sha256_json(value)}.json"
        if name not in self.names:
            self.names.add(name)
            self.writer.json(f"trajectories/{name}", value)
        return {"json_file": name}


def _check_depth(trajectory: Trajectory, where: _Where, src: Path) -> None:
    """The free-form parts of a trajectory, where they sit in its line, fit ``MAX_DEPTH`` in all
    (a result decoded from JSON text, or the sample's metadata moved one level down, can go
    deeper than the log itself: the line would be written and then refused when read)."""
    parts = [("the labels (metadata)", trajectory.metadata, 1)]  # the line's {"metadata": {...}}
    for n, c in enumerate(trajectory.calls):  # {"calls": [{"args": ..., "result": ...}]}
        parts += [(f"call {n}'s arguments", c.args, 3), (f"call {n}'s result", c.result, 3)]
    for what, value, at in parts:
        try:
            check_tree(value, max_depth=MAX_DEPTH - at, surrogates=False)
        except ValueError:
            raise where.error(src, f"too deeply nested to be written in a trajectory line (more than {MAX_DEPTH} "
                                   f"levels in all): {what}") from None


def _sample(spec: _Spec, sample: dict[str, Any], where: _Where, src: Path, worlds: _Worlds, seen: set[str]) -> Trajectory:
    resolve = _resolver(sample, where, src)
    trajectory = _trajectory(spec, sample, resolve, where, src)
    _check_depth(trajectory, where, src)
    if trajectory.id in seen:
        raise where.error(src, f"a second sample with trajectory id {trajectory.id!r}")
    seen.add(trajectory.id)
    world = _world(sample, resolve, where, src)
    if world is None:
        return trajectory
    sides = {"before": worlds.spec(world[0]), "after": worlds.spec(world[1])}
    return trajectory.model_copy(update={"world": World.model_validate(sides)})


def import_inspect(src: Path, out: Path) -> list[Path]:
    src = Path(src)
    with ImportWriter(out) as writer:
        sink, spec, seen = None, None, set()
        worlds = _Worlds(writer)
        for header, sample, where in _read_log(src):
            spec = spec or _Spec.of(header, src)
            sink = sink or writer.trajectories(f"trajectories/{spec.file_name}.jsonl",
                                                  suite_name=f"Inspect AI import of {spec.file_name}")
            where = _check_sample(sample, where, src)
            try:
                sink.add(_sample(spec, sample, where, src, worlds, seen))
            except (TypeError, AttributeError) as exc:  # a field of the wrong type, met where it is used
                raise where.error(src, f"a field has the wrong type ({exc})") from None
        if sink is None:
            raise InputError("the log holds no samples (Inspect logs them unless --no-log-samples)", src)
    return writer.written
