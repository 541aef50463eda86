"""Trajectory JSON Lines: streamed, and every bad line is one clear error naming file and line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from judgekit.errors import InputError, JudgekitError
from judgekit.trajectory import Trajectory, iter_trajectories

GOOD = {"id": "ok-1", "prompt": "Change my email", "calls": [{"tool": "get_user", "args": {"id": 1}}]}


def write_lines(path: Path, *lines: str) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def line(**fields) -> str:
    return json.dumps(fields)


# Each bad line sits on line 3, after a good line and a blank one, so the number must be counted
# through blank lines and must not be "the first record" or "the second non-blank line".
BAD_LINES = [
    pytest.param('{"id": "t", "prompt": "x", "calls": [', "invalid JSON", id="truncated_json_line"),
    pytest.param("{'id': 't'}", "invalid JSON", id="python_dict_not_json"),
    pytest.param(line(id="t", prompt="x", calls="get_user"), "calls: Input should be a valid list", id="calls_not_a_list"),
    pytest.param(line(id="t", prompt="x", latency_s="fast"), "latency_s", id="latency_not_a_number"),
    pytest.param(line(id="t", prompt="x", latency_s=-1), "latency_s: Input should be greater than or equal to 0", id="negative_latency"),
    pytest.param(line(id="t", prompt=["x"]), "prompt: Input should be a valid string", id="prompt_not_a_string"),
    pytest.param(line(id="t", prompt="x", calls=[{"tool": "a", "args": [1, 2]}]), "calls.0.args: Input should be a valid dictionary", id="args_not_an_object"),
    pytest.param(line(id="t", prompt="x", colour="red"), "colour: unknown key", id="unknown_top_level_key"),
    pytest.param(line(id="t", prompt="x", calls=[{"tool": "a", "argz": {}}]), "calls.0.argz: unknown key", id="unknown_key_in_a_call"),
    pytest.param(line(prompt="x"), "id: Field required", id="missing_id"),
    pytest.param(line(id="", prompt="x"), "id: String should have at least 1 character", id="empty_id"),
    pytest.param(line(id="t", prompt="x", format_version=2), "format_version", id="unknown_format_version"),
    pytest.param("[1, 2]", "(top level)", id="line_is_a_list_not_an_object"),
    pytest.param(
        line(id="t", prompt="x", world={"before": {"json": {}, "sqlite": "a.db"}, "after": {"json": {}}}),
        "give exactly one of json, json_file, sqlite (got json and sqlite)",
        id="world_side_with_two_sources",
    ),
    pytest.param(
        line(id="t", prompt="x", world={"before": {"sqlite": None}, "after": {"json": {}}}),
        "sqlite: expected a path, got null",
        id="world_sqlite_path_null",
    ),
]


@pytest.mark.parametrize(("bad", "expected"), BAD_LINES)
def test_bad_line_is_one_error_naming_file_and_line(tmp_path, bad, expected):
    path = write_lines(tmp_path / "runs.jsonl", json.dumps(GOOD), "", bad, json.dumps({**GOOD, "id": "ok-2"}))
    with pytest.raises(InputError) as info:
        list(iter_trajectories(path))
    err = info.value
    assert (err.path, err.line) == (str(path), 3)
    message = str(err)
    assert message.startswith(f"{path}:3: ")
    assert expected in message
    assert "\n" not in message  # one line, never a pydantic dump
    assert isinstance(err, JudgekitError)


def test_records_before_a_bad_line_are_streamed_first(tmp_path):
    path = write_lines(tmp_path / "runs.jsonl", json.dumps(GOOD), "{broken")
    stream = iter_trajectories(path)
    first = next(stream)
    assert first.trajectory.id == "ok-1" and first.line == 1
    with pytest.raises(InputError, match=r"runs\.jsonl:2: invalid JSON"):
        next(stream)


def test_blank_and_whitespace_lines_are_skipped_and_line_numbers_kept(tmp_path):
    path = write_lines(
        tmp_path / "runs.jsonl", "", json.dumps(GOOD), "   ", "\t", json.dumps({**GOOD, "id": "ok-2"}), ""
    )
    loaded = list(iter_trajectories(path))
    assert [(item.trajectory.id, item.line) for item in loaded] == [("ok-1", 2), ("ok-2", 5)]
    assert loaded[1].where == f"{path}:5"
    assert loaded[1].base_dir == tmp_path


def test_empty_file_has_no_trajectories(tmp_path):
    path = tmp_path / "empty.jsonl"
    path.write_text("", encoding="utf-8")
    assert list(iter_trajectories(path)) == []


def test_missing_file_is_an_error_naming_it(tmp_path):
    path = tmp_path / "nowhere.jsonl"
    with pytest.raises(InputError) as info:
        list(iter_trajectories(path))
    assert str(info.value) == f"{path}: file not found"


def test_defaults_of_a_minimal_trajectory(tmp_path):
    path = write_lines(tmp_path / "runs.jsonl", line(id="t", prompt="p", calls=[{"tool": "a", "error": "boom"}]))
    (item,) = iter_trajectories(path)
    t = item.trajectory
    assert (t.output, t.context, t.metadata, t.latency_s, t.world) == ("", {}, {}, None, None)
    assert t.calls[0].args == {} and t.calls[0].succeeded is False


def test_world_sides_accept_inline_json_file_and_sqlite(tmp_path):
    world = {"before": {"json": None}, "after": {"sqlite": "after.db"}, "keys": {"/users": "id"}}
    path = write_lines(tmp_path / "runs.jsonl", line(id="t", prompt="p", world=world))
    (item,) = iter_trajectories(path)
    assert item.trajectory.world.before.json_value is None  # `json: null` is a (empty) world
    assert item.trajectory.world.after.sqlite == "after.db"


def test_non_utf8_byte_names_its_own_line(tmp_path):
    path = tmp_path / "runs.jsonl"
    path.write_bytes(
        json.dumps(GOOD).encode() + b"\n\n" + b'{"id": "t", "prompt": "caf\xe9"}\n'
    )
    with pytest.raises(InputError) as info:
        list(iter_trajectories(path))
    assert info.value.line == 3


def test_duplicate_key_in_a_line_is_an_error(tmp_path):
    path = write_lines(
        tmp_path / "runs.jsonl",
        '{"id": "t", "prompt": "p", "calls": [{"tool": "delete_user"}], "calls": []}',
    )
    with pytest.raises(InputError) as info:
        list(iter_trajectories(path))
    assert info.value.line == 1 and "duplicate key 'calls'" in info.value.detail


# --- property: whatever valid trajectories are written, they come back, with their lines ----------

_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
_scalars = st.one_of(st.none(), st.booleans(), st.integers(-1000, 1000), _text)
_calls = st.lists(
    st.builds(
        dict,
        tool=st.text("abcdefgh_", min_size=1, max_size=8),
        args=st.dictionaries(st.text("xyz", min_size=1, max_size=3), _scalars, max_size=3),
    ),
    max_size=3,
)
_trajectories = st.lists(
    st.builds(dict, prompt=_text, output=_text, calls=_calls, metadata=st.dictionaries(_text, _scalars, max_size=2)),
    min_size=1,
    max_size=5,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=_trajectories, blanks=st.lists(st.integers(0, 2), min_size=5, max_size=5))
def test_property_written_trajectories_load_back_with_their_line_numbers(tmp_path, records, blanks):
    lines: list[str] = []
    expected: list[tuple[int, dict]] = []
    for i, record in enumerate(records):
        lines.extend([""] * blanks[i])
        record = {"id": f"t{i}", **record}
        lines.append(json.dumps(record, ensure_ascii=False))
        expected.append((len(lines), record))
    path = write_lines(tmp_path / "prop.jsonl", *lines)
    loaded = list(iter_trajectories(path))
    assert [item.line for item in loaded] == [n for n, _ in expected]
    for item, (_, record) in zip(loaded, expected):
        assert item.trajectory == Trajectory.model_validate(record)
        assert item.trajectory.model_dump(include={"prompt", "output", "metadata"}) == {
            k: record[k] for k in ("prompt", "output", "metadata")
        }


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param('{"id": "t", "prompt": "p", "metadata": {"cost": NaN}}', id="nan_in_metadata"),
        pytest.param('{"id": "t", "prompt": "p", "calls": [{"tool": "pay", "args": {"amount": Infinity}}]}', id="infinity_in_args"),
    ],
)
def test_non_json_constants_are_refused(tmp_path, bad):
    path = write_lines(tmp_path / "runs.jsonl", bad)
    with pytest.raises(InputError) as info:
        list(iter_trajectories(path))
    assert info.value.line == 1
