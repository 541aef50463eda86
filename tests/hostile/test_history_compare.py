"""Hostile tests of the CI loop (issue 13, sections 1 and 2): the run history, the comparison
with a baseline and its fail-closed rules, and the `compare` / `history` / `run --compare`
commands.

Runs are real: the example suite, judged by the scripted judge, its gate loosened so a run can
be green; the regressed copy repeats the update call in two trajectories (tool correctness
loses a point there, nothing else changes). Hostile files are built with sqlite3 and by
editing run record lines. Exit codes: 0 passed, 1 flagged or failed, 2 input error, 3 never.
"""

from __future__ import annotations

import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # before anything imports litellm

import json
import sqlite3
import threading
from datetime import timedelta
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from judgekit.cli import main as cli_main
from judgekit.ci.loop import compare_with_baseline as compare_run
from judgekit.ci.compare import ComparePolicy, compare
from judgekit.run.rows import AxisRow, RunRows
from judgekit.run.remeasure import run_rows
from judgekit.errors import InputError
from judgekit.ci.history import History
from _records import refoot_file
from judgekit.run.record import read_run
from judgekit.testing import ScriptedOpenAIServer
from test_judge_runner import MODEL, example_suite, scripted_judge

ALARM_S = 120  # a case runs the suite a few times (about 2 s each)

LOOSE_GATE = {"gate": {"min": {"task_success": 0.0, "tool_correctness": 0.0, "faithfulness": 0.0}}}
EXTRA_CALL = {"tool": "update_user", "args": {"user_id": 1, "email": "alice@example.com"},
              "result": {"id": 1, "email": "alice@example.com"}}
REGRESSED = ("ok", "retry-after-error")


def cli(*args) -> tuple[int, str]:
    result = CliRunner().invoke(cli_main, [str(a) for a in args], catch_exceptions=False)
    return result.exit_code, result.output


def suite_copy(root: Path, *, regressed: bool) -> Path:
    """The example suite with a gate a run passes; ``regressed``: two trajectories repeat their update."""
    suite = example_suite(root, suite_update=LOOSE_GATE)
    if regressed:
        path = suite.parent / "trajectories.jsonl"
        lines = []
        for line in path.read_text().splitlines():
            item = json.loads(line)
            if item["id"] in REGRESSED:
                item["calls"] = [*item["calls"], EXTRA_CALL]
            lines.append(json.dumps(item))
        path.write_text("\n".join(lines) + "\n")
    return suite


@pytest.fixture(scope="module")
def server():
    with ScriptedOpenAIServer(scripted_judge) as srv:
        yield srv


@pytest.fixture(scope="module")
def world(server, tmp_path_factory):
    """Two suites (good, regressed), the judge flags, and one run record of each (no history)."""
    tmp = tmp_path_factory.mktemp("hostile-loop")
    good, bad = suite_copy(tmp / "good", regressed=False), suite_copy(tmp / "bad", regressed=True)
    judged = ["--judge-model", MODEL, "--judge-api-base", server.base_url, "--cache-dir", tmp / "cache"]
    for name, suite in (("r1", good), ("r2", bad)):
        code, out = cli("run", suite, "--out", tmp / f"{name}.jsonl", *judged)
        assert code == 0, out
    return {"tmp": tmp, "good": good, "bad": bad, "judged": judged, "r1": tmp / "r1.jsonl", "r2": tmp / "r2.jsonl"}


def record_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write_record(path: Path, lines: list[dict], original: Path) -> Path:
    """Write edited record lines at ``path``, the suite file still found from there."""
    for line in lines:
        if "header" in line:
            suite = (original.parent / line["header"]["suite_file"]).resolve()
            line["header"]["suite_file"] = os.path.relpath(suite, path.parent)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def refooted(path: Path) -> Path:
    """Give the edited record at ``path`` the footer its results make (what a run holding just
    those results would have written), so that it is read as a run and not refused as a forgery."""
    return refoot_file(path, path)


def imported(world, path: Path) -> Path:
    """A history holding r1 (green) and r2 (the regression: compared with r1 as it is imported, so not green)."""
    code, out = cli("history", "import", world["r1"], world["r2"], "--history", path)
    assert code == 0, out
    return path


def rows(run_id: str, scores: dict[str, dict[str, float | None]]) -> RunRows:
    """RunRows from axis -> id -> score (None: unscored, parse failure)."""
    built = RunRows(run_id=run_id, suite="s")
    for axis, by_id in scores.items():
        for tid, score in by_id.items():
            if score is None:
                built.add(AxisRow(tid, axis, "unscored", None, (), "parse_failure"))
            else:
                built.add(AxisRow(tid, axis, "scored", score))
    return built


TEN = [f"t{i}" for i in range(10)]
BASE = {"task_success": dict.fromkeys(TEN, 1.0), "tool_correctness": dict.fromkeys(TEN, 1.0)}


def no_raw_controls(text: str) -> bool:
    return not any((ord(ch) < 32 and ch not in "\n") or 0x7F <= ord(ch) <= 0x9F or ch in "\u202e\u2028"
                   for ch in text)


# =====================================================================================================
# run --compare: green semantics
# =====================================================================================================


def test_a_regressed_run_never_becomes_green_and_the_next_run_still_compares_with_the_earlier_green(world, tmp_path):
    """run --compare: the first run is green; a regressed one exits 1 and is not green; a second
    regressed run is compared with the first (not with the regressed one) and fails too; a good
    run after them passes and is green."""
    history = tmp_path / "h.sqlite"
    outs = {}
    for name, suite, expected in (("a", "good", 0), ("b", "bad", 1), ("c", "bad", 1), ("d", "good", 0)):
        code, out = cli("run", world[suite], "--compare", "--history", history, "--out", tmp_path / f"{name}.jsonl",
                        *world["judged"])
        assert code == expected, (name, out)
        outs[name] = out
    first = read_run(tmp_path / "a.jsonl").run_id
    assert f"against last-green ({first})" in outs["c"] and "tool_correctness: FLAGGED" in outs["c"]
    assert f"against last-green ({first})" in outs["d"]
    with History(history, create=False) as store:
        green = {info.run_id: info.green for info in store.runs(limit=None)}
        ids = {name: read_run(tmp_path / f"{name}.jsonl").run_id for name in "abcd"}
        assert [green[ids[n]] for n in "abcd"] == [True, False, False, True]
        assert store.last_green(read_run(tmp_path / "a.jsonl").suite).run_id == ids["d"]


def test_noise_from_a_regressed_run_of_the_same_commit_does_not_hide_the_same_regression(world, tmp_path):
    """history.noise: runs at one clean commit are 'repeated runs'. A regressed run there (it failed
    its comparison, not green) must not count as run-to-run noise: the next run with the same
    regression must still be flagged against the green baseline, never become green itself."""
    good, bad = read_run(world["r1"]), read_run(world["r2"])
    for record in (good, bad):
        record.project.git_commit, record.project.git_dirty = "c0ffee" * 5, False
    with History(tmp_path / "h.sqlite") as store:
        store.record(good)
        second = compare_run(run_rows(bad), store, "last-green", ComparePolicy())
        assert second.flagged == ["tool_correctness"]  # no noise yet: flagged
        store.record(bad, compare_passed=second.passed)
        third = bad.model_copy(deep=True)
        third.run_id = "third-same-regression"
        again = compare_run(run_rows(third), store, "last-green", ComparePolicy())
    assert again.baseline.run_id == good.run_id
    assert again.flagged == ["tool_correctness"] and not again.passed, [
        (a.axis, a.noise_sd, a.relative_drop) for a in again.axes]


def test_compare_of_a_recorded_run_is_not_hidden_by_its_own_spread(world, tmp_path):
    """compare RUN_ID: once the regressed run is in the history (history import, as CI does), its
    own mean must not enter the noise it is measured against (two runs of one commit: the noise
    is then exactly its drop, and no drop is ever beyond it)."""
    good, bad = read_run(world["r1"]), read_run(world["r2"])
    for record in (good, bad):
        record.project.git_commit, record.project.git_dirty = "c0ffee" * 5, False
    with History(tmp_path / "h.sqlite") as store:
        store.record(good)
        store.record(bad)
        result = compare(store.rows(bad.run_id), store.rows(good.run_id), noise=None)
        assert result.flagged == ["tool_correctness"]
        via_history = compare_run(store.rows(bad.run_id), store, good.run_id, ComparePolicy())
    assert via_history.flagged == ["tool_correctness"], [(a.axis, a.noise_sd) for a in via_history.axes]


# =====================================================================================================
# compare: figures and fail-closed rules
# =====================================================================================================


def test_figures_are_taken_on_the_shared_scored_ids_only():
    """Means and pass rates: only ids both runs scored; an id in one run only is listed, not compared."""
    base = rows("base", {"tool_correctness": {**dict.fromkeys(TEN[:8], 1.0), "t8": 0.5, "t9": None}})
    now = rows("now", {"tool_correctness": {**dict.fromkeys(TEN[:7], 1.0), "t7": 0.5, "t8": 0.5, "t9": 1.0,
                                            "new": 0.0}})
    result = compare(now, base)
    axis = result.axes[0]
    assert axis.shared == 9 and axis.scored == 11  # t9 is unscored in the baseline, new is in the run only
    assert axis.mean == pytest.approx((7 + 0.5 + 0.5) / 9) and axis.baseline_mean == pytest.approx(8.5 / 9)
    assert axis.pass_rate == pytest.approx(7 / 9) and axis.baseline_pass_rate == pytest.approx(8 / 9)
    assert result.only_in_run == ["new"] and result.only_in_baseline_total == 0
    assert [(r.trajectory_id, r.flipped) for r in result.regressions] == [("t7", True)]


def test_a_zero_baseline_mean_has_no_relative_drop_and_an_improvement_from_it_passes():
    """Relative drop when the baseline mean is 0: none (no division by zero), nothing flagged."""
    zero = rows("base", {"task_success": dict.fromkeys(TEN, 0.0)})
    for now in (rows("now", {"task_success": dict.fromkeys(TEN, 0.0)}),
                rows("now", {"task_success": {**dict.fromkeys(TEN, 0.0), "t0": 1.0}})):
        result = compare(now, zero)
        assert result.passed and result.axes[0].relative_drop is None and not result.flagged


def test_a_run_missing_baseline_trajectories_fails_closed_even_when_it_holds_as_many_ids():
    """compare: half the baseline's trajectories replaced by new (failing) ones keeps the count,
    but the run is partial against its baseline: it must fail, not pass on the half it kept."""
    swapped = {axis: {**{t: 1.0 for t in TEN[:5]}, **{f"new{i}": 0.0 for i in range(5)}} for axis in BASE}
    result = compare(rows("now", swapped), rows("base", BASE))
    assert not result.passed, (result.reasons, result.notes)


def test_an_axis_mostly_lost_to_unscored_results_does_not_pass():
    """compare: 9 of 10 trajectories that were scored in the baseline now unscored on a gating
    axis; the one left agrees. Measuring 1 of 10 must not pass as 'no change'."""
    now = {**BASE, "task_success": {"t0": 1.0, **dict.fromkeys(TEN[1:], None)}}
    result = compare(rows("now", now), rows("base", BASE))
    assert result.regressions_total == 9
    assert not result.passed, result.notes


def test_a_trajectory_that_lost_an_axis_is_not_silently_dropped_from_the_comparison():
    """compare: half the trajectories have no tool_correctness result at all any more (the id is
    still in the run). That is a partial axis: it must fail, or at least be listed as a regression."""
    now = {**BASE, "tool_correctness": dict.fromkeys(TEN[:5], 1.0)}
    result = compare(rows("now", now), rows("base", BASE))
    assert not result.passed or result.regressions_total == 5, (result.reasons, result.notes)


def test_a_run_compared_with_itself_fails_closed():
    """compare(run, run): the same run id on both sides is no comparison (the CLI refuses it; the
    API, which report and run --compare use, must not pass it either)."""
    run = rows("same", BASE)
    result = compare(run, run)
    assert not result.passed


def test_duplicate_trajectory_ids_in_a_run_record_do_not_hide_a_regression(world, tmp_path):
    """compare RUN: the regressed record plus a second line for each regressed id carrying its old
    passing result. Each id keeps one row (the last): the regression vanishes and it passes.
    Duplicate ids must be refused (exit 2) or fail (exit 1)."""
    good = {line["result"]["trajectory_id"]: line for line in record_lines(world["r1"]) if "result" in line}
    lines = record_lines(world["r2"])
    lines[0]["header"]["run_id"] = "with-duplicates"
    lines[-1]["footer"]["trajectories"] += len(REGRESSED)
    lines[-1:-1] = [good[tid] for tid in REGRESSED]
    dup = write_record(tmp_path / "dup.jsonl", lines, world["r2"])
    code, out = cli("compare", dup, "--baseline", world["r1"], "--history", tmp_path / "none.sqlite")
    assert code in (1, 2) and "compare: PASSED" not in out, out


def test_a_partial_record_fails_closed_on_the_cli(world, tmp_path):
    """compare RUN: a record with three trajectories fewer than its baseline exits 1 with its reason."""
    lines = record_lines(world["r1"])
    lines[0]["header"]["run_id"] = "partial"
    del lines[1:4]
    lines[-1]["footer"]["trajectories"] -= 3
    partial = write_record(tmp_path / "partial.jsonl", lines, world["r1"])
    code, out = cli("compare", partial, "--baseline", world["r1"], "--history", tmp_path / "none.sqlite")
    assert code == 2 and "the footer disagrees with the record's own results: summary" in out  # its summary is r1's
    code, out = cli("compare", refooted(partial), "--baseline", world["r1"], "--history", tmp_path / "none.sqlite")
    assert code == 1 and "fewer than the baseline" in out and "compare: FAILED" in out


def test_compare_exit_codes_on_the_cli(world, tmp_path):
    """0 passed, 1 flagged, 2 for a missing baseline, another suite's baseline, the run itself,
    a bad --max-drop-axis; never 3."""
    none = tmp_path / "none.sqlite"
    assert cli("compare", world["r1"], "--baseline", world["r2"], "--history", none)[0] == 0
    code, out = cli("compare", world["r2"], "--baseline", world["r1"], "--history", none)
    assert code == 1 and "tool_correctness: FLAGGED" in out
    assert cli("compare", world["r2"], "--baseline", tmp_path / "missing.jsonl", "--history", none)[0] == 2
    lines = record_lines(world["r1"])
    lines[0]["header"]["suite"], lines[0]["header"]["run_id"] = "another suite", "other-suite-run"
    other = write_record(tmp_path / "other.jsonl", lines, world["r1"])
    code, out = cli("compare", world["r2"], "--baseline", other, "--history", none)
    assert code == 2 and "the record is a run of suite 'another suite', but the suite file it names is" in out
    suite = yaml.safe_load(world["good"].read_text())
    (world["good"].parent / "another.yaml").write_text(yaml.safe_dump({**suite, "name": "another suite"}))
    lines[0]["header"]["suite_file"] = "good/another.yaml"
    other = write_record(tmp_path / "other.jsonl", lines, world["r1"])
    code, out = cli("compare", world["r2"], "--baseline", other, "--history", none)
    assert code == 2 and "different suites" in out
    assert cli("compare", world["r2"], "--baseline", world["r2"], "--history", none)[0] == 2
    for bad in ("tool_correctness", "nope=0.1", "tool_correctness=2", "tool_correctness=nan"):
        code, out = cli("compare", world["r2"], "--baseline", world["r1"], "--max-drop-axis", bad, "--history", none)
        assert code == 2, (bad, out)
    assert not none.exists()  # compare never creates a history


def test_max_drop_nan_is_an_input_error(world, tmp_path):
    """compare --max-drop nan: click's FloatRange lets NaN through (every comparison with it is
    false), and the comparison model then raises: exit 3. It must be a usage error (2)."""
    code, out = cli("compare", world["r2"], "--baseline", world["r1"], "--max-drop", "nan",
                    "--history", tmp_path / "none.sqlite")
    assert code == 2, out


# =====================================================================================================
# reports never land on the history or on a run record
# =====================================================================================================


@pytest.mark.parametrize("flag", ["--html", "--junit", "--markdown"])
def test_compare_never_writes_a_report_over_the_history(world, tmp_path, flag):
    """compare --html/--junit/--markdown naming the history file: the history is replaced by the
    report today. It must be refused (exit 2) and the history left as it was."""
    history = imported(world, tmp_path / "h.sqlite")
    before = history.read_bytes()
    code, out = cli("compare", world["r2"], "--baseline", world["r1"], "--history", history, flag, history)
    assert code == 2, out
    assert history.read_bytes() == before


def test_compare_never_writes_a_report_over_its_baseline_record(world, tmp_path):
    """compare RUN --baseline FILE --markdown FILE: the baseline run record is replaced by Markdown
    today. It must be refused (exit 2) and the record left as it was."""
    baseline = write_record(tmp_path / "r1.jsonl", record_lines(world["r1"]), world["r1"])
    before = baseline.read_bytes()
    code, out = cli("compare", world["r2"], "--baseline", baseline, "--markdown", baseline,
                    "--history", tmp_path / "none.sqlite")
    assert code == 2, out
    assert baseline.read_bytes() == before


def test_run_never_writes_a_report_over_the_history(world, tmp_path):
    """run --record --history H --junit H: the run is recorded, then the history is replaced by
    XML (exit 0). It must be refused before the run (exit 2), the history untouched."""
    history = imported(world, tmp_path / "h.sqlite")
    before = history.read_bytes()
    code, out = cli("run", world["good"], "--record", "--history", history, "--junit", history, *world["judged"])
    assert code == 2, out
    assert history.read_bytes() == before


def test_run_out_naming_the_baseline_file_is_refused_before_the_run(world, tmp_path):
    """run --compare --baseline R --out R: --out replaces R while the run goes, then the baseline is
    'the run itself' (exit 2), the old baseline lost and the run not recorded. It must be refused
    before anything runs, R untouched."""
    baseline = write_record(tmp_path / "r1.jsonl", record_lines(world["r1"]), world["r1"])
    before = baseline.read_bytes()
    code, out = cli("run", world["good"], "--compare", "--baseline", baseline, "--out", baseline,
                    "--history", tmp_path / "h.sqlite", *world["judged"])
    assert code == 2, out
    assert baseline.read_bytes() == before


# =====================================================================================================
# the history file: hostile and tampered files
# =====================================================================================================


@pytest.mark.parametrize("kind", ["fifo", "symlink", "folder"])
@pytest.mark.parametrize("suffix", ["-wal", "-shm", "-journal"])
def test_an_odd_side_file_beside_an_existing_history_is_refused_and_left_alone(world, tmp_path, kind, suffix):
    """An existing history with a FIFO, a link or a folder as its -wal/-shm/-journal: refused
    (exit 2, no hang), the history and the side file as they were."""
    history = imported(world, tmp_path / "h.sqlite")
    before = history.read_bytes()
    side = tmp_path / f"h.sqlite{suffix}"
    if kind == "fifo":
        os.mkfifo(side)
    elif kind == "symlink":
        (tmp_path / "victim").write_text("precious\n")
        side.symlink_to(tmp_path / "victim")
    else:
        side.mkdir()
    with pytest.raises(InputError, match="not a regular file"):
        History(history)
    code, out = cli("compare", world["r2"], "--history", history)
    assert code == 2 and "not a regular file" in out
    assert history.read_bytes() == before and os.path.lexists(side)
    if kind == "symlink":
        assert (tmp_path / "victim").read_text() == "precious\n"


@pytest.mark.parametrize("suffix", ["-wal", "-shm", "-journal"])
@pytest.mark.parametrize("kind", ["fifo", "symlink"])
def test_an_odd_side_file_beside_a_history_not_yet_created_is_refused_and_kept(tmp_path, suffix, kind):
    """History(path) with no file yet but a planted -wal/-shm/-journal (a FIFO, or a link to
    someone's file): the side files are checked only when the history exists, so SQLite takes
    them (deletes the link or the FIFO, or keeps using a FIFO -shm). It must be refused like it
    is beside an existing history, and the planted file left where it is."""
    side = tmp_path / f"h.sqlite{suffix}"
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    if kind == "fifo":
        os.mkfifo(side)
    else:
        side.symlink_to(victim)
    with pytest.raises(InputError):
        History(tmp_path / "h.sqlite").close()
    assert os.path.lexists(side) and victim.read_text() == "precious\n"


def test_a_history_path_that_is_a_folder_is_refused(tmp_path):
    """A folder named as the history: refused with the reason (API and CLI), nothing inside it touched."""
    folder = tmp_path / "h.sqlite"
    folder.mkdir()
    (folder / "keep").write_text("x")
    with pytest.raises(InputError, match="not a regular file"):
        History(folder)
    code, _ = cli("history", "list", "--history", folder)
    assert code == 2
    assert [p.name for p in folder.iterdir()] == ["keep"]


def test_a_results_table_with_other_columns_refuses_the_record_and_keeps_the_runs(world, tmp_path):
    """A history whose results table was replaced (two columns): import exits 2 with the reason,
    and no half-recorded run is left behind."""
    history = tmp_path / "h.sqlite"
    code, _ = cli("history", "import", world["r1"], "--history", history)
    assert code == 0
    with sqlite3.connect(history) as conn:
        conn.execute("DROP TABLE results")
        conn.execute("CREATE TABLE results (a, b)")
    code, out = cli("history", "import", world["r2"], "--history", history)
    # the history is checked against the schema its migrations make when it is opened
    assert code == 2 and "the history holds schema objects its migrations do not make (table results)" in out, out
    with sqlite3.connect(history) as conn:
        assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 1
        assert conn.execute("SELECT count(*) FROM run_axes").fetchone()[0] == 3
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


@pytest.mark.parametrize("started_at", ["yesterday", "2020-01-01T00:00:00"])
@pytest.mark.parametrize("command", ["list", "show", "compare", "prune"])
def test_a_bogus_started_at_in_the_history_is_an_input_error(world, tmp_path, started_at, command):
    """A runs row whose started_at is not a time ('yesterday'), or a time with no zone: history
    list/show, compare and prune --older-than-days crash (ValueError, TypeError: exit 3). A
    tampered history is an input error: exit 2 with the history named."""
    history = imported(world, tmp_path / "h.sqlite")
    with sqlite3.connect(history) as conn:
        conn.execute("UPDATE runs SET started_at = ?", (started_at,))
    r1, r2 = read_run(world["r1"]).run_id, read_run(world["r2"]).run_id
    args = {"list": ("history", "list"), "show": ("history", "show", r2),
            "compare": ("compare", r2, "--baseline", r1), "prune": ("history", "prune", "--older-than-days", "1")}
    code, out = cli(*args[command], "--history", history)
    assert code != 3 and "internal error" not in out, out


TAMPERED = {
    "status code": ("UPDATE results SET status = 9", "compare"),
    "lost not JSON": ("UPDATE results SET lost = 'not json' WHERE lost IS NOT NULL", "compare"),
    "lost nested deep": ("UPDATE results SET lost = '" + "[" * 100_000 + "]" * 100_000 + "' WHERE lost IS NOT NULL",
                         "compare"),
    "score text": ("UPDATE results SET score = 'abc'", "compare"),
    "score infinite": ("UPDATE results SET score = 9e999", "compare"),
    "axis mean infinite": ("UPDATE run_axes SET mean_score = 9e999", "compare"),
    "footer a list": ("UPDATE runs SET footer = '[]'", "compare"),
    "header not JSON": ("UPDATE runs SET header = 'x'", "show"),
}


@pytest.mark.parametrize("case", list(TAMPERED))
def test_tampered_history_rows_are_an_input_error(world, tmp_path, case):
    """Rows of the history that judgekit did not write (an unknown status code, lost points that
    are not JSON or nested past the recursion limit, a text or infinite score, a footer that is
    not an object, a header that is not JSON): exit 2 naming the history, never an internal
    error (exit 3)."""
    history = imported(world, tmp_path / "h.sqlite")
    sql, command = TAMPERED[case]
    with sqlite3.connect(history) as conn:
        if case == "axis mean infinite":  # noise needs repeated runs of one clean commit
            conn.execute("UPDATE runs SET git_commit = 'c0ffee', git_dirty = 0")
        conn.execute(sql)
    r1, r2 = read_run(world["r1"]).run_id, read_run(world["r2"]).run_id
    args = ("compare", r2, "--baseline", r1) if command == "compare" else ("history", "show", r2)
    code, out = cli(*args, "--history", history)
    assert code == 2 and "internal error" not in out and str(history) in out, out


@pytest.mark.parametrize("score", [5.0, -1.0])
def test_an_out_of_range_score_in_the_history_is_refused(world, tmp_path, score):
    """A tampered score outside [0, 1] in every row: compare reads it as is (means of 5.000 or
    -1.000, 'compare: PASSED', exit 0). Scores the record format would refuse must be refused
    from the history too (exit 2)."""
    history = imported(world, tmp_path / "h.sqlite")
    with sqlite3.connect(history) as conn:
        conn.execute("UPDATE results SET score = ? WHERE score IS NOT NULL", (score,))
    r1, r2 = read_run(world["r1"]).run_id, read_run(world["r2"]).run_id
    code, out = cli("compare", r2, "--baseline", r1, "--history", history)
    assert code == 2, out


def test_a_huge_lost_entry_in_the_history_is_not_printed_whole(world, tmp_path):
    """A results row whose lost JSON holds one 2 MB entry: compare prints it whole, twice (4 MB
    of terminal). What a regression lost must be shortened on the terminal."""
    history = imported(world, tmp_path / "h.sqlite")
    with sqlite3.connect(history) as conn:
        conn.execute("UPDATE results SET lost = ? WHERE lost IS NOT NULL", (json.dumps([["X" * 2_000_000, "why"]]),))
    r1, r2 = read_run(world["r1"]).run_id, read_run(world["r2"]).run_id
    code, out = cli("compare", r2, "--baseline", r1, "--history", history)
    assert code == 1 and "tool_correctness: FLAGGED" in out
    assert len(out) < 100_000, len(out)


# =====================================================================================================
# concurrency
# =====================================================================================================


def test_writers_recording_the_same_run_at_once_record_it_once(world, tmp_path):
    """Four threads, each its own connection, record the same run at once: exactly one records it,
    the others get 'already in the history'; the file checks out."""
    path = tmp_path / "h.sqlite"
    History(path).close()
    record = read_run(world["r1"])
    outcomes: list[str] = []
    barrier = threading.Barrier(4)

    def write() -> None:
        with History(path) as store:
            barrier.wait()
            try:
                store.record(record)
                outcomes.append("recorded")
            except InputError as exc:
                outcomes.append("already" if "already in the history" in str(exc) else str(exc))

    threads = [threading.Thread(target=write) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(outcomes) == ["already"] * 3 + ["recorded"]
    with History(path, create=False) as store:
        assert len(store.runs(limit=None)) == 1 and len(store.rows(record.run_id).ids) == 9
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_importing_a_record_another_job_just_imported_says_already_recorded(world, tmp_path):
    """history import in two CI jobs at once: both look the run up, find nothing, and the second
    to write gets InputError (exit 2) instead of 'already recorded'. The interleaving is forced:
    job A imports between job B's look-up and B's write."""
    path = tmp_path / "h.sqlite"
    job_a, job_b = History(path), History(path)
    looked_up = job_b.find

    def find_while_a_imports(run_id):
        found = looked_up(run_id)
        job_a.import_file(world["r1"])  # A wins the race right after B looked
        job_b.find = looked_up
        return found

    job_b.find = find_while_a_imports
    try:
        info, new, _ = job_b.import_file(world["r1"])
    finally:
        job_a.close()
        job_b.close()
    assert not new and info.run_id == read_run(world["r1"]).run_id


# =====================================================================================================
# prune
# =====================================================================================================


def test_prune_always_keeps_the_newest_green_run_of_each_suite(world, tmp_path):
    """prune --keep 1 --older-than-days 0: every run goes but the newest green one of each suite,
    even when newer runs failed their comparison; other suites keep theirs."""
    base = read_run(world["r1"])
    path = tmp_path / "h.sqlite"
    with History(path) as store:
        for i in range(5):
            run = base.model_copy(deep=True)
            run.run_id, run.started_at = f"run{i}", base.started_at - timedelta(days=10 - i)
            store.record(run, compare_passed=i in (0, 2))  # green: 0 and 2; 3, 4 failed their comparison
        suite = yaml.safe_load(world["good"].read_text())
        (world["good"].parent / "other.yaml").write_text(yaml.safe_dump({**suite, "name": "other suite"}))
        other = base.model_copy(deep=True)
        other.run_id, other.suite, other.started_at = "other0", "other suite", base.started_at - timedelta(days=30)
        other.suite_file = str(Path(other.suite_file).parent / "other.yaml")
        store.record(other)
    code, out = cli("history", "prune", "--keep", "1", "--older-than-days", "0", "--history", path)
    assert code == 0 and "removed 4 run(s)" in out
    with History(path, create=False) as store:
        assert sorted(r.run_id for r in store.runs(limit=None)) == ["other0", "run2"]
        assert store.last_green(base.suite).run_id == "run2"
        assert store.rows("run2").ids == {r.trajectory_id for r in base.results}


def test_prune_of_a_suite_with_no_run_says_so(world, tmp_path):
    """history prune --suite NAME where no run of NAME is recorded (a typo): today 'removed 0
    run(s)', exit 0, so a CI prune step that never prunes goes unnoticed. It must say that the
    suite has no run (as history list --suite does), naming it."""
    history = imported(world, tmp_path / "h.sqlite")
    code, out = cli("history", "prune", "--suite", "no-such-suite", "--keep", "1", "--history", history)
    assert code in (0, 2)
    assert "no-such-suite" in out, out


# =====================================================================================================
# output escaping
# =====================================================================================================

EVIL_ID = "ok\x1b]0;pwned\x07\x1b[2J\r\ncompare: PASSED\u202e"
EVIL_RUN = "\x1b[31m\nrecorded fake-run"


@pytest.fixture
def evil_records(world, tmp_path):
    """r1 and r2 with the trajectory 'ok' renamed to an id full of terminal controls, and run ids
    holding an escape and a line break."""
    made = []
    for name in ("r1", "r2"):
        lines = record_lines(world[name])
        lines[0]["header"]["run_id"] += EVIL_RUN
        for line in lines:
            if "result" in line and line["result"]["trajectory_id"] == "ok":
                line["result"]["trajectory_id"] = EVIL_ID
        made.append(write_record(tmp_path / f"{name}.jsonl", lines, world[name]))
    return made


def test_control_characters_in_ids_never_reach_the_terminal_raw_from_compare(evil_records, tmp_path):
    """compare (text and --json), history list/show: the escapes are escaped, no faked line."""
    r1, r2 = evil_records
    history = tmp_path / "h.sqlite"
    with History(history) as store:
        store.record(read_run(r1))
        store.record(read_run(r2))
    r1_id = read_run(r1).run_id
    for args in (("compare", r2, "--baseline", r1, "--history", tmp_path / "none.sqlite"),
                 ("compare", r2, "--baseline", r1, "--history", tmp_path / "none.sqlite", "--json"),
                 ("history", "list", "--history", history),
                 ("history", "show", r1_id, "--history", history)):
        code, out = cli(*args)
        assert code in (0, 1), out
        assert no_raw_controls(out), args
        assert not any(line.startswith(("compare: PASSED", "recorded fake-run")) for line in out.splitlines()), args
    code, out = cli("compare", r2, "--baseline", r1, "--history", tmp_path / "none.sqlite", "--json")
    assert EVIL_ID in {r["trajectory_id"] for r in json.loads(out)["regressions"]}  # escaped, not altered


def test_history_import_keeps_a_run_id_on_its_own_line(evil_records, tmp_path):
    """history import prints the run id with say() only (line breaks kept): a run id holding a
    line break fakes a 'recorded ...' line. It must be escaped with one_line like every other value."""
    code, out = cli("history", "import", *evil_records, "--history", tmp_path / "h.sqlite")
    assert code == 0, out
    assert no_raw_controls(out)
    assert not any(line.startswith("recorded fake-run") for line in out.splitlines()), out
