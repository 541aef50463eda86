"""The canonical end-state diff: what changed in the world between two snapshots.

Task success is judged from this diff, so it is deterministic: changes are sorted by path, then
op (a SQLite table's schema changes first), and ``Diff.to_json()`` is byte-identical across runs
and machines.

A value changed when ``json_equal`` says it differs, on both kinds: ``1`` and ``1.0`` (or an
INTEGER 1 and a REAL 1.0) are the same number, while ``1``, ``"1"``, ``true`` and a BLOB all
differ; keyed records and SQLite rows are matched by keys equal in the same sense. See
``judgekit.world.json_equality`` for the definition and why numbers compare by value.
"""

from __future__ import annotations

import copy
import re
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from judgekit._util.io import Version1, canonical_json
from judgekit.world.json_equality import json_equal, normal_form
from judgekit.errors import InputError
from judgekit.world.snapshot import (
    JsonSnapshot,
    Snapshot,
    SqliteSnapshot,
    TableInfo,
    format_pointer,
    quote_identifier,
    snapshot_from_path,
    to_json_value,
)

DIFF_FORMAT_VERSION = 1
Op = Literal["add", "remove", "change", "schema"]
# Within one path: schema first (it explains what follows), then removals, additions, changes.
_OP_ORDER = {"schema": 0, "remove": 1, "add": 2, "change": 3}


class Change(BaseModel):
    """One difference between the worlds before and after."""

    model_config = ConfigDict(extra="forbid")

    op: Op = Field(
        description="add / remove: a JSON value or SQLite row appeared / disappeared; change: a value "
        "differs; schema: a SQLite table or column was added, removed or retyped."
    )
    path: list[str | int] = Field(
        description="Where: JSON object keys (str) and list indexes (int), or a keyed list's key value "
        "(str); SQLite [table], [table, column], [table, key] or [table, key, column], key being "
        "the primary key (or rowid) as text, or the canonical JSON list of a composite key."
    )
    before: Any = Field(None, description="The value before (null for add; CREATE sql or column type for schema).")
    after: Any = Field(None, description="The value after (null for remove; CREATE sql or column type for schema).")


def _path_key(path: list[str | int]) -> tuple[tuple[int, Any], ...]:
    # Indexes sort numerically and before keys, so mixed paths still compare.
    return tuple((0, seg) if isinstance(seg, int) else (1, seg) for seg in path)


def _change_key(change: Change) -> tuple[Any, ...]:
    # By path, then op; except that a table's schema changes come before its rows, which they
    # explain (and [table, column] would otherwise interleave with [table, key]). JSON diffs have
    # no schema changes, so for them this is plain path order.
    return (_path_key(change.path[:1]), change.op != "schema", _path_key(change.path), _OP_ORDER[change.op])


class Diff(BaseModel):
    """The end-state diff of one trajectory's world."""

    model_config = ConfigDict(extra="forbid")

    format_version: Version1 = Field(DIFF_FORMAT_VERSION, description="Diff format version.")
    kind: Literal["json", "sqlite"] = Field(description="What the snapshots were.")
    changes: list[Change] = Field(
        default_factory=list,
        description="Every change, sorted by path, then op; a table's schema changes before its rows.",
    )

    @model_validator(mode="after")
    def _sorted(self) -> Diff:
        self.changes.sort(key=_change_key)
        return self

    def to_json(self) -> str:
        """Canonical JSON (sorted keys, compact): byte-identical for equal diffs."""
        return canonical_json(self.model_dump())


# --- entry points -------------------------------------------------------------------------------


def diff_snapshots(before: Snapshot, after: Snapshot, keys: dict[str, str] | None = None) -> Diff:
    """The diff from ``before`` to ``after``; both JSON or both SQLite.

    ``keys`` (JSON only) maps the JSON pointer of a list to the field its records are matched by,
    e.g. ``{"/users": "id"}``; the list's path segments are then key values, not indexes.
    """
    if isinstance(before, JsonSnapshot) and isinstance(after, JsonSnapshot):
        return Diff(kind="json", changes=_JsonDiff(before, after, keys or {}).run())
    if isinstance(before, SqliteSnapshot) and isinstance(after, SqliteSnapshot):
        if keys:
            raise InputError(
                "keys apply to JSON snapshots only; SQLite rows are matched by primary key (or rowid)",
                after.source,
            )
        return Diff(kind="sqlite", changes=_diff_sqlite(before, after))
    raise InputError(
        f"cannot diff a {before.kind} snapshot ({before.source}) against a {after.kind} snapshot: "
        "both sides must be JSON or both SQLite",
        after.source,
    )


def diff_paths(before_path: str | Path, after_path: str | Path, keys: dict[str, str] | None = None) -> Diff:
    """Diff two files, each a JSON document or a SQLite database (told apart by its header)."""
    return diff_snapshots(snapshot_from_path(before_path), snapshot_from_path(after_path), keys)


# --- text for a judge ---------------------------------------------------------------------------

# A path segment is shown bare only when it cannot break the line or pose as structure.
_BARE_SEGMENT = re.compile(r'[^\s/"\\][^\s/\\]*')
# Line breaks that JSON leaves unescaped but str.splitlines() and some readers honour.
_LINE_BREAKS = {0x85: "\\u0085", 0x2028: "\\u2028", 0x2029: "\\u2029"}


def _encode(value: Any) -> str:
    return canonical_json(value).translate(_LINE_BREAKS)


def render_path(path: Sequence[str | int]) -> str:
    """A diff path as people, judges and check reasons read it: segments joined by ``/``, each
    bare when it is a plain name or an index, else as a JSON string (``users/"a/b"``), so no
    segment can pass for two. The one rendering of a diff path."""
    if not path:
        return "(root)"
    return "/".join(
        str(seg) if isinstance(seg, int) or (seg.isprintable() and _BARE_SEGMENT.fullmatch(seg)) else _encode(seg)
        for seg in path
    )


def render_change(change: Change) -> str:
    """One line: ``+ path: after``, ``- path: before``, ``~ path: before -> after``, ``! schema ...``."""
    where = render_path(change.path)
    if change.op == "add":
        return f"+ {where}: {_encode(change.after)}"
    if change.op == "remove":
        return f"- {where}: {_encode(change.before)}"
    prefix = "! schema " if change.op == "schema" else "~ "
    return f"{prefix}{where}: {_encode(change.before)} -> {_encode(change.after)}"


def render_text(diff: Diff, max_chars: int = 8000) -> str:
    """The diff as text for a judge: one change per line, values JSON-encoded.

    Never longer than ``max_chars``: whole lines are cut from the end and a last line says how
    many changes and characters were left out.
    """
    if not diff.changes:
        return "(no changes)"[:max_chars]
    lines = [render_change(change) for change in diff.changes]
    full = "\n".join(lines)
    if len(full) <= max_chars:
        return full
    total = len(lines)

    def footer(shown: int, used: int) -> str:
        omitted_chars = len(full) - used  # `used` counts the newline after each shown line
        return (
            f"[diff cut: showed {shown} of {total} changes; {total - shown} changes "
            f"({omitted_chars} chars) omitted to fit {max_chars} chars]"
        )

    shown, used = 0, 0  # lines kept, and their characters with one newline each
    while shown < total:
        step = len(lines[shown]) + 1
        if used + step + len(footer(shown + 1, used + step)) > max_chars:
            break
        shown, used = shown + 1, used + step
    last = footer(shown, used)
    if used + len(last) > max_chars:  # max_chars too small for even the footer
        last = f"[diff cut: all {total} changes omitted]"
    return ("\n".join(lines[:shown]) + "\n" if shown else "") + last[: max_chars - used]


# --- JSON ---------------------------------------------------------------------------------------


def _key_text(value: Any) -> str:
    # Equal keys (json_equal: 1 and 1.0) get one text, so they match; true and 1 stay apart.
    return value if isinstance(value, str) else canonical_json(normal_form(value))


class _JsonDiff:
    """One walk over two JSON documents, collecting changes."""

    def __init__(self, before: JsonSnapshot, after: JsonSnapshot, keys: dict[str, str]):
        self.before, self.after, self.keys = before, after, keys
        self.changes: list[Change] = []
        self.keyed_seen: set[str] = set()

    def run(self) -> list[Change]:
        self.walk(self.before.data, self.after.data, [])
        for pointer in sorted(set(self.keys) - self.keyed_seen):
            self._check_key_pointer(pointer)
        return self.changes

    def walk(self, a: Any, b: Any, path: list[str | int]) -> None:
        if isinstance(a, dict) and isinstance(b, dict):
            for name in a.keys() - b.keys():
                self.changes.append(Change(op="remove", path=[*path, name], before=a[name]))
            for name in b.keys() - a.keys():
                self.changes.append(Change(op="add", path=[*path, name], after=b[name]))
            for name in a.keys() & b.keys():
                self.walk(a[name], b[name], [*path, name])
        elif isinstance(a, list) and isinstance(b, list):
            pointer = format_pointer(path)
            if pointer in self.keys:
                self.keyed_seen.add(pointer)
                self._walk_keyed(a, b, path, pointer)
                return
            for i in range(min(len(a), len(b))):
                self.walk(a[i], b[i], [*path, i])
            for i in range(len(b), len(a)):
                self.changes.append(Change(op="remove", path=[*path, i], before=a[i]))
            for i in range(len(a), len(b)):
                self.changes.append(Change(op="add", path=[*path, i], after=b[i]))
        elif not json_equal(a, b):  # containers of one kind were walked above; of two kinds, differ
            self.changes.append(Change(op="change", path=path, before=a, after=b))

    def _walk_keyed(self, a: list[Any], b: list[Any], path: list[str | int], pointer: str) -> None:
        field = self.keys[pointer]
        by_key_a = self._index(a, field, pointer, self.before.source)
        by_key_b = self._index(b, field, pointer, self.after.source)
        for key in by_key_a.keys() - by_key_b.keys():
            self.changes.append(Change(op="remove", path=[*path, key], before=by_key_a[key]))
        for key in by_key_b.keys() - by_key_a.keys():
            self.changes.append(Change(op="add", path=[*path, key], after=by_key_b[key]))
        for key in by_key_a.keys() & by_key_b.keys():
            self.walk(by_key_a[key], by_key_b[key], [*path, key])

    @staticmethod
    def _index(items: list[Any], field: str, pointer: str, source: str) -> dict[str, Any]:
        by_key: dict[str, Any] = {}
        for i, item in enumerate(items):
            if not isinstance(item, dict) or field not in item:
                raise InputError(f"keys: record {i} of {pointer!r} has no field {field!r} to match it by", source)
            key = _key_text(item[field])
            if key in by_key:
                raise InputError(f"keys: two records of {pointer!r} have {field} {key!r}; keys must be unique", source)
            by_key[key] = item
        return by_key

    def _check_key_pointer(self, pointer: str) -> None:
        # An unused key is a typo or a wrong pointer; saying nothing would silently fall back to indexes.
        for snapshot in (self.before, self.after):
            try:
                if isinstance(snapshot.resolve(pointer), list):
                    return  # a list on one side only: added or removed whole, nothing to match
            except InputError:
                continue
        raise InputError(f"keys: {pointer!r} names no list in either snapshot", self.after.source)


def apply_json_diff(doc: Any, diff: Diff) -> Any:
    """Apply an unkeyed JSON diff: ``apply_json_diff(a, diff(a, b))`` equals ``b``. ``doc`` is not changed."""
    if diff.kind != "json":
        raise InputError(f"apply_json_diff applies JSON diffs, not {diff.kind} diffs")
    result = copy.deepcopy(doc)
    removals = []
    for change in diff.changes:
        if change.op == "schema" or (not change.path and change.op != "change"):
            raise InputError(f"cannot apply {change.op} at {change.path!r} to a JSON document")
        if not change.path:
            return copy.deepcopy(change.after)  # the root itself changed; nothing else can
        if change.op == "remove":
            removals.append(change)
            continue
        parent, last = _locate(result, change.path)
        if change.op == "add" and isinstance(parent, list):
            if last != len(parent):
                raise InputError(f"cannot apply: list at {change.path[:-1]!r} has {len(parent)} items, add is at {last}")
            parent.append(copy.deepcopy(change.after))
        else:
            parent[last] = copy.deepcopy(change.after)
    # Tail removals go from the highest index down, so earlier ones do not shift later ones.
    for change in reversed(removals):
        parent, last = _locate(result, change.path)
        del parent[last]
    return result


def _locate(doc: Any, path: list[str | int]) -> tuple[Any, str | int]:
    node = doc
    for seg in path[:-1]:
        try:
            node = node[seg]
        except (KeyError, IndexError, TypeError):
            raise InputError(f"cannot apply: nothing at {path!r} (a keyed diff cannot be applied)") from None
    last = path[-1]
    if isinstance(node, list) != isinstance(last, int):
        raise InputError(f"cannot apply: {path!r} does not fit the document (a keyed diff cannot be applied)")
    return node, last


# --- SQLite -------------------------------------------------------------------------------------
#
# SQLite compares the rows itself (the after database attached read-only to the before one): one
# pass over each table with index lookups, no table held in memory. Only identifiers, quoted,
# ever enter the SQL. Rows are matched by key with the table's own `=`. SQL picks the rows where
# a value may differ, `+x IS +y COLLATE BINARY` (no affinity conversion, no NOCASE, so 'Bob' ->
# 'bob' is a change) with equal storage class (`typeof`); Python then decides each value with
# json_equal, so INTEGER 1 -> REAL 1.0 is no change and 1 -> '1' is one. The storage-class test
# keeps SQL's pick a superset of what Python reports, whatever SQLite's int/real comparison does.

_A, _B = "main", "after_db"  # schema names of the before and the attached after database


def _q(name: str) -> str:
    return quote_identifier(name)


def _row_key_text(key: tuple[Any, ...]) -> str:
    if len(key) == 1:
        return _key_text(to_json_value(key[0]))
    return canonical_json(normal_form([to_json_value(v) for v in key]))


def _row_json(columns: tuple[str, ...], row: tuple[Any, ...]) -> dict[str, Any]:
    return dict(zip(columns, map(to_json_value, row)))


def _key_columns(table: TableInfo) -> tuple[str, ...]:
    return table.key or (table.rowid,)


def _all_of(terms: list[str]) -> str:
    # Balanced, not a chain: SQLite caps expression depth at 1000 and tables may have 2000 columns.
    if len(terms) == 1:
        return terms[0]
    middle = len(terms) // 2
    return f"({_all_of(terms[:middle])} AND {_all_of(terms[middle:])})"


def _diff_sqlite(before: SqliteSnapshot, after: SqliteSnapshot) -> list[Change]:
    tables_a, tables_b = before.tables(), after.tables()
    changes: list[Change] = []
    with before.connect(attach=after, schema=_B) as conn:
        for name in sorted(tables_a.keys() | tables_b.keys()):
            table_a, table_b = tables_a.get(name), tables_b.get(name)
            for schema, table, snapshot in ((_A, table_a, before), (_B, table_b, after)):
                if table is not None:
                    _refuse_null_keys(conn, schema, table, snapshot)
            if table_b is None:
                changes.append(Change(op="schema", path=[name], before=table_a.sql))
                changes.extend(_rows_only_in(conn, "remove", table_a))
            elif table_a is None:
                changes.append(Change(op="schema", path=[name], after=table_b.sql))
                changes.extend(_rows_only_in(conn, "add", table_b))
            else:
                changes.extend(_diff_table(conn, table_a, table_b))
    return changes


def _refuse_null_keys(conn: sqlite3.Connection, schema: str, table: TableInfo, snapshot: SqliteSnapshot) -> None:
    # Legacy SQLite lets a non-INTEGER PRIMARY KEY hold NULLs, even several; `=` never matches them.
    if not table.key:
        return
    any_null = " OR ".join(f"{_q(k)} IS NULL" for k in table.key)
    (count,) = conn.execute(f"SELECT count(*) FROM {schema}.{_q(table.name)} WHERE {any_null}").fetchone()
    if count:
        raise InputError(
            f"table {table.name!r}: {count} row(s) have a NULL primary key, so rows cannot be matched; "
            "declare the key NOT NULL",
            snapshot.path,
        )


def _key_match(a: TableInfo, b: TableInfo) -> str:
    # One expression for every query (b's collation and affinity decide), so that a row is
    # never both unmatched in one query and matched in another.
    return " AND ".join(f"b.{_q(kb)} = a.{_q(ka)}" for ka, kb in zip(_key_columns(a), _key_columns(b)))


def _rows_only_in(
    conn: sqlite3.Connection, op: Literal["add", "remove"], table: TableInfo, other: TableInfo | None = None
) -> Iterator[Change]:
    """Rows of the before (remove) or after (add) ``table`` with no match in ``other``; all without it."""
    alias, schema, other_alias, other_schema = ("a", _A, "b", _B) if op == "remove" else ("b", _B, "a", _A)
    keys = _key_columns(table)
    select = ", ".join(f"{alias}.{_q(c)}" for c in (*keys, *table.columns))
    sql = f"SELECT {select} FROM {schema}.{_q(table.name)} AS {alias}"
    if other is not None:
        pair = (table, other) if op == "remove" else (other, table)
        sql += (
            f" WHERE NOT EXISTS (SELECT 1 FROM {other_schema}.{_q(other.name)} AS {other_alias}"
            f" WHERE {_key_match(*pair)})"
        )
    side = "before" if op == "remove" else "after"
    width = len(keys)
    for row in conn.execute(sql):
        yield Change(op=op, path=[table.name, _row_key_text(row[:width])], **{side: _row_json(table.columns, row[width:])})


def _diff_table(conn: sqlite3.Connection, a: TableInfo, b: TableInfo) -> list[Change]:
    changes = []
    types_a, types_b = dict(zip(a.columns, a.types)), dict(zip(b.columns, b.types))
    for column in sorted(types_a.keys() | types_b.keys()):
        if types_a.get(column) != types_b.get(column):
            changes.append(Change(op="schema", path=[a.name, column], before=types_a.get(column), after=types_b.get(column)))
    # The CREATE text is shown only when no column change explains it (constraints, keys...).
    if a.sql != b.sql and (not changes or a.key != b.key):
        changes.append(Change(op="schema", path=[a.name], before=a.sql, after=b.sql))
    if a.key != b.key:
        # Rows keyed differently cannot be matched: say so as every row removed and added.
        return [*changes, *_rows_only_in(conn, "remove", a), *_rows_only_in(conn, "add", b)]
    changes.extend(_rows_only_in(conn, "remove", a, b))
    changes.extend(_rows_only_in(conn, "add", b, a))
    changes.extend(_changed_rows(conn, a, b))
    return changes


def _changed_rows(conn: sqlite3.Connection, a: TableInfo, b: TableInfo) -> Iterator[Change]:
    # Over the union of columns; a column missing on one side reads as NULL there.
    columns = a.columns + tuple(c for c in b.columns if c not in a.columns)
    value_a = [f"a.{_q(c)}" if c in a.columns else "NULL" for c in columns]
    value_b = [f"b.{_q(c)}" if c in b.columns else "NULL" for c in columns]
    same = _all_of([f"(+{x} IS +{y} COLLATE BINARY AND typeof({x}) = typeof({y}))" for x, y in zip(value_a, value_b)])
    keys_a = _key_columns(a)
    select = ", ".join([*(f"a.{_q(k)}" for k in keys_a), *value_a, *value_b])
    sql = f"SELECT {select} FROM {_A}.{_q(a.name)} AS a JOIN {_B}.{_q(b.name)} AS b ON {_key_match(a, b)} WHERE NOT {same}"
    width, n = len(keys_a), len(columns)
    for row in conn.execute(sql):
        key_text = _row_key_text(row[:width])
        for column, va, vb in zip(columns, row[width : width + n], row[width + n :]):
            if not json_equal(va, vb):  # raw values: bytes equal only the same bytes
                yield Change(op="change", path=[a.name, key_text, column], before=to_json_value(va), after=to_json_value(vb))
