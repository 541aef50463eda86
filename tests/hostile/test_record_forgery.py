"""Forged run records and history rows (issue 26, section 1): nothing a stored file claims gates
unless it is measured again.

Runs are real: the example suite with a gate a run passes, judged by the scripted judge on
loopback. Forgeries are made as a hostile hand would make them: editing record lines, and the
history with sqlite3. Every class is checked at each door a record comes in by: `history import`,
`compare` (the run and a baseline file), `report`, `gate`. Exit codes: 0 passed, 1 flagged or
failed, 2 refused, never 3.
"""

from __future__ import annotations

import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # before anything imports litellm

import hashlib
import json
import sqlite3
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from judgekit.cli import main as cli_main
from judgekit.ci.history import History
from judgekit.testing import ScriptedOpenAIServer
from test_history_compare import LOOSE_GATE, record_lines, refooted, suite_copy, write_record
from test_judge_runner import MODEL, scripted_judge

ALARM_S = 120


def cli(*args) -> tuple[int, str]:
    result = CliRunner().invoke(cli_main, [str(a) for a in args], catch_exceptions=False)
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A suite a run passes, its judge flags, and two genuine green runs of it."""
    tmp = tmp_path_factory.mktemp("forgery")
    suite = suite_copy(tmp / "good", regressed=False)
    with ScriptedOpenAIServer(scripted_judge) as server:
        judged = ["--judge-model", MODEL, "--judge-api-base", server.base_url, "--cache-dir", tmp / "cache"]
        for name in ("r1", "r2"):
            code, out = cli("run", suite, "--out", tmp / f"{name}.jsonl", *judged)
            assert code == 0, out
    return {"tmp": tmp, "suite": suite, "r1": tmp / "r1.jsonl", "r2": tmp / "r2.jsonl"}


def forged(world, tmp_path: Path, name: str, change, *, source: str = "r1") -> Path:
    """A copy of a genuine record with ``change(lines)`` applied and a fresh run id."""
    lines = record_lines(world[source])
    lines[0]["header"]["run_id"] = f"forged-{name}"
    change(lines)
    return write_record(tmp_path / f"{name}.jsonl", lines, world[source])


def zero_scores(lines: list[dict]) -> None:
    for line in lines[1:-1]:
        for axis in line["result"]["axes"].values():
            if axis["status"] == "scored":
                axis["score"] = 0.0
                if "passed" in axis:
                    axis["passed"] = False


def file_sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --- the baseline forgery of the issue, and its variants -----------------------------------------


FORGERIES = [
    pytest.param(lambda ls: ls[0]["header"].update(started_at="2099-12-31T23:59:59Z"), "in the future",
                 id="started_in_2099"),
    pytest.param(lambda ls: (ls[0]["header"].update(started_at="2099-12-31T23:59:59Z"), zero_scores(ls)),
                 "in the future", id="the_issue_2099_zero_scores_green_footer"),
    pytest.param(zero_scores, "the footer disagrees with the record's own results: summary", id="zero_scores"),
    pytest.param(lambda ls: ls[-1]["footer"]["gate_report"].update(passed=False), "gate_report.passed",
                 id="footer_gate_flipped"),
    pytest.param(lambda ls: ls[-1]["footer"]["summary"]["tool_correctness"].update(mean_score=0.5),
                 "summary.tool_correctness.mean_score", id="summary_mean_edited"),
    pytest.param(lambda ls: ls[-1]["footer"]["judges"][0]["axes"].update(faithfulness="approved"),
                 "judges.0.axes.faithfulness", id="judge_claimed_approved"),
    pytest.param(lambda ls: ls[-1]["footer"]["judges"][0].update(verdicts=1), "judges.0.verdicts",
                 id="judge_verdict_count"),
    pytest.param(lambda ls: ls[-1].update(footer={**ls[-1]["footer"], "finished_at": "2099-01-01T00:00:00Z"}),
                 "finished 2099", id="finished_in_2099"),
    pytest.param(lambda ls: ls[-1].update(footer={**ls[-1]["footer"], "finished_at": "2000-01-01T00:00:00Z"}),
                 "finished before it started", id="finished_before_start"),
    pytest.param(lambda ls: ls[0]["header"]["gate"]["min"].update(task_success=0.5),
                 "gate policy is not its suite's", id="header_gate_policy"),
    pytest.param(lambda ls: ls[0]["header"]["approval"].update(min_kappa=-1.0),
                 "approval thresholds is not its suite's", id="header_approval_thresholds"),
    pytest.param(lambda ls: ls[1]["result"].update(rubric_sha256="0" * 64), "with a hash the header does not list",
                 id="result_rubric_hash"),
    pytest.param(lambda ls: ls[1]["result"]["axes"]["tool_correctness"].update(score="1.0"),
                 "Input should be a valid number", id="string_score"),
    pytest.param(lambda ls: ls[1]["result"]["axes"]["task_success"].update(passed=1),
                 "Input should be a valid boolean", id="int_for_bool"),
    pytest.param(lambda ls: ls[-1]["footer"].update(trajectories="9"), "Input should be a valid integer",
                 id="string_count"),
    pytest.param(lambda ls: ls[0]["header"].update(started_at=1764000000), "a time is ISO 8601 text",
                 id="started_at_as_seconds"),
    pytest.param(lambda ls: ls[0]["header"].update(started_at="1764000000"), "a time is ISO 8601 text",
                 id="started_at_as_digits"),
    pytest.param(lambda ls: ls[0]["header"].update(format_version=2.0), "a format version is a whole number",
                 id="header_version_2_0"),
    pytest.param(lambda ls: ls[1]["result"].update(format_version=1.0), "a format version is a whole number",
                 id="result_version_1_0"),
    pytest.param(lambda ls: ls.insert(2, ls[1]), "trajectory id 'ok' appears twice in the run", id="result_repeated"),
    pytest.param(lambda ls: (ls.insert(2, ls[1]), ls[-1]["footer"].update(trajectories=len(ls) - 2)),
                 "trajectory id 'ok' appears twice in the run", id="result_repeated_and_counted"),
    pytest.param(lambda ls: ls.append(ls[-1]), "more after the footer", id="a_line_after_the_footer"),
]


def refused_naming(out: str, path: Path, why: str) -> bool:
    """Whether ``out`` refuses the record at ``path`` for ``why``, naming the file (every refusal
    of a record does: a reviewer must know which file to look at)."""
    return why in out and str(path) in out.replace("\n", "")


@pytest.mark.parametrize(("change", "why"), FORGERIES)
def test_a_forged_record_is_refused_at_import_and_never_becomes_last_green(world, tmp_path, change, why):
    history = tmp_path / "h.sqlite"
    assert cli("history", "import", world["r1"], "--history", history)[0] == 0
    fake = forged(world, tmp_path, "f", change)
    code, out = cli("history", "import", fake, "--history", history)
    assert code == 2 and refused_naming(out, fake, why), out
    assert "forged-f" not in out.split("error")[0]
    with History(history, create=False) as store:
        assert store.find("forged-f") is None
        assert store.last_green("email-update copy").run_id == json.loads(world["r1"].read_text().splitlines()[0])[
            "header"]["run_id"]


@pytest.mark.parametrize(("change", "why"), FORGERIES)
def test_compare_refuses_a_forged_baseline_file_and_a_forged_run_file(world, tmp_path, change, why):
    fake = forged(world, tmp_path, "f", change)
    none = tmp_path / "none.sqlite"
    code, out = cli("compare", world["r2"], "--baseline", fake, "--history", none)
    assert code == 2 and refused_naming(out, fake, why) and "compare: PASSED" not in out, out
    code, out = cli("compare", fake, "--baseline", world["r1"], "--history", none)
    assert code == 2 and refused_naming(out, fake, why) and "compare: PASSED" not in out, out
    code, out = cli("report", fake, "--markdown", tmp_path / "r.md", "--no-compare", "--history", none)
    assert code == 2 and refused_naming(out, fake, why) and not (tmp_path / "r.md").exists(), out


@pytest.mark.parametrize(("change", "line", "why"), [
    pytest.param(lambda ls: ls.insert(2, ls[1]), 3, "trajectory id 'ok' appears twice in the run", id="repeated_id"),
    pytest.param(lambda ls: ls[2]["result"].update(rubric_sha256="0" * 64), 3, "result 'retry-after-error' names rubric",
                 id="rubric_hash"),
])
def test_a_refused_result_is_named_by_its_file_and_line(world, tmp_path, change, line, why):
    """A refusal of one result names where it is: the record file and the result's line."""
    fake = forged(world, tmp_path, "f", change)
    none = tmp_path / "none.sqlite"
    for args in (("history", "import", fake, "--history", none), ("compare", fake, "--history", none),
                 ("compare", world["r2"], "--baseline", fake, "--history", none)):
        code, out = cli(*args)
        assert code == 2 and f"{fake}:{line}: {why}" in out.replace("\n", ""), (args, out)


def test_a_record_consistent_with_zero_scores_is_imported_as_what_it_is(world, tmp_path):
    """The zero-score forgery made consistent (its footer what its results make): it is a run
    that failed its gate, so it is recorded, not green, and never the baseline."""
    history = tmp_path / "h.sqlite"
    assert cli("history", "import", world["r1"], "--history", history)[0] == 0
    fake = refooted(forged(world, tmp_path, "zero", zero_scores))
    code, out = cli("history", "import", fake, "--history", history)
    assert code == 0 and "recorded forged-zero" in out and "not green" in out, out
    with History(history, create=False) as store:
        assert store.last_green("email-update copy").run_id != "forged-zero"


def test_last_green_is_the_green_run_recorded_last_whatever_times_runs_claim(world, tmp_path):
    """r2 claims to have started a year before r1 (in the past, so it is not refused): recorded
    after r1, it is still the baseline, and the listing shows the history's own order."""
    history = tmp_path / "h.sqlite"
    early = forged(world, tmp_path, "early", lambda ls: ls[0]["header"].update(started_at="2025-01-01T00:00:00Z"),
                   source="r2")
    for path in (world["r1"], early):
        assert cli("history", "import", path, "--history", history)[0] == 0
    with History(history, create=False) as store:
        assert store.last_green("email-update copy").run_id == "forged-early"
        assert [run.run_id for run in store.runs()][0] == "forged-early"


def test_a_baseline_under_another_rubric_hash_is_reported_not_silently_compared(world, tmp_path):
    rubric = world["suite"].parent / "rubric.yaml"
    original = rubric.read_text()
    try:
        data = yaml.safe_load(original)
        data["task_success"]["guide"] = data["task_success"].get("guide", "") + " Changed."
        rubric.write_text(yaml.safe_dump(data, sort_keys=False))
        with ScriptedOpenAIServer(scripted_judge) as server:
            code, out = cli("run", world["suite"], "--out", tmp_path / "changed.jsonl", "--judge-model", MODEL,
                            "--judge-api-base", server.base_url, "--cache-dir", tmp_path / "cache")
        assert code == 0, out
        code, out = cli("compare", tmp_path / "changed.jsonl", "--baseline", world["r1"], "--history",
                        tmp_path / "none.sqlite", "--json")
    finally:
        rubric.write_text(original)
    comparison = json.loads(out)
    [change] = comparison["rubrics_changed"]
    assert change["rubric"] == "update-email@1.0.0" and change["sha256"] != change["baseline_sha256"]
    assert any("rubrics differ from the baseline's" in note for note in comparison["notes"])


# --- the history file ----------------------------------------------------------------------------


def test_a_header_row_rewritten_is_noticed_when_the_run_is_a_baseline(world, tmp_path):
    history = tmp_path / "h.sqlite"
    assert cli("history", "import", world["r1"], "--history", history)[0] == 0
    with sqlite3.connect(history) as db:
        db.execute("UPDATE runs SET header = '[]'")
    code, out = cli("compare", world["r2"], "--history", history)
    assert code == 2 and "malformed row" in out and "compare: PASSED" not in out, out


ONE, TWO, THREE = ((1, "runs, their axes and per-trajectory rows"), (2, "safety scans"),
                   (3, "how each run came in"))


@pytest.mark.parametrize("rows", [
    pytest.param([ONE, TWO, THREE, (4, "from the future")], id="newer_version_listed"),
    pytest.param([ONE, TWO], id="a_migration_missing"),
    pytest.param([ONE, (2, "renamed"), THREE], id="a_migration_renamed"),
])
def test_a_history_whose_migrations_disagree_with_its_version_is_never_written(world, tmp_path, rows):
    history = tmp_path / "h.sqlite"
    assert cli("history", "import", world["r1"], "--history", history)[0] == 0
    with sqlite3.connect(history) as db:
        db.execute("DELETE FROM schema_migrations")
        db.executemany("INSERT INTO schema_migrations VALUES (?, ?, '2026-12-01')", rows)
    with sqlite3.connect(history) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    before = file_sha(history)
    code, out = cli("history", "import", world["r2"], "--history", history)
    assert code == 2 and ("newer judgekit" in out or "does not match its user_version" in out), out
    assert file_sha(history) == before


@pytest.mark.parametrize("sql", [
    pytest.param("CREATE TRIGGER greener AFTER INSERT ON runs BEGIN UPDATE runs SET green = 1, gate_passed = 1 "
                 "WHERE pk = new.pk; END", id="a_trigger_marking_every_run_green"),
    pytest.param("CREATE VIEW latest AS SELECT * FROM runs", id="a_view"),
    pytest.param("CREATE TABLE notes (a)", id="a_table"),
    pytest.param("DROP INDEX runs_by_commit", id="an_index_dropped"),
])
def test_a_history_holding_schema_objects_judgekit_did_not_make_is_never_written(world, tmp_path, sql):
    """Its bookkeeping (application id, user_version, schema_migrations) intact, but a trigger
    planted (found by a hostile review: a failed run imported as green), a view, a table."""
    history = tmp_path / "h.sqlite"
    assert cli("history", "import", world["r1"], "--history", history)[0] == 0
    with sqlite3.connect(history) as db:
        db.execute(sql)
    with sqlite3.connect(history) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    before = file_sha(history)
    code, out = cli("history", "import", world["r2"], "--history", history)
    assert code == 2 and "the history holds schema objects its migrations do not make" in out, out
    assert file_sha(history) == before


def test_a_green_column_edited_alone_never_makes_a_baseline(world, tmp_path):
    """A run whose gate failed, marked green by hand in the history: refused when it would be the
    baseline (its stored footer says its gate failed)."""
    history = tmp_path / "h.sqlite"
    failed = forged(world, tmp_path, "failed", lambda ls: None)
    strict = yaml.safe_load(world["suite"].read_text())
    strict["gate"] = {"min": {**LOOSE_GATE["gate"]["min"], "task_success": 1.0}}
    (world["suite"].parent / "strict2.yaml").write_text(yaml.safe_dump(strict))
    lines = record_lines(failed)
    lines[0]["header"]["suite_file"] = os.path.relpath(world["suite"].parent / "strict2.yaml", tmp_path)
    lines[0]["header"]["gate"] = strict["gate"]
    failed.write_text("".join(json.dumps(line) + "\n" for line in lines))
    refooted(failed)
    code, out = cli("history", "import", failed, "--history", history)
    assert code == 0 and "not green (its gate failed)" in out, out
    with sqlite3.connect(history) as db:
        db.execute("UPDATE runs SET green = 1")
    code, out = cli("compare", world["r2"], "--history", history)
    assert code == 2 and "is marked green, but its stored footer's gate did not pass" in out, out


def test_a_pinned_suite_refuses_a_record_that_names_a_lenient_suite_of_its_own(world, tmp_path):
    """A record names its own suite file: here a copy of the suite with a lenient gate, brought
    with it (a hostile review: imported green, so the baseline). `--suite` pins the suite the
    records must be runs of, at every door a record comes in by."""
    strict = yaml.safe_load(world["suite"].read_text())
    strict["gate"] = {"min": {**LOOSE_GATE["gate"]["min"], "task_success": 1.0}}
    pinned = world["suite"].parent / "pinned.yaml"
    pinned.write_text(yaml.safe_dump(strict))
    history = tmp_path / "h.sqlite"
    code, out = cli("history", "import", world["r1"], "--history", history, "--suite", pinned)
    assert code == 2 and "gate policy is not its suite's" in out, out
    for args in (("compare", world["r1"], "--history", tmp_path / "none.sqlite"),
                 ("compare", world["r2"], "--baseline", world["r1"], "--history", tmp_path / "none.sqlite"),
                 ("report", world["r1"], "--markdown", tmp_path / "r.md", "--no-compare", "--history",
                  tmp_path / "none.sqlite")):
        code, out = cli(*args, "--suite", pinned)
        assert code == 2 and "gate policy is not its suite's" in out, (args, out)
    code, out = cli("gate", world["r1"], "--suite", pinned)
    assert code == 1 and "FAIL task_success" in out, out
    assert cli("history", "import", world["r1"], "--history", tmp_path / "h2.sqlite", "--suite",
               world["suite"])[0] == 0  # the suite it was run under


def test_gate_takes_the_thresholds_of_the_suite_not_of_the_record(world, tmp_path):
    """A record claiming lenient thresholds is gated under its suite's: here the suite asks for
    full task success and the run has a failing trajectory."""
    strict = yaml.safe_load(world["suite"].read_text())
    strict["gate"] = {"min": {**LOOSE_GATE["gate"]["min"], "task_success": 1.0}}
    strict_suite = world["suite"].parent / "strict.yaml"
    strict_suite.write_text(yaml.safe_dump(strict))
    lines = record_lines(world["r1"])
    lines[0]["header"]["suite_file"] = "good/strict.yaml"  # the record still claims the loose gate
    record = write_record(tmp_path / "claims-loose.jsonl", lines, world["r1"])
    code, out = cli("gate", record)
    assert code == 1 and "FAIL task_success" in out and "gate: FAILED" in out, out
