"""The compact answer form: a shorter prompt for small models, and for the embedded judge a
grammar that admits no whitespace. The full form's prompts and keys stay as they were."""

from __future__ import annotations

import json
import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from pathlib import Path

import pytest

from judgekit.judge.local import compact_json_grammar
from judgekit.prompt import template_sha256
from judgekit.run.jobs import response_format
from judgekit.run.plan import plan_run
from judgekit.suite import load_suite

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "email-update"


def faithfulness_jobs(answer: str | None = None, model: str = "local"):
    loaded = load_suite(EXAMPLE / "suite.yaml")
    loaded.suite.judge = loaded.suite.judge.model_copy(update={"model": model, "answer": answer})
    return [p.job for p in plan_run(loaded, allow_floating=True).judgements if p.job.axis == "faithfulness"]


def test_compact_prompt_leaves_out_the_task_empty_blocks_and_headings_for_faithfulness():
    full, compact = faithfulness_jobs("full")[0], faithfulness_jobs("compact")[0]
    full_user, compact_user = full.prompt.messages[1]["content"], compact.prompt.messages[1]["content"]
    assert "<<<DATA task " in full_user and "<<<DATA task " not in compact_user  # faithfulness does not read it
    assert "(empty)" in full_user and "(empty)" not in compact_user  # the example has no context
    assert "## Tool calls" in full_user and "## Tool calls" not in compact_user
    for block in ("tool_results", "output"):
        assert f"<<<DATA {block} " in compact_user
    assert compact.prompt.evidence.items == full.prompt.evidence.items  # the same evidence, fewer words
    assert len(compact.prompt.render()) < 0.6 * len(full.prompt.render())
    assert compact.prompt.template_sha256 == template_sha256("compact") != template_sha256("full")
    assert compact.key != full.key


def test_the_embedded_judge_answers_compact_schemas_under_a_whitespace_free_grammar():
    [job, *_] = faithfulness_jobs()  # model: local, answer form by default compact
    assert job.judge.embedded and job.judge.spec.answer_form == "compact"
    answer_format, extra_body = job.request_format()
    assert answer_format is None
    grammar = extra_body["grammar"]
    head, schema = grammar.split("start: %json ", 1)
    assert head == "%llguidance {}\n"
    sent = json.loads(schema)
    assert sent.pop("x-guidance") == {"whitespace_flexible": False}
    assert sent == job.response_schema


def test_other_judges_keep_the_openai_response_format():
    for job in (faithfulness_jobs("compact", "openai/gpt-4o-2024-08-06")[0], faithfulness_jobs("full")[0]):
        answer_format, extra_body = job.request_format()
        assert extra_body is None and answer_format == response_format(job.response_schema)
        assert not job.compact_decoding


def test_the_grammar_is_the_form_llama_cpp_writes_itself():
    xllamacpp = pytest.importorskip("xllamacpp")
    schema = {"type": "object", "properties": {"a": {"type": "boolean"}}, "required": ["a"],
              "additionalProperties": False}
    native = xllamacpp.json_schema_to_grammar(json.dumps(schema))
    ours = compact_json_grammar(schema)
    assert native.split("%json ")[0] == ours.split("%json ")[0]  # llguidance's header, as this build writes it
    assert json.loads(native.split("%json ", 1)[1]) == schema


def test_another_generating_thread_count_is_another_endpoint(monkeypatch):
    # Measured: 1 and 2 generating threads answer the same prompt differently, so a verdict
    # cached under one count must not answer a run under the other.
    [default] = faithfulness_jobs()[:1]
    monkeypatch.setenv("JUDGEKIT_LOCAL_THREADS", "2")
    [two] = faithfulness_jobs()[:1]
    assert default.judge.endpoint == "embedded"
    assert two.judge.endpoint == "embedded (2 generating threads)"
    assert two.key != default.key
    monkeypatch.setenv("JUDGEKIT_LOCAL_THREADS", "1")  # the default, named: the same verdicts
    assert faithfulness_jobs()[0].key == default.key


class CannedBackend:
    """Answers every request with one valid compact answer and no price (litellm's cost map does
    not list the local model); records the requests."""

    def __init__(self):
        self.requests = []

    def prepare(self):
        pass

    def close(self):
        pass

    async def complete(self, request, *, max_attempts=None):
        from judgekit.judge.backend import RawReply

        self.requests.append(request)
        return RawReply(content='{"claims":[]}', refusal=None, reported_model="smollm2-135m-instruct",
                        prompt_tokens=400, completion_tokens=12, cost_usd=None, attempts=1, finish_reason="stop")


def test_embedded_calls_cost_nothing_and_are_sent_with_the_grammar():
    import asyncio

    from judgekit.judge.target import Connection
    from judgekit.run.judging import JudgeRunner

    backend = CannedBackend()
    jobs = faithfulness_jobs()[:2]
    runner = JudgeRunner(backend=backend, connect=lambda target: Connection("http://127.0.0.1:9/v1", "k"))
    verdicts = asyncio.run(runner.run(jobs))
    assert [v.status for v in verdicts] == ["scored", "scored"]
    assert runner.ledger.calls == 2 and runner.ledger.cost_usd == 0.0 and runner.ledger.calls_without_cost == 0
    assert all(v.provenance.cost_usd == 0.0 for v in verdicts)
    assert all(r.response_format is None and r.extra_body["grammar"].startswith("%llguidance") for r in backend.requests)
