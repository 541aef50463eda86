"""The fast paths of the deterministic axes give exactly what the plain ones gave.

Strict JSON (the duplicate-key hook, the shared decoder, the depth walk, the surrogate filter),
the argument-schema checkers (cached by schema object; ``{"const": ...}`` compared directly)
and the text normalisation of required outputs were rewritten for speed. Each is checked here
against the implementation it replaced, kept below as the reference: same values, same
refusals, same messages.
"""

from __future__ import annotations

import json
import math
import re
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from judgekit.rubric import json_schema as _jsonschema
from judgekit._util import io as _io
from judgekit._util import strict_json as _strict
from judgekit._util.io import (
    iter_jsonl,
)
from judgekit._util.strict_json import MAX_DEPTH, check_tree, plain_error, strict_json_loads
from judgekit.rubric.json_schema import first_error, first_error_within_budget
from judgekit.rubric.regex import CheckTimeout, check_budget
from judgekit.axes import tool_correctness
from judgekit.axes.task_success import normalise_text
from judgekit.axes.tool_correctness import score_tool_correctness
from judgekit.trajectory import WorldState
from judgekit.errors import InputError
from judgekit.rubric.model import ToolCorrectnessCriteria
from judgekit.trajectory import LoadedTrajectory, Trajectory

# --- the implementations replaced, as references -------------------------------------------------


def _reference_hook(pairs):
    result = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r} in an object")
        result[key] = value
    return result


def reference_strict_json_loads(text: str | bytes, *, max_depth: int = MAX_DEPTH) -> Any:
    try:
        data = json.loads(
            text, object_pairs_hook=_reference_hook, parse_constant=_strict.reject_constant, parse_float=_strict.finite_float
        )
    except RecursionError:
        raise ValueError(f"nested more than {max_depth} levels deep") from None
    except ValueError as exc:
        if isinstance(exc, json.JSONDecodeError):
            raise
        raise ValueError(plain_error(exc)) from None
    raw_surrogate = False
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    elif not text.isascii():
        raw_surrogate = re.search("[\ud800-\udfff]", text) is not None
    deep = text.count("[") + text.count("{") > max_depth
    surrogates = raw_surrogate or ("\\u" in text and re.search(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}", text) is not None)
    if deep or surrogates:
        check_tree(data, max_depth=max_depth, surrogates=surrogates)
    return data


def reference_normalise(text: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"(?<=\d),(?=\d)", "", text.casefold())).strip()


def reference_first_error(schema: Any, instance: Any) -> str | None:
    with check_budget():
        error = next(iter(_jsonschema._validator(_io.canonical_json(schema)).iter_errors(instance)), None)
    return None if error is None else error.message


def outcome(fn, *args, **kwargs) -> tuple[str, Any]:
    """('ok', repr of the value) or (exception type, message): what a caller can observe."""
    try:
        return "ok", repr(fn(*args, **kwargs))
    except (ValueError, InputError) as exc:
        return type(exc).__name__, str(exc)


def strict_line(text: str) -> Any:
    """strict JSON as iter_jsonl applies it to a line of a file."""
    return _strict.json_line_loads(text.encode("utf-8"))


# --- strict JSON -------------------------------------------------------------------------------

DUPLICATES = [
    pytest.param('{"a": 1, "a": 2}', "a", id="top_level"),
    pytest.param('[0, {"x": [{"k": 1, "k": 1}]}]', "k", id="inside_lists"),
    pytest.param('{"a": {"b": {"c": {"d": {"e": 1, "e": 2}}}}}', "e", id="five_deep"),
    pytest.param('{"a": 1, "b": 2, "b": 3, "a": 4}', "b", id="first_repeat_is_named"),
    pytest.param('{"é": 1, "\\u00e9": 2}', "é", id="same_key_written_two_ways"),
    pytest.param('{"": 1, "": 2}', "", id="empty_key"),
]


@pytest.mark.parametrize(("text", "key"), DUPLICATES)
def test_a_duplicate_key_is_refused_at_any_depth_with_the_same_message(text, key):
    message = f"duplicate key {key!r} in an object"
    for parse in (strict_json_loads, strict_line, lambda t: strict_json_loads(t.encode())):
        with pytest.raises(ValueError) as caught:
            parse(text)
        assert str(caught.value) == message
    assert outcome(strict_json_loads, text) == outcome(reference_strict_json_loads, text)


def test_objects_keep_their_keys_in_order_with_their_values():
    text = '{"z": 1, "a": [1, 2.5, {"m": null, "b": true}], "k": "v"}'
    data = strict_json_loads(text)
    assert list(data) == ["z", "a", "k"]
    assert list(data["a"][2]) == ["m", "b"]
    assert data == json.loads(text)


REFUSED = [
    pytest.param('{"x": 1e999}', id="overflow"),
    pytest.param("[-1E+999]", id="negative_overflow"),
    pytest.param("NaN", id="nan"),
    pytest.param('{"x": [Infinity]}', id="infinity"),
    pytest.param('"\\ud800"', id="lone_high_surrogate_escape"),
    pytest.param('{"\\udc00": 1}', id="lone_low_surrogate_in_a_key"),
    pytest.param('["ok \\ud83d\\ude00", "\\ud83d"]', id="pair_then_lone"),
    pytest.param("[" * 201 + "]" * 201, id="lists_201_deep"),
    pytest.param('{"a": ' * 201 + "1" + "}" * 201, id="objects_201_deep"),
    pytest.param("[" * 100_000 + "]" * 100_000, id="lists_100000_deep"),
    pytest.param('{"m": ' + "[" * 300 + '"\\udfff"' + "]" * 300 + "}", id="deep_and_a_lone_surrogate"),
    pytest.param('["\\udfff", ' + "[" * 300 + "]" * 300 + "]", id="lone_surrogate_then_deep"),
    pytest.param('{"n": ' + "7" * 5000 + "}", id="integer_of_5000_digits"),
    pytest.param("\ufeff[1]", id="byte_order_mark"),
    pytest.param('{"a": 1,}', id="syntax_error"),
    pytest.param("[1] [2]", id="extra_data"),
    pytest.param("", id="empty"),
]


@pytest.mark.parametrize("text", REFUSED)
def test_what_strict_json_refused_it_still_refuses_with_the_same_message(text):
    expected = outcome(reference_strict_json_loads, text)
    assert expected[0] != "ok"
    assert outcome(strict_json_loads, text) == expected
    assert outcome(strict_line, text) == expected
    # Bytes are refused as their text is: json.loads would take a byte-order mark from bytes
    # (the one case where the old bytes path accepted what its text path refused).
    assert outcome(strict_json_loads, text.encode("utf-8", "surrogatepass")) == expected


@pytest.mark.parametrize("depth", [1, 7, 8, 9, 199, 200, 201, 202])
@pytest.mark.parametrize("opener", ["[", '{"k": '])
def test_the_depth_limit_is_where_it_was(depth, opener):
    closer = "]" if opener == "[" else "}"
    text = opener * depth + "0" + closer * depth
    for max_depth in (8, MAX_DEPTH):
        assert outcome(strict_json_loads, text, max_depth=max_depth) == outcome(
            reference_strict_json_loads, text, max_depth=max_depth)
    assert (outcome(strict_json_loads, text)[0] == "ok") == (depth <= MAX_DEPTH)


def test_a_raw_lone_surrogate_in_a_str_is_still_refused():
    text = '["fine", "cut \ud83d"]'
    assert outcome(strict_json_loads, text) == outcome(reference_strict_json_loads, text)
    assert "lone surrogate" in outcome(strict_json_loads, text)[1]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner, max_size=4),
    max_leaves=40,
)
# Pieces that break strictness, spliced into valid JSON text.
HOSTILE_PIECES = st.sampled_from(
    ['"\\ud800"', '"\\udbff\\udfff"', "1e999", "NaN", "-Infinity", "[" * 9 + "]" * 9, '{"a": 1, "a": 2}',
     '"\\u00e9"', "1" * 4400, "[[[[", "\u2028", '"\ud800"']
)


@settings(max_examples=300, deadline=None)
@given(json_values, st.lists(HOSTILE_PIECES, max_size=2), st.integers(0, 3), st.sampled_from([8, 200]))
def test_strict_json_agrees_with_the_reference_on_any_text(value, pieces, at, max_depth):
    text = json.dumps(value, ensure_ascii=bool(at % 2))
    for piece in pieces:  # spliced in as a list item: valid JSON around a hostile part
        text = f"[{text}, {piece}]" if at < 2 else f'{{"p": {piece}, "v": {text}}}'
    expected = outcome(reference_strict_json_loads, text, max_depth=max_depth)
    assert outcome(strict_json_loads, text, max_depth=max_depth) == expected
    if "\ud800" not in text and max_depth == MAX_DEPTH:  # a line of a UTF-8 file cannot hold the code point
        assert outcome(strict_line, text) == expected


@settings(max_examples=200, deadline=None)
@given(json_values, st.integers(0, 6))
def test_the_depth_walk_refuses_exactly_what_check_tree_refuses(value, max_depth):
    assert outcome(_strict._check_depth, value, max_depth) == outcome(check_tree, value, max_depth=max_depth,
                                                                      surrogates=False)


def test_json_lines_skip_the_same_blank_lines_and_number_the_rest(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"id": "a"}\n\n   \t\n\u3000\x1c\u2028\n{"id": "b"}\n\n', encoding="utf-8")
    from pydantic import BaseModel

    class Row(BaseModel):
        id: str

    assert [(line, row.id) for line, row in iter_jsonl(path, Row)] == [(1, "a"), (5, "b")]


@pytest.mark.parametrize(("line", "message"), [
    pytest.param('{"id": "a", "id": "b"}', "invalid JSON: duplicate key 'id' in an object", id="duplicate"),
    pytest.param('{"id": "\\udc00"}', "invalid JSON: the string '\\udc00' holds a lone surrogate", id="surrogate"),
    pytest.param("\ufeff{}", "invalid JSON: Unexpected UTF-8 BOM (decode using utf-8-sig) (column 1)", id="bom"),
])
def test_json_lines_errors_name_the_line_as_before(tmp_path, line, message):
    path = tmp_path / "t.jsonl"
    path.write_text('{"id": "ok"}\n' + line + "\n", encoding="utf-8")
    from pydantic import BaseModel

    class Row(BaseModel):
        id: str

    with pytest.raises(InputError) as caught:
        list(iter_jsonl(path, Row))
    assert str(caught.value).startswith(f"{path}:2: {message}")


# --- argument schemas ------------------------------------------------------------------------

SCHEMAS = [
    pytest.param({"const": "economy"}, ["economy", "business", 1, None], id="const_string"),
    pytest.param({"const": 1}, [1, 1.0, True, "1", [1]], id="const_one_is_not_true"),
    pytest.param({"const": True}, [True, 1, False], id="const_true"),
    pytest.param({"const": None}, [None, 0, "", []], id="const_null"),
    pytest.param({"const": {"b": 1, "a": [1, {"z": 2}]}}, [{"a": [1, {"z": 2}], "b": 1}, {"a": [1], "b": 1}, {}],
                 id="const_object_by_content"),
    pytest.param({"const": [{"flight_number": "HAT028", "date": "2024-05-21"}]},
                 [[{"date": "2024-05-21", "flight_number": "HAT028"}], [], [{"flight_number": "HAT028"}]],
                 id="const_list_of_objects"),
    pytest.param({"type": "string", "const": "x"}, ["x", 5, "y"], id="two_keywords_first_error_sorted"),
    pytest.param({"type": "string", "minLength": 3}, ["abc", "ab", 7], id="type_and_min_length"),
    pytest.param({"enum": ["a", "b"]}, ["a", "c"], id="enum"),
    pytest.param({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
                 [{"n": 1}, {"n": "1"}, {}], id="object"),
    pytest.param({"pattern": "^[a-z]+$"}, ["abc", "ABC", 3], id="pattern"),
    pytest.param({"type": "array", "uniqueItems": True}, [[1, 2], [1, 1.0], [True, 1]], id="unique_items"),
    pytest.param(True, [1, None], id="true_schema"),
    pytest.param(False, [1, None], id="false_schema"),
    pytest.param({"$defs": {"n": {"type": "number"}}, "$ref": "#/$defs/n"}, [1, "x"], id="ref"),
]


@pytest.mark.parametrize(("schema", "instances"), SCHEMAS)
def test_cached_checkers_give_the_errors_the_validator_gave(schema, instances):
    for instance in instances:
        expected = reference_first_error(schema, instance)
        assert first_error(schema, instance) == expected
        with check_budget():
            assert first_error_within_budget(schema, instance) == expected
        assert first_error(json.loads(json.dumps(schema)), instance) == expected  # another object, same content


_CONST_LEAVES = st.sampled_from([0, 1, 2, -1, 0.0, 1.0, -0.0, 2.5, True, False, None, "", "0", "1", "a"])
const_values = st.recursive(
    _CONST_LEAVES,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("abc"), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=500, deadline=None)
@given(const_values, const_values)
def test_a_const_is_checked_with_the_validator_s_equality(expected, instance):
    # The const checker compares with == first; booleans beside 0 and 1 must still differ.
    schema = {"const": expected}
    assert first_error(schema, instance) == reference_first_error(schema, instance)
    assert first_error(schema, expected) is None


def test_a_const_compares_values_built_in_code_as_the_validator_does():
    # A trajectory made in memory may hold tuples: the validator's equality takes them for lists.
    for schema, instance in [({"const": [1, 2]}, (1, 2)), ({"const": [["a"], "b"]}, [("a",), "b"]),
                             ({"const": {"k": [3]}}, {"k": (3,)}), ({"const": [2]}, (3,))]:
        assert first_error(schema, instance) == reference_first_error(schema, instance)


def test_different_schemas_get_their_own_errors():
    economy, business = {"const": "economy"}, {"const": "business"}
    assert first_error(economy, "business") == "'economy' was expected"
    assert first_error(business, "business") is None
    assert first_error(business, "economy") == "'business' was expected"
    assert first_error(economy, "economy") is None
    assert first_error({"type": "integer"}, "economy") == "'economy' is not of type 'integer'"


def test_a_schema_reports_the_same_first_error_whatever_its_key_order():
    one, other = {"type": "string", "const": "x"}, {"const": "x", "type": "string"}
    assert first_error(one, 5) == first_error(other, 5) == reference_first_error(one, 5) == "'x' was expected"


def test_a_const_message_shows_the_value_as_the_canonical_schema_holds_it():
    assert first_error({"const": {"b": 1, "a": 2}}, 0) == "{'a': 2, 'b': 1} was expected"


def test_the_checker_cache_is_bounded_and_tied_to_the_schema_object(monkeypatch):
    monkeypatch.setattr(_jsonschema, "MAX_CACHED_SCHEMAS", 8)
    monkeypatch.setattr(_jsonschema, "_checkers", {})
    schemas = [{"const": n} for n in range(20)]
    for n, schema in enumerate(schemas):
        assert first_error(schema, n) is None
        assert len(_jsonschema._checkers) <= 8
    assert [entry[0] for entry in _jsonschema._checkers.values()] == schemas[-8:]  # the newest kept
    # An entry is used only for the very object it was built for, whatever its id.
    stale = {"const": "stale"}
    fresh = {"const": "fresh"}
    _jsonschema._checkers[id(fresh)] = (stale, _jsonschema._checker(stale))
    assert first_error(fresh, "fresh") is None
    assert first_error(fresh, "stale") == "'fresh' was expected"


@pytest.mark.parametrize("schema", [{"const": 1}, {"type": "integer"}], ids=["const", "type"])
def test_a_spent_budget_stops_an_argument_check_on_either_path(schema):
    with check_budget(0.0):
        time.sleep(0.002)
        with pytest.raises(CheckTimeout) as caught:
            first_error_within_budget(schema, 1)
    assert str(caught.value).startswith("argument schema: took more than 0 s in all over this check's values")


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(("schema", "instance"), [
    pytest.param({"const": nested(600)}, nested(600), id="const_compared_past_the_stack"),
    pytest.param({"type": "array", "items": {"$ref": "#"}}, nested(100_000), id="recursive_ref"),
])
def test_a_value_too_deep_to_check_is_an_input_error(schema, instance):
    with pytest.raises(RecursionError):
        reference_first_error(schema, instance)
    with pytest.raises(InputError, match="nested too deeply to validate against its schema"):
        first_error(schema, instance)


# --- tool correctness --------------------------------------------------------------------------


def test_each_argument_pair_is_checked_once_and_the_reasons_are_unchanged(monkeypatch, tmp_path):
    criteria = ToolCorrectnessCriteria.model_validate({
        "guide": "g",
        "expected_calls": [
            {"tool": "update", "args": {"id": {"const": 1}, "email": {"type": "string", "pattern": "@"}}},
            {"tool": "update", "args": {"id": {"const": 2}}},
            {"tool": "notify", "args": {"to": {"const": "ann"}}},
        ],
    })
    trajectory = Trajectory.model_validate({"id": "t", "prompt": "p", "calls": [
        {"tool": "update", "args": {"id": 2}},
        {"tool": "update", "args": {"id": 1, "email": "nope"}},
        {"tool": "lookup", "args": {}},
        {"tool": "notify", "args": {"to": "bob"}, "error": "down"},
    ]})
    checked: list[tuple[Any, Any]] = []
    real = tool_correctness.first_error_within_budget

    def counting(schema, value):
        checked.append((schema, value))
        return real(schema, value)

    monkeypatch.setattr(tool_correctness, "first_error_within_budget", counting)
    result = score_tool_correctness(criteria, trajectory, WorldState(LoadedTrajectory(trajectory, tmp_path / "t.jsonl", 1)))
    # update x update pairs: (expected 0: id, email present once) x 2 calls + (expected 1: id) x 2 calls.
    assert len(checked) == 2 + 1 + 1 + 1
    assert [(item.point, item.earned, item.reason) for item in result.items] == [
        ("call[0] update: tool", True, "matched by call #1"),
        ("call[0] update: arg id", True, "call #1: valid against its schema"),
        ("call[0] update: arg email", False, "call #1: off-schema: 'nope' does not match '@'"),
        ("call[1] update: tool", True, "matched by call #0"),
        ("call[1] update: arg id", True, "call #0: valid against its schema"),
        ("call[2] notify: tool", False, "no successful call to notify (called: lookup, update)"),
        ("call[2] notify: arg to", False, "no matching call"),
        ("call count", True, "3 successful in-scope call(s), 3 expected"),
        ("no forbidden side effect", True, "none"),
    ]
    assert (result.points, result.max_points) == (6, 9)


# --- required outputs --------------------------------------------------------------------------

NORMALISED = [
    pytest.param("Total: $1,786.50", "total: $1786.50", id="thousands"),
    pytest.param("1,234,567 and 12,5", "1234567 and 125", id="every_separator_between_digits"),
    pytest.param("1,,2 ,3 4, a,1 1,a", "1,,2 ,3 4, a,1 1,a", id="commas_not_between_two_digits"),
    pytest.param("٣,٤٥٦", "٣٤٥٦", id="other_decimal_digits"),
    pytest.param("  The\tANSWER\n\n is\u00a0 ß \u2028", "the answer is ss", id="whitespace_and_case"),
    pytest.param("\x1c1,0\x1f", "10", id="separator_controls_are_whitespace"),
    pytest.param("", "", id="empty"),
]


@pytest.mark.parametrize(("text", "expected"), NORMALISED)
def test_normalisation_is_unchanged(text, expected):
    assert normalise_text(text) == expected == reference_normalise(text)


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("0189,, \t\n\u00a0\u2028\u3000\x1caAßİ٣.")) | st.characters(), max_size=60))
def test_normalisation_agrees_with_the_regex_it_replaced(text):
    assert normalise_text(text) == reference_normalise(text)


def test_the_reference_hooks_are_still_the_strict_ones():
    """The references above lean on the module's own constant and float hooks."""
    with pytest.raises(ValueError, match="NaN is not valid JSON"):
        _strict.reject_constant("NaN")
    with pytest.raises(ValueError, match="too large to represent"):
        _strict.finite_float("1e999")
    assert math.isfinite(_strict.finite_float("1.5"))


def test_trajectories_can_carry_a_snapshot_policy_from_the_stream(tmp_path):
    from judgekit.trajectory import iter_trajectories
    from judgekit.world.snapshot import SnapshotPolicy

    path = tmp_path / "t.jsonl"
    path.write_text('{"id": "a", "prompt": "p"}\n{"id": "b", "prompt": "p"}\n', encoding="utf-8")
    policy = SnapshotPolicy((tmp_path,))
    items = list(iter_trajectories(path, policy))
    assert [(item.trajectory.id, item.line, item.policy) for item in items] == [("a", 1, policy), ("b", 2, policy)]
    assert [item.policy for item in iter_trajectories(path)] == [None, None]
