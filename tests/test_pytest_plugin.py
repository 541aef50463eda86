"""The pytest plugin, run as users run it: a pytest subprocess with the entry point loaded, on a
copy of the example project, its judge a scripted server started here. Its items and its JUnit
output (pytest's own --junitxml) against the record of a `judgekit run` made here; its pass or
fail against `judgekit run --gate`'s exit status; inert when not configured."""

from __future__ import annotations

import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # before anything imports litellm

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from junitparser import Error, Failure, JUnitXml, Skipped
from test_judge_runner import MODEL, scripted_judge

from judgekit.run.record import read_run
from judgekit.run.rows import judge_fingerprint
from judgekit.testing import ScriptedOpenAIServer

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parent.parent
SUITE = "project/examples/email-update/suite.yaml"
UNIT_TEST = "def test_unit():\n    assert 1 + 1 == 2\n"


@pytest.fixture(scope="module")
def server():
    with ScriptedOpenAIServer(scripted_judge) as srv:
        yield srv


@pytest.fixture
def project(pytester: pytest.Pytester) -> Path:
    """pytester's folder holding unit tests under ``tests`` (the testpaths) and, outside them, a
    copy of the example project."""
    for part in ("examples/email-update", "rubrics"):
        shutil.copytree(ROOT / part, pytester.path / "project" / part)
    pytester.makeini("[pytest]\ntestpaths = tests\n")
    (pytester.path / "tests").mkdir()
    (pytester.path / "tests" / "test_unit.py").write_text(UNIT_TEST, encoding="utf-8")
    return pytester.path


def judge_args(server) -> list[str]:
    return ["--judgekit-judge-model", MODEL, "--judgekit-judge-api-base", server.base_url]


def expected_outcomes(record) -> dict[str, str]:
    """nodeid -> outcome, from the record's results alone: a judge verdict without an approved
    judge skips, unscored skips, an error errs, a score short of 1.0 fails."""
    approved = {(seen.fingerprint, axis) for seen in record.judges for axis, s in seen.axes.items() if s == "approved"}
    found = {}
    for result in record.results:
        for axis, res in result.axes.items():
            assert not (axis == "task_success" and res.judge is not None), "this suite has no task-success judge"
            if res.status == "error":
                outcome = "error"
            elif res.status == "unscored" or (
                    res.judge is not None and (judge_fingerprint(res.judge), axis) not in approved):
                outcome = "skipped"
            else:
                outcome = "passed" if res.score >= 1.0 else "failed"
            found[f"{SUITE}::{result.trajectory_id}::{axis}"] = outcome
    return found


VERBOSE_LINE = re.compile(r"^(\S+::\S+) (PASSED|FAILED|SKIPPED|ERROR|XFAIL)\b", re.MULTILINE)


def gate_run(suite: Path, server, cache: Path):
    """`judgekit run SUITE --gate` with the scripted judge, in its own process (pytester unloads
    the modules a test imported first, and scipy and litellm refuse to be imported twice in a
    process): its exit code and its record."""
    record = cache.parent / f"{cache.name}-run.jsonl"
    proc = subprocess.run([sys.executable, "-m", "judgekit", "run", str(suite), "--gate", "--out", str(record),
                           "--cache-dir", str(cache), "--judge-model", MODEL, "--judge-api-base", server.base_url],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode in (0, 1), proc.stderr  # no input error: the gate decides
    return proc.returncode, read_run(record)


def test_items_and_junit_match_the_run_record(project, pytester, server, tmp_path):
    """--judgekit-strict: each trajectory item passes, fails, skips or errs as the JUnit report says."""
    _, record = gate_run(project / SUITE, server, tmp_path / "parent-cache")
    expected = expected_outcomes(record)
    assert set(expected.values()) == {"passed", "failed", "skipped"}  # the example shows all three
    gate = "passed" if record.gate_report.passed else "failed"

    junit = project / "junit.xml"
    result = pytester.runpytest_subprocess(
        "--judgekit-suite", SUITE, "--judgekit-strict", *judge_args(server), "--judgekit-cache-dir", "cache",
        "--junitxml", str(junit), "-v", "-rs", "-p", "no:cacheprovider",
    )
    seen = dict(VERBOSE_LINE.findall(result.stdout.str()))
    assert seen.pop("tests/test_unit.py::test_unit") == "PASSED"  # the unit tests still run beside
    assert seen.pop(f"{SUITE}::gate") == gate.upper()
    assert seen == {nodeid: outcome.upper() for nodeid, outcome in expected.items()}
    counts = {kind: list(expected.values()).count(kind) + (gate == kind) for kind in ("passed", "failed", "skipped")}
    result.assert_outcomes(passed=counts["passed"] + 1, failed=counts["failed"], skipped=counts["skipped"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED

    # A failure shows what was lost; a skip says why.
    out = result.stdout.str()
    lost = next(r for r in record.results if r.trajectory_id == "extra-call").axes["tool_correctness"]
    assert f"lost: {lost.lost[0].point}: {lost.lost[0].reason}" in out
    assert "advisory: no approval record matches" in out

    xml = JUnitXml.fromfile(str(junit))
    cases = [case for suite in xml for case in suite]
    judged = [case for case in cases if case.classname.startswith("project.examples") and case.name != "gate"]
    assert len(judged) == len(expected) and len(cases) == len(expected) + 2
    tally = {
        "failed": sum(any(isinstance(r, Failure) for r in c.result) for c in judged),
        "error": sum(any(isinstance(r, Error) for r in c.result) for c in judged),
        "skipped": sum(any(isinstance(r, Skipped) for r in c.result) for c in judged),
    }
    assert tally == {"failed": counts["failed"] - (gate == "failed"), "error": 0, "skipped": counts["skipped"]}
    suite = next(iter(xml))
    assert (suite.tests, suite.failures, suite.errors, suite.skipped) == (
        len(expected) + 2, counts["failed"], 0, counts["skipped"])
    by_name = {(c.classname, c.name): c for c in judged}
    case = by_name[("project.examples.email-update.suite.yaml.extra-call", "tool_correctness")]
    assert lost.lost[0].reason in case.result[0].message


def test_by_default_the_plugin_passes_and_fails_as_run_gate_does(project, pytester, server, tmp_path):
    """On the example as it is (whatever its gate says): the session fails exactly when
    `judgekit run --gate` exits non-zero; the gate item says what the gate decided, and each
    trajectory short of a pass or full marks is reported (xfail), not failed."""
    code, record = gate_run(project / SUITE, server, tmp_path / "cache")
    expected = expected_outcomes(record)
    result = pytester.runpytest_subprocess("--judgekit-suite", SUITE, *judge_args(server), "--judgekit-cache-dir",
                                           "cache", "-v", "-rx", "-p", "no:cacheprovider")
    assert (result.ret == pytest.ExitCode.OK) == (code == 0)
    seen = dict(VERBOSE_LINE.findall(result.stdout.str()))
    assert seen.pop(f"{SUITE}::gate") == ("PASSED" if code == 0 else "FAILED")
    seen.pop("tests/test_unit.py::test_unit")
    assert seen == {nodeid: {"failed": "XFAIL"}.get(outcome, outcome.upper()) for nodeid, outcome in expected.items()}
    assert "XFAIL" in seen.values()  # the example has trajectories short of full marks
    if code != 0:
        failed = [a for a in record.gate_report.axes if not a.passed]
        result.stdout.fnmatch_lines(["*the gate failed:*", f"*{failed[0].axis}: {failed[0].reasons[0]}*"])


def test_a_suite_green_on_the_mean_but_not_per_trajectory(project, pytester, server, tmp_path):
    """Graded and binary minimums below 1: `run --gate` passes, so does the plugin by default;
    --judgekit-strict fails the trajectories short of full marks."""
    suite = project / SUITE
    document = yaml.safe_load(suite.read_text(encoding="utf-8"))
    document["gate"] = {"min": {"task_success": 0.3, "tool_correctness": 0.7}}  # the example: 0.333, 0.778
    suite.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    code, record = gate_run(suite, server, tmp_path / "cache")
    assert code == 0 and record.gate_report.passed
    short = [nodeid for nodeid, outcome in expected_outcomes(record).items() if outcome == "failed"]
    assert any(nodeid.endswith("::tool_correctness") for nodeid in short)  # graded, short of full marks

    args = ("--judgekit-suite", SUITE, *judge_args(server), "--judgekit-cache-dir", "cache", "-p", "no:cacheprovider")
    lenient = pytester.runpytest_subprocess(*args)
    assert lenient.ret == pytest.ExitCode.OK
    lenient.assert_outcomes(passed=len(expected_outcomes(record)) - len(short) - lenient.parseoutcomes()["skipped"] + 2,
                            xfailed=len(short), skipped=lenient.parseoutcomes()["skipped"])
    strict = pytester.runpytest_subprocess(*args, "--judgekit-strict")
    assert strict.ret == pytest.ExitCode.TESTS_FAILED
    strict.assert_outcomes(passed=lenient.parseoutcomes()["passed"], failed=len(short),
                           skipped=lenient.parseoutcomes()["skipped"])
    # The ini option is the flag's twin.
    pytester.makeini("[pytest]\ntestpaths = tests\njudgekit_strict = true\n")
    assert pytester.runpytest_subprocess(*args).ret == pytest.ExitCode.TESTS_FAILED


def test_the_suite_runs_once_and_the_fixture_shares_it(project, pytester, server):
    pytester.makepyfile(test_custom=f"""
        def test_custom(judgekit_run):
            record = judgekit_run({SUITE!r})
            assert record.trajectories == 9
            assert judgekit_run({SUITE!r}) is record  # the session's run, not a second one
            again = judgekit_run({SUITE!r}, cache_dir={str(project / "other-cache")!r})
            assert again is not record and again.run_id != record.run_id
            assert [r.trajectory_id for r in again.results] == [r.trajectory_id for r in record.results]
    """)
    result = pytester.runpytest_subprocess(
        "--judgekit-suite", SUITE, *judge_args(server), "--judgekit-cache-dir", "cache",
        "test_custom.py", "-p", "no:cacheprovider", "-k", "custom or ok",
    )
    result.assert_outcomes(passed=3, skipped=1)  # -k applies to the suite's items too: ok x 3 axes


def test_inert_when_not_configured(project, pytester):
    pytester.makeconftest("""
        import json, sys

        def pytest_sessionfinish(session):
            loaded = sorted(m for m in sys.modules if m == "judgekit" or m.startswith("judgekit."))
            with open("modules.json", "w") as handle:
                json.dump({"loaded": loaded, "plugin": session.config.pluginmanager.has_plugin("judgekit")}, handle)
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    report = json.loads((project / "modules.json").read_text())
    assert report["plugin"]  # the entry point loaded it...
    # ...and it imported nothing of judgekit but the package's own light modules.
    assert set(report["loaded"]) <= {"judgekit", "judgekit._util", "judgekit._util.version", "judgekit.errors",
                                     "judgekit.pytest_plugin"}  # _util: its face, a docstring
    assert "judgekit.run" not in report["loaded"]


def test_ini_suites_are_collected_like_testpaths(project, pytester):
    pytester.makeini(f"[pytest]\ntestpaths = tests\njudgekit_suites =\n    {SUITE}\n")
    everything = pytester.runpytest_subprocess("--collect-only", "-q", "-p", "no:cacheprovider")
    ids = [line for line in everything.stdout.lines if "::" in line]
    assert "tests/test_unit.py::test_unit" in ids
    assert f"{SUITE}::ok::task_success" in ids and f"{SUITE}::gate" in ids and len(ids) == 1 + 27 + 1
    # A path on the command line runs that path only, as with testpaths.
    narrow = pytester.runpytest_subprocess("--collect-only", "-q", "-p", "no:cacheprovider", "tests/test_unit.py")
    assert [line for line in narrow.stdout.lines if "::" in line] == ["tests/test_unit.py::test_unit"]


def test_a_suite_that_cannot_be_read_is_a_collection_error(project, pytester):
    (project / "broken.yaml").write_text("name: broken\nrubrics: [missing.yaml]\ntrajectories: []\n")
    result = pytester.runpytest_subprocess("--judgekit-suite", "broken.yaml", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*ERROR collecting broken.yaml*", "*judgekit could not read the suite*"])


def test_a_failed_run_makes_every_item_an_error(project, pytester, server):
    # The rubric changed without a version bump: the suite is read, but its run is refused.
    rubric = project / "project" / "rubrics" / "update-email.yaml"
    rubric.write_text(rubric.read_text(encoding="utf-8").replace("Update the user's email", "Change the email"),
                      encoding="utf-8")
    result = pytester.runpytest_subprocess(
        "--judgekit-suite", SUITE, *judge_args(server), "--judgekit-cache-dir", "cache", "-p", "no:cacheprovider",
    )
    result.assert_outcomes(passed=1, errors=27 + 1)  # each trajectory x axis, and the gate
    result.stdout.fnmatch_lines(["*the judgekit run of *suite.yaml failed: *changed since it was locked*"])
    assert result.stdout.str().count("changed since it was locked") >= 28  # once per item, run once


def test_a_history_records_each_run_and_a_compare_item_fails_on_a_regression(project, pytester, server):
    """--judgekit-history: the run goes through judgekit.finish, recorded and compared with the
    suite's last green run; the suite's compare item fails when a dropped axis is flagged."""
    from judgekit.ci.history import History

    suite = project / SUITE
    suite.write_text(re.sub(r"\ngate:\n(  .*\n)+", "\ngate: {min: {task_success: 0.0, tool_correctness: 0.0, "
                            "faithfulness: 0.0}}\n", suite.read_text()))
    args = ("--judgekit-suite", SUITE, *judge_args(server), "--judgekit-cache-dir", "cache",
            "--judgekit-history", "h.sqlite", "-p", "no:cacheprovider", "-v")
    first = pytester.runpytest_subprocess(*args)
    assert re.search(rf"^{re.escape(SUITE)}::compare PASSED", first.stdout.str(), re.MULTILINE), first.stdout.str()
    trajectories = suite.parent / "trajectories.jsonl"
    lines = []
    for line in trajectories.read_text().splitlines():
        item = json.loads(line)
        if item["id"] in ("ok", "retry-after-error"):  # the same update again: the world ends the same
            item["calls"] = [*item["calls"], {"tool": "update_user", "args": {"user_id": 1, "email": "alice@example.com"},
                                              "result": {"id": 1, "email": "alice@example.com"}}]
        lines.append(json.dumps(item))
    trajectories.write_text("\n".join(lines) + "\n")
    second = pytester.runpytest_subprocess(*args)
    out = second.stdout.str()
    assert re.search(rf"^{re.escape(SUITE)}::compare FAILED", out, re.MULTILINE), out
    assert "the comparison with the baseline failed" in out and "tool_correctness" in out
    with History(project / "h.sqlite", create=False) as store:
        newest, oldest = store.runs()
        assert oldest.green and not newest.green and newest.compare_passed is False
