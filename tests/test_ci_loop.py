"""The CI loop: run history (SQLite), compare with a baseline, per-axis drop flags, fail-closed rules.

The acceptance case: two runs of the example suite, the second with a deliberate regression (the
update made twice in two trajectories, as when a change makes the agent repeat calls: the world
ends the same, so task success holds): ``compare`` flags tool correctness and nothing else, and names the two trajectories
with the point they lost.
"""

from __future__ import annotations

import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # before anything imports litellm

import json
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from judgekit.cli import main as cli_main
from judgekit.ci.compare import ComparePolicy, bootstrap_means, compare, paired_test
from judgekit.run.rows import AxisRow, RunRows
from judgekit.run.remeasure import run_rows
from judgekit.errors import InputError
from judgekit.ci.history import APPLICATION_ID, MIGRATIONS, SCHEMA_VERSION, History
from judgekit.run.record import read_run
from judgekit.testing import ScriptedOpenAIServer
from test_judge_runner import MODEL, example_suite, scripted_judge

EXTRA_CALL = {"tool": "update_user", "args": {"user_id": 1, "email": "alice@example.com"},
              "result": {"id": 1, "email": "alice@example.com"}}
REGRESSED = ("ok", "retry-after-error")


@pytest.fixture(scope="module")
def server():
    with ScriptedOpenAIServer(scripted_judge) as srv:
        yield srv


def regressed_copy(root: Path) -> Path:
    """The example suite where two passing trajectories repeat their update call."""
    suite = example_suite(root)
    lines = []
    for line in (suite.parent / "trajectories.jsonl").read_text().splitlines():
        item = json.loads(line)
        if item["id"] in REGRESSED:
            item["calls"] = [*item["calls"], EXTRA_CALL]  # the same update again: the world ends the same
        lines.append(json.dumps(item))
    (suite.parent / "trajectories.jsonl").write_text("\n".join(lines) + "\n")
    return suite


def cli(*args, env=None):
    result = CliRunner().invoke(cli_main, [str(a) for a in args], catch_exceptions=False, env=env)
    return result.exit_code, result.output


def judged(server, tmp_path: Path) -> list[str]:
    return ["--judge-model", MODEL, "--judge-api-base", server.base_url, "--cache-dir", tmp_path / "cache"]


@pytest.fixture(scope="module")
def two_runs(server, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("loop")
    before, after = example_suite(tmp / "before"), regressed_copy(tmp / "after")
    history = tmp / "history.sqlite"
    code1, out1 = cli("run", before, "--record", "--history", history, "--out", tmp / "r1.jsonl",
                      *judged(server, tmp))
    code2, out2 = cli("run", after, "--compare", "--baseline", tmp / "r1.jsonl", "--history", history,
                      "--out", tmp / "r2.jsonl", *judged(server, tmp))
    return tmp, history, (code1, out1), (code2, out2)


# --- acceptance: a deliberate regression is flagged, on its axis only -------------------------------


def test_regression_flags_exactly_tool_correctness_and_its_trajectories(two_runs):
    tmp, history, (code1, out1), (code2, out2) = two_runs
    assert code1 == 0, out1
    assert code2 == 1, out2  # the comparison failed: exit 1, like a failed gate
    assert "tool_correctness: FLAGGED" in out2 and "compare: FAILED" in out2

    code, out = cli("compare", tmp / "r2.jsonl", "--baseline", tmp / "r1.jsonl", "--history", history, "--json")
    assert code == 1
    comparison = json.loads(out)
    print(f"\n{json.dumps({a['axis']: [a['baseline_mean'], a['mean'], a['relative_drop'], a['test']['p_value']] for a in comparison['axes']})}")
    assert [a["axis"] for a in comparison["axes"] if a["flagged"]] == ["tool_correctness"]
    by_axis = {a["axis"]: a for a in comparison["axes"]}
    assert by_axis["task_success"]["drop"] == 0 and by_axis["faithfulness"]["drop"] == 0
    tool = by_axis["tool_correctness"]
    assert tool["relative_drop"] > 0.05 and tool["shared"] == 9
    # Two of nine trajectories got worse: the interval of the change reaches 0, p is far from small (n = 9).
    assert tool["test"]["method"] == "paired_bootstrap" and tool["test"]["ci_low"] < 0 <= tool["test"]["p_value"] and tool["test"]["ci_high"] <= 0
    assert by_axis["task_success"]["test"]["method"] == "mcnemar_exact"

    regressions = comparison["regressions"]
    assert {(r["trajectory_id"], r["axis"]) for r in regressions} == {(tid, "tool_correctness") for tid in REGRESSED}
    for reg in regressions:
        assert reg["flipped"] and reg["baseline_score"] == 1.0 > reg["score"]  # both had full marks before
        assert reg["lost"] and all("call" in lost for lost in reg["lost"])
    assert any("tool_correctness" in reason for reason in comparison["reasons"])


def test_the_regressed_run_is_recorded_and_not_green(two_runs):
    tmp, history, _, _ = two_runs
    with History(history, create=False) as store:
        runs = store.runs()
        assert len(runs) == 2
        newest, first = runs
        assert newest.compare_passed is False and not newest.green
        assert first.compare_passed is None
        r2 = read_run(tmp / "r2.jsonl")
        assert newest.run_id == r2.run_id and newest.trajectories == 9
        for name, summary in r2.summary.items():
            assert newest.axes[name]["mean_score"] == pytest.approx(summary.mean_score, abs=1e-6)
            assert newest.axes[name]["scored"] == summary.scored
        # Rows read back from the history compare exactly as rows read from the record file.
        from_history = compare(store.rows(r2.run_id), store.rows(first.run_id))
        from_files = compare(run_rows(r2), run_rows(read_run(tmp / "r1.jsonl")))
        assert from_history.model_dump(exclude={"baseline_source"}) == from_files.model_dump(exclude={"baseline_source"})


def test_an_improvement_and_an_identical_run_pass(two_runs):
    tmp, history, _, _ = two_runs
    code, out = cli("compare", tmp / "r1.jsonl", "--baseline", tmp / "r2.jsonl", "--history", history)
    assert code == 0, out
    assert "FLAGGED" not in out and "compare: PASSED" in out
    same = run_rows(read_run(tmp / "r1.jsonl"))
    twin = run_rows(read_run(tmp / "r1.jsonl"))
    twin.run_id = "twin"
    result = compare(same, twin)
    assert result.passed and not result.flagged and result.regressions_total == 0


def test_compare_against_a_run_id_in_the_history(two_runs):
    tmp, history, _, _ = two_runs
    with History(history, create=False) as store:
        first = store.runs()[-1].run_id
    code, out = cli("compare", tmp / "r2.jsonl", "--baseline", first, "--history", history)
    assert code == 1 and "tool_correctness: FLAGGED" in out
    # The drop is negative and marked ▼, as on the dashboard; an unchanged axis says = 0.0%.
    assert re.search(r"^  tool_correctness: FLAGGED: mean [\d.]+, baseline [\d.]+ \(▼ -\d+\.\d%\)", out, re.M), out
    assert re.search(r"^  task_success: ok: mean [\d.]+, baseline [\d.]+ \(= 0\.0%\)", out, re.M), out


# --- fail closed ------------------------------------------------------------------------------------


def rows(run_id: str, scores: dict[str, dict[str, float | None]], *, judge: str | None = None,
         judges: dict | None = None) -> RunRows:
    """RunRows from axis -> id -> score (None: unscored)."""
    built = RunRows(run_id=run_id, suite="s", judges=judges or {})
    for axis, by_id in scores.items():
        for tid, score in by_id.items():
            status = "scored" if score is not None else "unscored"
            built.add(AxisRow(tid, axis, status, score, (), None if score is not None else "parse_failure",
                              judge if axis == "faithfulness" else None))
    return built


BASE = {"task_success": {f"t{i}": 1.0 for i in range(10)}, "tool_correctness": {f"t{i}": 1.0 for i in range(10)}}


def test_an_empty_run_fails_closed():
    result = compare(rows("now", {}), rows("base", BASE))
    assert not result.passed
    assert any("empty run" in reason for reason in result.reasons)


def test_a_partial_run_fails_closed_even_when_every_shared_score_is_the_same():
    partial = {axis: dict(list(by_id.items())[:6]) for axis, by_id in BASE.items()}
    result = compare(rows("now", partial), rows("base", BASE))
    assert not result.passed and not result.flagged
    assert any("fewer than the baseline" in reason for reason in result.reasons)
    assert result.only_in_baseline_total == 4 and result.only_in_baseline == ["t6", "t7", "t8", "t9"]


def test_an_axis_with_nothing_scored_fails_closed_unless_it_is_advisory():
    unscored = {**BASE, "faithfulness": {f"t{i}": None for i in range(10)}}
    base = {**BASE, "faithfulness": {f"t{i}": 1.0 for i in range(10)}}
    approved = {"fp": {"faithfulness": "approved"}}
    gating = compare(rows("now", unscored, judge="fp", judges=approved), rows("base", base, judge="fp", judges=approved))
    assert not gating.passed and any(r.startswith("faithfulness: no trajectory was scored") for r in gating.reasons)
    advisory = compare(rows("now", unscored, judge="fp", judges={"fp": {"faithfulness": "advisory"}}),
                       rows("base", base, judge="fp"))
    assert advisory.passed and any("advisory" in note for note in advisory.notes)
    # Every regression is listed, as no longer scored, with why.
    assert {r.note for r in advisory.regressions} == {"parse_failure"} and advisory.regressions_total == 10


def test_a_missing_baseline_fails_only_when_required():
    now = rows("now", BASE)
    assert compare(now, None).passed
    required = compare(now, None, ComparePolicy(require_baseline=True))
    assert not required.passed and any("one is required" in r for r in required.reasons)


def test_cli_fail_closed_cases_and_exit_codes(two_runs, tmp_path):
    tmp, history, _, _ = two_runs
    r1 = tmp / "r1.jsonl"
    code, out = cli("compare", r1, "--require-baseline", "--history", tmp_path / "none.sqlite")
    assert code == 1 and "one is required" in out
    code, out = cli("compare", r1, "--baseline", "no-such-run", "--history", history)
    assert code == 2 and "no such run record file" in out
    code, out = cli("compare", r1, "--baseline", r1, "--history", history)
    assert code == 2 and "the run itself" in out
    # An empty record (header and footer, no result) fails closed against any baseline. Its footer
    # must say what an empty run measures (nothing: no axis, no judge, a failed gate): a footer
    # that claims more than its results is refused before any comparison (exit 2).
    lines = r1.read_text().splitlines()
    footer = json.loads(lines[-1])
    footer["footer"]["trajectories"] = 0
    empty = tmp_path / "empty.jsonl"
    header = json.loads(lines[0])
    header["header"]["run_id"] = "empty-run"
    header["header"]["suite_file"] = os.path.relpath(tmp / "before" / "suite.yaml", tmp_path)
    empty.write_text(json.dumps(header) + "\n" + json.dumps(footer) + "\n")
    code, out = cli("compare", empty, "--baseline", r1, "--history", history)
    assert code == 2 and "the footer disagrees with the record's own results: summary" in out
    footer["footer"].update(summary={}, judges=[], gate_report={
        "passed": False, "axes": [], "reasons": ["the run scored nothing (no trajectory, or no axis): an empty run never "
                                                 "passes"]})
    empty.write_text(json.dumps(header) + "\n" + json.dumps(footer) + "\n")
    code, out = cli("compare", empty, "--baseline", r1, "--history", history)
    assert code == 1 and "empty run" in out


def test_a_drop_within_run_to_run_noise_is_not_flagged():
    from judgekit.ci.compare import Noise

    base = rows("base", {"tool_correctness": {f"t{i}": 1.0 for i in range(10)}})
    now = rows("now", {"tool_correctness": {**{f"t{i}": 1.0 for i in range(9)}, "t9": 0.2}})  # mean 0.92: -8%
    assert compare(now, base).flagged == ["tool_correctness"]
    noisy = compare(now, base, noise={"tool_correctness": Noise(sd=0.05, runs=6)})
    assert noisy.flagged == [] and noisy.axes[0].noise_sd == 0.05
    quiet = compare(now, base, noise={"tool_correctness": Noise(sd=0.01, runs=6)})
    assert quiet.flagged == ["tool_correctness"] and "noise" in quiet.reasons[0]
    loose = compare(now, base, ComparePolicy(per_axis={"tool_correctness": 0.1}))
    assert loose.flagged == []


# --- statistics -------------------------------------------------------------------------------------


def test_the_nonzero_bootstrap_draws_like_the_full_one():
    rng = np.random.default_rng(7)
    diffs = np.where(rng.random(400) < 0.1, rng.choice([-1.0, -0.5, 0.5], size=400), 0.0)
    fast = bootstrap_means(diffs, resamples=20000, seed=1)
    full = diffs[rng.integers(0, len(diffs), size=(20000, len(diffs)))].mean(axis=1)
    assert fast.mean() == pytest.approx(full.mean(), abs=0.002)
    assert fast.std() == pytest.approx(full.std(), rel=0.05)
    assert np.quantile(fast, [0.025, 0.975]) == pytest.approx(np.quantile(full, [0.025, 0.975]), abs=0.004)


def test_mcnemar_counts_only_the_discordant_pairs():
    from scipy.stats import binomtest

    before = [1.0] * 30 + [0.0] * 10
    now = [0.0] * 8 + [1.0] * 22 + [1.0] * 2 + [0.0] * 8  # 8 worse, 2 better
    test = paired_test(now, before, binary=True)
    assert (test.worse, test.better, test.n) == (8, 2, 40)
    assert test.p_value == pytest.approx(binomtest(8, 10, 0.5).pvalue)
    assert test.ci_high < 0.05 and test.ci_low < -0.1


# --- the history file -------------------------------------------------------------------------------


def test_history_cli_list_show_import_prune(two_runs, tmp_path):
    tmp, _, _, _ = two_runs
    history = tmp_path / "h.sqlite"
    code, out = cli("history", "list", "--history", history)
    assert code == 2 and "nothing recorded yet" in out and not history.exists()
    code, out = cli("history", "import", tmp / "r1.jsonl", tmp / "r2.jsonl", "--history", history)
    assert code == 0 and out.count("recorded ") == 2
    code, out = cli("history", "import", tmp / "r1.jsonl", "--history", history)
    assert code == 0 and "already recorded" in out
    code, out = cli("history", "list", "--history", history, "--json")
    listed = [json.loads(line) for line in out.splitlines()]
    r1, r2 = read_run(tmp / "r1.jsonl"), read_run(tmp / "r2.jsonl")
    assert [r["run_id"] for r in listed] == [r2.run_id, r1.run_id]
    code, out = cli("history", "show", r1.run_id, "--history", history)
    shown = json.loads(out)
    assert shown["header"]["run_id"] == r1.run_id and shown["footer"]["trajectories"] == 9
    code, out = cli("history", "prune", "--keep", "1", "--history", history)
    assert code == 0 and "removed 1 run" in out
    with History(history, create=False) as store:
        assert [r.run_id for r in store.runs()] == [r2.run_id]
        assert store.rows(r2.run_id).ids == set(r2_ids := {r.trajectory_id for r in r2.results}) and r2_ids


def test_a_foreign_or_corrupt_file_is_refused_and_never_written(tmp_path):
    text = tmp_path / "notes.sqlite"
    text.write_text("my notes\n")
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE mine (x)")
    cut = tmp_path / "cut.sqlite"
    cut.write_bytes(b"SQLite format 3\x00" + b"\x00" * 20)
    for path, words in ((text, "not an SQLite database"), (other, "another program's file"), (cut, "truncated")):
        before = path.read_bytes()
        with pytest.raises(InputError, match=words) as caught:
            History(path)
        assert str(path) in str(caught.value)
        assert path.read_bytes() == before
        code, out = cli("history", "list", "--history", path)
        assert code == 2 and words in out
    link = tmp_path / "link.sqlite"
    link.symlink_to(other)
    with pytest.raises(InputError, match="not a regular file"):
        History(link)


def test_a_newer_schema_is_refused(tmp_path):
    path = tmp_path / "h.sqlite"
    History(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(InputError, match="newer judgekit"):
        History(path)


def test_migrations_are_numbered_named_and_recorded(tmp_path):
    with History(tmp_path / "h.sqlite") as store:
        applied = store.migrations()
    assert [(v, n) for v, n, _ in applied] == [(m.version, m.name) for m in MIGRATIONS]
    assert [m.version for m in MIGRATIONS] == list(range(1, len(MIGRATIONS) + 1))
    with sqlite3.connect(tmp_path / "h.sqlite") as conn:
        assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


WRITER = """
import sys
from judgekit.ci.history import History
from judgekit.run.record import read_run
record = read_run(sys.argv[2])
with History(sys.argv[1]) as store:
    for i in range(int(sys.argv[3])):
        record.run_id = f"{sys.argv[4]}-{i:03d}"
        store.record(record)
"""


def test_two_concurrent_writers_lose_nothing(two_runs, tmp_path):
    tmp, _, _, _ = two_runs
    path = tmp_path / "h.sqlite"
    History(path).close()
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(tmp / "r1.jsonl"), "15", name],
                                env=env, stderr=subprocess.PIPE, text=True) for name in ("a", "b")]
    for proc in writers:
        assert proc.wait(timeout=300) == 0, proc.stderr.read()
    with History(path, create=False) as store:
        runs = store.runs(limit=None)
        assert len(runs) == 30 and len({r.run_id for r in runs}) == 30
        assert all(len(store.rows(r.run_id).ids) == 9 for r in runs)
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_noise_comes_from_repeated_runs_of_one_commit(server, tmp_path):
    """Three runs of one clean commit recorded as they ran (the suite in a real git repository,
    its gate one a run passes): the noise is their spread; never the compared run's own; never
    imported records, whose commit is only their claim."""
    loose = {"gate": {"min_task_success_rate": 0.0, "min_tool_correctness": 0.0, "min_faithfulness": 0.0}}
    suite = example_suite(tmp_path / "repo", suite_update=loose)
    git = ["git", "-C", str(suite.parent), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "suite"]):
        subprocess.run([*git, *args], check=True, capture_output=True)
    history = tmp_path / "h.sqlite"
    for i in range(3):
        code, out = cli("run", suite, "--record", "--history", history, "--out", tmp_path / f"r{i}.jsonl",
                        *judged(server, tmp_path))
        assert code == 0, out
    run_ids = [read_run(tmp_path / f"r{i}.jsonl").run_id for i in range(3)]
    with History(history) as store:
        noise = store.noise("email-update copy")
        assert set(noise) == {"faithfulness", "task_success", "tool_correctness"}
        assert all(n.sd == 0 and n.runs == 3 for n in noise.values())
        assert all(n.runs == 2 for n in store.noise("email-update copy", exclude=run_ids[2]).values())
    imported = tmp_path / "imported.sqlite"
    assert cli("history", "import", *(tmp_path / f"r{i}.jsonl" for i in range(3)), "--history", imported)[0] == 0
    with History(imported) as store:
        assert store.noise("email-update copy") == {}


@pytest.mark.parametrize("worse,better", [(0, 1), (1, 0), (3, 3), (8, 2), (2, 8), (17, 40), (400, 455), (5000, 5200)])
def test_mcnemar_exact_agrees_with_scipys_binomial_test(worse, better):
    from scipy.stats import binomtest

    from judgekit.ci.compare import mcnemar_exact

    assert mcnemar_exact(worse, better) == pytest.approx(binomtest(worse, worse + better, 0.5).pvalue, rel=1e-9, abs=1e-15)
