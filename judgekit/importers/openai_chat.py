"""``judgekit import openai-chat``: OpenAI chat transcripts with tool calls.

SRC is a JSON Lines file (or a JSON list) of records, each either a list of messages or an
object ``{"id"?, "messages": [...], "metadata"?, "latency_s"?}``. Writes
``OUT/trajectories.jsonl``; a record without an id gets ``<file stem>-<line>``. Transcripts carry
no criteria: ``OUT/suite.yaml`` is a suite to fill in (the import writer's).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from judgekit._util.io import MAX_FILE_BYTES, iter_json_lines, open_regular_file, read_json
from judgekit.errors import InputError
from judgekit.importers._messages import messages_to_trajectory
from judgekit.importers._writer import ImportWriter
from judgekit.trajectory import Trajectory


def _records(src: Path) -> Iterator[tuple[int, int | None, Any]]:
    """(record number, line number or None, record). JSON Lines input is streamed; JSON-list
    input (a document, read whole) has no line per record."""
    with open_regular_file(src, expected="a JSON or JSON Lines file") as handle:
        first = handle.read(4096).lstrip()
    if first.startswith(b"["):
        data = read_json(src, max_bytes=MAX_FILE_BYTES)
        # A list of messages is one conversation; a list of records is many.
        if data and isinstance(data[0], dict) and "role" in data[0]:
            yield 1, None, data
        else:
            yield from ((i + 1, None, record) for i, record in enumerate(data))
        return
    for n, record in iter_json_lines(src):
        yield n, n, record


def import_openai_chat(src: Path, out: Path) -> list[Path]:
    with ImportWriter(out) as writer:
        sink = writer.trajectories("trajectories.jsonl", suite_name=f"openai-chat import of {src.name}")
        for n, line, record in _records(src):
            sink.add(_trajectory(src, n, line, record))
    return writer.written


def _trajectory(src: Path, n: int, line: int | None, record: Any) -> Trajectory:
    label = "" if line is not None else f"record {n}: "
    if isinstance(record, list):
        record = {"messages": record}
    if not isinstance(record, dict) or not isinstance(record.get("messages"), list):
        raise InputError(f"{label}expected a list of messages or an object with 'messages'", src, line)
    unknown = set(record) - {"id", "messages", "metadata", "latency_s", "prompt"}
    if unknown:
        raise InputError(f"{label}unknown key(s): {', '.join(sorted(unknown))}", src, line)
    metadata = record.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise InputError(f"{label}metadata must be an object", src, line)
    record_id = record.get("id")
    return messages_to_trajectory(
        record["messages"],
        trajectory_id=str(record_id) if record_id is not None else f"{src.stem}-{n}",
        prompt=record.get("prompt"),
        metadata={**metadata, "imported_from": f"{src.name}:{line}" if line else f"{src.name} record {n}"},
        latency_s=record.get("latency_s"),
        where=(str(src), line, label),
    )
