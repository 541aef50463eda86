"""Rubric and suite files: what loads, what is hashed, and one clear file:line error for the rest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from judgekit.errors import InputError
from judgekit.rubric.model import load_rubric
from judgekit.suite import load_suite

# Line numbers below refer to this text; keep them in step when editing it.
RUBRIC = """\
id: change-email
version: 1.0.0
registered: 2024-05-01
description: Change a user's email.
task_success:
  guide: The user's email in the users table holds the new address afterwards.
  postconditions:
    - check: equals
      collection: users
      where: {id: 1}
      field: email
      value: new@example.com
tool_correctness:
  guide: One update_user call for user 1 with a well-formed email address.
  expected_calls:
    - tool: update_user
      args:
        user_id: {const: 1}
        email: {type: string, pattern: "@"}
"""


def edit(line_no: int, new: str | None, text: str = RUBRIC) -> str:
    """RUBRIC with line ``line_no`` (1-based) replaced (None: removed)."""
    lines = text.splitlines()
    if new is None:
        del lines[line_no - 1]
    else:
        lines[line_no - 1] = new
    return "\n".join(lines) + "\n"


def insert(after: int, new: str, text: str = RUBRIC) -> str:
    lines = text.splitlines()
    lines.insert(after, new)
    return "\n".join(lines) + "\n"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# --- rubric files -------------------------------------------------------------------------------


def test_the_example_rubric_loads(tmp_path):
    rubric = load_rubric(write(tmp_path / "r.yaml", RUBRIC))
    assert rubric.ref == "change-email@1.0.0"
    assert rubric.axes() == ["task_success", "tool_correctness"]
    assert rubric.task_success.postconditions[0].check == "equals"
    assert rubric.tool_correctness.expected_calls[0].args["user_id"] == {"const": 1}
    assert len(rubric.sha256()) == 64


BAD_RUBRICS = [
    pytest.param(edit(4, "description: Change: a user"), 4, "YAML syntax error: mapping values are not allowed here", id="yaml_syntax_error"),
    pytest.param(insert(3, "colour: red"), 4, "colour: unknown key", id="unknown_top_level_key"),
    pytest.param(insert(6, "  guides: twice"), 7, "task_success.guides: unknown key", id="unknown_key_in_an_axis"),
    pytest.param(insert(16, "      argz: {}"), 17, "tool_correctness.expected_calls.0.argz: unknown key", id="unknown_key_in_an_expected_call"),
    pytest.param(edit(2, 'version: "1.0"'), 2, "'1.0' is not a semantic version (MAJOR.MINOR.PATCH)", id="version_not_semver"),
    pytest.param(edit(2, "version: 1.0.0.1"), 2, "is not a semantic version", id="version_four_parts"),
    pytest.param(edit(2, "version: 1.0"), 2, "version: Input should be a valid string", id="version_read_as_a_float"),
    pytest.param(edit(1, "id: Change_Email"), 1, "id: Value error, must be lowercase", id="id_not_lowercase"),
    pytest.param(edit(3, "registered: someday"), 3, "registered: Input should be a valid date", id="registered_not_a_date"),
    pytest.param(edit(18, "        user_id: {type: integr}"), 17, "argument 'user_id': invalid JSON Schema", id="invalid_json_schema_in_args"),
    pytest.param(edit(18, "        user_id: {minimum: high}"), 17, "argument 'user_id': invalid JSON Schema", id="json_schema_keyword_of_wrong_type"),
    pytest.param(edit(14, None), 13, "tool_correctness.guide: Field required", id="axis_without_guide"),
    pytest.param("id: x\nversion: 1.0.0\nregistered: 2024-05-01\n", 1, "a rubric needs at least one axis section", id="no_axis"),
    pytest.param("", 1, "empty document", id="empty_file"),
    pytest.param("- id: x\n", 1, "expected a mapping at the top level, got list", id="top_level_list"),
]


@pytest.mark.parametrize(("text", "line", "expected"), BAD_RUBRICS)
def test_bad_rubric_is_one_error_naming_file_and_line(tmp_path, text, line, expected):
    path = write(tmp_path / "rubric.yaml", text)
    with pytest.raises(InputError) as info:
        load_rubric(path)
    assert (info.value.path, info.value.line) == (str(path), line)
    assert str(info.value).startswith(f"{path}:{line}: ")
    assert expected in str(info.value)
    assert "\n" not in str(info.value)


PREDICATE_ERRORS = [
    pytest.param(
        "    - check: matches\n      collection: users\n      field: email\n      pattern: '[a-z'\n",
        "invalid regular expression",
        id="bad_regex_in_matches",
    ),
    pytest.param(
        "    - check: count\n      collection: users\n      op: '=='\n      value: -1\n",
        "greater than or equal to 0",
        id="negative_count",
    ),
    pytest.param(
        "    - check: count\n      collection: users\n      op: '=~'\n      value: 1\n",
        "op: Input should be",
        id="unknown_count_operator",
    ),
    pytest.param(
        "    - check: contains\n      collection: users\n",
        "does not match any of the expected tags",
        id="unknown_check_kind",
    ),
]


@pytest.mark.parametrize(("predicate", "expected"), PREDICATE_ERRORS)
def test_bad_predicate_is_an_error_inside_that_predicate(tmp_path, predicate, expected):
    # The predicate replaces the example's one (lines 8-12); the error must point into it.
    text = "\n".join(RUBRIC.splitlines()[:7]) + "\n" + predicate + "\n".join(RUBRIC.splitlines()[12:]) + "\n"
    path = write(tmp_path / "rubric.yaml", text)
    with pytest.raises(InputError) as info:
        load_rubric(path)
    assert expected in str(info.value)
    assert info.value.path == str(path)
    assert 8 <= info.value.line <= 8 + predicate.count("\n") - 1


@pytest.mark.parametrize(
    ("predicate", "line"),
    [
        pytest.param("    - check: exists\n      collection: users\n      colour: red\n", 10, id="unknown_key_in_predicate"),
        pytest.param(
            "    - check: matches\n      collection: users\n      field: email\n      pattern: '[a-z'\n", 11,
            id="bad_regex_line",
        ),
    ],
)
def test_error_inside_a_predicate_names_the_line_of_its_key(tmp_path, predicate, line):
    text = "\n".join(RUBRIC.splitlines()[:7]) + "\n" + predicate + "\n".join(RUBRIC.splitlines()[12:]) + "\n"
    path = write(tmp_path / "rubric.yaml", text)
    with pytest.raises(InputError) as info:
        load_rubric(path)
    assert info.value.line == line


def test_duplicate_key_in_a_rubric_is_an_error(tmp_path):
    path = write(tmp_path / "rubric.yaml", insert(12, "  postconditions: []"))
    with pytest.raises(InputError) as info:
        load_rubric(path)  # SafeLoader alone would keep the last list and drop the criteria
    assert info.value.line == 13
    assert "'postconditions'" in info.value.detail and "twice" in info.value.detail


# --- hashing ------------------------------------------------------------------------------------


def test_schema_header_is_ignored_and_does_not_change_the_hash(tmp_path):
    plain = load_rubric(write(tmp_path / "a.yaml", RUBRIC))
    headed = load_rubric(write(tmp_path / "b.yaml", "$schema: ./rubric.schema.json\n" + RUBRIC))
    assert headed.sha256() == plain.sha256()


def test_hash_is_of_content_not_of_formatting(tmp_path):
    plain = load_rubric(write(tmp_path / "a.yaml", RUBRIC))
    data = yaml.safe_load(RUBRIC)
    data["registered"] = "2024-05-01"
    reordered = dict(reversed(list(data.items())))
    as_json = load_rubric(write(tmp_path / "b.json", json.dumps(reordered, indent=4)))
    explicit_defaults = load_rubric(write(tmp_path / "c.yaml", insert(14, "  ordered: false")))
    assert as_json.sha256() == plain.sha256() == explicit_defaults.sha256()


@pytest.mark.parametrize(
    "changed",
    [
        pytest.param(edit(12, "      value: other@example.com"), id="expected_value"),
        pytest.param(edit(19, '        email: {type: string, pattern: "@x"}'), id="arg_schema"),
        pytest.param(insert(14, "  ordered: true"), id="ordered_flag"),
        pytest.param(edit(6, "  guide: The user's email in the users table holds the new address after the run."), id="guide_wording"),
        pytest.param(edit(3, "registered: 2024-05-02"), id="registered_date"),
    ],
)
def test_any_change_of_criteria_changes_the_hash(tmp_path, changed):
    before = load_rubric(write(tmp_path / "a.yaml", RUBRIC))
    after = load_rubric(write(tmp_path / "b.yaml", changed))
    assert after.sha256() != before.sha256()


def test_the_hash_is_kept_but_a_copy_with_changes_is_hashed_afresh(tmp_path):
    rubric = load_rubric(write(tmp_path / "a.yaml", RUBRIC))
    first = rubric.sha256()
    assert rubric.sha256() == first  # the kept hash is the one computed
    changed = rubric.model_copy(update={"version": "9.9.9"})
    assert changed.sha256() != first
    assert changed.sha256() == type(rubric).model_validate(changed.model_dump()).sha256()
    assert rubric.model_copy().sha256() == first and rubric.sha256() == first


# --- suite files --------------------------------------------------------------------------------

SUITE = """\
name: emails
rubrics: [rubrics]
trajectories:
  - file: runs.jsonl
    rubric: change-email
"""


def make_suite(tmp_path: Path, suite: str = SUITE, rubrics: dict[str, str] | None = None) -> Path:
    for name, text in (rubrics if rubrics is not None else {"change-email.yaml": RUBRIC}).items():
        write(tmp_path / "rubrics" / name, text)
    write(tmp_path / "runs.jsonl", '{"id": "t1", "prompt": "p"}\n')
    return write(tmp_path / "suite.yaml", suite)


def test_suite_loads_from_its_file_or_its_folder(tmp_path):
    path = make_suite(tmp_path)
    for target in (path, tmp_path):
        loaded = load_suite(target)
        assert loaded.path == path.resolve()
        assert list(loaded.rubrics) == ["change-email@1.0.0"]
        assert loaded.rubric_files["change-email@1.0.0"] == (tmp_path / "rubrics" / "change-email.yaml").resolve()
        assert loaded.rubric_for("change-email").ref == loaded.rubric_for("change-email@1.0.0").ref


def test_rubric_folder_is_searched_recursively_for_yaml_yml_and_json(tmp_path):
    second = edit(1, "id: other").replace("1.0.0", "2.1.0")
    third = json.dumps({**yaml.safe_load(edit(1, "id: third")), "registered": "2024-05-01"})
    make_suite(tmp_path, rubrics={"a.yaml": RUBRIC, "nested/b.yml": second, "nested/deeper/c.json": third, "notes.txt": "x"})
    assert sorted(load_suite(tmp_path).rubrics) == ["change-email@1.0.0", "other@2.1.0", "third@1.0.0"]


BAD_SUITES = [
    pytest.param(
        lambda tmp: make_suite(tmp, SUITE.replace("rubrics: [rubrics]\n", "")),
        "rubrics: Field required",
        id="missing_rubrics_key",
    ),
    pytest.param(
        lambda tmp: make_suite(tmp, SUITE.replace("rubrics: [rubrics]", "rubrics: []")),
        "rubrics: List should have at least 1 item",
        id="empty_rubric_list",
    ),
    pytest.param(
        lambda tmp: make_suite(tmp, SUITE.replace("rubrics: [rubrics]", "rubrics: [nowhere]")),
        "nowhere: rubric file or folder not found",
        id="rubric_folder_missing",
    ),
    pytest.param(
        lambda tmp: make_suite(tmp, SUITE.replace("rubric: change-email", "rubric: change-address")),
        "no rubric 'change-address' among the suite's rubrics",
        id="unknown_rubric_ref",
    ),
    pytest.param(
        lambda tmp: make_suite(tmp, SUITE.replace("rubric: change-email", "rubric: change-email@9.9.9")),
        "no rubric 'change-email@9.9.9'",
        id="unknown_rubric_version",
    ),
    pytest.param(
        lambda tmp: make_suite(tmp, rubrics={"a.yaml": RUBRIC, "b.yaml": RUBRIC.replace("1.0.0", "1.1.0")}),
        "rubric 'change-email' is ambiguous (versions 1.0.0, 1.1.0): name it as id@version",
        id="ambiguous_rubric_ref",
    ),
    pytest.param(
        lambda tmp: make_suite(tmp, SUITE + "colour: red\n"),
        "suite.yaml:6: colour: unknown key",
        id="unknown_key_in_suite",
    ),
    pytest.param(
        lambda tmp: make_suite(tmp, SUITE.replace("    rubric: change-email\n", "")),
        "suite.yaml:4: trajectories.0.rubric: Field required",
        id="trajectory_set_without_rubric",
    ),
    pytest.param(
        lambda tmp: make_suite(tmp, rubrics={"a.yaml": edit(2, "version: one")}),
        "a.yaml:2: version",
        id="a_rubric_in_the_suite_is_bad",
    ),
    pytest.param(lambda tmp: tmp, "this folder holds no suite.yaml: write one with `judgekit init`",
                 id="folder_without_suite_yaml"),
]


@pytest.mark.parametrize(("build", "expected"), BAD_SUITES)
def test_bad_suite_is_one_clear_error(tmp_path, build, expected):
    target = build(tmp_path)
    with pytest.raises(InputError) as info:
        load_suite(target)
    assert expected in str(info.value)
    assert str(tmp_path) in str(info.value)
    assert "\n" not in str(info.value)


def test_two_files_claiming_one_id_at_version_are_both_named(tmp_path):
    make_suite(tmp_path, rubrics={"a.yaml": RUBRIC, "b.yaml": RUBRIC.replace("Change a user's", "Update a user's")})
    with pytest.raises(InputError) as info:
        load_suite(tmp_path)
    message = str(info.value)
    assert "change-email@1.0.0 is also claimed by" in message
    assert str(tmp_path / "rubrics" / "a.yaml") in message and str(tmp_path / "rubrics" / "b.yaml") in message
