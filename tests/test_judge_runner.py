"""Judge runs end to end against the scripted OpenAI server on 127.0.0.1.

The verdict cache (a rerun asks nothing; exactly the inputs that can change a verdict change
its key) and the judge's guard rails: floating models, a reported-model mismatch, the token
budget and the command-line override. Nothing here calls a real provider.
"""

from __future__ import annotations

import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # before anything imports litellm

import hashlib
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from judgekit.cache.store import VerdictCache
from judgekit.cli import main as cli_main
from judgekit.judge.resolve import JudgeOverride
from judgekit.results import TrajectoryResult
from judgekit.run import RunOptions
from judgekit.run import run_suite as run_through_library
from judgekit.run.record import read_run
from judgekit.suite import Budget, load_suite
from judgekit.testing import Reply, ScriptedOpenAIServer, prompt_items

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "email-update"
EXAMPLE_RUBRIC = ROOT / "rubrics" / "update-email.yaml"
MODEL = "openai/judge-2024-08-06"
EXAMPLE_JUDGE = {"model": "local", "max_tokens": 512}


# --- the scripted judge ------------------------------------------------------------------------


def data_items(user_message: str) -> dict[str, str]:
    """Every data item of a rendered prompt: id -> decoded text."""
    return prompt_items(user_message)


def judge_answer(request: dict[str, Any]) -> dict[str, Any]:
    """A valid answer that depends on the prompt, so verdicts differ between trajectories."""
    schema = request["response_format"]["json_schema"]["schema"]
    items = data_items(request["messages"][1]["content"])
    if "verdict" in schema.get("properties", {}):
        digest = hashlib.sha256(items.get("D0", "").encode()).hexdigest()
        return {"reasons": [f"D0 digest {digest[:8]}"], "verdict": "fail"}
    results = sorted(k for k in items if k.startswith("R"))
    if not results:
        return {"claims": [{"claim": items.get("O", ""), "supported": False, "evidence": []}]}
    first = results[0]
    return {
        "claims": [
            {"claim": items["O"][:60], "supported": True, "evidence": [{"id": first, "quote": items[first][:24]}]},
            {"claim": "an unsupported aside", "supported": False, "evidence": []},
        ]
    }


def scripted_judge(request: dict[str, Any], n: int) -> Reply:
    return Reply.ok(judge_answer(request))


@pytest.fixture(scope="module")
def server():
    with ScriptedOpenAIServer(scripted_judge) as srv:
        yield srv


# --- fixture suites ----------------------------------------------------------------------------


def example_suite(
    root: Path,
    *,
    judge: dict[str, Any] | None = None,
    rubric_update: dict[str, Any] | None = None,
    suite_update: dict[str, Any] | None = None,
) -> Path:
    """A copy of examples/email-update (without the lock, so the rubric may be edited)."""
    root.mkdir(parents=True, exist_ok=True)
    shutil.copytree(EXAMPLE / "snapshots", root / "snapshots", dirs_exist_ok=True)
    shutil.copy(EXAMPLE / "trajectories.jsonl", root / "trajectories.jsonl")
    rubric = yaml.safe_load(EXAMPLE_RUBRIC.read_text())
    rubric.pop("$schema", None)
    for dotted, value in (rubric_update or {}).items():
        *parents, last = dotted.split(".")
        node = rubric
        for part in parents:
            node = node[part]
        node[last] = value
    (root / "rubric.yaml").write_text(yaml.safe_dump(rubric, sort_keys=False))
    suite = {
        "name": "email-update copy",
        "rubrics": ["rubric.yaml"],
        "trajectories": [{"file": "trajectories.jsonl", "rubric": "update-email"}],
        "judge": judge or dict(EXAMPLE_JUDGE),
        **(suite_update or {}),
    }
    (root / "suite.yaml").write_text(yaml.safe_dump(suite, sort_keys=False))
    return root / "suite.yaml"


def run_suite(suite: Path, cache_dir: Path, server, **options: Any):
    override = options.pop("override", JudgeOverride(model=MODEL, api_base=server.base_url))
    record = run_through_library(load_suite(suite), options=RunOptions(override=override, cache_dir=cache_dir, **options))
    return record.results, record.ledger


def faithfulness(results: list[TrajectoryResult]) -> dict[str, Any]:
    return {r.trajectory_id: r.axes["faithfulness"] for r in results}


def verdict_content(axis) -> dict[str, Any]:
    """What the verdict says, without when and how it was obtained."""
    return axis.model_dump(mode="json", exclude={"judge"})


# --- acceptance 1: the cache -------------------------------------------------------------------


def test_rerun_asks_nothing_and_gives_identical_verdicts(tmp_path, server):
    suite = example_suite(tmp_path / "suite")
    cache = tmp_path / "cache"

    before = server.request_count
    first, ledger1 = run_suite(suite, cache, server)
    first_requests = server.request_count - before
    second, ledger2 = run_suite(suite, cache, server)
    rerun_requests = server.request_count - before - first_requests
    print(f"\nexample suite: first run {first_requests} requests "
          f"({len(first)} trajectories; identical prompts share one call), rerun {rerun_requests} requests, "
          f"rerun cache hits {ledger2.cache_hits}")

    # Every request the server saw is a call in the ledger; a transport failure (retried, and
    # reported by the ledger) may not have reached the server.
    assert ledger1.calls - sum(ledger1.failed_attempts.values()) <= first_requests <= ledger1.calls
    assert first_requests > 0
    assert rerun_requests == 0
    assert ledger2.calls == 0 and ledger2.cache_hits == len(second)
    one, two = faithfulness(first), faithfulness(second)
    assert list(one) == list(two)
    for tid in one:
        assert one[tid].status == two[tid].status == "scored", tid
        assert verdict_content(two[tid]) == verdict_content(one[tid]), tid
        assert one[tid].judge.cache_hit is False and two[tid].judge.cache_hit is True
        assert two[tid].judge.attempts == 0
        assert two[tid].judge.cache_key == one[tid].judge.cache_key
        assert two[tid].judge.model_pin == MODEL
    # The judge's answers differ between trajectories, so "identical" compares something.
    assert len({json.dumps(verdict_content(a)) for a in one.values()}) > 2


KEY_CASES = [
    pytest.param({"rubric_update": {"version": "1.1.0", "faithfulness.guide": "Cite every claim; quote exactly.\n"}},
                 True, id="guide_changed_new_version"),
    pytest.param({"rubric_update": {"faithfulness.guide": "Cite every claim; quote exactly.\n"}},
                 True, id="guide_changed_same_version"),
    pytest.param({"override": "openai/judge-2024-11-20"}, True, id="model_pin"),
    pytest.param({"judge": {**EXAMPLE_JUDGE, "seed": 7}}, True, id="seed"),
    pytest.param({"judge": {**EXAMPLE_JUDGE, "max_tokens": 256}}, True, id="max_tokens"),
    pytest.param({"judge": {**EXAMPLE_JUDGE, "timeout_s": 17.5}}, False, id="timeout_s"),
    pytest.param({"judge": {**EXAMPLE_JUDGE, "max_attempts": 2, "invalid_reply_retries": 0}}, False, id="retries"),
    pytest.param({"concurrency": 1}, False, id="concurrency"),
    pytest.param({"rubric_update": {"description": "Reworded description, criteria unchanged."}},
                 True, id="rubric_description"),  # any rubric edit changes its hash
]


@pytest.mark.parametrize(("change", "new_calls"), KEY_CASES)
def test_cache_key_covers_exactly_what_changes_a_verdict(tmp_path, server, change, new_calls):
    cache = tmp_path / "cache"
    base_suite = example_suite(tmp_path / "base")
    base, _ = run_suite(base_suite, cache, server)
    baseline_requests = len({a.judge.cache_key for a in faithfulness(base).values()})

    suite = example_suite(
        tmp_path / "changed", judge=change.get("judge"), rubric_update=change.get("rubric_update")
    )
    options: dict[str, Any] = {}
    if "override" in change:
        options["override"] = JudgeOverride(model=change["override"], api_base=server.base_url)
    if "concurrency" in change:
        options["concurrency"] = change["concurrency"]
    before = server.request_count
    changed, _ = run_suite(suite, cache, server, **options)
    requests = server.request_count - before
    print(f"\n{change}: {requests} new request(s) (baseline {baseline_requests})")

    old = {tid: a.judge.cache_key for tid, a in faithfulness(base).items()}
    new = {tid: a.judge.cache_key for tid, a in faithfulness(changed).items()}
    if new_calls:
        assert requests == baseline_requests
        assert all(new[tid] != old[tid] for tid in old)
        assert not any(a.judge.cache_hit for a in faithfulness(changed).values())
    else:
        assert requests == 0
        assert new == old
        assert all(a.judge.cache_hit for a in faithfulness(changed).values())


def test_errors_are_never_cached(tmp_path):
    """A run whose judge only fails leaves the cache empty, and the next run asks again."""
    suite = example_suite(tmp_path / "suite")
    cache = tmp_path / "cache"
    with ScriptedOpenAIServer(Reply.malformed()) as bad:
        results, ledger = run_suite(suite, cache, bad)
        assert {a.unscored_reason for a in faithfulness(results).values()} == {"parse_failure"}
    with VerdictCache(cache) as store:
        assert store.stats()["entries"] == 0
    with ScriptedOpenAIServer(scripted_judge) as good:
        results, _ = run_suite(suite, cache, good)
        assert good.request_count == ledger.calls // 3  # each failure cost 1 + 2 invalid-reply retries
    assert {a.status for a in faithfulness(results).values()} == {"scored"}


# --- acceptance 6: guard rails -----------------------------------------------------------------


def cli(*args: str) -> Any:
    return CliRunner().invoke(cli_main, list(args), catch_exceptions=False)


def read_record(path: Path) -> dict[str, Any]:
    return read_run(path).model_dump(mode="json")


def judge_provenances(record: dict[str, Any], axis: str = "faithfulness") -> list[dict[str, Any]]:
    return [r["axes"][axis]["judge"] for r in record["results"] if axis in r["axes"]]


def test_floating_model_is_refused_with_exit_2(tmp_path, server):
    """The console script users run: one line on stderr, exit 2, no request, no cache."""
    suite = example_suite(tmp_path / "suite")
    before = server.request_count
    proc = subprocess.run(
        ["judgekit", "run", str(suite), "--judge-model", "gpt-4o", "--judge-api-base", server.base_url,
         "--cache-dir", str(tmp_path / "cache")],
        capture_output=True, text=True, timeout=120,
    )
    print(f"\nexit {proc.returncode}: {proc.stderr.strip()}")
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("judgekit: error: judge model 'gpt-4o' is not pinned to a snapshot")
    assert "allow_floating" in lines[0]  # says what to do next
    assert server.request_count == before
    assert not (tmp_path / "cache").exists()


@pytest.mark.parametrize(
    "model", ["gpt-4o", "openai/gpt-4o-latest", "anthropic/claude-3-5-sonnet-latest", "openai/gpt-4o-2024-08-06-preview"]
)
def test_floating_models_are_refused(tmp_path, server, model):
    suite = example_suite(tmp_path / "suite")
    before = server.request_count
    result = CliRunner().invoke(cli_main, ["run", str(suite), "--judge-model", model, "--judge-api-base",
                                           server.base_url, "--cache-dir", str(tmp_path / "cache")])
    assert result.exit_code == 2
    assert f"judge model {model!r} is not pinned" in result.output
    assert server.request_count == before


def test_floating_model_allowed_is_recorded(tmp_path, server):
    suite = example_suite(tmp_path / "suite")
    out = tmp_path / "run.json"
    result = cli("run", str(suite), "--judge-model", "gpt-4o", "--judge-api-base", server.base_url,
                 "--allow-floating", "--cache-dir", str(tmp_path / "cache"), "--out", str(out))
    assert result.exit_code == 0, result.output
    provenances = judge_provenances(read_record(out))
    assert len(provenances) == 9
    assert all(p["floating"] is True and p["model_pin"] == "gpt-4o" for p in provenances)
    # The suite's own switch does the same as the flag.
    suite2 = example_suite(tmp_path / "suite2", suite_update={"allow_floating": True})
    result = cli("run", str(suite2), "--judge-model", "gpt-4o", "--judge-api-base", server.base_url,
                 "--cache-dir", str(tmp_path / "cache2"), "--out", str(out))
    assert result.exit_code == 0, result.output
    assert all(p["floating"] is True for p in judge_provenances(read_record(out)))


@pytest.mark.parametrize(
    ("pin", "reported", "mismatch"),
    [
        pytest.param(MODEL, None, False, id="echoed"),
        pytest.param(MODEL, "openai/judge-2024-08-06", False, id="provider_prefix"),
        pytest.param(MODEL + "@sha256:" + "ab" * 32, "judge-2024-08-06", False, id="sha256_pin"),
        pytest.param(MODEL, "judge-2024-08-06-ft-abc", True, id="fine_tuned_variant"),
        pytest.param(MODEL, "gpt-4o-mini-2024-07-18", True, id="other_model"),
        pytest.param(MODEL, "judge-2024-11-20", True, id="other_snapshot"),
    ],
)
def test_reported_model_mismatch_is_flagged(tmp_path, pin, reported, mismatch):
    suite = example_suite(tmp_path / "suite")
    with ScriptedOpenAIServer(lambda req, n: Reply.ok(judge_answer(req), model=reported)) as srv:
        results, _ = run_suite(suite, tmp_path / "cache", srv, override=JudgeOverride(model=pin, api_base=srv.base_url))
    for axis in faithfulness(results).values():
        assert axis.status == "scored"
        assert axis.judge.model_mismatch is mismatch
        assert axis.judge.reported_model == (reported or pin.split("@")[0].rsplit("/", 1)[-1])


def test_reported_model_that_is_a_substring_of_the_pin_is_flagged(tmp_path):
    """Regression: 'gpt-4o' reported for the pin 'gpt-4o-mini-2024-07-18' once passed as a match."""
    suite = example_suite(tmp_path / "suite")
    pin = "openai/gpt-4o-mini-2024-07-18"
    with ScriptedOpenAIServer(lambda req, n: Reply.ok(judge_answer(req), model="gpt-4o")) as srv:
        results, _ = run_suite(suite, tmp_path / "cache", srv, override=JudgeOverride(model=pin, api_base=srv.base_url))
    assert all(a.judge.model_mismatch for a in faithfulness(results).values())


def test_budget_stops_judging_cleanly(tmp_path, server):
    suite = example_suite(tmp_path / "suite")
    cache, out = tmp_path / "cache", tmp_path / "run.json"
    before = server.request_count
    result = cli("run", str(suite), "--judge-model", MODEL, "--judge-api-base", server.base_url,
                 "--cache-dir", str(cache), "--concurrency", "1", "--budget-tokens", "1200", "--out", str(out))
    assert result.exit_code == 0, result.output
    calls = server.request_count - before
    record = read_record(out)
    axes = [r["axes"]["faithfulness"] for r in record["results"]]
    scored = [a for a in axes if a["status"] == "scored"]
    budget = [a for a in axes if a["status"] == "unscored"]
    print(f"\nbudget 1200 tokens: {calls} calls, {len(scored)} scored, {len(budget)} unscored 'budget', "
          f"ledger {record['ledger']}")
    assert 0 < calls < 8 and len(scored) >= calls
    assert budget and all(a["unscored_reason"] == "budget" and "token budget spent" in a["error"] for a in budget)
    assert all(a["passed"] is None if "passed" in a else a["score"] is None for a in budget)
    assert record["ledger"]["unscored"] == {"budget": len(budget)}
    assert record["ledger"]["prompt_tokens"] + record["ledger"]["completion_tokens"] >= 1200
    assert record["summary"]["faithfulness"]["unscored"] == len(budget)
    # One unscored count, on the axis's line, with why; the judge's line says only what it cost.
    assert f"faithfulness: {len(scored)} scored, mean" in result.output
    assert f", {len(budget)} unscored (budget {len(budget)})" in result.output
    assert "unscored" not in next(line for line in result.output.splitlines() if line.startswith("judge: "))
    # Finished verdicts were kept: a run without the budget asks only for the rest.
    with VerdictCache(cache) as store:
        assert all(store.get(a["judge"]["cache_key"]) is not None for a in scored)
        assert all(store.get(a["judge"]["cache_key"]) is None for a in budget)
    before = server.request_count
    result = cli("run", str(suite), "--judge-model", MODEL, "--judge-api-base", server.base_url,
                 "--cache-dir", str(cache), "--out", str(out))
    assert result.exit_code == 0, result.output
    assert server.request_count - before == len({a["judge"]["cache_key"] for a in budget})
    assert all(r["axes"]["faithfulness"]["status"] == "scored" for r in read_record(out)["results"])


def test_budget_overshoot_is_bounded_by_concurrency(tmp_path, server):
    """The budget is checked before each call, so at most `concurrency` calls overshoot it."""
    suite = example_suite(tmp_path / "suite")
    before = server.request_count
    results, ledger = run_suite(suite, tmp_path / "cache", server, concurrency=4, budget=Budget(max_tokens=1))
    calls = server.request_count - before
    axes = list(faithfulness(results).values())
    scored = [a for a in axes if a.status == "scored"]
    budget = [a for a in axes if a.unscored_reason == "budget"]
    print(f"\nbudget 1 token, concurrency 4: {calls} calls made, {len(scored)} scored, unscored {ledger.unscored}")
    assert 1 <= calls <= 4
    assert len({a.judge.cache_key for a in scored}) == calls
    assert len(scored) + len(budget) == len(axes)


PRICED_PIN = "openai/gpt-4o-2024-08-06"  # in litellm's offline cost map


def priced_reply(request: dict[str, Any], n: int) -> Reply:
    return Reply.ok(judge_answer(request), prompt_tokens=1000, completion_tokens=100)


def price_per_call() -> float:
    """What one priced_reply costs by litellm's offline cost map."""
    import litellm

    prices = litellm.model_cost[PRICED_PIN.split("/", 1)[1]]
    return 1000 * prices["input_cost_per_token"] + 100 * prices["output_cost_per_token"]


def test_cost_comes_from_litellms_offline_price_map(tmp_path):
    per_call = price_per_call()
    suite = example_suite(tmp_path / "suite")
    with ScriptedOpenAIServer(priced_reply) as srv:
        override = JudgeOverride(model=PRICED_PIN, api_base=srv.base_url)
        results, ledger = run_suite(suite, tmp_path / "cache", srv, override=override)
    axes = list(faithfulness(results).values())
    print(f"\n{PRICED_PIN}: ${per_call:.6f} per call, ledger {ledger.as_dict()}")
    replies = ledger.calls - sum(ledger.failed_attempts.values())  # an attempt without reply costs nothing known
    assert per_call > 0 and replies == len({a.judge.cache_key for a in axes})
    assert all(a.judge.cost_usd == pytest.approx(per_call) for a in axes)
    assert ledger.cost_usd == pytest.approx(per_call * replies)
    assert ledger.calls_without_cost == sum(ledger.failed_attempts.values())
    assert (ledger.prompt_tokens, ledger.completion_tokens) == (1000 * replies, 100 * replies)


def test_unpriced_model_has_unknown_cost_not_zero(tmp_path, server):
    suite = example_suite(tmp_path / "suite")
    results, ledger = run_suite(suite, tmp_path / "cache", server)  # MODEL is not in the cost map
    assert all(a.judge.cost_usd is None for a in faithfulness(results).values())
    assert ledger.calls_without_cost == ledger.calls > 0 and ledger.cost_usd == 0


def test_cost_budget_stops_judging_cleanly(tmp_path):
    per_call = price_per_call()
    suite = example_suite(tmp_path / "suite")
    with ScriptedOpenAIServer(priced_reply) as srv:
        results, ledger = run_suite(suite, tmp_path / "cache", srv, concurrency=1, budget=Budget(max_cost_usd=2.5 * per_call),
                                    override=JudgeOverride(model=PRICED_PIN, api_base=srv.base_url))
        calls = srv.request_count
    axes = list(faithfulness(results).values())
    budget = [a for a in axes if a.unscored_reason == "budget"]
    assert calls == ledger.calls == 3  # the third call crossed 2.5 calls' worth; nothing after it
    assert len(budget) == len(axes) - 3
    assert all("cost budget spent" in a.error for a in budget)


def test_override_is_recorded_in_provenance(tmp_path, server):
    suite = example_suite(tmp_path / "suite", judge={"model": MODEL, "api_base": server.base_url})
    plain, _ = run_suite(suite, tmp_path / "cache-plain", server, override=JudgeOverride())
    overridden, _ = run_suite(suite, tmp_path / "cache-override", server, override=JudgeOverride(model=MODEL))
    assert all(a.judge.override is False for a in faithfulness(plain).values())
    assert all(a.judge.override is True for a in faithfulness(overridden).values())


def test_override_is_part_of_the_cache_key(tmp_path, server):
    """Regression: an overridden run once hit verdicts cached without the override (override=False)."""
    suite = example_suite(tmp_path / "suite", judge={"model": MODEL, "api_base": server.base_url})
    cache = tmp_path / "cache"
    plain, _ = run_suite(suite, cache, server, override=JudgeOverride())
    before = server.request_count
    overridden, _ = run_suite(suite, cache, server, override=JudgeOverride(model=MODEL))
    keys_plain = {a.judge.cache_key for a in faithfulness(plain).values()}
    keys_override = {a.judge.cache_key for a in faithfulness(overridden).values()}
    assert all(a.judge.override is True for a in faithfulness(overridden).values())
    assert keys_plain.isdisjoint(keys_override)
    assert server.request_count - before == len(keys_override)
