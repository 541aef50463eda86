"""The bundled example shows the CI loop: its suite declares a gate that fits its planned
failures, so `run --gate --compare` is green, recorded, and a second run finds it as its baseline."""

from __future__ import annotations

import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"

import re
from pathlib import Path

from click.testing import CliRunner

from judgekit.cli import main as cli_main
from judgekit.suite import load_suite
from judgekit.testing import ScriptedOpenAIServer
from test_judge_runner import MODEL, scripted_judge

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "email-update"


def test_the_example_declares_a_gate_below_one_for_its_planned_failures():
    gate = load_suite(EXAMPLE).suite.gate
    assert gate.min == {"task_success": 0.33, "tool_correctness": 0.77}  # faithfulness keeps the default, 1.0


def test_the_example_is_green_and_a_second_run_finds_it_as_its_baseline(tmp_path):
    history = tmp_path / "h.sqlite"
    with ScriptedOpenAIServer(scripted_judge) as server:
        args = ["run", str(EXAMPLE), "--gate", "--compare", "--history", str(history), "--cache-dir",
                str(tmp_path / "cache"), "--judge-model", MODEL, "--judge-api-base", server.base_url]
        first = CliRunner().invoke(cli_main, args)
        second = CliRunner().invoke(cli_main, args)
    assert first.exit_code == 0, first.output
    assert re.search(r"^PASS task_success: 0\.333 \(min 0\.33\)", first.output, re.M), first.output
    assert re.search(r"^PASS tool_correctness: 0\.778 \(min 0\.77\)", first.output, re.M)
    assert "gate: PASSED" in first.output and "note: no baseline (last-green)" in first.output
    run_id = re.search(r"^recorded (\S+) in .*: green$", first.output, re.M).group(1)
    assert second.exit_code == 0, second.output
    assert f"against last-green ({run_id})" in second.output  # the first run is the baseline
    assert "compare: PASSED" in second.output and re.search(r"^recorded \S+ in .*: green$", second.output, re.M)
