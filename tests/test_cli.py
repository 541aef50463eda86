"""The `judgekit` command: exit codes, what it prints and the files it writes."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from jsonschema import Draft202012Validator

from judgekit.cli import main
from judgekit.run.record import read_run

RUBRIC = """\
id: change-email
version: 1.0.0
registered: 2024-05-01
task_success:
  guide: User 1's email holds the new address and nothing else in the users table changes.
  postconditions:
    - check: equals
      collection: users
      where: {id: 1}
      field: email
      value: new@x.com
  side_effects:
    allow: [users/1/email]
tool_correctness:
  guide: One update_user call for user 1 with the new address; no user is deleted.
  expected_calls:
    - tool: update_user
      args:
        user_id: {const: 1}
        email: {const: new@x.com}
  in_scope: [update_user, delete_user]
  forbidden:
    tools: [delete_user]
"""
SUITE = """\
name: emails
rubrics: [rubrics]
trajectories:
  - file: runs.jsonl
    rubric: change-email
"""
USERS = "CREATE TABLE users (id INTEGER PRIMARY KEY, email TEXT)"


def make_db(path: Path, rows: list[tuple]) -> Path:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA synchronous = OFF")
    with conn:
        conn.execute(USERS)
        conn.executemany("INSERT INTO users VALUES (?, ?)", rows)
    conn.close()
    return path


def trajectory(tid: str, after: str, calls: list[dict], **extra) -> dict:
    return {
        "id": tid,
        "prompt": "Change user 1's email to new@x.com",
        "calls": calls,
        "output": "Done.",
        "world": {"before": {"sqlite": "db/before.db"}, "after": {"sqlite": after}},
        "metadata": {"model": "m"},
        **extra,
    }


GOOD_CALL = {"tool": "update_user", "args": {"user_id": 1, "email": "new@x.com"}}


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


@pytest.fixture
def suite(tmp_path) -> Path:
    """A suite of three trajectories: right, wrong argument and collateral damage."""
    (tmp_path / "db").mkdir()
    (tmp_path / "rubrics").mkdir()
    make_db(tmp_path / "db" / "before.db", [(1, "a@x.com"), (2, "b@x.com")])
    make_db(tmp_path / "db" / "good.db", [(1, "new@x.com"), (2, "b@x.com")])
    make_db(tmp_path / "db" / "typo.db", [(1, "new@x.co"), (2, "b@x.com")])
    make_db(tmp_path / "db" / "deleted.db", [(1, "new@x.com")])
    (tmp_path / "rubrics" / "change-email.yaml").write_text(RUBRIC, encoding="utf-8")
    write_jsonl(
        tmp_path / "runs.jsonl",
        [
            trajectory("t-good", "db/good.db", [{"tool": "get_user", "args": {"id": 1}}, GOOD_CALL]),
            trajectory("t-typo", "db/typo.db", [{"tool": "update_user", "args": {"user_id": 1, "email": "new@x.co"}}]),
            trajectory("t-deleted", "db/deleted.db", [GOOD_CALL, {"tool": "delete_user", "args": {"user_id": 2}}]),
        ],
    )
    (tmp_path / "suite.yaml").write_text(SUITE, encoding="utf-8")
    return (tmp_path / "suite.yaml").resolve()


def cli(*args: str):
    return CliRunner().invoke(main, [str(a) for a in args])


def assert_one_error_line(result, *expected: str) -> str:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    (line,) = result.stderr.splitlines()
    assert line.startswith("judgekit: error: ")
    for text in expected:
        assert text in line
    return line


# --- run ----------------------------------------------------------------------------------------


def test_run_jsonl_prints_one_object_per_trajectory(suite):
    result = cli("run", suite, "--format", "jsonl")
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    summary = {
        row["trajectory_id"]: (
            row["rubric"],
            row["axes"]["task_success"]["passed"],
            row["axes"]["task_success"]["score"],
            row["axes"]["tool_correctness"]["score"],
            row["axes"]["tool_correctness"]["points"],
            row["axes"]["tool_correctness"]["max_points"],
        )
        for row in rows
    }
    assert summary == {
        "t-good": ("change-email@1.0.0", True, 1.0, 1.0, 5, 5),
        "t-typo": ("change-email@1.0.0", False, 0.0, 0.8, 4, 5),
        "t-deleted": ("change-email@1.0.0", False, 0.0, 0.6, 3, 5),
    }
    assert [row["trajectory_id"] for row in rows] == ["t-good", "t-typo", "t-deleted"]  # suite order
    assert rows[0]["source"] == "runs.jsonl:1"  # relative to the suite's folder: records compare across machines
    assert rows[0]["metadata"] == {"model": "m"}
    failed = {c["check"]: c["reason"] for c in rows[2]["axes"]["task_success"]["checks"] if not c["passed"]}
    assert failed == {"side_effects": "1 change(s) not allowed: remove users/2"}


def test_run_out_writes_a_run_record(suite, tmp_path):
    out = tmp_path / "reports" / "run.json"
    result = cli("run", suite, "--out", out)
    assert result.exit_code == 0, result.output
    record = read_run(out)
    assert (record.suite, record.suite_path().resolve()) == ("emails", suite.resolve())
    assert [r.trajectory_id for r in record.results] == ["t-good", "t-typo", "t-deleted"]
    ts = record.summary["task_success"]
    assert (ts.scored, ts.errors, ts.passed, ts.mean_score) == (3, 0, 1, round(1 / 3, 6))
    assert record.summary["tool_correctness"].mean_score == pytest.approx(0.8)
    assert set(record.rubrics) == {"change-email@1.0.0"} and len(record.rubrics["change-email@1.0.0"].sha256) == 64
    schema = json.loads(cli("schema", "run").stdout)
    lines = out.read_text(encoding="utf-8").splitlines()
    for line in lines:  # every line of the record (header, results, footer) is valid against the schema
        Draft202012Validator(schema).validate(json.loads(line))
    assert [next(iter(json.loads(line))) for line in (lines[0], lines[-1])] == ["header", "footer"]


def test_run_accepts_the_folder_holding_suite_yaml(suite):
    by_folder = cli("run", suite.parent, "--format", "jsonl")
    by_file = cli("run", suite, "--format", "jsonl")
    assert by_folder.exit_code == 0
    assert [json.loads(l) for l in by_folder.stdout.splitlines()] == [json.loads(l) for l in by_file.stdout.splitlines()]
    assert len(by_folder.stdout.splitlines()) == 3


def test_run_table_lists_every_trajectory_and_a_summary(suite):
    result = cli("run", suite)
    assert result.exit_code == 0
    for text in ("t-good", "t-typo", "t-deleted", "PASS", "task_success: 3 scored, 1 passed", "tool_correctness: 3 scored, mean 0.800"):
        assert text in result.stdout


def test_run_with_a_lock_refuses_a_rubric_changed_since(suite):
    (suite.parent / "suite.yaml").write_text(SUITE + "lock: rubrics/rubrics.lock\n", encoding="utf-8")
    unlocked = cli("run", suite)
    assert_one_error_line(unlocked, "rubrics.lock", "locks no rubric", "judgekit rubric lock")
    assert cli("rubric", "lock", suite.parent / "rubrics", "--lock", suite.parent / "rubrics" / "rubrics.lock").exit_code == 0
    assert cli("run", suite, "--format", "jsonl").exit_code == 0
    rubric = suite.parent / "rubrics" / "change-email.yaml"
    rubric.write_text(RUBRIC.replace("{const: new@x.com}", "{type: string}"), encoding="utf-8")
    changed = cli("run", suite, "--format", "jsonl")
    assert_one_error_line(changed, str(rubric), "change-email@1.0.0 changed since it was locked")
    assert changed.stdout == ""  # nothing scored against a rubric that is not as registered


INPUT_ERRORS = [
    pytest.param(
        lambda d: (d / "runs.jsonl").write_text(json.dumps(trajectory("a", "db/good.db", [])) + '\n{"id": "b", "prompt": \n', encoding="utf-8"),
        ["runs.jsonl:2: invalid JSON"],
        id="truncated_trajectory_line",
    ),
    pytest.param(
        lambda d: (d / "runs.jsonl").write_text('{"id": "a", "prompt": "p", "tools": []}\n', encoding="utf-8"),
        ["runs.jsonl:1: tools: unknown key"],
        id="unknown_key_in_trajectory",
    ),
    pytest.param(lambda d: (d / "runs.jsonl").unlink(), ["runs.jsonl: file not found"], id="trajectory_file_missing"),
    pytest.param(
        lambda d: (d / "rubrics" / "change-email.yaml").write_text(RUBRIC.replace("version: 1.0.0", "version: 1.0.0:"), encoding="utf-8"),
        ["change-email.yaml:2: YAML syntax error"],
        id="rubric_yaml_syntax_error",
    ),
    pytest.param(
        lambda d: (d / "suite.yaml").write_text(SUITE.replace("rubric: change-email", "rubric: change-phone"), encoding="utf-8"),
        ["suite.yaml", "no rubric 'change-phone'"],
        id="unknown_rubric_ref",
    ),
    pytest.param(
        lambda d: (d / "rubrics" / "copy.yaml").write_text(RUBRIC, encoding="utf-8"),
        ["change-email@1.0.0 is also claimed by"],
        id="two_rubric_files_one_id_at_version",
    ),
    pytest.param(
        lambda d: write_jsonl(d / "runs.jsonl", [trajectory("a", "db/good.db", []), trajectory("a", "db/good.db", [])]),
        ["runs.jsonl:2: trajectory id 'a' already used at"],
        id="duplicate_trajectory_id",
    ),
    pytest.param(lambda d: (d / "suite.yaml").unlink(), ["this folder holds no suite.yaml: write one with `judgekit init`"],
                 id="no_suite_yaml"),
]


@pytest.mark.parametrize(("damage", "expected"), INPUT_ERRORS)
def test_run_input_error_is_one_line_and_exit_2(suite, damage, expected):
    damage(suite.parent)
    result = cli("run", suite.parent, "--format", "jsonl")
    assert_one_error_line(result, *expected)


def test_bad_snapshots_are_recorded_as_axis_errors_one_line_each(suite):
    folder = suite.parent
    (folder / "db" / "notes.txt").write_text("not a database\n", encoding="utf-8")
    write_jsonl(
        folder / "runs.jsonl",
        [
            trajectory("t-good", "db/good.db", [GOOD_CALL]),
            trajectory("t-missing", "db/nowhere.db", [GOOD_CALL]),
            trajectory("t-text", "db/notes.txt", [GOOD_CALL]),
        ],
    )
    out = folder / "run.json"
    result = cli("run", suite, "--format", "jsonl", "--out", out)
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    rows = {json.loads(l)["trajectory_id"]: json.loads(l) for l in result.stdout.splitlines()}
    assert set(rows) == {"t-good", "t-missing", "t-text"}  # every trajectory still reported
    assert rows["t-good"]["axes"]["task_success"]["status"] == "scored"
    assert rows["t-missing"]["axes"]["task_success"]["status"] == "error"
    assert rows["t-missing"]["axes"]["tool_correctness"]["status"] == "scored"  # needs no world here
    said = result.stderr.splitlines()  # beside JSON Lines: the per-axis lines, the errors, the status
    assert "task_success: 1 scored, 1 passed, mean 1.000, 2 could not be scored" in said
    errors = [line for line in said if line.startswith("judgekit: error: ")]
    assert len(errors) == 2
    assert said[-1].startswith("RED (exit 2: 2 trajectory axis/axes could not be scored (bad input)): gate: task_success: 2 ")
    assert errors[0] == f"judgekit: error: t-missing task_success: {folder / 'db' / 'nowhere.db'}: file not found"
    assert errors[1].startswith(f"judgekit: error: t-text task_success: {folder / 'db' / 'notes.txt'}: not a SQLite database")
    record = read_run(out)  # the record is still written
    assert record.summary["task_success"].errors == 2 and record.summary["task_success"].scored == 1


def test_real_process_prints_no_traceback(tmp_path):
    (tmp_path / "suite.yaml").write_text("name: x\nrubrics: [nope]\ntrajectories: [{file: a.jsonl, rubric: r}]\n", encoding="utf-8")
    proc = subprocess.run(["judgekit", "run", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr == f"judgekit: error: {tmp_path / 'nope'}: rubric file or folder not found\n"


# --- schema -------------------------------------------------------------------------------------

SCHEMAS = ["trajectory", "rubric", "suite", "diff", "result", "run", "lock"]


@pytest.mark.parametrize("name", SCHEMAS)
def test_schema_prints_a_valid_json_schema(name):
    result = cli("schema", name)
    assert result.exit_code == 0
    schema = json.loads(result.stdout)
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    # A run record is JSON Lines whose first line, the header, carries the format version.
    properties = schema["$defs"]["RunHeader"]["properties"] if name == "run" else schema["properties"]
    assert "format_version" in properties


def test_trajectory_schema_validates_a_real_trajectory_line_and_rejects_a_bad_one(suite):
    validator = Draft202012Validator(json.loads(cli("schema", "trajectory").stdout))
    for line in (suite.parent / "runs.jsonl").read_text(encoding="utf-8").splitlines():
        validator.validate(json.loads(line))
    bad = json.loads((suite.parent / "runs.jsonl").read_text(encoding="utf-8").splitlines()[0])
    bad["world"]["after"]["json"] = {}  # two sources on one side
    assert not validator.is_valid(bad)
    assert not validator.is_valid({"id": "x", "prompt": "p", "colour": 1})


def test_rubric_schema_accepts_the_rubric_and_matches_rubric_schema_command(suite):
    import yaml

    schema = json.loads(cli("schema", "rubric").stdout)
    assert json.loads(cli("rubric", "schema").stdout) == schema
    data = yaml.safe_load(RUBRIC)
    data["registered"] = data["registered"].isoformat()
    Draft202012Validator(schema).validate({"$schema": "./rubric.schema.json", **data})


def test_unknown_schema_name_is_a_usage_error():
    result = cli("schema", "verdict-of-doom")
    assert result.exit_code == 2 and "Invalid value" in result.output


# --- diff ---------------------------------------------------------------------------------------


def test_diff_of_two_sqlite_files_is_canonical_and_repeatable(suite):
    db = suite.parent / "db"
    first = cli("diff", db / "before.db", db / "deleted.db")
    second = cli("diff", db / "before.db", db / "deleted.db")
    assert first.exit_code == 0 and first.stdout == second.stdout
    body = first.stdout.rstrip("\n")
    data = json.loads(body)
    assert body == json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert data == {
        "format_version": 1,
        "kind": "sqlite",
        "changes": [
            {"op": "change", "path": ["users", "1", "email"], "before": "a@x.com", "after": "new@x.com"},
            {"op": "remove", "path": ["users", "2"], "before": {"id": 2, "email": "b@x.com"}, "after": None},
        ],
    }
    Draft202012Validator(json.loads(cli("schema", "diff").stdout)).validate(data)


def test_diff_text_rendering(suite):
    db = suite.parent / "db"
    result = cli("diff", db / "before.db", db / "deleted.db", "--text")
    assert result.stdout == '~ users/1/email: "a@x.com" -> "new@x.com"\n- users/2: {"email":"b@x.com","id":2}\n'


def test_diff_of_a_missing_file_is_one_error_line(suite):
    result = cli("diff", suite.parent / "db" / "before.db", suite.parent / "db" / "nope.db")
    assert_one_error_line(result, "nope.db: file not found")


# --- help ---------------------------------------------------------------------------------------


def test_help_lists_the_commands():
    proc = subprocess.run(["judgekit", "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0
    commands = proc.stdout.split("Commands:")[1].split()
    for name in ("run", "diff", "schema", "import", "rubric"):
        assert name in commands
    rubric_help = cli("rubric", "--help")
    assert rubric_help.exit_code == 0
    for name in ("lock", "check", "lint", "schema"):
        assert f"  {name} " in rubric_help.stdout
