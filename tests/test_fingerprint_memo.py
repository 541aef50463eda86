"""A rerun finds its verdicts by the fingerprint of each question's inputs, rendering nothing.

``JudgeJob.fingerprint`` names a question whose prompt shows no world by what it is rendered
from (the trajectory's line, the rubric, the judge, judgekit's code); the cache keeps
fingerprint -> key beside the verdicts. These tests run the example suite against the scripted
judge on 127.0.0.1 and count the prompts rendered (the renderer itself is counted, not mocked).
"""

from __future__ import annotations

import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # before anything imports litellm

import json
import pickle
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from judgekit.cache import store as cache_module
from judgekit import prompt as prompt_module
from judgekit.cache.base import BaseVerdictStore
from judgekit.cache.store import FINGERPRINT_PREFIX, VerdictCache
from judgekit.cli import main as cli_main
from judgekit.judge.resolve import JudgeOverride
from judgekit.run import RunOptions, plan_run
from judgekit.run import jobs as job_module
from judgekit.run.estimate import estimate_run
from judgekit.suite import load_suite
from judgekit.testing import ScriptedOpenAIServer
from test_judge_runner import EXAMPLE_JUDGE, MODEL, example_suite, faithfulness, run_suite, scripted_judge, verdict_content


@pytest.fixture(scope="module")
def server():
    with ScriptedOpenAIServer(scripted_judge) as srv:
        yield srv


@pytest.fixture
def renders(monkeypatch):
    """The number of prompts rendered so far (by axis), counted inside the renderer."""
    counted: dict[str, int] = {}
    real = prompt_module._Render.__call__

    def counting(self):
        counted[self.axis] = counted.get(self.axis, 0) + 1
        return real(self)

    monkeypatch.setattr(prompt_module._Render, "__call__", counting)
    return counted


def rows(cache: Path) -> dict[str, str]:
    with sqlite3.connect(cache / "cache.db") as conn:
        return dict(conn.execute("SELECT key, value FROM Cache"))


def fingerprint_rows(cache: Path) -> dict[str, dict]:
    return {key: json.loads(value) for key, value in rows(cache).items() if key.startswith(FINGERPRINT_PREFIX)}


def set_value(cache: Path, key: str, value: str) -> None:
    with sqlite3.connect(cache / "cache.db") as conn:
        conn.execute("UPDATE Cache SET value = ? WHERE key = ?", (value, key))


def test_a_rerun_is_answered_by_fingerprint_without_rendering_a_prompt(tmp_path, server, renders):
    suite, cache = example_suite(tmp_path / "suite"), tmp_path / "cache"
    first, ledger1 = run_suite(suite, cache, server)
    assert renders.get("faithfulness", 0) == len(first)  # each question rendered once, to be asked
    memo = fingerprint_rows(cache)
    keys = {a.judge.cache_key for a in faithfulness(first).values()}
    assert {entry["key"] for entry in memo.values()} == keys  # every fingerprint names its verdict's key
    assert all(name == FINGERPRINT_PREFIX + entry["fingerprint"] for name, entry in memo.items())

    renders.clear()
    before = server.request_count
    second, ledger2 = run_suite(suite, cache, server)
    assert renders.get("faithfulness", 0) == 0
    assert server.request_count == before and ledger2.calls == 0
    assert ledger2.cache_hits == len(second) and ledger2.cache_refused == {}
    one, two = faithfulness(first), faithfulness(second)
    assert list(one) == list(two)
    for tid in one:
        assert verdict_content(two[tid]) == verdict_content(one[tid]), tid
        assert two[tid].judge.cache_key == one[tid].judge.cache_key and two[tid].judge.cache_hit
    assert len({json.dumps(verdict_content(a)) for a in one.values()}) > 2  # the answers differ


def test_a_cache_without_the_memo_renders_once_then_learns_it(tmp_path, server, renders):
    suite, cache = example_suite(tmp_path / "suite"), tmp_path / "cache"
    first, _ = run_suite(suite, cache, server)
    with sqlite3.connect(cache / "cache.db") as conn:  # as a cache written before the memo was
        conn.execute("DELETE FROM Cache WHERE key LIKE 'fingerprint:%'")
    renders.clear()
    second, ledger = run_suite(suite, cache, server)
    assert ledger.calls == 0 and renders["faithfulness"] == len(second)
    assert len(fingerprint_rows(cache)) == len(second)  # one per line (two lines ask the same question)
    renders.clear()
    third, ledger = run_suite(suite, cache, server)
    assert ledger.calls == 0 and renders.get("faithfulness", 0) == 0
    assert [verdict_content(a) for a in faithfulness(third).values()] == [
        verdict_content(a) for a in faithfulness(first).values()]


def test_a_changed_line_is_rendered_and_asked_and_the_others_are_not(tmp_path, server, renders):
    suite, cache = example_suite(tmp_path / "suite"), tmp_path / "cache"
    first, _ = run_suite(suite, cache, server)
    lines = (suite.parent / "trajectories.jsonl").read_text().splitlines()
    record = json.loads(lines[0])
    record["output"] += " (And one more thing.)"
    lines[0] = json.dumps(record)
    (suite.parent / "trajectories.jsonl").write_text("\n".join(lines) + "\n")
    renders.clear()
    second, ledger = run_suite(suite, cache, server)
    assert renders["faithfulness"] == 1 and ledger.calls == 1
    changed = faithfulness(second)[record["id"]]
    assert changed.judge.cache_key != faithfulness(first)[record["id"]].judge.cache_key
    assert not changed.judge.cache_hit


def test_the_same_line_reformatted_is_rendered_and_finds_its_verdict_by_key(tmp_path, server, renders):
    # Another line (spaces) is another fingerprint, but the same prompt: one render, no call.
    suite, cache = example_suite(tmp_path / "suite"), tmp_path / "cache"
    run_suite(suite, cache, server)
    path = suite.parent / "trajectories.jsonl"
    path.write_text("".join(json.dumps(json.loads(line), indent=None, separators=(", ", ":  ")) + "\n"
                            for line in path.read_text().splitlines() if line.strip()))
    renders.clear()
    second, ledger = run_suite(suite, cache, server)
    assert ledger.calls == 0 and renders["faithfulness"] == len(second)


def test_other_code_has_other_fingerprints(tmp_path, server, renders, monkeypatch):
    suite, cache = example_suite(tmp_path / "suite"), tmp_path / "cache"
    first, _ = run_suite(suite, cache, server)
    before = set(fingerprint_rows(cache))
    monkeypatch.setattr(job_module, "code_sha256", lambda: "0" * 64)  # judgekit's files changed
    renders.clear()
    second, ledger = run_suite(suite, cache, server)
    assert ledger.calls == 0 and renders["faithfulness"] == len(second)  # the keys did not change
    assert set(fingerprint_rows(cache)) - before  # the new code's fingerprints were learnt


def test_without_a_code_digest_there_is_no_memo(tmp_path, server, renders, monkeypatch):
    monkeypatch.setattr(job_module, "code_sha256", lambda: None)  # installed where files cannot be read
    suite, cache = example_suite(tmp_path / "suite"), tmp_path / "cache"
    run_suite(suite, cache, server)
    assert fingerprint_rows(cache) == {}
    renders.clear()
    second, ledger = run_suite(suite, cache, server)
    assert ledger.calls == 0 and renders["faithfulness"] == len(second)


def test_a_fingerprint_entry_moved_to_another_fingerprint_is_refused(tmp_path, server, renders):
    suite, cache = example_suite(tmp_path / "suite"), tmp_path / "cache"
    first, _ = run_suite(suite, cache, server)
    memo = fingerprint_rows(cache)
    (a, entry_a), (b, entry_b) = list(memo.items())[:2]
    set_value(cache, a, json.dumps(entry_b, separators=(",", ":")))  # b's entry copied under a
    renders.clear()
    second, ledger = run_suite(suite, cache, server)
    assert ledger.calls == 0
    assert ledger.cache_refused == {"it is bound to another fingerprint": 1}
    assert renders["faithfulness"] == sum(1 for r in first if r.axes["faithfulness"].judge.cache_key == entry_a["key"])
    assert [verdict_content(x) for x in faithfulness(second).values()] == [
        verdict_content(x) for x in faithfulness(first).values()]
    assert fingerprint_rows(cache)[a] == entry_a  # learnt again, right


@pytest.mark.parametrize("value", [
    pytest.param('{"cache_format":2,"fingerprint":"FP","key":"not-a-key"}', id="key_not_a_cache_key"),
    pytest.param('{"cache_format":2,"fingerprint":"FP","key":"KEY","more":1}', id="extra_field"),
    pytest.param('{"cache_format":2,"fingerprint":"FP","key":"KEY","key":"KEY"}', id="duplicate_key"),
    pytest.param('{"cache_format":1,"fingerprint":"FP","key":"KEY"}', id="old_format"),
    pytest.param("[]", id="a_list"),
])
def test_a_fingerprint_entry_that_does_not_check_out_is_refused_and_rendered_around(tmp_path, server, renders, value):
    suite, cache = example_suite(tmp_path / "suite"), tmp_path / "cache"
    first, _ = run_suite(suite, cache, server)
    name, entry = next(iter(fingerprint_rows(cache).items()))
    set_value(cache, name, value.replace("FP", entry["fingerprint"]).replace("KEY", entry["key"]))
    second, ledger = run_suite(suite, cache, server)
    assert ledger.calls == 0 and sum(ledger.cache_refused.values()) == 1
    assert [verdict_content(x) for x in faithfulness(second).values()] == [
        verdict_content(x) for x in faithfulness(first).values()]


def test_a_fingerprint_whose_verdict_is_gone_is_asked_under_its_rendered_key(tmp_path, server, renders):
    suite, cache = example_suite(tmp_path / "suite"), tmp_path / "cache"
    first, _ = run_suite(suite, cache, server)
    key = next(iter(faithfulness(first).values())).judge.cache_key
    with sqlite3.connect(cache / "cache.db") as conn:
        conn.execute("DELETE FROM Cache WHERE key = ?", (key,))
    second, ledger = run_suite(suite, cache, server)
    assert ledger.calls == 1 and ledger.cache_refused == {}
    assert {a.judge.cache_key for a in faithfulness(second).values()} == {
        a.judge.cache_key for a in faithfulness(first).values()}


def test_prune_and_stats_know_the_memo(tmp_path, server):
    suite, cache = example_suite(tmp_path / "suite"), tmp_path / "cache"
    first, _ = run_suite(suite, cache, server)
    verdicts = len({a.judge.cache_key for a in faithfulness(first).values()})
    assert verdicts < len(first)  # two lines ask the same question: one verdict, two fingerprints
    cli = CliRunner()
    stats = json.loads(cli.invoke(cli_main, ["cache", "stats", "--cache-dir", str(cache)]).stdout)
    assert (stats["entries"], stats["fingerprints"]) == (verdicts, len(first))
    keys = [a.judge.cache_key for a in faithfulness(first).values()]
    key = next(k for k in keys if keys.count(k) == 1)
    with sqlite3.connect(cache / "cache.db") as conn:
        conn.execute("DELETE FROM Cache WHERE key = ?", (key,))
    pruned = cli.invoke(cli_main, ["cache", "prune", "--cache-dir", str(cache), "--older-than-days", "3650"])
    assert pruned.stdout == "removed 0 verdict(s)\n"  # the dangling fingerprint went with it
    assert key not in {entry["key"] for entry in fingerprint_rows(cache).values()}
    assert len(fingerprint_rows(cache)) == len(first) - 1
    name = next(iter(fingerprint_rows(cache)))
    set_value(cache, name, "[]")  # a fingerprint entry that does not check out goes, and is no verdict
    pruned = cli.invoke(cli_main, ["cache", "prune", "--cache-dir", str(cache), "--older-than-days", "3650"])
    assert pruned.stdout == "removed 0 verdict(s)\n" and len(fingerprint_rows(cache)) == len(first) - 2
    cleared = cli.invoke(cli_main, ["cache", "clear", "--cache-dir", str(cache)])
    assert cleared.stdout == f"removed {verdicts - 1} verdict(s)\n" and rows(cache) == {}


def test_only_a_prompt_that_shows_no_world_has_a_fingerprint_and_a_plan_pickles_unrendered(tmp_path, renders):
    suite = example_suite(tmp_path / "suite", rubric_update={"task_success.judge": True})
    plan = plan_run(load_suite(suite))
    by_axis: dict[str, list] = {}
    for judgement in plan.judgements:
        by_axis.setdefault(judgement.axis, []).append(judgement.job)
    assert by_axis["faithfulness"] and by_axis["task_success"]
    assert all(job.fingerprint is not None and not job.prompt.rendered for job in by_axis["faithfulness"])
    for job in by_axis["task_success"]:  # it shows the end-state diff: named by its key, from planning on
        assert job.fingerprint is None and job.prompt.rendered
    original = by_axis["faithfulness"][0]
    fingerprint = original.fingerprint
    renders.clear()
    copy = pickle.loads(pickle.dumps(plan))
    # A plan travels with its prompts rendered: another process, running other code (another
    # template), asks exactly what this code planned, and learns no fingerprint for other messages.
    assert renders["faithfulness"] == len(by_axis["faithfulness"]) and original.prompt.rendered
    again = next(j.job for j in copy.judgements if j.axis == "faithfulness")
    assert again.prompt.rendered and again.fingerprint == fingerprint
    assert again.key == original.key and again.prompt.messages == original.prompt.messages


def test_a_plan_pickled_here_and_asked_under_other_templates_asks_what_was_planned(tmp_path, monkeypatch):
    suite = example_suite(tmp_path / "suite")
    plan = plan_run(load_suite(suite))
    shipped = pickle.dumps(plan)
    # "Other code": the executing process has another faithfulness template.
    monkeypatch.setattr(prompt_module, "_template", lambda form="full": (
        {**prompt_module.load_template(prompt_module.TEMPLATES[form])[0], "faithfulness": "Other instructions."},
        "f" * 64))
    received = pickle.loads(shipped)
    jobs = [j.job for j in received.judgements]
    assert [job.key for job in jobs] == [j.job.key for j in plan.judgements]
    assert all("Other instructions." not in job.prompt.messages[0]["content"] for job in jobs)


class _PlainStore(BaseVerdictStore):
    """A store with only the methods it must have: the base class's memo keeps nothing."""

    def __init__(self):
        self.rows = {}

    def get_many(self, wanted):
        return {key: self.rows[key].model_copy(deep=True) for key, _ in wanted if key in self.rows}

    def put_many(self, items):
        self.rows.update(items)


def test_a_store_without_memo_methods_still_serves_a_rerun(tmp_path, server):
    import asyncio

    from judgekit.judge.resolve import JudgeOverride
    from judgekit.run.judging import JudgeRunner
    from test_judge_runner import MODEL

    suite = example_suite(tmp_path / "suite")
    override = JudgeOverride(model=MODEL, api_base=server.base_url)
    store = _PlainStore()
    for expected_calls in (None, 0):
        jobs = [j.job for j in plan_run(load_suite(suite), override=override).judgements]
        runner = JudgeRunner(cache=store)
        verdicts = asyncio.run(runner.run(jobs))
        assert len(verdicts) == len(jobs) and all(v.status == "scored" for v in verdicts)
        if expected_calls is not None:
            assert runner.ledger.calls == expected_calls and runner.ledger.cache_hits == len(jobs)


def test_a_memo_write_that_fails_loses_nothing_and_hangs_nothing(tmp_path, server, monkeypatch):
    suite, cache = example_suite(tmp_path / "suite"), tmp_path / "cache"

    def broken(self, pairs):
        raise RuntimeError("the memo table is broken")

    monkeypatch.setattr(VerdictCache, "put_keys", broken)
    first, ledger = run_suite(suite, cache, server)  # asks every question; each memo write fails
    assert ledger.calls > 0 and fingerprint_rows(cache) == {}
    second, ledger = run_suite(suite, cache, server)
    assert ledger.calls == 0 and ledger.cache_hits == len(second)


def test_the_memo_writes_through_the_store_api(tmp_path):
    with VerdictCache(tmp_path / "cache") as store:
        store.put_keys([("f" * 64, "a" * 64)])
        assert store.keys_for(["f" * 64, "e" * 64]) == {"f" * 64: "a" * 64}
        assert store.stats()["fingerprints"] == 1 and store.stats()["entries"] == 0


def test_the_digest_shared_by_a_rubric_and_judge_is_what_each_job_would_work_out(tmp_path):
    # The part of a fingerprint that all questions of one rubric, judge, axis and repeat share is
    # worked out once (jobs._static_question_sha256): it must be exactly what each job gives
    # alone, and any judge parameter must still change the fingerprint.
    from dataclasses import replace

    from pydantic import ValidationError

    plans = {
        seed: plan_run(load_suite(example_suite(tmp_path / f"seed-{seed}", judge={**EXAMPLE_JUDGE, "seed": seed})), repeats=2)
        for seed in (0, 7)
    }
    jobs = {seed: [j.job for j in plan.judgements if j.axis == "faithfulness"] for seed, plan in plans.items()}
    planned = {seed: [job.fingerprint for job in found] for seed, found in jobs.items()}
    job_module._STATIC_QUESTIONS.clear()
    for seed, found in jobs.items():
        alone = [replace(job).fingerprint for job in found]  # a fresh job: nothing cached on it
        assert alone == planned[seed]
        assert len(set(alone)) == len(alone)  # every trajectory and repeat is its own question
    assert not set(planned[0]) & set(planned[7])  # the seed is part of every question
    spec = jobs[0][0].judge.spec
    with pytest.raises(ValidationError):
        spec.seed = 7  # frozen: a digest worked out from a spec stays true to it


def test_a_refused_entry_of_a_read_only_cache_is_asked_once_however_many_windows_repeat_it(tmp_path, server, monkeypatch):
    # A cache this process cannot write (tried, as root cannot be refused by modes: the probe
    # says no) cannot take the verdict asked in place of an entry whose provenance names
    # another judge. The run keeps that answer for its later windows, so a question repeated
    # in them is asked once and refused once: the figures the dry run gives.
    suite, cache = example_suite(tmp_path / "suite"), tmp_path / "cache"
    first, _ = run_suite(suite, cache, server)
    keys = [a.judge.cache_key for a in faithfulness(first).values()]
    repeated = next(key for key in keys if keys.count(key) > 1)
    envelope = json.loads(rows(cache)[repeated])
    envelope["verdict"]["provenance"]["endpoint"] = "http://127.0.0.1:9/another-judge"
    tampered = json.dumps(envelope, separators=(",", ":"))
    set_value(cache, repeated, tampered)
    monkeypatch.setattr(cache_module, "writable", lambda directory, db: False)

    before = server.request_count
    second, ledger = run_suite(suite, cache, server, window=1)
    assert ledger.cache_read_only
    assert server.request_count - before == ledger.calls == 1  # asked in its first window only
    refusal = {"its provenance names another judge or rubric": 1}
    assert ledger.cache_refused == refusal
    assert [verdict_content(x) for x in faithfulness(second).values()] == [
        verdict_content(x) for x in faithfulness(first).values()]
    estimate = estimate_run(suite, RunOptions(override=JudgeOverride(model=MODEL, api_base=server.base_url),
                                              cache_dir=cache, window=1))
    assert (estimate.to_ask, estimate.cache_refused) == (ledger.calls, refusal)
    assert rows(cache)[repeated] == tampered  # nothing written


def test_the_code_digest_covers_every_module_and_prompt_of_the_package(tmp_path, monkeypatch):
    # A module moved into judgekit/_util/ once hashed its own folder only: a change to the run,
    # the axes or a prompt template kept the digest, so a memo outlived the code it held for.
    import shutil

    from judgekit._util import version

    package = Path(version.__file__).resolve().parent.parent
    copy = tmp_path / "judgekit"
    shutil.copytree(package, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(version, "__file__", str(copy / "_util" / "version.py"))
    version.code_sha256.cache_clear()
    digests = {version.code_sha256()}
    for changed in ("prompt.py", "run/plan.py", "prompts/judge_v2.txt", "_util/text.py"):
        path = copy / changed
        path.write_bytes(path.read_bytes() + b"\n")
        version.code_sha256.cache_clear()
        digests.add(version.code_sha256())
    version.code_sha256.cache_clear()  # the installed package's digest again for later tests
    assert None not in digests and len(digests) == 5
