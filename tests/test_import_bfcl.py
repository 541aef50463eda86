"""``judgekit import bfcl``: BFCL questions become one rubric each, and score themselves.

On the published data (../shared/data/bfcl, five categories): every ground-truth answer scores
1.0, and systematic perturbations of it lose exactly the points they should, on every question
where they apply (run with ``-s`` for the counts). Then, on small files in BFCL's format: model
result files, the decoders, the suite run from the CLI, and bad input.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from judgekit.axes.tool_correctness import score_tool_correctness
from judgekit.trajectory import WorldState
from judgekit.cli import main
from judgekit.errors import InputError
from judgekit.importers import bfcl, get_importer
from judgekit.importers.bfcl import decode_result, import_bfcl, json_schema, python_calls
from judgekit.rubric.model import ToolCorrectnessCriteria, load_rubric
from judgekit.run.plan import iter_deterministic, iter_trajectories_of
from judgekit.suite import load_suite
from judgekit.trajectory import Call, LoadedTrajectory, Trajectory, iter_trajectories

CATEGORIES = {"simple_python": 400, "multiple": 200, "parallel": 200, "parallel_multiple": 200, "irrelevance": 240}
EXTRA_KEY = "judgekit_extra_argument"


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


_IMPORTED: dict[str, Any] = {}  # one import of the published data for the module's tests


@pytest.fixture
def published(shared_data, tmp_path_factory):
    data = shared_data("bfcl")
    if "suite" not in _IMPORTED:
        out = tmp_path_factory.mktemp("bfcl")
        import_bfcl(data, out)
        _IMPORTED["out"], _IMPORTED["suite"] = out, load_suite(out)
    return _IMPORTED["out"], _IMPORTED["suite"]


# --- the published data ----------------------------------------------------------------------------


@pytest.mark.shared_data
def test_every_ground_truth_answer_scores_one(published):
    out, suite = published
    per_category: Counter[str] = Counter()
    for result in iter_deterministic(suite):
        tc = result.axes["tool_correctness"]
        assert (tc.status, tc.score, tc.notes) == ("scored", 1.0, []), (result.trajectory_id, tc.lost)
        assert result.metadata["kind"] == "reference"
        per_category[result.metadata["category"]] += 1
    assert per_category == CATEGORIES
    summary = json.loads((out / "bfcl-import.json").read_text())
    assert {c: v["questions"] for c, v in summary["categories"].items()} == CATEGORIES
    assert summary["skipped"] == {}


def _with_calls(trajectory: Trajectory, calls: list[Call]) -> Trajectory:
    return trajectory.model_copy(update={"calls": calls})


def _changed(call: Call, **update: Any) -> Call:
    return call.model_copy(update=update)


def _other_value(value: Any) -> Any:
    """A value of the same kind that no ground truth lists."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 100003
    if isinstance(value, str):
        return value + " (perturbed)"
    if isinstance(value, list):
        return [*value, "perturbed"]
    if isinstance(value, dict):
        return {**value, "perturbed": 1}
    return "perturbed"


def wrong_value(t: Trajectory, tc: ToolCorrectnessCriteria):
    for i, call in enumerate(t.calls):
        for name, value in call.args.items():
            calls = list(t.calls)
            calls[i] = _changed(call, args={**call.args, name: _other_value(value)})
            return _with_calls(t, calls), 1
    return None


def missing_required(t: Trajectory, tc: ToolCorrectnessCriteria):
    for i, (call, expected) in enumerate(zip(t.calls, tc.expected_calls)):
        for name in call.args:
            if not expected.values[name].optional:
                calls = list(t.calls)
                calls[i] = _changed(call, args={k: v for k, v in call.args.items() if k != name})
                return _with_calls(t, calls), 1
    return None


def extra_argument(t: Trajectory, tc: ToolCorrectnessCriteria):
    if not t.calls:
        return None
    return _with_calls(t, [_changed(t.calls[0], args={**t.calls[0].args, EXTRA_KEY: 1}), *t.calls[1:]]), 0


def wrong_function(t: Trajectory, tc: ToolCorrectnessCriteria):
    if not t.calls:
        return None
    renamed = _changed(t.calls[0], tool=t.calls[0].tool + "_wrong")
    return _with_calls(t, [renamed, *t.calls[1:]]), 1 + len(tc.expected_calls[0].argument_names())


def extra_call(t: Trajectory, tc: ToolCorrectnessCriteria):
    extra = t.calls[0] if t.calls else Call(tool=next(iter(tc.tools)), args={})
    return _with_calls(t, [*t.calls, extra]), 1


def dropped_parallel_call(t: Trajectory, tc: ToolCorrectnessCriteria):
    if len(t.calls) < 2:
        return None
    return _with_calls(t, t.calls[:-1]), 1 + len(tc.expected_calls[-1].argument_names()) + 1


PERTURBATIONS = [wrong_value, missing_required, extra_argument, wrong_function, extra_call, dropped_parallel_call]


@pytest.mark.shared_data
def test_perturbations_lose_exactly_their_points(published):
    _, suite = published
    applied: dict[str, Counter[str]] = defaultdict(Counter)
    wrong: list[str] = []
    for rubric, item in iter_trajectories_of(suite):
        tc, reference = rubric.tool_correctness, item.trajectory
        category = reference.metadata["category"]
        applied[category]["questions"] += 1
        base = score_tool_correctness(tc, reference, WorldState(item))
        for perturb in PERTURBATIONS:
            made = perturb(reference, tc)
            if made is None:
                continue
            perturbed, loss = made
            loaded = LoadedTrajectory(perturbed, item.path, item.line)
            result = score_tool_correctness(tc, perturbed, WorldState(loaded))
            applied[category][perturb.__name__] += 1
            if (result.points, result.max_points) != (base.points - loss, base.max_points):
                wrong.append(f"{reference.id} {perturb.__name__}: {result.points}/{result.max_points}, "
                             f"expected {base.points - loss}/{base.max_points}; lost {[i.point for i in result.lost]}")
            if perturb is extra_argument and [(n.arg, n.call) for n in result.notes] != [(EXTRA_KEY, 0)]:
                wrong.append(f"{reference.id}: the extra argument is not the one note: {result.notes}")
    print("\ncategory            questions " + " ".join(f"{p.__name__:>22}" for p in PERTURBATIONS))
    for category, counts in sorted(applied.items()):
        print(f"{category:<20}{counts['questions']:>9} " + " ".join(f"{counts[p.__name__]:>22}" for p in PERTURBATIONS))
    print(f"every perturbation exact: {not wrong}")
    assert not wrong, "\n".join(wrong[:10])
    assert {c: n["questions"] for c, n in applied.items()} == CATEGORIES
    assert applied["irrelevance"]["extra_call"] == 240 and applied["irrelevance"]["wrong_value"] == 0
    assert applied["parallel"]["dropped_parallel_call"] == 200  # every parallel question has two calls or more
    assert all(applied[c]["wrong_function"] == n for c, n in CATEGORIES.items() if c != "irrelevance")


@pytest.mark.shared_data
def test_published_rubrics_declare_the_functions_as_json_schema(published):
    out, _ = published
    rubric = load_rubric(out / "rubrics" / "bfcl-simple_python_0.json")
    assert rubric.tool_correctness.tools["calculate_triangle_area"]["type"] == "object"
    assert rubric.tool_correctness.expected_calls[0].values["unit"].model_dump(exclude_defaults=True) == {
        "any_of": ["units"], "optional": True, "normalize": ["casefold", "remove_punctuation", "remove_whitespace"]}


# --- small files in BFCL's format ------------------------------------------------------------------

FUNCTIONS = [
    {"name": "math.hypot", "description": "Hypotenuse.", "parameters": {"type": "dict", "properties": {
        "x": {"type": "integer"}, "y": {"type": "integer"}, "z": {"type": "integer", "optional": True}},
        "required": ["x", "y"]}},
    {"name": "weather.get", "description": "Weather.", "parameters": {"type": "dict", "properties": {
        "city": {"type": "string"}, "when": {"type": "dict", "properties": {"day": {"type": "string"},
                                                                            "hour": {"type": "integer"}}},
        "scale": {"type": "float"}}, "required": ["city"]}},
]
QUESTIONS = [
    {"id": "parallel_0", "question": [[{"role": "user", "content": "Hypotenuse of 3,4 and weather in Paris."}]],
     "function": FUNCTIONS},
    {"id": "parallel_1", "question": [[{"role": "system", "content": "Be brief."},
                                       {"role": "user", "content": "Weather in Rome at noon?"}]], "function": FUNCTIONS},
]
ANSWERS = [
    {"id": "parallel_0", "ground_truth": [{"math.hypot": {"x": [3], "y": [4], "z": ["", 0]}},
                                          {"weather.get": {"city": ["Paris", "Paris, France"], "scale": [1.0, ""]}}]},
    {"id": "parallel_1", "ground_truth": [{"weather.get": {
        "city": ["Rome"], "when": [{"day": ["today", ""], "hour": [12]}]}}]},
]
IRRELEVANT = [{"id": "irrelevance_0", "question": [[{"role": "user", "content": "Who wrote Hamlet?"}]],
               "function": FUNCTIONS[:1]}]


def jsonl(path: Path, records: list) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


@pytest.fixture
def folder(tmp_path) -> Path:
    root = tmp_path / "bfcl"
    jsonl(root / "BFCL_v4_parallel.json", QUESTIONS)
    jsonl(root / "possible_answer" / "BFCL_v4_parallel.json", list(reversed(ANSWERS)))  # any order
    jsonl(root / "BFCL_v4_irrelevance.json", IRRELEVANT)
    jsonl(root / "BFCL_v4_multi_turn_base.json", [{"id": "multi_turn_base_0"}])
    # A function-calling model: arguments as JSON text, dots written as underscores.
    jsonl(root / "result" / "fc-model" / "non_live" / "BFCL_v4_parallel_result.json", [
        {"id": "parallel_0", "result": [{"math_hypot": json.dumps({"x": 3, "y": 4})},
                                        {"weather_get": json.dumps({"city": "paris france", "scale": 1})}],
         "latency": 1.5},
        {"id": "parallel_1", "result": [{"weather_get": json.dumps({"city": "Rome", "when": {"hour": 12}, "unit": "C"})}]},
    ])
    jsonl(root / "result" / "fc-model" / "BFCL_v4_irrelevance_result.json", [
        {"id": "irrelevance_0", "result": [{"math_hypot": json.dumps({"x": 1, "y": 1})}]}])
    # A prompting model: Python call syntax, or prose.
    jsonl(root / "result" / "prompt-model" / "BFCL_v4_parallel_result.json", [
        {"id": "parallel_0", "result": "```python\n[math.hypot(x=3, y=5), weather.get(city='PARIS')]\n```"},
        {"id": "parallel_1", "result": "I cannot tell the weather."},
    ])
    jsonl(root / "result" / "prompt-model" / "BFCL_v4_irrelevance_result.json", [
        {"id": "irrelevance_0", "result": "Shakespeare wrote Hamlet."}])
    return root


def rows(out: Path) -> dict[str, dict]:
    run = cli("run", out, "--format", "jsonl")
    assert run.exit_code == 0, run.output
    return {row["trajectory_id"]: row for row in map(json.loads, run.stdout.splitlines())}


def test_a_folder_imports_every_category_with_its_model_results(folder, tmp_path):
    out = tmp_path / "out"
    assert get_importer("bfcl") is import_bfcl
    imported = cli("import", "bfcl", folder, "--out", out)
    assert imported.exit_code == 0, imported.output
    got = {tid: (row["axes"]["tool_correctness"]["points"], row["axes"]["tool_correctness"]["max_points"])
           for tid, row in rows(out).items()}
    assert got == {
        "irrelevance_0-reference": (2, 2),
        "irrelevance_0-fc-model": (1, 2),  # a call where none is right: the call count is lost
        "irrelevance_0-prompt-model": (2, 2),  # prose: no call, the right answer
        "parallel_0-reference": (9, 9),
        "parallel_0-fc-model": (9, 9),  # "paris france" is "Paris, France" normalised; 1 is 1.0
        "parallel_0-prompt-model": (8, 9),  # y=5 is wrong; "PARIS" is Paris; scale and z may be left out
        "parallel_1-reference": (5, 5),
        "parallel_1-fc-model": (5, 5),  # "unit" is not declared: reported, not scored
        "parallel_1-prompt-model": (1, 5),  # no call: only "no forbidden side effect" is earned
    }
    checked = cli("rubric", "check", out / "rubrics", "--lock", out / "rubrics" / "rubrics.lock")
    assert (checked.exit_code, checked.stdout) == (0, "every rubric matches its locked hash\n")
    summary = json.loads((out / "bfcl-import.json").read_text())
    assert summary["skipped"] == {"BFCL_v4_multi_turn_base.json": "not a single-turn Python category (its answers "
                                  "are not {function: {argument: values}})"}
    assert summary["categories"]["parallel"] == {"file": "BFCL_v4_parallel.json", "questions": 2,
                                                 "model_results": {"fc-model": 2, "prompt-model": 2}}


def test_model_trajectories_say_how_they_were_read(folder, tmp_path):
    out = tmp_path / "out"
    import_bfcl(folder, out)
    runs = {item.trajectory.id: item.trajectory for item in iter_trajectories(out / "trajectories" / "bfcl-parallel_1.jsonl")}
    fc = runs["parallel_1-fc-model"]
    assert [(c.tool, c.args) for c in fc.calls] == [("weather.get", {"city": "Rome", "when": {"hour": 12}, "unit": "C"})]
    assert fc.metadata["renamed"] == {"weather_get": "weather.get"}
    assert fc.prompt == "Weather in Rome at noon?" and fc.context == {"system-1": "Be brief."}
    prose = runs["parallel_1-prompt-model"]
    assert (prose.calls, prose.output) == ([], "I cannot tell the weather.")
    assert prose.metadata["decode_error"] == "not Python call syntax (SyntaxError)"
    reference = runs["parallel_1-reference"]
    # The first acceptable value of each argument; a dict's alternatives per key, expanded.
    assert [(c.tool, c.args) for c in reference.calls] == [("weather.get", {"city": "Rome", "when": {"day": "today", "hour": 12}})]
    assert reference.metadata == {"bfcl_id": "parallel_1", "category": "parallel", "kind": "reference",
                                  "source": "BFCL_v4_parallel.json:2, possible_answer/BFCL_v4_parallel.json:1"}
    rubric = load_rubric(out / "rubrics" / "bfcl-parallel_1.json")
    (expected,) = rubric.tool_correctness.expected_calls
    assert expected.values["when"].any_of == [{"day": "today", "hour": 12}, {"hour": 12}]
    assert str(rubric.registered) == "1970-01-01"
    fc_row = rows(out)["parallel_1-fc-model"]["axes"]["tool_correctness"]
    assert fc_row["notes"] == [{"call": 0, "tool": "weather.get", "arg": "unit",
                                "reason": "not declared by weather.get (reported, not scored)"}]


def test_one_question_file_imports_alone_and_the_same_each_time(folder, tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    import_bfcl(folder / "BFCL_v4_irrelevance.json", first)
    import_bfcl(folder / "BFCL_v4_irrelevance.json", second)
    files = sorted(p.relative_to(first).as_posix() for p in first.rglob("*") if p.is_file())
    assert files == ["bfcl-import.json", "rubrics/bfcl-irrelevance_0.json", "rubrics/rubrics.lock", "suite.yaml",
                     "trajectories/bfcl-irrelevance_0.jsonl"]
    assert all((first / f).read_bytes() == (second / f).read_bytes() for f in files)
    rubric = load_rubric(first / "rubrics" / "bfcl-irrelevance_0.json")
    assert rubric.tool_correctness.expected_calls == [] and rubric.tool_correctness.in_scope is None


def test_declarations_map_to_json_schema():
    assert json_schema(FUNCTIONS[1]["parameters"], "f") == {"type": "object", "properties": {
        "city": {"type": "string"}, "when": {"type": "object", "properties": {"day": {"type": "string"},
                                                                              "hour": {"type": "integer"}}},
        "scale": {"type": "number"}}, "required": ["city"]}
    assert json_schema({"type": "tuple", "items": {"type": "any"}, "optional": True}, "f") == {"type": "array", "items": {}}
    with pytest.raises(ValueError, match="f.a: type \"long\" is none of string, integer"):
        json_schema({"type": "dict", "properties": {"a": {"type": "long"}}}, "f")


@pytest.mark.parametrize(("text", "calls"), [
    pytest.param("[f(a=1, b='x')]", [("f", {"a": 1, "b": "x"})], id="a_list"),
    pytest.param("g.h.i(t=(1, 2), d={'k': [None, True]})", [("g.h.i", {"t": [1, 2], "d": {"k": [None, True]}})],
                 id="dotted_name_tuple_dict_no_brackets"),
    pytest.param("```tool_code\n[f(x=data['sales'], y=-2.5)]\n```", [("f", {"x": "data['sales']", "y": -2.5})],
                 id="a_variable_becomes_its_source_text"),
    pytest.param("[f(n=1e999, s={1, 2})]", [("f", {"n": "1e999", "s": "{1, 2}"})], id="not_json_becomes_text"),
    pytest.param("[]", [], id="no_call"),
])
def test_python_call_syntax_is_parsed_without_running_it(text, calls):
    assert python_calls(text) == calls


@pytest.mark.parametrize(("result", "problem"), [
    pytest.param("[f(1)]", "a call passes arguments by position, not by name", id="positional"),
    pytest.param("[print]", "an item is not a function call", id="not_a_call"),
    pytest.param("[f()()]", "a called name is not a plain (dotted) name", id="call_of_a_call"),
    pytest.param([{"f": "{not json"}], "the arguments of f are not JSON", id="bad_json_arguments"),
    pytest.param([{"f": "[1]"}], "the arguments of f are not an object", id="arguments_not_an_object"),
    pytest.param(["f(a=1)"], "an item of the result is not {function: arguments}", id="list_of_text"),
    pytest.param(7, "the result is neither a list of calls nor text", id="a_number"),
])
def test_a_result_that_is_no_call_list_is_no_call_with_the_reason(result, problem):
    calls, output, why = decode_result(result)
    assert calls == [] and why.startswith(problem)
    assert output == (result if isinstance(result, str) else json.dumps(result))


BAD = [
    pytest.param("BFCL_v4_parallel.json", '{"id": "parallel_0", "question": [], "function": [{"name": "f", '
                 '"parameters": {"type": "dict", "properties": {"a": {"type": "long"}}}}]}\n',
                 "BFCL_v4_parallel.json:1: parallel_0: f.a: type \"long\" is none of", id="unknown_type"),
    pytest.param("BFCL_v4_parallel.json", '{"id": "parallel_9", "question": [], "function": []}\n',
                 "no possible answer for parallel_9", id="question_without_answer"),
    pytest.param("BFCL_v4_parallel.json", '{"id": "parallel_0"\n', "BFCL_v4_parallel.json:1: invalid JSON", id="bad_json"),
    pytest.param("possible_answer/BFCL_v4_parallel.json", '{"id": "parallel_0", "ground_truth": {"f": {}}}\n'
                 '{"id": "parallel_1", "ground_truth": []}\n',
                 "possible_answer/BFCL_v4_parallel.json:1: parallel_0: ground_truth must be a list", id="answer_not_a_list"),
    pytest.param("possible_answer/BFCL_v4_parallel.json", '{"id": "parallel_0", "ground_truth": [{"math.hypot": '
                 '{"x": 3}}]}\n{"id": "parallel_1", "ground_truth": []}\n',
                 "possible_answer/BFCL_v4_parallel.json:1: parallel_0: math.hypot.x: expected a non-empty list",
                 id="acceptable_values_not_a_list"),
    pytest.param("possible_answer/BFCL_v4_parallel.json", '{"id": "parallel_0", "ground_truth": []}\n'
                 '{"id": "parallel_0", "ground_truth": []}\n', "BFCL_v4_parallel.json:2: id 'parallel_0' again",
                 id="answer_twice"),
    pytest.param("result/m/BFCL_v4_parallel_result.json", '{"id": "parallel_7", "result": []}\n',
                 "holds 1 record(s) for questions BFCL_v4_parallel.json does not hold (first: 'parallel_7')",
                 id="result_for_another_question"),
]


@pytest.mark.parametrize(("name", "text", "message"), BAD)
def test_bad_input_is_one_error_naming_the_file_and_nothing_is_written(folder, tmp_path, name, text, message):
    (folder / name).parent.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text, encoding="utf-8")
    result = cli("import", "bfcl", folder / "BFCL_v4_parallel.json", "--out", tmp_path / "out")
    assert result.exit_code == 2 and "Traceback" not in result.output
    (line,) = result.stderr.splitlines()
    assert line.startswith("judgekit: error: ") and message in line, line
    assert not (tmp_path / "out").exists()


def test_a_category_not_read_here_is_refused_by_name(folder, tmp_path):
    with pytest.raises(InputError, match="expected a BFCL question file BFCL_v<N>_<category>.json of a category read"):
        import_bfcl(folder / "BFCL_v4_multi_turn_base.json", tmp_path / "out")
    (folder / "possible_answer" / "BFCL_v4_parallel.json").unlink()
    with pytest.raises(InputError, match="no possible answers for it: expected .*possible_answer/BFCL_v4_parallel.json"):
        import_bfcl(folder, tmp_path / "out")


def test_a_question_with_no_acceptable_value_fails_every_answer_and_the_rest_imports(folder, tmp_path):
    """BFCL's checker fails every answer to a question whose ground truth lists no acceptable
    value for an argument ([]); the import keeps the rest of the file and lists that question."""
    answers = [
        {"id": "parallel_0", "ground_truth": [{"math.hypot": {"x": [], "y": [4]}}]},
        # Every dict alternative lists no value for a key: nothing is acceptable either.
        {"id": "parallel_1", "ground_truth": [{"weather.get": {"city": ["Rome"], "when": [{"day": [], "hour": [12]}]}}]},
    ]
    jsonl(folder / "possible_answer" / "BFCL_v4_parallel.json", answers)
    jsonl(folder / "result" / "fc-model" / "non_live" / "BFCL_v4_parallel_result.json", [
        {"id": "parallel_0", "result": [{"math_hypot": json.dumps({"x": 3, "y": 4})}]},
        {"id": "parallel_1", "result": [{"weather_get": json.dumps({"city": "Rome"})}]},
    ])
    (folder / "result" / "prompt-model" / "BFCL_v4_parallel_result.json").unlink()
    out = tmp_path / "out"
    imported = cli("import", "bfcl", folder, "--out", out)
    assert imported.exit_code == 0, imported.output
    summary = json.loads((out / "bfcl-import.json").read_text())
    assert summary["unanswerable"] == {"parallel_0": ["math.hypot.x"], "parallel_1": ["weather.get.when"]}
    got = {tid: (row["axes"]["tool_correctness"]["points"], row["axes"]["tool_correctness"]["max_points"])
           for tid, row in rows(out).items()}
    # No reference for either (no right answer exists); the model's answers lose the point
    # given (x=3: off-schema) or left out (when: missing); the irrelevance file is untouched.
    assert got == {"parallel_0-fc-model": (4, 5), "parallel_1-fc-model": (4, 5),
                   "irrelevance_0-reference": (2, 2), "irrelevance_0-fc-model": (1, 2),
                   "irrelevance_0-prompt-model": (2, 2)}
    lost = {tid: {i["point"]: i["reason"] for i in row["axes"]["tool_correctness"]["items"] if not i["earned"]}
            for tid, row in rows(out).items() if tid.startswith("parallel")}
    assert list(lost["parallel_0-fc-model"]) == ["call[0] math.hypot: arg x"], lost
    assert "off-schema" in lost["parallel_0-fc-model"]["call[0] math.hypot: arg x"], lost
    assert lost["parallel_1-fc-model"] == {"call[0] weather.get: arg when": "call #0: argument missing"}, lost
    # A dict alternative that lists no value for a key is dropped; the others still count.
    spec, reference = bfcl._expectation([{"day": []}, {"day": ["today"]}], {"type": "dict"}, "q: f.when")
    assert (spec["any_of"], reference) == ([{"day": "today"}], {"day": "today"})
