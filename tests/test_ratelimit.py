"""One rate per judge endpoint: requests and tokens per minute from the judge settings or
--rpm/--tpm, honoured by the local executor's pacer (shared by every concurrent ask), a 429's
Retry-After pausing every ask to the endpoint, and no cache key, fingerprint or provenance
touched by a rate.

Minutes are compressed: the pacer and the scripted server's limit read the same clock, running
SPEED times faster than the wall, so a run over two of their minutes takes a few seconds."""

from __future__ import annotations

import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # before anything imports litellm

import asyncio
import bisect
import dataclasses
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from judgekit.cli import main as cli_main
from judgekit.errors import ConfigError
from judgekit.judge.backend import LitellmBackend
from judgekit.judge.resolve import JudgeOverride, JudgeResolver
from judgekit.judge.spec import JudgeSpec, RateLimit
from judgekit.run import pace as pace_module
from judgekit.run.ask import direct_connection
from judgekit.run.execute import LocalExecutor
from judgekit.run.jobs import identity_of
from judgekit.run.pace import Endpoint, LocalPacer
from judgekit.run.plan import iter_plans
from judgekit.suite import Budget, load_suite
from judgekit.testing import Reply, RequestsPerMinute, ScriptedOpenAIServer
from test_judge_runner import MODEL, scripted_judge

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "email-update"
SPEED = 30.0  # compressed seconds per wall second


def fast_clock() -> float:
    return time.monotonic() * SPEED


async def fast_sleep(seconds: float) -> None:
    await asyncio.sleep(seconds / SPEED)


def jobs(api_base: str, n: int, rate: RateLimit | None = None) -> list:
    """``n`` distinct questions (the example's first, asked again under its own key) for the
    judge at ``api_base``, its rate set as --rpm/--tpm set it."""
    plan = next(iter_plans(load_suite(EXAMPLE), override=JudgeOverride(MODEL, api_base, None, rate)))
    first = plan.jobs[0]
    return [dataclasses.replace(first, repeat=i) for i in range(n)]


def most_in_a_minute(times: list[float]) -> int:
    """The most of ``times`` (sorted) that fall in any sliding minute."""
    return max(bisect.bisect_left(times, start + 60) - i for i, start in enumerate(times))


def execute(executor: LocalExecutor, questions: list) -> list:
    try:
        return asyncio.run(executor.execute(questions))
    finally:
        executor.close()


def test_four_paced_workers_stay_within_the_providers_limit_and_get_every_verdict():
    limit = RequestsPerMinute(30, clock=fast_clock)
    with ScriptedOpenAIServer(scripted_judge, rate_limit=limit) as server:
        questions = jobs(server.base_url, 60, RateLimit(requests_per_minute=30))
        pacer = LocalPacer(clock=fast_clock, sleep=fast_sleep)
        executor = LocalExecutor(backend=LitellmBackend(), concurrency=4, connect=direct_connection, pacer=pacer)
        verdicts = execute(executor, questions)
        assert [v.status for v in verdicts] == ["scored"] * 60
        arrivals = limit.arrivals
        # Compressed time magnifies latency jitter SPEED-fold (the first calls' client set-up,
        # ~0.2 s, is 6 s of the limit's clock): the first few calls can reach the server
        # bunched, and a 429 or two that follows is waited out by every worker.
        assert server.request_count_by_kind.get("rate_limit", 0) <= 2
        assert most_in_a_minute(arrivals) <= 30 * 1.1
        assert arrivals[-1] - arrivals[0] > 60  # the run spanned more than one minute of the limit
        assert server.max_in_flight <= 4


def test_without_a_rate_the_same_workers_are_refused_by_the_provider():
    """The limit above is what kept the run within the provider's: unpaced, it goes over and gets 429s."""
    limit = RequestsPerMinute(10, clock=fast_clock)
    with ScriptedOpenAIServer(scripted_judge, rate_limit=limit) as server:
        questions = jobs(server.base_url, 12)
        pacer = LocalPacer(clock=fast_clock, sleep=fast_sleep)  # no rate: only the 429s' pauses
        verdicts = execute(LocalExecutor(backend=LitellmBackend(), concurrency=4, connect=direct_connection,
                                         pacer=pacer), questions)
        assert [v.status for v in verdicts] == ["scored"] * 12
        assert server.request_count_by_kind.get("rate_limit", 0) >= 2
        assert most_in_a_minute(limit.arrivals) > 10


def test_a_429_with_retry_after_pauses_every_ask_to_the_endpoint():
    arrivals: list[float] = []

    def script(request: dict[str, Any], n: int) -> Reply:
        arrivals.append(time.monotonic())
        if n == 0:
            return Reply.rate_limit(retry_after_s=1)
        return Reply.ok(scripted_judge(request, n).content, delay_s=0.05)

    with ScriptedOpenAIServer(script) as server:
        executor = LocalExecutor(backend=LitellmBackend(), concurrency=4, connect=direct_connection)
        verdicts = execute(executor, jobs(server.base_url, 8))
    assert [v.status for v in verdicts] == ["scored"] * 8
    assert len(arrivals) == 9  # one retry: the others waited instead of being refused too
    refused_at = arrivals[0]
    # Those already sent when the 429 came (at most the other 3 workers) are answered; nothing
    # more goes to the endpoint until its Retry-After has passed, retries or new questions.
    sent_before = [t for t in arrivals[1:] if t < refused_at + 0.5]
    assert len(sent_before) <= 3
    assert all(t >= refused_at + 0.95 for t in arrivals[1 + len(sent_before):])


def test_tokens_are_reserved_before_a_call_and_settled_after_it():
    now = [0.0]

    async def sleep(seconds: float) -> None:
        now[0] += seconds

    pacer = LocalPacer(clock=lambda: now[0], sleep=sleep)
    endpoint = Endpoint("judge", RateLimit(tokens_per_minute=6000))

    async def calls(reserve: int, used: int, n: int) -> list[float]:
        times = []
        for _ in range(n):
            await pacer.acquire(endpoint, reserve)
            times.append(now[0])
            pacer.settle(endpoint, reserve, used, 0.0)
        return times

    reserved_only = asyncio.run(calls(1000, 1000, 30))
    assert most_in_a_minute(reserved_only) <= 6  # 6000 tokens a minute, 1000 a call
    now[0] += 600  # idle: the bucket refills
    refunded = asyncio.run(calls(1000, 100, 30))
    assert refunded[-1] - refunded[0] < 60  # each reply gave back 900 of its 1000: all 30 fit in a minute
    assert pacer.spent_tokens == 30 * 1000 + 30 * 100


def test_a_call_larger_than_a_burst_still_goes_at_the_buckets_pace():
    now = [0.0]

    async def sleep(seconds: float) -> None:
        now[0] += seconds

    pacer = LocalPacer(clock=lambda: now[0], sleep=sleep)
    endpoint = Endpoint("judge", RateLimit(tokens_per_minute=1000))  # a burst of 50 tokens

    async def two() -> None:
        await pacer.acquire(endpoint, 500)
        await pacer.acquire(endpoint, 500)

    asyncio.run(two())
    assert 55 <= now[0] <= 65  # 1000 tokens at ~1000 a minute


def test_the_budget_is_held_by_the_pacer():
    pacer = LocalPacer(budget=Budget(max_tokens=100))
    pacer.settle(Endpoint("judge"), 0, 99, None)
    assert asyncio.run(pacer.acquire(Endpoint("judge"), 10)) is None
    pacer.settle(Endpoint("judge"), 0, 1, None)
    assert asyncio.run(pacer.acquire(Endpoint("judge"), 10)) == "token budget spent (100 of 100)"
    assert asyncio.run(pacer.acquire(Endpoint("judge"), 10, check_budget=False)) is None  # a retry goes on


# --- the settings -----------------------------------------------------------------------------


def suite_with_rate(tmp_path: Path, rate: dict[str, int] | None) -> Path:
    data = yaml.safe_load((EXAMPLE / "suite.yaml").read_text())
    data["rubrics"] = [str((EXAMPLE / r).resolve()) for r in data["rubrics"]]
    data["lock"] = str((EXAMPLE / data["lock"]).resolve())
    data["trajectories"][0]["file"] = str(EXAMPLE / "trajectories.jsonl")
    data["snapshots"] = {"roots": [str(EXAMPLE)]}
    data["calibration_dir"] = str((EXAMPLE / data["calibration_dir"]).resolve())
    data["judge"] = {"model": MODEL, "api_base": "http://127.0.0.1:9/v1", "invalid_reply_retries": 0,
                     **({"rate": rate} if rate else {})}
    path = tmp_path / "suite.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_the_suites_rate_reaches_the_jobs_and_the_command_line_overrides_it(tmp_path):
    loaded = load_suite(suite_with_rate(tmp_path, {"requests_per_minute": 30, "tokens_per_minute": 9000}))
    job = next(iter_plans(loaded)).jobs[0]
    assert Endpoint.of(job.judge) == Endpoint("http://127.0.0.1:9/v1", RateLimit(requests_per_minute=30,
                                                                               tokens_per_minute=9000))
    overridden = next(iter_plans(loaded, override=JudgeOverride(rate=RateLimit(requests_per_minute=600)))).jobs[0]
    assert overridden.judge.spec.rate == RateLimit(requests_per_minute=600, tokens_per_minute=9000)


def test_rpm_and_tpm_on_the_command_line_reach_the_pacer(tmp_path, monkeypatch):
    seen: list[Endpoint] = []
    acquire = LocalPacer.acquire

    async def spy(self, endpoint, tokens, **kwargs):
        seen.append(endpoint)
        return await acquire(self, endpoint, tokens, **kwargs)

    monkeypatch.setattr(pace_module.LocalPacer, "acquire", spy)
    suite = suite_with_rate(tmp_path, {"requests_per_minute": 30})
    with ScriptedOpenAIServer(scripted_judge) as server:
        result = CliRunner().invoke(cli_main, ["run", str(suite), "--judge-api-base", server.base_url, "--no-cache",
                                               "--rpm", "6000", "--tpm", "9000000", "--format", "jsonl"])
    assert result.exit_code == 0, result.output
    assert seen and {e.rate for e in seen} == {RateLimit(requests_per_minute=6000, tokens_per_minute=9_000_000)}


def test_a_rate_changes_no_key_fingerprint_identity_or_rubric_hash(tmp_path):
    plain = jobs("http://127.0.0.1:9/v1", 1)[0]
    paced = jobs("http://127.0.0.1:9/v1", 1, RateLimit(requests_per_minute=5, tokens_per_minute=7))[0]
    assert paced.judge.spec.rate is not None and plain.judge.spec.rate is None
    assert paced.key == plain.key
    assert paced.fingerprint == plain.fingerprint and plain.fingerprint is not None
    assert identity_of(paced) == identity_of(plain)
    rubric = plain.rubric
    with_rate = rubric.model_copy(update={"judge": JudgeSpec(model=MODEL, rate=RateLimit(requests_per_minute=5))})
    without = rubric.model_copy(update={"judge": JudgeSpec(model=MODEL)})
    assert with_rate.canonical() == without.canonical()
    assert "rate" not in JudgeSpec(model=MODEL).model_dump()  # settings hashed whole hash as before


def test_two_judges_on_one_endpoint_with_different_rates_are_refused():
    resolver = JudgeResolver(override=JudgeOverride(), allow_floating=False)
    resolver.resolve(JudgeSpec(model=MODEL, api_base="http://127.0.0.1:9/v1", rate=RateLimit(requests_per_minute=5)))
    resolver.resolve(JudgeSpec(model=MODEL, api_base="http://127.0.0.1:9/v1", max_tokens=99,
                               rate=RateLimit(requests_per_minute=5)))  # the same rate: fine
    with pytest.raises(ConfigError, match="different rate limits"):
        resolver.resolve(JudgeSpec(model=MODEL, api_base="http://127.0.0.1:9/v1", max_tokens=77))
    resolver.resolve(JudgeSpec(model=MODEL, api_base="http://127.0.0.1:8/v1"))  # another endpoint: its own


def test_a_pacer_passed_in_keeps_the_budget_so_a_second_budget_is_refused():
    with pytest.raises(ConfigError, match="keeps its budget there"):
        LocalExecutor(pacer=LocalPacer(), budget=Budget(max_tokens=10))
