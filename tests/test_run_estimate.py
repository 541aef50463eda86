"""``judgekit run --dry-run``'s estimate: from the plan alone, nothing spent, the cache only read."""

from __future__ import annotations

import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # before anything imports litellm

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from judgekit.judge.resolve import JudgeOverride
from judgekit.run import RunOptions, plan_run, run_suite
from judgekit.run.estimate import RunEstimate, estimate_run, render_estimate
from judgekit.suite import load_suite
from judgekit.testing import ScriptedOpenAIServer
from test_judge_runner import MODEL, PRICED_PIN, scripted_judge

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "email-update"


def distinct_jobs(override: JudgeOverride) -> dict:
    """The example's judge questions by cache key, planned independently of the estimate."""
    plan = plan_run(load_suite(EXAMPLE), override=override)
    return {j.job.key: j.job for j in plan.judgements}


def folder_state(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` -> sha256 of its bytes; SQLite's ``-shm`` only by name: it is
    the WAL's shared-memory index, where every reader (a read-only one too) marks what it reads."""
    return {str(p.relative_to(folder)): "index" if p.name.endswith("-shm") else hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


# --- the embedded judge is never started ---------------------------------------------------------

DRY_RUN_SCRIPT = r"""
import json, os, sys, time
from pathlib import Path

def listening_sockets():
    # inodes of this process's sockets that listen on TCP (state 0A)
    mine = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            link = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            mine.add(link[8:-1])
    listening = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if os.path.exists(table):
            for line in open(table).read().splitlines()[1:]:
                fields = line.split()
                if fields[3] == "0A":
                    listening.add(fields[9])
    return sorted(mine & listening)

started = time.monotonic()
import judgekit.judge.local as local
import judgekit.judge.resolve as resolve

calls = []
def refuse(name):
    def refused(*args, **kwargs):
        calls.append(name)
        raise AssertionError(f"a dry run called {name}")
    return refused

local.LocalJudgeServer.__init__ = refuse("LocalJudgeServer")
resolve.Connector.__call__ = refuse("Connector")

from judgekit.run import RunOptions
from judgekit.run.estimate import estimate_run, render_estimate

from judgekit.judge.resolve import JudgeOverride

threads_before = __import__("threading").active_count()
override = JudgeOverride(*sys.argv[3:5]) if len(sys.argv) > 3 else JudgeOverride()
est = estimate_run(Path(sys.argv[1]), RunOptions(cache_dir=Path(sys.argv[2]), override=override))
print(json.dumps({
    "estimate": json.loads(est.model_dump_json()),
    "text": render_estimate(est),
    "seconds": time.monotonic() - started,
    "calls": calls,
    "listening": listening_sockets(),
    "xllamacpp_imported": "xllamacpp" in sys.modules,
    "litellm_imported": "litellm" in sys.modules,
    "extra_threads": __import__("threading").active_count() - threads_before,
}))
"""


def dry_run_elsewhere(tmp_path: Path, cache: Path, *override: str) -> dict:
    """The estimate in a fresh interpreter, with what it started and imported."""
    out = subprocess.run([sys.executable, "-c", DRY_RUN_SCRIPT, str(EXAMPLE), str(cache), *override],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_dry_run_of_the_example_starts_no_judge_and_finishes_fast(tmp_path):
    cache = tmp_path / "cache"
    seen = dry_run_elsewhere(tmp_path, cache)
    est = RunEstimate.model_validate(seen["estimate"])
    print(f"\nexample dry run: {seen['seconds']:.2f} s (a real run with the embedded judge takes about a minute)\n"
          + seen["text"])
    assert seen["calls"] == [] and seen["listening"] == [] and not seen["xllamacpp_imported"]
    assert seen["extra_threads"] == 0  # no server thread, no cache writer left behind
    assert seen["seconds"] < 30
    assert not cache.exists()  # a missing cache folder is not created
    jobs = distinct_jobs(JudgeOverride())
    assert est.trajectories == 9
    assert est.deterministic == {"task_success": {"scored": 9}, "tool_correctness": {"scored": 9}}
    assert est.judged == {"faithfulness": 9}
    assert (est.questions, est.cached, est.to_ask) == (len(jobs), 0, len(jobs))
    [judge] = est.judges
    assert judge.embedded and judge.endpoint == "embedded" and judge.model_pin.startswith("local/")
    assert judge.priced == "embedded" and judge.cost_usd_max == 0.0
    assert judge.completion_tokens_max == len(jobs) * 2400  # the example's max_tokens (fits the compact answer)
    assert judge.prompt_tokens > 0
    assert "no provider bill" in seen["text"] and "an upper bound" in seen["text"]


# --- prices ---------------------------------------------------------------------------------------


def test_priced_model_costs_its_tokens_at_litellms_prices(tmp_path):
    import litellm

    override = JudgeOverride(model=PRICED_PIN)
    est = estimate_run(EXAMPLE, RunOptions(override=override, cache_dir=tmp_path / "cache"))
    jobs = distinct_jobs(override)
    prompt = sum(litellm.token_counter(model=PRICED_PIN, messages=job.prompt.messages) for job in jobs.values())
    completion = sum(job.judge.spec.max_tokens for job in jobs.values())
    prices = litellm.model_cost[PRICED_PIN.split("/", 1)[1]]
    expected = prompt * prices["input_cost_per_token"] + completion * prices["output_cost_per_token"]
    print(f"\n{PRICED_PIN}: {prompt} prompt + at most {completion} completion tokens, at most ${expected:.6f}")
    [judge] = est.judges
    assert (judge.model_pin, judge.priced, judge.embedded) == (PRICED_PIN, "litellm", False)
    assert (est.prompt_tokens, est.completion_tokens_max) == (prompt, completion)
    assert expected > 0 and est.cost_usd_max == pytest.approx(expected)
    assert est.prompt_cost_usd == pytest.approx(prompt * prices["input_cost_per_token"])
    assert est.unpriced == [] and f"${expected:.4f}" in render_estimate(est)


def test_unpriced_model_says_unknown_never_zero(tmp_path):
    est = estimate_run(EXAMPLE, RunOptions(override=JudgeOverride(model=MODEL), cache_dir=tmp_path / "cache"))
    [judge] = est.judges
    assert judge.to_ask == len(distinct_jobs(JudgeOverride(model=MODEL))) and judge.prompt_tokens > 0
    assert (judge.priced, judge.cost_usd_max, judge.prompt_cost_usd) == ("unknown", None, None)
    assert est.cost_usd_max is None and est.unpriced == [MODEL]
    text = render_estimate(est)
    assert f"total cost: unknown for {MODEL}" in text and "$0" not in text


def test_a_budget_the_upper_bound_exceeds_is_said(tmp_path):
    from judgekit.suite import Budget

    est = estimate_run(EXAMPLE, RunOptions(override=JudgeOverride(model=PRICED_PIN), cache_dir=tmp_path / "cache",
                                           budget=Budget(max_cost_usd=1e-6)))
    assert est.over_budget is not None and "stops judging at the budget" in render_estimate(est)


# --- the cache: read, never written ---------------------------------------------------------------


def test_after_a_real_run_every_question_is_cached_and_costs_nothing(tmp_path):
    cache = tmp_path / "cache"
    with ScriptedOpenAIServer(scripted_judge) as srv:
        options = RunOptions(override=JudgeOverride(model=MODEL, api_base=srv.base_url), cache_dir=cache)
        before = estimate_run(EXAMPLE, options)
        record = run_suite(EXAMPLE, options=options)
    replies = record.ledger.calls - sum(record.ledger.failed_attempts.values())  # a retried transport failure aside
    assert before.to_ask == replies > 0  # the dry run counted the calls the run made
    stored = folder_state(cache)
    after = estimate_run(EXAMPLE, options)  # the server is gone: nothing can be asked
    elsewhere = dry_run_elsewhere(tmp_path, cache, MODEL, options.override.api_base)
    assert RunEstimate.model_validate(elsewhere["estimate"]) == after
    assert not elsewhere["litellm_imported"]  # nothing to count or price: litellm (seconds) is not imported
    print(f"\nbefore the run: {before.to_ask} to ask; after: {after.cached} cached\n" + render_estimate(after))
    assert (after.questions, after.cached, after.to_ask) == (before.questions, before.questions, 0)
    assert after.cost_usd_max == 0.0 and after.prompt_tokens == after.completion_tokens_max == 0
    assert after.unpriced == [] and after.cache_refused == {}  # MODEL has no price, but nothing is asked
    assert "total cost: $0" in render_estimate(after)
    assert "cache.db" in stored and folder_state(cache) == stored  # read only: not a byte of the cache changed
    # The same model at another endpoint is another judge: this cache does not answer for it.
    other = estimate_run(EXAMPLE, RunOptions(override=JudgeOverride(model=MODEL), cache_dir=cache))
    assert other.cached == 0 and other.to_ask == other.questions
    # --no-cache: the run would ask everything again.
    fresh = estimate_run(EXAMPLE, RunOptions(override=options.override, cache_dir=cache, use_cache=False))
    assert (fresh.cached, fresh.to_ask, fresh.cache_dir) == (0, before.questions, None)


def test_the_default_cache_folder_is_not_created(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    est = estimate_run(EXAMPLE, RunOptions(override=JudgeOverride(model=MODEL)))
    assert est.cache_dir == str(Path(".judgekit") / "cache") and not est.cache_exists
    assert list(tmp_path.iterdir()) == []
    assert "does not exist yet" in render_estimate(est)


def test_an_empty_cache_folder_gets_no_database(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    est = estimate_run(EXAMPLE, RunOptions(override=JudgeOverride(model=MODEL), cache_dir=cache))
    assert est.cache_exists and est.cached == 0 and list(cache.iterdir()) == []


# --- windows --------------------------------------------------------------------------------------


@pytest.mark.parametrize("window", [pytest.param(1, id="one_trajectory_a_window"),
                                    pytest.param(4, id="windows_of_four")])
def test_windows_give_the_same_estimate_as_one_plan(tmp_path, window):
    options = dict(override=JudgeOverride(model=PRICED_PIN), cache_dir=tmp_path / "cache")
    whole = estimate_run(EXAMPLE, RunOptions(**options))
    windowed = estimate_run(EXAMPLE, RunOptions(**options, window=window))
    assert windowed == whole  # a question repeated in a later window is still one question


# --- the rerun memo -------------------------------------------------------------------------------


def test_a_warm_cache_is_counted_by_fingerprint_without_rendering_a_prompt(tmp_path, monkeypatch):
    # As a rerun does, the dry run finds a question's verdict through the memo (fingerprint ->
    # key) and renders no prompt for it; its figures are those of a cache without the memo,
    # where every prompt is rendered and hashed; a memo entry that does not check out is
    # counted as the run counts it, and its question found by key.
    import shutil
    import sqlite3

    from judgekit import prompt as prompt_module
    from judgekit.cache.store import FINGERPRINT_PREFIX

    cache = tmp_path / "cache"
    with ScriptedOpenAIServer(scripted_judge) as srv:
        options = dict(override=JudgeOverride(model=MODEL, api_base=srv.base_url))
        run_suite(EXAMPLE, options=RunOptions(**options, cache_dir=cache))
    bare = tmp_path / "bare"
    shutil.copytree(cache, bare)
    with sqlite3.connect(bare / "cache.db") as conn:
        conn.execute("DELETE FROM Cache WHERE key LIKE ?", (FINGERPRINT_PREFIX + "%",))
        fingerprints = conn.total_changes
    assert fingerprints > 0
    renders = []
    real = prompt_module._Render.__call__
    monkeypatch.setattr(prompt_module._Render, "__call__", lambda self: renders.append(self.axis) or real(self))

    warm = estimate_run(EXAMPLE, RunOptions(**options, cache_dir=cache))
    assert "faithfulness" not in renders  # the memo named every faithfulness question's key
    assert warm.to_ask == 0 and warm.cached == warm.questions > 0 and warm.cache_refused == {}
    renders.clear()
    without = estimate_run(EXAMPLE, RunOptions(**options, cache_dir=bare))
    assert renders.count("faithfulness") == warm.judged["faithfulness"]  # each rendered to find its key
    assert without == warm.model_copy(update={"cache_dir": str(bare)})

    with sqlite3.connect(cache / "cache.db") as conn:  # one entry's value copied under another fingerprint
        (a, _), (_, value_b) = conn.execute(
            "SELECT key, value FROM Cache WHERE key LIKE ? ORDER BY key LIMIT 2", (FINGERPRINT_PREFIX + "%",))
        conn.execute("UPDATE Cache SET value = ? WHERE key = ?", (value_b, a))
    renders.clear()
    moved = estimate_run(EXAMPLE, RunOptions(**options, cache_dir=cache))
    assert moved.cache_refused == {"it is bound to another fingerprint": 1}
    assert renders.count("faithfulness") >= 1 and (moved.cached, moved.to_ask) == (warm.cached, 0)
