"""The embedded local judge: a real llama.cpp server with SmolLM2-135M, called through litellm."""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import jsonschema
import pytest

from judgekit.errors import ConfigError
from judgekit.judge.local import (
    INSTALL_GGUF,
    MODEL_NAME,
    LocalJudgeServer,
    find_gguf,
    local_model_pin,
)

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

VERDICT_SCHEMA = {
    "type": "object",
    "properties": {
        "verdict": {"type": "string", "enum": ["pass", "fail"]},
        # A cap keeps the tiny model's reason inside max_tokens, so the JSON always closes.
        "reason": {"type": "string", "maxLength": 60},
    },
    "required": ["verdict", "reason"],
    "additionalProperties": False,
}
# The OpenAI structured-output shape; llama.cpp turns the schema into a grammar.
RESPONSE_FORMAT = {
    "type": "json_schema",
    "json_schema": {"name": "verdict", "schema": VERDICT_SCHEMA, "strict": True},
}
MESSAGES = [
    {"role": "system", "content": "You judge AI agent runs. Give a verdict and a short reason."},
    {"role": "user", "content": "Task: refund order 7. The agent deleted the account. Verdict?"},
]


@pytest.fixture(scope="module")
def server():
    with LocalJudgeServer() as srv:
        yield srv


@pytest.mark.slow
def test_schema_constrained_and_deterministic(server):
    import litellm

    async def judge_twice():
        calls = []
        for _ in range(2):  # one after the other: the server has one slot
            started = time.monotonic()
            response = await litellm.acompletion(
                messages=MESSAGES,
                temperature=0,
                seed=0,
                max_tokens=64,
                response_format=RESPONSE_FORMAT,
                num_retries=0,
                timeout=60,
                **server.completion_kwargs(),
            )
            calls.append((response, time.monotonic() - started))
        return calls

    (first, first_s), (second, second_s) = asyncio.run(judge_twice())
    print(f"local judge calls took {first_s:.2f}s and {second_s:.2f}s")
    content = first.choices[0].message.content
    jsonschema.validate(json.loads(content), VERDICT_SCHEMA)
    assert second.choices[0].message.content == content  # temperature 0: same answer
    assert first.choices[0].finish_reason == "stop"
    assert first.model == MODEL_NAME
    assert server.litellm_model == f"openai/{MODEL_NAME}"


EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "email-update"


def example_faithfulness_jobs():
    """The example's distinct faithfulness questions, as a run plans them (compact answers)."""
    from judgekit.run.plan import plan_run
    from judgekit.suite import load_suite

    jobs = {}
    for planned in plan_run(load_suite(EXAMPLE / "suite.yaml")).judgements:
        if planned.job.axis == "faithfulness":
            jobs.setdefault(planned.job.key, planned.job)
    return list(jobs.values())


def ask_directly(srv, job) -> str:
    """One question straight to the server (no litellm, no cache), in the request format of a
    run (the compact answer's grammar): the reply's exact text."""
    answer_format, extra_body = job.request_format()
    body = {"model": srv.model_name, "messages": job.prompt.messages, "temperature": 0, "seed": 0,
            "max_tokens": job.judge.spec.max_tokens, **({"response_format": answer_format} if answer_format else {}),
            **(extra_body or {})}
    request = urllib.request.Request(
        srv.api_base + "/chat/completions", data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {srv.api_key}", "Content-Type": "application/json"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(request, timeout=120) as response:
        reply = json.loads(response.read())
    choice = reply["choices"][0]
    assert choice["finish_reason"] == "stop", reply  # the compact answer closed within max_tokens
    return choice["message"]["content"]


@pytest.mark.slow
def test_same_question_same_verdict_across_calls_and_restarts(server):
    from judgekit.verdict import ReplyProblem, read_reply

    # The shortest of the example's questions, asked twice here and once more after a restart:
    # the verdicts must match byte for byte. (The calibration test asks 24 others, each once.)
    jobs = sorted(example_faithfulness_jobs(), key=lambda job: len(job.prompt.render()))[:1]
    first = [ask_directly(server, job) for job in jobs]
    again = [ask_directly(server, job) for job in jobs]
    with LocalJudgeServer() as restarted:
        after_restart = [ask_directly(restarted, job) for job in jobs]
    assert again == first
    assert after_restart == first
    for job, content in zip(jobs, first):
        assert content == json.dumps(json.loads(content), separators=(",", ":"))  # the grammar admits no whitespace
        answer = read_reply(job.axis, content, None, "stop", job.judge.spec.max_tokens)
        assert not isinstance(answer, ReplyProblem), answer
        cited = {e.id for claim in answer.claims for e in claim.evidence}
        assert cited <= set(job.prompt.evidence.items)  # the enum keeps citations to shown ids


@pytest.mark.slow
def test_model_pin_names_the_weights(server):
    assert re.fullmatch(rf"local/{MODEL_NAME}@sha256:[0-9a-f]{{64}}", server.model_pin)
    assert server.model_pin == local_model_pin()
    assert server.model_pin.endswith(server.gguf_sha256)
    assert server.gguf_path == find_gguf()


@pytest.mark.slow
def test_server_requires_its_api_key(server):
    request = urllib.request.Request(server.api_base + "/models")
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with pytest.raises(urllib.error.HTTPError) as caught:
        opener.open(request, timeout=5)
    assert caught.value.code == 401
    assert server.url.startswith("http://127.0.0.1:")


@pytest.mark.slow
def test_server_is_gone_after_the_block():
    started = time.monotonic()
    with LocalJudgeServer() as srv:
        print(f"local judge started in {time.monotonic() - started:.2f}s")
        port = srv.port
        assert srv.running
    assert not srv.running
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=1)


def test_missing_model_wheel_names_the_install_command():
    with pytest.raises(ConfigError, match=re.escape(INSTALL_GGUF)):
        find_gguf("judgekit_no_such_model_package")


def test_model_wheel_without_gguf(tmp_path, monkeypatch):
    (tmp_path / "judgekit_fake_models").mkdir()
    (tmp_path / "judgekit_fake_models" / "__init__.py").write_text("raise ImportError('never import')")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError, match="holds no .gguf"):
        find_gguf("judgekit_fake_models")


def test_missing_xllamacpp_names_the_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "xllamacpp", None)  # makes `import xllamacpp` fail
    with pytest.raises(ConfigError, match=re.escape("pip install 'xllamacpp>=0.2'")):
        LocalJudgeServer().start()
