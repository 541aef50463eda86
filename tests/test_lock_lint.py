"""Pre-registration (`judgekit rubric lock` / `check`) and `judgekit rubric lint`, through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from judgekit.rubric import lock as locking
from judgekit.cli import main
from judgekit.errors import InputError
from judgekit.rubric.model import load_rubric

RUBRIC = """\
id: {id}
version: {version}
registered: 2024-05-01
task_success:
  guide: The users table holds the new email address for user {user}.
  postconditions:
    - check: equals
      collection: users
      where: {{id: {user}}}
      field: email
      value: new@example.com
"""


def rubric_text(id: str = "change-email", version: str = "1.0.0", user: int = 1) -> str:
    return RUBRIC.format(id=id, version=version, user=user)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def cli(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture
def rubrics(tmp_path) -> Path:
    folder = tmp_path / "rubrics"
    write(folder / "change-email.yaml", rubric_text())
    write(folder / "nested" / "close-account.yaml", rubric_text(id="close-account", user=2))
    return folder


def lock_args(folder: Path) -> list[str]:
    return [str(folder), "--lock", str(folder / "rubrics.lock")]


# --- lock and check -----------------------------------------------------------------------------


def test_lock_then_check_passes(rubrics):
    locked = cli("rubric", "lock", *lock_args(rubrics))
    assert locked.exit_code == 0, locked.output
    assert locked.stdout.splitlines() == ["locked change-email@1.0.0", "locked close-account@1.0.0"]
    data = json.loads((rubrics / "rubrics.lock").read_text(encoding="utf-8"))
    assert data["format_version"] == 1
    assert data["rubrics"]["change-email@1.0.0"] == {
        "sha256": load_rubric(rubrics / "change-email.yaml").sha256(),
        "file": "change-email.yaml",
        "registered": "2024-05-01",
    }
    assert data["rubrics"]["close-account@1.0.0"]["file"] == "nested/close-account.yaml"
    checked = cli("rubric", "check", *lock_args(rubrics))
    assert (checked.exit_code, checked.stdout) == (0, "every rubric matches its locked hash\n")


def test_locking_again_changes_nothing(rubrics):
    cli("rubric", "lock", *lock_args(rubrics))
    before = (rubrics / "rubrics.lock").read_bytes()
    again = cli("rubric", "lock", *lock_args(rubrics))
    assert again.exit_code == 0 and "every rubric is already locked" in again.stdout
    assert (rubrics / "rubrics.lock").read_bytes() == before


def test_default_paths_are_rubrics_folder_and_its_lock(rubrics, monkeypatch):
    monkeypatch.chdir(rubrics.parent)
    assert cli("rubric", "lock").exit_code == 0
    assert (rubrics / "rubrics.lock").is_file()
    assert cli("rubric", "check").exit_code == 0


def test_editing_a_locked_rubric_without_a_version_bump_fails_check(rubrics):
    cli("rubric", "lock", *lock_args(rubrics))
    write(rubrics / "change-email.yaml", rubric_text(user=7))
    checked = cli("rubric", "check", *lock_args(rubrics))
    assert checked.exit_code == 2
    (line,) = checked.stderr.splitlines()
    assert line.startswith(f"judgekit: error: {rubrics / 'change-email.yaml'}: change-email@1.0.0 changed since it was locked")
    assert "bump its version, then lock again" in line


def test_editing_then_locking_is_refused_and_writes_nothing(rubrics):
    cli("rubric", "lock", *lock_args(rubrics))
    before = (rubrics / "rubrics.lock").read_bytes()
    write(rubrics / "change-email.yaml", rubric_text(user=7))
    write(rubrics / "brand-new.yaml", rubric_text(id="brand-new"))  # would be locked if all were well
    locked = cli("rubric", "lock", *lock_args(rubrics))
    assert locked.exit_code == 2
    assert "change-email@1.0.0 changed since it was locked" in locked.stderr
    assert f"nothing written to {rubrics / 'rubrics.lock'}" in locked.stderr
    assert (rubrics / "rubrics.lock").read_bytes() == before


def test_bumping_the_version_and_locking_again_passes(rubrics):
    cli("rubric", "lock", *lock_args(rubrics))
    write(rubrics / "change-email.yaml", rubric_text(version="1.1.0", user=7))
    assert cli("rubric", "check", *lock_args(rubrics)).exit_code == 2  # not registered yet
    locked = cli("rubric", "lock", *lock_args(rubrics))
    assert (locked.exit_code, locked.stdout) == (0, "locked change-email@1.1.0\n")
    assert cli("rubric", "check", *lock_args(rubrics)).exit_code == 0
    entries = json.loads((rubrics / "rubrics.lock").read_text(encoding="utf-8"))["rubrics"]
    assert {"change-email@1.0.0", "change-email@1.1.0"} <= set(entries)  # append-only: history kept


def test_unlocked_rubric_fails_check_saying_what_to_do(rubrics):
    cli("rubric", "lock", *lock_args(rubrics))
    write(rubrics / "late.yaml", rubric_text(id="late"))
    checked = cli("rubric", "check", *lock_args(rubrics))
    assert checked.exit_code == 2
    assert f"{rubrics / 'late.yaml'}: late@1.0.0 is not pre-registered in" in checked.stderr
    assert "run `judgekit rubric lock`" in checked.stderr


def test_check_without_any_lock_fails_for_every_rubric(rubrics):
    checked = cli("rubric", "check", *lock_args(rubrics))
    assert checked.exit_code == 2
    assert len(checked.stderr.splitlines()) == 2
    assert not (rubrics / "rubrics.lock").exists()


@pytest.mark.parametrize("command", ["lock", "check"])
def test_two_files_with_one_id_at_version_fail_naming_both(rubrics, command):
    write(rubrics / "copy.yaml", rubric_text(user=3))
    result = cli("rubric", command, *lock_args(rubrics))
    assert result.exit_code == 2
    (line,) = result.stderr.splitlines()
    assert "change-email@1.0.0 is also claimed by" in line
    assert str(rubrics / "change-email.yaml") in line and str(rubrics / "copy.yaml") in line
    assert not (rubrics / "rubrics.lock").exists()


def test_a_broken_rubric_stops_the_lock_with_file_and_line(rubrics):
    write(rubrics / "broken.yaml", rubric_text(id="broken").replace("version: 1.0.0", "version: [1"))
    result = cli("rubric", "lock", *lock_args(rubrics))
    assert result.exit_code == 2
    assert result.stderr.startswith(f"judgekit: error: {rubrics / 'broken.yaml'}:")
    assert "Traceback" not in result.output
    assert not (rubrics / "rubrics.lock").exists()


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        pytest.param("{not json", "invalid JSON", id="not_json"),
        pytest.param('{"format_version": 1, "rubrics": {}, "extra": 1}', "extra: unknown key", id="unknown_key"),
        pytest.param('{"rubrics": {"a@1.0.0": {"sha256": "x"}}}', "Field required", id="entry_missing_fields"),
    ],
)
def test_corrupt_lock_file_is_one_clear_error(rubrics, content, expected):
    write(rubrics / "rubrics.lock", content)
    before = (rubrics / "rubrics.lock").read_bytes()
    for command in ("check", "lock"):
        result = cli("rubric", command, *lock_args(rubrics))
        assert result.exit_code == 2
        (line,) = result.stderr.splitlines()
        assert line.startswith(f"judgekit: error: {rubrics / 'rubrics.lock'}") and expected in line
    assert (rubrics / "rubrics.lock").read_bytes() == before


def test_library_lock_reports_problems_and_writes_nothing(rubrics):
    lock_path = rubrics / "rubrics.lock"
    added, problems = locking.lock([rubrics], lock_path)
    assert (added, problems) == (["change-email@1.0.0", "close-account@1.0.0"], [])
    write(rubrics / "change-email.yaml", rubric_text(user=9))
    write(rubrics / "other.yaml", rubric_text(id="other"))
    before = lock_path.read_bytes()
    added, problems = locking.lock([rubrics], lock_path)
    assert added == ["other@1.0.0"]  # what would have been locked...
    assert [p.path for p in problems] == [rubrics / "change-email.yaml"]
    assert lock_path.read_bytes() == before  # ...but nothing was written
    assert [p.path.name for p in locking.check([rubrics], lock_path)] == ["change-email.yaml", "other.yaml"]
    with pytest.raises(InputError, match="bad.lock"):
        locking.read_lock(write(rubrics / "bad.lock", "[]"))


# --- lint ---------------------------------------------------------------------------------------

LINT = """\
id: lint-me
version: 1.0.0
registered: 2024-05-01
task_success:
  guide: |
    The users table holds the new email address for user 1.
    {first}
    Nothing else in the users table changes.
    {third}
  postconditions:
    - check: exists
      collection: users
"""
FIRST_LINE, THIRD_LINE = 7, 9


def lint_file(tmp_path: Path, text: str) -> tuple[int, list[str], Path]:
    path = write(tmp_path / "rubrics" / "lint-me.yaml", text)
    result = cli("rubric", "lint", str(path))
    return result.exit_code, result.stdout.splitlines(), path


VERSION_BOUND = [
    pytest.param("Judge it as gpt-4o would.", "model-name", "'gpt-4o'", id="gpt_4o"),
    pytest.param("Like claude-3-5-sonnet answers.", "model-name", "'claude-3-5-sonnet'", id="claude_3_5_sonnet"),
    pytest.param("Same as Llama-3.1 output.", "model-name", "'Llama-3.1'", id="llama_version"),
    pytest.param("Works with LangChain 0.2 agents.", "framework-version", "'LangChain 0.2'", id="langchain_0_2"),
    pytest.param("Uses the OpenAI 1.3 client.", "framework-version", "'OpenAI 1.3'", id="openai_sdk_version"),
    pytest.param("Matches the v2.1 behaviour.", "version-number", "'v2.1'", id="bare_version_number"),
    pytest.param("As of this release it may refund.", "as-of", "'As of'", id="as_of"),
    pytest.param("The fee is currently ten dollars.", "as-of", "'currently'", id="currently"),
    pytest.param("Use the rules from 2024-05-01 onward.", "date", "'2024-05-01'", id="iso_date"),
    pytest.param("Rules changed in March 2024 here.", "date", "'March 2024'", id="month_year"),
    pytest.param("Use the latest fare table.", "latest", "'latest'", id="latest"),
    pytest.param("A state-of-the-art agent does this.", "latest", "'state-of-the-art'", id="state_of_the_art"),
]


@pytest.mark.parametrize("position", ["first", "third"])
@pytest.mark.parametrize(("phrase", "code", "quoted"), VERSION_BOUND)
def test_lint_flags_version_bound_language_on_its_line(tmp_path, position, phrase, code, quoted):
    fill = {"first": "Only user 1 is touched.", "third": "Only user 1 is touched.", position: phrase}
    exit_code, lines, path = lint_file(tmp_path, LINT.format(**fill))
    line = FIRST_LINE if position == "first" else THIRD_LINE
    assert exit_code == 2
    assert f"{path}:{line}: {code}: task_success guide says {quoted}" in [l.split(": version-bound")[0] for l in lines]
    assert all(l.startswith(f"{path}:{line}: ") for l in lines), lines  # nothing else is flagged


@pytest.mark.parametrize(
    "word",
    [
        pytest.param("good", id="good"),
        pytest.param("appropriate", id="appropriate"),
        pytest.param("reasonable", id="reasonable"),
        pytest.param("properly", id="properly"),
        pytest.param("as needed", id="as_needed"),
        pytest.param("high-quality", id="high_quality"),
    ],
)
def test_lint_flags_vague_words(tmp_path, word):
    exit_code, lines, path = lint_file(tmp_path, LINT.format(first="Only user 1 is touched.", third=f"The reply is {word}."))
    assert exit_code == 2
    assert lines == [
        f"{path}:{THIRD_LINE}: unmeasurable: task_success guide says {word!r}: say what is checked and what passes"
    ]


@pytest.mark.parametrize(
    ("text", "line", "code"),
    [
        pytest.param(
            "id: e\nversion: 1.0.0\nregistered: 2024-05-01\ntask_success:\n  guide: ''\n  required_outputs: [x]\n",
            5, "empty-guide", id="empty_guide",
        ),
        pytest.param(
            "id: e\nversion: 1.0.0\nregistered: 2024-05-01\ntask_success:\n  guide: Pass when.\n  required_outputs: [x]\n",
            5, "empty-guide", id="guide_too_short",
        ),
        pytest.param(
            "id: e\nversion: 1.0.0\nregistered: 2024-05-01\ndescription: x\ntask_success:\n"
            "  guide: The users table holds the new email address.\n",
            5, "empty-criteria", id="task_success_without_checks",
        ),
        pytest.param(
            "id: e\nversion: 1.0.0\nregistered: 2024-05-01\ntool_correctness:\n"
            "  guide: The calls listed below are the ones the task needs.\n  ordered: true\n",
            4, "empty-criteria", id="tool_correctness_without_expectations",
        ),
    ],
)
def test_lint_flags_empty_guides_and_criteria(tmp_path, text, line, code):
    exit_code, lines, path = lint_file(tmp_path, text)
    assert exit_code == 2
    assert [l.split(": ")[:2] for l in lines] == [[f"{path}:{line}", code]]


def test_empty_criteria_names_the_axis_key_line(tmp_path):
    text = "id: e\nversion: 1.0.0\nregistered: 2024-05-01\ntask_success:\n  guide: The users table holds the new email address.\n"
    _, lines, path = lint_file(tmp_path, text)
    assert lines[0].startswith(f"{path}:4: empty-criteria")


def test_clean_rubric_has_no_finding(tmp_path):
    text = LINT.format(first="Only user 1 is touched.", third="The reply names the new address.")
    write(tmp_path / "rubrics" / "other.yaml", rubric_text())
    path = write(tmp_path / "rubrics" / "lint-me.yaml", text)
    result = cli("rubric", "lint", str(path.parent))
    # A clean lint says what it checked: both files, their axis sections, what loading validated.
    assert result.exit_code == 0, result.output
    assert result.output == ("checked 2 rubric(s) in 2 file(s) (lint-me@1.0.0, change-email@1.0.0): 2 axis section(s) "
                             "linted for version-bound, vague or empty criteria; 2 predicates validated: no findings\n")


def test_lint_counts_findings_over_files(tmp_path):
    write(tmp_path / "rubrics" / "a.yaml", LINT.format(first="Like gpt-4o.", third="Be reasonable."))
    write(tmp_path / "rubrics" / "b.yaml", LINT.format(first="Use the latest rules.", third="Ok then, fine."))
    result = cli("rubric", "lint", str(tmp_path / "rubrics"))
    assert result.exit_code == 2
    assert len(result.stdout.splitlines()) == 3
    assert result.stderr == "3 finding(s)\n"


def test_lint_line_in_a_folded_block(tmp_path):
    text = LINT.replace("guide: |", "guide: >").format(first="Only user 1 is touched.", third="Judge it as gpt-4o would.")
    exit_code, lines, path = lint_file(tmp_path, text)
    assert lines[0].startswith(f"{path}:{THIRD_LINE}: model-name")
