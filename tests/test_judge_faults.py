"""A judge that misbehaves: every fault kind, mixed, against a real HTTP server.

30% of judge replies are faulty. Which reply a request gets is decided by a hash of its
messages, so concurrency and retries do not change it: a retry re-sends the same messages and
gets the same fault (the persistent case). A second script fails each request only the first
time it is seen (the transient case). Every trajectory x axis must end with a verdict or an
unscored record with the right reason, and no faulty reply may ever become a pass or a
supported claim.
"""

from __future__ import annotations

import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # before anything imports litellm

import asyncio
import hashlib
import json
import shutil
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from judgekit._util.io import canonical_json
from judgekit.judge.backend import LitellmBackend
from judgekit.judge.resolve import JudgeOverride
from judgekit.run import LocalPacer, RunOptions, run_suite
from judgekit.run.plan import plan_run
from judgekit.suite import load_suite
from judgekit.testing import Reply, ScriptedOpenAIServer

DATA = Path(__file__).resolve().parent / "data" / "judge"
MODEL = "openai/judge-2024-08-06"
TRAJECTORIES = 30  # x 2 judged axes = 60 jobs
FAULT_RATE = 0.3
RETRY_AFTER_S = 45  # no backoff of ours reaches 45 s (and it is under MAX_RETRY_AFTER_S), so a 45 s sleep is Retry-After
# A good reply must never time out, even when a loaded machine starves the in-process server of
# the GIL for a second or two: only the slow fault, which answers long after, may time out.
TIMEOUT_S = 3.0
SLOW_S = 6.0
MAX_ATTEMPTS = 3
INVALID_REPLY_RETRIES = 2

PARSE_KINDS = ("malformed", "prose", "wrong_types", "missing_fields")
TRANSPORT_KINDS = ("rate_limit", "server_error", "drop", "slow")
FAULT_KINDS = (*PARSE_KINDS, "refusal", *TRANSPORT_KINDS)
REASON = {
    **{kind: "parse_failure" for kind in PARSE_KINDS},
    "refusal": "refusal",
    "rate_limit": "provider_error",
    "server_error": "provider_error",
    "drop": "provider_error",
    "slow": "timeout",
}
DETAIL = {
    "parse_failure": ("JSONDecodeError", "ValidationError"),
    "refusal": ("can't help",),
    "provider_error": ("RateLimitError", "InternalServerError", "APIConnectionError", "ServiceUnavailableError"),
    "timeout": ("Timeout",),
}
# Calls per job when every call of it faults (persistent) and when only the first does.
PERSISTENT_CALLS = {
    **{kind: 1 + INVALID_REPLY_RETRIES for kind in PARSE_KINDS},
    "refusal": 1,
    **{kind: MAX_ATTEMPTS for kind in TRANSPORT_KINDS},
}
TRANSIENT_CALLS = {**{kind: 2 for kind in FAULT_KINDS}, "refusal": 1}


# --- the suite ---------------------------------------------------------------------------------


def trajectory(i: int) -> dict[str, Any]:
    return {
        "id": f"t{i:02d}",
        "prompt": f"Move user {i} to the pro plan.",
        "calls": [
            {"tool": "get_user", "args": {"user_id": i}, "result": {"id": i, "plan": "free", "seats": i % 7}},
            {"tool": "update_user", "args": {"user_id": i, "plan": "pro"}, "result": {"id": i, "plan": "pro"}},
        ],
        "output": f"User {i} is now on the pro plan with {i % 7} seats.",
        "world": {
            "before": {"json": {"users": [{"id": i, "plan": "free"}]}},
            "after": {"json": {"users": [{"id": i, "plan": "pro"}]}},
            "keys": {"/users": "id"},
        },
    }


def write_suite(root: Path, judge: dict[str, Any], count: int = TRAJECTORIES) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy(DATA / "rubric-judged.yaml", root / "rubric.yaml")
    with (root / "trajectories.jsonl").open("w") as handle:
        for i in range(count):
            handle.write(json.dumps(trajectory(i)) + "\n")
    suite = {
        "name": "judge faults",
        "rubrics": ["rubric.yaml"],
        "trajectories": [{"file": "trajectories.jsonl", "rubric": "judged"}],
        "judge": judge,
    }
    (root / "suite.yaml").write_text(yaml.safe_dump(suite, sort_keys=False))
    return root / "suite.yaml"


JUDGE = {
    "model": MODEL,
    "timeout_s": TIMEOUT_S,
    "max_attempts": MAX_ATTEMPTS,
    "invalid_reply_retries": INVALID_REPLY_RETRIES,
}


def messages_hash(messages: list[dict[str, Any]]) -> str:
    return hashlib.sha256(canonical_json(messages).encode()).hexdigest()


def expected_jobs(suite: Path) -> dict[tuple[str, str], str]:
    """(trajectory id, axis) -> hash of the messages the judge will receive."""
    plan = plan_run(load_suite(suite), override=JudgeOverride(api_base="http://127.0.0.1:9/v1"))
    return {(plan.items[j.item].trajectory_id, j.axis): messages_hash(j.job.prompt.messages) for j in plan.judgements}


# --- the misbehaving judge ---------------------------------------------------------------------


def fault_for(digest: str, salt: int) -> str | None:
    """The fault of a request, from its content alone (None: a good reply)."""
    h = hashlib.sha256(f"{salt}:{digest}".encode()).digest()
    if int.from_bytes(h[:4], "big") / 2**32 >= FAULT_RATE:
        return None
    return FAULT_KINDS[int.from_bytes(h[4:8], "big") % len(FAULT_KINDS)]


def pick_salt(digests: list[str]) -> int:
    """The first salt whose faults cover every kind at about the fault rate (deterministic)."""
    for salt in range(10_000):
        kinds = [fault_for(d, salt) for d in digests]
        faulty = [k for k in kinds if k is not None]
        if set(faulty) == set(FAULT_KINDS) and abs(len(faulty) / len(digests) - FAULT_RATE) <= 0.025:
            return salt
    raise AssertionError("no salt covers every fault kind")


def is_task_success(request: dict[str, Any]) -> bool:
    return "verdict" in request["response_format"]["json_schema"]["schema"]["properties"]


def first_result_quote(request: dict[str, Any]) -> str:
    """A quote that really occurs in R0, so a supported claim from a fault would verify."""
    for line in request["messages"][1]["content"].splitlines():
        if line.startswith("R0 = "):
            return json.loads(line[len("R0 = "):])[:20]
    raise AssertionError("no R0 in the prompt")


def good_reply(request: dict[str, Any]) -> Reply:
    """The only valid answer the judge ever gives: fail, or nothing supported."""
    if is_task_success(request):
        return Reply.ok({"reasons": ["D0 does not show what the task asked"], "verdict": "fail"})
    return Reply.ok({"claims": [{"claim": "the user is on the pro plan", "supported": False, "evidence": []}]})


def faulty_reply(kind: str, request: dict[str, Any]) -> Reply:
    """Each fault carries a passing verdict or a supported, correctly cited claim."""
    if is_task_success(request):
        winning = {"reasons": ["D0 shows it"], "verdict": "pass"}
        wrong_types = {"reasons": "D0 shows it", "verdict": True}
        missing = {"verdict": "pass"}
    else:
        cite = [{"id": "R0", "quote": first_result_quote(request)}]
        winning = {"claims": [{"claim": "the user is on the pro plan", "supported": True, "evidence": cite}]}
        wrong_types = {"claims": {"claim": "the user is on the pro plan", "supported": True, "evidence": cite}}
        missing = {"claims": [{"claim": "the user is on the pro plan", "supported": True}]}
    text = json.dumps(winning)
    return {
        "malformed": lambda: Reply.malformed(text[:-9]),
        "prose": lambda: Reply.prose(text),
        "wrong_types": lambda: Reply.wrong_types(wrong_types),
        "missing_fields": lambda: Reply.missing_fields(missing),
        "refusal": lambda: Reply.refusal(),
        "rate_limit": lambda: Reply.rate_limit(retry_after_s=RETRY_AFTER_S),
        "server_error": lambda: Reply.server_error(500),
        "slow": lambda: Reply.slow(text, delay_s=SLOW_S),
        "drop": lambda: Reply.drop(),
    }[kind]()


class FaultyJudge:
    """The server's script: persistent faults, or faults on the first sight of a request only."""

    def __init__(self, salt: int, *, transient: bool):
        self.salt = salt
        self.transient = transient
        self.seen: Counter[str] = Counter()
        self.lock = threading.Lock()

    def __call__(self, request: dict[str, Any], n: int) -> Reply:
        digest = messages_hash(request["messages"])
        with self.lock:
            self.seen[digest] += 1
            first = self.seen[digest] == 1
        kind = fault_for(digest, self.salt)
        if kind is None or (self.transient and not first):
            return good_reply(request)
        return faulty_reply(kind, request)


class RecordingSleep:
    def __init__(self):
        self.calls: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)
        await asyncio.sleep(0)


class RecordingPacer(LocalPacer):
    """The run's pacer on a virtual clock that each of its sleeps moves on: the endpoint pauses
    a 429's Retry-After asks for are recorded (``pauses``), and waited out without waiting."""

    def __init__(self):
        self.now = 0.0
        self.pauses: list[float] = []
        super().__init__(clock=lambda: self.now, sleep=self._sleep)

    async def _sleep(self, seconds: float) -> None:
        self.now += seconds
        await asyncio.sleep(0)

    def slow_down(self, endpoint, retry_after_s: float) -> None:
        self.pauses.append(retry_after_s)
        super().slow_down(endpoint, retry_after_s)


@pytest.fixture(scope="module")
def warm_litellm():
    """Pay litellm's lazy imports on a first call here, not inside a 1-second judge timeout."""
    from judgekit.judge.backend import CallRequest

    with ScriptedOpenAIServer(Reply.ok("{}")) as srv:
        request = CallRequest(model=MODEL, messages=[{"role": "user", "content": "warm up"}], response_format=None,
                              temperature=0, seed=0, max_tokens=5, timeout_s=60, api_base=srv.base_url, api_key="x")
        asyncio.run(LitellmBackend().complete(request, max_attempts=1))


# --- the runs ----------------------------------------------------------------------------------


def run_with_faults(tmp_path: Path, *, transient: bool):
    suite = write_suite(tmp_path / "suite", JUDGE)
    jobs = expected_jobs(suite)
    assert len(set(jobs.values())) == len(jobs) == 2 * TRAJECTORIES  # no two jobs share a call
    salt = pick_salt(sorted(jobs.values()))
    kinds = {job: fault_for(digest, salt) for job, digest in jobs.items()}
    sleep = RecordingSleep()
    pacer = RecordingPacer()
    script = FaultyJudge(salt, transient=transient)
    with ScriptedOpenAIServer(script) as server:
        started = time.monotonic()
        record = run_suite(
            load_suite(suite),
            options=RunOptions(
                override=JudgeOverride(api_base=server.base_url),
                cache_dir=tmp_path / "cache",
                backend=LitellmBackend(sleep=sleep),
                pacer=pacer,
            ),
        )
        results, ledger = record.results, record.ledger
        wall = time.monotonic() - started
        per_hash = Counter(messages_hash(r["messages"]) for r in server.requests)
        by_kind = server.request_count_by_kind
    return jobs, kinds, results, ledger, per_hash, by_kind, sleep, pacer, wall


def axis_results(results) -> dict[tuple[str, str], Any]:
    return {(r.trajectory_id, axis): r.axes[axis] for r in results for axis in ("task_success", "faithfulness")}


def assert_no_fault_became_a_verdict(axes: dict[tuple[str, str], Any]) -> None:
    for (tid, axis), result in axes.items():
        if axis == "task_success":
            assert result.passed in (False, None), (tid, axis)
            assert not any(c.passed for c in result.checks if c.source == "judge"), (tid, axis)
        else:
            assert result.supported == 0 and not any(c.supported for c in result.claims), (tid, axis)


def test_persistent_faults_end_unscored_with_the_right_reason(tmp_path, warm_litellm):
    jobs, kinds, results, ledger, per_hash, by_kind, sleep, pacer, wall = run_with_faults(tmp_path, transient=False)
    axes = axis_results(results)
    assert set(axes) == set(jobs)  # the run finished with a record for every trajectory x axis

    expected_reasons = Counter(REASON[k] for k in kinds.values() if k is not None)
    fault_counts = Counter(k for k in kinds.values() if k is not None)
    print(f"\npersistent faults: {len(jobs)} jobs, {sum(fault_counts.values())} faulty "
          f"({dict(sorted(fault_counts.items()))}); run {wall:.2f}s; requests {sum(per_hash.values())} "
          f"by kind {dict(sorted(by_kind.items()))}; unscored {ledger.unscored}; "
          f"scored {sum(a.status == 'scored' for a in axes.values())}")

    for job, kind in kinds.items():
        result = axes[job]
        digest = jobs[job]
        if kind is None:
            assert result.status == "scored", (job, result.error)
            assert per_hash[digest] == 1, job
            assert result.judge.attempts == 1, (job, result.judge, ledger.failed_attempts)
            continue
        reason = REASON[kind]
        assert result.status == "unscored", (job, kind)
        assert result.unscored_reason == reason, (job, kind, result.unscored_reason, result.error)
        assert any(word in (result.error or "") for word in DETAIL[reason]), (job, kind, result.error)
        assert result.score is None
        assert per_hash[digest] == PERSISTENT_CALLS[kind], (job, kind)  # bounded retries, no more
        assert result.judge.attempts == PERSISTENT_CALLS[kind], (job, kind)
    assert ledger.unscored == dict(expected_reasons)
    assert sum(per_hash.values()) == ledger.calls
    # Every attempt without a reply is counted, by why; MODEL is unpriced, so no call has a known cost.
    no_reply = Counter()
    for kind in (k for k in kinds.values() if k in TRANSPORT_KINDS):
        no_reply[REASON[kind]] += MAX_ATTEMPTS
    assert ledger.failed_attempts == dict(no_reply)
    assert ledger.calls_without_cost == ledger.calls and ledger.cost_usd == 0
    assert_no_fault_became_a_verdict(axes)

    # Retry-After was honoured: each 429 paused the endpoint for exactly its Retry-After, for
    # every ask to it (the last attempt's too: the provider asked every caller to wait); no call
    # slept it out alone.
    rate_limited = sum(k == "rate_limit" for k in kinds.values())
    assert pacer.pauses == [float(RETRY_AFTER_S)] * (rate_limited * MAX_ATTEMPTS)
    assert RETRY_AFTER_S not in sleep.calls
    transport = sum(k in ("server_error", "drop", "slow") for k in kinds.values())
    assert len(sleep.calls) == transport * (MAX_ATTEMPTS - 1)
    assert all(0 <= s <= 1.0 for s in sleep.calls)  # backoff: full jitter under 0.5 * 2**(attempt-1)
    # The run never waited out a real Retry-After (two in a row: 90 s; the injected sleep did not sleep).
    assert wall < RETRY_AFTER_S * 2


def test_transient_faults_that_succeed_on_retry_end_scored(tmp_path, warm_litellm):
    jobs, kinds, results, ledger, per_hash, by_kind, sleep, pacer, wall = run_with_faults(tmp_path, transient=True)
    axes = axis_results(results)
    assert set(axes) == set(jobs)
    fault_counts = Counter(k for k in kinds.values() if k is not None)
    print(f"\ntransient faults: {len(jobs)} jobs, {sum(fault_counts.values())} faulty once; run {wall:.2f}s; "
          f"requests {sum(per_hash.values())}; unscored {ledger.unscored}; "
          f"scored {sum(a.status == 'scored' for a in axes.values())}")
    for job, kind in kinds.items():
        result = axes[job]
        expected_calls = 1 if kind is None else TRANSIENT_CALLS[kind]
        assert per_hash[jobs[job]] == expected_calls, (job, kind)
        if kind == "refusal":  # a refusal is an answer, not a transient fault: never retried
            assert result.status == "unscored" and result.unscored_reason == "refusal", job
        else:
            assert result.status == "scored", (job, kind, result.error)
            assert result.judge.attempts == expected_calls, (job, kind)
    assert ledger.unscored == ({"refusal": fault_counts["refusal"]} if fault_counts["refusal"] else {})
    retried = Counter(REASON[k] for k in kinds.values() if k in TRANSPORT_KINDS)
    assert ledger.failed_attempts == dict(retried)  # one failed attempt before each transport fault's reply
    assert ledger.calls == sum(per_hash.values()) == ledger.calls_without_cost
    assert pacer.pauses == [float(RETRY_AFTER_S)] * fault_counts["rate_limit"]
    assert_no_fault_became_a_verdict(axes)


@pytest.mark.parametrize("supported", ["true", "yes", 1], ids=["str_true", "str_yes", "int_1"])
def test_wrongly_typed_supported_flag_is_a_parse_failure(tmp_path, warm_litellm, supported):
    """Regression: pydantic's lax mode once coerced these to True, making a supported claim."""
    suite = write_suite(tmp_path / "suite", JUDGE, count=1)

    def judge(request: dict[str, Any], n: int) -> Reply:
        if is_task_success(request):
            return good_reply(request)
        cite = [{"id": "R0", "quote": first_result_quote(request)}]
        return Reply.wrong_types({"claims": [{"claim": "the user is on pro", "supported": supported, "evidence": cite}]})

    with ScriptedOpenAIServer(judge) as server:
        results = run_suite(load_suite(suite), options=RunOptions(
            override=JudgeOverride(api_base=server.base_url), cache_dir=tmp_path / "cache",
            backend=LitellmBackend(sleep=RecordingSleep()))).results
    faithfulness = results[0].axes["faithfulness"]
    assert faithfulness.supported == 0
    assert faithfulness.status == "unscored" and faithfulness.unscored_reason == "parse_failure"


def test_retry_after_is_honoured_by_the_backend(warm_litellm):
    """The backend alone: a 429 with Retry-After: 3, then an answer; it sleeps exactly 3 s (injected)."""
    from judgekit.judge.backend import CallRequest

    sleep = RecordingSleep()
    with ScriptedOpenAIServer([Reply.rate_limit(retry_after_s=3), Reply.rate_limit(retry_after_s=1),
                               Reply.ok({"verdict": "fail", "reasons": []})]) as server:
        request = CallRequest(model=MODEL, messages=[{"role": "user", "content": "x"}], response_format=None,
                              temperature=0, seed=0, max_tokens=5, timeout_s=5, api_base=server.base_url, api_key="x")
        reply = asyncio.run(LitellmBackend(sleep=sleep).complete(request, max_attempts=3))
        assert server.request_count == 3
    assert reply.attempts == 3
    assert sleep.calls == [3.0, 1.0]


def test_stack_is_clean_after_faults():
    """No scripted-server thread outlives its run (drops and slow replies included)."""
    names = [t.name for t in threading.enumerate() if t.name.startswith("judgekit-scripted")]
    assert names == []

