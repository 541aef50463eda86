"""``judgekit.finish``: the CI loop after a run as one library call (record, compare, reports, the
outcome and its exit code), as ``judgekit run --gate --compare --junit ...`` does it."""

from __future__ import annotations

import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # before anything imports litellm

from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

import judgekit
from judgekit._util.text import MASK, register_secret
from judgekit.ci.history import History
from judgekit.ci.loop import EXIT_GATE_FAILED, EXIT_INPUT, EXIT_OK, Outcome, Reports, finish
from judgekit.judge.resolve import JudgeOverride
from judgekit.report import write_report
from judgekit.run import RunOptions
from judgekit.testing import ScriptedOpenAIServer
from test_ci_loop import regressed_copy
from test_judge_runner import MODEL, example_suite, scripted_judge

SECRET = "finish-loop-key-" + "Qz8Lw3Vt"
"""A key the process knows (registered as a run's own key is): no report may hold it."""


@pytest.fixture(scope="module")
def server():
    with ScriptedOpenAIServer(scripted_judge) as srv:
        yield srv


def run(suite: Path, server, cache: Path, **kwargs):
    options = RunOptions(override=JudgeOverride(model=MODEL, api_base=server.base_url), cache_dir=cache)
    return judgekit.run_suite(suite, options=options, **kwargs)


def passable(suite: Path, **update) -> Path:
    """``suite`` under a gate a run of it passes (its judge is not approved)."""
    data = yaml.safe_load(suite.read_text())
    data["gate"] = {"min_task_success_rate": 0.0, "min_tool_correctness": 0.0, "min_faithfulness": 0.0}
    data.update(update)
    suite.write_text(yaml.safe_dump(data, sort_keys=False))
    return suite


@pytest.fixture(scope="module")
def two_finished(server, tmp_path_factory):
    """The example suite finished twice into one history: as it is, then with a regression."""
    tmp = tmp_path_factory.mktemp("finish")
    before = passable(example_suite(tmp / "before"))
    after = passable(regressed_copy(tmp / "after"))
    history = tmp / "history.sqlite"
    steps: list[tuple[str, object]] = []
    first = finish(run(before, server, tmp / "cache", keep_rows=True), history=history,
                   policy=judgekit.ComparePolicy(),
                   reports=Reports(junit=tmp / "1.xml", markdown=tmp / "1.md", html=tmp / "1.html"),
                   notify=lambda step, value: steps.append((step, value)))
    second = finish(run(after, server, tmp / "cache"), history=history, policy=judgekit.ComparePolicy(),
                    reports=Reports(junit=tmp / "2.xml", markdown=tmp / "2.md"))
    return tmp, history, first, second, steps


def test_a_first_run_is_measured_alone_recorded_green_and_reported(two_finished):
    tmp, history, first, _, steps = two_finished
    assert first.exit_code == EXIT_OK and first.passed and first.meaning == "ok"
    assert first.gate is not None and first.gate.passed
    assert first.comparison is not None and first.comparison.passed and first.comparison.baseline is None
    assert first.recorded is not None and first.recorded.green
    assert first.written == (tmp / "1.xml", tmp / "1.md", tmp / "1.html")
    assert all(path.stat().st_size > 0 for path in first.written)
    assert [step for step, _ in steps] == ["compared", "recorded", "wrote", "wrote", "wrote"]
    assert [value for step, value in steps if step == "wrote"] == list(first.written)
    assert first.green and first.reasons == []
    assert first.status == "GREEN: the gate passed; no baseline (last-green): nothing compared"


def test_a_dropped_axis_is_flagged_exit_1_and_the_run_is_not_green(two_finished):
    _, history, first, second, _ = two_finished
    assert second.exit_code == EXIT_GATE_FAILED and not second.passed
    assert "comparison" in second.meaning
    assert second.gate is not None and second.gate.passed  # the gate alone would have let it through
    assert [axis.axis for axis in second.comparison.axes if axis.flagged] == ["tool_correctness"]
    assert second.comparison.baseline.run_id == first.recorded.run_id
    assert second.recorded is not None and not second.recorded.green
    with History(history, create=False) as store:
        assert [info.run_id for info in store.runs()] == [second.recorded.run_id, first.recorded.run_id]
        assert store.last_green(second.recorded.suite).run_id == first.recorded.run_id
    # The status line says why, in the comparison's own words, and agrees with the history.
    assert not second.green and second.green == second.recorded.green
    (why,) = second.comparison.reasons
    assert why.startswith("tool_correctness: ")
    assert second.status == f"RED: compare: {why}"


def test_every_report_is_written_masked(server, tmp_path):
    register_secret(SECRET)
    suite = passable(example_suite(tmp_path / "s"), name=f"email-update {SECRET}")
    reports = Reports(junit=tmp_path / "r.xml", markdown=tmp_path / "r.md", html=tmp_path / "r.html")
    outcome = finish(run(suite, server, tmp_path / "cache"), reports=reports)
    assert outcome.exit_code == EXIT_OK and outcome.written == tuple(reports.targets().values())
    for path in outcome.written:
        text = path.read_text()
        assert SECRET not in text, path
        assert MASK in text.replace("\\[", "[").replace("\\]", "]"), path  # the suite's name: masked (Markdown escapes it)


def test_the_one_writer_masks_what_a_renderer_left(tmp_path):
    register_secret(SECRET)
    target = tmp_path / "r.txt"
    write_report(target, f"the key {SECRET} in a report\n")
    assert target.read_text() == f"the key {MASK} in a report\n"


def test_a_history_given_open_is_left_open(server, tmp_path):
    record = run(example_suite(tmp_path / "s"), server, tmp_path / "cache")
    with History(tmp_path / "h.sqlite", create=True) as store:
        outcome = finish(record, history=store)
        assert outcome.recorded is not None and outcome.comparison is None and outcome.written == ()
        assert store.find(outcome.recorded.run_id) is not None  # still usable


def gate_report(*shortfalls: tuple[str, str]):
    """A gate report whose axes fall short as ``shortfalls`` say ((axis, reason), ...); with
    none it passes, and faithfulness is advisory (nothing of it gates)."""
    from judgekit.gate import Advisory, AxisGate, GateReport

    axes = [AxisGate(axis=axis, gating_n=9, value=0.5, minimum=1.0, passed=False, reasons=[why])
            for axis, why in shortfalls]
    axes.append(AxisGate(axis="faithfulness", gating_n=0, minimum=1.0, passed=True,
                         advisory=[Advisory(rubric="r@1.0.0", trajectories=9, reason="not approved", command="c")]))
    return GateReport(passed=not shortfalls, axes=axes)


@pytest.mark.parametrize(("errors", "shortfalls", "gate", "status"), [
    pytest.param(0, [], True, "GREEN: the gate passed", id="green"),
    pytest.param(0, [], False, "GREEN: the gate passed", id="green_not_gated"),
    pytest.param(0, [("task_success", "pass rate 0.500 is below 1.0")], True,
                 "RED: gate: task_success: pass rate 0.500 is below 1.0", id="red_gated_exit_1"),
    pytest.param(0, [("task_success", "pass rate 0.500 is below 1.0"), ("tool_correctness", "mean 0.5 is below 1.0")],
                 False, "RED (not gated: exit 0): gate: task_success: pass rate 0.500 is below 1.0; "
                 "gate: tool_correctness: mean 0.5 is below 1.0", id="red_not_gated_says_so"),
    pytest.param(1, [("task_success", "1 trajectories could not be scored")], False,
                 "RED (exit 2: 1 trajectory axis/axes could not be scored (bad input)): "
                 "gate: task_success: 1 trajectories could not be scored", id="bad_input_says_exit_2"),
])
def test_the_status_line_says_green_or_red_and_why(errors, shortfalls, gate, status):
    record = SimpleNamespace(summary={"task_success": SimpleNamespace(errors=errors)},
                             gate_report=gate_report(*shortfalls))
    outcome = finish(record, gate=gate)
    assert outcome.status == status
    assert outcome.green == (not shortfalls) and outcome.passed == (outcome.exit_code == EXIT_OK)


def test_a_record_without_a_gate_is_not_green():
    outcome = finish(SimpleNamespace(summary={}, gate_report=None), gate=False)
    assert not outcome.green and outcome.status == "RED (not gated: exit 0): gate: not decided for this run"


def fake(*, errors: int = 0, gate_passed: bool = True):
    """A record as ``finish`` reads it with nothing to record, compare or write."""
    return SimpleNamespace(summary={"task_success": SimpleNamespace(errors=errors)},
                           gate_report=SimpleNamespace(passed=gate_passed))


@pytest.mark.parametrize(("record", "gate", "code"), [
    pytest.param(fake(), True, EXIT_OK, id="all_well"),
    pytest.param(fake(gate_passed=False), True, EXIT_GATE_FAILED, id="gate_failed_and_counted"),
    pytest.param(fake(gate_passed=False), False, EXIT_OK, id="gate_failed_not_asked_for"),
    pytest.param(fake(errors=1, gate_passed=False), True, EXIT_INPUT, id="bad_input_wins_over_the_gate"),
    pytest.param(fake(errors=2), False, EXIT_INPUT, id="bad_input_without_gate"),
])
def test_the_exit_code_is_the_clis(record, gate, code):
    outcome = finish(record, gate=gate)
    assert isinstance(outcome, Outcome) and outcome.exit_code == code
    assert outcome.gate is record.gate_report and outcome.comparison is None and outcome.recorded is None


def test_the_exit_codes_are_the_clis():
    from judgekit.cli import _exit

    assert (EXIT_OK, EXIT_GATE_FAILED, EXIT_INPUT) == (_exit.EXIT_OK, _exit.EXIT_GATE_FAILED, _exit.EXIT_INPUT)


def test_reports_name_what_is_asked_for():
    assert not Reports()
    assert Reports(html="d.html", junit="j.xml").targets() == {"junit": Path("j.xml"), "html": Path("d.html")}


def test_the_facade_exports_the_loop():
    assert {"finish", "Outcome", "Reports"} <= set(judgekit.__all__)
    assert judgekit.finish is finish and judgekit.Reports is Reports and judgekit.Outcome is Outcome
