"""Hostile judge replies (issue 11, class 2): anything a judge server may send with HTTP 200.

Every case runs the real CLI (`judgekit run SUITE --no-cache --out run.json`) against the real
scripted OpenAI server on 127.0.0.1, through real litellm. The suite has three trajectories;
one of them (the victim) gets the hostile reply on one axis, every other question gets a valid
answer. Each case states the exact outcome: the victim's axis is `unscored` with the right
reason (never a pass, never a score), or scored with the claim unsupported and its citation
error named; the victim's other axis and the other trajectories are scored as usual; the run
completes (exit 0) and writes its record. A last test sends every hostile reply in one run.
"""

from __future__ import annotations

import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # before anything imports litellm

import json
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from judgekit.cli import main
from judgekit.run.record import read_run
from judgekit.testing import Reply, ScriptedOpenAIServer

ALARM_S = 20
MODEL = "openai/judge-2024-08-06"
RETRIES = 1  # invalid_reply_retries: a reply that does not parse is asked once more
GUIDE = "Every claim must come from a tool result or the context."


# --- the suite -------------------------------------------------------------------------------------


def trajectory(tid: str) -> dict[str, Any]:
    """The agent sent a refund note saying it was approved; the tool answered `denied`."""
    return {
        "id": tid,
        "prompt": f"Refund order 42 [{tid}]",
        "calls": [
            {"tool": "get_order", "args": {"order_id": 42},
             "result": {"order_id": 42, "total": "$500", "fee": "2.5", "status": "delivered"}},
            {"tool": "refund", "args": {"order_id": 42, "note": "Refund of $500 approved"}, "result": "denied"},
        ],
        "output": "Refund of $500 approved",
        "context": {"policy": "Refunds over $100 need the manager's approval & a receipt."},
    }


def write_suite(root: Path, ids: list[str], faithfulness: dict[str, Any] | None = None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    rubric = {
        "id": "refund", "version": "1.0.0", "registered": "2026-01-01",
        "task_success": {"guide": "Pass only when the refund was made.", "judge": True},
        "faithfulness": {"guide": GUIDE, **(faithfulness or {})},
    }
    (root / "rubric.yaml").write_text(yaml.safe_dump(rubric, sort_keys=False))
    (root / "t.jsonl").write_text("".join(json.dumps(trajectory(i)) + "\n" for i in ids))
    suite = {
        "name": "hostile replies",
        "rubrics": ["rubric.yaml"],
        "trajectories": [{"file": "t.jsonl", "rubric": "refund"}],
        "judge": {"model": MODEL, "max_attempts": 1, "invalid_reply_retries": RETRIES, "timeout_s": 10},
    }
    (root / "suite.yaml").write_text(yaml.safe_dump(suite, sort_keys=False))
    return root / "suite.yaml"


GOOD_TASK = {"reasons": ["R1 says the refund was denied"], "verdict": "fail"}
GOOD_CLAIMS = {"claims": [{"claim": "The refund was denied", "supported": True,
                           "evidence": [{"id": "R1", "quote": "denied"}]}]}


def axis_of(request: dict[str, Any]) -> str:
    properties = request["response_format"]["json_schema"]["schema"]["properties"]
    return "task_success" if "verdict" in properties else "faithfulness"


@dataclass
class Judge:
    """Plays ``hostile[tid]`` = (axis, reply) to that trajectory's question on that axis, a valid
    answer to every other question, and counts the questions each (trajectory, axis) got."""

    hostile: dict[str, tuple[str, Reply]]
    calls: Counter = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, request: dict[str, Any], n: int) -> Reply:
        axis = axis_of(request)
        user = request["messages"][1]["content"]
        tid = next((t for t in self.hostile if f"[{t}]" in user), None)
        with self.lock:
            self.calls[(tid, axis)] += 1
        if tid is not None and self.hostile[tid][0] == axis:
            return self.hostile[tid][1]
        return Reply.ok(GOOD_TASK if axis == "task_success" else GOOD_CLAIMS)


def run(suite: Path, judge: Judge) -> tuple[Any, dict[str, Any]]:
    out = suite.parent / "run.json"
    with ScriptedOpenAIServer(judge) as server:
        result = CliRunner().invoke(
            main, ["run", str(suite), "--no-cache", "--judge-api-base", server.base_url, "--out", str(out)]
        )
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    assert result.exit_code == 0, result.output
    assert out.is_file(), "the run record was not written"
    record = read_run(out).model_dump(mode="json")
    return result, {r["trajectory_id"]: r["axes"] for r in record["results"]}


# --- the replies ---------------------------------------------------------------------------------


def completion(message: Any = None, **overrides: Any) -> str:
    """A whole chat-completion body (for Reply.raw), with ``message`` as choices[0].message."""
    body = {
        "id": "chatcmpl-hostile", "object": "chat.completion", "created": 1, "model": "judge-2024-08-06",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": message if message is not None else {"role": "assistant", "content": "{}"}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
    }
    body.update(overrides)
    return json.dumps(body)


def claim(text: str, *evidence: tuple[str, str], supported: bool = True) -> dict[str, Any]:
    return {"claims": [{"claim": text, "supported": supported,
                        "evidence": [{"id": i, "quote": q} for i, q in evidence]}]}


def nested(depth: int, inner: str = "[]") -> str:
    return "[" * depth + inner + "]" * depth


VALID_PASS = {"reasons": ["R1 shows the refund"], "verdict": "pass"}
RAW_SURROGATE_CLAIM = completion({"role": "assistant", "content": json.dumps(
    claim("The refund was denied", ("R1", "denied"))).replace("was denied", "was denied\ud800")})


@dataclass(frozen=True)
class Unscored:
    reason: str
    detail: str  # a part of the unscored record's error
    calls: int | None = None  # questions asked for this verdict, when the reason fixes it


@dataclass(frozen=True)
class Scored:
    score: float
    citation_error: str | None = None  # a part of the first claim's citation error


CASES = [
    # strict parsing: what plain json.loads would accept silently
    pytest.param("task_success", Reply.ok('{"reasons": ["x"], "verdict": "fail", "verdict": "pass"}'),
                 Unscored("parse_failure", "duplicate key 'verdict'", 1 + RETRIES), id="duplicate_verdict_keys"),
    pytest.param("faithfulness", Reply.ok(json.dumps(claim("Refund of $500 approved", supported=False))[:-1]
                                          + ', "claims": []}'),
                 Unscored("parse_failure", "duplicate key 'claims'", 1 + RETRIES), id="duplicated_claims_list"),
    pytest.param("task_success", Reply.ok('{"reasons": [NaN], "verdict": "pass"}'),
                 Unscored("parse_failure", "NaN is not valid JSON", 1 + RETRIES), id="nan"),
    pytest.param("faithfulness", Reply.ok('{"claims": Infinity}'),
                 Unscored("parse_failure", "Infinity is not valid JSON", 1 + RETRIES), id="infinity"),
    pytest.param("task_success", Reply.ok('{"reasons": [1e999], "verdict": "pass"}'),
                 Unscored("parse_failure", "1e999 is too large to represent", 1 + RETRIES), id="number_1e999"),
    pytest.param("faithfulness", Reply.ok('{"claims": ' + nested(100_000) + "}"),
                 Unscored("parse_failure", "nested more than 8 levels deep", 1 + RETRIES), id="nested_100000_deep"),
    pytest.param("faithfulness", Reply.ok('{"claims": [' + nested(50) + "]}"),
                 Unscored("parse_failure", "nested more than 8 levels deep", 1 + RETRIES), id="nested_50_deep"),
    pytest.param("faithfulness", Reply.ok(json.dumps(claim("The refund was denied", ("R1", "denied")))
                                          .replace("was denied", "was denied\\ud800", 1)),
                 Unscored("parse_failure", "lone surrogate", 1 + RETRIES), id="lone_surrogate_escape_in_claim"),
    pytest.param("faithfulness", Reply.raw(RAW_SURROGATE_CLAIM),
                 Unscored("parse_failure", "lone surrogate", 1 + RETRIES), id="lone_surrogate_decoded_by_the_client"),
    pytest.param("faithfulness", Reply.ok('{"claims": [{"claim": "x", "supported": "yes", "evidence": []}]}'),
                 Unscored("parse_failure", "ValidationError", 1 + RETRIES), id="string_for_a_boolean"),
    # malformed HTTP 200 bodies: that verdict's provider_error, never a crash of the run
    pytest.param("faithfulness", Reply.raw(completion(choices=[])),
                 Unscored("provider_error", "holds no choice"), id="choices_empty"),
    pytest.param("task_success", Reply.raw({"hello": "world"}),
                 Unscored("provider_error", "no 'choices'"), id="not_a_chat_completion"),
    pytest.param("faithfulness", Reply.raw(completion({"role": "assistant", "content": 42})),
                 Unscored("provider_error", "Invalid response object"), id="content_is_a_number"),
    pytest.param("task_success", Reply.raw(completion({"role": "assistant", "content": [{"type": "text", "text": "{}"}]})),
                 Unscored("provider_error", "Invalid response object"), id="content_is_a_list"),
    pytest.param("task_success", Reply.raw(completion({"role": "assistant", "content": None, "refusal": 42})),
                 Unscored("provider_error", "its message is not text"), id="refusal_is_a_number"),
    pytest.param("faithfulness", Reply.raw("<html>502 Bad Gateway</html>"),
                 Unscored("provider_error", "Expecting value"), id="body_is_not_json"),
    pytest.param("faithfulness", Reply.raw(nested(100_000)),
                 Unscored("provider_error", "recursion"), id="body_nested_100000_deep"),
    # a reply cut short or filtered is never scored, and not asked again
    pytest.param("task_success", Reply.ok(VALID_PASS, finish_reason="length"),
                 Unscored("truncated", "finish_reason length", 1), id="finish_length_with_a_valid_pass"),
    pytest.param("faithfulness", Reply.ok({"claims": []}, finish_reason="length"),
                 Unscored("truncated", "finish_reason length", 1), id="finish_length_with_no_claims"),
    pytest.param("task_success", Reply.ok(VALID_PASS, finish_reason="content_filter"),
                 Unscored("content_filter", "content_filter", 1), id="content_filter_with_a_valid_pass"),
    pytest.param("faithfulness", Reply.ok(GOOD_CLAIMS, finish_reason="content_filter"),
                 Unscored("content_filter", "content_filter", 1), id="content_filter_with_valid_claims"),
    # citations that prove nothing
    pytest.param("faithfulness", Reply.ok(claim("The order was delivered", ("R0", "d"))),
                 Scored(0.0, "R0: quote 'd' is too short"), id="one_character_quote"),
    pytest.param("faithfulness", Reply.ok(claim("Refund of $500 approved", ("R1", "Refund of $500 approved"))),
                 Scored(0.0, "R1: quote 'Refund of $500 approved' does not occur in it"),
                 id="quote_from_the_agents_own_call_arguments"),
    pytest.param("faithfulness", Reply.ok(claim("Refund of $500 approved", ("A1", "Refund of $500 approved"))),
                 Scored(0.0, "cites 'A1', which is not a tool result or context item"), id="cites_what_the_agent_sent"),
    pytest.param("faithfulness", Reply.ok(claim("Refund of $500 approved", ("O", "Refund of $500 approved"))),
                 Scored(0.0, "cites 'O', which is not a tool result or context item"), id="cites_the_output_itself"),
    pytest.param("faithfulness", Reply.ok(claim("Refund of $500 approved")),
                 Scored(0.0, "no citation"), id="supported_with_no_evidence"),
    pytest.param("faithfulness", Reply.ok(claim("The refund fee is 2.5 dollars", ("R0", "2"))),
                 Scored(0.0, "R0: quote '2' is too short"), id="digit_that_is_part_of_a_longer_number"),
    pytest.param("faithfulness", Reply.ok(claim("The order total is $5000", ("R0", "$500"))),
                 Scored(0.0, "R0: quote '$500' is too short"), id="short_number_the_claim_does_not_state"),
    pytest.param("faithfulness", Reply.ok({"claims": []}),
                 Unscored("no_claims", "listed no claim for an output that is not empty", 1), id="no_claims"),
    # what must still count
    pytest.param("faithfulness", Reply.ok(claim("The order total is $500", ("R0", "$500"))),
                 Scored(1.0), id="short_number_quote_the_claim_states"),
    pytest.param("faithfulness", Reply.ok(claim("The refund was denied", ("R1", "Denied"))),
                 Scored(1.0), id="short_quote_that_is_the_whole_item"),
    pytest.param("faithfulness", Reply.ok(claim("A refund over $100 needs the manager's approval",
                                                ("C0", "the manager's approval \\u0026 a receipt"))),
                 Scored(1.0), id="quote_copied_with_the_escapes_it_was_shown_with"),
    pytest.param("faithfulness", Reply.ok(json.dumps(claim("The refund was denied \ud83d\ude45", ("R1", "denied")))),
                 Scored(1.0), id="surrogate_pair_escape_is_text"),
]


@pytest.mark.parametrize(("axis", "reply", "expected"), CASES)
def test_one_hostile_reply_is_that_verdicts_record(tmp_path, axis, reply, expected):
    judge = Judge({"victim": (axis, reply)})
    _, axes = run(write_suite(tmp_path / "suite", ["victim", "b1", "b2"]), judge)
    check_victim(axes["victim"], axis, expected, judge.calls[("victim", axis)])
    other = "faithfulness" if axis == "task_success" else "task_success"
    check_good(axes["victim"], other)
    for tid in ("b1", "b2"):
        check_good(axes[tid], "task_success")
        check_good(axes[tid], "faithfulness")


def check_victim(axes: dict[str, Any], axis: str, expected: Unscored | Scored, calls: int) -> None:
    record = axes[axis]
    if isinstance(expected, Unscored):
        assert record["status"] == "unscored", record
        assert record["unscored_reason"] == expected.reason, record
        assert expected.detail in record["error"], record["error"]
        assert "Traceback" not in record["error"]
        assert record["score"] is None
        if axis == "task_success":
            assert record["passed"] is None
        else:
            assert record["claims_total"] == record["supported"] == 0
        if expected.calls is not None:
            assert calls == expected.calls
    else:
        assert record["status"] == "scored", record
        assert record["score"] == expected.score
        first = record["claims"][0]
        if expected.citation_error is None:
            assert first["citation_error"] is None and first["supported"] is True
        else:
            assert first["supported"] is False
            assert expected.citation_error in first["citation_error"], first["citation_error"]
            assert record["citation_errors"] == 1


def check_good(axes: dict[str, Any], axis: str) -> None:
    record = axes[axis]
    assert record["status"] == "scored", record
    if axis == "task_success":
        assert record["passed"] is False and record["score"] == 0.0
    else:
        assert record["score"] == 1.0 and record["supported"] == record["claims_total"] == 1


@pytest.mark.parametrize(("allow", "expected"), [
    pytest.param(False, Unscored("no_claims", "faithfulness.allow_no_claims: true", 1), id="not_allowed_is_unscored"),
    pytest.param(True, None, id="allowed_scores_one"),
])
def test_no_claims_is_scored_only_where_the_rubric_allows_it(tmp_path, allow, expected):
    judge = Judge({"victim": ("faithfulness", Reply.ok({"claims": []}))})
    suite = write_suite(tmp_path / "suite", ["victim", "b1"], faithfulness={"allow_no_claims": allow})
    _, axes = run(suite, judge)
    record = axes["victim"]["faithfulness"]
    if expected is None:
        assert record["status"] == "scored" and record["score"] == 1.0 and record["claims_total"] == 0
    else:
        check_victim(axes["victim"], "faithfulness", expected, judge.calls[("victim", "faithfulness")])
    check_good(axes["b1"], "faithfulness")


def test_every_hostile_reply_in_one_run(tmp_path):
    """One run, one victim per case: the run completes, each victim ends as its own case says,
    and the one trajectory that got only valid answers is scored."""
    hostile = {f"case{i}": (case.values[0], case.values[1]) for i, case in enumerate(CASES)}
    judge = Judge(hostile)
    _, axes = run(write_suite(tmp_path / "suite", [*hostile, "good"]), judge)
    for i, case in enumerate(CASES):
        tid = f"case{i}"
        axis, _, expected = case.values
        check_victim(axes[tid], axis, expected, judge.calls[(tid, axis)])
    check_good(axes["good"], "task_success")
    check_good(axes["good"], "faithfulness")


def test_there_are_enough_cases():
    assert len(CASES) >= 18
    print(f"\n{len(CASES)} hostile replies (+2 allow_no_claims, +1 all in one run)")
