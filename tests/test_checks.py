"""The deterministic axes, on real SQLite files and JSON snapshots written in tmp_path.

Task success: pre/postconditions, allowed side effects, latency, required outputs.
Tool correctness: points exactly as pre-registered (1 per expected tool, 1 per argument,
1 for the call count, 1 for no forbidden side effect), score = points / max_points.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from judgekit.axes._paths import path_matches
from judgekit.axes.task_success import score_task_success
from judgekit.axes.tool_correctness import score_tool_correctness
from judgekit.trajectory import WorldState
from judgekit.rubric.model import Rubric, TaskSuccessCriteria, ToolCorrectnessCriteria
from judgekit.run import score_deterministic
from judgekit.trajectory import LoadedTrajectory, Trajectory

GUIDE = "Checks listed below decide the outcome of this axis."

USERS = "CREATE TABLE users (id INTEGER PRIMARY KEY, email TEXT, name TEXT, tier TEXT, balance REAL, active INTEGER)"
BEFORE_ROWS = [(1, "a@x.com", "Ann", "gold", 10.0, 1), (2, "b@x.com", "Bob", "silver", 0.0, 0)]
# After the run: user 1's email changed, user 3 added; user 2 untouched.
AFTER_ROWS = [(1, "new@x.com", "Ann", "gold", 10.0, 1), (2, "b@x.com", "Bob", "silver", 0.0, 0), (3, "c@x.com", "Cy", "gold", 5.5, 1)]


def make_db(path: Path, rows: list[tuple], *extra: str) -> Path:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA synchronous = OFF")  # test files need no fsync
    with conn:
        conn.execute(USERS)
        conn.executemany("INSERT INTO users VALUES (?, ?, ?, ?, ?, ?)", rows)
        for statement in extra:
            conn.execute(statement)
    conn.close()
    return path


def loaded(tmp_path: Path, world: dict | None = None, **fields: Any) -> LoadedTrajectory:
    data = {"id": "t1", "prompt": "Change user 1's email to new@x.com", **fields}
    if world is not None:
        data["world"] = world
    trajectory = Trajectory.model_validate(data)
    path = tmp_path / "runs.jsonl"
    if world is not None:  # snapshot paths are relative to the trajectory file: make it real
        path.write_text(trajectory.model_dump_json() + "\n", encoding="utf-8")
    return LoadedTrajectory(trajectory, path, 1)


@pytest.fixture
def sqlite_world(tmp_path) -> dict:
    make_db(tmp_path / "before.db", BEFORE_ROWS)
    make_db(tmp_path / "after.db", AFTER_ROWS)
    return {"before": {"sqlite": "before.db"}, "after": {"sqlite": "after.db"}}


def task(**criteria: Any) -> TaskSuccessCriteria:
    return TaskSuccessCriteria.model_validate({"guide": GUIDE, **criteria})


def tools(**criteria: Any) -> ToolCorrectnessCriteria:
    return ToolCorrectnessCriteria.model_validate({"guide": GUIDE, **criteria})


# --- predicates on a SQLite world ---------------------------------------------------------------

SQLITE_PREDICATES = [
    pytest.param({"check": "exists", "collection": "users", "where": {"id": 3}}, True, "1 record(s)", id="exists_pass"),
    pytest.param({"check": "exists", "collection": "users", "where": {"id": 9}}, False, "0 record(s)", id="exists_fail"),
    pytest.param({"check": "exists", "collection": "users", "where": {"id": 1, "email": "a@x.com"}}, False, "0 record(s)", id="exists_all_where_fields_must_match"),
    pytest.param({"check": "absent", "collection": "users", "where": {"email": "a@x.com"}}, True, "0 record(s)", id="absent_pass"),
    pytest.param({"check": "absent", "collection": "users", "where": {"id": 2}}, False, "1 record(s)", id="absent_fail"),
    pytest.param({"check": "equals", "collection": "users", "where": {"id": 1}, "field": "email", "value": "new@x.com"}, True, "email equals", id="equals_pass"),
    pytest.param({"check": "equals", "collection": "users", "where": {"id": 1}, "field": "email", "value": "a@x.com"}, False, 'email is "new@x.com", expected "a@x.com"', id="equals_fail_names_both_values"),
    pytest.param({"check": "equals", "collection": "users", "where": {"tier": "gold"}, "field": "active", "value": 1}, True, "2 record(s)", id="equals_every_selected_record"),
    pytest.param({"check": "equals", "collection": "users", "where": {"id": 9}, "field": "email", "value": "x"}, False, "no record in users", id="equals_no_record_fails"),
    pytest.param({"check": "equals", "collection": "users", "where": {"id": 1}, "field": "balance", "value": 10}, True, "balance equals 10", id="equals_int_equals_real"),
    pytest.param({"check": "equals", "collection": "users", "where": {"id": 1}, "field": "active", "value": True}, False, "expected true", id="equals_true_is_not_1"),
    pytest.param({"check": "equals", "collection": "users", "where": {"id": 1}, "field": "phone", "value": "1"}, False, "has no field 'phone'", id="equals_missing_field"),
    pytest.param({"check": "matches", "collection": "users", "field": "email", "pattern": r"[a-z]+@x\.com"}, True, "matches", id="matches_pass_all_records"),
    pytest.param({"check": "matches", "collection": "users", "field": "email", "pattern": "new@.*"}, False, '"b@x.com", which does not match', id="matches_fail_one_record"),
    pytest.param({"check": "matches", "collection": "users", "where": {"id": 1}, "field": "email", "pattern": "new"}, False, "does not match /new/", id="matches_is_a_full_match"),
    pytest.param({"check": "matches", "collection": "users", "where": {"id": 1}, "field": "id", "pattern": "1"}, False, "does not match", id="matches_non_string_fails"),
    pytest.param({"check": "count", "collection": "users", "value": 3}, True, "3 record(s) in users where any record; expected == 3", id="count_equal"),
    pytest.param({"check": "count", "collection": "users", "op": ">=", "value": 4}, False, "expected >= 4", id="count_at_least_fail"),
    pytest.param({"check": "count", "collection": "users", "where": {"tier": "gold"}, "op": "<", "value": 3}, True, "2 record(s)", id="count_less_than_with_where"),
    pytest.param({"check": "count", "collection": "users", "where": {"tier": "bronze"}, "op": "!=", "value": 0}, False, "0 record(s)", id="count_not_equal_fail"),
    pytest.param({"check": "exists", "collection": "users", "where": {"balance": 10}}, True, "1 record(s)", id="where_int_selects_a_real"),
    pytest.param({"check": "absent", "collection": "users", "where": {"active": True}}, True, "0 record(s)", id="where_true_selects_no_1"),
    pytest.param({"check": "count", "collection": "users", "where": {"active": 1.0}, "value": 2}, True, "2 record(s)", id="where_float_selects_an_integer"),
]


@pytest.mark.parametrize(("predicate", "passed", "reason"), SQLITE_PREDICATES)
def test_postcondition_on_sqlite(tmp_path, sqlite_world, predicate, passed, reason):
    item = loaded(tmp_path, sqlite_world)
    result = score_task_success(task(postconditions=[predicate]), item.trajectory, WorldState(item))
    (check,) = result.checks
    assert check.check == f"postcondition[0] {predicate['check']}"
    assert (check.passed, result.passed, result.score) == (passed, passed, 1.0 if passed else 0.0)
    assert reason in check.reason


@pytest.mark.parametrize(
    ("side", "passed"),
    [pytest.param("preconditions", True, id="precondition_reads_before"), pytest.param("postconditions", False, id="postcondition_reads_after")],
)
def test_preconditions_read_the_world_before_and_postconditions_after(tmp_path, sqlite_world, side, passed):
    predicate = {"check": "equals", "collection": "users", "where": {"id": 1}, "field": "email", "value": "a@x.com"}
    item = loaded(tmp_path, sqlite_world)
    result = score_task_success(task(**{side: [predicate]}), item.trajectory, WorldState(item))
    assert result.passed is passed


def test_every_check_must_pass_and_each_is_reported(tmp_path, sqlite_world):
    item = loaded(tmp_path, sqlite_world, output="Done.", latency_s=3.0)
    criteria = task(
        preconditions=[{"check": "count", "collection": "users", "value": 2}],
        postconditions=[
            {"check": "equals", "collection": "users", "where": {"id": 1}, "field": "email", "value": "new@x.com"},
            {"check": "absent", "collection": "users", "where": {"id": 3}},
        ],
        side_effects={"allow": ["**"]},
        max_latency_s=10,
        required_outputs=["done"],
    )
    result = score_task_success(criteria, item.trajectory, WorldState(item))
    assert [(c.check, c.passed) for c in result.checks] == [
        ("precondition[0] count", True),
        ("postcondition[0] equals", True),
        ("postcondition[1] absent", False),
        ("side_effects", True),
        ("latency", True),
        ("output[0]", True),
    ]
    assert result.passed is False and result.score == 0.0 and result.status == "scored"


# --- predicates on JSON snapshots ---------------------------------------------------------------

JSON_BEFORE = {"users": [{"id": 1, "email": "a@x.com"}, {"id": 2, "email": "b@x.com"}], "accounts": {"acc-1": {"owner": 1, "open": True}}}
JSON_AFTER = {"users": [{"id": 1, "email": "new@x.com"}, {"id": 2, "email": "b@x.com"}], "accounts": {"acc-1": {"owner": 1, "open": False}}}

JSON_PREDICATES = [
    pytest.param({"check": "equals", "collection": "/users", "where": {"id": 1}, "field": "email", "value": "new@x.com"}, True, id="equals_in_a_list_of_records"),
    pytest.param({"check": "equals", "collection": "/accounts", "where": {"owner": 1}, "field": "open", "value": False}, True, id="equals_in_an_object_of_records"),
    pytest.param({"check": "equals", "collection": "/accounts", "where": {"owner": 1}, "field": "open", "value": 0}, False, id="false_is_not_0"),
    pytest.param({"check": "absent", "collection": "/users", "where": {"email": "a@x.com"}}, True, id="absent"),
    pytest.param({"check": "count", "collection": "/users", "op": "==", "value": 2}, True, id="count"),
    pytest.param({"check": "matches", "collection": "/users", "field": "email", "pattern": ".+@x\\.com"}, True, id="matches"),
]


@pytest.mark.parametrize("source", ["inline", "file"])
@pytest.mark.parametrize(("predicate", "passed"), JSON_PREDICATES)
def test_postcondition_on_json(tmp_path, source, predicate, passed):
    if source == "inline":
        world = {"before": {"json": JSON_BEFORE}, "after": {"json": JSON_AFTER}}
    else:
        (tmp_path / "b.json").write_text(json.dumps(JSON_BEFORE), encoding="utf-8")
        (tmp_path / "a.json").write_text(json.dumps(JSON_AFTER, indent=2), encoding="utf-8")
        world = {"before": {"json_file": "b.json"}, "after": {"json_file": "a.json"}}
    item = loaded(tmp_path, world)
    result = score_task_success(task(postconditions=[predicate]), item.trajectory, WorldState(item))
    assert result.passed is passed


NESTED = {"r": [{"id": 1, "tags": [True, {"n": 0}]}]}


@pytest.mark.parametrize(
    ("value", "passed"),
    [
        pytest.param([True, {"n": 0}], True, id="same_value"),
        pytest.param([True, {"n": 0.0}], True, id="nested_int_equals_float"),
        # Changed on purpose (both passed): the bool check looked at the top level only, so
        # Python's True == 1 and False == 0 decided one level down. Now json_equal decides.
        pytest.param([1, {"n": 0}], False, id="nested_true_is_not_1"),
        pytest.param([True, {"n": False}], False, id="nested_0_is_not_false"),
    ],
)
def test_equals_compares_nested_values_as_json(tmp_path, value, passed):
    item = loaded(tmp_path, {"before": {"json": NESTED}, "after": {"json": NESTED}})
    predicate = {"check": "equals", "collection": "/r", "where": {"id": 1}, "field": "tags", "value": value}
    result = score_task_success(task(postconditions=[predicate]), item.trajectory, WorldState(item))
    assert result.passed is passed
    where = {"check": "exists", "collection": "/r", "where": {"tags": value}}
    assert score_task_success(task(postconditions=[where]), item.trajectory, WorldState(item)).passed is passed


# --- side effects -------------------------------------------------------------------------------

PATTERNS = [
    pytest.param("users/1/email", ["users", "1", "email"], True, id="exact_path"),
    pytest.param("users/1/email", ["users", "1", "name"], False, id="exact_path_other_column"),
    pytest.param("users/*/email", ["users", "7", "email"], True, id="star_is_one_segment"),
    pytest.param("users/*", ["users", "1", "email"], False, id="star_is_not_two_segments"),
    pytest.param("users/*", ["users", "3"], True, id="star_matches_an_added_row"),
    pytest.param("users/**", ["users", "1", "email"], True, id="double_star_is_the_rest"),
    pytest.param("users/**", ["users"], True, id="double_star_may_be_empty"),
    pytest.param("**", ["orders", "9", "qty"], True, id="double_star_alone_matches_all"),
    pytest.param("**/email", ["users", "1", "email"], True, id="double_star_then_segment"),
    pytest.param("**/email", ["users", "1", "name"], False, id="double_star_then_wrong_segment"),
    pytest.param("users/1", ["users", 1], True, id="int_segment_of_a_json_list"),
    pytest.param("/users/1/", ["users", "1"], True, id="outer_slashes_ignored"),
    pytest.param("users", ["users", "1"], False, id="prefix_is_not_a_match"),
]


@pytest.mark.parametrize(("pattern", "path", "matches"), PATTERNS)
def test_diff_path_patterns(pattern, path, matches):
    assert path_matches(pattern, path) is matches


SIDE_EFFECTS = [
    pytest.param(["users/1/email", "users/3"], True, "", id="each_change_named"),
    pytest.param(["users/*/email", "users/*"], True, "", id="star_patterns"),
    pytest.param(["users/**"], True, "", id="double_star_covers_table"),
    pytest.param(["users/1/email"], False, "1 change(s) not allowed: add users/3", id="added_row_not_allowed"),
    pytest.param(["users/*"], False, "change users/1/email", id="star_does_not_cover_a_column_change"),
    pytest.param(["users/2/email", "orders/**"], False, "2 change(s) not allowed", id="wrong_row_and_table"),
    pytest.param([], False, "2 change(s) not allowed", id="nothing_allowed"),
]


@pytest.mark.parametrize(("allow", "passed", "reason"), SIDE_EFFECTS)
def test_side_effects_allow_on_sqlite_diff(tmp_path, sqlite_world, allow, passed, reason):
    item = loaded(tmp_path, sqlite_world)
    result = score_task_success(task(side_effects={"allow": allow}), item.trajectory, WorldState(item))
    (check,) = result.checks
    assert check.check == "side_effects" and check.passed is passed
    assert reason in check.reason


def test_no_change_passes_an_empty_allow_list(tmp_path):
    make_db(tmp_path / "before.db", BEFORE_ROWS)
    make_db(tmp_path / "after.db", BEFORE_ROWS)
    item = loaded(tmp_path, {"before": {"sqlite": "before.db"}, "after": {"sqlite": "after.db"}})
    result = score_task_success(task(side_effects={"allow": []}), item.trajectory, WorldState(item))
    assert result.passed and result.checks[0].reason == "all 0 change(s) in the diff are allowed"


def test_side_effects_on_a_keyed_json_diff(tmp_path):
    world = {
        "before": {"json": {"users": [{"id": "u1", "email": "a"}, {"id": "u2", "email": "b"}]}},
        "after": {"json": {"users": [{"id": "u2", "email": "b"}, {"id": "u1", "email": "z"}]}},
        "keys": {"/users": "id"},
    }
    item = loaded(tmp_path, world)
    ok = score_task_success(task(side_effects={"allow": ["users/u1/email"]}), item.trajectory, WorldState(item))
    assert ok.passed  # reordering the list is no change once records are matched by id


def test_allow_names_a_composite_key_row(tmp_path):
    orders = "CREATE TABLE orders (user_id INTEGER, item TEXT, qty INTEGER, PRIMARY KEY (user_id, item))"
    make_db(tmp_path / "before.db", BEFORE_ROWS, orders, "INSERT INTO orders VALUES (1, 'pen', 1)")
    make_db(tmp_path / "after.db", BEFORE_ROWS, orders, "INSERT INTO orders VALUES (1, 'pen', 2)")
    item = loaded(tmp_path, {"before": {"sqlite": "before.db"}, "after": {"sqlite": "after.db"}})
    world = WorldState(item)
    assert [c.path for c in world.diff.changes] == [["orders", '[1,"pen"]', "qty"]]
    result = score_task_success(task(side_effects={"allow": ['orders/[1,"pen"]/qty']}), item.trajectory, world)
    assert result.passed


# --- latency and required outputs ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("latency", "limit", "passed", "reason"),
    [
        pytest.param(1.5, 2, True, "took 1.5 s; limit 2 s", id="under"),
        pytest.param(2.0, 2, True, "took 2 s; limit 2 s", id="at_the_limit"),
        pytest.param(2.01, 2, False, "took 2.01 s; limit 2 s", id="over"),
        pytest.param(None, 2, False, "the trajectory records no latency_s", id="missing_latency_fails"),
    ],
)
def test_latency(tmp_path, latency, limit, passed, reason):
    item = loaded(tmp_path, latency_s=latency)
    result = score_task_success(task(max_latency_s=limit), item.trajectory, WorldState(item))
    assert (result.checks[0].check, result.checks[0].passed, result.passed) == ("latency", passed, passed)
    assert result.checks[0].reason == reason


@pytest.mark.parametrize(
    ("output", "required", "passed"),
    [
        pytest.param("The total is $1,786.", "1786", True, id="thousands_separator_in_answer"),
        pytest.param("The total is $1786.", "1,786", True, id="thousands_separator_in_rubric"),
        pytest.param("It is 1,234,567 miles", "1234567", True, id="several_separators"),
        pytest.param("Status: CONFIRMED", "confirmed", True, id="case_insensitive"),
        pytest.param("Flying to New\n  York", "new york", True, id="whitespace_collapsed"),
        pytest.param("The total is $1,787.", "1786", False, id="other_number"),
        pytest.param("1, 786", "1786", False, id="comma_and_space_is_not_a_separator"),
        pytest.param("", "1786", False, id="empty_answer"),
    ],
)
def test_required_outputs(tmp_path, output, required, passed):
    item = loaded(tmp_path, output=output)
    result = score_task_success(task(required_outputs=[required]), item.trajectory, WorldState(item))
    assert result.passed is passed
    assert result.checks[0].check == "output[0]"
    assert repr(required) in result.checks[0].reason


# --- bad worlds: the axis is 'error' with the file named, never pass/fail, never a crash ----------


def _rubric(**axes: Any) -> Rubric:
    return Rubric.model_validate({"id": "r", "version": "1.0.0", "registered": "2024-05-01", **axes})


def _with_after(tmp_path: Path, name: str, content: bytes | None) -> dict:
    make_db(tmp_path / "before.db", BEFORE_ROWS)
    if content is not None:
        (tmp_path / name).write_bytes(content)
    return {"before": {"sqlite": "before.db"}, "after": {"sqlite": name}}


BAD_WORLDS = [
    pytest.param(lambda tmp: _with_after(tmp, "gone.db", None), "gone.db: file not found", id="missing_snapshot"),
    pytest.param(lambda tmp: _with_after(tmp, "notes.txt", b"plain text, not a database\n"), "notes.txt: not a SQLite database", id="text_file_as_sqlite"),
    pytest.param(lambda tmp: _with_after(tmp, "corrupt.db", b"SQLite format 3\x00" + b"\x07" * 300), "corrupt.db: cannot", id="corrupt_sqlite"),
    pytest.param(lambda tmp: {"before": {"json": {}}, "after": {"json_file": "missing.json"}}, "missing.json: file not found", id="missing_json_file"),
    pytest.param(lambda tmp: None, "the rubric checks the world but the trajectory has no `world` snapshots", id="no_world_at_all"),
]


@pytest.mark.parametrize(("build", "named"), BAD_WORLDS)
def test_bad_world_makes_that_axis_an_error(tmp_path, build, named):
    rubric = _rubric(
        task_success={"guide": GUIDE, "postconditions": [{"check": "exists", "collection": "users", "where": {"id": 1}}]},
        tool_correctness={"guide": GUIDE, "expected_calls": [{"tool": "update_user"}]},
    )
    item = loaded(tmp_path, build(tmp_path), calls=[{"tool": "update_user"}])
    result = score_deterministic(rubric, item)
    ts = result.axes["task_success"]
    assert (ts.status, ts.passed, ts.score) == ("error", None, None)
    assert named in ts.error
    # The axes are independent: tool correctness needs no world here and is still scored.
    tc = result.axes["tool_correctness"]
    assert (tc.status, tc.score) == ("scored", 1.0)


def test_postcondition_on_a_missing_table_is_an_error_listing_the_tables(tmp_path, sqlite_world):
    rubric = _rubric(task_success={"guide": GUIDE, "postconditions": [{"check": "absent", "collection": "accounts"}]})
    result = score_deterministic(rubric, loaded(tmp_path, sqlite_world))
    assert result.axes["task_success"].status == "error"
    assert "no table 'accounts' in this database (tables: 'users')" in result.axes["task_success"].error


# --- tool correctness: points exactly as pre-registered -----------------------------------------

EMAIL = "^[^@]+@[^@]+$"
CRITERIA = {
    "expected_calls": [
        {"tool": "update_user", "args": {"user_id": {"const": 1}, "email": {"type": "string", "pattern": EMAIL}}},
        {"tool": "send_email", "args": {"to": {"type": "string"}}},
    ],
    "forbidden": {"tools": ["delete_user"]},
}
UPDATE = {"tool": "update_user", "args": {"user_id": 1, "email": "new@x.com"}}
SEND = {"tool": "send_email", "args": {"to": "new@x.com"}}


def call(base: dict, **changes: Any) -> dict:
    return {**base, **changes}


TOOL_CASES = [
    pytest.param([UPDATE, SEND], 7, set(), id="exactly_as_expected"),
    pytest.param([SEND, UPDATE], 7, set(), id="any_order_when_unordered"),
    pytest.param([call(UPDATE, tool="update_profile"), SEND], 4, {"call[0] update_user: tool", "call[0] update_user: arg user_id", "call[0] update_user: arg email"}, id="wrong_tool"),
    pytest.param([UPDATE, SEND, {"tool": "get_user", "args": {"id": 1}}], 6, {"call count"}, id="extra_call"),
    pytest.param([UPDATE, UPDATE, SEND], 6, {"call count"}, id="repeated_call"),
    pytest.param([call(UPDATE, args={"user_id": 1}), SEND], 6, {"call[0] update_user: arg email"}, id="missing_arg"),
    pytest.param([call(UPDATE, args={"user_id": 1, "email": "not-an-email"}), SEND], 6, {"call[0] update_user: arg email"}, id="off_schema_arg"),
    pytest.param([call(UPDATE, args={"user_id": "1", "email": "new@x.com"}), SEND], 6, {"call[0] update_user: arg user_id"}, id="string_for_const_int"),
    pytest.param([SEND], 3, {"call[0] update_user: tool", "call[0] update_user: arg user_id", "call[0] update_user: arg email", "call count"}, id="missing_call"),
    pytest.param([], 1, {"call[0] update_user: tool", "call[0] update_user: arg user_id", "call[0] update_user: arg email", "call count", "call[1] send_email: tool", "call[1] send_email: arg to"}, id="no_call"),
    pytest.param([call(UPDATE, error="503 Service Unavailable"), SEND], 3, {"call[0] update_user: tool", "call[0] update_user: arg user_id", "call[0] update_user: arg email", "call count"}, id="failed_call_earns_nothing"),
    pytest.param([call(UPDATE, error="timeout"), UPDATE, SEND], 7, set(), id="failed_call_then_retry_is_not_an_extra_call"),
    pytest.param([UPDATE, SEND, {"tool": "delete_user", "args": {"user_id": 2}}], 5, {"call count", "no forbidden side effect"}, id="forbidden_tool"),
    pytest.param([UPDATE, SEND, {"tool": "delete_user", "error": "denied"}], 7, set(), id="failed_forbidden_call_changed_nothing"),
]


@pytest.mark.parametrize(("calls", "points", "lost"), TOOL_CASES)
def test_tool_points(tmp_path, calls, points, lost):
    item = loaded(tmp_path, calls=calls)
    result = score_tool_correctness(tools(**CRITERIA), item.trajectory, WorldState(item))
    assert result.max_points == 7  # 2 tools + 3 arguments + call count + no forbidden effect
    assert result.points == points
    assert result.score == pytest.approx(points / 7)
    assert {p.point for p in result.lost} == lost
    assert len(result.items) == 7 and sum(p.earned for p in result.items) == points


def test_raw_counts(tmp_path):
    calls = [call(UPDATE, error="boom"), call(UPDATE, args={"user_id": 1, "email": "bad"}), {"tool": "get_user"}, {"tool": "delete_user"}]
    item = loaded(tmp_path, calls=calls)
    result = score_tool_correctness(tools(**CRITERIA), item.trajectory, WorldState(item))
    assert result.model_dump()["counts"] == {
        "calls_total": 4,
        "calls_failed": 1,
        "calls_in_scope": 3,
        "calls_expected": 2,
        "calls_matched": 1,
        "args_expected": 3,
        "args_valid": 1,
        "forbidden_hits": 1,
    }
    assert result.points == 2  # update_user tool + user_id; count and forbidden lost
    by_point = {p.point: p for p in result.items}
    assert by_point["call[0] update_user: tool"].reason == "matched by call #1"
    assert by_point["call[1] send_email: tool"].reason == "no successful call to send_email (called: delete_user, get_user, update_user)"
    assert by_point["call count"].reason == "3 successful in-scope call(s), 2 expected"
    assert by_point["no forbidden side effect"].reason == "call #3 to forbidden tool delete_user"


def test_off_schema_reason_carries_the_jsonschema_message(tmp_path):
    item = loaded(tmp_path, calls=[call(UPDATE, args={"user_id": 2, "email": "not-an-email"}), SEND])
    result = score_tool_correctness(tools(**CRITERIA), item.trajectory, WorldState(item))
    reasons = {p.point: p.reason for p in result.lost}
    assert reasons == {
        "call[0] update_user: arg user_id": "call #0: off-schema: 1 was expected",
        "call[0] update_user: arg email": f"call #0: off-schema: 'not-an-email' does not match '{EMAIL}'",
    }


def test_missing_arg_reason(tmp_path):
    item = loaded(tmp_path, calls=[call(UPDATE, args={"email": "a@b"}), SEND])
    result = score_tool_correctness(tools(**CRITERIA), item.trajectory, WorldState(item))
    assert [(p.point, p.reason) for p in result.lost] == [("call[0] update_user: arg user_id", "call #0: argument missing")]


def test_out_of_scope_tools_are_ignored(tmp_path):
    calls = [{"tool": "get_user", "args": {"id": 1}}, UPDATE, {"tool": "search", "args": {}}, SEND, {"tool": "get_user"}]
    item = loaded(tmp_path, calls=calls)
    result = score_tool_correctness(tools(**CRITERIA, in_scope=["update_user", "send_email"]), item.trajectory, WorldState(item))
    assert (result.points, result.max_points) == (7, 7)
    assert (result.counts.calls_total, result.counts.calls_in_scope) == (5, 2)


def test_forbidden_tool_counts_even_out_of_scope(tmp_path):
    item = loaded(tmp_path, calls=[UPDATE, SEND, {"tool": "delete_user"}])
    result = score_tool_correctness(tools(**CRITERIA, in_scope=["update_user", "send_email"]), item.trajectory, WorldState(item))
    assert {p.point for p in result.lost} == {"no forbidden side effect"}


# Two expected calls to one tool; which actual call serves which decides the points.
TWO_UPDATES = {
    "expected_calls": [
        {"tool": "update_user", "args": {"user_id": {"const": 1}, "email": {"const": "a@x.com"}}},
        {"tool": "update_user", "args": {"user_id": {"const": 2}, "email": {"const": "b@x.com"}}},
    ]
}
PARTIAL_THEN_FULL = {
    # A greedy first-come matching gives 6/7 here; the optimal assignment gives 7/7.
    "expected_calls": [
        {"tool": "update_user", "args": {"user_id": {"const": 1}}},
        {"tool": "update_user", "args": {"user_id": {"const": 1}, "email": {"const": "a@x.com"}}},
    ]
}
U1 = {"tool": "update_user", "args": {"user_id": 1, "email": "a@x.com"}}
U2 = {"tool": "update_user", "args": {"user_id": 2, "email": "b@x.com"}}

MATCHING = [
    pytest.param(TWO_UPDATES, [U1, U2], False, 8, id="same_tool_in_order_unordered"),
    pytest.param(TWO_UPDATES, [U2, U1], False, 8, id="same_tool_swapped_unordered_finds_best_pairs"),
    pytest.param(TWO_UPDATES, [U1, U2], True, 8, id="same_tool_in_order_ordered"),
    pytest.param(TWO_UPDATES, [U2, U1], True, 5, id="same_tool_swapped_ordered_loses_a_call"),
    pytest.param(PARTIAL_THEN_FULL, [U1, {"tool": "update_user", "args": {"user_id": 1}}], False, 7, id="optimal_not_greedy_unordered"),
    pytest.param(PARTIAL_THEN_FULL, [U1, {"tool": "update_user", "args": {"user_id": 1}}], True, 6, id="ordered_keeps_the_order"),
    pytest.param(CRITERIA, [UPDATE, SEND], True, 7, id="different_tools_in_order"),
    pytest.param(CRITERIA, [SEND, UPDATE], True, 5, id="different_tools_out_of_order"),
]


@pytest.mark.parametrize(("criteria", "calls", "ordered", "points"), MATCHING)
def test_ordered_and_unordered_matching(tmp_path, criteria, calls, ordered, points):
    item = loaded(tmp_path, calls=calls)
    result = score_tool_correctness(tools(**criteria, ordered=ordered), item.trajectory, WorldState(item))
    assert result.points == points
    for lost in result.lost:
        if lost.point.endswith(": tool"):
            assert lost.reason.endswith(" or out of order") is ordered


def test_forbidden_effect_in_the_diff(tmp_path, sqlite_world):
    item = loaded(tmp_path, sqlite_world, calls=[UPDATE, SEND])
    ok = score_tool_correctness(tools(**{**CRITERIA, "forbidden": {"effects": ["users/*/tier"]}}), item.trajectory, WorldState(item))
    assert ok.points == ok.max_points == 7
    hit = score_tool_correctness(tools(**{**CRITERIA, "forbidden": {"effects": ["users/*/email", "users/*"]}}), item.trajectory, WorldState(item))
    assert hit.points == 6 and hit.counts.forbidden_hits == 2
    reason = {p.point: p.reason for p in hit.lost}["no forbidden side effect"]
    assert "forbidden effect change users/1/email (matches 'users/*/email')" in reason
    assert "forbidden effect add users/3 (matches 'users/*')" in reason


def test_forbidden_effect_without_a_world_is_an_error_not_a_pass(tmp_path):
    rubric = _rubric(tool_correctness={"guide": GUIDE, **CRITERIA, "forbidden": {"effects": ["users/**"]}})
    result = score_deterministic(rubric, loaded(tmp_path, calls=[UPDATE, SEND]))
    tc = result.axes["tool_correctness"]
    assert (tc.status, tc.score) == ("error", None) and "no `world` snapshots" in tc.error


# --- properties ---------------------------------------------------------------------------------

TOOL_NAMES = ["book", "cancel", "update", "send"]
# (schema, strategy of values that satisfy it)
SCHEMAS = [
    ({"const": 7}, st.just(7)),
    ({"type": "integer", "minimum": 0}, st.integers(0, 100)),
    ({"type": "string", "minLength": 1}, st.text("abc", min_size=1, max_size=5)),
    ({"enum": ["a", "b", 3]}, st.sampled_from(["a", "b", 3])),
    (True, st.one_of(st.none(), st.integers(), st.text(max_size=3))),
]
_any_value = st.one_of(st.none(), st.booleans(), st.integers(-5, 100), st.text("abc", max_size=4))


@st.composite
def expected_and_valid_calls(draw):
    """Expected calls and one valid actual call for each, in the same order."""
    expected, actual = [], []
    for _ in range(draw(st.integers(0, 4))):
        tool = draw(st.sampled_from(TOOL_NAMES))
        names = draw(st.lists(st.sampled_from(["a", "b", "c"]), unique=True, max_size=3))
        picks = [draw(st.sampled_from(range(len(SCHEMAS)))) for _ in names]
        expected.append({"tool": tool, "args": {n: SCHEMAS[p][0] for n, p in zip(names, picks)}})
        args = {n: draw(SCHEMAS[p][1]) for n, p in zip(names, picks)}
        args.update(draw(st.dictionaries(st.sampled_from(["x", "y"]), _any_value, max_size=1)))  # extra args are fine
        actual.append({"tool": tool, "args": args})
    return expected, actual


_random_calls = st.lists(
    st.builds(
        dict,
        tool=st.sampled_from([*TOOL_NAMES, "lookup"]),
        args=st.dictionaries(st.sampled_from(["a", "b", "c"]), _any_value, max_size=3),
        error=st.one_of(st.none(), st.just("failed")),
    ),
    max_size=6,
)

_PROPERTY_SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@_PROPERTY_SETTINGS
@given(
    pair=expected_and_valid_calls(),
    calls=_random_calls,
    ordered=st.booleans(),
    in_scope=st.one_of(st.none(), st.lists(st.sampled_from(TOOL_NAMES), unique=True)),
    forbidden=st.lists(st.sampled_from([*TOOL_NAMES, "lookup"]), unique=True, max_size=2),
)
def test_property_score_is_bounded_and_max_points_as_registered(tmp_path, pair, calls, ordered, in_scope, forbidden):
    expected, _ = pair
    criteria = tools(expected_calls=expected, ordered=ordered, in_scope=in_scope, forbidden={"tools": forbidden})
    item = loaded(tmp_path, calls=calls)
    result = score_tool_correctness(criteria, item.trajectory, WorldState(item))
    assert 0.0 <= result.score <= 1.0
    assert 0 <= result.points <= result.max_points
    assert result.max_points == len(expected) + sum(len(e["args"]) for e in expected) + 2
    assert result.score == result.points / result.max_points
    assert result.counts.calls_matched <= min(len(expected), result.counts.calls_in_scope)


@_PROPERTY_SETTINGS
@given(pair=expected_and_valid_calls(), ordered=st.booleans(), data=st.data())
def test_property_exactly_the_expected_calls_score_one(tmp_path, pair, ordered, data):
    expected, actual = pair
    if not ordered:
        actual = data.draw(st.permutations(actual))
    criteria = tools(expected_calls=expected, ordered=ordered, forbidden={"tools": ["delete_everything"]})
    item = loaded(tmp_path, calls=actual)
    result = score_tool_correctness(criteria, item.trajectory, WorldState(item))
    assert result.score == 1.0, [p for p in result.lost]
    assert result.counts.calls_matched == len(expected)


@_PROPERTY_SETTINGS
@given(pair=expected_and_valid_calls(), calls=_random_calls, data=st.data())
def test_property_unordered_ignores_call_order_and_ordered_never_scores_higher(tmp_path, pair, calls, data):
    expected, valid = pair
    actual = data.draw(st.permutations([*valid, *calls]))
    shuffled = data.draw(st.permutations(actual))

    def points(calls_: list[dict], ordered: bool) -> int:
        item = loaded(tmp_path, calls=calls_)
        return score_tool_correctness(tools(expected_calls=expected, ordered=ordered), item.trajectory, WorldState(item)).points

    unordered = points(actual, ordered=False)
    assert points(shuffled, ordered=False) == unordered  # the optimal assignment does not see order
    assert points(actual, ordered=True) <= unordered  # an in-order matching is one of all matchings


# --- one rendering of diff paths ----------------------------------------------------------------


def test_check_reasons_render_diff_paths_as_the_judge_sees_them():
    from judgekit.world.diff import Change, render_change, render_path

    # An ordinary path reads as it always did (and as side-effect patterns are written).
    assert render_path(["users", 2, "email"]) == "users/2/email"
    # A segment holding a slash is quoted, so it cannot pass for two segments; before, check
    # reasons printed it raw (users/a/b) while the judge's diff quoted it.
    assert render_path(["users", "a/b"]) == 'users/"a/b"'
    change = Change(op="remove", path=["users", "a/b"], before=1)
    assert render_change(change).startswith('- users/"a/b":')
