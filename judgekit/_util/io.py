"""Reading the files judgekit takes: regular files within bounds, strict JSON, JSON Lines streams.

Everything read is hostile until checked. Every failure becomes an ``InputError`` naming the
file and the 1-based line, never a traceback or a hang:

- only regular files are read (a FIFO, ``/dev/zero`` or a folder is refused before any read),
  and files are bounded in bytes;
- JSON is parsed strictly (``judgekit._util.strict_json``): duplicate keys, NaN/Infinity,
  numbers that overflow to infinity (``1e999``), lone surrogates (``"\\ud800"``, which no UTF-8
  file can hold) and nesting deeper than ``MAX_DEPTH`` are refused.

JSON Lines files are read one line at a time, never whole. YAML documents (rubrics, suites)
are read by ``judgekit._util.documents``.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from datetime import datetime
from typing import Annotated, Any, BinaryIO, Literal, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from judgekit._util.strict_json import BLANK, json_line_loads, strict_json_loads
from judgekit.errors import InputError

M = TypeVar("M", bound=BaseModel)

MAX_DOCUMENT_BYTES = 8 * 2**20
"""Largest YAML/JSON document (rubric, suite, lock, approval...) read whole."""
MAX_FILE_BYTES = 1024 * 2**20
"""Largest file read whole (importer sources)."""
MAX_LINE_BYTES = 256 * 2**20
"""Longest line of a JSON Lines file."""
JSONL_BUFFER_BYTES = 2**20
"""Read buffer of a JSON Lines stream."""

RECORD_CONFIG = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)
"""How a record judgekit writes and reads back (run records, results, provenance, labels,
verdicts, approvals) is validated: unknown keys refused, no NaN, and strict types, so a score
of ``"1.0"`` is not a number and ``1`` is not ``true``. Timestamps alone are read from their
ISO 8601 text (``Timestamp``)."""

_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ]|$)")


def _iso_text(value: Any) -> Any:
    """A time as ISO 8601 text (or a datetime made in code): never a number of seconds, which a
    lax datetime would also take."""
    if isinstance(value, datetime) or (isinstance(value, str) and _ISO_DATE.match(value)):
        return value
    raise ValueError("a time is ISO 8601 text, such as 2026-12-01T10:00:00Z")


def _whole_number(value: Any) -> Any:
    """A format version as JSON writes it, a whole number: 2.0 equals 2, but no judgekit wrote it."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError("a format version is a whole number, written without a point")
    return value


Timestamp = Annotated[datetime, Field(strict=False), BeforeValidator(_iso_text)]
"""A datetime field of a strict record: read from ISO 8601 text, as JSON has no datetime."""
Version1 = Annotated[Literal[1], BeforeValidator(_whole_number)]
Version2 = Annotated[Literal[2], BeforeValidator(_whole_number)]
Version3 = Annotated[Literal[3], BeforeValidator(_whole_number)]
"""``format_version`` fields: the literal, and a whole number (strict pydantic takes 2.0 for 2)."""


def error_loc(error: Any) -> tuple[Any, ...]:
    """Where one of pydantic's errors is: its ``loc``, plus the place within it that a validator
    checking several fields at once names in its error's context (``at``)."""
    return (*error["loc"], *error.get("ctx", {}).get("at", ()))


def describe_validation_error(err: ValidationError) -> str:
    """One readable sentence for the first problem pydantic found (plus a count of others)."""
    errors = err.errors()
    first = errors[0]
    loc = ".".join(str(part) for part in error_loc(first)) or "(top level)"
    message = first["msg"]
    if first["type"] == "extra_forbidden":
        message = "unknown key"
    more = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
    return f"{loc}: {message}{more}"


def open_regular_file(
    path: str | Path, *, max_bytes: int | None = None, expected: str = "a file", buffering: int = -1
) -> BinaryIO:
    """Open a regular file for reading, or raise InputError naming it.

    Opened without blocking, then checked on the open descriptor (no window between check and
    read): a FIFO, a device such as ``/dev/zero``, a socket or a folder is refused, and so is
    a file larger than ``max_bytes``. ``buffering``: as for ``open`` (-1: the default size).
    """
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise unreadable(exc, path, expected) from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise InputError(f"is a folder, expected {expected}", path)
        if not stat.S_ISREG(info.st_mode):
            raise InputError(f"not a regular file (a device, FIFO or socket), expected {expected}", path)
        if max_bytes is not None and info.st_size > max_bytes:
            raise InputError(f"is {info.st_size} bytes, more than the {max_bytes} allowed for {expected}", path)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb", buffering=buffering)
    except BaseException:
        os.close(fd)
        raise


def iter_json_lines(path: str | Path, *, expected: str = "a JSON Lines file") -> Iterator[tuple[int, Any]]:
    """Yield ``(line_number, value)`` for each non-blank line of a JSON Lines file, read as a
    stream (strict JSON; errors name the file and line)."""
    for line_no, value, _ in iter_json_lines_raw(path, expected=expected):
        yield line_no, value


def iter_json_lines_raw(path: str | Path, *, expected: str = "a JSON Lines file") -> Iterator[tuple[int, Any, bytes]]:
    """``iter_json_lines`` with each line's bytes as read (what a digest of the line hashes)."""
    path = Path(path)
    # A buffer larger than the default 8 KiB: trajectory lines run to tens of KiB, and readline
    # would otherwise gather each from several small reads.
    with open_regular_file(path, expected=expected, buffering=JSONL_BUFFER_BYTES) as handle:
        # Bytes line by line, decoded one line at a time, so an error names its own line.
        line_no = 0
        while raw := handle.readline(MAX_LINE_BYTES + 1):
            line_no += 1
            if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                raise InputError(f"line longer than {MAX_LINE_BYTES} bytes", path, line_no)
            try:
                value = json_line_loads(raw)
            except UnicodeDecodeError:
                raise InputError("not UTF-8 text", path, line_no) from None
            except json.JSONDecodeError as exc:
                raise InputError(f"invalid JSON: {exc.msg} (column {exc.colno})", path, line_no) from None
            except ValueError as exc:
                raise InputError(f"invalid JSON: {exc}", path, line_no) from None
            if value is not BLANK:
                yield line_no, value, raw


def iter_jsonl(path: str | Path, model: type[M]) -> Iterator[tuple[int, M]]:
    """Yield ``(line_number, record)`` for each non-blank line of a JSON Lines file."""
    for line_no, record, _ in iter_jsonl_raw(path, model):
        yield line_no, record


def iter_jsonl_raw(path: str | Path, model: type[M]) -> Iterator[tuple[int, M, bytes]]:
    """``iter_jsonl`` with each line's bytes as read."""
    for line_no, data, raw in iter_json_lines_raw(path):
        try:
            record = model.model_validate(data)
        except ValidationError as exc:
            raise InputError(describe_validation_error(exc), path, line_no) from None
        yield line_no, record, raw


def unreadable(exc: OSError, path: Path, expected: str = "a file") -> InputError:
    """The one-line error for a file that cannot be opened."""
    if isinstance(exc, FileNotFoundError):
        return InputError("file not found", path)
    if isinstance(exc, IsADirectoryError):
        return InputError(f"is a folder, expected {expected}", path)
    return InputError(f"cannot read: {exc.strerror}", path)


def read_bytes(path: str | Path, *, max_bytes: int = MAX_FILE_BYTES, expected: str = "a file") -> bytes:
    """The whole of a regular file of at most ``max_bytes``."""
    path = Path(path)
    with open_regular_file(path, max_bytes=max_bytes, expected=expected) as handle:
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:  # grew while being read
        raise InputError(f"is more than the {max_bytes} bytes allowed for {expected}", path)
    return data


def read_text(path: str | Path, *, max_bytes: int = MAX_FILE_BYTES, expected: str = "a file") -> str:
    path = Path(path)
    try:
        return read_bytes(path, max_bytes=max_bytes, expected=expected).decode("utf-8")
    except UnicodeDecodeError:
        raise InputError("not UTF-8 text", path) from None


def read_json(path: str | Path, *, max_bytes: int = MAX_DOCUMENT_BYTES, expected: str = "a JSON document") -> Any:
    """A JSON document, parsed strictly; errors name the file and the line."""
    path = Path(path)
    text = read_text(path, max_bytes=max_bytes, expected=expected)
    try:
        return strict_json_loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON: {exc.msg} (column {exc.colno})", path, exc.lineno) from None
    except ValueError as exc:  # from the strict hooks; the decoder does not say where
        raise InputError(f"invalid JSON: {exc}", path) from None


def load_json_model(path: str | Path, model: type[M], *, max_bytes: int = MAX_DOCUMENT_BYTES, expected: str | None = None) -> M:
    """A JSON file judgekit wrote (run record, approval, lock) as ``model``, or InputError."""
    path = Path(path)
    expected = expected or f"a {model.__name__} JSON file"
    data = read_json(path, max_bytes=max_bytes, expected=expected)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise InputError(f"not {expected}: {describe_validation_error(exc)}", path) from None


def canonical_json(value: Any) -> str:
    """The one canonical JSON form used for hashes and byte-identical output."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def sha256_json(value: Any) -> str:
    """sha256 of the canonical JSON of ``value``: the one way judgekit hashes content.

    surrogatepass: a lone surrogate (a cut emoji) is valid JSON and must hash, not crash.
    """
    import hashlib

    return hashlib.sha256(canonical_json(value).encode("utf-8", "surrogatepass")).hexdigest()
