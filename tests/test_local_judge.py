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
