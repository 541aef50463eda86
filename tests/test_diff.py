"""The canonical end-state diff: properties on JSON, real SQLite files, the judge's text."""

from __future__ import annotations

import copy
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from _sqlite import make_db
from hypothesis import given, settings
from hypothesis import strategies as st

from judgekit._util.io import canonical_json
from judgekit.world.json_equality import json_equal, normal_form
from judgekit.world.diff import (
    Change,
    Diff,
    apply_json_diff,
    diff_paths,
    diff_snapshots,
    render_text,
)
from judgekit.errors import InputError
from judgekit.world.snapshot import JsonSnapshot, SqliteSnapshot


def jdiff(a: Any, b: Any, keys: dict[str, str] | None = None) -> Diff:
    return diff_snapshots(JsonSnapshot(a, "a.json"), JsonSnapshot(b, "b.json"), keys)


def sdiff(tmp: Path, before: list, after: list) -> Diff:
    return diff_snapshots(SqliteSnapshot(make_db(tmp / "before.db", *before)), SqliteSnapshot(make_db(tmp / "after.db", *after)))


def as_tuples(diff: Diff) -> list[tuple]:
    return [(c.op, c.path, c.before, c.after) for c in diff.changes]


# --- JSON: properties ----------------------------------------------------------------------------

# Values Python's == confuses (1 == 1.0 == True, 0.0 == -0.0) are drawn often on purpose.
confusable = st.sampled_from([0, 1, 0.0, -0.0, 1.0, True, False, "1", "", None])
scalars = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8)
) | confusable
keys = st.text(max_size=4) | st.sampled_from(["a", "b", "0", "a/b", "~1"])
documents = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(keys, children, max_size=5),
    max_leaves=15,
)
small = st.recursive(scalars, lambda children: st.lists(children, max_size=2) | st.dictionaries(keys, children, max_size=2), max_leaves=3)


@st.composite
def edited(draw: st.DrawFn, value: Any, top: bool = False) -> Any:
    """A copy of ``value`` with a few edits, so that pairs share structure (random pairs rarely do)."""
    action = "recurse" if top else draw(st.sampled_from(["keep", "keep", "keep", "replace", "recurse", "recurse"]))
    if action == "keep":
        return copy.deepcopy(value)
    if action == "replace" or not isinstance(value, (dict, list)):
        return draw(small)
    if isinstance(value, dict):
        result = {k: draw(edited(v)) for k, v in value.items() if draw(st.integers(0, 4))}
        result.update(draw(st.dictionaries(keys, small, max_size=2)))
        return result
    result = [draw(edited(v)) for v in value][: draw(st.integers(0, len(value)))]
    return result + draw(st.lists(small, max_size=2))


@st.composite
def document_pairs(draw: st.DrawFn) -> tuple[Any, Any]:
    a = draw(documents)
    return a, draw(st.one_of(edited(a, top=True), documents))


def reversed_keys(value: Any) -> Any:
    """The same document with every object's keys in the opposite insertion order."""
    if isinstance(value, dict):
        return {k: reversed_keys(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [reversed_keys(v) for v in value]
    return value


@settings(max_examples=120, deadline=None)
@given(document_pairs())
def test_applying_the_diff_gives_the_after_document(pair):
    a, b = pair
    original = copy.deepcopy(a)
    diff = jdiff(a, b)
    # Changed on purpose: the diff uses json_equal (1 == 1.0, 0.0 == -0.0), so a number that
    # only changed form is no change and keeps its old form; the result is b as JSON, compared
    # by its normal form's canonical JSON (never Python's ==, which says True == 1). It was
    # byte-identical when the diff compared types too.
    applied = apply_json_diff(a, diff)
    assert canonical_json(normal_form(applied)) == canonical_json(normal_form(b))
    assert json_equal(applied, b)
    assert canonical_json(a) == canonical_json(original)  # the input is left alone


@settings(max_examples=120, deadline=None)
@given(document_pairs())
def test_diff_is_empty_exactly_when_the_documents_are_json_equal(pair):
    a, b = pair
    assert (jdiff(a, b).changes == []) == json_equal(a, b)


@settings(max_examples=80, deadline=None)
@given(document_pairs())
def test_diff_is_byte_identical_across_runs_and_key_orders(pair):
    a, b = pair
    first = jdiff(a, b).to_json()
    assert jdiff(copy.deepcopy(a), copy.deepcopy(b)).to_json() == first
    assert jdiff(reversed_keys(a), reversed_keys(b)).to_json() == first


@settings(max_examples=200, deadline=None)
@given(confusable | scalars, confusable | scalars)
def test_a_scalar_changed_exactly_when_its_normal_form_did(x, y):
    # Changed on purpose: was "when its canonical JSON did" (1 -> 1.0 and 0.0 -> -0.0 were
    # changes). Numbers now compare by value as in JSON Schema; booleans still never equal numbers.
    changed = bool(jdiff({"v": x}, {"v": y}).changes)
    assert changed == (canonical_json(normal_form(x)) != canonical_json(normal_form(y)))
    assert changed == (not json_equal(x, y))
    if isinstance(x, bool) != isinstance(y, bool):
        assert changed


@settings(max_examples=80, deadline=None)
@given(documents)
def test_diff_of_a_document_with_itself_is_empty(a):
    assert jdiff(a, copy.deepcopy(a)).changes == []
    assert render_text(jdiff(a, a)) == "(no changes)"


@settings(max_examples=40, deadline=None)
@given(document_pairs())
def test_diff_json_round_trips_and_matches_its_schema(pair):
    diff = jdiff(*pair)
    encoded = diff.to_json()
    jsonschema.validate(json.loads(encoded), Diff.model_json_schema())
    assert Diff.model_validate_json(encoded).to_json() == encoded


# --- JSON: cases ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        # Changed on purpose (were one change each): one number written another way is no change.
        pytest.param({"n": 1}, {"n": 1.0}, [], id="int_vs_float_same_number"),
        pytest.param({"n": 0.0}, {"n": -0.0}, [], id="signed_zero_same_number"),
        pytest.param({"n": [1, {"m": 2.0}]}, {"n": [1.0, {"m": 2}]}, [], id="nested_same_numbers"),
        pytest.param({"n": 1}, {"n": 1.5}, [("change", ["n"], 1, 1.5)], id="int_vs_other_float_differ"),
        pytest.param({"n": 2**53 + 1}, {"n": 2.0**53}, [("change", ["n"], 2**53 + 1, 2.0**53)], id="int_vs_float_compared_exactly"),
        pytest.param({"n": 1}, {"n": True}, [("change", ["n"], 1, True)], id="int_vs_bool_differ"),
        pytest.param({"n": [0]}, {"n": [False]}, [("change", ["n", 0], 0, False)], id="nested_int_vs_bool_differ"),
        pytest.param({"n": 1}, {"n": "1"}, [("change", ["n"], 1, "1")], id="int_vs_string_differ"),
        pytest.param({"x": {"a": 1}}, {"x": [1]}, [("change", ["x"], {"a": 1}, [1])], id="type_change_is_one_change"),
        pytest.param([1, 2], [1, 2, 3], [("add", [2], None, 3)], id="list_tail_add"),
        pytest.param([1, 2, 3], [1], [("remove", [1], 2, None), ("remove", [2], 3, None)], id="list_tail_remove"),
        pytest.param({"a": 1}, {}, [("remove", ["a"], 1, None)], id="key_removed"),
        pytest.param(1, "1", [("change", [], 1, "1")], id="root_change"),
    ],
)
def test_json_changes(a, b, expected):
    assert as_tuples(jdiff(a, b)) == expected


def test_changes_sort_by_path_with_indexes_numerically():
    diff = jdiff({"b": list(range(12)), "a": 0}, {"b": list(range(1, 13)), "a": 1})
    assert [c.path for c in diff.changes] == [["a"], *(["b", i] for i in range(12))]


def test_keyed_list_insert_in_the_middle_is_one_add():
    users = [{"id": 1, "email": "a@x.com"}, {"id": 3, "email": "c@x.com"}]
    after = [users[0], {"id": 2, "email": "b@x.com"}, {"id": 3, "email": "carol@example.com"}]
    keyed = jdiff({"users": users}, {"users": after}, keys={"/users": "id"})
    assert as_tuples(keyed) == [
        ("add", ["users", "2"], None, {"id": 2, "email": "b@x.com"}),
        ("change", ["users", "3", "email"], "c@x.com", "carol@example.com"),
    ]
    assert len(jdiff({"users": users}, {"users": after}).changes) > 2  # by index: a cascade


def test_keyed_list_matches_keys_that_are_equal_numbers():
    # Changed on purpose: id 1 and id 1.0 were two keys (a remove and an add); they are one number.
    before = {"users": [{"id": 1, "email": "a@x.com"}, {"id": 2.5, "email": "b@x.com"}]}
    after = {"users": [{"id": 1.0, "email": "alice@example.com"}, {"id": 2.5, "email": "b@x.com"}]}
    assert as_tuples(jdiff(before, after, keys={"/users": "id"})) == [
        ("change", ["users", "1", "email"], "a@x.com", "alice@example.com"),
    ]
    flag = {"users": [{"id": True}], "flags": []}
    assert [(c.op, c.path) for c in jdiff(flag, {"users": [{"id": 1}], "flags": []}, keys={"/users": "id"}).changes] == [
        ("add", ["users", "1"]), ("remove", ["users", "true"]),  # true is never the number 1
    ]


def test_keyed_list_nested_pointer_and_string_keys():
    before = {"org": {"teams": [{"slug": "core", "size": 3}, {"slug": "web", "size": 2}]}}
    after = {"org": {"teams": [{"slug": "web", "size": 2}]}}
    diff = jdiff(before, after, keys={"/org/teams": "slug"})
    assert as_tuples(diff) == [("remove", ["org", "teams", "core"], {"slug": "core", "size": 3}, None)]


@pytest.mark.parametrize(
    ("before", "keys", "message"),
    [
        pytest.param({"users": [{"id": 1}, {"id": 1}]}, {"/users": "id"}, "keys must be unique", id="duplicate_key"),
        pytest.param({"users": [{"id": 1}, {"id": 1.0}]}, {"/users": "id"}, "keys must be unique", id="duplicate_key_as_int_and_float"),
        pytest.param({"users": [{"id": 1}, {"name": "x"}]}, {"/users": "id"}, "has no field 'id'", id="missing_key_field"),
        pytest.param({"users": [1]}, {"/users": "id"}, "has no field 'id'", id="record_not_an_object"),
        pytest.param({"users": {}}, {"/users": "id"}, "names no list in either snapshot", id="pointer_to_object"),
        pytest.param({"users": []}, {"/usr": "id"}, "names no list in either snapshot", id="pointer_typo"),
    ],
)
def test_bad_keys_are_input_errors(before, keys, message):
    with pytest.raises(InputError, match=message):
        jdiff(before, copy.deepcopy(before), keys=keys)


def test_key_on_a_list_present_on_one_side_only_is_fine():
    diff = jdiff({}, {"users": [{"id": 1}]}, keys={"/users": "id"})
    assert as_tuples(diff) == [("add", ["users"], None, [{"id": 1}])]


def test_mixing_json_and_sqlite_is_an_input_error(tmp_path):
    db = SqliteSnapshot(make_db(tmp_path / "w.db", "CREATE TABLE t (id INTEGER PRIMARY KEY)"))
    with pytest.raises(InputError, match="both sides must be JSON or both SQLite"):
        diff_snapshots(JsonSnapshot({}, "w.json"), db)
    with pytest.raises(InputError, match="keys apply to JSON snapshots only"):
        diff_snapshots(db, db, keys={"/t": "id"})


def test_apply_refuses_keyed_and_sqlite_diffs():
    keyed = jdiff({"u": [{"id": 1}]}, {"u": [{"id": 1, "x": 2}]}, keys={"/u": "id"})
    with pytest.raises(InputError, match="keyed diff"):
        apply_json_diff({"u": [{"id": 1}]}, keyed)
    with pytest.raises(InputError, match="not sqlite diffs"):
        apply_json_diff({}, Diff(kind="sqlite", changes=[]))


def test_diff_sorts_changes_it_is_given():
    diff = Diff(kind="json", changes=[Change(op="add", path=["b"]), Change(op="add", path=[0]), Change(op="add", path=["a"])])
    assert [c.path for c in diff.changes] == [[0], ["a"], ["b"]]


def test_diff_paths_reads_json_files(tmp_path):
    (tmp_path / "a.json").write_text('{"users": [{"id": 1, "email": "a@x.com"}]}', encoding="utf-8")
    (tmp_path / "b.json").write_text('{"users": [{"id": 1, "email": "alice@example.com"}]}', encoding="utf-8")
    diff = diff_paths(tmp_path / "a.json", tmp_path / "b.json", keys={"/users": "id"})
    assert render_text(diff) == '~ users/1/email: "a@x.com" -> "alice@example.com"'


# --- SQLite --------------------------------------------------------------------------------------

USERS = "CREATE TABLE users (id INTEGER PRIMARY KEY, email TEXT, age INTEGER)"
ANN = ("INSERT INTO users VALUES (?, ?, ?)", (1, "a@x.com", 30))
BO = ("INSERT INTO users VALUES (?, ?, ?)", (2, "b@x.com", 40))


def test_sqlite_changed_column(tmp_path):
    diff = sdiff(tmp_path, [USERS, ANN, BO], [USERS, ANN, ("INSERT INTO users VALUES (2, 'bo@example.com', 40)", ())])
    assert diff.kind == "sqlite"
    assert as_tuples(diff) == [("change", ["users", "2", "email"], "b@x.com", "bo@example.com")]
    assert render_text(diff) == '~ users/2/email: "b@x.com" -> "bo@example.com"'


def test_sqlite_added_and_removed_rows(tmp_path):
    carl = ("INSERT INTO users VALUES (?, ?, ?)", (10, "c@x.com", None))
    diff = sdiff(tmp_path, [USERS, ANN, BO], [USERS, BO, carl])
    assert as_tuples(diff) == [
        ("remove", ["users", "1"], {"id": 1, "email": "a@x.com", "age": 30}, None),
        ("add", ["users", "10"], None, {"id": 10, "email": "c@x.com", "age": None}),
    ]


def test_sqlite_unchanged_is_empty(tmp_path):
    assert sdiff(tmp_path, [USERS, ANN, BO], [USERS, BO, ANN]).changes == []


def test_sqlite_table_without_primary_key_is_keyed_by_rowid(tmp_path):
    log = "CREATE TABLE log (line TEXT)"
    rows = [("INSERT INTO log VALUES (?)", (text,)) for text in ("one", "two", "three")]
    after = [log, *rows, "DELETE FROM log WHERE line = 'two'", "UPDATE log SET line = 'THREE' WHERE rowid = 3"]
    diff = sdiff(tmp_path, [log, *rows], after)
    assert as_tuples(diff) == [
        ("remove", ["log", "2"], {"line": "two"}, None),
        ("change", ["log", "3", "line"], "three", "THREE"),
    ]


@pytest.mark.parametrize("without_rowid", [pytest.param("", id="rowid_table"), pytest.param(" WITHOUT ROWID", id="without_rowid")])
def test_sqlite_composite_primary_key(tmp_path, without_rowid):
    table = f"CREATE TABLE members (team TEXT, user INTEGER, role TEXT, PRIMARY KEY (user, team)){without_rowid}"
    insert = "INSERT INTO members VALUES (?, ?, ?)"
    before = [table, (insert, ("core", 1, "admin")), (insert, ("web", 1, "viewer"))]
    after = [table, (insert, ("core", 1, "owner")), (insert, ("web", 2, "viewer"))]
    assert as_tuples(sdiff(tmp_path, before, after)) == [
        ("change", ["members", '[1,"core"]', "role"], "admin", "owner"),
        ("remove", ["members", '[1,"web"]'], {"team": "web", "user": 1, "role": "viewer"}, None),
        ("add", ["members", '[2,"web"]'], None, {"team": "web", "user": 2, "role": "viewer"}),
    ]


def test_sqlite_added_column_is_a_schema_change(tmp_path):
    after = [USERS, ANN, BO, "ALTER TABLE users ADD COLUMN plan TEXT", "UPDATE users SET plan = 'pro' WHERE id = 2"]
    assert as_tuples(sdiff(tmp_path, [USERS, ANN, BO], after)) == [
        ("schema", ["users", "plan"], None, "TEXT"),
        ("change", ["users", "2", "plan"], None, "pro"),
    ]


def test_sqlite_removed_and_retyped_columns(tmp_path):
    before = ["CREATE TABLE t (id INTEGER PRIMARY KEY, a TEXT, b TEXT)", "INSERT INTO t VALUES (1, 'x', 'y')"]
    after = ["CREATE TABLE t (id INTEGER PRIMARY KEY, a BLOB)", "INSERT INTO t VALUES (1, 'x')"]
    assert as_tuples(sdiff(tmp_path, before, after)) == [
        ("schema", ["t", "a"], "TEXT", "BLOB"),
        ("schema", ["t", "b"], "TEXT", None),
        ("change", ["t", "1", "b"], "y", None),
    ]


def test_sqlite_constraint_change_shows_the_create_statements(tmp_path):
    before = ["CREATE TABLE t (id INTEGER PRIMARY KEY, a TEXT)"]
    after = ["CREATE TABLE t (id INTEGER PRIMARY KEY, a TEXT NOT NULL)"]
    assert as_tuples(sdiff(tmp_path, before, after)) == [("schema", ["t"], before[0], after[0])]


def test_sqlite_changed_primary_key_reports_rows_removed_and_added(tmp_path):
    before = ["CREATE TABLE t (id INTEGER PRIMARY KEY, code TEXT)", "INSERT INTO t VALUES (1, 'a')"]
    after = ["CREATE TABLE t (id INTEGER, code TEXT PRIMARY KEY)", "INSERT INTO t VALUES (1, 'a')"]
    ops = [(c.op, c.path) for c in sdiff(tmp_path, before, after).changes]
    assert ops == [("schema", ["t"]), ("remove", ["t", "1"]), ("add", ["t", "a"])]


def test_sqlite_added_and_removed_tables(tmp_path):
    orders = "CREATE TABLE orders (id INTEGER PRIMARY KEY, total REAL)"
    diff = sdiff(tmp_path, [USERS, ANN], [orders, "INSERT INTO orders VALUES (17, 9.5)"])
    assert as_tuples(diff) == [
        ("schema", ["orders"], None, orders),
        ("add", ["orders", "17"], None, {"id": 17, "total": 9.5}),
        ("schema", ["users"], USERS, None),
        ("remove", ["users", "1"], {"id": 1, "email": "a@x.com", "age": 30}, None),
    ]
    assert render_text(diff).splitlines()[:2] == [
        f"! schema orders: null -> {json.dumps(orders)}",
        '+ orders/17: {"id":17,"total":9.5}',
    ]


def test_sqlite_blob_column(tmp_path):
    files = "CREATE TABLE files (name TEXT PRIMARY KEY, data BLOB)"
    insert = "INSERT INTO files VALUES (?, ?)"
    diff = sdiff(tmp_path, [files, (insert, ("a", b"\x00\x01"))], [files, (insert, ("a", b"\x00\x02"))])
    (change,) = diff.changes
    assert change.path == ["files", "a", "data"]
    assert change.before == {"$blob": hashlib.sha256(b"\x00\x01").hexdigest(), "size": 2}
    assert change.after == {"$blob": hashlib.sha256(b"\x00\x02").hexdigest(), "size": 2}


@pytest.mark.parametrize(
    ("before", "after", "changed"),
    [
        # Changed on purpose (was a change): INTEGER 1 and REAL 1.0 are one number, as SQLite's
        # own `=` and JSON Schema say; the diff compares values with json_equal on both kinds.
        pytest.param(1, 1.0, False, id="integer_to_real_same_number"),
        pytest.param(2**53 + 1, float(2**53), True, id="integer_to_real_compared_exactly"),
        pytest.param(1, 1.5, True, id="integer_to_other_real"),
        pytest.param(1, "1", True, id="integer_to_text"),
        pytest.param("1", b"1", True, id="text_to_blob"),
        pytest.param(None, 0, True, id="null_to_zero"),
    ],
)
def test_sqlite_values_compare_as_json_values(tmp_path, before, after, changed):
    table = "CREATE TABLE t (id INTEGER PRIMARY KEY, v)"  # no declared type: values keep their class
    other = ("INSERT INTO t VALUES (2, ?)", ("x",))
    diff = sdiff(tmp_path, [table, ("INSERT INTO t VALUES (1, ?)", (before,)), other],
                 [table, ("INSERT INTO t VALUES (1, ?)", (after,)), other])
    assert [(c.op, c.path) for c in diff.changes] == ([("change", ["t", "1", "v"])] if changed else [])


def test_sqlite_retyped_column_is_one_schema_change_not_every_row(tmp_path):
    # Changed on purpose: every row also showed a change 2 -> 2.0; its value did not change.
    before = ["CREATE TABLE t (id INTEGER PRIMARY KEY, v INTEGER)", "INSERT INTO t VALUES (1, 2)", "INSERT INTO t VALUES (2, 3)"]
    after = ["CREATE TABLE t (id INTEGER PRIMARY KEY, v REAL)", "INSERT INTO t VALUES (1, 2)", "INSERT INTO t VALUES (2, 3.5)"]
    assert as_tuples(sdiff(tmp_path, before, after)) == [
        ("schema", ["t", "v"], "INTEGER", "REAL"),
        ("change", ["t", "2", "v"], 3, 3.5),
    ]


def test_sqlite_rows_keyed_by_equal_numbers_match(tmp_path):
    # An untyped key column: SQLite's `=` matches 1 with 1.0, and both have the key text "1".
    table = "CREATE TABLE t (k PRIMARY KEY, v TEXT)"
    diff = sdiff(tmp_path, [table, ("INSERT INTO t VALUES (?, 'a')", (1,)), ("INSERT INTO t VALUES (?, 'b')", (2,))],
                 [table, ("INSERT INTO t VALUES (?, 'z')", (1.0,)), ("INSERT INTO t VALUES (?, 'b')", (3.0,))])
    assert as_tuples(diff) == [
        ("change", ["t", "1", "v"], "a", "z"),
        ("remove", ["t", "2"], {"k": 2, "v": "b"}, None),
        ("add", ["t", "3"], None, {"k": 3.0, "v": "b"}),
    ]


def test_sqlite_case_change_in_nocase_column_is_seen(tmp_path):
    table = "CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT COLLATE NOCASE)"
    diff = sdiff(tmp_path, [table, "INSERT INTO t VALUES (1, 'Bob')"], [table, "INSERT INTO t VALUES (1, 'bob')"])
    assert as_tuples(diff) == [("change", ["t", "1", "name"], "Bob", "bob")]


def test_sqlite_identifiers_with_spaces_and_quotes(tmp_path):
    table = 'CREATE TABLE "my ""odd"" table" ("user id" INTEGER PRIMARY KEY, "e-mail \'x\'" TEXT, "a""b" INT)'
    insert = 'INSERT INTO "my ""odd"" table" VALUES (?, ?, ?)'
    diff = sdiff(tmp_path, [table, (insert, (1, "a@x.com", 1))], [table, (insert, (1, "b@x.com", 1)), (insert, (2, "c", 2))])
    assert as_tuples(diff) == [
        ("change", ['my "odd" table', "1", "e-mail 'x'"], "a@x.com", "b@x.com"),
        ("add", ['my "odd" table', "2"], None, {"user id": 2, "e-mail 'x'": "c", 'a"b': 2}),
    ]
    assert render_text(diff).splitlines()[0] == '~ "my \\"odd\\" table"/1/"e-mail \'x\'": "a@x.com" -> "b@x.com"'


def test_sqlite_values_are_bound_never_executed(tmp_path):
    payload = "'; DROP TABLE users; --"
    evil = ("INSERT INTO users VALUES (?, ?, ?)", (3, payload, 1))
    table = "CREATE TABLE notes (key TEXT PRIMARY KEY, body TEXT)"
    note = ("INSERT INTO notes VALUES (?, ?)", (payload, payload))
    diff = sdiff(tmp_path, [USERS, ANN, table], [USERS, ANN, evil, table, note])
    assert as_tuples(diff) == [
        ("add", ["notes", payload], None, {"key": payload, "body": payload}),
        ("add", ["users", "3"], None, {"id": 3, "email": payload, "age": 1}),
    ]
    assert SqliteSnapshot(tmp_path / "after.db").collections() == ["notes", "users"]
    assert '+ "\'; DROP TABLE users; --"' not in render_text(diff)  # a key with spaces is quoted
    assert "+ notes/\"'; DROP TABLE users; --\": " in render_text(diff)


def test_sqlite_file_against_itself_and_against_an_empty_database(tmp_path):
    path = make_db(tmp_path / "w.db", USERS, ANN)
    (tmp_path / "empty.db").write_bytes(b"")  # what SQLite leaves for a database with no tables
    assert diff_snapshots(SqliteSnapshot(path), SqliteSnapshot(path)).changes == []
    created = diff_snapshots(SqliteSnapshot(tmp_path / "empty.db"), SqliteSnapshot(path))
    assert [(c.op, c.path) for c in created.changes] == [("schema", ["users"]), ("add", ["users", "1"])]


def test_sqlite_null_primary_key_is_an_input_error(tmp_path):
    table = "CREATE TABLE t (code TEXT PRIMARY KEY, v INTEGER)"  # legacy: NULLs allowed in the key
    rows = [table, "INSERT INTO t VALUES (NULL, 1)", "INSERT INTO t VALUES (NULL, 2)"]
    with pytest.raises(InputError, match="NULL primary key") as caught:
        sdiff(tmp_path, rows, rows)
    assert caught.value.path.endswith("before.db")


def test_sqlite_diff_is_deterministic_and_files_untouched(tmp_path):
    before, after = [USERS, ANN, BO], [USERS, BO, ("INSERT INTO users VALUES (5, 'e', 1.5)", ())]
    first = sdiff(tmp_path, before, after)
    files = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    again = diff_paths(tmp_path / "before.db", tmp_path / "after.db")
    assert again.to_json() == first.to_json()
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == files


def test_sqlite_wide_table_stays_within_sqlite_expression_limits(tmp_path):
    columns = ", ".join(f"c{i} INTEGER" for i in range(600))
    table = f"CREATE TABLE wide (id INTEGER PRIMARY KEY, {columns})"
    values = ", ".join(["0"] * 600)
    after = [table, f"INSERT INTO wide VALUES (1, {values})", "UPDATE wide SET c599 = 1"]
    diff = sdiff(tmp_path, [table, f"INSERT INTO wide VALUES (1, {values})"], after)
    assert as_tuples(diff) == [("change", ["wide", "1", "c599"], 0, 1)]


# --- text for the judge --------------------------------------------------------------------------


def many_changes(n: int) -> Diff:
    return jdiff({"items": [{"v": i} for i in range(n)]}, {"items": [{"v": -i - 1} for i in range(n)]})


def test_render_lines_per_op():
    diff = Diff(
        kind="json",
        changes=[
            Change(op="add", path=["orders", 17], after={"id": 17}),
            Change(op="remove", path=["a b"], before="x\ny"),
            Change(op="change", path=["users", 1, "email"], before="a@x.com", after="alice@example.com"),
            Change(op="schema", path=["users"], before=None, after="CREATE TABLE users (id)"),
        ],
    )
    assert render_text(diff).splitlines() == [
        '- "a b": "x\\ny"',
        "+ orders/17: {\"id\":17}",
        '! schema users: null -> "CREATE TABLE users (id)"',
        '~ users/1/email: "a@x.com" -> "alice@example.com"',
    ]
    assert render_text(Diff(kind="json")) == "(no changes)"


def test_render_keeps_untrusted_text_on_one_line():
    nasty = "line\nbreak\r\u2028sep\u2029para\x85nel\x1b[31m"
    diff = jdiff({nasty: nasty, "k": 1}, {nasty: nasty + "!", "k": 2, "/": 0})
    text = render_text(diff)
    assert len(text.splitlines()) == len(diff.changes) == 3


def test_render_cap_states_what_it_cut():
    diff = many_changes(1000)
    full = render_text(diff, max_chars=10**9)
    text = render_text(diff, max_chars=2000)
    assert len(text) <= 2000
    assert render_text(diff, max_chars=2000) == text
    *shown, last = text.split("\n")
    assert shown == full.split("\n")[: len(shown)]
    match = re.fullmatch(r"\[diff cut: showed (\d+) of 1000 changes; (\d+) changes \((\d+) chars\) omitted to fit 2000 chars\]", last)
    assert match, last
    assert int(match[1]) == len(shown) > 0
    assert int(match[2]) == 1000 - len(shown)
    assert int(match[3]) == len(full) - len("\n".join(shown)) - 1


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 400), st.integers(0, 30))
def test_render_never_exceeds_max_chars(max_chars, n):
    text = render_text(many_changes(n), max_chars=max_chars)
    assert len(text) <= max_chars
    assert text == render_text(many_changes(n), max_chars=max_chars)
