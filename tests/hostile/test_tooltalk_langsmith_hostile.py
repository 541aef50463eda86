"""Hostile inputs to the ToolTalk and LangSmith importers.

Each bug found has one test here (it failed before its fix); the rest are attacks that already
held, kept as regression checks. The ToolTalk held-out-like set is generated from a seed: new
conversations in ToolTalk's format on the published schemas plus APIs that no easy/ conversation
uses, with several calls per turn, several turns, failed calls, empty and unusual parameter values.
"""

from __future__ import annotations

import copy
import json
import random
import shutil
import time
from pathlib import Path

import pytest
import yaml

import judgekit
from judgekit.calibration.labels import load_labels
from judgekit.errors import InputError
from judgekit.importers import langsmith as langsmith_module
from judgekit.importers import tooltalk as tooltalk_module
from judgekit.importers.langsmith import import_langsmith
from judgekit.importers.tooltalk import import_tooltalk
from judgekit.rubric.model import load_rubric
from judgekit.trajectory import Trajectory, iter_trajectories

ALARM_S = 30
TOKEN = "98a5a87a-7714-b404"


def only(path: Path) -> Trajectory:
    (loaded,) = list(iter_trajectories(path))
    return loaded.trajectory


# --- ToolTalk: a layout of our own ---------------------------------------------------------------

EXTRA_APIS = [  # APIs no easy/ conversation uses, one of them on a database that is not published
    {"name": "GetWeatherAlerts", "description": "Weather alerts.", "parameters": {"location": {"type": "string"}},
     "output": {}, "database_name": "Weather", "is_action": False, "requires_auth": False},
    {"name": "CancelSubscription", "description": "Cancels a plan.", "parameters": {"plan": {"type": "string"}},
     "output": {}, "database_name": "Subscription", "is_action": True, "requires_auth": True},
    {"name": "Ping", "description": "No parameters.", "parameters": {}, "output": {}, "database_name": None,
     "is_action": False, "requires_auth": False},
]
SMALL_SCHEMAS = [
    {"name": "AddAlarm", "parameters": {"time": {"type": "string"}}, "database_name": "Alarm", "is_action": True,
     "requires_auth": True},
    {"name": "FindAlarms", "parameters": {}, "database_name": "Alarm", "is_action": False, "requires_auth": True},
]


def layout(root: Path, conversations: dict[str, dict], schemas: list[dict], databases: Path | None = None) -> Path:
    """root/conv/<name>.json, root/databases/, root/api_schemas.json; returns root/conv."""
    (root / "conv").mkdir(parents=True)
    if databases is not None:
        shutil.copytree(databases, root / "databases")
    else:
        (root / "databases").mkdir()
        (root / "databases" / "Alarm.json").write_text('{"justinkool": {}}', encoding="utf-8")
    (root / "api_schemas.json").write_text(json.dumps(schemas), encoding="utf-8")
    for name, conversation in conversations.items():
        (root / "conv" / f"{name}.json").write_text(json.dumps(conversation, ensure_ascii=False), encoding="utf-8")
    return root / "conv"


def conversation(turns: list[dict], name: str = "Hostile-1") -> dict:
    return {"name": name, "conversation_id": "c-" + name, "user": {"username": "justinkool", "session_token": TOKEN},
            "metadata": {"location": "Tokyo", "timestamp": "2023-09-11 09:00:00", "session_token": TOKEN,
                         "username": "justinkool"}, "conversation": turns}


def api(name: str, params: dict, response=None, exception=None) -> dict:
    return {"request": {"api_name": name, "parameters": params}, "response": response, "exception": exception}


# --- ToolTalk: the held-out-like set -------------------------------------------------------------

ODD_TEXT = ["", " lead", "trail ", "yes", "null", "~", "2023-09-11", "2023-09-11 09:00:00", "1e3", "0x1F", "&a", "*a",
            "!!python/object:os.system", "---", "a: b", "- item", "line1\nline2", "tab\there", "\u2028sep\u2029",
            "nel\x85here", "caf\u00e9 \u65e5\u672c\u8a9e \U0001F600", "\u05e9\u05dc\u05d5\u05dd", "e\u0301",
            "\u0000nul", "\ufeffbom", "x" * 3000, "{{template}}", "%s", "C:\\path", "True", "On", "0o17", "12:30:00"]
ODD_VALUES = [None, 0, -1, 2**63, 2**70, 0.1, -0.0, 1e300, 5e-324, 1.0, True, False, [], {}, [None],
              {"nested": {"deep": [1, "two", {"three": None}]}}, ["a", "a"], [1, 1.0], {"": ""},
              {"$ref": "http://example.com/x"}, {"const": 1}, {"type": "string"}]


def held_out(schemas: list[dict], seed: int, count: int) -> dict[str, dict]:
    """``count`` conversations in ToolTalk's format calling ``schemas``' APIs with odd values."""
    rng = random.Random(seed)
    by_name = {schema["name"]: schema for schema in schemas}

    def params(name: str) -> dict:
        chosen = {key: rng.choice(ODD_TEXT + ODD_VALUES) for key in by_name[name]["parameters"] if rng.random() < 0.8}
        if by_name[name].get("requires_auth"):
            chosen["session_token"] = TOKEN
        return chosen

    def call(name: str) -> dict:
        failed = rng.random() < 0.15
        return api(name, params(name), None if failed else rng.choice([{"status": "success"}, [1, 2], "ok", None]),
                   rng.choice(["Boom.", "\u00fcn\u00efcode \u2028"]) if failed else None)

    out = {}
    for i in range(count):
        turns: list[dict] = []
        for _ in range(rng.randint(1, 5)):
            turns.append({"index": len(turns), "role": "user", "text": rng.choice(ODD_TEXT[1:20])})
            made = [call(rng.choice(sorted(by_name))) for _ in range(rng.choice([0, 1, 3, 6]))]
            if made and rng.random() < 0.3:
                made.append(copy.deepcopy(made[0]))  # the same call twice
            turns.append({"index": len(turns), "role": "assistant", "text": rng.choice(["", "Done.", "\u2705"]),
                          "apis": made})
        name = rng.choice([f"Held-{i}", f"Held Out #{i} \u00fc", f"R\u00e9veil/\u00c9t\u00e9-{i}", f"held.{i}"])
        out[f"c{i:03d}"] = conversation(turns, name)
    return out


def reference(conversation: dict) -> list[dict]:
    return [a for turn in conversation["conversation"] if turn["role"] == "assistant" for a in turn.get("apis") or []]


def test_a_held_out_like_set_imports_scores_full_marks_and_keeps_every_action_as_a_write(shared_data, tmp_path):
    published = shared_data("tooltalk")
    schemas = json.loads((published / "api_schemas.json").read_text(encoding="utf-8")) + EXTRA_APIS
    conversations = held_out(schemas, seed=7, count=24)
    out = tmp_path / "out"
    import_tooltalk(layout(tmp_path / "tt", conversations, schemas, published / "databases"), out)

    record = judgekit.run_suite(out / "suite.yaml")
    assert len(record.results) == len(conversations)
    for result in record.results:
        tc = result.axes["tool_correctness"]
        assert (tc.status, tc.score) == ("scored", 1.0), (result.trajectory_id, [i for i in tc.items if not i.earned])

    actions = {schema["name"] for schema in schemas if schema["is_action"]}
    policy = yaml.safe_load((out / "suite.yaml").read_text(encoding="utf-8"))["safety"]["tools"]
    assert {name for name, kind in policy.items() if kind == "write"} == actions
    by_source = {only(p).metadata["source"]: only(p) for p in (out / "trajectories").glob("*.jsonl")}
    writes = 0
    for name, conv in conversations.items():
        trajectory = by_source[f"{name}.json"]
        calls = reference(conv)
        assert [(c.tool, c.args, c.error) for c in trajectory.calls] == [
            (a["request"]["api_name"], a["request"]["parameters"], a["exception"]) for a in calls]
        tc = load_rubric(out / "rubrics" / f"{trajectory.id}.yaml").tool_correctness
        expected = [(e.tool, e.args) for e in tc.expected_calls]
        assert expected == [(a["request"]["api_name"], {k: {"const": v} for k, v in a["request"]["parameters"].items()})
                            for a in calls if a["exception"] is None]
        writes += sum(a["request"]["api_name"] in actions and a["exception"] is None for a in calls)
        assert actions <= set(tc.in_scope)
    assert writes > 20 and any("CancelSubscription" == a["request"]["api_name"]
                               for conv in conversations.values() for a in reference(conv))


# --- ToolTalk: bugs found ------------------------------------------------------------------------


@pytest.mark.parametrize("indexes", [
    pytest.param([None] * 6, id="null_indexes"),
    pytest.param([1] * 6, id="one_index_repeated"),
    pytest.param([0, 1, 4, 3, "absent", 5], id="a_turn_without_index_at_a_place_another_index_names"),
])
def test_every_later_user_turn_reaches_context_whatever_its_index(tmp_path, indexes):
    texts = ["Set an alarm.", "For 7.", "Thanks!"]
    turns = []
    for n, text in enumerate(texts):
        turns.append({"role": "user", "text": text})
        turns.append({"role": "assistant", "text": "ok", "apis": [api("AddAlarm", {"time": f"0{n}:00"}, {"a": n})]})
    for turn, index in zip(turns, indexes):
        if index != "absent":
            turn["index"] = index
    out = tmp_path / "out"
    import_tooltalk(layout(tmp_path / "tt", {"c": conversation(turns)}, SMALL_SCHEMAS), out)
    trajectory = only(out / "trajectories" / "hostile-1.jsonl")
    assert [t.text for t in trajectory.turns] == texts[1:]
    assert sorted(v for k, v in trajectory.context.items() if k.startswith("user-")) == sorted(texts[1:])


def test_a_very_long_conversation_name_imports_under_a_short_file_name(tmp_path):
    turns = [{"role": "user", "text": "hi"}, {"role": "assistant", "text": "", "apis": [api("FindAlarms", {}, [])]}]
    long_a, long_b = "Alarm-" + "x" * 300 + "-a", "Alarm-" + "x" * 300 + "-b"  # cut the same, named apart
    out = tmp_path / "out"
    import_tooltalk(layout(tmp_path / "tt", {"a": conversation(turns, long_a), "b": conversation(turns, long_b)},
                           SMALL_SCHEMAS), out)
    files = sorted((out / "trajectories").glob("*.jsonl"))
    assert len(files) == 2 and all(len(p.name) < 120 for p in files)
    assert {only(p).metadata["name"] for p in files} == {long_a, long_b}
    assert {r.axes["tool_correctness"].score for r in judgekit.run_suite(out / "suite.yaml").results} == {1.0}


# --- all or nothing: an exception of any kind mid-import -----------------------------------------


class Boom(Exception):
    """Not an InputError: a bug or an outside failure in the middle of an import."""


def _ls_two_traces(folder: Path) -> Path:
    folder.mkdir(parents=True)
    src = folder / "runs.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in (run("r1", "chain"), run("r2", "chain", trace="r2"))),
                   encoding="utf-8")
    return src


@pytest.mark.parametrize("error", [Boom("mid-import"), KeyboardInterrupt(), MemoryError(), InputError("bad", "x")],
                         ids=["exception", "keyboard_interrupt", "memory_error", "input_error"])
@pytest.mark.parametrize("which", ["tooltalk", "langsmith"])
def test_an_exception_of_any_kind_mid_import_leaves_out_as_it_was(tmp_path, monkeypatch, which, error):
    if which == "tooltalk":
        turns = [{"role": "user", "text": "hi"}, {"role": "assistant", "text": "", "apis": [api("FindAlarms", {})]}]
        src = layout(tmp_path / "tt", {"a": conversation(turns, "A"), "b": conversation(turns, "B")}, SMALL_SCHEMAS)
        module, target, importer = tooltalk_module, "_convert", import_tooltalk
    else:
        src = _ls_two_traces(tmp_path / "ls")
        module, target, importer = langsmith_module, "_trajectory", import_langsmith
    real, calls = getattr(module, target), []

    def second_fails(*args, **kwargs):  # the first item is converted (and written to the stage) first
        calls.append(1)
        if len(calls) == 2:
            raise error
        return real(*args, **kwargs)

    monkeypatch.setattr(module, target, second_fails)
    fresh, existing = tmp_path / "fresh", tmp_path / "existing"
    existing.mkdir()
    (existing / "keep.txt").write_text("mine", encoding="utf-8")
    for out in (fresh, existing):
        calls.clear()
        with pytest.raises(type(error)):
            importer(src, out)
    assert not fresh.exists()
    assert [p.name for p in existing.iterdir()] == ["keep.txt"]
    assert not [p for p in tmp_path.iterdir() if ".importing-" in p.name]  # no staging folder left behind


# --- LangSmith --------------------------------------------------------------------------------------


def run(run_id: str, run_type: str = "tool", parent: str | None = None, trace: str | None = "r1", **extra) -> dict:
    record = {"id": run_id, "name": extra.pop("name", run_id), "run_type": run_type, "parent_run_id": parent,
              "start_time": extra.pop("start", "2024-05-01T12:00:00Z"), "inputs": {}, "outputs": None, **extra}
    if trace is not None:
        record["trace_id"] = trace
    return record


def feedback(**extra) -> dict:
    return {"id": "f1", "run_id": "r1", "key": "faithfulness", "score": 0.5, "created_at": "2024-05-02T09:00:00Z",
            "feedback_source": {"type": "app", "user_name": "alice"}, **extra}


def ls_import(tmp_path: Path, records: list[dict], name: str = "runs.jsonl") -> Path:
    src = tmp_path / name
    src.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    out = tmp_path / ("out-" + name)
    import_langsmith(src, out)
    return out


def ls_trajectories(out: Path) -> dict[str, Trajectory]:
    return {item.trajectory.id: item.trajectory for item in iter_trajectories(out / "trajectories.jsonl")}


def unmapped(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "feedback-unmapped.jsonl").read_text(encoding="utf-8").splitlines()]


# --- LangSmith: bugs found -----------------------------------------------------------------------

EDGE = "0001-01-01T00:30:00+01:00"  # a time whose UTC is before year 1: off Python's calendar


@pytest.mark.parametrize("records", [
    pytest.param([run("r1", "chain", start=EDGE)], id="root_start_time"),
    pytest.param([run("r1", "chain", end_time="9999-12-31T23:30:00-01:00")], id="root_end_time"),
    pytest.param([run("r1", "chain"), run("c1", parent="r1", start=EDGE)], id="a_tool_runs_start_time"),
    pytest.param([run("r1", "chain"), feedback(created_at=EDGE), feedback(id="f2")], id="feedback_created_at"),
])
def test_times_at_the_edge_of_the_calendar_import_instead_of_crashing(tmp_path, records):
    out = ls_import(tmp_path, records)
    assert list(ls_trajectories(out)) == ["r1"]


def test_a_huge_score_on_a_scaled_axis_is_reported_not_a_crash(tmp_path):
    out = ls_import(tmp_path, [run("r1", "chain"), feedback(score=10**400, feedback_config={"min": 0, "max": 5})])
    assert load_labels(out / "labels.jsonl") == []
    (row,) = unmapped(out)
    assert row["reason"].startswith("faithfulness takes a score in [0, 1]")


def test_two_traces_with_one_root_run_id_are_refused(tmp_path):
    with pytest.raises(InputError) as info:
        ls_import(tmp_path, [run("r1", "chain", trace="t1"), run("r1", "chain", trace="t2")])
    assert info.value.line == 2 and "r1" in info.value.detail and "two traces" in info.value.detail
    assert not (tmp_path / "out-runs.jsonl").exists()


def test_a_root_whose_dotted_order_names_no_run_is_its_own_trace(tmp_path):
    # the docstring: a trace is the trace_id, else the run id at the head of dotted_order, else (a root) its id
    out = ls_import(tmp_path, [run("r1", "chain", trace=None, dotted_order="garbage"),
                               run("r2", "chain", trace=None, dotted_order="Z")])
    assert list(ls_trajectories(out)) == ["r1", "r2"]


def test_a_run_tree_with_nested_child_runs_keeps_its_calls(tmp_path):
    # Client.read_run(..., load_child_runs=True) gives one root run with its tree in child_runs
    tool = run("t1", parent="c1", name="search", start="2024-05-01T12:00:02Z", inputs={"q": "x"},
               outputs={"output": "found"})
    sub = {**run("c1", "chain", parent="r1", start="2024-05-01T12:00:01Z"), "child_runs": [tool]}
    late = {k: v for k, v in run("t2", name="send", start="2024-05-01T12:00:03Z").items()
            if k not in ("parent_run_id", "trace_id")}  # nested runs may leave parent and trace to the tree
    tree = {**run("r1", "chain", inputs={"input": "go"}), "child_runs": [late, sub]}
    trajectory = ls_trajectories(ls_import(tmp_path, [tree]))["r1"]
    assert [(c.tool, c.args, c.result) for c in trajectory.calls] == [("search", {"q": "x"}, "found"),
                                                                      ("send", {}, None)]
    assert trajectory.metadata["runs"] == 4


def test_labels_tied_on_time_do_not_depend_on_the_feedback_order(tmp_path):
    ties = [feedback(id=None, score=0.25), feedback(id=None, score=0.75)]
    first = ls_import(tmp_path, [run("r1", "chain"), *ties], "a.jsonl")
    second = ls_import(tmp_path, [run("r1", "chain"), *reversed(ties)], "b.jsonl")
    assert (first / "labels.jsonl").read_bytes() == (second / "labels.jsonl").read_bytes()
    assert len(load_labels(first / "labels.jsonl")) == 1


# --- LangSmith: attacks that held ------------------------------------------------------------------


@pytest.mark.parametrize(("records", "message"), [
    pytest.param([run("r1", "chain"), run("c1", parent="c1")], "loops back", id="a_run_its_own_parent"),
    pytest.param([run("r1", "chain"), run("a", parent="b"), run("b", parent="c"), run("c", parent="a")],
                 "loops back", id="a_three_run_cycle"),
    pytest.param([run("c1", parent="r1"), run("c2", parent="c1")], "0 root runs", id="no_root"),
    pytest.param([run("r1", "chain"), run("c1", parent="r1", inputs="2 + 2")], "'inputs' must be an object",
                 id="tool_inputs_a_string"),
    pytest.param([run("r1", "chain"), run("c1", parent="r1", error={"code": 1})], "error", id="error_not_text"),
    pytest.param([run("r1", "chain", dotted_order="20240501T120000000000Zr1"),
                  run("c1", parent="r1", dotted_order="20240501T120000000000Zr2.20240501T120000000000Zc1")],
                 "does not extend", id="dotted_order_under_another_root"),
    pytest.param([run("r1", "chain"), run("r2", "chain", trace="r2"), run("c1", parent="r1")],
                 "appears again", id="interleaved_traces"),
    pytest.param([{**run("r1", "chain"), "child_runs": {"c1": run("c1")}}], "'child_runs' must be a list",
                 id="child_runs_not_a_list"),
    pytest.param([{**run("r1", "chain"), "child_runs": [{"id": "c1"}]}], "not a run", id="child_runs_not_runs"),
    pytest.param([{**run("r1", "chain"), "child_runs": [run("c1", parent="r1")]}, run("c1", parent="r1")],
                 "appears twice", id="a_nested_run_also_listed_flat"),
])
def test_hostile_run_trees_are_refused_naming_the_file(tmp_path, records, message):
    with pytest.raises(InputError) as info:
        ls_import(tmp_path, records)
    assert info.value.path == str(tmp_path / "runs.jsonl") and message in info.value.detail
    assert not (tmp_path / "out-runs.jsonl").exists()


def test_feedback_of_every_odd_kind_is_labelled_or_reported_never_guessed(tmp_path):
    records = [run("r1", "chain"), run("c1", parent="r1"),
               feedback(id="ok"), feedback(id="step", run_id="c1"), feedback(id="ghost", run_id="nobody"),
               feedback(id="text", score="0.5"), feedback(id="big", score=7), feedback(id="model",
               feedback_source={"type": "model"}), feedback(id="bool", key="correctness", score=True),
               feedback(id="half", key="correctness", score=0.5)]
    out = ls_import(tmp_path, records)
    labels = load_labels(out / "labels.jsonl")
    assert sorted((lab.axis, lab.label or lab.score) for lab in labels) == [("faithfulness", 0.5),
                                                                           ("task_success", "pass")]
    assert {row["feedback_id"] for row in unmapped(out)} == {"step", "ghost", "text", "big", "model", "half"}


def test_a_deep_run_chain_without_dotted_order_imports_in_order(tmp_path):
    depth = 400
    records = [run("r1", "chain")] + [run(f"c{i}", parent="r1" if i == 0 else f"c{i - 1}") for i in range(depth)]
    trajectory = ls_trajectories(ls_import(tmp_path, list(reversed(records))))["r1"]
    assert [c.tool for c in trajectory.calls] == [f"c{i}" for i in range(depth)]


# --- LangSmith: pathological cost ------------------------------------------------------------------


def test_many_retrieved_documents_import_in_linear_time(tmp_path):
    docs = [{"page_content": f"doc {i}"} for i in range(8000)]
    records = [run("r1", "chain"), run("d1", "retriever", parent="r1", outputs={"documents": docs})]
    start = time.perf_counter()
    context = ls_trajectories(ls_import(tmp_path, records))["r1"].context
    assert time.perf_counter() - start < 3  # each document was numbered by counting the ones before it
    assert (len(context), context["doc-1"], context["doc-8000"]) == (8000, "doc 0", "doc 7999")
