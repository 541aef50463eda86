"""The streaming run at scale, in miniature: an all-cached rerun makes no call and never
imports litellm (seconds and ~200 MB saved on every unchanged rerun).

The benchmarks measure the same at size (benchmarks/bench_cached_rerun.py, bench_run_judged.py,
bench_run_memory.py); this keeps the property itself under test. The first run fills the cache
from the scripted server through a standard-library backend (``UrllibBackend``) rather than
litellm: importing litellm and its per-call work would take most of this test's time on two
cores, and what is under test is the rerun, which must not need litellm at all.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from judgekit.judge.backend import CallRequest, RawReply
from judgekit.run import RunOptions, run_suite
from judgekit.testing import Reply, ScriptedOpenAIServer

MODEL = "openai/judge-2024-08-06"
TRAJECTORIES = 300

# The rerun, in a fresh interpreter: the library API, the cache only; it asserts for itself.
RERUN = r"""
import json, sys
from pathlib import Path
from judgekit.run import RunOptions, run_suite

suite, cache_dir = sys.argv[1:3]
hits = []

def on_result(result):
    axis = result.axes["faithfulness"]
    hits.append(axis.status == "scored" and axis.judge is not None and axis.judge.cache_hit)

record = run_suite(suite, options=RunOptions(cache_dir=Path(cache_dir)), on_result=on_result, keep_results=False)
litellm_imported = "litellm" in sys.modules
print(json.dumps({"calls": record.ledger.calls, "cache_hits": record.ledger.cache_hits, "results": len(hits),
                  "all_cached_and_scored": all(hits), "litellm_imported": litellm_imported}))
assert not litellm_imported, "an all-cached rerun imported litellm"
assert record.ledger.calls == 0, f"an all-cached rerun made {record.ledger.calls} call(s)"
"""


def write_suite(folder: Path, api_base: str) -> Path:
    folder.mkdir(parents=True)
    with open(folder / "trajectories.jsonl", "w", encoding="utf-8") as out:
        for i in range(TRAJECTORIES):
            order = f"ord-{i:05d}"
            out.write(json.dumps({
                "id": f"order-{i:05d}",
                "prompt": f"Where is my order {order}?",
                "calls": [{"tool": "get_order", "args": {"order_id": order},
                           "result": {"order_id": order, "status": "shipped", "eta": f"2026-12-{1 + i % 28:02d}"}}],
                "output": f"Order {order} has shipped and arrives on 2026-12-{1 + i % 28:02d}.",
            }) + "\n")
    rubric = {
        "id": "scale-orders", "version": "1.0.0", "registered": "2026-12-01",
        "tool_correctness": {"guide": "One lookup of the order, with a valid id.",
                             "expected_calls": [{"tool": "get_order", "args": {"order_id": {"type": "string"}}}]},
        "faithfulness": {"guide": "Every claim must be stated by the order lookup; quote it."},
    }
    (folder / "rubric.yaml").write_text(yaml.safe_dump(rubric, sort_keys=False), encoding="utf-8")
    suite = {
        "name": "scale", "rubrics": ["rubric.yaml"],
        "trajectories": [{"file": "trajectories.jsonl", "rubric": "scale-orders"}],
        "judge": {"model": MODEL, "api_base": api_base},
        "concurrency": 16,
    }
    (folder / "suite.yaml").write_text(yaml.safe_dump(suite, sort_keys=False), encoding="utf-8")
    return folder / "suite.yaml"


def answer(request: dict[str, Any], n: int) -> Reply:
    """A valid faithfulness answer: the status claim quotes R0, which holds it."""
    return Reply.ok({"claims": [
        {"claim": "the order has shipped", "supported": True,
         "evidence": [{"id": "R0", "quote": '"status": "shipped"'}]},
    ]})


class UrllibBackend:
    """A ``Backend`` that posts each call to an OpenAI-compatible server with urllib, on a thread."""

    def close(self) -> None:
        pass  # no pooled connections

    def prepare(self) -> None:
        pass

    async def complete(self, request: CallRequest, *, max_attempts: int | None = None) -> RawReply:
        return await asyncio.to_thread(self._post, request)

    @staticmethod
    def _post(request: CallRequest) -> RawReply:
        body = {"model": request.model.split("/", 1)[-1], "messages": request.messages,
                "response_format": request.response_format, "temperature": request.temperature,
                "seed": request.seed, "max_tokens": request.max_tokens}
        post = urllib.request.Request(f"{request.api_base}/chat/completions", data=json.dumps(body).encode(),
                                      headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(post, timeout=request.timeout_s) as response:
            data = json.load(response)
        choice, usage = data["choices"][0], data["usage"]
        return RawReply(content=choice["message"]["content"], refusal=choice["message"].get("refusal"),
                        reported_model=data["model"], prompt_tokens=usage["prompt_tokens"],
                        completion_tokens=usage["completion_tokens"], cost_usd=None, attempts=1,
                        finish_reason=choice["finish_reason"])


def test_all_cached_rerun_makes_no_call_and_never_imports_litellm(tmp_path):
    cache = tmp_path / "cache"
    with ScriptedOpenAIServer(answer) as server:
        suite = write_suite(tmp_path / "suite", server.base_url)
        first = run_suite(suite, options=RunOptions(cache_dir=cache, backend=UrllibBackend()), keep_results=False)
        assert first.trajectories == TRAJECTORIES
        assert first.ledger.calls == server.request_count == TRAJECTORIES
        assert first.summary["faithfulness"].scored == TRAJECTORIES  # every verdict valid, so every one stored

        asked = server.request_count
        env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        rerun = subprocess.run([sys.executable, "-c", RERUN, str(suite), str(cache)], check=False,
                               capture_output=True, text=True, timeout=120, env=env)
        assert rerun.returncode == 0, rerun.stderr[-3000:]
        assert server.request_count == asked  # the server, still up, saw nothing
    report = json.loads(rerun.stdout.strip().splitlines()[-1])
    assert report == {"calls": 0, "cache_hits": TRAJECTORIES, "results": TRAJECTORIES,
                      "all_cached_and_scored": True, "litellm_imported": False}
