"""JUnit XML and Markdown reports of real runs of the example suite: the JUnit counts against
the run record (read with junitparser), a deliberate regression in the Markdown, hostile ids."""

from __future__ import annotations

import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # before anything imports litellm

import json
import re
import shutil
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
from junitparser import Error, Failure, JUnitXml, Skipped
from test_judge_runner import MODEL, scripted_judge

from judgekit.ci.compare import compare

from judgekit.run.rows import judge_fingerprint
from judgekit.run.remeasure import run_rows
from judgekit.judge.resolve import JudgeOverride
from judgekit.report import JudgeStatus, ReportInput, report_input
from judgekit.report.junit import outcome_map, render_junit, write_junit, xml_safe
from judgekit.report.markdown import cost_line, escape, render_markdown, write_markdown
from judgekit.run import RunOptions, run_suite
from judgekit.run.ledger import Ledger
from judgekit.testing import ScriptedOpenAIServer

ROOT = Path(__file__).resolve().parent.parent
REGRESSED = ("ok", "retry-after-error", "extra-side-effect", "too-slow")
"""Trajectories that get an extra update_user call: each loses tool correctness's call-count point."""
HOSTILE = {
    "ok": "a|b <img src=x onerror=alert(1)> `tick` @octocat",
    "wrong-tool": "line\nbreak # h1 \x01\x1b[31m ]]></testcase><testcase name='injected'>",
    "too-slow": "**bold** [link](http://evil.example) \u202eevil &amp; <!-- c -->",
}


def project_copy(root: Path, edit=None) -> Path:
    """examples/email-update with its rubric and lock under ``root``; ``edit`` rewrites its
    trajectories (a list of dicts) in place."""
    for part in ("examples/email-update", "rubrics"):
        shutil.copytree(ROOT / part, root / part)
    suite = root / "examples" / "email-update"
    if edit is not None:
        path = suite / "trajectories.jsonl"
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        edit(rows)
        path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return suite


def add_extra_call(rows: list[dict]) -> None:
    for row in rows:
        if row["id"] in REGRESSED:
            row["calls"].append({"tool": "update_user", "args": {"user_id": 1, "email": "alice@example.com"},
                                 "result": {"id": 1, "email": "alice@example.com"}})


def hostile_ids(rows: list[dict]) -> None:
    for row in rows:
        row["id"] = HOSTILE.get(row["id"], row["id"])


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Three runs: the example, the example with a deliberate regression, and hostile ids."""
    base = tmp_path_factory.mktemp("reports")
    with ScriptedOpenAIServer(scripted_judge) as srv:
        options = RunOptions(override=JudgeOverride(model=MODEL, api_base=srv.base_url), cache_dir=base / "cache")
        baseline = run_suite(project_copy(base / "baseline"), options=options)
        regressed = run_suite(project_copy(base / "regressed", add_extra_call), options=options)
        hostile = run_suite(project_copy(base / "hostile", hostile_ids), options=options)
    return {"baseline": baseline, "regressed": regressed, "hostile": hostile}


def comparison_of(runs):
    return compare(run_rows(runs["regressed"]), run_rows(runs["baseline"]), baseline_source="file")


# --- JUnit --------------------------------------------------------------------------------------


def expected_counts(record) -> dict[str, dict[str, int]]:
    """Per axis, worked out from the results alone: a judge verdict whose judge the record says
    is not approved is skipped (task success would fall back on its deterministic checks: not
    in this suite); unscored is skipped; error is an error; scored short of 1.0 a failure."""
    approved = {(seen.fingerprint, axis) for seen in record.judges for axis, s in seen.axes.items() if s == "approved"}
    counts: dict[str, dict[str, int]] = {}
    for result in record.results:
        for axis, res in result.axes.items():
            c = counts.setdefault(axis, {"tests": 0, "failures": 0, "errors": 0, "skipped": 0})
            c["tests"] += 1
            assert not (axis == "task_success" and res.judge is not None), "this suite has no task-success judge"
            if res.status == "error":
                c["errors"] += 1
            elif res.status == "unscored" or (
                    res.judge is not None and (judge_fingerprint(res.judge), axis) not in approved):
                c["skipped"] += 1
            elif res.score < 1.0:
                c["failures"] += 1
    return counts


def parsed(xml_text: str) -> JUnitXml:
    return JUnitXml.fromstring(xml_text.encode("utf-8"))


def suite_counts(xml: JUnitXml) -> dict[str, dict[str, int]]:
    found = {}
    for suite in xml:
        cases = list(suite)
        found[suite.name.rsplit(".", 1)[1]] = {
            "tests": len(cases),
            "failures": sum(isinstance(r, Failure) for c in cases for r in c.result),
            "errors": sum(isinstance(r, Error) for c in cases for r in c.result),
            "skipped": sum(isinstance(r, Skipped) for c in cases for r in c.result),
        }
        # The attributes say what the cases say.
        assert (suite.tests, suite.failures, suite.errors, suite.skipped) == tuple(found[suite.name.rsplit(".", 1)[1]].values())
    return found


@pytest.mark.parametrize("which", ["baseline", "regressed"])
def test_junit_counts_match_the_run_record(runs, which, tmp_path):
    record = runs[which]
    path = tmp_path / "junit.xml"
    write_junit(report_input(record), path)
    xml = JUnitXml.fromfile(str(path))
    expected = expected_counts(record)
    assert suite_counts(xml) == expected
    assert set(expected) == {"task_success", "tool_correctness", "faithfulness"}
    assert expected["faithfulness"]["skipped"] == 9  # the scripted judge has no approval record: advisory
    assert sum(c["failures"] for c in expected.values()) > 0
    # One testcase per trajectory x axis, named by the trajectory, classed by suite and axis.
    for suite in xml:
        assert sorted(case.name for case in suite) == sorted(r.trajectory_id for r in record.results)
        assert {case.classname for case in suite} == {suite.name}


def test_junit_failures_carry_what_was_lost(runs):
    record = runs["regressed"]
    xml = parsed(render_junit(report_input(record)))
    tool = next(s for s in xml if s.name.endswith(".tool_correctness"))
    failures = {case.name: next(r for r in case.result if isinstance(r, Failure)) for case in tool
                if any(isinstance(r, Failure) for r in case.result)}
    assert set(REGRESSED) <= set(failures)
    for tid in REGRESSED:
        res = next(r for r in record.results if r.trajectory_id == tid).axes["tool_correctness"]
        lost = [item for item in res.items if not item.earned]
        assert lost and all(item.point in failures[tid].message and item.reason in failures[tid].text for item in lost)
        assert f"{res.score:.3f}" in failures[tid].message
    skipped = next(s for s in xml if s.name.endswith(".faithfulness"))
    reason = record.gate_report.axes[0].advisory[0].reason
    assert all(r.message.startswith("advisory: ") and reason in r.message for c in skipped for r in c.result)
    properties = {p.name: p.value for p in tool.properties()}
    assert properties["run_id"] == record.run_id and properties["pass"].startswith("full marks")


def test_junit_with_a_comparison_names_the_flag(runs):
    comparison = comparison_of(runs)
    assert comparison.flagged == ["tool_correctness"]
    xml = parsed(render_junit(report_input(runs["regressed"], comparison=comparison)))
    props = {s.name.rsplit(".", 1)[1]: {p.name: p.value for p in s.properties()} for s in xml}
    assert props["tool_correctness"]["flagged"].startswith("yes: ")
    assert props["task_success"]["flagged"] == "no"
    assert props["tool_correctness"]["comparison"] == "failed"
    assert props["tool_correctness"]["baseline_run_id"] == runs["baseline"].run_id


def test_junit_approved_unscored_error_and_task_success_fallback(runs):
    """Cases the example does not reach, made from its record: an approved judge gates
    (faithfulness 0.5 is a failure listing the unsupported claims), an unscored verdict and an
    input error, and an advisory task-success judge leaving its deterministic checks gating."""
    record = runs["baseline"].model_copy(deep=True)
    record.judges[0].axes["faithfulness"] = "approved"
    first, second, third = record.results[:3]
    judge = first.axes["faithfulness"].judge
    second.axes["faithfulness"] = second.axes["faithfulness"].model_copy(
        update={"status": "unscored", "score": None, "unscored_reason": "truncated"})
    third.axes["tool_correctness"] = third.axes["tool_correctness"].model_copy(
        update={"status": "error", "score": None, "error": "snapshot after-x.db is not a SQLite file"})
    slow = next(r for r in record.results if r.trajectory_id == "too-slow")
    for result in (first, slow):  # the faithfulness judge's provenance, not approved for task_success
        result.axes["task_success"] = result.axes["task_success"].model_copy(update={"judge": judge})
    found = outcome_map(record)
    claims = [c for c in first.axes["faithfulness"].claims if not c.supported]
    assert found[(first.trajectory_id, "faithfulness")].kind == "failed"
    assert claims and all(c.claim in found[(first.trajectory_id, "faithfulness")].message for c in claims)
    assert found[(second.trajectory_id, "faithfulness")].message == "unscored: truncated"
    assert found[(third.trajectory_id, "tool_correctness")].kind == "error"
    assert found[("ok", "task_success")].kind == "passed" and found[("ok", "task_success")].advisory
    assert found[("too-slow", "task_success")].kind == "failed"
    assert "advisory" in found[("too-slow", "task_success")].message
    assert "latency" in found[("too-slow", "task_success")].message

    xml = parsed(render_junit(ReportInput(record=record)))
    counts = suite_counts(xml)
    assert counts["faithfulness"] == {"tests": 9, "failures": 8, "errors": 0, "skipped": 1}
    assert counts["tool_correctness"]["errors"] == 1
    case = next(c for s in xml if s.name.endswith(".faithfulness") for c in s if c.name == second.trajectory_id)
    assert case.is_skipped and case.result[0].message == "unscored: truncated"


def test_junit_is_valid_for_hostile_ids(runs, tmp_path):
    record = runs["hostile"]
    path = tmp_path / "hostile.xml"
    write_junit(report_input(record), path)
    text = path.read_text(encoding="utf-8")
    ET.fromstring(text.encode("utf-8"))  # a strict XML 1.0 parser reads it
    xml = JUnitXml.fromfile(str(path))
    names = {case.name for suite in xml for case in suite}
    assert "injected" not in names and len(names) == len(record.results)
    assert HOSTILE["ok"] in names  # nothing lost but what XML cannot hold
    assert xml_safe(HOSTILE["wrong-tool"]) in names and "\\x01" in xml_safe(HOSTILE["wrong-tool"])
    assert suite_counts(xml) == expected_counts(record)


@pytest.mark.parametrize("text, shown", [
    pytest.param("a\x00b", "a\\x00b", id="nul"),
    pytest.param("\ud800", "\\ud800", id="lone_surrogate"),
    pytest.param("\ufffe", "\\ufffe", id="non_character"),
    pytest.param("tab\tnew\nline", "tab\tnew\nline", id="allowed_whitespace_kept"),
    pytest.param("\U0001f600", "\U0001f600", id="astral_kept"),
])
def test_xml_safe(text, shown):
    assert xml_safe(text) == shown
    ET.fromstring(f"<a b='{xml_safe(text)}'>{xml_safe(text)}</a>".encode("utf-8", "surrogatepass"))


# --- Markdown -----------------------------------------------------------------------------------


def table_rows(markdown: str, heading: str) -> list[list[str]]:
    """The body rows of the table under ``heading``, split on unescaped pipes."""
    section = markdown.split(heading, 1)[1].split("\n### ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")][1:]
    return [[cell.strip() for cell in re.split(r"(?<!\\)\|", row)[1:-1]] for row in rows]


def test_markdown_shows_the_flagged_axis_and_the_regressions(runs, tmp_path):
    comparison = comparison_of(runs)
    data = report_input(runs["regressed"], comparison=comparison)
    path = tmp_path / "summary.md"
    write_markdown(data, path)
    text = path.read_text(encoding="utf-8")
    first = text.splitlines()[0]
    assert "**RED**" in first and "flagged: tool\\_correctness" in first and runs["baseline"].run_id in first
    axes = {row[0]: row for row in table_rows(text, "### Axes")}
    assert axes["tool\\_correctness"][-1].startswith("**FLAGGED**")
    assert not axes["task\\_success"][-1].startswith("**FLAGGED**")
    assert "(advisory)" in axes["faithfulness *(advisory)*"][0]
    tool = next(a for a in comparison.axes if a.axis == "tool_correctness")
    assert axes["tool\\_correctness"][1] == f"{tool.mean:.3f}" and axes["tool\\_correctness"][2] == f"{tool.baseline_mean:.3f}"
    assert f"p = {tool.test.p_value:.3g}" in axes["tool\\_correctness"][5]
    regressions = table_rows(text, "### Regressions")
    tool_rows = {row[0]: row for row in regressions if row[1] == "tool\\_correctness"}
    assert set(tool_rows) == {escape(tid) for tid in REGRESSED}
    assert all("call count" in row[-1] for row in tool_rows.values())
    assert all(row[4] == "**yes**" for row in tool_rows.values())  # each had full marks before
    judges = table_rows(text, "### Judges")
    assert judges and judges[0][3] == "**advisory**" and judges[0][4] == "no calibration"
    assert "cost unknown" in text and "$0" not in text  # the scripted judge's price is unknown


def test_markdown_caps_the_regressions(runs):
    comparison = comparison_of(runs)
    one = comparison.regressions[0]
    many = [one.model_copy(update={"trajectory_id": f"t{i:03d}"}) for i in range(45)]
    capped = comparison.model_copy(update={"regressions": many, "regressions_total": 45})
    text = render_markdown(report_input(runs["regressed"], comparison=capped))
    assert len(table_rows(text, "### Regressions")) == 30
    assert "and 15 more" in text


def test_markdown_escapes_hostile_ids(runs):
    record = runs["hostile"]
    comparison = compare(run_rows(record), run_rows(runs["baseline"]), baseline_source="file")
    assert comparison.only_in_run_total == len(HOSTILE)
    text = render_markdown(report_input(record, comparison=comparison))
    assert "<img" not in text and "<!--" not in text and "\x01" not in text and "\u202e" not in text
    assert "@octocat" not in text  # nobody is mentioned
    for line in text.splitlines():
        assert "`" not in line.replace("\\`", "")  # no code span opened
        if line.startswith("| "):  # every row has as many cells as its table's head
            assert len(re.split(r"(?<!\\)\|", line)) >= 3
    tables = [[line for line in block.splitlines() if line.startswith("|")] for block in text.split("\n\n")]
    for table in tables:
        if table:
            widths = {len(re.split(r"(?<!\\)\|", row)) for row in table}
            assert len(widths) == 1, table
    assert "only in this run: " in text and escape(HOSTILE["ok"], 80) in text


def test_markdown_cost_is_never_a_false_zero():
    assert "unknown" in cost_line(Ledger(calls=3, calls_without_cost=3))
    assert "$0.0120 plus 1 call(s) of unknown cost" in cost_line(Ledger(calls=3, cost_usd=0.012, calls_without_cost=1))
    assert cost_line(Ledger(calls=2, cost_usd=0.5, prompt_tokens=1000, completion_tokens=20)).endswith("cost $0.5000.")
    assert "Nothing was judged" in cost_line(None)


def test_markdown_without_a_baseline_and_with_an_approved_judge(runs):
    record = runs["baseline"]
    status = JudgeStatus(axis="faithfulness", rubric="update-email@1.0.0", model_pin=MODEL, endpoint="x",
                         fingerprint="f", status="approved", verdicts=9, kappa=0.71, kappa_low=0.52,
                         kappa_high=0.86, labelled=40, reason="approved by calibration")
    text = render_markdown(ReportInput(record=record, judges=[status]))
    assert "Baseline" not in text and "Regressions" not in text
    assert "0.71 [0.52, 0.86] on 40 labels" in text
    axes = {row[0]: row for row in table_rows(text, "### Axes")}
    own = [r.axes["tool_correctness"].score for r in record.results]
    assert axes["tool\\_correctness"][1] == f"{sum(own) / len(own):.3f}"
    assert axes["task\\_success"][4] == "pass (0.333 ≥ 0.33)"  # the example's minimum fits its planned failures
    # A comparison that found no baseline says so on top and shows the run on its own.
    alone = compare(run_rows(record), None, baseline_source="last-green")
    text = render_markdown(ReportInput(record=record, comparison=alone))
    assert "compare: no baseline (last-green)" in text.splitlines()[0] and "Baseline" not in text

