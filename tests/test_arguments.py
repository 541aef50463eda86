"""The argument matcher of tool correctness (judgekit.axes.arguments).

Each expectation kind earns or loses its one point with the reason a person can check; rules
apply at every depth; keys a tool does not declare are reported, never scored; rubrics without
the new fields score and hash exactly as before.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from judgekit._util.io import sha256_json
from judgekit.world.json_equality import json_equal
from judgekit.axes import arguments
from judgekit.axes._values import STEPS, ValueMatcher, close, text_rule, value_key
from judgekit.axes.tool_correctness import score_tool_correctness
from judgekit.trajectory import WorldState
from judgekit.results import ToolCorrectnessResult
from judgekit.rubric.model import NORMALIZATIONS, ArgumentValue, Rubric, ToolCorrectnessCriteria
from judgekit.trajectory import LoadedTrajectory, Trajectory


def criteria(values: dict[str, Any] | None = None, args: dict[str, Any] | None = None,
             tools: dict[str, Any] | None = None, tool: str = "f") -> ToolCorrectnessCriteria:
    call: dict[str, Any] = {"tool": tool}
    if values is not None:
        call["values"] = values
    if args is not None:
        call["args"] = args
    return ToolCorrectnessCriteria.model_validate({"guide": "g", "expected_calls": [call], "tools": tools or {}})


def score(tc: ToolCorrectnessCriteria, *calls: dict[str, Any]) -> ToolCorrectnessResult:
    trajectory = Trajectory.model_validate({"id": "t", "prompt": "p", "calls": list(calls)})
    return score_tool_correctness(tc, trajectory, WorldState(LoadedTrajectory(trajectory, Path("t.jsonl"), 1)))


def arg_point(result: ToolCorrectnessResult, name: str) -> tuple[bool, str]:
    (item,) = [item for item in result.items if item.point.endswith(f": arg {name}")]
    return item.earned, item.reason.removeprefix("call #0: ")


def one(expectation: dict[str, Any], value: Any = None, *, given: bool = True) -> tuple[bool, str]:
    result = score(criteria({"x": expectation}), {"tool": "f", "args": {"x": value} if given else {}})
    return arg_point(result, "x")


# --- each expectation kind -------------------------------------------------------------------------

KINDS = [
    pytest.param({"equals": 1}, 1.0, (True, "an acceptable value"), id="equals_json_equality_1_is_1.0"),
    pytest.param({"equals": 1}, True, (False, "value true is not 1"), id="equals_true_is_not_1"),
    pytest.param({"equals": "1"}, 1, (False, 'value 1 is not "1"'), id="equals_a_string_is_not_a_number"),
    pytest.param({"equals": {"a": [1, 2]}}, {"a": [1, 2]}, (True, "an acceptable value"), id="equals_nested"),
    pytest.param({"equals": [1, 2]}, [2, 1], (False, "value [2, 1] is not [1, 2]"), id="equals_lists_in_order"),
    pytest.param({"any_of": ["a", "b"]}, "b", (True, "an acceptable value"), id="any_of_one_of_them"),
    pytest.param({"any_of": ["a", "b"]}, "c", (False, 'value "c" is not one of "a", "b"'), id="any_of_none_of_them"),
    pytest.param({"any_of": [None]}, None, (True, "an acceptable value"), id="any_of_null"),
    pytest.param({"any_of": list(range(7))}, 9, (False, "value 9 is not one of 0, 1, 2, 3, 4 (and 2 more)"),
                 id="any_of_a_long_list_is_shortened"),
    pytest.param({"equals": 1.0, "tolerance": 0.1}, 1.05, (True, "an acceptable value"), id="tolerance_within"),
    pytest.param({"equals": 1.0, "tolerance": 0.1}, 1.2,
                 (False, "value 1.2 is not 1.0 (compared with numbers within 0.1)"), id="tolerance_beyond"),
    pytest.param({"equals": 1, "tolerance": 1}, True, (False, "value true is not 1 (compared with numbers within 1)"),
                 id="tolerance_booleans_are_never_numbers"),
    pytest.param({"equals": 10**400, "tolerance": 1}, 1.5,
                 (False, f"value 1.5 is not {str(10**400)[:77]}... (compared with numbers within 1)"),
                 id="tolerance_past_float_range"),
    pytest.param({"equals": "hello", "normalize": ["casefold"]}, "HeLLo", (True, "an acceptable value"), id="casefold"),
    pytest.param({"equals": "strasse", "normalize": ["casefold"]}, "STRASSE", (True, "an acceptable value"),
                 id="casefold_is_unicode_folding"),
    pytest.param({"equals": "a b", "normalize": ["strip"]}, "  a b\n", (True, "an acceptable value"), id="strip"),
    pytest.param({"equals": "a b", "normalize": ["collapse_whitespace"]}, "a \t\n b", (True, "an acceptable value"),
                 id="collapse_whitespace"),
    pytest.param({"equals": "ab", "normalize": ["remove_whitespace"]}, " a\u00a0b ", (True, "an acceptable value"),
                 id="remove_whitespace"),
    pytest.param({"equals": "Jan 28 2021", "normalize": ["remove_punctuation"]}, "Jan. 28, 2021",
                 (True, "an acceptable value"), id="remove_punctuation"),
    pytest.param({"equals": "x^2", "normalize": ["remove_punctuation"]}, "x2",
                 (False, 'value "x2" is not "x^2" (compared with remove_punctuation)'), id="symbols_are_not_punctuation"),
    pytest.param({"equals": "a b", "normalize": ["casefold"]}, "A  B",
                 (False, 'value "A  B" is not "a b" (compared with casefold)'), id="only_the_named_normalisations"),
    pytest.param({"equals": [1, 2, 2], "unordered": True}, [2, 1, 2], (True, "an acceptable value"), id="unordered"),
    pytest.param({"equals": [1, 2, 2], "unordered": True}, [1, 1, 2],
                 (False, "value [1, 1, 2] is not [1, 2, 2] (compared with lists in any order)"),
                 id="unordered_is_a_multiset"),
    pytest.param({"equals": [[1, 2], [3]], "unordered": True}, [[3], [2, 1]], (True, "an acceptable value"),
                 id="unordered_at_every_depth"),
    pytest.param({"equals": [1.0, 2.0], "unordered": True, "tolerance": 0.5}, [2.4, 0.6], (True, "an acceptable value"),
                 id="unordered_with_a_tolerance"),
    pytest.param({"equals": {"k": [" A ", "b"]}, "normalize": ["strip", "casefold"], "unordered": True},
                 {"k": ["B", "a"]}, (True, "an acceptable value"), id="nested_rules_apply_inside_objects"),
    pytest.param({"equals": {"Key": 1}, "normalize": ["casefold"]}, {"key": 1},
                 (False, 'value {"key": 1} is not {"Key": 1} (compared with casefold)'), id="object_keys_are_not_normalised"),
    pytest.param({"equals": {"p": [1.0, {"q": 2.0}]}, "tolerance": 0.01}, {"p": [1.001, {"q": 1.999}]},
                 (True, "an acceptable value"), id="tolerance_at_every_depth"),
]


@pytest.mark.parametrize(("expectation", "value", "expected"), KINDS)
def test_each_expectation_kind(expectation, value, expected):
    assert one(expectation, value) == expected


@pytest.mark.parametrize(("expectation", "expected"), [
    pytest.param({"equals": 1, "optional": True}, (True, "absent, which the rubric allows (optional)"), id="optional"),
    pytest.param({"optional": True}, (True, "absent, which the rubric allows (optional)"), id="optional_alone"),
    pytest.param({"equals": 1}, (False, "argument missing"), id="required"),
])
def test_an_absent_argument(expectation, expected):
    assert one(expectation, given=False) == expected


def test_an_optional_argument_given_must_still_hold():
    assert one({"any_of": [3], "optional": True}, 4) == (False, "value 4 is not 3")
    assert one({"optional": True}, "anything") == (True, "given")


def test_the_matcher_applies_the_normalisations_the_rubric_names_in_their_order():
    assert tuple(STEPS) == NORMALIZATIONS


def test_the_normalisations_apply_in_their_fixed_order_whatever_the_order_listed():
    listed = ["strip", "remove_punctuation", "collapse_whitespace", "casefold"]
    text = "  Hello ,  World!  "
    assert text_rule(listed)(text) == text_rule(list(reversed(listed)))(text) == "hello world"


def test_a_schema_and_a_value_for_one_argument_are_one_point_earned_when_both_hold():
    tc = criteria(values={"n": {"any_of": [3, 4]}}, args={"n": {"type": "integer", "minimum": 4}})
    assert [i.point for i in score(tc, {"tool": "f", "args": {"n": 4}}).items].count("call[0] f: arg n") == 1
    assert arg_point(score(tc, {"tool": "f", "args": {"n": 4}}), "n") == (True, "valid against its schema and an acceptable value")
    assert arg_point(score(tc, {"tool": "f", "args": {"n": 3}}), "n") == (False, "off-schema: 3 is less than the minimum of 4")
    assert arg_point(score(tc, {"tool": "f", "args": {"n": 5}}), "n") == (False, "value 5 is not one of 3, 4")
    assert score(tc, {"tool": "f", "args": {"n": 4}}).counts.args_expected == 1


def test_argument_points_come_in_the_order_of_args_then_values():
    tc = criteria(values={"b": {"equals": 2}, "a": {"equals": 1}}, args={"c": {}, "a": {"type": "integer"}})
    result = score(tc, {"tool": "f", "args": {}})
    assert [i.point for i in result.items[1:-2]] == ["call[0] f: arg c", "call[0] f: arg a", "call[0] f: arg b"]


def test_an_unmatched_call_loses_every_argument_point_of_values_too():
    result = score(criteria({"x": {"equals": 1}, "y": {"optional": True}}), {"tool": "g", "args": {"x": 1}})
    assert [(i.point, i.earned, i.reason) for i in result.items[:3]] == [
        ("call[0] f: tool", False, "no successful call to f (called: g)"),
        ("call[0] f: arg x", False, "no matching call"),
        ("call[0] f: arg y", False, "no matching call"),
    ]


# --- declared schemas ------------------------------------------------------------------------------

DECLARED = {"f": {"type": "object", "properties": {
    "n": {"type": "integer"},
    "word": {"type": "string", "enum": ["Bronze", "Stone"]},
    "item": {"type": "object", "properties": {"id": {"type": "integer"}, "tags": {"type": "array", "items": {
        "type": "object", "properties": {"k": {"type": "string"}}}}}},
    "unpinned": {"type": "string"},
}, "required": ["n"]}}


def test_an_argument_is_also_checked_against_its_declared_schema():
    tc = criteria(values={"word": {"any_of": ["bronze"], "normalize": ["casefold"]}}, tools=DECLARED)
    # "bronze" is pinned exactly: the ground truth's word stands, enum or not (BFCL has such).
    assert arg_point(score(tc, {"tool": "f", "args": {"word": "bronze"}}), "word") == (True, "an acceptable value")
    # Equal only after normalisation: the declaration applies, and "BRONZE" is not in its enum.
    earned, reason = arg_point(score(tc, {"tool": "f", "args": {"word": "BRONZE"}}), "word")
    assert (earned, reason) == (False, "off the declared schema of f: 'BRONZE' is not one of ['Bronze', 'Stone']")
    earned, reason = arg_point(score(criteria(args={"unpinned": {}}, tools=DECLARED),
                                     {"tool": "f", "args": {"unpinned": "fine"}}), "unpinned")
    assert (earned, reason) == (True, "valid against its schema and valid against the declared schema of f")
    earned, reason = arg_point(score(criteria(args={"unpinned": {}}, tools=DECLARED),
                                     {"tool": "f", "args": {"unpinned": 5}}), "unpinned")
    assert (earned, reason) == (False, "off the declared schema of f: 5 is not of type 'string'")


def test_a_declared_schema_may_refer_to_its_defs():
    tools = {"f": {"type": "object", "$defs": {"id": {"type": "integer", "minimum": 1}},
                   "properties": {"n": {"$ref": "#/$defs/id"}}}}
    tc = criteria(args={"n": {}}, tools=tools)
    assert arg_point(score(tc, {"tool": "f", "args": {"n": 2}}), "n")[0] is True
    assert arg_point(score(tc, {"tool": "f", "args": {"n": 0}}), "n") == (
        False, "off the declared schema of f: 0 is less than the minimum of 1")


def test_undeclared_keys_are_reported_not_scored():
    tc = criteria(values={"n": {"equals": 1}}, tools=DECLARED)
    clean = score(tc, {"tool": "f", "args": {"n": 1}})
    sloppy = score(tc, {"tool": "f", "args": {"n": 1, "colour": "red", "unpinned": 7,
                                              "item": {"id": 1, "size": 2, "tags": [{"k": "a", "v": 1}]}}})
    assert (sloppy.points, sloppy.max_points) == (clean.points, clean.max_points) == (4, 4)
    assert [(n.call, n.arg, n.reason) for n in sloppy.notes] == [
        (0, "colour", "not declared by f (reported, not scored)"),
        (0, "unpinned", "off the declared schema of f: 7 is not of type 'string' (reported, not scored)"),
        (0, "item/size", "not declared by f (reported, not scored)"),
        (0, "item/tags/0/v", "not declared by f (reported, not scored)"),
    ]
    assert clean.notes == [] and "notes" not in json.loads(clean.model_dump_json())
    assert json.loads(sloppy.model_dump_json())["notes"][0]["arg"] == "colour"


def test_nothing_is_reported_below_a_value_the_rubric_pins_exactly():
    pinned = {"id": 1, "size": 2}
    tc = criteria(values={"n": {"equals": 1}, "item": {"equals": pinned}}, tools=DECLARED)
    assert score(tc, {"tool": "f", "args": {"n": 1, "item": pinned}}).notes == []


def test_without_declarations_nothing_is_reported():
    result = score(criteria(values={"n": {"equals": 1}}), {"tool": "f", "args": {"n": 1, "colour": "red"}})
    assert result.notes == [] and result.points == result.max_points


def test_notes_are_capped_per_call():
    args = {"n": 1, **{f"k{i:02d}": i for i in range(30)}}
    notes = score(criteria(values={"n": {"equals": 1}}, tools=DECLARED), {"tool": "f", "args": args}).notes
    assert len(notes) == arguments.MAX_NOTES
    assert notes[-1].reason.endswith("; and 11 more such note(s)")


# --- the rubric surface ----------------------------------------------------------------------------


@pytest.mark.parametrize(("values", "message"), [
    pytest.param({"equals": None}, "equals: null cannot be told apart from no value; write any_of: [null]", id="equals_null"),
    pytest.param({"equals": 1, "any_of": [1]}, "give equals or any_of, not both", id="both"),
    pytest.param({}, "give equals, any_of or optional: true", id="nothing"),
    pytest.param({"optional": True, "tolerance": 1}, "tolerance, normalize and unordered apply to equals or any_of",
                 id="a_rule_without_a_value"),
    pytest.param({"any_of": []}, "at least 1 item", id="empty_any_of"),
    pytest.param({"equals": 1, "tolerance": -1}, "greater than or equal to 0", id="negative_tolerance"),
    pytest.param({"equals": "a", "normalize": ["lowercase"]}, "'casefold'", id="unknown_normalisation"),
    pytest.param({"equals": "a", "normalize": ["strip", "strip"]}, "normalize names a normalisation twice", id="twice"),
    pytest.param({"equals": 1, "exact": True}, "Extra inputs are not permitted", id="unknown_key"),
])
def test_a_value_expectation_that_says_nothing_clear_is_refused(values, message):
    with pytest.raises(ValidationError, match=message.replace("[", r"\[").replace("]", r"\]")):
        criteria({"x": values})


@pytest.mark.parametrize(("declaration", "message"), [
    pytest.param([], "Input should be a valid dictionary", id="not_an_object"),
    pytest.param({"properties": []}, "properties must be an object", id="properties_not_an_object"),
    pytest.param({"type": "dict"}, "invalid JSON Schema", id="invalid_schema"),
    pytest.param({"properties": {"a": {"$ref": "#/properties/b"}, "b": {}}}, "must name '#/$defs/NAME'", id="ref_elsewhere"),
    pytest.param({"properties": {"a": {"$ref": "https://example.com/s"}}}, "must name", id="ref_remote"),
    pytest.param({"$defs": {"d": {"$ref": "https://example.com/s"}}}, "would read another document", id="ref_remote_in_defs"),
    pytest.param({"properties": {"a": {"type": "string", "description": 5}}}, "description must be a string", id="annotation_of_the_wrong_type"),
    pytest.param({"properties": {"a": {"$ref": "#/$defs/missing"}}, "$defs": {}}, "names nothing", id="dangling_ref"),
    pytest.param({"properties": {"a": {"items": {"$schema": "x"}}}}, "property 'a': $schema may only appear at the top",
                 id="nested_schema_keyword"),
    pytest.param({"properties": {"a": {"$schema": "x"}}}, "property 'a': $schema may only appear at the top",
                 id="schema_keyword_in_a_property"),
    pytest.param({"required": ["a", "a"]}, "required must be a list of distinct argument names", id="required_twice"),
    pytest.param({"properties": {"a": {"type": "string", "pattern": "("}}}, "invalid", id="bad_pattern"),
])
def test_a_declaration_judgekit_cannot_apply_is_refused_at_load(declaration, message):
    with pytest.raises(ValidationError, match=message.replace("(", r"\(").replace("$", r"\$")):
        criteria({"x": {"equals": 1}}, tools={"f": declaration})


def test_rubrics_without_the_new_fields_hash_as_before():
    data = {"id": "r", "version": "1.0.0", "registered": "2024-01-01",
            "tool_correctness": {"guide": "g", "expected_calls": [{"tool": "f", "args": {"a": {"const": 1}}}]}}
    rubric = Rubric.model_validate(data)
    # The canonical content is what was written, nothing added (no values, no tools), so the
    # hash is the one the format gave this content before they existed.
    assert rubric.canonical() == data
    assert rubric.sha256() == sha256_json(data)
    same = Rubric.model_validate({**data, "tool_correctness": {**data["tool_correctness"], "tools": {}}})
    assert same.sha256() == rubric.sha256()


def test_a_rubric_with_values_and_tools_round_trips_through_yaml(tmp_path):
    rubric = Rubric.model_validate({
        "id": "r", "version": "1.0.0", "registered": "2024-01-01",
        "tool_correctness": {"guide": "g", "tools": DECLARED, "expected_calls": [{"tool": "f", "values": {
            "n": {"any_of": [1, 2], "optional": True}, "word": {"equals": "Stone", "normalize": ["casefold"]}}}]},
    })
    path = tmp_path / "r.yaml"
    path.write_text(rubric.to_yaml(), encoding="utf-8")
    from judgekit.rubric.model import load_rubric

    again = load_rubric(path)
    assert again.sha256() == rubric.sha256()
    assert again.tool_correctness.expected_calls[0].values["n"] == ArgumentValue(any_of=[1, 2], optional=True)


# --- caching ---------------------------------------------------------------------------------------


def test_plans_are_built_once_per_criteria(monkeypatch):
    built = []
    real = arguments.CallPlan.__init__

    def counting(self, *args, **kwargs):
        built.append(1)
        real(self, *args, **kwargs)

    monkeypatch.setattr(arguments.CallPlan, "__init__", counting)
    tc = criteria({"x": {"equals": 1}}, tools=DECLARED)
    for _ in range(3):
        score(tc, {"tool": "f", "args": {"x": 1}})
    assert len(built) == 1
    score(criteria({"x": {"equals": 1}}), {"tool": "f", "args": {"x": 1}})  # another criteria object
    assert len(built) == 2
    assert arguments.plans_for(tc) is arguments.plans_for(tc)


# --- properties ------------------------------------------------------------------------------------

SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from([0.0, 1.0, -0.0, 2.0, 0.5, 2.5]),
                    st.sampled_from(["", "a", "A", "a b", "1"]))
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
    st.sampled_from(["a", "b", "A"]), inner, max_size=3), max_leaves=8)


@settings(max_examples=300, deadline=None)
@given(JSON, JSON)
def test_value_keys_are_equal_exactly_when_the_values_are_json_equal(a, b):
    assert (value_key(a) == value_key(b)) is json_equal(a, b)
    assert close(a, b, 0.0, text_rule([]), False) is json_equal(a, b)


def _shuffled(value: Any, rng: random.Random) -> Any:
    if isinstance(value, list):
        items = [_shuffled(item, rng) for item in value]
        rng.shuffle(items)
        return items
    if isinstance(value, dict):
        return {k: _shuffled(v, rng) for k, v in value.items()}
    return value


@settings(max_examples=200, deadline=None)
@given(JSON, st.randoms(use_true_random=False))
def test_unordered_values_match_any_shuffle_of_themselves(value, rng):
    shuffled = _shuffled(value, rng)
    assert value_key(value, unordered=True) == value_key(shuffled, unordered=True)
    assert close(shuffled, value, 0.0, text_rule([]), True)
    matcher = ValueMatcher(ArgumentValue(any_of=[value], unordered=True))
    assert matcher.check(shuffled)[0]


@settings(max_examples=200, deadline=None)
@given(JSON, JSON)
def test_hashing_and_pairwise_comparison_agree_on_unordered_values(a, b):
    assert (value_key(a, unordered=True) == value_key(b, unordered=True)) is close(a, b, 0.0, text_rule([]), True)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=20), st.lists(st.sampled_from(["casefold", "remove_punctuation", "remove_whitespace",
                                                        "collapse_whitespace", "strip"]), unique=True))
def test_every_normalisation_is_idempotent(text, names):
    rule = text_rule(names)
    assert rule(rule(text)) == rule(text)
