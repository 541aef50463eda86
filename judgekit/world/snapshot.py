"""World snapshots: the state an agent acted on, before and after a run.

A snapshot is a JSON document (inline or in a file) or a SQLite database file. Snapshot
contents are untrusted: snapshot files are only ever opened read-only, identifiers are quoted and
values bound, so no SQL is ever built from data. Every value comes out as JSON (BLOBs as
``{"$blob": sha256, "size": n}``), so predicates, the diff and the judge prompt see one model.

Snapshot *paths* are untrusted too (a trajectory names them): a ``SnapshotPolicy`` confines
them, and each file is checked before it is read (``judgekit.world.snapshot_files``).
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from judgekit._util.io import canonical_json
from judgekit._util.strict_json import strict_json_loads
from judgekit.world.snapshot_files import (  # SnapshotPolicy and the constants are part of this module's API
    DEFAULT_MAX_SNAPSHOT_BYTES,
    SQLITE_HEADER,
    SnapshotPolicy,
    chunks,
    open_checked,
    quick_check,
    readable_database,
)
from judgekit.errors import InputError


class SnapshotSpec(BaseModel):
    """Where one side of the world comes from: exactly one of ``json``, ``json_file``, ``sqlite``."""

    # `json` would shadow BaseModel.json, hence the field name `json_value` behind the alias.
    # The oneOf tells editors what the validator below enforces.
    model_config = ConfigDict(
        extra="forbid",
        populate_by_name=True,
        json_schema_extra={"oneOf": [{"required": [name]} for name in ("json", "json_file", "sqlite")]},
    )

    json_value: Any = Field(None, alias="json", description="The world as an inline JSON value.")
    json_file: str | None = Field(
        None,
        min_length=1,
        description="Path to a JSON document, relative to the trajectory file's folder; it must lie within "
        "the suite's snapshots.roots (symlinks followed) and be a regular file within snapshots.max_bytes.",
    )
    sqlite: str | None = Field(
        None,
        min_length=1,
        description="Path to a SQLite database file, relative to the trajectory file's folder; confined and "
        "capped like json_file, integrity-checked, opened read-only (a -wal or hot -journal beside it counts).",
    )

    @model_validator(mode="after")
    def _exactly_one_source(self) -> SnapshotSpec:
        # Presence, not value, counts: `json: null` is a valid (empty) world.
        fields = {"json": "json_value", "json_file": "json_file", "sqlite": "sqlite"}
        given = [name for name, field in fields.items() if field in self.model_fields_set]
        # PydanticCustomError keeps the message as written (a ValueError gets "Value error, ").
        if len(given) != 1:
            got = " and ".join(given) if given else "none"
            raise PydanticCustomError("snapshot_source", f"give exactly one of json, json_file, sqlite (got {got})")
        if given != ["json"] and getattr(self, fields[given[0]]) is None:
            raise PydanticCustomError("snapshot_source", f"{given[0]}: expected a path, got null")
        if given == ["json"]:
            try:
                canonical_json(self.json_value)
            except (TypeError, ValueError) as exc:
                raise PydanticCustomError("snapshot_json", f"json: not a JSON value ({exc})") from None
        return self


@runtime_checkable
class Snapshot(Protocol):
    """One side of the world, readable as collections of records."""

    kind: Literal["json", "sqlite"]
    source: str  # the file (or a label for inline JSON), for error messages

    def records(self, collection: str) -> list[dict[str, Any]]:
        """The records of one collection: a SQLite table name or a JSON pointer."""
        ...

    def collections(self) -> list[str]:
        """The collections ``records`` accepts, sorted."""
        ...


# --- JSON ---------------------------------------------------------------------------------------


def _json_type(value: Any) -> str:
    names = {dict: "object", list: "list", str: "string", bool: "boolean", type(None): "null"}
    return names.get(type(value), "number")


def parse_pointer(pointer: str) -> list[str]:
    """Split an RFC 6901 JSON pointer into its unescaped tokens ("" is the whole document)."""
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise ValueError(f"JSON pointer {pointer!r} must be empty or start with '/'")
    # Order matters (RFC 6901 section 4): "~01" is "~1", not "/".
    return [token.replace("~1", "/").replace("~0", "~") for token in pointer[1:].split("/")]


def format_pointer(path: list[str | int]) -> str:
    """The JSON pointer of a path of object keys and list indexes."""
    return "".join("/" + str(seg).replace("~", "~0").replace("/", "~1") for seg in path)


def _is_index(token: str, length: int) -> bool:
    # RFC 6901: decimal digits, no leading zero ("-", the end of the list, names nothing).
    return token.isascii() and token.isdigit() and (token == "0" or token[0] != "0") and int(token) < length


class JsonSnapshot:
    """A JSON document. ``records("/users")`` reads a list of objects or an object of objects."""

    kind: Literal["json"] = "json"

    def __init__(self, data: Any, source: str = "<inline JSON>"):
        self.data = data
        self.source = source

    def resolve(self, pointer: str) -> Any:
        """The value a JSON pointer names; InputError when it names nothing."""
        try:
            tokens = parse_pointer(pointer)
        except ValueError as exc:
            raise InputError(str(exc), self.source) from None
        node = self.data
        for depth, token in enumerate(tokens):
            where = format_pointer(tokens[: depth + 1])
            if isinstance(node, dict) and token in node:
                node = node[token]
            elif isinstance(node, list) and _is_index(token, len(node)):
                node = node[int(token)]
            else:
                there = ""
                if isinstance(node, dict):
                    names = sorted(node)
                    there = f" (keys there: {', '.join(map(repr, names[:10]))}{', ...' if len(names) > 10 else ''})"
                elif isinstance(node, list):
                    there = f" (a list of {len(node)})"
                raise InputError(f"JSON pointer {pointer!r}: nothing at {where!r}{there}", self.source)
        return node

    def records(self, collection: str) -> list[dict[str, Any]]:
        target = self.resolve(collection)
        if isinstance(target, list):
            items = list(enumerate(target))
        elif isinstance(target, dict):
            items = list(target.items())
        else:
            raise InputError(
                f"JSON pointer {collection!r} names a {_json_type(target)}, expected a list or object of records",
                self.source,
            )
        for label, item in items:
            if not isinstance(item, dict):
                raise InputError(
                    f"JSON pointer {collection!r}: record {label!r} is a {_json_type(item)}, expected an object",
                    self.source,
                )
        # Copies: a predicate must not be able to change the world another check reads.
        return [copy.deepcopy(item) for _, item in items]

    def collections(self) -> list[str]:
        if isinstance(self.data, list):
            return [""]
        if isinstance(self.data, dict):
            return sorted(format_pointer([k]) for k, v in self.data.items() if isinstance(v, (dict, list)))
        return []


def load_json_file(
    path: str | Path,
    expected: str = "a JSON document",
    *,
    policy: SnapshotPolicy | None = None,
    spelled: str | None = None,
) -> JsonSnapshot:
    """Parse a JSON document; errors name the file and the line, and say what was ``expected``.

    The file is checked and read through one descriptor (``policy``: where it may be, how big;
    default: anywhere, the default cap).
    """
    path = Path(path)
    policy = policy or SnapshotPolicy.unconfined()
    with open_checked(path, policy, expected, spelled) as (fd, _, _):
        raw = b"".join(chunks(fd, policy.max_bytes, path))
    try:
        # Universal newlines, as text mode would: JSON line numbers then count old-Mac lines too.
        text = raw.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
    except UnicodeDecodeError:
        raise InputError(f"not UTF-8 text, expected {expected}", path) from None
    if not text.strip():
        raise InputError(f"empty file, expected {expected}", path, 1)
    try:
        data = strict_json_loads(text)
    except json.JSONDecodeError as exc:
        truncated = " (the file ends early: truncated?)" if exc.pos >= len(text.rstrip()) else ""
        raise InputError(f"invalid JSON: {exc.msg} (column {exc.colno}){truncated}", path, exc.lineno) from None
    except ValueError as exc:  # from the hooks above; the decoder does not say where
        raise InputError(f"invalid JSON: {exc}", path) from None
    except RecursionError:
        raise InputError("invalid JSON: nested too deeply", path) from None
    return JsonSnapshot(data, str(path))


# --- SQLite -------------------------------------------------------------------------------------


def quote_identifier(name: str) -> str:
    """A SQLite identifier in double quotes, embedded quotes doubled."""
    return '"' + name.replace('"', '""') + '"'


def to_json_value(value: Any) -> Any:
    """A SQLite value as JSON: BLOBs by hash and size, non-finite REALs tagged."""
    if isinstance(value, bytes):
        return {"$blob": hashlib.sha256(value).hexdigest(), "size": len(value)}
    if isinstance(value, float) and not math.isfinite(value):
        # SQLite stores ±Inf (not NaN); JSON cannot say it, so tag it instead of failing.
        return {"$float": "Infinity" if value > 0 else "-Infinity"}
    return value


@dataclass(frozen=True)
class TableInfo:
    """What the diff needs to know about one table."""

    name: str
    sql: str  # the CREATE TABLE statement as stored
    columns: tuple[str, ...]
    types: tuple[str, ...]  # declared types, "" when none
    key: tuple[str, ...]  # primary-key columns in key order; empty: rows are keyed by rowid
    rowid: str | None  # the name that reaches the rowid when `key` is empty


class SqliteSnapshot:
    """A SQLite database file, opened read-only. ``records("users")`` reads a table.

    Checked when made: a regular file within ``policy`` (default: anywhere, the default size
    cap), a SQLite header whose page count matches the file size, and ``PRAGMA quick_check``.
    """

    kind: Literal["sqlite"] = "sqlite"

    def __init__(self, path: str | Path, policy: SnapshotPolicy | None = None, *, spelled: str | None = None):
        self.path = Path(path)
        self.source = str(self.path)
        self._readable = readable_database(self.path, self, policy or SnapshotPolicy.unconfined(), spelled)
        quick_check(self.uri, self.path)

    @property
    def uri(self) -> str:
        """The URI every connection opens (the attached side of a diff too): read-only and
        immutable, so SQLite neither locks nor writes anything beside the file. as_uri()
        percent-encodes, so '?', '#' and '%' in names stay names."""
        return self._readable.as_uri() + "?mode=ro&immutable=1"

    @contextmanager
    def connect(self, attach: SqliteSnapshot | None = None, schema: str = "other") -> Iterator[sqlite3.Connection]:
        """A read-only connection, closed on exit; database errors become InputError.

        With ``attach``, that database is attached read-only too, under the name ``schema``.
        """
        try:
            conn = sqlite3.connect(self.uri, uri=True)
            # A hostile schema's views, triggers and generated columns may not call functions
            # that are not marked innocuous.
            conn.execute("PRAGMA trusted_schema = OFF")
        except sqlite3.Error as exc:
            raise InputError(f"cannot open SQLite database: {exc}", self.path) from None
        try:
            if attach is not None:
                conn.execute(f"ATTACH DATABASE ? AS {quote_identifier(schema)}", (attach.uri,))
            yield conn
        except sqlite3.DatabaseError as exc:
            also = f" (or {attach.path}, attached to it)" if attach is not None else ""
            raise InputError(f"cannot read SQLite database{also}: {exc}", self.path) from None
        finally:
            conn.close()

    def tables(self) -> dict[str, TableInfo]:
        """Every user table (SQLite's own ``sqlite_*`` tables left out), by name."""
        with self.connect() as conn:
            rows = conn.execute(
                "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'"
            ).fetchall()
            return {name: _table_info(conn, name, sql or "", self.path) for name, sql in rows}

    def records(self, collection: str) -> list[dict[str, Any]]:
        tables = self.tables()
        table = tables.get(collection)
        if table is None:
            listed = ", ".join(repr(name) for name in sorted(tables)) or "none"
            raise InputError(f"no table {collection!r} in this database (tables: {listed})", self.path)
        order = ", ".join(quote_identifier(c) for c in (table.key or (table.rowid,)))
        select = ", ".join(quote_identifier(c) for c in table.columns)
        with self.connect() as conn:
            rows = conn.execute(f"SELECT {select} FROM {quote_identifier(table.name)} ORDER BY {order}").fetchall()
        return [dict(zip(table.columns, map(to_json_value, row))) for row in rows]

    def collections(self) -> list[str]:
        return sorted(self.tables())


def _table_info(conn: sqlite3.Connection, name: str, sql: str, path: Path) -> TableInfo:
    # pragma_table_info() takes the name as a bound value: no quoting needed at all.
    columns = conn.execute("SELECT name, type, pk FROM pragma_table_info(?) ORDER BY cid", (name,)).fetchall()
    names = tuple(c[0] for c in columns)
    key = tuple(c[0] for c in sorted((c for c in columns if c[2] > 0), key=lambda c: c[2]))
    # A column may itself be called "rowid"; SQLite then still answers to the other aliases.
    rowid = None if key else next((a for a in ("rowid", "_rowid_", "oid") if a not in names), None)
    if not key and rowid is None:
        raise InputError(f"table {name!r} has no primary key and its columns hide every rowid alias", path)
    return TableInfo(name, sql, names, tuple(c[1] for c in columns), key, rowid)


# --- loading ------------------------------------------------------------------------------------


def load_snapshot(
    spec: SnapshotSpec,
    base_dir: str | Path,
    *,
    policy: SnapshotPolicy | None = None,
    inline_source: str = "<inline JSON>",
) -> Snapshot:
    """Open the snapshot ``spec`` names; relative paths start at ``base_dir``.

    ``policy`` says which files may be read (default: inside ``base_dir``, the default size
    cap). ``inline_source`` labels inline JSON in error messages (e.g. "runs.jsonl:3 world.before").
    """
    base = Path(base_dir)
    policy = policy or SnapshotPolicy((base,))
    if spec.sqlite is not None:
        return SqliteSnapshot(base / spec.sqlite, policy, spelled=f"sqlite: {spec.sqlite!r}")
    if spec.json_file is not None:
        return load_json_file(base / spec.json_file, policy=policy, spelled=f"json_file: {spec.json_file!r}")
    return JsonSnapshot(spec.json_value, inline_source)


def snapshot_from_path(path: str | Path, max_bytes: int = DEFAULT_MAX_SNAPSHOT_BYTES) -> Snapshot:
    """A SQLite database when the file has the SQLite header, else a JSON document.

    For files a person names (``judgekit diff A B``): any folder, but the same file checks.
    """
    path = Path(path)
    policy = SnapshotPolicy.unconfined(max_bytes)
    with open_checked(path, policy, "a JSON document or a SQLite database") as (fd, _, _):
        header = os.pread(fd, len(SQLITE_HEADER), 0)
    if header == SQLITE_HEADER:
        return SqliteSnapshot(path, policy)
    return load_json_file(path, expected="a JSON document or a SQLite database", policy=policy)
