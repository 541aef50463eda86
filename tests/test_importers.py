"""Importers: OpenAI chat transcripts and tau-bench run records become judgekit files.

The tau-bench file here is synthetic but in tau-bench's own format (task_id, trial, reward,
info.task.actions / outputs / instruction, traj of OpenAI messages); the real one is used in
tests/test_tau_bench.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from judgekit.cli import main
from judgekit.errors import InputError
from judgekit.importers import get_importer, importer_names
from judgekit.importers.openai_chat import import_openai_chat
from judgekit.importers.tau_bench import import_tau_bench
from judgekit.rubric.model import load_rubric
from judgekit.trajectory import iter_trajectories


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def tool_call(call_id: str, name: str, arguments) -> dict:
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


def assistant_calls(*calls: dict) -> dict:
    return {"role": "assistant", "content": None, "tool_calls": list(calls)}


def tool_result(call_id: str, content, name: str = "") -> dict:
    return {"role": "tool", "tool_call_id": call_id, "name": name, "content": content if isinstance(content, str) else json.dumps(content)}


CONVERSATION = [
    {"role": "system", "content": "You are a support agent."},
    {"role": "user", "content": "Change my email to new@x.com. I am user 1."},
    assistant_calls(tool_call("c1", "get_user", {"user_id": 1}), tool_call("c2", "update_user", {"user_id": 1, "email": "new@x.com"})),
    # Results may come back in any order; they are joined by tool_call_id, not position.
    tool_result("c2", {"ok": True}),
    tool_result("c1", {"id": 1, "email": "a@x.com"}),
    {"role": "assistant", "content": [{"type": "text", "text": "Updated. "}, {"type": "text", "text": "Anything else?"}]},
    {"role": "user", "content": "No, thanks."},
    {"role": "assistant", "content": "Your email is now new@x.com."},
]


def write_jsonl(path: Path, records: list) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def imported(out: Path) -> list:
    return [item.trajectory for item in iter_trajectories(out / "trajectories.jsonl")]


# --- openai-chat --------------------------------------------------------------------------------


def test_registry_lists_builtins():
    assert {"openai-chat", "tau-bench"} <= set(importer_names())
    assert get_importer("openai-chat") is import_openai_chat
    with pytest.raises(InputError, match="unknown import format 'nope'; known: "):
        get_importer("nope")


def test_openai_chat_jsonl_joins_calls_and_results(tmp_path):
    src = write_jsonl(
        tmp_path / "chats.jsonl",
        [{"id": "conv-1", "messages": CONVERSATION, "metadata": {"model": "m1"}, "latency_s": 4.5}, CONVERSATION[1:3] + CONVERSATION[3:5]],
    )
    written = import_openai_chat(src, tmp_path / "out")
    assert written == [tmp_path / "out" / "trajectories.jsonl", tmp_path / "out" / "suite.yaml"]  # a suite to fill in
    first, second = imported(tmp_path / "out")
    assert first.id == "conv-1" and second.id == "chats-2"  # no id: <file stem>-<line>
    assert first.prompt == "Change my email to new@x.com. I am user 1."
    assert [(c.id, c.tool, c.args, c.result, c.error) for c in first.calls] == [
        ("c1", "get_user", {"user_id": 1}, {"id": 1, "email": "a@x.com"}, None),
        ("c2", "update_user", {"user_id": 1, "email": "new@x.com"}, {"ok": True}, None),
    ]
    assert first.output == "Your email is now new@x.com."  # the last assistant text
    assert first.context == {"system-1": "You are a support agent.", "user-6": "No, thanks."}
    assert first.metadata == {"model": "m1", "imported_from": "chats.jsonl:1"}
    assert first.latency_s == 4.5
    assert second.metadata == {"imported_from": "chats.jsonl:2"} and second.output == ""


@pytest.mark.parametrize(
    ("document", "ids"),
    [
        pytest.param([{"id": "a", "messages": CONVERSATION}, {"messages": CONVERSATION}], ["a", "chats-2"], id="json_list_of_records"),
        pytest.param(CONVERSATION, ["chats-1"], id="json_list_of_messages_is_one_conversation"),
        pytest.param([CONVERSATION, CONVERSATION], ["chats-1", "chats-2"], id="json_list_of_message_lists"),
    ],
)
def test_openai_chat_json_list_input(tmp_path, document, ids):
    src = tmp_path / "chats.json"
    src.write_text(json.dumps(document, indent=2), encoding="utf-8")
    result = cli("import", "openai-chat", src, "--out", tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert result.stdout == f"{tmp_path / 'out' / 'trajectories.jsonl'}\n{tmp_path / 'out' / 'suite.yaml'}\n"
    trajectories = imported(tmp_path / "out")
    assert [t.id for t in trajectories] == ids
    assert all([c.tool for c in t.calls] == ["get_user", "update_user"] for t in trajectories)


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        pytest.param('{"user_id": 1, "email": ', "the arguments were not valid JSON", id="truncated_json"),
        pytest.param("user_id=1", "the arguments were not valid JSON", id="not_json_at_all"),
        pytest.param("[1, 2]", "the arguments were not a JSON object", id="json_list_not_object"),
    ],
)
def test_unparseable_arguments_are_a_failed_call(tmp_path, arguments, error):
    messages = [
        {"role": "user", "content": "Change my email"},
        assistant_calls(tool_call("c1", "update_user", arguments)),
        tool_result("c1", {"ok": True}),  # even a happy-looking result: the call as sent was not valid
    ]
    src = write_jsonl(tmp_path / "chats.jsonl", [{"id": "x", "messages": messages}])
    import_openai_chat(src, tmp_path / "out")
    (trajectory,) = imported(tmp_path / "out")
    (call,) = trajectory.calls
    assert (call.tool, call.error, call.args, call.succeeded) == ("update_user", error, {"$unparsed": arguments}, False)
    assert call.result == {"ok": True}


def test_unknown_tool_call_id_names_file_and_line(tmp_path):
    bad = [{"role": "user", "content": "hi"}, assistant_calls(tool_call("c1", "get_user", {})), tool_result("c9", "x")]
    src = write_jsonl(tmp_path / "chats.jsonl", [{"messages": CONVERSATION}, {"messages": bad}])
    result = cli("import", "openai-chat", src, "--out", tmp_path / "out")
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert result.stderr == f"judgekit: error: {src}:2: message 2: tool result for unknown tool_call_id 'c9'\n"
    assert not (tmp_path / "out" / "trajectories.jsonl").exists()  # nothing half-written


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        pytest.param('{"messages": [', "invalid JSON", id="truncated_line"),
        pytest.param('{"messages": "hello"}', "expected a list of messages or an object with 'messages'", id="messages_not_a_list"),
        pytest.param('"just a string"', "expected a list of messages", id="record_is_a_string"),
        pytest.param('{"messages": [], "model": "m"}', "unknown key(s): model", id="unknown_record_key"),
        pytest.param('{"messages": [{"content": "no role"}]}', "message 0 is not a chat message with a role", id="message_without_role"),
    ],
)
def test_openai_chat_bad_record_names_file_and_line(tmp_path, line, expected):
    src = tmp_path / "chats.jsonl"
    src.write_text(json.dumps({"messages": CONVERSATION}) + "\n\n" + line + "\n", encoding="utf-8")
    result = cli("import", "openai-chat", src, "--out", tmp_path / "out")
    assert result.exit_code == 2 and "Traceback" not in result.output
    (message,) = result.stderr.splitlines()
    assert message.startswith(f"judgekit: error: {src}:3: ") and expected in message


def test_missing_source_file(tmp_path):
    result = cli("import", "openai-chat", tmp_path / "nope.jsonl", "--out", tmp_path / "out")
    assert result.exit_code == 2 and result.stderr == f"judgekit: error: {tmp_path / 'nope.jsonl'}: file not found\n"


def test_imported_trajectories_score_failed_calls_as_nothing(tmp_path):
    messages = [
        {"role": "user", "content": "Change my email to new@x.com"},
        assistant_calls(tool_call("c1", "update_user", '{"user_id": 1, "email": ')),
        tool_result("c1", "ok"),
        assistant_calls(tool_call("c2", "update_user", {"user_id": 1, "email": "new@x.com"})),
        tool_result("c2", "ok"),
        {"role": "assistant", "content": "Done"},
    ]
    write_jsonl(tmp_path / "chats.jsonl", [{"id": "x", "messages": messages}])
    assert cli("import", "openai-chat", tmp_path / "chats.jsonl", "--out", tmp_path).exit_code == 0
    (tmp_path / "r.yaml").write_text(
        "id: r\nversion: 1.0.0\nregistered: 2024-05-01\ntool_correctness:\n  guide: One update_user call with the new email.\n"
        "  expected_calls:\n    - tool: update_user\n      args: {email: {const: new@x.com}}\n",
        encoding="utf-8",
    )
    (tmp_path / "suite.yaml").write_text("name: s\nrubrics: [r.yaml]\ntrajectories: [{file: trajectories.jsonl, rubric: r}]\n", encoding="utf-8")
    result = cli("run", tmp_path, "--format", "jsonl")
    row = json.loads(result.stdout)
    tc = row["axes"]["tool_correctness"]
    assert (tc["points"], tc["max_points"], tc["counts"]["calls_failed"]) == (4, 4, 1)


def test_jsonl_record_with_a_unicode_line_separator_in_a_string(tmp_path):
    messages = [{"role": "user", "content": "first line\u2028second line"}, {"role": "assistant", "content": "ok"}]
    src = tmp_path / "chats.jsonl"
    src.write_text(json.dumps({"id": "x", "messages": messages}, ensure_ascii=False) + "\n", encoding="utf-8")
    import_openai_chat(src, tmp_path / "out")
    (trajectory,) = imported(tmp_path / "out")
    assert trajectory.prompt == "first line\u2028second line"


def test_negative_latency_is_refused_at_import(tmp_path):
    src = write_jsonl(tmp_path / "chats.jsonl", [{"id": "x", "messages": CONVERSATION, "latency_s": -5}])
    with pytest.raises(InputError) as info:
        import_openai_chat(src, tmp_path / "out")
    assert info.value.line == 1


@pytest.mark.parametrize(
    "record",
    [
        pytest.param({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "tool_calls": ["oops"]}]}, id="tool_call_not_an_object"),
        pytest.param({"prompt": 5, "messages": [{"role": "user", "content": "a"}]}, id="prompt_not_a_string"),
        pytest.param({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": None}}]}]}, id="tool_name_null"),
        pytest.param({"messages": [{"role": "user", "content": "a"}], "metadata": ["x"]}, id="metadata_not_an_object"),
    ],
)
def test_malformed_record_shapes_are_input_errors(tmp_path, record):
    src = write_jsonl(tmp_path / "chats.jsonl", [record])
    result = cli("import", "openai-chat", src, "--out", tmp_path / "out")
    assert result.exit_code == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"judgekit: error: {src}:1: ")


def test_json_list_error_does_not_claim_a_wrong_line(tmp_path):
    bad = [{"role": "user", "content": "hi"}, tool_result("c9", "x")]
    src = tmp_path / "chats.json"
    text = json.dumps([{"id": "a", "messages": [{"role": "user", "content": "x"}]}, {"id": "b", "messages": bad}], indent=2)
    src.write_text(text, encoding="utf-8")
    start = [n for n, line in enumerate(text.splitlines(), 1) if line == "  {"][1]  # where record 2 begins
    with pytest.raises(InputError) as info:
        import_openai_chat(src, tmp_path / "out")
    err = info.value
    assert err.line == start or (err.line is None and "record 2" in err.detail)


# --- tau-bench (synthetic, in tau-bench's format) ---------------------------------------------


def tau_record(task_id: int, trial: int, reward: float, actions: list[dict], outputs: list[str], traj: list[dict]) -> dict:
    return {
        "task_id": task_id,
        "trial": trial,
        "reward": reward,
        "info": {
            "task": {"user_id": "u1", "actions": actions, "instruction": f"You are u1 (task {task_id}).", "outputs": outputs},
            "source": "user",
            "reward_info": {"reward": reward},
        },
        "traj": [{"role": "system", "content": "# Airline Agent Policy"}, {"role": "user", "content": "Hi"}, *traj],
    }


def turn(call_id: str, name: str, args: dict, result) -> list[dict]:
    return [assistant_calls(tool_call(call_id, name, args)), tool_result(call_id, result, name)]


def say(text: str) -> dict:
    return {"role": "assistant", "content": text}


BOOK = {"name": "book_reservation", "kwargs": {"user_id": "u1", "flights": [{"flight_number": "HAT1", "date": "2024-05-20"}], "insurance": "no"}}
CANCEL = {"name": "cancel_reservation", "kwargs": {"reservation_id": "ABC123"}}
LOOKUP = turn("r0", "get_user_details", {"user_id": "u1"}, {"name": "U"})

TAU_RECORDS = [
    # task 0: book. Trial 0 right first time; trial 1 fails once ("Error:") then succeeds; trial 2 wrong insurance.
    tau_record(0, 0, 1.0, [BOOK], [], [*LOOKUP, *turn("b1", "book_reservation", BOOK["kwargs"], {"reservation_id": "NEW1"}), say("Booked.")]),
    tau_record(0, 1, 1.0, [BOOK], [], [
        *turn("b1", "book_reservation", BOOK["kwargs"], "Error: payment amount does not add up"),
        *turn("b2", "book_reservation", BOOK["kwargs"], {"reservation_id": "NEW1"}),
        say("Booked."),
    ]),
    tau_record(0, 2, 0.0, [BOOK], [], [*turn("b1", "book_reservation", {**BOOK["kwargs"], "insurance": "yes"}, {"reservation_id": "NEW1"})]),
    # task 1: cancel and state the refund. Trial 1 cancels the wrong one; trial 2 never states the amount.
    tau_record(1, 0, 1.0, [CANCEL], ["1786"], [*LOOKUP, *turn("c1", "cancel_reservation", CANCEL["kwargs"], {"ok": True}), say("Cancelled; refund of $1,786.")]),
    tau_record(1, 1, 0.0, [CANCEL], ["1786"], [*turn("c1", "cancel_reservation", {"reservation_id": "XYZ999"}, {"ok": True}), say("Refund $1,786.")]),
    tau_record(1, 2, 0.0, [CANCEL], ["1786"], [*turn("c1", "cancel_reservation", CANCEL["kwargs"], {"ok": True}), say("Cancelled.")]),
    # task 2: a question only (no write). Trial 1 writes anyway; trial 2 hands over to a human (not a write).
    tau_record(2, 0, 1.0, [], ["327"], [*LOOKUP, say("You have 327 points.")]),
    tau_record(2, 1, 0.0, [], ["327"], [*turn("c1", "cancel_reservation", CANCEL["kwargs"], {"ok": True}), say("327")]),
    tau_record(2, 2, 1.0, [], ["327"], [*turn("h1", "transfer_to_human_agents", {"summary": "x"}, "Transfer successful"), say("It is 327.")]),
]

def declared(name: str, properties: dict, required: list[str] | None = None) -> dict:
    return {"type": "function", "function": {"name": name, "description": name, "parameters": {
        "type": "object", "properties": properties, "required": required if required is not None else list(properties)}}}


FLIGHTS = {"type": "array", "items": {"type": "object", "properties": {"flight_number": {"type": "string"},
                                                                       "date": {"type": "string"}}}}
# The domain's declarations, as tau-bench's airline_tools.json holds them: two write tools, two others.
TAU_TOOLS = [
    declared("book_reservation", {"user_id": {"type": "string"}, "flights": FLIGHTS,
                                  "insurance": {"type": "string", "enum": ["yes", "no"]}}),
    declared("cancel_reservation", {"reservation_id": {"type": "string"}}),
    declared("get_user_details", {"user_id": {"type": "string"}}),
    declared("transfer_to_human_agents", {"summary": {"type": "string"}}),
]


def write_tau(folder: Path, document, tools=TAU_TOOLS) -> Path:
    """``tau.json`` and, unless ``tools`` is None, ``airline_tools.json`` beside it."""
    folder.mkdir(parents=True, exist_ok=True)
    if tools is not None:
        (folder / "airline_tools.json").write_text(json.dumps(tools), encoding="utf-8")
    src = folder / "tau.json"
    src.write_text(json.dumps(document), encoding="utf-8")
    return src


# trajectory id -> (tool_correctness points, max_points, task_success passed)
TAU_EXPECTED = {
    # task 000 names no outputs: no task-success axis (None), never a pass with nothing checked
    "task-000-trial-0": (6, 6, None),
    "task-000-trial-1": (6, 6, None),  # the failed first attempt changed nothing and is not extra
    "task-000-trial-2": (5, 6, None),  # insurance argument lost
    "task-001-trial-0": (4, 4, True),
    "task-001-trial-1": (3, 4, True),  # reservation_id argument lost
    "task-001-trial-2": (4, 4, False),  # the answer never states 1786
    "task-002-trial-0": (2, 2, True),
    "task-002-trial-1": (1, 2, True),  # an unexpected write: call count lost
    "task-002-trial-2": (2, 2, True),  # transfer_to_human_agents is not a write
}


@pytest.fixture
def tau_import(tmp_path) -> Path:
    src = write_tau(tmp_path, TAU_RECORDS)
    out = tmp_path / "imported"
    result = cli("import", "tau-bench", src, "--out", out)
    assert result.exit_code == 0, result.output
    return out


def test_tau_bench_import_writes_a_suite_that_runs_as_is(tau_import):
    assert sorted(p.relative_to(tau_import).as_posix() for p in tau_import.rglob("*") if p.is_file()) == [
        "rubrics/rubrics.lock",
        "rubrics/tau-bench-task-000.yaml",
        "rubrics/tau-bench-task-001.yaml",
        "rubrics/tau-bench-task-002.yaml",
        "suite.yaml",
        "trajectories/task-000.jsonl",
        "trajectories/task-001.jsonl",
        "trajectories/task-002.jsonl",
    ]
    result = cli("run", tau_import, "--format", "jsonl")
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    got = {
        r["trajectory_id"]: (r["axes"]["tool_correctness"]["points"], r["axes"]["tool_correctness"]["max_points"],
                             r["axes"].get("task_success", {}).get("passed"))
        for r in rows
    }
    assert got == TAU_EXPECTED
    assert {r["trajectory_id"]: r["metadata"]["reward"] for r in rows}["task-000-trial-2"] == 0.0


def test_tau_bench_rubrics_are_pre_registered(tau_import):
    rubrics = tau_import / "rubrics"
    checked = cli("rubric", "check", rubrics, "--lock", rubrics / "rubrics.lock")
    assert (checked.exit_code, checked.stdout) == (0, "every rubric matches its locked hash\n")
    lint = cli("rubric", "lint", rubrics / "tau-bench-task-001.yaml")
    assert lint.exit_code == 0, lint.output  # the generated guides are free of version-bound language


def test_tau_bench_rubric_pins_ground_truth_write_calls(tau_import):
    rubric = load_rubric(tau_import / "rubrics" / "tau-bench-task-000.yaml")
    tc = rubric.tool_correctness
    assert [(e.tool, e.args) for e in tc.expected_calls] == [
        ("book_reservation", {k: {"const": v} for k, v in BOOK["kwargs"].items()})
    ]
    # The write tools are those the declarations name: read-only tools and the human hand-over
    # are out of scope, whatever the runs in the file call.
    assert tc.in_scope == ["book_reservation", "cancel_reservation"]
    assert tc.ordered is False
    # Their declared parameters go into every rubric, as the tools file gives them.
    assert tc.tools == {t["function"]["name"]: t["function"]["parameters"] for t in TAU_TOOLS[:2]}
    assert str(rubric.registered) == "1970-01-01"  # the records carry no date; never today
    assert load_rubric(tau_import / "rubrics" / "tau-bench-task-001.yaml").task_success.required_outputs == ["1786"]


def test_tau_bench_error_results_are_failed_calls(tau_import):
    items = {item.trajectory.id: item.trajectory for item in iter_trajectories(tau_import / "trajectories" / "task-000.jsonl")}
    first, second = items["task-000-trial-1"].calls
    assert (first.error, first.succeeded) == ("Error: payment amount does not add up", False)
    assert (second.error, second.result) == (None, {"reservation_id": "NEW1"})
    trial0 = items["task-000-trial-0"]
    assert [c.tool for c in trial0.calls] == ["get_user_details", "book_reservation"]
    assert trial0.metadata == {"task_id": 0, "trial": 0, "reward": 1.0, "source": "tau.json"}
    assert trial0.prompt == "You are u1 (task 0)."


def test_tau_bench_undeclared_keys_are_reported_not_scored(tmp_path):
    sloppy = {**CANCEL["kwargs"], "reason": "change of plan"}  # cancel_reservation declares no reason
    records = [tau_record(1, 0, 1.0, [CANCEL], [], [*turn("c1", "cancel_reservation", sloppy, {"ok": True})])]
    out = tmp_path / "out"
    import_tau_bench(write_tau(tmp_path, records), out)
    run = cli("run", out, "--format", "jsonl")
    assert run.exit_code == 0, run.output
    (row,) = [json.loads(line) for line in run.stdout.splitlines()]
    tc = row["axes"]["tool_correctness"]
    assert (tc["points"], tc["max_points"]) == (4, 4)
    assert tc["notes"] == [{"call": 0, "tool": "cancel_reservation", "arg": "reason",
                            "reason": "not declared by cancel_reservation (reported, not scored)"}]


def test_tau_bench_import_is_byte_identical_each_time(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    src = write_tau(tmp_path / "src", TAU_RECORDS)
    import_tau_bench(src, first)
    import_tau_bench(src, second)
    files = sorted(p.relative_to(first) for p in first.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(second) for p in second.rglob("*") if p.is_file())
    assert all((first / f).read_bytes() == (second / f).read_bytes() for f in files)


def test_tau_bench_reimport_into_the_same_folder(tau_import, tmp_path):
    again = cli("import", "tau-bench", tmp_path / "tau.json", "--out", tau_import)
    assert again.exit_code == 0
    rubrics = tau_import / "rubrics"
    assert cli("rubric", "check", rubrics, "--lock", rubrics / "rubrics.lock").exit_code == 0


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        pytest.param({"task_id": 0}, "expected a JSON list of tau-bench run records", id="not_a_list"),
        pytest.param([TAU_RECORDS[0], {k: v for k, v in TAU_RECORDS[1].items() if k != "traj"}], "record 1 has no 'traj'", id="record_without_traj"),
        pytest.param([{**TAU_RECORDS[0], "info": {"task": {}}}], "record 0: info.task.actions is missing or not a list", id="no_actions"),
        pytest.param([7], "record 0 is not an object", id="record_not_an_object"),
        pytest.param([TAU_RECORDS[0], {**TAU_RECORDS[1], "info": {"task": {"actions": []}}}],
                     "record 1 (task 0, trial 1): its info.task differs from record 0's", id="task_differs"),
        pytest.param([TAU_RECORDS[0], TAU_RECORDS[0]], "record 1 (task 0, trial 0): this task and trial were already",
                     id="trial_twice"),
        pytest.param([tau_record(5, 0, 1.0, [{"name": "upgrade_cabin", "kwargs": {}}], [], [])],
                     "the ground truth calls upgrade_cabin, which the tool declarations do not declare",
                     id="ground_truth_tool_undeclared"),
    ],
)
def test_tau_bench_bad_input_is_one_error_line(tmp_path, document, expected):
    src = write_tau(tmp_path, document)
    result = cli("import", "tau-bench", src, "--out", tmp_path / "out")
    assert result.exit_code == 2 and "Traceback" not in result.output
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"judgekit: error: {src}") and expected in line
    assert not (tmp_path / "out").exists()


def test_tau_bench_without_its_tools_file_says_what_it_needs(tmp_path):
    src = write_tau(tmp_path, TAU_RECORDS, tools=None)
    result = cli("import", "tau-bench", src, "--out", tmp_path / "out")
    assert result.exit_code == 2
    assert "needs the domain's tool declarations beside it (airline_tools.json, or one *_tools.json" in result.stderr
    assert not (tmp_path / "out").exists()


def test_tau_bench_error_inside_a_traj_names_the_record(tmp_path):
    broken = tau_record(1, 0, 0.0, [CANCEL], [], [tool_result("nope", "x")])
    src = write_tau(tmp_path, [TAU_RECORDS[0], broken])
    with pytest.raises(InputError) as info:
        import_tau_bench(src, tmp_path / "out")
    assert "unknown tool_call_id 'nope'" in info.value.detail  # true today
    assert "record 1" in info.value.detail


@pytest.mark.parametrize(("depth", "kept_as_text"), [(197, False), (198, True)])
def test_a_json_result_too_deep_for_the_trajectory_reader_is_kept_as_text(tmp_path, depth, kept_as_text):
    """Decoded, it would nest the written line past what judgekit reads back: the import would pass
    and the run refuse the file."""
    deep = "[" * depth + "1" + "]" * depth
    messages = [{"role": "user", "content": "hi"},
                {"role": "assistant", "content": None,
                 "tool_calls": [{"id": "a", "type": "function", "function": {"name": "t", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "a", "content": deep}]
    src = write_jsonl(tmp_path / "chats.jsonl", [{"id": "x", "messages": messages}])
    import_openai_chat(src, tmp_path / "out")
    (trajectory,) = imported(tmp_path / "out")
    assert (trajectory.calls[0].result == deep) is kept_as_text
