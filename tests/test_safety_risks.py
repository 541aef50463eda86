"""Residual-risk records: which waive a finding on which day, and how a bad record is reported."""

from __future__ import annotations

import json
from datetime import date, timedelta
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from judgekit.errors import InputError
from judgekit.safety.findings import SIGNALS, Finding
from judgekit.safety.risks import (
    MAX_RISK_FILES,
    LoadedRisk,
    RiskRecord,
    RiskRegister,
    RiskScope,
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
    from judgekit._documents import load_document

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
