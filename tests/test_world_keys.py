"""JSON worlds by default: list keys declared once (suite, rubric; a trajectory overrides),
a hint when a side effect sits on a list index, pointers checked when the rubric loads, and
`run --dry-run` exiting 2 with the first error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from judgekit.cli import main as cli_main
from judgekit.errors import InputError
from judgekit.rubric.model import load_rubric
from judgekit.run.plan import iter_deterministic, iter_trajectories_of
from judgekit.suite import load_suite
from judgekit.trajectory import WorldState

BEFORE = {"orders": [{"id": "o-1", "sku": "a", "status": "new"}, {"id": "o-2", "sku": "b", "status": "new"}]}
# o-2 shipped, and the list came back in another order: a correct run, by position two records changed.
AFTER = {"orders": [{"id": "o-2", "sku": "b", "status": "shipped"}, {"id": "o-1", "sku": "a", "status": "new"}]}
RUBRIC = {
    "id": "ship-order", "version": "1.0.0", "registered": "2026-12-01",
    "task_success": {
        "guide": "Order o-2 is shipped; nothing else changed.",
        "postconditions": [{"check": "equals", "collection": "/orders", "where": {"id": "o-2"}, "field": "status",
                            "value": "shipped"}],
        "side_effects": {"allow": ["orders/*/status"]},
    },
}


def write_suite(root: Path, *, suite_keys=None, rubric_keys=None, trajectory_keys=None, rubric=None) -> Path:
    rubric = dict(rubric or RUBRIC)
    if rubric_keys is not None:
        rubric["world"] = {"keys": rubric_keys}
    (root / "rubric.yaml").write_text(yaml.safe_dump(rubric, sort_keys=False))
    world = {"before": {"json": BEFORE}, "after": {"json": AFTER}}
    if trajectory_keys is not None:
        world["keys"] = trajectory_keys
    (root / "t.jsonl").write_text(json.dumps({"id": "t1", "prompt": "ship o-2", "output": "done", "world": world}) + "\n")
    suite = {"name": "orders", "rubrics": ["rubric.yaml"], "trajectories": [{"file": "t.jsonl", "rubric": "ship-order"}]}
    if suite_keys is not None:
        suite["world"] = {"keys": suite_keys}
    (root / "suite.yaml").write_text(yaml.safe_dump(suite, sort_keys=False))
    return root / "suite.yaml"


def task_success(suite: Path):
    [result] = iter_deterministic(load_suite(suite))
    return result.axes["task_success"]


def test_by_position_a_reordered_list_fails_and_the_reason_says_how_to_key_it(tmp_path):
    axis = task_success(write_suite(tmp_path))
    assert axis.passed is False
    [reason] = [c.reason for c in axis.checks if c.check == "side_effects"]
    assert reason.startswith("4 change(s) not allowed: change orders/0/id, change orders/0/sku")
    assert "orders/0: the list '/orders' is diffed by position" in reason
    assert "declare world.keys: {'/orders': FIELD} (e.g. id) in the rubric or the suite" in reason


@pytest.mark.parametrize("where", [
    pytest.param({"suite_keys": {"/orders": "id"}}, id="declared_by_the_suite"),
    pytest.param({"rubric_keys": {"/orders": "id"}}, id="declared_by_the_rubric"),
    pytest.param({"trajectory_keys": {"/orders": "id"}}, id="declared_by_the_trajectory"),
])
def test_keys_declared_once_match_records_by_key(tmp_path, where):
    axis = task_success(write_suite(tmp_path, **where))
    assert axis.passed is True, axis.checks


@pytest.mark.parametrize(("where", "field"), [
    pytest.param({"suite_keys": {"/orders": "sku"}}, "sku", id="suite_alone"),
    pytest.param({"suite_keys": {"/orders": "sku"}, "rubric_keys": {"/orders": "id"}}, "id", id="rubric_over_suite"),
    pytest.param({"suite_keys": {"/orders": "sku"}, "rubric_keys": {"/orders": "sku"},
                  "trajectory_keys": {"/orders": "id"}}, "id", id="trajectory_over_both"),
])
def test_the_most_specific_declaration_wins(tmp_path, where, field):
    loaded = load_suite(write_suite(tmp_path, **where))
    [(_, item)] = list(iter_trajectories_of(loaded))
    assert item.list_keys == {"/orders": field}
    [change] = WorldState(item).diff.changes  # keyed by the winning field's value
    assert change.path == ["orders", "o-2" if field == "id" else "b", "status"]


def rubric_error(tmp_path: Path, rubric: dict) -> InputError:
    path = tmp_path / "rubric.yaml"
    path.write_text(yaml.safe_dump(rubric, sort_keys=False))
    with pytest.raises(InputError) as caught:
        load_rubric(path)
    return caught.value


def line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def with_collection(collection: str, **world) -> dict:
    rubric = json.loads(json.dumps(RUBRIC))
    rubric["task_success"]["postconditions"][0]["collection"] = collection
    return rubric | ({"world": world} if world else {})


@pytest.mark.parametrize(("rubric", "at", "message"), [
    pytest.param(with_collection("orders", keys={"/orders": "id"}), "collection: orders",
                 "task_success.postconditions.0.collection: 'orders' is not a JSON pointer: it must be empty (the whole "
                 "document) or start with '/' (write '/orders')", id="a_bare_name_in_a_rubric_with_keys"),
    pytest.param(with_collection("orders", kind="json"), "collection: orders",
                 "'orders' is not a JSON pointer", id="a_bare_name_in_a_json_rubric"),
    pytest.param(with_collection("/orders", keys={"orders": "id"}), "orders: id",
                 "world.keys.orders.[key]: 'orders' is not a JSON pointer", id="a_key_without_a_slash"),
    pytest.param(with_collection("/or~2ders"), "collection: /or~2ders",
                 "'/or~2ders' is not a JSON pointer: '~' must be written '~0'", id="a_bad_escape"),
    pytest.param(with_collection("/orders", kind="sqlite"), "collection: /orders",
                 "'/orders' is a JSON pointer but world.kind is sqlite: name the table", id="a_pointer_in_a_sqlite_rubric"),
    pytest.param(with_collection("/orders", kind="sqlite", keys={"/orders": "id"}), "world:",
                 "keys apply to JSON worlds only", id="keys_in_a_sqlite_rubric"),
])
def test_collections_and_keys_are_checked_when_the_rubric_loads(tmp_path, rubric, at, message):
    error = rubric_error(tmp_path, rubric)
    assert message in str(error)
    assert error.line == line_of(tmp_path / "rubric.yaml", at), (str(error), error.line)


def test_a_bare_name_without_a_json_sign_may_be_a_table(tmp_path):
    path = tmp_path / "rubric.yaml"
    path.write_text(yaml.safe_dump(with_collection("orders"), sort_keys=False))
    rubric = load_rubric(path)
    assert rubric.world is None and "world" not in rubric.canonical()  # the hash of such rubrics is as before


def test_dry_run_exits_2_with_the_first_error(tmp_path):
    suite = write_suite(tmp_path, rubric=with_collection("/order"))
    result = CliRunner().invoke(cli_main, ["run", str(suite), "--dry-run"])
    assert result.exit_code == 2, result.output
    assert "task_success: deterministic, 1 error (no cost)" in result.stdout
    first = "t.jsonl:1 t1 task_success: <inline JSON>: JSON pointer '/order': nothing at '/order' (keys there: 'orders')"
    assert f"first error: {first}" in result.stdout
    assert result.stderr.strip() == f"judgekit: error: {first}"
    clean = CliRunner().invoke(cli_main, ["run", str(write_suite(tmp_path)), "--dry-run"])
    assert clean.exit_code == 0 and "first error" not in clean.output
