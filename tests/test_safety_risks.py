"""Residual-risk records: which waive a finding on which day, and how a bad record is reported."""

from __future__ import annotations

import json
import shutil
from datetime import date, timedelta
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from judgekit.cli import main as cli_main
from judgekit.errors import InputError
from judgekit.safety.findings import SIGNALS, Finding
from judgekit.suite.safety_policy import SafetyPolicy
from judgekit.safety.risks import (
    DEFAULT_MAX_WAIVER_DAYS,
    MAX_RISK_FILES,
    LoadedRisk,
    RiskRecord,
    RiskRegister,
    RiskScope,
    confine_risks,
    load_risks,
    new_risk_yaml,
)
from judgekit.schemas import schema_for

ROOT = Path(__file__).resolve().parent.parent
TODAY = date(2026, 12, 1)

# Line numbers below refer to this text; keep them in step when editing it.
RECORD = """\
$schema: ../../schemas/residual-risk.schema.json
format_version: 1
signal: unexpected_write
scope:
  trajectories: [t-1, t-2]
  tools: [send_email]
owner: safety-team@example.com
date: 2026-11-01
reason: The staging mailer only delivers to a sink.
expires: 2026-12-31
rollback: Remove send_email from the staging agent's tools.
ticket: SAFE-12
"""


def edit(line_no: int, new: str | None, text: str = RECORD) -> str:
    """RECORD with line ``line_no`` (1-based) replaced (None: removed)."""
    lines = text.splitlines()
    if new is None:
        del lines[line_no - 1]
    else:
        lines[line_no - 1] = new
    return "\n".join(lines) + "\n"


def finding(signal="unexpected_write", trajectory_id="t-9", tool=None) -> Finding:
    return Finding(signal=signal, trajectory_id=trajectory_id, where="call[0]", evidence="...", detector="tool class",
                   tool=tool)


def folder_with(tmp_path: Path, **files: str) -> Path:
    folder = tmp_path / "risks"
    folder.mkdir()
    for name, text in files.items():
        (folder / name.replace("__", ".")).write_text(text)
    return folder


# --- matching ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("the_finding", "waived"),
    [
        pytest.param(finding(trajectory_id="t-1"), True, id="listed_trajectory"),
        pytest.param(finding(trajectory_id="t-2", tool="update_user"), True, id="listed_trajectory_other_tool"),
        pytest.param(finding(trajectory_id="t-9", tool="send_email"), True, id="listed_tool_other_trajectory"),
        pytest.param(finding(trajectory_id="t-9"), False, id="other_trajectory_no_tool"),
        pytest.param(finding(trajectory_id="t-9", tool="send_sms"), False, id="other_tool"),
        pytest.param(finding(signal="secret_exposed", trajectory_id="t-1", tool="send_email"), False,
                     id="other_signal_same_scope"),
        pytest.param(finding(trajectory_id="t-10"), False, id="no_prefix_match"),
        pytest.param(finding(trajectory_id="T-1"), False, id="case_matters"),
    ],
)
def test_a_valid_record_waives_its_own_signal_and_scope_only(tmp_path, the_finding, waived):
    register = load_risks(folder_with(tmp_path, mailer__yaml=RECORD))
    assert register.problems == []
    risk = register.waiver_for(the_finding, TODAY)
    assert (risk is not None) is waived
    if waived:
        assert risk.name == "mailer.yaml"
        assert risk.path == tmp_path / "risks" / "mailer.yaml"
        assert risk.record.owner == "safety-team@example.com"
    assert register.considered(the_finding, TODAY) == []


@pytest.mark.parametrize(
    ("today", "why"),
    [
        pytest.param(date(2027, 1, 1), "expired on 2026-12-31", id="expired_the_day_after"),
        pytest.param(date(2026, 10, 31), "not yet valid: dated 2026-11-01, after today (2026-10-31)",
                     id="dated_in_the_future"),
    ],
)
def test_a_record_out_of_its_dates_does_not_waive_and_says_why(tmp_path, today, why):
    register = load_risks(folder_with(tmp_path, mailer__yaml=RECORD))
    the_finding = finding(trajectory_id="t-1")
    assert register.waiver_for(the_finding, today) is None
    [considered] = register.considered(the_finding, today)
    assert considered.risk.name == "mailer.yaml"
    assert considered.why == why
    assert considered.describe() == f"waiver mailer.yaml {why}: not applied"


@pytest.mark.parametrize(
    "today",
    [pytest.param(date(2026, 11, 1), id="first_day"), pytest.param(date(2026, 12, 31), id="last_day")],
)
def test_date_and_expires_are_both_days_the_record_counts(tmp_path, today):
    register = load_risks(folder_with(tmp_path, mailer__yaml=RECORD))
    assert register.waiver_for(finding(trajectory_id="t-1"), today) is not None


def test_an_expired_record_does_not_hide_a_valid_one(tmp_path):
    old = edit(10, "expires: 2026-11-15")
    register = load_risks(folder_with(tmp_path, a_old__yaml=old, b_new__yaml=RECORD))
    the_finding = finding(trajectory_id="t-1")
    assert register.waiver_for(the_finding, TODAY).name == "b_new.yaml"
    assert [c.risk.name for c in register.considered(the_finding, TODAY)] == ["a_old.yaml"]


def test_an_ownerless_record_built_in_code_does_not_count():
    record = RiskRecord.model_validate(
        {"signal": "secret_exposed", "scope": {"tools": ["x"]}, "owner": "o", "date": "2026-11-01",
         "reason": "r", "expires": "2026-12-31", "rollback": "r"}
    ).model_copy(update={"owner": "  "})
    assert record.why_invalid(TODAY) == "has no owner"


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    signal=st.sampled_from(SIGNALS),
    finding_signal=st.sampled_from(SIGNALS),
    trajectories=st.lists(st.sampled_from(["a", "b", "c"]), max_size=2, unique=True),
    tools=st.lists(st.sampled_from(["x", "y"]), max_size=2, unique=True),
    trajectory_id=st.sampled_from(["a", "b", "c"]),
    tool=st.sampled_from([None, "x", "y", "z"]),
    start=st.integers(-30, 30),
    length=st.integers(1, 60),
)
def test_waiver_rule_property(signal, finding_signal, trajectories, tools, trajectory_id, tool, start, length):
    if not trajectories and not tools:
        return
    written = TODAY + timedelta(days=start)
    text = new_risk_yaml(signal, RiskScope(trajectories=trajectories, tools=tools), "owner@example.com", "why",
                         written + timedelta(days=length), "undo", written)
    data = yaml.safe_load(text)
    data.pop("$schema")
    record = RiskRecord.model_validate(data)
    register = RiskRegister(risks=[LoadedRisk(record, Path("r.yaml"), "r.yaml")])
    the_finding = finding(signal=finding_signal, trajectory_id=trajectory_id, tool=tool)
    covers = signal == finding_signal and (trajectory_id in trajectories or (tool is not None and tool in tools))
    valid = written <= TODAY <= record.expires
    assert (register.waiver_for(the_finding, TODAY) is not None) is (covers and valid)
    assert bool(register.considered(the_finding, TODAY)) is (covers and not valid)


# --- loading: what is refused, with file and line ------------------------------------------------


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        pytest.param(edit(7, "owner: '   '"), 7, "owner: Value error, owner must not be blank", id="blank_owner"),
        pytest.param(edit(7, None), 1, "owner: Field required", id="missing_owner"),
        pytest.param(edit(11, None), 1, "rollback: Field required", id="missing_rollback"),
        pytest.param(edit(9, "reason: ''"), 9, "reason: Value error, reason must not be blank", id="blank_reason"),
        pytest.param(edit(3, "signal: unexpected_writes"), 3, "signal: Input should be", id="bad_signal"),
        pytest.param(edit(10, "expires: 2026-10-01"), 1, "expires (2026-10-01) must be after date (2026-11-01)",
                     id="expires_before_date"),
        pytest.param(edit(10, "expires: 2026-11-01"), 1, "must be after date", id="expires_on_date"),
        pytest.param(edit(10, "expires: 2026-02-30"), 10, "expires: Input should be a valid date",
                     id="impossible_date"),
        pytest.param(edit(10, "expires: 20261231"), 10, "expected an ISO date", id="date_as_number"),
        pytest.param(edit(10, "expires: '20261231'"), 10, "is not an ISO date", id="date_compact_text"),
        pytest.param(edit(10, "expires: 1798675200"), 10, "expected an ISO date", id="date_as_timestamp"),
        pytest.param(edit(10, "expires: 2026-12-31T00:00:00"), 10, "is not an ISO date", id="datetime"),
        pytest.param(edit(6, None, edit(5, "  trajectories: []")), 4, "name at least one trajectory or tool",
                     id="empty_scope"),
        pytest.param(edit(5, "  trajectories: ['t-*']"), 5, "patterns are not supported", id="glob_refused"),
        pytest.param(edit(5, "  trajectories: ['t-1 ']"), 5, "may not be blank or start or end with whitespace",
                     id="trailing_space_id"),
        pytest.param(edit(2, "format_version: 2"), 2, "format_version: Input should be 1", id="future_format"),
        pytest.param(RECORD + "waiver: true\n", 13, "waiver: unknown key", id="unknown_key"),
        pytest.param(RECORD + "owner: someone-else\n", 13, "key 'owner' is given twice", id="duplicate_key"),
        pytest.param("- a list\n", 1, "expected a mapping at the top level", id="not_a_mapping"),
        pytest.param("", 1, "empty document", id="empty_file"),
    ],
)
def test_a_malformed_record_is_a_problem_with_file_and_line_and_waives_nothing(tmp_path, text, line, message):
    folder = folder_with(tmp_path, a_good__yaml=RECORD, b_bad__yaml=text, c_good__yml=RECORD)
    register = load_risks(folder)
    assert [risk.name for risk in register.risks] == ["a_good.yaml", "c_good.yml"]  # the good ones still load
    [problem] = register.problems
    assert problem.startswith(f"{folder / 'b_bad.yaml'}:{line}: "), problem
    assert message in problem
    assert problem.endswith("; not applied")


def test_load_document_refuses_a_blank_owner_with_file_and_line(tmp_path):
    from judgekit._util.documents import load_document

    path = tmp_path / "r.yaml"
    path.write_text(edit(7, "owner: ' '"))
    with pytest.raises(InputError) as caught:
        load_document(path, RiskRecord)
    assert (caught.value.path, caught.value.line) == (str(path), 7)


def test_a_file_that_is_not_utf8_is_a_problem(tmp_path):
    folder = folder_with(tmp_path, a__yaml=RECORD)
    (folder / "b.yaml").write_bytes(b"owner: \xff\n")
    register = load_risks(folder)
    assert [r.name for r in register.risks] == ["a.yaml"]
    assert register.problems == [f"{folder / 'b.yaml'}: not UTF-8 text; not applied"]


# --- the folder ----------------------------------------------------------------------------------


def test_a_missing_folder_is_an_empty_register(tmp_path):
    register = load_risks(tmp_path / "nowhere")
    assert (register.risks, register.problems, register.ignored) == ([], [], [])
    assert register.waiver_for(finding(), TODAY) is None
    assert register.summary(TODAY) == []


def test_a_folder_that_is_a_file_is_refused(tmp_path):
    path = tmp_path / "risks"
    path.write_text(RECORD)
    with pytest.raises(InputError, match="found a file") as caught:
        load_risks(path)
    assert caught.value.path == str(path)


def test_a_folder_that_is_a_link_is_refused(tmp_path):
    real = folder_with(tmp_path, a__yaml=RECORD)
    link = tmp_path / "linked"
    link.symlink_to(real, target_is_directory=True)
    with pytest.raises(InputError, match="symbolic link"):
        load_risks(link)


def test_a_record_that_is_a_link_is_a_problem_and_waives_nothing(tmp_path):
    outside = tmp_path / "outside.yaml"
    outside.write_text(RECORD)
    folder = folder_with(tmp_path)
    (folder / "linked.yaml").symlink_to(outside)
    (folder / "README.md").symlink_to(outside)  # not a record: ignored, whatever it is
    register = load_risks(folder)
    assert register.risks == []
    [problem] = register.problems
    assert problem.startswith(f"{folder / 'linked.yaml'}: is a symbolic link")
    assert register.ignored == ["README.md"]
    assert register.waiver_for(finding(trajectory_id="t-1"), TODAY) is None


def test_only_yaml_files_directly_in_the_folder_are_read_in_name_order(tmp_path):
    folder = folder_with(tmp_path, README__md="# how to\n", b__yml=RECORD, a__YAML=RECORD, c__json="{}",
                         notes__txt="x")
    (folder / "sub").mkdir()
    (folder / "sub" / "hidden.yaml").write_text(RECORD)
    (folder / "dir.yaml").mkdir()
    register = load_risks(folder)
    assert [r.name for r in register.risks] == ["a.YAML", "b.yml"]
    assert register.ignored == ["README.md", "c.json", "dir.yaml", "notes.txt", "sub"]
    assert register.problems == []


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(names=st.lists(st.text("abcXYZ019-_.", min_size=1, max_size=8), min_size=1, max_size=8, unique=True))
def test_order_is_by_name_whatever_the_creation_order(tmp_path_factory, names):
    folder = tmp_path_factory.mktemp("risks")
    for name in names:
        (folder / f"{name}.yaml").write_text(RECORD)
    assert [r.name for r in load_risks(folder).risks] == sorted(f"{name}.yaml" for name in names)


def test_too_many_files_is_refused(tmp_path):
    folder = folder_with(tmp_path, a__yaml=RECORD, b__yaml=RECORD, c__yaml=RECORD, d__yaml=RECORD)
    assert len(load_risks(folder, max_files=4).risks) == 4
    with pytest.raises(InputError, match="more than 3 entries"):
        load_risks(folder, max_files=3)
    assert MAX_RISK_FILES == 10_000


# --- expiring and the summary --------------------------------------------------------------------


def test_expiring_lists_valid_records_ending_within_the_window(tmp_path):
    folder = folder_with(
        tmp_path,
        a_soon__yaml=edit(10, "expires: 2026-12-10"),
        b_today__yaml=edit(10, "expires: 2026-12-01"),
        c_later__yaml=RECORD,  # 2026-12-31
        d_gone__yaml=edit(10, "expires: 2026-11-30"),
        e_future__yaml=edit(8, "date: 2026-12-05"),
        f_edge__yaml=edit(10, "expires: 2026-12-15"),
    )
    register = load_risks(folder)
    assert [r.name for r in register.expiring(TODAY)] == ["a_soon.yaml", "b_today.yaml", "f_edge.yaml"]
    assert [r.name for r in register.expiring(TODAY, within_days=0)] == ["b_today.yaml"]
    assert [r.name for r in register.expiring(TODAY, within_days=30)] == [
        "a_soon.yaml", "b_today.yaml", "c_later.yaml", "f_edge.yaml"]
    summary = {state.name: (state.state, state.days_left, state.text) for state in register.summary(TODAY)}
    assert summary == {
        "a_soon.yaml": ("expiring", 9, "expires in 9 days (2026-12-10)"),
        "b_today.yaml": ("expiring", 0, "expires today"),
        "c_later.yaml": ("valid", 30, "valid until 2026-12-31"),
        "d_gone.yaml": ("expired", -1, "expired on 2026-11-30"),
        "e_future.yaml": ("not yet valid", 30, "not yet valid: dated 2026-12-05, after today (2026-12-01)"),
        "f_edge.yaml": ("expiring", 14, "expires in 14 days (2026-12-15)"),
    }
    state = register.summary(TODAY)[0]
    assert (state.owner, state.signal, state.scope) == (
        "safety-team@example.com", "unexpected_write", "trajectories t-1, t-2; tools send_email")
    assert json.loads(state.model_dump_json())["expires"] == "2026-12-10"


# --- the template and the schema -----------------------------------------------------------------


def test_new_risk_yaml_round_trips_through_the_loader(tmp_path):
    text = new_risk_yaml("secret_exposed", RiskScope(tools=["send_email"]), "me@example.com", "canary key only",
                         date(2027, 1, 15), "rotate the canary key", TODAY, ticket="SAFE-1")
    assert text.startswith("$schema: ../../schemas/residual-risk.schema.json\n")
    register = load_risks(folder_with(tmp_path, r__yaml=text))
    assert register.problems == []
    record = register.risks[0].record
    assert (record.date, record.expires, record.ticket, record.scope.trajectories) == (
        TODAY, date(2027, 1, 15), "SAFE-1", [])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param({"signal": "nope"}, "signal: Input should be", id="bad_signal"),
        pytest.param({"owner": ""}, "owner must not be blank", id="blank_owner"),
        pytest.param({"expires": TODAY}, "must be after date", id="expires_today"),
    ],
)
def test_new_risk_yaml_refuses_a_bad_record(kwargs, message):
    arguments = {"signal": "secret_exposed", "scope": RiskScope(tools=["x"]), "owner": "me", "reason": "r",
                 "expires": date(2027, 1, 1), "rollback": "r", "today": TODAY, **kwargs}
    with pytest.raises(InputError, match=message):
        new_risk_yaml(**arguments)


@settings(max_examples=100, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(owner=st.text(min_size=1).filter(str.strip), reason=st.text(min_size=1).filter(str.strip),
       tool=st.text(min_size=1, max_size=20).filter(lambda t: t == t.strip() and not set(t) & set("*?[")))
def test_new_risk_yaml_round_trips_any_text(tmp_path_factory, owner, reason, tool):
    try:
        text = new_risk_yaml("sql_from_untrusted", RiskScope(tools=[tool]), owner, reason, date(2027, 1, 1),
                             "undo", TODAY)
    except InputError:
        return  # e.g. a character YAML cannot hold; refused, never written
    folder = tmp_path_factory.mktemp("risks")
    (folder / "r.yaml").write_text(text, encoding="utf-8")
    register = load_risks(folder)
    assert register.problems == []  # what new_risk_yaml writes, the loader reads back
    record = register.risks[0].record
    assert (record.owner, record.reason, record.scope.tools) == (owner, reason, [tool])


def test_the_records_readme_and_an_empty_register_in_the_repository():
    folder = ROOT / "safety" / "risks"
    assert (folder / "README.md").is_file()
    register = load_risks(folder)
    assert register.problems == []


def test_the_schema_accepts_the_example_and_refuses_a_record_without_owner():
    validator = Draft202012Validator(schema_for("residual-risk"))
    document = json.loads(json.dumps(yaml.safe_load(RECORD), default=str))
    assert not list(validator.iter_errors(document))
    document.pop("owner")
    assert list(validator.iter_errors(document))


# --- how long a waiver may last --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expires", "max_days", "refused"),
    [
        pytest.param("2027-01-30", None, False, id="90_days_by_default_accepted"),
        pytest.param("2027-01-31", None, True, id="91_days_by_default_refused"),
        pytest.param("2026-12-01", 30, False, id="30_days_under_a_lowered_limit"),
        pytest.param("2026-12-02", 30, True, id="31_days_under_a_lowered_limit"),
        pytest.param("2027-10-27", 360, False, id="360_days_under_a_raised_limit"),
        pytest.param("2027-10-28", 360, True, id="361_days_under_a_raised_limit"),
    ],
)
def test_a_record_longer_than_the_limit_is_a_problem_at_its_expires_line(tmp_path, expires, max_days, refused):
    folder = folder_with(tmp_path, mailer__yaml=edit(10, f"expires: {expires}"))
    register = load_risks(folder, **({} if max_days is None else {"max_days": max_days}))
    if not refused:
        assert register.problems == [] and [r.name for r in register.risks] == ["mailer.yaml"]
        assert register.waiver_for(finding(trajectory_id="t-1"), TODAY) is not None
        return
    assert register.risks == []
    [problem] = register.problems
    days = (date.fromisoformat(expires) - date(2026, 11, 1)).days
    limit = max_days or DEFAULT_MAX_WAIVER_DAYS
    assert problem.startswith(f"{folder / 'mailer.yaml'}:10: the record lasts {days} days"), problem
    assert f"more than the {limit} a waiver may last (safety.max_waiver_days)" in problem
    assert problem.endswith("; not applied")


def test_a_nul_in_the_risks_path_is_refused_naming_the_suite(tmp_path):
    suite = tmp_path / "suite.yaml"
    with pytest.raises(InputError, match="a path with a NUL character cannot be") as caught:
        confine_risks(tmp_path / "a\0b", suite)
    assert caught.value.path == str(suite)


def test_the_limit_is_the_policy_default_and_at_least_one_day():
    assert SafetyPolicy().max_waiver_days == DEFAULT_MAX_WAIVER_DAYS == 90
    assert SafetyPolicy(max_waiver_days=1).max_waiver_days == 1
    with pytest.raises(ValueError, match="greater than or equal to 1"):
        SafetyPolicy(max_waiver_days=0)


def test_an_overlong_record_built_in_code_does_not_count():
    record = RiskRecord.model_validate(yaml.safe_load(edit(1, None, edit(10, "expires: 2027-01-31")))
                                       | {"date": "2026-11-01"})
    register = RiskRegister(risks=[LoadedRisk(record, Path("r.yaml"), "r.yaml")])
    the_finding = finding(trajectory_id="t-1")
    assert register.waiver_for(the_finding, TODAY) is None
    [considered] = register.considered(the_finding, TODAY)
    assert considered.why == "lasts 91 days, more than the 90 a waiver may last"
    assert register.summary(TODAY)[0].state == "invalid"
    assert RiskRegister(risks=register.risks, max_days=91).waiver_for(the_finding, TODAY) is not None


def test_new_risk_yaml_refuses_a_record_longer_than_the_limit():
    arguments = {"signal": "secret_exposed", "scope": RiskScope(tools=["x"]), "owner": "me", "reason": "r",
                 "rollback": "r", "today": TODAY}
    assert new_risk_yaml(expires=TODAY + timedelta(days=90), **arguments)
    with pytest.raises(InputError, match="would last 91 days, more than the 90"):
        new_risk_yaml(expires=TODAY + timedelta(days=91), **arguments)
    assert new_risk_yaml(expires=TODAY + timedelta(days=91), max_days=91, **arguments)


# --- the holes a hostile author would try --------------------------------------------------------


@pytest.mark.parametrize(
    ("today", "problem"),
    [
        pytest.param(date(2026, 11, 1), None, id="dated_today_counts"),
        pytest.param(date(2026, 10, 31), "dated 2026-11-01, after today (2026-10-31)", id="dated_tomorrow_refused"),
    ],
)
def test_a_record_dated_after_the_scan_day_is_a_problem_at_its_date_line(tmp_path, today, problem):
    # Records dated ahead, each within the limit, would chain a waiver past it.
    folder = folder_with(tmp_path, mailer__yaml=RECORD)
    register = load_risks(folder, today=today)
    if problem is None:
        assert register.problems == [] and register.waiver_for(finding(trajectory_id="t-1"), today) is not None
    else:
        assert register.risks == []
        assert register.problems == [(f"{folder / 'mailer.yaml'}:8: {problem}: date a record the day it is written "
                                      "(records dated ahead, one after another, would outlast "
                                      "safety.max_waiver_days); not applied")]


@pytest.mark.parametrize(
    "owner",
    [
        pytest.param("\u200b", id="zero_width_space"),
        pytest.param("\u00a0\u3000", id="no_break_and_ideographic_spaces"),
        pytest.param("\u3164", id="hangul_filler"),
        pytest.param("\u2800", id="blank_braille"),
        pytest.param("\u2060\ufeff", id="word_joiner_and_bom"),
        pytest.param("\u0301", id="lone_combining_mark"),
    ],
)
def test_an_owner_that_looks_empty_is_a_problem(tmp_path, owner):
    folder = folder_with(tmp_path, mailer__yaml=edit(7, f'owner: "{owner}"'))
    [problem] = load_risks(folder).problems
    assert problem.startswith(f"{folder / 'mailer.yaml'}:7: owner: Value error, owner must not be blank"), problem
    record = RiskRecord.model_validate(yaml.safe_load(edit(1, None))).model_copy(
        update={"owner": json.loads(f'"{owner}"')})
    assert record.why_invalid(TODAY) == "has no owner"


def test_an_owner_with_one_visible_character_among_invisible_ones_is_kept(tmp_path):
    register = load_risks(folder_with(tmp_path, mailer__yaml=edit(7, 'owner: "\u200bJ\u00e9\u200b"')))
    assert register.problems == [] and register.risks[0].record.owner == "\u200bJ\u00e9\u200b"


# --- a suite's risks folder is confined to the suite's folder tree, as snapshots are ------------


def safety_suite(tmp_path: Path, risks: str = "risks", **policy: object) -> Path:
    """examples/safety copied to tmp_path/repo/safety with ``safety.risks`` set; its suite file."""
    folder = tmp_path / "repo" / "safety"
    shutil.copytree(ROOT / "examples" / "safety", folder)
    suite = folder / "suite.yaml"
    suite.write_text(suite.read_text() + "".join(f"  {key}: {json.dumps(value)}\n" for key, value in policy.items()))
    set_risks(suite, risks)
    return suite


def set_risks(suite: Path, risks: str) -> None:
    lines = suite.read_text().splitlines(keepends=True)
    [at] = [n for n, line in enumerate(lines) if line.startswith("  risks: ")]
    lines[at] = f"  risks: {json.dumps(risks)}\n"
    suite.write_text("".join(lines))


def drafts_waiver(folder: Path, name: str = "drafts.yaml", **fields: str) -> Path:
    """A waiver of the one destructive-without-confirmation finding of examples/safety."""
    folder.mkdir(parents=True, exist_ok=True)
    record = {"signal": "destructive_without_confirmation", "scope": {"trajectories": ["delete-unconfirmed"]},
              "owner": "dana@example.com", "date": "2026-11-20", "reason": "drafts are recoverable",
              "expires": "2026-12-31", "rollback": "restore the draft from the trash", **fields}
    path = folder / name
    path.write_text(yaml.safe_dump(record, sort_keys=False))
    return path


def safety_cli(suite: Path, *more: str):
    return CliRunner().invoke(cli_main, ["safety", str(suite), "--allow-dirty", "--today", "2026-12-01",
                                         "--no-judge", *more])


def escape_up(tmp_path: Path, suite: Path) -> tuple[str, str]:
    drafts_waiver(tmp_path / "elsewhere")
    return "../../elsewhere", "the residual-risk folder"


def escape_absolute(tmp_path: Path, suite: Path) -> tuple[str, str]:
    drafts_waiver(tmp_path / "elsewhere")
    return str(tmp_path / "elsewhere"), "the residual-risk folder"


def escape_missing_folder_outside(tmp_path: Path, suite: Path) -> tuple[str, str]:
    return "../nowhere", "the residual-risk folder"  # refused though empty: never silently ignored


def escape_linked_folder(tmp_path: Path, suite: Path) -> tuple[str, str]:
    drafts_waiver(tmp_path / "elsewhere")
    shutil.rmtree(suite.parent / "risks")
    (suite.parent / "risks").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    return "risks", "the residual-risk folder"


def escape_linked_parent(tmp_path: Path, suite: Path) -> tuple[str, str]:
    drafts_waiver(tmp_path / "elsewhere" / "risks")
    (suite.parent / "shared").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    return "shared/risks", "the residual-risk folder"


def escape_linked_record(tmp_path: Path, suite: Path) -> tuple[str, str]:
    outside = drafts_waiver(tmp_path / "elsewhere")
    (suite.parent / "risks" / "drafts.yaml").symlink_to(outside)
    return "risks", "the residual-risk record " + str(suite.parent / "risks" / "drafts.yaml")


def escape_linked_record_via_a_link(tmp_path: Path, suite: Path) -> tuple[str, str]:
    outside = drafts_waiver(tmp_path / "elsewhere")
    (suite.parent / "risks" / "hop.txt").symlink_to(outside)  # not a record itself: ignored
    (suite.parent / "risks" / "drafts.yaml").symlink_to(suite.parent / "risks" / "hop.txt")
    return "risks", "the residual-risk record " + str(suite.parent / "risks" / "drafts.yaml")


@pytest.mark.parametrize(
    "escape",
    [
        pytest.param(escape_up, id="dot_dot"),
        pytest.param(escape_absolute, id="absolute"),
        pytest.param(escape_missing_folder_outside, id="missing_folder_outside"),
        pytest.param(escape_linked_folder, id="symlinked_folder"),
        pytest.param(escape_linked_parent, id="symlinked_parent_folder"),
        pytest.param(escape_linked_record, id="symlinked_record"),
        pytest.param(escape_linked_record_via_a_link, id="symlinked_record_through_two_links"),
    ],
)
def test_waivers_outside_the_suite_folder_tree_are_refused_naming_the_suite(tmp_path, escape):
    suite = safety_suite(tmp_path)
    risks, what = escape(tmp_path, suite)
    set_risks(suite, risks)
    out = tmp_path / "scan.json"
    result = safety_cli(suite, "--out", str(out))
    assert result.exit_code == 2, result.output
    message = result.output.strip()
    assert message.startswith(f"judgekit: error: {suite}: "), message
    assert what in message and f"outside the suite's folder tree ({suite.parent})" in message, message
    assert not out.exists()  # nothing measured, nothing written


def test_a_nul_in_the_risks_path_is_exit_2_from_the_command(tmp_path):
    suite = safety_suite(tmp_path)
    set_risks(suite, "ri\0sks")
    result = safety_cli(suite)
    assert result.exit_code == 2 and "a path with a NUL character cannot be" in result.output, result.output


@pytest.mark.parametrize(
    ("layout", "exit_code"),
    [
        pytest.param("subfolder", 0, id="subfolder_applies"),
        pytest.param("linked_inside", 0, id="parent_linked_inside_the_tree_applies"),
        pytest.param("record_linked_inside", 4, id="record_linked_inside_is_a_problem"),
    ],
)
def test_waivers_inside_the_suite_folder_tree_are_read(tmp_path, layout, exit_code):
    suite = safety_suite(tmp_path, risks="review/risks" if layout != "record_linked_inside" else "risks")
    base = suite.parent
    if layout == "subfolder":
        drafts_waiver(base / "review" / "risks")
    elif layout == "linked_inside":
        drafts_waiver(base / "kept" / "risks")
        (base / "review").symlink_to(base / "kept", target_is_directory=True)
    else:
        real = drafts_waiver(base / "kept")
        (base / "risks" / "drafts.yaml").symlink_to(real)
    only_the_unconfirmed_delete(base)  # only the waived signal may fire
    out = tmp_path / "scan.json"
    result = safety_cli(suite, "--out", str(out))
    assert result.exit_code == exit_code, result.output
    record = json.loads(out.read_text())
    if exit_code == 0:
        assert [w["file"] for w in record["waivers_used"]] == ["drafts.yaml"]
    else:
        assert record["waivers_used"] == [] and "is a symbolic link" in record["risk_problems"][0]


def test_a_risks_folder_that_is_itself_a_link_is_refused_even_inside_the_tree(tmp_path):
    suite = safety_suite(tmp_path, risks="linked")
    drafts_waiver(suite.parent / "risks")
    (suite.parent / "linked").symlink_to(suite.parent / "risks", target_is_directory=True)
    result = safety_cli(suite)
    assert result.exit_code == 2, result.output
    assert f"{suite.parent / 'linked'}: the residual-risk folder is a symbolic link" in result.output


# --- the limit set in a suite, through the command ------------------------------------------------


def only_the_unconfirmed_delete(base):
    """Empty the suite's trajectory files but the delete-unconfirmed run: only its signal fires."""
    for name in ("email-summary.jsonl", "order-status.jsonl"):
        (base / name).write_text("")
    rows = [json.loads(line) for line in (base / "delete-draft.jsonl").read_text().splitlines()]
    (base / "delete-draft.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in rows if r["id"] == "delete-unconfirmed"))


@pytest.mark.parametrize(
    ("setting", "expires", "exit_code", "problem"),
    [
        pytest.param(None, "2027-02-18", 0, None, id="90_days_default_accepted"),
        pytest.param(None, "2027-02-19", 4, "lasts 91 days", id="91_days_default_refused"),
        pytest.param(30, "2026-12-20", 0, None, id="lowered_30_accepts_30"),
        pytest.param(30, "2026-12-21", 4, "lasts 31 days", id="lowered_30_refuses_31"),
        pytest.param(400, "2027-12-25", 0, None, id="raised_400_accepts_400"),
        pytest.param(400, "2027-12-26", 4, "lasts 401 days", id="raised_400_refuses_401"),
        pytest.param(0, "2026-12-20", 2, "max_waiver_days", id="zero_refused_with_the_suite"),
    ],
)
def test_max_waiver_days_in_a_suite(tmp_path, setting, expires, exit_code, problem):
    suite = safety_suite(tmp_path, **({} if setting is None else {"max_waiver_days": setting}))
    path = drafts_waiver(suite.parent / "risks", expires=expires)
    base = suite.parent
    only_the_unconfirmed_delete(base)
    out = tmp_path / "scan.json"
    result = safety_cli(suite, "--out", str(out))
    assert result.exit_code == exit_code, result.output
    if exit_code == 2:
        assert str(suite) in result.output and problem in result.output
        return
    record = json.loads(out.read_text())
    if problem is None:
        assert [w["file"] for w in record["waivers_used"]] == ["drafts.yaml"] and record["risk_problems"] == []
    else:
        expires_line = next(n for n, line in enumerate(path.read_text().splitlines(), 1) if line.startswith("expires"))
        [found] = record["risk_problems"]
        assert found.startswith(f"{path}:{expires_line}: the record {problem} "), found
        assert f"more than the {setting or DEFAULT_MAX_WAIVER_DAYS} a waiver may last" in found
        assert record["waivers_used"] == [] and record["stop_ship"] is True
