"""The scripted OpenAI server, driven by real litellm and by raw HTTP."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import socket
import threading
import time

import httpx
import pytest

from judgekit.testing.main import main as serve_main
from judgekit.testing import Reply, ScriptedOpenAIServer, ScriptSpec

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

MESSAGES = [{"role": "user", "content": "Did the agent book the flight?"}]
VERDICT = {"verdict": "pass", "reason": "the booking exists"}


@pytest.fixture(scope="module")
def litellm():
    import litellm

    litellm.suppress_debug_info = True  # no "Give Feedback" banner on every error
    return litellm


def acompletion(litellm, server, **kwargs):
    kwargs.setdefault("timeout", 5)
    return litellm.acompletion(
        model="openai/test-model",
        api_base=server.base_url,
        api_key="x",
        messages=MESSAGES,
        temperature=0,
        num_retries=0,
        **kwargs,
    )


def complete(litellm, server, **kwargs):
    return asyncio.run(acompletion(litellm, server, **kwargs))


def post(server, client=None, **body):
    payload = {"model": "test-model", "messages": MESSAGES, **body}
    return (client or httpx).post(server.base_url + "/chat/completions", json=payload, timeout=5)


# --- through litellm -------------------------------------------------------------------------


def test_ok_reply_is_parsed_by_litellm(litellm):
    with ScriptedOpenAIServer(Reply.ok(VERDICT)) as server:
        response = complete(litellm, server)
    assert json.loads(response.choices[0].message.content) == VERDICT
    assert response.choices[0].finish_reason == "stop"
    assert response.model == "test-model"  # echoes the requested model
    assert response.id.startswith("chatcmpl-")
    usage = response.usage
    assert usage.prompt_tokens > 0 and usage.completion_tokens > 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens


def test_reported_model_can_differ_from_the_requested_one(litellm):
    with ScriptedOpenAIServer(Reply.ok("{}", model="gpt-4o-2024-08-06")) as server:
        assert complete(litellm, server).model == "gpt-4o-2024-08-06"


def test_refusal_has_null_content_and_a_refusal(litellm):
    with ScriptedOpenAIServer(Reply.refusal()) as server:
        message = complete(litellm, server).choices[0].message
    assert message.content is None
    assert message.refusal == "I can't help with that"


def test_rate_limit_reaches_litellm_with_retry_after(litellm):
    with ScriptedOpenAIServer(Reply.rate_limit(retry_after_s=7)) as server:
        with pytest.raises(litellm.RateLimitError) as caught:
            complete(litellm, server)
        assert server.request_count == 1  # num_retries=0: exactly one attempt
    assert caught.value.response.headers["retry-after"] == "7"


@pytest.mark.parametrize(
    ("status", "error"),
    [
        pytest.param(500, "InternalServerError", id="500_internal"),
        pytest.param(503, "ServiceUnavailableError", id="503_unavailable"),
    ],
)
def test_server_errors_map_to_litellm_errors(litellm, status, error):
    with ScriptedOpenAIServer(Reply.server_error(status)) as server:
        with pytest.raises(getattr(litellm, error)):
            complete(litellm, server)


def test_dropped_connection_is_a_connection_error_in_litellm(litellm):
    with ScriptedOpenAIServer(Reply.drop()) as server:
        # litellm reports the openai SDK's APIConnectionError as InternalServerError.
        expected = (litellm.APIConnectionError, litellm.InternalServerError)
        with pytest.raises(expected, match="Connection"):
            complete(litellm, server)
        assert server.request_count_by_kind == {"drop": 1}


def test_slow_reply_triggers_the_client_timeout(litellm):
    with ScriptedOpenAIServer(Reply.slow(VERDICT, delay_s=30)) as server:
        started = time.monotonic()
        with pytest.raises(litellm.Timeout):
            complete(litellm, server, timeout=0.5)
        assert time.monotonic() - started < 3
        stopping = time.monotonic()
    assert time.monotonic() - stopping < 2  # stop() does not wait out the 30 s delay


def test_request_parameters_arrive_intact(litellm):
    schema = {
        "type": "object",
        "properties": {"verdict": {"enum": ["pass", "fail"]}, "reason": {"type": "string"}},
        "required": ["verdict", "reason"],
        "additionalProperties": False,
    }
    response_format = {
        "type": "json_schema",
        "json_schema": {"name": "verdict", "schema": schema, "strict": True},
    }
    with ScriptedOpenAIServer(Reply.ok(VERDICT)) as server:
        complete(litellm, server, response_format=response_format, seed=7, max_tokens=64)
        (request,) = server.requests
    assert request["response_format"] == response_format
    assert request["temperature"] == 0
    assert request["seed"] == 7
    assert request["model"] == "test-model"
    assert request["messages"] == MESSAGES


def test_32_concurrent_requests_are_not_queued(litellm):
    """The server holds every reply until 32 requests are in flight at once, so none is answered
    unless all 32 are handled concurrently. Were they queued (by the server, or by litellm's
    client), 32 would never be in flight and the wait would fail: its generous limit only ends a
    broken run, it is no speed target (those are in benchmarks/)."""

    async def burst(server):
        server.hold()
        calls = [asyncio.ensure_future(acompletion(litellm, server, timeout=120)) for _ in range(32)]
        try:
            all_in_flight = await asyncio.to_thread(server.wait_for_in_flight, 32, 60)
        finally:
            server.release()
        return all_in_flight, await asyncio.gather(*calls)

    with ScriptedOpenAIServer(Reply.ok(VERDICT)) as server:
        all_in_flight, responses = asyncio.run(burst(server))
        assert all_in_flight, f"only {server.max_in_flight} of 32 requests were ever in flight at once"
        assert server.max_in_flight == 32
        assert server.request_count == 32
    assert all(json.loads(r.choices[0].message.content) == VERDICT for r in responses)


def test_held_replies_wait_for_release():
    with ScriptedOpenAIServer(Reply.ok(VERDICT)) as server, concurrent.futures.ThreadPoolExecutor(1) as pool:
        server.hold()
        answered = pool.submit(post, server)
        assert server.wait_for_in_flight(1, 60)
        assert not answered.done() and server.in_flight == 1 and server.request_count == 1
        server.release()
        assert json.loads(answered.result(timeout=60).json()["choices"][0]["message"]["content"]) == VERDICT


def test_stop_drops_held_replies():
    with ScriptedOpenAIServer(Reply.ok(VERDICT)) as server, concurrent.futures.ThreadPoolExecutor(1) as pool:
        server.hold()
        dropped = pool.submit(post, server)
        assert server.wait_for_in_flight(1, 60)
        server.stop()  # releases what it holds, answering nothing
        with pytest.raises(httpx.TransportError):
            dropped.result(timeout=60)
        assert server.request_count_by_kind == {"ok": 1}


def test_function_script_decides_on_request_content_not_order(litellm):
    def script(request, n):
        text = request["messages"][-1]["content"]
        return Reply.server_error() if "fail me" in text else Reply.ok({"echo": text}, delay_s=0.05)

    async def run(server):
        prompts = [f"case {i}" + (" fail me" if i % 3 == 0 else "") for i in range(12)]
        calls = [
            litellm.acompletion(
                model="openai/test-model", api_base=server.base_url, api_key="x",
                messages=[{"role": "user", "content": p}], num_retries=0, timeout=5,
            )
            for p in prompts
        ]  # fmt: skip
        return prompts, await asyncio.gather(*calls, return_exceptions=True)

    with ScriptedOpenAIServer(script) as server:
        prompts, results = asyncio.run(run(server))
        assert server.request_count_by_kind == {"ok": 8, "server_error": 4}
    for prompt, result in zip(prompts, results, strict=True):
        if "fail me" in prompt:
            assert isinstance(result, litellm.InternalServerError)
        else:
            assert json.loads(result.choices[0].message.content) == {"echo": prompt}


# --- raw HTTP --------------------------------------------------------------------------------


def test_rate_limit_over_raw_http():
    with ScriptedOpenAIServer(Reply.rate_limit(retry_after_s=2)) as server:
        response = post(server)
    assert response.status_code == 429
    assert response.headers["Retry-After"] == "2"
    assert response.json()["error"]["code"] == "rate_limit_exceeded"


@pytest.mark.parametrize("status", [500, 503])
def test_server_error_over_raw_http(status):
    with ScriptedOpenAIServer(Reply.server_error(status)) as server:
        response = post(server)
    assert response.status_code == status
    assert response.json()["error"]["type"] == "server_error"


def test_drop_over_raw_http():
    with ScriptedOpenAIServer(Reply.drop()) as server:
        with pytest.raises(httpx.RemoteProtocolError):
            post(server)


def test_slow_over_raw_http():
    with ScriptedOpenAIServer(Reply.slow("{}", delay_s=10)) as server:
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(server.base_url + "/chat/completions", json={"messages": []}, timeout=0.3)


@pytest.mark.parametrize(
    ("reply", "content"),
    [
        pytest.param(Reply.malformed(), '{"verdict": "pass", "reason": "unterminated', id="malformed"),
        pytest.param(Reply.wrong_types({"verdict": 1}), '{"verdict": 1}', id="wrong_types"),
        pytest.param(Reply.missing_fields({}), "{}", id="missing_fields"),
    ],
)
def test_content_kinds_send_the_scripted_text(reply, content):
    with ScriptedOpenAIServer(reply) as server:
        assert post(server).json()["choices"][0]["message"]["content"] == content


def test_prose_wraps_the_json():
    with ScriptedOpenAIServer(Reply.prose(VERDICT)) as server:
        text = post(server).json()["choices"][0]["message"]["content"]
    assert text.startswith("Sure! Here is")
    assert json.dumps(VERDICT) in text


def test_counts_per_kind_and_exhausted_list():
    script = [Reply.ok("{}"), Reply.rate_limit(), Reply.ok("{}"), Reply.server_error()]
    with ScriptedOpenAIServer(script) as server, httpx.Client() as client:
        assert server.request_count == 0
        statuses = [post(server, client).status_code for _ in range(5)]
        assert server.request_count == 5
        by_kind = {"ok": 2, "rate_limit": 1, "server_error": 1, "script_error": 1}
        assert server.request_count_by_kind == by_kind
        (error,) = server.script_errors
        assert error.endswith("script exhausted: request #5 but only 4 replies")
        server.reset()
        assert server.request_count == 0 and server.requests == []
    assert statuses == [200, 429, 200, 500, 500]


def test_zero_requests_reach_the_server_when_nothing_calls_it():
    with ScriptedOpenAIServer(Reply.ok("{}")) as server:
        httpx.get(server.base_url + "/models")  # listing models is not a chat request
        assert server.request_count == 0
        assert server.requests == []


def test_models_listing():
    with ScriptedOpenAIServer(Reply.ok("{}"), models=["a", "b"]) as server:
        data = httpx.get(server.base_url + "/models").json()
    assert [m["id"] for m in data["data"]] == ["a", "b"]


def test_keep_alive_serves_several_requests_on_one_connection():
    body = json.dumps({"model": "m", "messages": []}).encode()
    request = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n" % len(body) + body
    )
    with ScriptedOpenAIServer(Reply.ok("{}")) as server:
        sock = socket.create_connection(("127.0.0.1", server.port))
        stream = sock.makefile("rb")
        for _ in range(3):
            sock.sendall(request)
            assert stream.readline().startswith(b"HTTP/1.1 200")
            headers = {}
            while (line := stream.readline()) != b"\r\n":
                name, _, value = line.decode().partition(":")
                headers[name.lower()] = value.strip()
            assert headers["connection"] == "keep-alive"
            answer = json.loads(stream.read(int(headers["content-length"])))
            assert answer["object"] == "chat.completion"
        stream.close()
        sock.close()


def test_stop_closes_connections_and_joins_threads():
    server = ScriptedOpenAIServer(Reply.slow("{}", delay_s=30)).start()
    port = server.port
    idle = httpx.Client()
    idle.get(server.base_url + "/models")  # leaves an idle keep-alive connection open
    outcome = []

    def wait_for_reply():
        try:
            outcome.append(post(server))
        except httpx.HTTPError as exc:
            outcome.append(exc)

    waiting = threading.Thread(target=wait_for_reply)
    waiting.start()
    while server.request_count == 0:
        time.sleep(0.01)
    started = time.monotonic()
    server.stop()
    assert time.monotonic() - started < 2
    waiting.join(5)
    idle.close()
    assert isinstance(outcome[0], httpx.RemoteProtocolError)  # dropped, not answered
    assert not [t for t in threading.enumerate() if t.name.startswith("judgekit-scripted")]
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=1)
    server.stop()  # idempotent


@pytest.mark.parametrize(
    "fields",
    [
        pytest.param({"kind": "ok"}, id="ok_needs_content"),
        pytest.param({"kind": "slow", "content": "{}"}, id="slow_needs_delay"),
        pytest.param({"kind": "drop", "content": "{}"}, id="drop_takes_no_content"),
        pytest.param({"kind": "ok", "content": "{}", "status": 503}, id="status_only_for_server_error"),
        pytest.param({"kind": "server_error", "status": 404}, id="server_error_is_5xx"),
        pytest.param({"kind": "ok", "content": "{}", "retry_after_s": 1}, id="retry_after_only_for_429"),
        pytest.param({"kind": "ok", "content": "{}", "colour": "red"}, id="unknown_field"),
    ],
)
def test_replies_reject_fields_that_do_not_fit(fields):
    with pytest.raises(ValueError):
        Reply(**fields)


# --- out of process --------------------------------------------------------------------------


def test_spawned_server_serves_and_counts():
    spec = ScriptSpec.cycle([Reply.ok(VERDICT), Reply.rate_limit(retry_after_s=3)])
    with ScriptedOpenAIServer.spawn(spec, default_delay_s=0.01) as server, httpx.Client() as client:
        statuses = [post(server, client).status_code for _ in range(4)]
        assert server.request_count_by_kind == {"ok": 2, "rate_limit": 2}
        proc_pid = server.pid
    assert statuses == [200, 429, 200, 429]
    with pytest.raises(ProcessLookupError):
        os.kill(proc_pid, 0)


def test_the_spawned_server_runs_this_copy_of_judgekit():
    # The child's PYTHONPATH starts with the folder holding judgekit/ (the package moved one
    # folder down once, and the path pointed inside it: the child ran whichever copy was installed).
    from pathlib import Path

    import judgekit
    from judgekit.testing import spawn

    assert Path(spawn._PACKAGE_PARENT) == Path(judgekit.__file__).resolve().parent.parent


def test_serve_command_rejects_a_bad_reply(capsys):
    assert serve_main(["serve", "--reply", '{"kind": "ok"}']) == 2
    assert "'ok' replies need `content`" in capsys.readouterr().err
