"""The ToolTalk importer: ToolTalk's reference conversations become a suite that runs as is.

The published conversations, databases and API schemas (``../shared/data/tooltalk``) are the
main input; everything the tests expect is read from those files, never written down here, so
they hold for any set of conversations of the same kind. A small synthetic conversation (in
ToolTalk's format, on the published schemas) covers what the published easy set lacks: several
calls per turn, a failed reference call, and runs that differ from the reference.
"""

from __future__ import annotations

import json
import shutil
from datetime import date
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

import judgekit
from judgekit.cli import main
from judgekit.errors import InputError
from judgekit.importers import describe
from judgekit.importers.tooltalk import import_tooltalk
from judgekit.results import ToolCorrectnessResult
from judgekit.rubric.model import load_rubric
from judgekit.trajectory import Trajectory, iter_trajectories

pytestmark = pytest.mark.shared_data


@pytest.fixture
def tooltalk(shared_data) -> Path:
    """The published ToolTalk folder (easy/, databases/, api_schemas.json)."""
    root = shared_data("tooltalk")
    for needed in ("easy", "databases", "api_schemas.json"):
        assert (root / needed).exists(), f"{root} lacks {needed}"
    return root


@pytest.fixture
def imported(tooltalk, tmp_path) -> Path:
    out = tmp_path / "out"
    import_tooltalk(tooltalk / "easy", out)
    return out


def conversations(root: Path) -> list[tuple[Path, dict]]:
    return [(path, json.loads(path.read_text(encoding="utf-8"))) for path in sorted((root / "easy").glob("*.json"))]


def actions(root: Path) -> set[str]:
    return {api["name"] for api in json.loads((root / "api_schemas.json").read_text()) if api["is_action"]}


def reference_calls(conversation: dict) -> list[dict]:
    return [api for turn in conversation["conversation"] if turn["role"] == "assistant" for api in turn.get("apis", [])]


def only(path: Path) -> Trajectory:
    (loaded,) = list(iter_trajectories(path))
    return loaded.trajectory


def trajectory_of(out: Path, source: Path) -> tuple[Path, Trajectory]:
    """The imported trajectory file of one conversation file, found by its metadata."""
    for path in sorted((out / "trajectories").glob("*.jsonl")):
        trajectory = only(path)
        if trajectory.metadata["source"] == source.name:
            return path, trajectory
    raise AssertionError(f"no trajectory came from {source.name}")


def suite_entries(out: Path) -> dict[str, str]:
    suite = yaml.safe_load((out / "suite.yaml").read_text())
    return {entry["file"]: entry["rubric"] for entry in suite["trajectories"]}


# --- the published conversations ---------------------------------------------------------------


def test_every_reference_conversation_imports_with_its_calls_in_order(tooltalk, imported):
    published = conversations(tooltalk)
    assert published, "no conversation in easy/"
    assert len(list((imported / "trajectories").glob("*.jsonl"))) == len(published)
    for source, conversation in published:
        _, trajectory = trajectory_of(imported, source)
        expected = reference_calls(conversation)
        assert [(c.tool, c.args, c.result, c.error) for c in trajectory.calls] == [
            (a["request"]["api_name"], a["request"]["parameters"], a["response"], a["exception"]) for a in expected
        ], source.name
        users = [t["text"] for t in conversation["conversation"] if t["role"] == "user"]
        assert trajectory.prompt == users[0]
        assert [t.text for t in trajectory.turns] == users[1:]
        assert set(users[1:]) <= set(trajectory.context.values())
        answers = [t["text"] for t in conversation["conversation"] if t["role"] == "assistant" and t["text"]]
        assert trajectory.output == "\n\n".join(answers)
        assert trajectory.metadata["conversation_id"] == conversation["conversation_id"]
        assert trajectory.metadata["user"] == conversation["user"]
        assert trajectory.metadata["metadata"] == conversation["metadata"]
        assert conversation["metadata"]["timestamp"] in trajectory.context["system"]
        assert trajectory.world is None  # the end state is not derived (see the module docstring)


def test_each_conversation_scores_full_marks_against_its_own_reference(tooltalk, imported):
    record = judgekit.run_suite(imported / "suite.yaml")
    assert len(record.results) == len(conversations(tooltalk))
    for result in record.results:
        tc = result.axes["tool_correctness"]
        assert (tc.status, tc.score) == ("scored", 1.0), (result.trajectory_id, [i for i in tc.items if not i.earned])
        assert tc.counts.calls_matched == tc.counts.calls_expected
        assert set(result.axes) == {"tool_correctness"}  # no world, so no task-success axis


def test_every_action_call_is_an_expected_write(tooltalk, imported):
    writes = actions(tooltalk)
    policy = yaml.safe_load((imported / "suite.yaml").read_text())["safety"]["tools"]
    schemas = json.loads((tooltalk / "api_schemas.json").read_text())
    assert policy == {api["name"]: "write" if api["is_action"] else "read" for api in schemas}
    entries = suite_entries(imported)
    seen_actions = 0
    for source, conversation in conversations(tooltalk):
        path, trajectory = trajectory_of(imported, source)
        rubric = load_rubric(imported / "rubrics" / f"{entries[path.relative_to(imported).as_posix()].split('@')[0]}.yaml")
        tc = rubric.tool_correctness
        expected = [(e.tool, e.args) for e in tc.expected_calls]
        for api in reference_calls(conversation):
            name, params = api["request"]["api_name"], api["request"]["parameters"]
            if name in writes and api["exception"] is None:
                seen_actions += 1
                assert (name, {k: {"const": v} for k, v in params.items()}) in expected
                assert policy[name] == "write"
        assert writes <= set(tc.in_scope)  # any extra action call is counted
        assert len(expected) == sum(api["exception"] is None for api in reference_calls(conversation))
    assert seen_actions > 0


def test_import_is_byte_identical_and_independent_of_the_other_conversations(tooltalk, tmp_path):
    first, second, alone = tmp_path / "a", tmp_path / "b", tmp_path / "alone"
    import_tooltalk(tooltalk / "easy", first)
    import_tooltalk(tooltalk / "easy", second)
    files = sorted(p.relative_to(first) for p in first.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(second) for p in second.rglob("*") if p.is_file())
    assert all((first / f).read_bytes() == (second / f).read_bytes() for f in files)
    # one file alone (schemas and databases found one folder up) gives that conversation's same files
    source = conversations(tooltalk)[-1][0]
    written = import_tooltalk(source, alone)
    path, trajectory = trajectory_of(alone, source)
    rubric = alone / "rubrics" / f"{trajectory.id}.yaml"
    assert {rubric, path} <= set(written)
    for mine in (path, rubric):
        assert mine.read_bytes() == (first / mine.relative_to(alone)).read_bytes()


def test_registered_date_is_the_option_else_the_fixed_default(tooltalk, tmp_path):
    source = conversations(tooltalk)[0][0]
    import_tooltalk(source, tmp_path / "default")
    import_tooltalk(source, tmp_path / "given", registered=date(2024, 2, 29))
    (default,) = (tmp_path / "default" / "rubrics").glob("tooltalk-*.yaml")
    (given,) = (tmp_path / "given" / "rubrics").glob("tooltalk-*.yaml")
    assert str(load_rubric(default).registered) == "1970-01-01"
    assert str(load_rubric(given).registered) == "2024-02-29"


def test_the_starting_databases_are_copied_unchanged(tooltalk, imported):
    for database in sorted((tooltalk / "databases").glob("*.json")):
        assert json.loads((imported / "databases" / database.name).read_text()) == json.loads(database.read_text())
    for path in (imported / "trajectories").glob("*.jsonl"):
        assert all((imported / db).is_file() for db in only(path).metadata["databases"])


def test_the_cli_imports_and_runs(tooltalk, tmp_path):
    runner = CliRunner()
    out = tmp_path / "cli"
    result = runner.invoke(main, ["import", "tooltalk", str(tooltalk / "easy"), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert str(out / "suite.yaml") in result.output.splitlines()
    run = runner.invoke(main, ["run", str(out), "--format", "jsonl"])
    assert run.exit_code == 0, run.output
    rows = [json.loads(line) for line in run.stdout.splitlines()]
    assert {row["axes"]["tool_correctness"]["score"] for row in rows} == {1.0}
    assert describe("tooltalk") == "ToolTalk reference conversations, one rubric each."
    rubrics = out / "rubrics"
    checked = runner.invoke(main, ["rubric", "check", str(rubrics), "--lock", str(rubrics / "rubrics.lock")])
    assert (checked.exit_code, checked.stdout) == (0, "every rubric matches its locked hash\n")
    lint = runner.invoke(main, ["rubric", "lint", *map(str, sorted(rubrics.glob("tooltalk-*.yaml")))])
    assert lint.exit_code == 0, lint.output  # the guide is free of version-bound and vague language


# --- a synthetic conversation, and runs that differ from the reference -------------------------

TOKEN = "98a5a87a-7714-b404"


def api(name: str, params: dict, response, exception=None) -> dict:
    return {"request": {"api_name": name, "parameters": {"session_token": TOKEN, **params}},
            "response": response, "exception": exception}


SYNTHETIC = {
    "name": "Synthetic Alarm/Calendar 1",
    "conversation_id": "c-1",
    "user": {"username": "justinkool", "session_token": TOKEN},
    "metadata": {"location": "New York", "timestamp": "2023-09-11 13:00:00", "session_token": TOKEN, "username": "justinkool"},
    "conversation": [
        {"index": 0, "role": "user", "text": "Move my 7:30 alarm to 6:30 and tell me what is on tomorrow."},
        {"index": 1, "role": "assistant", "text": "Done. Tomorrow you have one meeting.", "apis": [
            api("FindAlarms", {}, {"alarms": [{"alarm_id": "593d-49e9", "time": "07:30:00"}]}),
            api("DeleteAlarm", {"alarm_id": "0000-0000"}, None, "Alarm 0000-0000 not found."),
            api("DeleteAlarm", {"alarm_id": "593d-49e9"}, {"status": "success"}),
            api("AddAlarm", {"time": "06:30:00"}, {"alarm_id": "5bff-dd80"}),
            api("QueryCalendar", {"start_time": "2023-09-12 00:00:00", "end_time": "2023-09-12 23:59:59"}, {"events": []}),
        ]},
        {"index": 2, "role": "user", "text": "Thanks!"},
    ],
}


@pytest.fixture
def layout(tooltalk, tmp_path) -> Path:
    """A ToolTalk layout of our own: conversations/, databases/ and api_schemas.json."""
    root = tmp_path / "tt"
    (root / "conversations").mkdir(parents=True)
    shutil.copytree(tooltalk / "databases", root / "databases")
    shutil.copy(tooltalk / "api_schemas.json", root / "api_schemas.json")
    (root / "conversations" / "synthetic.json").write_text(json.dumps(SYNTHETIC), encoding="utf-8")
    return root


def test_a_failed_reference_call_is_kept_but_not_expected(layout, tmp_path):
    out = tmp_path / "out"
    import_tooltalk(layout / "conversations", out)
    trajectory = only(out / "trajectories" / "synthetic-alarm-calendar-1.jsonl")
    assert trajectory.id == "tooltalk-synthetic-alarm-calendar-1"
    assert [(c.tool, c.error) for c in trajectory.calls] == [
        ("FindAlarms", None), ("DeleteAlarm", "Alarm 0000-0000 not found."), ("DeleteAlarm", None),
        ("AddAlarm", None), ("QueryCalendar", None),
    ]
    assert [(t.text, t.before_call) for t in trajectory.turns] == [("Thanks!", 5)]
    assert trajectory.metadata["databases"] == ["databases/Account.json", "databases/Alarm.json", "databases/Calendar.json"]
    tc = load_rubric(out / "rubrics" / "tooltalk-synthetic-alarm-calendar-1.yaml").tool_correctness
    assert [(e.tool, e.args.get("alarm_id")) for e in tc.expected_calls] == [
        ("FindAlarms", None), ("DeleteAlarm", {"const": "593d-49e9"}), ("AddAlarm", None), ("QueryCalendar", None)
    ]
    assert "QueryCalendar" in tc.in_scope and "SearchInbox" not in tc.in_scope


def run_variant(out: Path, calls: list[dict]) -> ToolCorrectnessResult:
    """Score a run with ``calls`` (tool, args) against the synthetic rubric; returns its result."""
    reference = only(out / "trajectories" / "synthetic-alarm-calendar-1.jsonl")
    variant = Trajectory.model_validate(
        {**reference.model_dump(mode="json", exclude_defaults=True), "id": "variant", "calls": calls, "turns": []}
    )
    (out / "variant.jsonl").write_text(variant.model_dump_json(exclude_defaults=True) + "\n", encoding="utf-8")
    suite = yaml.safe_load((out / "suite.yaml").read_text())
    suite["trajectories"] = [{"file": "variant.jsonl", "rubric": "tooltalk-synthetic-alarm-calendar-1"}]
    (out / "suite.yaml").write_text(yaml.safe_dump(suite), encoding="utf-8")
    (result,) = judgekit.run_suite(out / "suite.yaml").results
    return result.axes["tool_correctness"]


def good_calls() -> list[dict]:
    return [{"tool": c["request"]["api_name"], "args": c["request"]["parameters"]}
            for c in SYNTHETIC["conversation"][1]["apis"] if c["exception"] is None]


@pytest.mark.parametrize(
    ("change", "lost"),
    [
        pytest.param(lambda calls: calls, set(), id="the_reference_itself"),
        pytest.param(lambda calls: list(reversed(calls)), set(), id="any_order_like_tooltalk"),
        pytest.param(lambda calls: [*calls, {"tool": "SearchInbox", "args": {"session_token": TOKEN}}], set(),
                     id="a_lookup_the_reference_does_not_make_is_not_counted"),
        pytest.param(lambda calls: [*calls, {"tool": "SendMessage", "args": {"receiver": "x", "message": "hi"}}],
                     {"call count"}, id="an_extra_action_is_a_bad_action"),
        pytest.param(lambda calls: [*calls, calls[0]], {"call count"}, id="a_repeated_reference_lookup_is_counted"),
        pytest.param(lambda calls: [c if c["tool"] != "AddAlarm" else {**c, "args": {**c["args"], "time": "06:45:00"}}
                                    for c in calls],
                     {"call[2] AddAlarm: arg time"}, id="a_wrong_argument_loses_its_point"),
        pytest.param(lambda calls: [c for c in calls if c["tool"] != "DeleteAlarm"],
                     {"call[1] DeleteAlarm: tool", "call[1] DeleteAlarm: arg session_token",
                      "call[1] DeleteAlarm: arg alarm_id", "call count"}, id="a_missing_write"),
    ],
)
def test_runs_that_differ_from_the_reference(layout, tmp_path, change, lost):
    out = tmp_path / "out"
    import_tooltalk(layout / "conversations", out)
    tc = run_variant(out, change(good_calls()))
    assert tc.status == "scored"
    assert {item.point for item in tc.items if not item.earned} == lost
    assert tc.points == tc.max_points - len(lost)


# --- bad input ---------------------------------------------------------------------------------


def with_turns(turns: list) -> dict:
    return {**SYNTHETIC, "conversation": turns}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param("{not json", "invalid JSON", id="not_json"),
        pytest.param(json.dumps([1, 2]), "expected a ToolTalk conversation", id="not_an_object"),
        pytest.param(json.dumps(with_turns([{"role": "system", "text": "x"}])),
                     "turn 0: expected an object with role 'user' or 'assistant'", id="unknown_role"),
        pytest.param(json.dumps(with_turns([
            {"role": "assistant", "text": "x", "apis": [{"request": {"api_name": "Teleport", "parameters": {}}}]}])),
            "turn 0, api 0: API 'Teleport' is not in api_schemas.json", id="unknown_api"),
        pytest.param(json.dumps(with_turns([
            {"role": "assistant", "text": "x", "apis": [{"request": {"api_name": "AddAlarm", "parameters": [1]}}]}])),
            "turn 0, api 0: expected {request", id="parameters_not_an_object"),
        pytest.param(json.dumps(with_turns([
            {"role": "assistant", "text": "x", "apis": [api("AddAlarm", {}, None, 7)]}])),
            "'exception' must be a string or null", id="exception_not_text"),
        pytest.param(json.dumps({k: v for k, v in SYNTHETIC.items() if k not in ("name", "conversation_id")}),
                     "neither a 'name' nor a 'conversation_id'", id="nameless"),
    ],
)
def test_a_corrupt_conversation_leaves_nothing_and_names_the_file(layout, tmp_path, content, message):
    bad = layout / "conversations" / "zz-broken.json"  # after synthetic.json: that one converts first
    bad.write_text(content, encoding="utf-8")
    out = tmp_path / "out"
    with pytest.raises(InputError) as info:
        import_tooltalk(layout / "conversations", out)
    assert info.value.path == str(bad) and message in str(info.value)
    assert not out.exists()


def test_a_corrupt_conversation_through_the_cli_is_one_error_line(layout, tmp_path):
    bad = layout / "conversations" / "zz-broken.json"
    bad.write_text("[]", encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    result = CliRunner().invoke(main, ["import", "tooltalk", str(layout / "conversations"), "--out", str(out)])
    assert result.exit_code == 2 and "Traceback" not in result.output
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"judgekit: error: {bad}")
    assert list(out.iterdir()) == []  # an --out that existed keeps nothing of the failed import


@pytest.mark.parametrize("missing", ["api_schemas.json", "databases"])
def test_missing_schemas_or_databases_say_where_they_were_looked_for(layout, tmp_path, missing):
    target = layout / missing
    shutil.rmtree(target) if target.is_dir() else target.unlink()
    with pytest.raises(InputError) as info:
        import_tooltalk(layout / "conversations", tmp_path / "out")
    assert f"no {missing} found in {layout / 'conversations'} or {layout}" in str(info.value)
    assert not (tmp_path / "out").exists()


def test_two_conversations_with_one_name_are_refused(layout, tmp_path):
    (layout / "conversations" / "again.json").write_text(json.dumps(SYNTHETIC), encoding="utf-8")
    with pytest.raises(InputError) as info:
        import_tooltalk(layout / "conversations", tmp_path / "out")
    assert info.value.path == str(layout / "conversations" / "synthetic.json")
    assert "names the same conversation as" in str(info.value) and "again.json" in str(info.value)
    assert not (tmp_path / "out").exists()
