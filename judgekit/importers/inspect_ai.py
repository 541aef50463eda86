"""``judgekit import inspect``: Inspect AI eval logs (.eval or .json), one trajectory per sample and epoch.

Follows Inspect AI's log format version 2 as inspect_ai 0.3.x writes it (read from its sources
up to 0.3.285: ``EvalLog``, ``EvalSample``, ``ChatMessage*``, ``ToolEvent``, ``StoreEvent``,
``StateEvent``, ``SpanBeginEvent``). SRC is one log, in either form (told apart by its first
bytes, not its name):

- ``.eval``: a zip. ``header.json`` (the log without its samples; ``_journal/start.json`` in a
  log still being written) gives the eval spec, then ``samples/{id}_epoch_{n}.json`` are read one
  at a time, in Inspect's own reading order (epoch, then id, numeric ids by value). Members are
  DEFLATE- or zstd-compressed (Inspect's current default, which Python's zipfile reads only
  from 3.14: decoded with ``zstandard``, Inspect's own decoder). ``summaries.json``,
  ``reductions.json`` and the journal are not read. The experimental ``.eval2`` layout and
  format versions above 2 are refused.
- ``.json``: the whole log in one document. It is streamed: each element of ``samples`` is
  cut out of the byte stream and parsed on its own, so memory holds one sample, whatever the
  file's size. ``eval`` must come before ``samples`` (Inspect writes it so).

Every piece is parsed as strict JSON (duplicate keys, NaN, lone surrogates and deep nesting are
refused); an error names the file, the sample (its number, id and epoch, and in a ``.json`` log
its line) and what is wrong, and a failed import writes nothing.

Mapping, per sample:

- ``id``: ``{sample id}_epoch_{epoch}`` (Inspect's own name for the sample's file); a repeat
  within the log is refused.
- ``prompt``: the input when it is a string, else the first user message of the input.
- ``calls``: the assistant messages' ``tool_calls`` in order, each joined to its tool message
  by ``ChatMessageTool.tool_call_id`` (the result) and to its ``ToolEvent`` by id: the event
  gives the result as the tool returned it (untruncated), ``started_at`` (its ``timestamp``) and
  ``ended_at`` (``completed``). ``error``: the event's or the tool message's ``ToolCallError``
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
  sample's ``attachments`` wherever they are used.

Writes ``trajectories/<task>.jsonl`` (characters other than letters, digits, ``.``, ``_`` and
``-`` in the task name become ``-``), plus the world files, and no rubric or suite: an Inspect
log holds its scorers' results, not criteria judgekit could pre-register, so a rubric must be
written by hand (see the README). Logs of other tasks imported into the same ``--out`` stay;
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
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from pydantic import ValidationError

from judgekit._io import (
    MAX_LINE_BYTES,
    describe_validation_error,
    open_regular_file,
    sha256_json,
    strict_json_loads,
)
from judgekit._json_equality import json_equal
from judgekit.errors import InputError
from judgekit.importers._messages import _maybe_json, _text, messages_to_trajectory
from judgekit.importers._writer import ImportWriter
from judgekit.trajectory import Call, Trajectory, World
from judgekit.world import parse_pointer

MAX_LOG_VERSION = 2
_ZIP_MAGIC = b"PK\x03\x04"
_ZIP_ZSTANDARD = 93  # the zip compression method number of Zstandard
_LOCAL_HEADER = struct.Struct("<4s2B4HL2L2H")  # a zip member's local file header (APPNOTE 4.3.7)
_SAMPLE_MEMBER = re.compile(r"^samples/(?P<id>[^/]+)_epoch_(?P<epoch>\d+)\.json$")
_ATTACHMENT = ("attachment://", "tc://")  # tc:// is the older spelling Inspect still resolves
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


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
            raw = reader.read(MAX_LINE_BYTES + 1)
    except zstandard.ZstdError as exc:
        raise zipfile.BadZipFile(f"zstd: {exc}") from None
    if len(raw) <= MAX_LINE_BYTES and zlib.crc32(raw) != info.CRC:
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
    """Inspect's reading order (``sort_samples``): epoch, then id, integer ids zero-filled."""
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
        if any(n.startswith("samples/") and n.count("/") > 1 for n in members):
            raise InputError("samples are in folders (the experimental .eval2 layout): convert the log "
                             "with `inspect log convert --to eval` first", src)
        samples = sorted((i for n, i in members.items() if _SAMPLE_MEMBER.match(n)), key=_sample_order)
        for info in samples:
            where = _Where(f"{info.filename}: ")
            yield header, _read_member(archive, info, handle, src, where), where


# --- reading: .json, streamed -------------------------------------------------------------------

_WS = re.compile(rb"[ \t\r\n]*+")
_STRING = re.compile(rb'"[^"\\]*+(?:\\.[^"\\]*+)*+"', re.DOTALL)
_SCALAR = re.compile(rb"[^\s,\]}]*+")
# Everything up to the next bracket, whole strings included (their brackets do not count).
_RUN = re.compile(rb'(?:[^"\[\]{}]++|"[^"\\]*+(?:\\.[^"\\]*+)*+")*+', re.DOTALL)
_CHUNK = 1 << 20  # bytes read at a time from a .json log
_BUFFER = 1 << 20


class _JsonCursor:
    """A JSON document read piece by piece: each value is cut out of the bytes (brackets
    counted outside strings) and parsed on its own; bytes before the cursor are dropped."""

    def __init__(self, handle: IO[bytes], src: Path):
        self.handle, self.src = handle, src
        self.buf = bytearray()
        self.pos = 0
        self.lines_dropped = 0
        self.eof = False

    def _more(self) -> bool:
        # As much again as is held, so that a value much longer than a chunk (a logged image)
        # is rescanned a few times, not once per chunk.
        chunk = b"" if self.eof else self.handle.read(max(_CHUNK, len(self.buf)))
        self.eof = not chunk
        self.buf += chunk
        return bool(chunk)

    def line(self, at: int | None = None) -> int:
        return self.lines_dropped + self.buf.count(b"\n", 0, self.pos if at is None else at) + 1

    def error(self, message: str) -> InputError:
        return InputError(f"invalid JSON: {message}", self.src, self.line())

    def drop(self) -> None:
        self.lines_dropped += self.buf.count(b"\n", 0, self.pos)
        del self.buf[: self.pos]
        self.pos = 0

    def peek(self) -> int | None:
        """The next byte after white space (None at the end of the file)."""
        while True:
            self.pos = _WS.match(self.buf, self.pos).end()
            if self.pos < len(self.buf) or not self._more():
                return self.buf[self.pos] if self.pos < len(self.buf) else None

    def expect(self, allowed: bytes) -> int:
        byte = self.peek()
        if byte is None or byte not in allowed:
            found = "the end of the file" if byte is None else repr(chr(byte))
            raise self.error(f"expected {' or '.join(repr(chr(b)) for b in allowed)}, found {found}")
        self.pos += 1
        return byte

    def value(self) -> tuple[bytes, int]:
        """The next value's bytes and the line it starts on."""
        if self.peek() is None:
            raise self.error("the file ends where a value should be")
        start, line = self.pos, self.line()
        first = self.buf[start]
        if first in b"{[":
            end = self._container_end(start)
        else:
            end = self._token_end(start, _STRING if first == ord('"') else _SCALAR)
        self.pos = end
        return bytes(self.buf[start:end]), line

    def _token_end(self, start: int, pattern: re.Pattern[bytes]) -> int:
        while True:
            match = pattern.match(self.buf, start)
            if match and (match.end() < len(self.buf) or self.eof):
                return match.end()
            if not self._more() and not match:
                raise self.error("the file ends inside a string")

    def _container_end(self, start: int) -> int:
        depth, at = 0, start
        while True:
            at = _RUN.match(self.buf, at).end()
            if at - start > MAX_LINE_BYTES:
                raise self.error(f"a value longer than {MAX_LINE_BYTES} bytes")
            if at == len(self.buf) or self.buf[at] == ord('"'):  # cut short: a string or run goes on
                if not self._more():
                    raise self.error("the file ends inside a value")
                continue
            depth += 1 if self.buf[at] in b"{[" else -1
            at += 1
            if depth == 0:
                return at


def _json_log(handle: IO[bytes], src: Path) -> Iterator[tuple[dict[str, Any], Any, _Where]]:
    cursor = _JsonCursor(handle, src)
    header: dict[str, Any] = {}
    cursor.expect(b"{")
    if cursor.peek() == ord("}"):
        raise InputError("an empty JSON object, not an Inspect log", src, cursor.line())
    while True:
        raw_key, line = cursor.value()
        key = _parse(raw_key, src, _Where("", line))
        if not isinstance(key, str) or key in header:
            raise InputError(f"invalid JSON: {'a duplicate' if key in header else 'an invalid'} key {key!r}", src, line)
        cursor.expect(b":")
        if key == "samples":
            if "eval" not in header:
                raise InputError("'samples' comes before 'eval': cannot stream this log", src, line)
            yield from _json_samples(cursor, header)
            header[key] = None
        else:
            raw, line = cursor.value()
            header[key] = _parse(raw, src, _Where(f"{key}: ", line))
        cursor.drop()
        if cursor.expect(b",}") == ord("}"):
            break
    if cursor.peek() is not None:
        raise cursor.error("extra data after the log")


def _json_samples(cursor: _JsonCursor, header: dict[str, Any]) -> Iterator[tuple[dict[str, Any], Any, _Where]]:
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
        return _UNSAFE.sub("-", self.task).strip(".-") or "task"


# --- one sample -> one trajectory ---------------------------------------------------------------


def _resolver(sample: dict[str, Any]) -> Callable[[Any], Any]:
    """Replaces ``attachment://<key>`` strings with the sample's attachment (unknown keys stay)."""
    attachments = sample.get("attachments")
    if not isinstance(attachments, dict) or not attachments:
        return lambda value: value

    def resolve(value: Any) -> Any:
        if isinstance(value, str):
            for prefix in _ATTACHMENT:
                if value.startswith(prefix):
                    return attachments.get(value[len(prefix):], value)
            return value
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


def _call_errors(messages: list[Any]) -> dict[str, str]:
    """Call id -> error, from argument parse errors and tool messages' errors."""
    errors: dict[str, str] = {}
    for message in messages:
        if not isinstance(message, dict):
            continue
        for call in message.get("tool_calls") or []:
            if isinstance(call, dict) and call.get("parse_error"):
                errors[call.get("id")] = f"parsing: {call['parse_error']}"
        if message.get("role") == "tool":
            text = _error_text(message.get("error") or message.get("tool_error"))
            if text:
                errors.setdefault(message.get("tool_call_id"), text)
    return errors


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
    events = {e["id"]: e for e in sample.get("events") or [] if isinstance(e, dict) and e.get("event") == "tool" and "id" in e}
    errors = _call_errors(messages)
    completion = resolve((sample.get("output") or {}).get("completion"))
    try:
        calls = [_joined(c, resolve(events.get(c.id)) if c.id else None, errors.get(c.id)) for c in trajectory.calls]
    except ValidationError as exc:
        raise where.error(src, f"a tool event: {describe_validation_error(exc)}") from None
    output = completion if isinstance(completion, str) and completion else trajectory.output
    return trajectory.model_copy(update={"calls": calls, "output": output})


# --- the store: JSON Patch replay ---------------------------------------------------------------


class _PatchError(ValueError):
    pass


def _container(doc: Any, tokens: list[str]) -> tuple[Any, str]:
    """The object or list holding the last token's place, and that token."""
    for token in tokens[:-1]:
        doc = _child(doc, token)
    if not isinstance(doc, (dict, list)):
        raise _PatchError("its parent is not an object or a list")
    return doc, tokens[-1]


def _index(items: list[Any], token: str, *, end_ok: bool) -> int:
    if token == "-" and end_ok:
        return len(items)
    if not token.isdigit() or (token != "0" and token.startswith("0")) or int(token) > len(items) - (0 if end_ok else 1):
        raise _PatchError(f"no list index {token!r}")
    return int(token)


def _child(doc: Any, token: str) -> Any:
    if isinstance(doc, dict) and token in doc:
        return doc[token]
    if isinstance(doc, list):
        return doc[_index(doc, token, end_ok=False)]
    raise _PatchError(f"nothing at {token!r}")


def _get(doc: Any, tokens: list[str]) -> Any:
    for token in tokens:
        doc = _child(doc, token)
    return doc


def _add(doc: Any, tokens: list[str], value: Any) -> Any:
    if not tokens:
        return value
    parent, token = _container(doc, tokens)
    if isinstance(parent, list):
        parent.insert(_index(parent, token, end_ok=True), value)
    else:
        parent[token] = value
    return doc


def _remove(doc: Any, tokens: list[str]) -> tuple[Any, Any]:
    if not tokens:
        raise _PatchError("cannot remove the whole store")
    parent, token = _container(doc, tokens)
    if isinstance(parent, list):
        return doc, parent.pop(_index(parent, token, end_ok=False))
    if token not in parent:
        raise _PatchError(f"nothing at {token!r}")
    return doc, parent.pop(token)


def _pointer(change: dict[str, Any], key: str) -> str:
    # Inspect's JsonChange names the field from_ (alias "from"); logs hold either spelling.
    pointer = change.get(key, change.get("from_")) if key == "from" else change.get(key)
    if not isinstance(pointer, str):
        raise _PatchError(f"no {key!r} JSON pointer")
    return pointer


def _apply(doc: Any, change: dict[str, Any]) -> Any:
    """One RFC 6902 operation (a missing ``value`` is null: Inspect writes without nulls)."""
    op, path = change.get("op"), parse_pointer(_pointer(change, "path"))
    value = change.get("value")
    if op == "add":
        return _add(doc, path, value)
    if op == "remove":
        return _remove(doc, path)[0]
    if op == "replace":
        _get(doc, path)
        return _add(_remove(doc, path)[0], path, value) if path else value
    if op in ("move", "copy"):
        source = parse_pointer(_pointer(change, "from"))
        if op == "move":
            doc, moved = _remove(doc, source)
        else:
            moved = copy.deepcopy(_get(doc, source))
        return _add(doc, path, moved)
    if op == "test":
        if not json_equal(_get(doc, path), value):
            raise _PatchError("test failed: the value differs")
        return doc
    raise _PatchError(f"unknown op {op!r}")


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
    state = [(d, [_in_store(c) for c in e.get("changes") or [] if _touches_store(c)])
             for d, e in zip(depths, events) if isinstance(e, dict) and e.get("event") == "state"]
    state = [(d, changes) for d, changes in state if changes]
    top = min((d for d, _ in state), default=0)
    return [c for d, changes in state if d == top for c in changes]


def _touches_store(change: Any) -> bool:
    path = change.get("path", "") if isinstance(change, dict) else ""
    return path == "/store" or path.startswith("/store/")


def _in_store(change: dict[str, Any]) -> dict[str, Any]:
    moved = {**change, "path": change["path"][len("/store"):]}
    if change.get("op") in ("move", "copy"):
        source = _pointer(change, "from")
        if not _touches_store({"path": source}):
            raise _PatchError(f"a state change copies {source!r} into the store")
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
        after = copy.deepcopy(before)
        for n, change in enumerate(changes, 1):
            if not isinstance(change, dict):
                raise _PatchError(f"store change {n} is not an object")
            try:
                after = _apply(after, resolve(change))
            except (_PatchError, ValueError) as exc:
                raise _PatchError(f"store change {n} ({change.get('op')} {change.get('path')!r}): {exc}") from None
    except _PatchError as exc:
        raise where.error(src, f"cannot replay the store: {exc}") from None
    return before, after


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


def import_inspect(src: Path, out: Path) -> list[Path]:
    src = Path(src)
    with ImportWriter(out) as writer:
        sink, spec, seen = None, None, set()
        worlds = _Worlds(writer)
        for header, sample, where in _read_log(src):
            spec = spec or _Spec.of(header, src)
            sink = sink or writer.lines(f"trajectories/{spec.file_name}.jsonl")
            where = _check_sample(sample, where, src)
            resolve = _resolver(sample)
            trajectory = _trajectory(spec, sample, resolve, where, src)
            if trajectory.id in seen:
                raise where.error(src, f"a second sample with trajectory id {trajectory.id!r}")
            seen.add(trajectory.id)
            world = _world(sample, resolve, where, src)
            if world is not None:
                sides = {"before": worlds.spec(world[0]), "after": worlds.spec(world[1])}
                trajectory = trajectory.model_copy(update={"world": World.model_validate(sides)})
            sink.add(trajectory)
        if sink is None:
            raise InputError("the log holds no samples (Inspect logs them unless --no-log-samples)", src)
    return writer.written
