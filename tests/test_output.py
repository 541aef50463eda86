"""What `judgekit run` prints for people: a table that fits 80 columns (a pipe, a CI log) and
shows everything at wider terminals, advisory axes marked in its header with the gate's reason
under it, one unscored count, and the status line it ends with."""

from __future__ import annotations

import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # before anything imports litellm

import re

import pytest
from click.testing import CliRunner
from rich.cells import cell_len

from judgekit.cli import main as cli_main
from judgekit.cli._render_table import TablePrinter
from judgekit.run.record import read_run
from judgekit.testing import Reply, ScriptedOpenAIServer, prompt_items
from test_judge_runner import MODEL, example_suite, judge_answer

NO_CLAIMS_FOR = "Done: your email is now alice@example.com."
"""The output of the example's trajectory 'ok': the judge lists no claim for it (unscored, no_claims)."""


def judge(request, n):
    """The scripted judge, except that it lists no claim for one output: a valid verdict that
    the faithfulness axis makes unscored (no_claims), with no judge failure behind it."""
    if prompt_items(request["messages"][1]["content"]).get("O") == NO_CLAIMS_FOR:
        return Reply.ok({"claims": []})
    return Reply.ok(judge_answer(request))


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    """The example suite under the scripted judge (not approved: faithfulness is advisory), run
    by the CLI; its record (read back from --out) and what the run printed."""
    tmp = tmp_path_factory.mktemp("output")
    suite = example_suite(tmp / "suite")
    with ScriptedOpenAIServer(judge) as server:
        printed = CliRunner().invoke(cli_main, ["run", str(suite), "--judge-model", MODEL, "--judge-api-base",
                                                server.base_url, "--cache-dir", str(tmp / "cache"),
                                                "--out", str(tmp / "run.jsonl")], env={"COLUMNS": None})
    return read_run(tmp / "run.jsonl"), printed


def table_of(record, width: int) -> list[str]:
    """The lines ``TablePrinter`` prints for ``record`` at ``width`` columns."""
    printer = TablePrinter(width=width)
    for result in record.results:
        printer.add(result)
    runner = CliRunner()
    with runner.isolation() as (out, _, _):
        printer.print(record)
        return out.getvalue().decode().splitlines()


def rows(lines: list[str]) -> list[str]:
    return [line for line in lines if line.startswith("│")]


@pytest.mark.parametrize("width", [80, 160])
def test_the_table_fits_its_width_with_whole_ids_and_one_rubric_said_once(ran, width):
    record, _ = ran
    lines = table_of(record, width)
    table = [line for line in lines if line[:1] in "┏┃┡│└" or "trajectories" in line]
    assert all(cell_len(line) <= width for line in table), [line for line in table if cell_len(line) > width]
    assert f"{record.suite}: 9 trajectories, rubric update-email@1.0.0" in table[0]  # said once, above
    header = " ".join(line for line in table if line.startswith("┃"))
    assert "rubric" not in header and "faithfulness" in header and "(advisory*)" in header
    ids = [r.trajectory_id for r in record.results]
    shown = [line.split("│")[1].strip() for line in rows(lines) if line.split("│")[1].strip()]
    assert shown == ids  # every id whole, each on its own row's first line


def test_at_80_columns_each_row_is_one_line_of_headlines(ran):
    record, _ = ran
    assert len(rows(table_of(record, 80))) == len(record.results)  # no cell wraps
    text = "\n".join(table_of(record, 80))
    assert "lost:" not in text and "0.40 (2/5)" in text  # the headline of tool correctness, not its details


def test_at_160_columns_the_cells_say_everything(ran):
    from judgekit.axes.table import axis_named

    record, _ = ran
    text = " ".join(" ".join(part.strip() for part in line.split("│")) for line in rows(table_of(record, 160)))
    text = " ".join(text.split())  # a cell's wrapped lines, joined
    for result in record.results:
        for axis, res in result.axes.items():
            if res.status == "scored":
                for word in axis_named(axis).describe(res).split():
                    assert word in text, (result.trajectory_id, axis, word)
    assert "lost: no forbidden side effect" in text


def test_several_rubrics_get_their_column(ran):
    record, _ = ran
    other = record.model_copy(deep=True)
    other.results[0].rubric = "other@2.0.0"
    lines = table_of(other, 80)
    assert "rubric update-email" not in lines[0]
    assert "rubric" in " ".join(line for line in lines if line.startswith("┃"))
    assert any("other@2.0.0" in line or "other@2.…" in line for line in rows(lines))


def test_an_advisory_axis_is_explained_under_the_table_in_the_gates_words(ran):
    record, _ = ran
    (advisory,) = next(axis for axis in record.gate_report.axes if axis.axis == "faithfulness").advisory
    lines = table_of(record, 80)
    start = next(i for i, line in enumerate(lines) if line.startswith("* faithfulness is advisory"))
    legend = " ".join(line.strip() for line in lines[start:start + 8] if not line.startswith("faithfulness:"))
    assert f"judge {MODEL} on update-email@1.0.0, 9 trajectories: {advisory.reason}." in legend
    assert f"To let it gate: {advisory.command}" in legend
    assert all(cell_len(line) <= 80 for line in lines[start:start + 5] if " " in line.strip())


def test_the_run_counts_unscored_once_as_its_results_do(ran):
    """A valid verdict the axis makes unscored (no claims) counts like any unscored result: the
    axis line says it with its reason; the judge's line (calls, cost) counts no unscored."""
    record, printed = ran
    assert printed.exit_code == 0, printed.output
    summary = record.summary["faithfulness"]
    assert summary.unscored == 1 and record.ledger.unscored == {}  # the judge answered every question
    assert (f"faithfulness: {summary.scored} scored, mean {summary.mean_score:.3f}, 1 unscored (no_claims 1)"
            in printed.stdout.splitlines())
    assert re.search(r"^│ ok +│ UNSCORED ", printed.stdout, re.M)  # the same row, in the table
    judge_line = next(line for line in printed.stderr.splitlines() if line.startswith("judge: "))
    assert "unscored" not in judge_line


def test_the_run_ends_with_its_status(ran):
    record, printed = ran
    last = printed.stdout.rstrip().splitlines()[-1]
    shortfalls = [f"gate: {axis.axis}: {why}" for axis in record.gate_report.axes for why in axis.reasons]
    assert shortfalls and last == "RED (not gated: exit 0): " + "; ".join(shortfalls)
    assert all(cell_len(line) <= 80 for line in printed.stdout.splitlines()[:14])  # a pipe: rich's 80 columns
