"""Names taken from an input become file names under --out through one function, the import
writer's ``file_name``: bounded in bytes, with no path separator or traversal, never empty or
only dots, distinct inputs kept apart, ordinary names as they are.

Each importer that takes names from its input (Inspect task names, tau-bench task ids, ToolTalk
conversation and database names, BFCL question ids, OTel agent names, LLMBar model and prompt
folders) is run through the CLI on hostile ones: it imports under bounded, neutral names inside
--out (exit 0), or refuses with one error line naming the file (exit 2), never an internal
error (exit 3). The LangSmith and OpenAI chat importers write fixed names only.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from judgekit.cli import main
from judgekit.importers._writer import MAX_NAME, file_name

ALARM_S = 60
TESTS = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("inspect_make_logs_names", TESTS / "data" / "inspect" / "make_logs.py")
make_logs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_logs)

NEUTRAL = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*")
DEVICE = re.compile(r"(?i)(con|prn|aux|nul|com[0-9]|lpt[0-9])(\..*)?")


def h(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]


# Names from an input that a JSON string can hold; each importer below is run on all of them.
HOSTILE = [
    pytest.param("x" * 5000, id="5000_characters"),
    pytest.param("é" * 3000, id="6000_bytes_of_non_ascii"),
    pytest.param("/../../etc/passwd/..", id="absolute_with_dotdot"),
    pytest.param("a/b\\c", id="separators"),
    pytest.param("a\x00b", id="nul"),
    pytest.param("\x1b[31mred\r\n", id="control_characters"),
    pytest.param("\u202eevil\u2066", id="bidi_controls"),
    pytest.param("CON", id="windows_device"),
    pytest.param("nul.txt", id="windows_device_with_extension"),
    pytest.param("...", id="only_dots"),
    pytest.param("???", id="nothing_readable"),
]


def cli(*args) -> tuple[int, str]:
    result = CliRunner().invoke(main, [str(a) for a in args])
    return result.exit_code, result.output


def written(out: Path) -> list[str]:
    """Every file under ``out``, relative; each part of each path bounded and neutral."""
    names = []
    for path in sorted(out.rglob("*")):
        assert path.resolve().is_relative_to(out.resolve()), path
        if path.is_file():
            relative = path.relative_to(out)
            assert all(NEUTRAL.fullmatch(part) and len(part.encode()) <= 255 for part in relative.parts), relative
            names.append(relative.as_posix())
    return names


def imported(args: list, out: Path) -> list[str]:
    """The import's files: it exited 0 and printed exactly them (on stdout; the next step goes to stderr)."""
    result = CliRunner().invoke(main, [str(a) for a in ["import", *args, "--out", out]])
    assert result.exit_code == 0, result.output
    assert sorted(result.stdout.split("\n")[:-1]) == sorted(str(out / name) for name in written(out))
    return written(out)


def refused(args: list, out: Path, src: Path, message: str) -> None:
    """Exit 2: one error line naming ``src`` and saying ``message``; nothing written."""
    code, output = cli("import", *args, "--out", out)
    assert code == 2, output
    (line,) = output.splitlines()
    assert line.startswith(f"judgekit: error: {src}") and message in line, line
    assert not out.exists()


# --- the one function -----------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "lower", "name"), [
    pytest.param("my_task", False, "my_task", id="ordinary_is_itself"),
    pytest.param("gpt-4o.v2", False, "gpt-4o.v2", id="ordinary_with_dot_is_itself"),
    pytest.param("Task_1", False, "Task_1", id="case_kept"),
    pytest.param("Task_1", True, "task_1", id="lower_for_a_rubric_id"),
    pytest.param("agent/support", False, "agent-support", id="separator_replaced"),
    pytest.param("/../../etc/passwd/..", False, "etc-passwd", id="absolute_with_dotdot"),
    pytest.param("a/b\\c", False, "a-b-c", id="both_separators"),
    pytest.param("a\x00b", False, "a-b", id="nul"),
    pytest.param("\x1b[31mred\r\n", False, "31mred", id="control_characters"),
    pytest.param("\u202eevil\u2066", False, "evil", id="bidi_controls"),
    pytest.param(".hidden", False, "hidden", id="leading_dot"),
    pytest.param("x" * 5000, False, "x" * 87 + "-" + h("x" * 5000), id="5000_characters_cut"),
    pytest.param("x" * 101, False, "x" * 87 + "-" + h("x" * 101), id="one_over_cut"),
    pytest.param("x" * 100, False, "x" * 100, id="at_the_bound_is_itself"),
    pytest.param("é" * 3000, False, "task-" + h("é" * 3000), id="only_non_ascii"),
    pytest.param("CON", False, "CON-" + h("CON"), id="windows_device"),
    pytest.param("com1", True, "com1-" + h("com1"), id="windows_device_lower"),
    pytest.param("nul.txt", False, "nul-txt-" + h("nul.txt"), id="windows_device_with_extension"),
    pytest.param("console", False, "console", id="device_prefix_is_no_device"),
    pytest.param("...", False, "task-" + h("..."), id="only_dots"),
    pytest.param("", False, "task-" + h(""), id="empty"),
    pytest.param("???", False, "task-" + h("???"), id="nothing_readable"),
    pytest.param("\ud800", False, "task-" + h("\ud800"), id="lone_surrogate"),
])
def test_file_name(text, lower, name):
    assert file_name(text, "task", lower=lower) == name
    assert NEUTRAL.fullmatch(name) and not name.endswith(".") and not DEVICE.fullmatch(name)
    assert len(name.encode()) <= MAX_NAME


@given(st.text())
def test_every_text_gives_a_bounded_neutral_name(text):
    name = file_name(text, "task")
    assert NEUTRAL.fullmatch(name) and not name.endswith(".") and not DEVICE.fullmatch(name)
    assert len(name.encode()) <= MAX_NAME
    if NEUTRAL.fullmatch(text) and not text.endswith((".", "-")) and len(text) <= MAX_NAME and not DEVICE.fullmatch(text):
        assert name == text


@pytest.mark.parametrize(("a", "b"), [
    pytest.param("x" * 200 + "a", "x" * 200 + "b", id="cut_alike"),
    pytest.param("...", "....", id="both_only_dots"),
    pytest.param("é", "ü", id="both_non_ascii"),
    pytest.param("CON", "CON-", id="device_and_its_look_alike"),
])
def test_names_that_had_to_change_stay_apart(a, b):
    assert file_name(a, "task") != file_name(b, "task")


# --- Inspect: the task name -----------------------------------------------------------------------


def inspect_log(folder: Path, task: str) -> Path:
    log = make_logs.inspect_log_from_chat([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}],
                                          task=task)
    folder.mkdir(parents=True, exist_ok=True)
    src = folder / "log.json"
    src.write_text(json.dumps(log), encoding="utf-8")  # ASCII: a lone surrogate is written as \ud800
    return src


@pytest.mark.parametrize("task", HOSTILE)
def test_inspect_task_names(tmp_path, task):
    out = tmp_path / "out"
    assert imported(["inspect", inspect_log(tmp_path, task)], out) == ["suite.yaml", f"trajectories/{file_name(task, 'task')}.jsonl"]
    [line] = (out / f"trajectories/{file_name(task, 'task')}.jsonl").read_text(encoding="utf-8").splitlines()
    assert json.loads(line)["metadata"]["task"] == task  # the name itself is kept, as data


def test_an_ordinary_inspect_task_name_is_the_file_name(tmp_path):
    assert imported(["inspect", inspect_log(tmp_path, "my_task")], tmp_path / "out") == ["suite.yaml", "trajectories/my_task.jsonl"]


# --- tau-bench: the task id -----------------------------------------------------------------------

TAU_TOOLS = [{"type": "function", "function": {"name": "cancel_reservation", "description": "Cancel.", "parameters": {
    "type": "object", "properties": {"reservation_id": {"type": "string"}}, "required": ["reservation_id"]}}}]


def tau_src(folder: Path, *task_ids) -> Path:
    action = {"name": "cancel_reservation", "kwargs": {"reservation_id": "ABC123"}}
    records = [{"task_id": task_id, "trial": 0, "reward": 1.0,
                "info": {"task": {"user_id": "u1", "actions": [action], "instruction": "Cancel ABC123.", "outputs": []}},
                "traj": [{"role": "user", "content": "Cancel ABC123."}, {"role": "assistant", "content": "Done."}]}
               for task_id in task_ids]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "airline_tools.json").write_text(json.dumps(TAU_TOOLS), encoding="utf-8")
    src = folder / "tau.json"
    src.write_text(json.dumps(records), encoding="utf-8")
    return src


@pytest.mark.parametrize("task_id", HOSTILE)
def test_tau_bench_task_ids(tmp_path, task_id):
    out = tmp_path / "out"
    name = "task-" + file_name(task_id, "id", lower=True)
    assert imported(["tau-bench", tau_src(tmp_path, task_id)], out) == [
        "rubrics/rubrics.lock", f"rubrics/tau-bench-{name}.yaml", "suite.yaml", f"trajectories/{name}.jsonl"]


def test_an_integer_tau_bench_task_id_keeps_its_name(tmp_path):
    assert "trajectories/task-007.jsonl" in imported(["tau-bench", tau_src(tmp_path, 7)], tmp_path / "out")


@pytest.mark.parametrize(("task_ids", "message"), [
    pytest.param(([1],), "record 0: task_id must be an integer or a string", id="a_list"),
    pytest.param(({"a": 1},), "record 0: task_id must be an integer or a string", id="an_object"),
    pytest.param((None,), "record 0: task_id must be an integer or a string", id="null"),
    pytest.param((True,), "record 0: task_id must be an integer or a string", id="a_boolean"),
    pytest.param((1.5,), "record 0: task_id must be an integer or a string", id="a_fraction"),
    pytest.param(("A b", "a-b"), "task 'a-b' and task 'A b' would both be written as 'a-b'", id="same_name"),
    pytest.param((1, "001"), "task '001' and task 1 would both be written as '001'", id="number_and_text"),
    pytest.param(("Task", "task"), "task 'task' and task 'Task' would both be written as 'task'", id="same_but_case"),
])
def test_tau_bench_task_ids_that_cannot_be_named_apart_are_refused(tmp_path, task_ids, message):
    src = tau_src(tmp_path, *task_ids)
    refused(["tau-bench", src], tmp_path / "out", src, message)


@pytest.mark.parametrize("instruction", [pytest.param(["Cancel"], id="a_list"), pytest.param(7, id="a_number")])
def test_a_tau_bench_task_whose_instruction_is_not_text_is_refused(tmp_path, instruction):
    src = tau_src(tmp_path, 1)
    records = json.loads(src.read_text())
    records[0]["info"]["task"]["instruction"] = instruction
    src.write_text(json.dumps(records))
    refused(["tau-bench", src], tmp_path / "out", src, "record 0 (task 1, trial 0): its info.task makes no valid rubric")


# --- ToolTalk: the conversation name and the database names ---------------------------------------

SCHEMAS = [{"name": "FindAlarms", "parameters": {}, "database_name": "Alarm", "is_action": False, "requires_auth": False}]
TURNS = [{"role": "user", "text": "hi"}, {"role": "assistant", "text": "",
                                          "apis": [{"request": {"api_name": "FindAlarms", "parameters": {}},
                                                    "response": [], "exception": None}]}]


def tooltalk_src(root: Path, names: list[str], databases: list[str] = ("Alarm",), schemas=SCHEMAS) -> Path:
    """root/conv/<n>.json (one conversation per name), root/databases/<db>.json, root/api_schemas.json."""
    (root / "conv").mkdir(parents=True)
    (root / "databases").mkdir()
    for database in databases:
        (root / "databases" / f"{database}.json").write_text("{}", encoding="utf-8")
    (root / "api_schemas.json").write_text(json.dumps(schemas), encoding="utf-8")
    for n, name in enumerate(names):
        conversation = {"name": name, "conversation_id": f"c-{n}", "user": {}, "metadata": {}, "conversation": TURNS}
        (root / "conv" / f"{n}.json").write_text(json.dumps(conversation), encoding="utf-8")
    return root / "conv"


@pytest.mark.parametrize("name", HOSTILE)
def test_tooltalk_conversation_names(tmp_path, name):
    out = tmp_path / "out"
    slug = file_name(name, "conversation", lower=True)
    assert imported(["tooltalk", tooltalk_src(tmp_path, [name])], out) == [
        "databases/Alarm.json", "rubrics/rubrics.lock", f"rubrics/tooltalk-{slug}.yaml", "suite.yaml",
        f"trajectories/{slug}.jsonl"]


# What a file name on Linux may hold: any byte but NUL and '/', up to 255 bytes.
@pytest.mark.parametrize("database", [
    pytest.param("x" * 250, id="250_bytes"),
    pytest.param("é" * 125, id="250_bytes_of_non_ascii"),
    pytest.param("a\nb\\c", id="line_break_and_backslash"),
    pytest.param("\u202eAlarm", id="bidi_control"),
    pytest.param("CON", id="windows_device"),
    pytest.param("...", id="only_dots"),
])
def test_tooltalk_database_names(tmp_path, database):
    out = tmp_path / "out"
    schemas = [{**SCHEMAS[0], "database_name": database}]
    copy = f"databases/{file_name(database, 'database')}.json"
    assert copy in imported(["tooltalk", tooltalk_src(tmp_path, ["c"], [database], schemas)], out)
    [line] = (out / "trajectories" / "c.jsonl").read_text(encoding="utf-8").splitlines()
    assert json.loads(line)["metadata"]["databases"] == [copy]  # the trajectory names the copy written


@pytest.mark.parametrize("databases", [
    pytest.param(["Al arm", "Al-arm"], id="same_name"),
    pytest.param(["Alarm", "alarm"], id="same_name_but_case"),
])
def test_tooltalk_databases_that_would_share_a_file_are_refused(tmp_path, databases):
    src = tooltalk_src(tmp_path, ["c"], databases)
    refused(["tooltalk", src], tmp_path / "out", tmp_path / "databases" / f"{databases[1]}.json",
            "would both be written as")


# --- BFCL: the question id ------------------------------------------------------------------------

FUNCTION = {"name": "f", "description": "d", "parameters": {"type": "dict", "properties": {"a": {"type": "integer"}},
                                                            "required": ["a"]}}


def bfcl_src(root: Path, *ids: str) -> Path:
    (root / "possible_answer").mkdir(parents=True)
    questions = [{"id": i, "question": [[{"role": "user", "content": "q"}]], "function": [FUNCTION]} for i in ids]
    answers = [{"id": i, "ground_truth": [{"f": {"a": [1]}}]} for i in ids]
    for folder, records in ((root, questions), (root / "possible_answer", answers)):
        (folder / "BFCL_v4_simple_python.json").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return root / "BFCL_v4_simple_python.json"


@pytest.mark.parametrize("question_id", HOSTILE)
def test_bfcl_question_ids(tmp_path, question_id):
    out = tmp_path / "out"
    slug = f"bfcl-{file_name(question_id, 'question', lower=True)}"
    assert imported(["bfcl", bfcl_src(tmp_path, question_id)], out) == [
        "bfcl-import.json", f"rubrics/{slug}.json", "rubrics/rubrics.lock", "suite.yaml", f"trajectories/{slug}.jsonl"]


def test_bfcl_question_ids_that_would_share_a_file_are_refused(tmp_path):
    src = bfcl_src(tmp_path, "A b", "a-b")
    refused(["bfcl", src], tmp_path / "out", src, "question 'a-b' has the same rubric id as 'A b'")


# --- OTel GenAI: the agent name of a drafted rubric -----------------------------------------------


@pytest.mark.parametrize("agent", HOSTILE)
def test_otel_agent_names(tmp_path, agent):
    out = tmp_path / "out"
    assert imported(["otel-genai", otel_src(tmp_path, agent), "--draft-rubric"], out) == [
        f"drafts/draft-{file_name(agent, 'agent', lower=True)}.yaml", "suite.yaml", "trajectories.jsonl"]


def test_otel_agents_whose_drafts_would_share_a_name_are_refused(tmp_path):
    """"a b" takes draft-a-b; "a/b" would too, so it takes "a-b-" and its hash; an agent named
    exactly that must not then replace it (found by a hostile review: one draft was lost)."""
    text = (TESTS / "data" / "otel" / "mixed.jsonl").read_text(encoding="utf-8")
    agents = ["a b", "a-b-" + hashlib.sha256(b"a/b").hexdigest()[:8], "a/b"]
    docs = []
    for k, agent in enumerate(agents):
        doc = re.sub(r'"traceId":"([0-9a-f]{2})', lambda m: f'"traceId":"{k + 1:02x}', text)
        docs.append(doc.replace('{"stringValue":"support-agent"}', json.dumps({"stringValue": agent})))
    src = tmp_path / "traces.jsonl"
    src.write_text("".join(docs), encoding="utf-8")
    refused(["otel-genai", src, "--draft-rubric"], tmp_path / "out", src,
            "agent 'a/b' would be written as 'a-b-")


# --- LLMBar: the model and prompt folders ---------------------------------------------------------


def llmbar_src(folder: Path, *judges: tuple[str, str]) -> Path:
    items = [{"input": "q", "output_1": "a", "output_2": "b", "label": 1}]
    folder.mkdir(parents=True)
    (folder / "dataset.json").write_text(json.dumps(items), encoding="utf-8")
    for model, prompt in judges:
        (folder / "evaluators" / model / prompt).mkdir(parents=True)
        result = [{**items[0], "results": [{"swap = False": {"winner": "1"}, "swap = True": {"winner": "1"}}]}]
        (folder / "evaluators" / model / prompt / "result.json").write_text(json.dumps(result), encoding="utf-8")
    return folder


@pytest.mark.parametrize(("model", "prompt"), [
    pytest.param("M", "P", id="ordinary"),
    pytest.param("x" * 250, "y" * 250, id="each_fits_together_too_long"),
    pytest.param("é" * 125, "p", id="non_ascii"),
    pytest.param("a\nb", "\u202ep", id="line_break_and_bidi"),
    pytest.param("CON", "nul", id="windows_devices"),
])
def test_llmbar_judge_folders(tmp_path, model, prompt):
    out = tmp_path / "out"
    assert imported(["llmbar", llmbar_src(tmp_path / "Sub", (model, prompt))], out) == [
        "labels.jsonl", f"{file_name(f'verdicts-{model}-{prompt}', 'verdicts')}.jsonl"]


def test_llmbar_judges_that_would_share_a_file_are_refused(tmp_path):
    src = llmbar_src(tmp_path / "Sub", ("a-b", "c"), ("a", "b-c"))
    refused(["llmbar", src], tmp_path / "out", src / "evaluators" / "a-b" / "c" / "result.json",
            "judge a-b/c and judge a/b-c would both be written as 'verdicts-a-b-c'")


# --- a name that is no text -----------------------------------------------------------------------


def otel_src(folder: Path, agent: str) -> Path:
    text = (TESTS / "data" / "otel" / "mixed.jsonl").read_text(encoding="utf-8")
    src = folder / "traces.jsonl"
    src.write_text(text.replace('{"stringValue":"support-agent"}', json.dumps({"stringValue": agent})), encoding="utf-8")
    return src


@pytest.mark.parametrize(("fmt", "make", "named"), [
    pytest.param("inspect", lambda p: inspect_log(p, "\ud800"), lambda p: p / "log.json", id="inspect_task"),
    pytest.param("tau-bench", lambda p: tau_src(p, "\ud800"), lambda p: p / "tau.json", id="tau_bench_task_id"),
    pytest.param("tooltalk", lambda p: tooltalk_src(p, ["\ud800"]), lambda p: p / "conv" / "0.json",
                 id="tooltalk_conversation"),
    pytest.param("bfcl", lambda p: bfcl_src(p, "\ud800"), lambda p: p / "possible_answer" / "BFCL_v4_simple_python.json",
                 id="bfcl_question"),  # its answers are indexed first
    pytest.param("otel-genai", lambda p: otel_src(p, "\ud800"), lambda p: p / "traces.jsonl", id="otel_agent"),
])
def test_a_name_with_a_lone_surrogate_is_refused_as_no_text(tmp_path, fmt, make, named):
    src = make(tmp_path)
    refused([fmt, src] + (["--draft-rubric"] if fmt == "otel-genai" else []), tmp_path / "out", named(tmp_path),
            "lone surrogate")
