"""``judgekit import openai-chat``: OpenAI chat transcripts with tool calls.

SRC is a JSON Lines file (or a JSON list) of records, each either a list of messages or an
object ``{"id"?, "messages": [...], "metadata"?, "latency_s"?}``. Writes
``OUT/trajectories.jsonl``; a record without an id gets ``<file stem>-<line>``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from judgekit._files import write_text_atomically
from judgekit._io import MAX_FILE_BYTES, read_json, read_text, strict_json_loads
from judgekit.errors import InputError
from judgekit.importers._messages import messages_to_trajectory


def _records(src: Path) -> Iterator[tuple[int, int | None, Any]]:
    """(record number, line number or None, record). JSON-list input has no line per record."""
    text = read_text(src)
    stripped = text.lstrip()
    if stripped.startswith("["):
        data = read_json(src, max_bytes=MAX_FILE_BYTES)
        # A list of messages is one conversation; a list of records is many.
        if data and isinstance(data[0], dict) and "role" in data[0]:
            yield 1, None, data
        else:
            yield from ((i + 1, None, record) for i, record in enumerate(data))
        return
    # Split on "\n" only: JSON strings may hold U+2028 and friends, which splitlines() breaks on.
    for n, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            try:
                yield n, n, strict_json_loads(line)
            except ValueError as exc:
                raise InputError(f"invalid JSON: {getattr(exc, 'msg', exc)}", src, n) from None


def import_openai_chat(src: Path, out: Path) -> list[Path]:
    lines = []
    for n, line, record in _records(src):
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
        trajectory = messages_to_trajectory(
            record["messages"],
            trajectory_id=str(record_id) if record_id is not None else f"{src.stem}-{n}",
            prompt=record.get("prompt"),
            metadata={**metadata, "imported_from": f"{src.name}:{line}" if line else f"{src.name} record {n}"},
            latency_s=record.get("latency_s"),
            where=(str(src), line, label),
        )
        lines.append(trajectory.model_dump_json(exclude_defaults=True))
    target = out / "trajectories.jsonl"
    write_text_atomically(target, "".join(line + "\n" for line in lines), mask_secrets=False)
    return [target]
