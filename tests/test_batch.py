"""Provider batches as a cache filler, against the scripted server's files and batches endpoints
on 127.0.0.1: submit, status, collect, then a run that asks nothing online and finds the verdicts
an online run gets; and every hostile batch reply handled with its reason."""

from __future__ import annotations

import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # before anything imports litellm

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from judgekit.cli import main as cli_main
from judgekit.judge.resolve import JudgeOverride
from judgekit.run import RunOptions, run_suite
from judgekit.run.batch import submit_batches
from judgekit.run.batch_collect import collect_batches
from judgekit.run.batch_record import read_records, record_path, write_record
from judgekit.run.estimate import estimate_run, render_estimate
from judgekit.suite import load_suite
from judgekit.testing import Reply, ScriptedOpenAIServer
from test_judge_runner import MODEL, judge_answer, scripted_judge

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "email-update"


@pytest.fixture(scope="module")
def loaded():
    return load_suite(EXAMPLE)


def options(server: ScriptedOpenAIServer, cache: Path) -> RunOptions:
    return RunOptions(override=JudgeOverride(model=MODEL, api_base=server.base_url), cache_dir=cache)


def answers(record) -> dict[str, tuple]:
    """Each trajectory's judged verdict as it scores: status and answer, not when or how it came."""
    found = {}
    for result in record.results:
        axis = result.axes["faithfulness"]
        found[result.trajectory_id] = (axis.status, json.dumps(axis.model_dump(mode="json", exclude={"judge"}),
                                                               sort_keys=True))
    return found


def test_round_trip_fills_the_cache_and_the_run_asks_nothing_online(loaded, tmp_path):
    with ScriptedOpenAIServer(scripted_judge) as server:
        online = run_suite(loaded, options=options(server, tmp_path / "online"))
        online_bodies = sorted(json.dumps(body, sort_keys=True) for body in server.requests)
        asked_online = server.request_count
        base = ["--judge-model", MODEL, "--judge-api-base", server.base_url, "--cache-dir", str(tmp_path / "batch")]
        runner = CliRunner()

        dry = runner.invoke(cli_main, ["run", str(EXAMPLE), "--dry-run", *base])
        assert dry.exit_code == 0, dry.output
        assert f"batch: unknown (litellm's price map has no price for {MODEL})" in dry.output
        submitted = runner.invoke(cli_main, ["batch", "submit", str(EXAMPLE), *base])
        assert submitted.exit_code == 0, submitted.output
        [(path, record)] = read_records(tmp_path / "batch")
        assert f"batch {record.batch_id}: {MODEL} at {server.base_url}, {asked_online} questions" in submitted.output
        assert record.sent == record.questions == asked_online and record.cached == 0
        # Each line: its cache key as custom_id, and exactly the body the online call sent.
        lines = [json.loads(line) for line in server.batches.contents[record.input_file_id].splitlines()]
        assert [line["custom_id"] for line in lines] == [request.key for request in record.requests]
        assert sorted(json.dumps(line["body"], sort_keys=True) for line in lines) == online_bodies
        assert server.request_count == asked_online  # a batch is no online call

        again = runner.invoke(cli_main, ["batch", "submit", str(EXAMPLE), *base])
        assert "already in open batches" in again.output and "nothing to send" in again.output
        status = runner.invoke(cli_main, ["batch", "status", str(EXAMPLE), "--cache-dir", str(tmp_path / "batch")])
        assert status.exit_code == 0 and f"{record.batch_id}  {MODEL}" in status.output and "completed" in status.output

        collected = runner.invoke(cli_main, ["batch", "collect", "--cache-dir", str(tmp_path / "batch")])
        assert collected.exit_code == 0, collected.output
        assert f"{asked_online} stored, 0 already in the cache, 0 unscored" in collected.output

        from_batch = run_suite(loaded, options=options(server, tmp_path / "batch"))
        assert server.request_count == asked_online  # zero online calls
        assert from_batch.ledger.calls == 0 and from_batch.ledger.cache_hits == len(from_batch.results)
        assert answers(from_batch) == answers(online)
        judged = [r.axes["faithfulness"].judge for r in from_batch.results]
        assert {j.batch_id for j in judged} == {record.batch_id} and not any(j.model_mismatch for j in judged)

        # Idempotent and resumable: collected again, or again after a collect cut short.
        twice = runner.invoke(cli_main, ["batch", "collect", "--cache-dir", str(tmp_path / "batch")])
        assert "collected before" in twice.output
        [(_, done)] = read_records(tmp_path / "batch")
        write_record(tmp_path / "batch", done.model_copy(update={"collected_at": None, "stored": 0}))
        [resumed] = collect_batches(tmp_path / "batch")
        assert (resumed.stored, resumed.already_stored) == (0, asked_online)


def test_a_suite_whose_judge_cannot_batch_sends_nothing(tmp_path):
    result = CliRunner().invoke(cli_main, ["batch", "submit", str(EXAMPLE), "--cache-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert "no judge of this suite with questions to ask can batch" in result.output
    assert "the embedded judge runs on this machine and has no batch API" in result.output
    assert not (tmp_path / "batches").exists()


# --- hostile batches --------------------------------------------------------------------------------


def _unknown_id(lines):
    return lines + [json.dumps({"custom_id": "f" * 64, "response": {"status_code": 200, "body": {}}}).encode()]


def _duplicate_first(lines):
    return lines + lines[:1]


def _malformed(lines):
    return [b'{"custom_id": "', *lines[1:]]  # the first question's reply cut: that line names nothing


HOSTILE = [
    pytest.param({"rewrite_output": _unknown_id}, {}, 0, 1, id="unknown_custom_id_rejected"),
    pytest.param({"rewrite_output": _duplicate_first}, {"duplicate": 1}, 0, 0, id="duplicate_takes_neither"),
    pytest.param({"rewrite_output": _malformed}, {"missing": 1}, 0, 1, id="malformed_line_rejected"),
    pytest.param({"model": "someone-else"}, {}, 1, 0, id="another_model_stored_as_mismatch"),
    pytest.param({"reply": "malformed"}, {"parse_failure": "all"}, 0, 0, id="invalid_reply_unscored"),
    pytest.param({"end": ("expired", 2)}, {"expired": "rest"}, 0, 0, id="expired_partial"),
    pytest.param({"end": ("cancelled", 0)}, {"cancelled": "all"}, 0, 0, id="cancelled"),
]


@pytest.mark.parametrize(("script", "unscored", "mismatch", "rejected"), HOSTILE)
def test_hostile_batch_replies_are_handled_with_their_reason(loaded, tmp_path, script, unscored, mismatch, rejected):
    def judge(request, n):
        if script.get("reply") == "malformed":
            return Reply.malformed()
        return Reply.ok(judge_answer(request), model=script.get("model"))

    with ScriptedOpenAIServer(judge) as server:
        batches = server.batches
        batches.rewrite_output = script.get("rewrite_output")
        if "end" in script:
            batches.state = "in_progress"
        report = submit_batches(loaded, options(server, tmp_path))
        [record] = report.records
        if "end" in script:
            [pending] = collect_batches(tmp_path)
            assert not pending.collected and pending.record.state == "in_progress"  # left for later
            state, answered = script["end"]
            batches.finish(record.batch_id, state, answered=answered)
        [collected] = collect_batches(tmp_path)
        done = collected.record
        n = done.sent
        expected = {reason: (n if count == "all" else n - script["end"][1] if count == "rest" else count)
                    for reason, count in unscored.items()}
        assert dict(collected.unscored) == expected
        assert done.rejected_count == rejected and done.model_mismatch == (n if mismatch else 0)
        assert collected.stored == n - sum(expected.values())
        assert all(entry.detail for entry in done.unscored.values())
        # What has no verdict is asked online by the next run; the rest comes from the cache.
        before = server.request_count
        run = run_suite(loaded, options=options(server, tmp_path))
        assert server.request_count - before == sum(expected.values())
        assert run.ledger.cache_hits >= collected.stored


def test_an_error_file_line_leaves_its_question_unscored(loaded, tmp_path):
    with ScriptedOpenAIServer(scripted_judge) as server:
        wanted: list[str] = []
        server.batches.error_for = lambda line: ({"code": "invalid_request", "message": "too long"}
                                                 if line["custom_id"] in wanted[:1] else None)
        server.batches.state = "in_progress"
        [record] = submit_batches(loaded, options(server, tmp_path)).records
        wanted.append(record.requests[0].key)
        server.batches.finish(record.batch_id, "completed")
        [collected] = collect_batches(tmp_path)
        entry = collected.record.unscored[record.requests[0].key]
        assert entry.reason == "provider_error" and "too long" in entry.detail
        assert collected.stored == record.sent - 1
        assert record_path(tmp_path, record.batch_id).exists()


def test_the_dry_run_shows_the_batch_price_beside_the_online_one(loaded, tmp_path):
    override = JudgeOverride(model="openai/gpt-4o-2024-08-06", api_base=None)
    estimate = estimate_run(loaded, RunOptions(override=override, cache_dir=tmp_path))
    [judge] = estimate.judges
    assert judge.batch_priced == "litellm batch price"  # the map lists gpt-4o's batch prices: half
    assert judge.batch_cost_usd_max == pytest.approx(judge.cost_usd_max / 2)
    text = render_estimate(estimate)
    assert "through a provider batch (litellm's batch price)" in text
    local = estimate_run(loaded, RunOptions(cache_dir=tmp_path))
    assert local.judges[0].batch_priced == "no batch API" and "no batch API" in render_estimate(local)


def test_many_questions_fill_several_batches_and_a_batch_can_be_cancelled(loaded, tmp_path, monkeypatch):
    monkeypatch.setattr("judgekit.run.batch.MAX_BATCH_REQUESTS", 3)  # the provider's limit, made small
    with ScriptedOpenAIServer(scripted_judge) as server:
        server.batches.state = "in_progress"
        records = submit_batches(loaded, options(server, tmp_path)).records
        assert [r.sent for r in records] == [3, 3, 2] and len({r.batch_id for r in records}) == 3
        assert len({key for r in records for key in (q.key for q in r.requests)}) == 8
        cancelled = CliRunner().invoke(cli_main, ["batch", "cancel", records[0].batch_id, "--cache-dir", str(tmp_path)])
        assert cancelled.exit_code == 0 and f"{records[0].batch_id}: cancelled" in cancelled.output
        for record in records[1:]:
            server.batches.finish(record.batch_id, "completed")
        reports = collect_batches(tmp_path)
        assert [(r.stored, dict(r.unscored)) for r in reports] == [(0, {"cancelled": 3}), (3, {}), (2, {})]
        unknown = CliRunner().invoke(cli_main, ["batch", "cancel", "batch_404", "--cache-dir", str(tmp_path)])
        assert unknown.exit_code == 2 and "no batch 'batch_404' is recorded here" in unknown.output


def test_a_record_never_sends_a_key_to_a_server_nobody_named(loaded, tmp_path, monkeypatch):
    monkeypatch.setenv("JK_BATCH_KEY", "sk-test-batch-key-not-real")
    with ScriptedOpenAIServer(scripted_judge) as server:
        run_options = RunOptions(override=JudgeOverride(model=MODEL, api_base=server.base_url, api_key_env="JK_BATCH_KEY"),
                                 cache_dir=tmp_path)
        [record] = submit_batches(loaded, run_options).records
        refused = CliRunner().invoke(cli_main, ["batch", "collect", "--cache-dir", str(tmp_path)])
        assert refused.exit_code == 2
        assert f"would send the API key in $JK_BATCH_KEY to {server.base_url}" in refused.output
        assert record.api_key_env == "JK_BATCH_KEY" == next(read_records(tmp_path))[1].api_key_env  # written as named
        named = CliRunner().invoke(cli_main, ["batch", "collect", "--cache-dir", str(tmp_path), "--judge-api-base",
                                              server.base_url, "--judge-api-key-env", "JK_BATCH_KEY"])
        assert named.exit_code == 0 and f"{record.sent} stored" in named.output
