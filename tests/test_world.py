"""World snapshots: loading, records, and a clear one-line error for every bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _sqlite import make_db

from judgekit._util.io import iter_jsonl
from judgekit.errors import InputError
from judgekit.world.snapshot import (
    JsonSnapshot,
    SnapshotPolicy,
    SnapshotSpec,
    SqliteSnapshot,
    format_pointer,
    load_snapshot,
    parse_pointer,
    snapshot_from_path,
)


def load(spec: dict, base: Path):
    return load_snapshot(SnapshotSpec.model_validate(spec), base)


# --- malformed inputs: each case writes files in tmp_path and returns (action, file, line) ------


def truncated_json(tmp: Path):
    (tmp / "before.json").write_text('{"users": [\n  {"id": 1,\n   "email": "a@x.com"\n', encoding="utf-8")
    return lambda: load({"json_file": "before.json"}, tmp), "before.json", 4


def invalid_json_mid_file(tmp: Path):
    (tmp / "w.json").write_text('{\n  "a": 1,\n  "b": tru\n}\n', encoding="utf-8")
    return lambda: snapshot_from_path(tmp / "w.json"), "w.json", 3


def text_file_as_sqlite(tmp: Path):
    (tmp / "notes.txt").write_text("these are notes, not a database\n", encoding="utf-8")
    return lambda: load({"sqlite": "notes.txt"}, tmp), "notes.txt", None


def sqlite_header_but_corrupt(tmp: Path):
    (tmp / "bad.db").write_bytes(b"SQLite format 3\x00" + b"\xff" * 200)
    return lambda: load({"sqlite": "bad.db"}, tmp).collections(), "bad.db", None


def missing_json_file(tmp: Path):
    return lambda: load({"json_file": "nowhere.json"}, tmp), "nowhere.json", None


def missing_sqlite_file(tmp: Path):
    return lambda: load({"sqlite": "nowhere.db"}, tmp), "nowhere.db", None


def folder_as_sqlite(tmp: Path):
    (tmp / "snapshots").mkdir()
    return lambda: load({"sqlite": "snapshots"}, tmp), "snapshots", None


def folder_as_json(tmp: Path):
    (tmp / "snapshots").mkdir()
    return lambda: load({"json_file": "snapshots"}, tmp), "snapshots", None


def _spec_lines(tmp: Path, bad: dict) -> Path:
    path = tmp / "specs.jsonl"
    path.write_text(json.dumps({"json": {}}) + "\n" + json.dumps(bad) + "\n", encoding="utf-8")
    return path


def spec_with_two_sources(tmp: Path):
    path = _spec_lines(tmp, {"json": {"a": 1}, "sqlite": "w.db"})
    return lambda: list(iter_jsonl(path, SnapshotSpec)), "specs.jsonl", 2


def spec_with_no_source(tmp: Path):
    path = _spec_lines(tmp, {})
    return lambda: list(iter_jsonl(path, SnapshotSpec)), "specs.jsonl", 2


def spec_with_unknown_key(tmp: Path):
    path = _spec_lines(tmp, {"jsn": {"a": 1}})
    return lambda: list(iter_jsonl(path, SnapshotSpec)), "specs.jsonl", 2


def spec_with_null_path(tmp: Path):
    path = _spec_lines(tmp, {"sqlite": None})
    return lambda: list(iter_jsonl(path, SnapshotSpec)), "specs.jsonl", 2


def unknown_table(tmp: Path):
    make_db(tmp / "w.db", "CREATE TABLE users (id INTEGER PRIMARY KEY)", "CREATE TABLE orders (id INTEGER PRIMARY KEY)")
    return lambda: load({"sqlite": "w.db"}, tmp).records("customers"), "w.db", None


def pointer_to_scalar(tmp: Path):
    (tmp / "w.json").write_text('{"count": 3}', encoding="utf-8")
    return lambda: load({"json_file": "w.json"}, tmp).records("/count"), "w.json", None


def pointer_to_nothing(tmp: Path):
    (tmp / "w.json").write_text('{"users": []}', encoding="utf-8")
    return lambda: load({"json_file": "w.json"}, tmp).records("/customers"), "w.json", None


def list_of_scalars(tmp: Path):
    (tmp / "w.json").write_text('{"tags": ["a", "b"]}', encoding="utf-8")
    return lambda: load({"json_file": "w.json"}, tmp).records("/tags"), "w.json", None


def nan_in_json(tmp: Path):
    (tmp / "w.json").write_text('{"x": NaN}', encoding="utf-8")
    return lambda: load({"json_file": "w.json"}, tmp), "w.json", None


def duplicate_key_in_json(tmp: Path):
    (tmp / "w.json").write_text('{"x": 1, "x": 2}', encoding="utf-8")
    return lambda: load({"json_file": "w.json"}, tmp), "w.json", None


def empty_json_file(tmp: Path):
    (tmp / "w.json").write_text("\n", encoding="utf-8")
    return lambda: snapshot_from_path(tmp / "w.json"), "w.json", 1


def binary_file_given_to_cli(tmp: Path):
    (tmp / "blob.bin").write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff")
    return lambda: snapshot_from_path(tmp / "blob.bin"), "blob.bin", None


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(truncated_json, id="truncated_json_names_file_and_line"),
        pytest.param(invalid_json_mid_file, id="invalid_json_names_line"),
        pytest.param(text_file_as_sqlite, id="text_file_given_as_sqlite"),
        pytest.param(sqlite_header_but_corrupt, id="sqlite_header_but_corrupt_body"),
        pytest.param(missing_json_file, id="missing_json_file"),
        pytest.param(missing_sqlite_file, id="missing_sqlite_file"),
        pytest.param(folder_as_sqlite, id="folder_given_as_sqlite"),
        pytest.param(folder_as_json, id="folder_given_as_json"),
        pytest.param(spec_with_two_sources, id="spec_with_json_and_sqlite"),
        pytest.param(spec_with_no_source, id="spec_with_no_source"),
        pytest.param(spec_with_unknown_key, id="spec_with_unknown_key"),
        pytest.param(spec_with_null_path, id="spec_with_null_path"),
        pytest.param(unknown_table, id="unknown_table"),
        pytest.param(pointer_to_scalar, id="json_pointer_to_scalar"),
        pytest.param(pointer_to_nothing, id="json_pointer_to_nothing"),
        pytest.param(list_of_scalars, id="json_list_of_scalars_is_not_records"),
        pytest.param(nan_in_json, id="nan_is_not_json"),
        pytest.param(duplicate_key_in_json, id="duplicate_key_is_not_silently_dropped"),
        pytest.param(empty_json_file, id="empty_json_file"),
        pytest.param(binary_file_given_to_cli, id="binary_file_neither_json_nor_sqlite"),
    ],
)
def test_bad_input_is_one_clear_input_error(tmp_path, case):
    action, filename, line = case(tmp_path)
    with pytest.raises(InputError) as caught:
        action()
    err = caught.value
    assert Path(err.path).name == filename
    assert str(err).startswith(f"{err.path}:")
    assert err.line == line
    assert "\n" not in str(err)


def test_error_messages_say_what_is_wrong(tmp_path):
    make_db(tmp_path / "w.db", "CREATE TABLE users (id INTEGER PRIMARY KEY)", "CREATE TABLE orders (id INTEGER PRIMARY KEY)")
    with pytest.raises(InputError, match=r"no table 'customers' .*tables: 'orders', 'users'"):
        SqliteSnapshot(tmp_path / "w.db").records("customers")
    with pytest.raises(InputError, match="exactly one of json, json_file, sqlite"):
        list(iter_jsonl(_spec_lines(tmp_path, {"json": 1, "json_file": "x.json"}), SnapshotSpec))
    with pytest.raises(InputError, match="jsn: unknown key"):
        list(iter_jsonl(_spec_lines(tmp_path, {"jsn": 1}), SnapshotSpec))
    (tmp_path / "n.txt").write_text("hello", encoding="utf-8")
    with pytest.raises(InputError, match="not a SQLite database"):
        SqliteSnapshot(tmp_path / "n.txt")
    with pytest.raises(InputError, match="names a number, expected a list or object of records"):
        JsonSnapshot({"count": 3}, "w.json").records("/count")


# --- the spec model -------------------------------------------------------------------------------


def test_spec_accepts_each_source_and_json_null():
    assert SnapshotSpec.model_validate({"json": None}).json_value is None
    assert SnapshotSpec.model_validate({"json": {"a": [1]}}).json_value == {"a": [1]}
    assert SnapshotSpec.model_validate({"json_file": "w.json"}).json_file == "w.json"
    assert SnapshotSpec.model_validate({"sqlite": "w.db"}).sqlite == "w.db"
    assert SnapshotSpec(json_value=[1]).model_dump(by_alias=True, exclude_unset=True) == {"json": [1]}


def test_spec_rejects_inline_nan():
    with pytest.raises(ValueError, match="not a JSON value"):
        SnapshotSpec.model_validate({"json": {"x": float("nan")}})


def test_spec_json_schema_names_the_json_key():
    schema = SnapshotSpec.model_json_schema(by_alias=True)
    assert set(schema["properties"]) == {"json", "json_file", "sqlite"}
    assert schema["additionalProperties"] is False
    assert {"required": ["json"]} in schema["oneOf"]


# --- JSON snapshots ------------------------------------------------------------------------------

WORLD = {
    "users": [{"id": 1, "name": "Ann"}, {"id": 2, "name": "Bo"}],
    "by_id": {"a": {"n": 1}, "b": {"n": 2}},
    "a/b": {"x~y": [{"deep": True}]},
    "version": 3,
}


@pytest.mark.parametrize(
    ("pointer", "expected"),
    [
        pytest.param("/users", WORLD["users"], id="list_of_objects"),
        pytest.param("/by_id", [{"n": 1}, {"n": 2}], id="object_of_objects_gives_values"),
        pytest.param("/a~1b/x~0y", [{"deep": True}], id="escaped_tokens"),
    ],
)
def test_json_records(pointer, expected):
    assert JsonSnapshot(WORLD, "w.json").records(pointer) == expected


def test_json_root_object_holds_no_records_here():
    with pytest.raises(InputError, match="record 'users' is a list, expected an object"):
        JsonSnapshot(WORLD, "w.json").records("")


def test_json_root_list_and_collections():
    assert JsonSnapshot([{"a": 1}]).records("") == [{"a": 1}]
    assert JsonSnapshot([{"a": 1}]).collections() == [""]
    assert JsonSnapshot(WORLD).collections() == ["/a~1b", "/by_id", "/users"]
    assert JsonSnapshot(3).collections() == []


def test_json_records_are_copies():
    snapshot = JsonSnapshot({"users": [{"id": 1}]})
    snapshot.records("/users")[0]["id"] = 99
    assert snapshot.data == {"users": [{"id": 1}]}


@pytest.mark.parametrize(
    "pointer",
    [
        pytest.param("users", id="no_leading_slash"),
        pytest.param("/users/01", id="leading_zero_index"),
        pytest.param("/users/-", id="end_of_list_names_nothing"),
        pytest.param("/users/5", id="index_out_of_range"),
    ],
)
def test_json_bad_pointers(pointer):
    with pytest.raises(InputError) as caught:
        JsonSnapshot(WORLD, "w.json").resolve(pointer)
    assert caught.value.path == "w.json"


def test_pointer_round_trip():
    path = ["a/b", "~x", "", "0"]
    assert parse_pointer(format_pointer(path)) == path
    assert parse_pointer("/~01") == ["~1"]


def test_inline_json_is_labelled_in_errors(tmp_path):
    snapshot = load_snapshot(SnapshotSpec.model_validate({"json": {"n": 1}}), tmp_path, inline_source="runs.jsonl:3 world.before")
    with pytest.raises(InputError, match=r"^runs.jsonl:3 world.before: "):
        snapshot.records("/n")


def test_json_file_relative_to_base_dir(tmp_path):
    (tmp_path / "worlds").mkdir()
    (tmp_path / "worlds" / "after.json").write_text('{"users": [{"id": 7}]}', encoding="utf-8")
    snapshot = load({"json_file": "worlds/after.json"}, tmp_path)
    assert snapshot.kind == "json"
    assert snapshot.records("/users") == [{"id": 7}]


# --- SQLite snapshots ----------------------------------------------------------------------------


def test_sqlite_records_are_json_and_ordered_by_key(tmp_path):
    make_db(
        tmp_path / "w.db",
        "CREATE TABLE files (name TEXT PRIMARY KEY, data BLOB, size REAL)",
        ("INSERT INTO files VALUES (?, ?, ?)", ("b.txt", b"hello", 5.0)),
        ("INSERT INTO files VALUES (?, ?, ?)", ("a.txt", None, float("inf"))),
    )
    snapshot = load({"sqlite": "w.db"}, tmp_path)
    assert snapshot.kind == "sqlite"
    assert snapshot.collections() == ["files"]
    assert snapshot.records("files") == [
        {"name": "a.txt", "data": None, "size": {"$float": "Infinity"}},
        {
            "name": "b.txt",
            "data": {"$blob": "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824", "size": 5},
            "size": 5.0,
        },
    ]


def test_sqlite_empty_file_is_an_empty_database(tmp_path):
    (tmp_path / "empty.db").write_bytes(b"")
    assert SqliteSnapshot(tmp_path / "empty.db").collections() == []


def test_sqlite_is_opened_read_only_and_left_unchanged(tmp_path):
    path = make_db(tmp_path / "w.db", "CREATE TABLE t (id INTEGER PRIMARY KEY)", "INSERT INTO t VALUES (1)")
    original = path.read_bytes()
    snapshot = SqliteSnapshot(path)
    assert snapshot.records("t") == [{"id": 1}]
    with pytest.raises(InputError, match="readonly"):
        with snapshot.connect() as conn:
            conn.execute("INSERT INTO t VALUES (2)")
    other = SqliteSnapshot(make_db(tmp_path / "o.db", "CREATE TABLE t (id INTEGER PRIMARY KEY)"))
    with pytest.raises(InputError, match="readonly"):
        with snapshot.connect(attach=other, schema="other") as conn:
            conn.execute("INSERT INTO other.t VALUES (2)")
    assert path.read_bytes() == original
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o.db", "w.db"]


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("what?mode=rw.db", id="question_mark"),
        pytest.param("50%20off #1.db", id="percent_space_hash"),
        pytest.param("naïve ü.db", id="non_ascii"),
    ],
)
def test_sqlite_paths_are_percent_encoded(tmp_path, name):
    path = make_db(tmp_path / name, "CREATE TABLE t (id INTEGER PRIMARY KEY)", "INSERT INTO t VALUES (1)")
    assert SqliteSnapshot(path).records("t") == [{"id": 1}]
    assert snapshot_from_path(path).kind == "sqlite"


def test_sqlite_quoted_identifiers_and_rowid_tables(tmp_path):
    make_db(
        tmp_path / "w.db",
        'CREATE TABLE "odd ""name"" table" ("col one" TEXT, "it\'s" INTEGER)',
        ('INSERT INTO "odd ""name"" table" VALUES (?, ?)', ("x", 2)),
        ('INSERT INTO "odd ""name"" table" VALUES (?, ?)', ("y", 1)),
    )
    snapshot = SqliteSnapshot(tmp_path / "w.db")
    assert snapshot.collections() == ['odd "name" table']
    assert snapshot.records('odd "name" table') == [{"col one": "x", "it's": 2}, {"col one": "y", "it's": 1}]
    info = snapshot.tables()['odd "name" table']
    assert info.key == () and info.rowid == "rowid"


def test_sqlite_column_named_rowid_uses_another_alias(tmp_path):
    make_db(tmp_path / "w.db", "CREATE TABLE t (rowid TEXT, v INTEGER)", "INSERT INTO t VALUES ('r', 1)")
    assert SqliteSnapshot(tmp_path / "w.db").tables()["t"].rowid == "_rowid_"
    assert SqliteSnapshot(tmp_path / "w.db").records("t") == [{"rowid": "r", "v": 1}]


def test_snapshot_from_path_tells_json_from_sqlite(tmp_path):
    make_db(tmp_path / "w.db", "CREATE TABLE t (id INTEGER PRIMARY KEY)")
    (tmp_path / "w.json").write_text("[]", encoding="utf-8")
    assert isinstance(snapshot_from_path(tmp_path / "w.db"), SqliteSnapshot)
    assert isinstance(snapshot_from_path(tmp_path / "w.json"), JsonSnapshot)


# --- what may be read: the policy, the header check ------------------------------------------------


@pytest.mark.parametrize("page_size", [pytest.param(512, id="512"), pytest.param(65536, id="65536_stored_as_1")])
def test_sqlite_page_sizes_at_both_ends_are_read(tmp_path, page_size):
    path = make_db(tmp_path / "w.db", f"PRAGMA page_size = {page_size}", "CREATE TABLE t (id INTEGER PRIMARY KEY)", "INSERT INTO t VALUES (1)")
    assert path.stat().st_size % page_size == 0 and path.stat().st_size // page_size == 2
    assert SqliteSnapshot(path).records("t") == [{"id": 1}]


def test_sqlite_whole_file_with_a_legacy_header_is_read(tmp_path):
    # Before SQLite 3.7.0 the in-header page count was not kept: the file size is all there is.
    path = make_db(tmp_path / "w.db", "CREATE TABLE t (id INTEGER PRIMARY KEY)", "INSERT INTO t VALUES (1)")
    data = path.read_bytes()
    path.write_bytes(data[:92] + b"\x00\x00\x00\x00" + data[96:])
    assert SqliteSnapshot(path).records("t") == [{"id": 1}]


def test_json_file_line_numbers_count_crlf_and_cr_lines(tmp_path):
    (tmp_path / "crlf.json").write_bytes(b'{\r\n  "a": 1,\r\n  "b": tru\r\n}\r\n')
    (tmp_path / "cr.json").write_bytes(b'{\r  "a": 1,\r  "b": tru\r}\r')
    for name in ("crlf.json", "cr.json"):
        with pytest.raises(InputError) as caught:
            load({"json_file": name}, tmp_path)
        assert caught.value.line == 3


def test_policy_roots_are_resolved_and_max_bytes_positive(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "alias").symlink_to(tmp_path / "real", target_is_directory=True)
    policy = SnapshotPolicy((tmp_path / "alias",), 10)
    assert policy.roots == ((tmp_path / "real").resolve(),)
    assert policy.confine(tmp_path / "alias" / "w.json") == (tmp_path / "real" / "w.json").resolve()
    with pytest.raises(ValueError, match="max_bytes must be > 0"):
        SnapshotPolicy((tmp_path,), 0)
    assert SnapshotPolicy.unconfined().confine(Path("/etc/hostname")) == Path("/etc/hostname").resolve()


def test_snapshot_spec_paths_are_confined_to_base_dir_by_default(tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "w.json").write_text("{}", encoding="utf-8")
    with pytest.raises(InputError) as caught:
        load({"json_file": "../w.json"}, tmp_path / "in")
    assert str(caught.value) == (
        f"{tmp_path}/in/../w.json: snapshot json_file: '../w.json' (relative to the trajectory file's folder) "
        f"resolves to {tmp_path.resolve()}/w.json, outside the folders snapshots may be read from "
        f"({tmp_path.resolve()}/in); to allow it, add a folder that holds it to `snapshots: roots:` in the suite file"
    )
