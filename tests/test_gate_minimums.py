"""The gate's per-axis minimums (``gate.min``), and the suites, run records and histories written
before them: suite format 1 (``min_task_success_rate``, ``min_tool_correctness``,
``min_faithfulness``) and run record format 2 (its header's gate policy in those fields) are read
through numbered migrations, and mean the same."""

from __future__ import annotations

import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"

import io
import json
import sqlite3
import subprocess
import tarfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from judgekit.ci.history import History
from judgekit.cli import main as cli_main
from judgekit.errors import InputError
from judgekit.gate import gate
from judgekit.run import read_run
from judgekit.run.record import MIGRATIONS as RECORD_MIGRATIONS, RUN_FORMAT_VERSION, RunHeader
from judgekit.suite import GatePolicy, Suite, load_suite
from judgekit.suite.model import MIGRATIONS as SUITE_MIGRATIONS, SUITE_FORMAT_VERSION
from judgekit.testing import ScriptedOpenAIServer
from test_compat_base import run_old
from test_judge_runner import MODEL, example_suite, scripted_judge

ROOT = Path(__file__).resolve().parent.parent
BEFORE = "8c4ca6c599325ecdf0f520142abff90baf90a6d3"  # main before gate.min: suite format 1, run record format 2
OLD = {"min_task_success_rate": 0.0, "min_tool_correctness": 0.5, "min_faithfulness": 0.9}
NEW = {"task_success": 0.0, "tool_correctness": 0.5, "faithfulness": 0.9}


def cli(*args) -> tuple[int, str]:
    result = CliRunner().invoke(cli_main, [str(a) for a in args])
    return result.exit_code, result.output


def suite_data(**extra) -> dict:
    return {"name": "s", "rubrics": ["r"], "trajectories": [{"file": "t.jsonl", "rubric": "r"}], **extra}


# --- the map ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("gate_policy", "minimums"), [
    pytest.param({}, {}, id="none_named_every_axis_needs_1"),
    pytest.param({"min": {"task_success": 0.9}}, {"task_success": 0.9}, id="one_axis"),
    pytest.param({"min": NEW}, NEW, id="every_axis"),
    pytest.param({"min": {"concision": 0.5}}, {"concision": 0.5}, id="a_third_partys_axis_is_a_name"),
])
def test_the_minimum_map_reads(gate_policy, minimums):
    assert GatePolicy.model_validate(gate_policy).min == minimums


@pytest.mark.parametrize(("gate_policy", "where"), [
    pytest.param({"min": {"task_success": 1.5}}, "min.task_success", id="above_1"),
    pytest.param({"min": {"faithfulness": -0.1}}, "min.faithfulness", id="below_0"),
    pytest.param({"min": {"faithfulness": "nan"}}, "min.faithfulness", id="nan"),
    pytest.param({"min": {"Task Success": 0.5}}, "min.Task Success.[key]", id="not_an_axis_name"),
    pytest.param({"min": [0.5]}, "min", id="not_a_map"),
    pytest.param({"min_task_success_rate": 0.5}, "min_task_success_rate", id="old_field_in_the_model_itself"),
])
def test_a_bad_minimum_is_refused(gate_policy, where):
    with pytest.raises(ValidationError) as caught:
        GatePolicy.model_validate(gate_policy)
    assert where in {".".join(map(str, e["loc"])) for e in caught.value.errors()}


def test_the_axes_default_minimum_is_what_an_unnamed_axis_needs():
    from judgekit.axes.table import AXES

    policy = GatePolicy(min={"faithfulness": 0.8})
    assert {name: axis.gate_minimum(policy) for name, axis in AXES.items()} == {
        "task_success": 1.0, "tool_correctness": 1.0, "faithfulness": 0.8}


# --- suite format 1 -> 2 -----------------------------------------------------------------------


def test_the_suite_format_is_2_and_format_1_has_a_numbered_migration():
    assert SUITE_FORMAT_VERSION == 2 and sorted(SUITE_MIGRATIONS) == [1]
    assert Suite.model_validate(suite_data()).format_version == 2


@pytest.mark.parametrize("version", [pytest.param({}, id="no_format_named"),
                                     pytest.param({"format_version": 1}, id="format_1")])
def test_a_format_1_suites_gate_fields_load_and_mean_the_same(version):
    old = Suite.model_validate(suite_data(**version, gate={**OLD, "max_unscored_rate": 0.2}))
    new = Suite.model_validate(suite_data(format_version=2, gate={"min": NEW, "max_unscored_rate": 0.2}))
    assert old == new and old.gate.min == NEW and old.format_version == 2


def test_a_format_1_suite_may_name_some_fields_and_the_map():
    suite = Suite.model_validate(suite_data(gate={"min_faithfulness": 0.8, "min": {"task_success": 0.5}}))
    assert suite.gate.min == {"task_success": 0.5, "faithfulness": 0.8}


@pytest.mark.parametrize(("data", "message"), [
    pytest.param(suite_data(gate={"min_task_success_rate": 0.5, "min": {"task_success": 0.9}}),
                 "min_task_success_rate and min.task_success both set the minimum", id="both_ways"),
    pytest.param(suite_data(format_version=2, gate={"min_task_success_rate": 0.5}), "min_task_success_rate",
                 id="old_field_in_format_2"),
    pytest.param(suite_data(format_version=3), "format_version", id="future_format"),
    pytest.param(suite_data(format_version=1.0, gate=OLD), "a format version is a whole number", id="version_1_0"),
    pytest.param(suite_data(format_version=True, gate=OLD), "a format version is a whole number", id="version_true"),
    pytest.param(suite_data(gate={"min_task_success_rate": 1.5}), "min.task_success", id="old_field_out_of_range"),
])
def test_a_suite_that_cannot_be_read_is_refused(data, message):
    with pytest.raises(ValidationError, match=message):
        Suite.model_validate(data)


def test_a_format_1_suite_file_loads_with_the_line_of_a_problem(tmp_path):
    suite = example_suite(tmp_path / "s", suite_update={"gate": OLD})
    assert load_suite(suite).suite.gate.min == NEW
    text = suite.read_text().replace("min_faithfulness: 0.9", "min_faithfulness: 2")
    suite.write_text(text)
    with pytest.raises(InputError, match="gate.min.faithfulness") as caught:
        load_suite(suite)
    assert caught.value.line is not None


# --- run record format 2 -> 3 and the history ----------------------------------------------------


def test_the_run_record_format_is_3_and_format_2_has_a_numbered_migration():
    assert RUN_FORMAT_VERSION == 3 and sorted(RECORD_MIGRATIONS) == [1, 2]


def test_a_format_2_header_reads_as_format_3():
    header = {"format_version": 2, "run_id": "r", "suite": "s", "suite_file": "suite.yaml", "judgekit_version": "0",
              "started_at": "2026-12-04T10:00:00Z", "rubrics": {}, "gate": {**OLD, "max_unscored_rate": 0.1,
                                                                             "allow_model_mismatch": False}}
    read = RunHeader.model_validate(header)
    assert read.format_version == 3 and read.gate == GatePolicy(min=NEW)
    with pytest.raises(ValidationError, match="min_task_success_rate"):
        RunHeader.model_validate({**header, "format_version": 3})  # format 3 has no such field


def old_code(folder: Path) -> Path:
    """judgekit as it was at BEFORE (skips without git history, as test_compat_base does)."""
    try:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", BEFORE, "judgekit"], capture_output=True,
                                 check=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        reason = f"needs the git history of judgekit (commit {BEFORE[:12]}): {exc}"
        if os.environ.get("JUDGEKIT_REQUIRE_SHARED_DATA") == "1":
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(folder, filter="data")
    return folder


def test_a_record_and_a_history_written_before_read_and_gate_the_same(tmp_path):
    """The code before gate.min runs a format 1 suite, writes a format 2 record and records it in
    a history; today's code reads both, and gates the record as the old code did."""
    code = old_code(tmp_path / "old")
    suite = example_suite(tmp_path / "suite", suite_update={"gate": OLD})
    record, history = tmp_path / "run.jsonl", tmp_path / "history.sqlite"
    with ScriptedOpenAIServer(scripted_judge) as server:
        ran = run_old(code, "run", str(suite), "--judge-model", MODEL, "--judge-api-base", server.base_url,
                      "--cache-dir", str(tmp_path / "cache"), "--out", str(record))
    assert ran.returncode in (0, 1) and record.exists(), ran.stderr
    assert json.loads(record.read_text().splitlines()[0])["header"]["gate"]["min_faithfulness"] == 0.9
    imported = run_old(code, "history", "import", str(record), "--history", str(history))
    assert imported.returncode == 0, imported.stderr
    old_gate = run_old(code, "gate", str(record))

    read = read_run(record)
    assert read.format_version == 3 and read.gate.min == NEW
    report = gate(read)
    assert {a.axis: a.minimum for a in report.axes} == NEW
    assert report == read.gate_report  # the gate the old code decided at run time, decided again today
    code_now, out_now = cli("gate", record)
    assert (code_now, out_now) == (old_gate.returncode, old_gate.stdout)

    with sqlite3.connect(history) as db:
        [(stored,)] = db.execute("SELECT header FROM runs").fetchall()
    assert json.loads(stored)["format_version"] == 2  # the history holds the header as the old code wrote it
    opened = History(history, create=False)
    try:
        [info] = opened.runs()
        rows = opened.rows(info.run_id)
        assert set(rows.rows) == set(NEW) and rows.trajectories == 9
    finally:
        opened.close()
    code_list, listed = cli("history", "list", "--history", history)
    assert code_list == 0 and info.run_id in listed


def test_a_minimum_for_an_axis_judgekit_does_not_know_stops_the_run_before_it_starts(tmp_path):
    suite = example_suite(tmp_path / "s", suite_update={"gate": {"min": {"faithfulnes": 0.5}}})
    code, out = cli("run", suite, "--no-cache")
    assert code == 2 and out.startswith("judgekit: error: ") and "gate.min names 'faithfulnes'" in out, out
    assert "the axes: task_success, tool_correctness, faithfulness" in out
