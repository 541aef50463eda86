"""`judgekit prompt show` prints what a run sends: the same text the judge received over HTTP,
and the template hash the run record names, in either answer form."""

from __future__ import annotations

import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # before anything imports litellm

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_judge_runner import MODEL, example_suite, scripted_judge

from judgekit.cache.store import VerdictCache
from judgekit.cli import main as cli_main
from judgekit.prompt import Prompt
from judgekit.run.record import read_run
from judgekit.testing import ScriptedOpenAIServer

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "email-update"
TRAJECTORY = "ok"


@pytest.fixture(scope="module")
def server():
    with ScriptedOpenAIServer(scripted_judge) as srv:
        yield srv


def shown(suite: Path, *flags: str) -> tuple[str, dict]:
    """`prompt show`'s text and its --json, for the example's trajectory on faithfulness."""
    args = ["prompt", "show", str(suite), TRAJECTORY, "--axis", "faithfulness", *flags]
    text, as_json = CliRunner().invoke(cli_main, args), CliRunner().invoke(cli_main, [*args, "--json"])
    assert text.exit_code == 0 and as_json.exit_code == 0, text.output + as_json.output
    return text.stdout, json.loads(as_json.stdout)


def recorded_template(record: Path) -> str:
    [result] = [r for r in read_run(record).results if r.trajectory_id == TRAJECTORY]
    return result.axes["faithfulness"].judge.template_sha256


@pytest.mark.parametrize("answer", [pytest.param("full", id="full"), pytest.param("compact", id="compact")])
def test_prompt_show_prints_what_the_run_sent_and_its_template_hash(answer, server, tmp_path):
    suite = example_suite(tmp_path / "suite", judge={"model": MODEL, "api_base": server.base_url, "answer": answer,
                                                     "invalid_reply_retries": 0})
    before = len(server.requests)
    run = CliRunner().invoke(cli_main, ["run", str(suite), "--out", str(tmp_path / "run.jsonl"),
                                        "--cache-dir", str(tmp_path / "cache")])
    assert run.exit_code in (0, 1), run.output
    sent = [request["messages"] for request in server.requests[before:]]

    text, summary = shown(suite)
    assert summary["answer_form"] == answer
    # What was printed is one of the questions the run sent, exactly; and only that one.
    assert sent.count(summary["messages"]) == 1
    assert text == Prompt("faithfulness", summary["messages"]).render() + "\n"
    assert summary["template_sha256"] == recorded_template(tmp_path / "run.jsonl")
    # The cache key it names is the one the run stored its verdict under.
    with VerdictCache(tmp_path / "cache", create=False) as store:
        assert store.get(summary["cache_key"], "faithfulness") is not None


@pytest.mark.slow
def test_on_the_example_as_it_is_the_hash_and_the_key_are_the_runs(tmp_path):
    """The example's own judge, the embedded one, and its compact prompt: a real run."""
    cache, record = tmp_path / "cache", tmp_path / "run.jsonl"
    run = CliRunner().invoke(cli_main, ["run", str(EXAMPLE), "--out", str(record), "--cache-dir", str(cache)])
    assert run.exit_code in (0, 1), run.output
    text, summary = shown(EXAMPLE)
    assert summary["answer_form"] == "compact" and summary["judge"].startswith("local/")
    assert summary["template_sha256"] == recorded_template(record)
    assert text == Prompt("faithfulness", summary["messages"]).render() + "\n"
    # The key is sha256 over the messages and the rest of the question: the run cached its
    # verdict under it, so it sent exactly these messages.
    with VerdictCache(cache, create=False) as store:
        assert store.get(summary["cache_key"], "faithfulness") is not None
