"""The LangSmith importer: run trees become trajectories, human feedback becomes labels.

Fixtures (``tests/data/langsmith``) follow the LangSmith SDK's ``Run`` and ``Feedback`` schemas:
``export/`` is the folder layout (``runs.jsonl`` + ``feedback.jsonl``) with an agent trace whose
runs are listed out of execution order, a tool run nested in a sub-chain that started before a
sibling tool run, a failed tool call and its retry, a tool call no tool run answered, and a RAG
trace without ``dotted_order``; ``mixed.json`` is one JSON list holding runs and feedback.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from judgekit.calibration.labels import load_labels
from judgekit.cli import main
from judgekit.errors import InputError
from judgekit.importers.langsmith import import_langsmith
from judgekit.trajectory import iter_trajectories

DATA = Path(__file__).parent / "data" / "langsmith"
AGENT, RAG, CALC = ("1b64098b-4ab7-43f6-afee-0000000000a1", "2c75109c-5bc8-44a7-bfff-0000000000b1",
                    "3d8621ad-6cd9-45b8-c000-0000000000c1")


def trajectories(out: Path) -> dict:
    return {item.trajectory.id: item.trajectory for item in iter_trajectories(out / "trajectories.jsonl")}


def jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture
def export(tmp_path) -> Path:
    out = tmp_path / "out"
    import_langsmith(DATA / "export", out)
    return out


# --- runs -> trajectories ----------------------------------------------------------------------


def test_one_trajectory_per_root_run_in_input_order(export):
    assert list(trajectories(export)) == [AGENT, RAG]
    assert sorted(p.name for p in export.iterdir()) == ["feedback-unmapped.jsonl", "labels.jsonl", "suite.yaml",
                                                        "trajectories.jsonl"]


def test_the_agent_trace_maps_to_calls_prompt_output_and_metadata(export):
    agent = trajectories(export)[AGENT]
    assert agent.prompt == "What's the weather in Paris? Email it to Bob."
    assert agent.context == {"message-0": "You are a helpful assistant."}
    assert agent.output == "It is 18\u00b0C and sunny in Paris; I emailed Bob."
    assert [(c.id, c.tool, c.args, c.result, c.error) for c in agent.calls] == [
        ("call_w", "get_weather", {"city": "Paris"}, {"temp_c": 18, "sky": "sunny"}, None),  # tool message, JSON
        ("call_c", "lookup_contact", {"name": "Bob"}, "bob@example.com", None),  # {"output": x} unwrapped
        ("call_e", "send_email", {"to": "bob@example.com", "body": "18C and sunny in Paris"}, None,
         "SMTPTimeout: no answer in 10 s"),  # the run's error: a failed call
        ("call_e2", "send_email", {"to": "bob@example.com", "body": "18C and sunny in Paris"}, "sent", None),
    ]
    assert agent.calls[0].started_at.isoformat() == "2024-05-01T12:00:01.500000"
    assert agent.latency_s == 6.5
    assert agent.metadata["metadata"] == {"ls_model_name": "gpt-4o-mini", "thread_id": "t-1"}
    assert (agent.metadata["tags"], agent.metadata["runs"], agent.metadata["run_type"]) == (["prod"], 9, "chain")


def test_calls_follow_dotted_order_not_the_file_or_start_times(export):
    runs = jsonl(DATA / "export" / "runs.jsonl")
    tools = [r for r in runs if r["run_type"] == "tool" and r["trace_id"] == AGENT]
    by_file = [r["name"] for r in tools]
    by_start = [r["name"] for r in sorted(tools, key=lambda r: r["start_time"])]
    by_dotted = [r["name"] for r in sorted(tools, key=lambda r: r["dotted_order"])]
    got = [c.tool for c in trajectories(export)[AGENT].calls]
    assert got == by_dotted == ["get_weather", "lookup_contact", "send_email", "send_email"]
    assert got != by_file and got != by_start  # get_weather ran inside a sub-chain that started first


def test_a_tool_call_no_tool_run_answered_is_kept_apart(export):
    agent = trajectories(export)[AGENT]
    assert "post_to_slack" not in [c.tool for c in agent.calls]
    assert agent.metadata["untraced_tool_calls"] == [
        {"name": "post_to_slack", "args": {"channel": "#weather"}, "id": "call_s",
         "llm_run_id": "1b64098b-4ab7-43f6-afee-0000000000a6"}
    ]


def test_question_answer_and_retrieved_documents(export):
    rag = trajectories(export)[RAG]
    assert (rag.prompt, rag.output, rag.calls) == ("When was the Eiffel Tower finished?", "It was finished in 1889.", [])
    assert rag.context == {"doc-1": "The Eiffel Tower was completed in March 1889.", "doc-2": "It is 330 metres tall."}
    assert rag.latency_s == 2.25 and "untraced_tool_calls" not in rag.metadata


def test_a_json_list_holding_runs_and_feedback(tmp_path):
    out = tmp_path / "out"
    written = import_langsmith(DATA / "mixed.json", out)
    assert written == [out / "trajectories.jsonl", out / "labels.jsonl", out / "feedback-unmapped.jsonl",
                       out / "suite.yaml"]
    calc = trajectories(out)[CALC]
    assert (calc.prompt, calc.output, calc.metadata["error"]) == ("What is 2 + 2?", "", "ValueError: the agent stopped")
    assert [(c.tool, c.args, c.result) for c in calc.calls] == [("calculator", {"expression": "2 + 2"}, "4")]
    (label,) = load_labels(out / "labels.jsonl")
    assert (label.trajectory_id, label.axis, label.label, label.labeler) == (CALC, "task_success", "fail", "langsmith-api")


def test_runs_without_feedback_write_no_labels(tmp_path):
    src = tmp_path / "runs.jsonl"
    src.write_text((DATA / "export" / "runs.jsonl").read_text(encoding="utf-8"), encoding="utf-8")
    assert import_langsmith(src, tmp_path / "out") == [tmp_path / "out" / n for n in ("trajectories.jsonl", "suite.yaml")]


# --- root inputs and outputs: the shapes read -------------------------------------------------

LC_HUMAN = {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "HumanMessage"],
            "kwargs": {"content": "hi there"}}
LC_AI = {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "AIMessage"],
         "kwargs": {"content": [{"type": "text", "text": "hello"}]}}


def one_root(tmp_path: Path, inputs, outputs) -> object:
    src = tmp_path / "one.jsonl"
    src.write_text(json.dumps(run("r1", "chain", inputs=inputs, outputs=outputs)) + "\n", encoding="utf-8")
    import_langsmith(src, tmp_path / "out")
    return trajectories(tmp_path / "out")["r1"]


@pytest.mark.parametrize(
    ("inputs", "prompt"),
    [
        pytest.param({"input": "a"}, "a", id="input"),
        pytest.param({"question": "q?", "k": 3}, "q?", id="question"),
        pytest.param({"messages": [{"type": "system", "content": "s"}, LC_HUMAN]}, "hi there", id="langchain_messages"),
        pytest.param({"messages": [[{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"},
                                    {"role": "user", "content": "z"}]]}, "z", id="nested_list_last_user"),
        pytest.param({"topic": "cats"}, "cats", id="the_only_text"),
        pytest.param({"a": 1, "b": "x"}, '{"a":1,"b":"x"}', id="else_json"),
    ],
)
def test_prompt_shapes(tmp_path, inputs, prompt):
    assert one_root(tmp_path, inputs, {"output": "o"}).prompt == prompt


@pytest.mark.parametrize(
    ("outputs", "output"),
    [
        pytest.param({"output": "o"}, "o", id="output"),
        pytest.param({"answer": "o", "sources": []}, "o", id="answer"),
        pytest.param({"output": LC_AI}, "hello", id="a_message"),
        pytest.param({"messages": [{"role": "assistant", "content": "one"}, {"role": "tool", "content": "t"},
                                   {"type": "ai", "content": "two"}]}, "two", id="last_assistant_message"),
        pytest.param({"generations": [[{"text": "g"}]]}, "g", id="llm_generations"),
        pytest.param({"choices": [{"message": {"role": "assistant", "content": "c"}}]}, "c", id="openai_choices"),
        pytest.param(None, "", id="none"),
    ],
)
def test_output_shapes(tmp_path, outputs, output):
    assert one_root(tmp_path, {"input": "i"}, outputs).output == output


# --- feedback -> labels ------------------------------------------------------------------------


def test_human_feedback_on_root_runs_becomes_labels(export):
    labels = load_labels(export / "labels.jsonl")  # the calibration loader reads them back
    got = {(lab.trajectory_id, lab.axis, lab.labeler): lab.label or lab.score for lab in labels}
    assert got == {
        (AGENT, "task_success", "alice"): "pass",  # correctness, score 1
        (AGENT, "faithfulness", "alice"): 0.5,
        (RAG, "faithfulness", "u-42"): 0.75,  # 4 on feedback_config's 1..5 scale
        (RAG, "task_success", "bob"): "pass",  # bob's later label (score 1) wins over his earlier 0
    }
    alice = next(lab for lab in labels if lab.axis == "task_success" and lab.labeler == "alice")
    assert (alice.note, alice.labeled_at.isoformat()) == ("right answer", "2024-05-02T09:00:00+00:00")


def test_feedback_that_maps_to_no_label_is_reported_with_why(export):
    unmapped = {row["feedback_id"][-2:]: row["reason"] for row in jsonl(export / "feedback-unmapped.jsonl")}
    assert set(unmapped) == {"03", "04", "05", "07", "08", "10"}
    assert unmapped["03"].startswith("key 'helpfulness' maps to no axis")
    assert unmapped["04"].startswith("feedback_source type 'model' is not a person's")
    assert unmapped["05"].startswith("not on a root run")  # feedback on the llm step
    assert unmapped["07"].startswith("task_success takes pass/fail") and "0.5" in unmapped["07"]
    assert unmapped["08"] == "superseded by a later label from the same labeler"
    assert unmapped["10"].startswith("not on a root run")  # a run not in the input


def test_the_key_to_axis_mapping_and_human_sources_can_be_given(tmp_path):
    out = tmp_path / "out"
    import_langsmith(DATA / "export", out, feedback_axes={"helpfulness": "faithfulness"}, human_sources=("app",))
    labels = load_labels(out / "labels.jsonl")
    assert [(lab.trajectory_id, lab.axis, lab.labeler, lab.score) for lab in labels] == [
        (AGENT, "faithfulness", "alice", 1.0)
    ]


# --- determinism and failures ------------------------------------------------------------------


def test_import_is_byte_identical_and_each_trace_independent_of_the_others(tmp_path):
    import_langsmith(DATA / "export", tmp_path / "a")
    import_langsmith(DATA / "export", tmp_path / "b")
    for name in ("trajectories.jsonl", "labels.jsonl", "feedback-unmapped.jsonl"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    # the traces in the other order, and feedback reversed: each trajectory and the labels are the same
    runs = jsonl(DATA / "export" / "runs.jsonl")
    swapped = tmp_path / "swapped"
    swapped.mkdir()
    rag_first = [r for r in runs if r["trace_id"] == RAG] + [r for r in runs if r["trace_id"] == AGENT]
    (swapped / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rag_first), encoding="utf-8")
    feedback = (DATA / "export" / "feedback.jsonl").read_text(encoding="utf-8").splitlines()
    (swapped / "feedback.jsonl").write_text("\n".join(reversed(feedback)) + "\n", encoding="utf-8")
    import_langsmith(swapped, tmp_path / "c")
    lines = lambda out: {json.loads(line)["id"]: line for line in (out / "trajectories.jsonl").read_text().splitlines()}
    assert lines(tmp_path / "c") == lines(tmp_path / "a")
    assert (tmp_path / "c" / "labels.jsonl").read_bytes() == (tmp_path / "a" / "labels.jsonl").read_bytes()


def run(run_id: str, run_type: str = "tool", parent: str | None = None, trace: str | None = "r1", **extra) -> dict:
    record = {"id": run_id, "name": extra.pop("name", run_id), "run_type": run_type, "parent_run_id": parent,
              "start_time": extra.pop("start", "2024-05-01T12:00:00Z"), "inputs": {}, "outputs": None, **extra}
    if trace is not None:
        record["trace_id"] = trace
    return record


ROOT = run("r1", "chain")


@pytest.mark.parametrize(
    ("records", "line", "message"),
    [
        pytest.param([ROOT, run("s1", trace="s1", parent=None), run("c1", parent="r1")], 3,
                     "trace r1 appears again after other traces", id="not_grouped_by_trace"),
        pytest.param([ROOT, run("r2", "chain")], 1, "has 2 root runs", id="two_roots"),
        pytest.param([ROOT, run("c1", parent="ghost")], 2, "parent run ghost is not in its trace", id="orphan"),
        pytest.param([{**ROOT, "dotted_order": "20240501T120000000000Zr1"},
                      run("c1", parent="r1", dotted_order="20240501T120001000000Zzz.20240501T120001000000Zc1")], 2,
                     "dotted_order does not extend its parent's", id="dotted_order_off_its_parent"),
        pytest.param([ROOT, {"hello": "world"}], 2, "neither a run", id="neither_run_nor_feedback"),
        pytest.param([ROOT, run("c1", parent="r1", name="")], 2, "non-empty string 'name'", id="nameless_run"),
        pytest.param([ROOT, run("c1", parent="r1", start="yesterday")], 2, "start_time", id="bad_time"),
        pytest.param([ROOT, run("c1", parent="r1"), run("c1", parent="r1")], 3, "run c1 appears twice", id="duplicate"),
        pytest.param([ROOT, run("c1", parent="c2"), run("c2", parent="c1")], 2, "loops back", id="parent_cycle"),
        pytest.param([ROOT, run("c1", parent="r1", trace=None)], 2, "its trace is unknown", id="child_without_trace"),
        pytest.param([ROOT, run("c1", parent="r1", inputs=["x"])], 2, "'inputs' must be an object", id="inputs_not_object"),
    ],
)
def test_bad_runs_fail_naming_file_and_line_and_leave_nothing(tmp_path, records, line, message):
    src = tmp_path / "runs.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    out = tmp_path / "out"
    with pytest.raises(InputError) as info:
        import_langsmith(src, out)
    assert (info.value.path, info.value.line) == (str(src), line)
    assert message in info.value.detail
    assert not out.exists()


def test_an_error_in_a_json_list_names_the_record(tmp_path):
    src = tmp_path / "export.json"
    src.write_text(json.dumps([ROOT, run("c1", parent="ghost")]), encoding="utf-8")
    with pytest.raises(InputError) as info:
        import_langsmith(src, tmp_path / "out")
    assert (info.value.path, info.value.line) == (str(src), None)
    assert info.value.detail == "record 1: run c1: parent run ghost is not in its trace"
    assert not (tmp_path / "out").exists()


def test_bad_feedback_fails_and_leaves_nothing(tmp_path):
    folder = tmp_path / "export"
    folder.mkdir()
    (folder / "runs.jsonl").write_text(json.dumps(ROOT) + "\n", encoding="utf-8")
    (folder / "feedback.jsonl").write_text(json.dumps({"run_id": "r1", "score": 1}) + "\n", encoding="utf-8")
    with pytest.raises(InputError) as info:
        import_langsmith(folder, tmp_path / "out")
    assert (info.value.path, info.value.line) == (str(folder / "feedback.jsonl"), 1)
    assert "needs a 'key'" in info.value.detail
    assert not (tmp_path / "out").exists()


def test_feedback_inside_a_folder_runs_file_is_refused(tmp_path):
    folder = tmp_path / "export"
    folder.mkdir()
    feedback = {"id": "f1", "run_id": "r1", "key": "correctness", "score": 1}
    (folder / "runs.jsonl").write_text(json.dumps(ROOT) + "\n" + json.dumps(feedback) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match="belongs in feedback.jsonl") as info:
        import_langsmith(folder, tmp_path / "out")
    assert info.value.line == 2


def test_a_folder_without_runs_says_what_it_needs(tmp_path):
    with pytest.raises(InputError, match=r"needs runs\.jsonl"):
        import_langsmith(tmp_path, tmp_path / "out")


def test_runs_without_dotted_order_are_ordered_by_start_time_under_their_parent(tmp_path):
    records = [ROOT, run("late", parent="r1", start="2024-05-01T12:00:03Z"),
               run("sub", "chain", parent="r1", start="2024-05-01T12:00:01Z"),
               run("inner", parent="sub", start="2024-05-01T12:00:04Z"),
               run("early", parent="r1", start="2024-05-01T12:00:02Z")]
    src = tmp_path / "runs.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    import_langsmith(src, tmp_path / "out")
    assert [c.tool for c in trajectories(tmp_path / "out")["r1"].calls] == ["inner", "early", "late"]


def test_the_cli_imports_and_refuses_options_it_does_not_take(tmp_path):
    runner = CliRunner()
    ok = runner.invoke(main, ["import", "langsmith", str(DATA / "export"), "--out", str(tmp_path / "out")])
    assert ok.exit_code == 0, ok.output
    assert ok.stdout.splitlines() == [str(tmp_path / "out" / n) for n in
                                      ("trajectories.jsonl", "labels.jsonl", "feedback-unmapped.jsonl", "suite.yaml")]
    refused = runner.invoke(main, ["import", "langsmith", str(DATA / "export"), "--out", str(tmp_path / "x"),
                                   "--registered", "2024-01-01"])
    assert refused.exit_code == 2 and "does not take --registered" in refused.output
    assert not (tmp_path / "x").exists()
