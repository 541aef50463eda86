"""``judgekit import openai-chat``: OpenAI chat transcripts with tool calls.

SRC is a JSON Lines file (or a JSON list) of records, each either a list of messages or an
object ``{"id"?, "messages": [...], "metadata"?, "latency_s"?}``. Writes
``OUT/trajectories.jsonl``; a record without an id gets ``<file stem>-<line>``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from judgekit._files import write_text_atomically
from judgekit._io import read_text
from judgekit.errors import InputError
from judgekit.importers._messages import messages_to_trajectory


def _records(src: Path) -> Iterator[tuple[int, Any]]:
    text = read_text(src)
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"invalid JSON: {exc.msg}", src, exc.lineno) from None
        # A list of messages is one conversation; a list of records is many.
        if data and isinstance(data[0], dict) and "role" in data[0]:
            yield 1, data
        else:
            yield from ((i + 1, record) for i, record in enumerate(data))
        return
    for n, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                yield n, json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"invalid JSON: {exc.msg} (column {exc.colno})", src, n) from None


def import_openai_chat(src: Path, out: Path) -> list[Path]:
    lines = []
    for n, record in _records(src):
        if isinstance(record, list):
            record = {"messages": record}
        if not isinstance(record, dict) or not isinstance(record.get("messages"), list):
            raise InputError("expected a list of messages or an object with 'messages'", src, n)
        unknown = set(record) - {"id", "messages", "metadata", "latency_s", "prompt"}
        if unknown:
            raise InputError(f"unknown key(s): {', '.join(sorted(unknown))}", src, n)
        trajectory = messages_to_trajectory(
            record["messages"],
            trajectory_id=str(record.get("id") or f"{src.stem}-{n}"),
            prompt=record.get("prompt"),
            metadata={**(record.get("metadata") or {}), "imported_from": f"{src.name}:{n}"},
            where=(str(src), n),
        )
        if record.get("latency_s") is not None:
            trajectory.latency_s = float(record["latency_s"])
        lines.append(trajectory.model_dump_json(exclude_defaults=True))
    target = out / "trajectories.jsonl"
    write_text_atomically(target, "".join(line + "\n" for line in lines))
    return [target]
