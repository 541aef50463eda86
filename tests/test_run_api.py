"""The run as a library object: run_suite / run_suite_async, plan -> execute -> merge, the axis
table, the run record format 2 (and format 1 read through its migration), exit codes."""

from __future__ import annotations

import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # before anything imports litellm

import asyncio
import json
import pickle
import re
from pathlib import Path
from typing import Literal

import pytest
from click.testing import CliRunner
from pydantic import Field

import judgekit
from judgekit.axes import table as axis_table
from judgekit.cli import main as cli_main
from judgekit.judge.resolve import JudgeOverride
from judgekit.results import AxisResultBase, TrajectoryResult, _RESULT_MODELS
from judgekit.run import LocalExecutor, RunOptions, merge, plan_run, read_run, run_suite, run_suite_async
from judgekit.run.record import RunRecord
from judgekit.suite import load_suite
from judgekit.testing import ScriptedOpenAIServer
from test_judge_runner import MODEL, example_suite, scripted_judge

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def server():
    with ScriptedOpenAIServer(scripted_judge) as srv:
        yield srv


def options_for(server, tmp_path: Path, **extra) -> RunOptions:
    return RunOptions(override=JudgeOverride(model=MODEL, api_base=server.base_url), cache_dir=tmp_path / "cache",
                      **extra)


# --- the library API ---------------------------------------------------------------------------


def test_run_suite_on_the_example_returns_a_complete_record(server, tmp_path):
    record = judgekit.run_suite(ROOT / "examples" / "email-update", options=options_for(server, tmp_path))
    assert isinstance(record, judgekit.RunRecord)
    assert len(record.results) == record.trajectories == 9
    assert set(record.summary) == {"task_success", "tool_correctness", "faithfulness"}
    assert all(r.axes["faithfulness"].status == "scored" for r in record.results)
    asked = {j.job.key for j in plan_run(load_suite(ROOT / "examples" / "email-update"),
                                          override=JudgeOverride(model=MODEL, api_base=server.base_url)).judgements}
    replies = record.ledger.calls - sum(record.ledger.failed_attempts.values())  # a retried transport failure aside
    assert replies == len(asked) < 9 and record.ledger.cache_hits == 0  # one call per distinct question
    assert record.gate_report is not None and [a.axis for a in record.gate_report.axes] == sorted(record.summary)
    judges = {j.model_pin: j.axes for j in record.judges}
    assert judges == {MODEL: {"faithfulness": "advisory"}}  # no approval record: shown, never gating
    assert record.project.git_commit is None or re.fullmatch(r"[0-9a-f]{40}", record.project.git_commit)
    assert all(not Path(r.source.split(":")[0]).is_absolute() for r in record.results)  # compare across machines


def test_run_suite_async_inside_a_running_event_loop(server, tmp_path):
    async def inside() -> tuple[RunRecord, RunRecord]:
        asyncio.get_running_loop()  # this coroutine runs on a loop, as in a notebook or a web app
        awaited = await run_suite_async(ROOT / "examples" / "email-update", options=options_for(server, tmp_path))
        blocking = run_suite(ROOT / "examples" / "email-update", options=options_for(server, tmp_path))
        return awaited, blocking

    awaited, blocking = asyncio.run(inside())
    assert [r.trajectory_id for r in awaited.results] == [r.trajectory_id for r in blocking.results]
    assert blocking.ledger.calls == 0 and blocking.ledger.cache_hits == 9  # the second one read the cache
    assert [r.axes["faithfulness"].score for r in awaited.results] == [r.axes["faithfulness"].score for r in blocking.results]


def test_plan_execute_merge_equals_run_suite(server, tmp_path):
    loaded = load_suite(ROOT / "examples" / "email-update")
    plan = plan_run(loaded, override=JudgeOverride(model=MODEL, api_base=server.base_url))
    assert len(plan.items) == 9 and len(plan.judgements) == 9
    executor = LocalExecutor(store=None)
    try:
        verdicts = asyncio.run(executor.execute(plan.jobs))
    finally:
        executor.close()
    merged = merge(plan, verdicts)
    whole = run_suite(loaded, options=options_for(server, tmp_path, use_cache=False))
    strip = {"axes": {"faithfulness": {"judge": {"created_at", "latency_s", "cache_hit", "attempts"}}}}
    assert [r.model_dump(exclude=strip) for r in merged] == [r.model_dump(exclude=strip) for r in whole.results]


def test_a_plan_pickles_and_holds_no_secret(tmp_path, monkeypatch):
    secret = "sk-live-" + "Zq7" * 12
    monkeypatch.setenv("JUDGE_KEY_FOR_TEST", secret)
    suite = example_suite(tmp_path / "s", judge={"model": MODEL, "api_base": "http://127.0.0.1:9/v1",
                                                 "api_key_env": "JUDGE_KEY_FOR_TEST"})
    plan = plan_run(load_suite(suite))
    data = pickle.dumps(plan)
    assert secret.encode() not in data and b"Zq7Zq7" not in data
    back = pickle.loads(data)
    assert [j.job.key for j in back.judgements] == [j.job.key for j in plan.judgements]
    assert {j.job.judge.api_key_env for j in back.judgements} == {"JUDGE_KEY_FOR_TEST"}
    assert [r.model_dump() for r in back.items] == [r.model_dump() for r in plan.items]


def test_windows_give_the_same_record_as_one_window(server, tmp_path):
    suite = ROOT / "examples" / "email-update"
    one = run_suite(suite, options=options_for(server, tmp_path, window=10_000))
    small = run_suite(suite, options=options_for(server, tmp_path, window=2))
    strip = {"axes": {"faithfulness": {"judge": {"created_at", "latency_s", "cache_hit", "attempts"}}}}
    assert [r.model_dump(exclude=strip) for r in small.results] == [r.model_dump(exclude=strip) for r in one.results]
    assert small.summary == one.summary and small.gate_report == one.gate_report


def test_results_stream_to_the_caller_and_the_record_file(server, tmp_path):
    seen: list[str] = []
    out = tmp_path / "run.jsonl"
    record = run_suite(ROOT / "examples" / "email-update", options=options_for(server, tmp_path),
                       on_result=lambda r: seen.append(r.trajectory_id), keep_results=False, out=out)
    assert record.results == [] and len(seen) == record.trajectories == 9
    back = read_run(out)
    assert [r.trajectory_id for r in back.results] == seen
    assert back.summary == record.summary and back.run_id == record.run_id
    lines = out.read_text().splitlines()
    assert [next(iter(json.loads(line))) for line in lines] == ["header"] + ["result"] * 9 + ["footer"]


def test_a_record_cut_before_its_footer_is_refused(server, tmp_path):
    out = tmp_path / "run.jsonl"
    run_suite(ROOT / "examples" / "email-update", options=options_for(server, tmp_path), out=out)
    lines = out.read_text().splitlines(keepends=True)
    (tmp_path / "cut.jsonl").write_text("".join(lines[:-1]))
    gated = CliRunner().invoke(cli_main, ["gate", str(tmp_path / "cut.jsonl")])
    assert gated.exit_code == 2 and "ends without its footer" in gated.output
    (tmp_path / "short.jsonl").write_text("".join(lines[:3] + lines[-1:]))
    gated = CliRunner().invoke(cli_main, ["gate", str(tmp_path / "short.jsonl")])
    assert gated.exit_code == 2 and "the footer counts 9 trajectories, the record holds 2" in gated.output


# --- the axis table ----------------------------------------------------------------------------


def test_no_module_switches_on_an_axis_name():
    pattern = re.compile(r"""axis\w*(\.name|\.axis)?\s*[!=]=\s*["']""")
    offenders = [f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
                 for path in sorted((ROOT / "judgekit").rglob("*.py")) if path.name != "axes.py"
                 for n, line in enumerate(path.read_text().splitlines(), 1) if pattern.search(line)]
    assert offenders == []


class CallCountResult(AxisResultBase):
    axis: Literal["call_count"] = "call_count"
    score: float | None = Field(None)
    calls: int = 0


class CallCount(axis_table.Axis):
    name = "call_count"
    kind = "graded"
    result = CallCountResult
    default_minimum = 0.5

    def criteria(self, rubric):
        return rubric.tool_correctness  # scored wherever tool correctness is

    def score(self, criteria, trajectory, world):
        return CallCountResult(score=1.0 if len(trajectory.calls) <= 2 else 0.0, calls=len(trajectory.calls))

    def describe(self, result):
        return f"{result.calls} call(s)"


@pytest.fixture
def toy_axis():
    """A toy deterministic axis, added the one way an axis is added: an Axis object, registered."""
    toy = axis_table.register(CallCount())
    try:
        yield toy
    finally:
        axis_table.unregister("call_count")
        del _RESULT_MODELS["call_count"]


def test_a_toy_axis_needs_only_its_object_registered(toy_axis, server, tmp_path):
    out = tmp_path / "run.jsonl"
    record = run_suite(ROOT / "examples" / "email-update", options=options_for(server, tmp_path), out=out)
    counts = {r.trajectory_id: r.axes["call_count"].calls for r in record.results}
    assert len(counts) == 9 and all(isinstance(n, int) for n in counts.values())
    assert record.summary["call_count"].scored == 9
    gated = {a.axis: a for a in record.gate_report.axes}["call_count"]
    assert gated.minimum == 0.5 and gated.gating_n == 9
    assert read_run(out).results[0].axes["call_count"].calls == record.results[0].axes["call_count"].calls
    shown = CliRunner().invoke(cli_main, ["run", str(ROOT / "examples" / "email-update"), "--judge-model", MODEL,
                                          "--judge-api-base", server.base_url, "--cache-dir", str(tmp_path / "cache")])
    assert shown.exit_code == 0, shown.output
    assert "call(s)" in shown.output and "call_count: 9 scored" in shown.output


def test_a_result_under_another_axis_name_is_refused():
    with pytest.raises(ValueError, match="holds a tool_correctness result"):
        TrajectoryResult.model_validate({"trajectory_id": "t", "rubric": "r@1.0.0", "rubric_sha256": "0" * 64,
                                         "source": "f:1", "axes": {"faithfulness": {"axis": "tool_correctness"}}})


# --- exit codes --------------------------------------------------------------------------------


def test_exit_codes_tell_gate_failure_input_error_and_internal_error_apart(tmp_path, monkeypatch):
    suite = ROOT / "examples" / "email-update"
    bad = CliRunner().invoke(cli_main, ["run", str(tmp_path / "missing")])
    assert bad.exit_code == 2 and bad.output.startswith("judgekit: error: ")

    def broken(*args, **kwargs):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr("judgekit.run.run_suite", broken)
    internal = CliRunner().invoke(cli_main, ["run", str(suite), "--no-cache"])
    assert internal.exit_code == 3 and "internal error: ZeroDivisionError: a bug" in internal.output


@pytest.mark.parametrize("command", [pytest.param([], id="judgekit"), pytest.param(["run"], id="judgekit_run")])
def test_help_lists_every_exit_code(command):
    from judgekit.ci import exit_codes
    from judgekit.ci.exit_codes import MEANINGS

    text = CliRunner().invoke(cli_main, [*command, "--help"]).output
    section = " ".join(text.split("Exit codes:\n", 1)[1].split())  # the help's wrapping undone
    codes = {value for name, value in vars(exit_codes).items() if name.startswith("EXIT_")}
    assert codes == set(MEANINGS) and {0, 1, 2, 3, 4, 130} <= codes
    for code, meaning in MEANINGS.items():
        assert f"{code} {' '.join(meaning.split())}" in section, (code, section)


@pytest.mark.parametrize("memory_ids", [pytest.param(2**17, id="in_memory"),
                                        pytest.param(1000, id="moved_to_disk_past_1000")])
def test_seen_ids_remember_every_id_across_growth(memory_ids):
    from judgekit.run.plan import SeenIds

    seen = SeenIds(capacity=8, memory_ids=memory_ids)
    ids = [f"id-{n}" for n in range(5000)]
    assert [seen.add(tid) for tid in ids] == [False] * 5000
    assert (seen._db is not None) == (memory_ids < 5000)
    assert all(seen.add(tid) for tid in ids)
    assert not seen.add("id-5000") and seen.add("id-5000")
    seen.close()


def test_a_repeated_id_past_the_in_memory_bound_is_still_found(tmp_path, monkeypatch):
    import judgekit.run.plan as planning
    from judgekit.errors import InputError

    suite = example_suite(tmp_path / "s", judge={"model": MODEL, "api_base": "http://127.0.0.1:9/v1"})
    lines = (tmp_path / "s" / "trajectories.jsonl").read_text().splitlines()
    (tmp_path / "s" / "trajectories.jsonl").write_text("\n".join([*lines, lines[1]]) + "\n")
    monkeypatch.setattr(planning.SeenIds, "MEMORY_IDS", 3)  # the ids move to disk after the third
    first = json.loads(lines[1])["id"]
    with pytest.raises(InputError, match=f"trajectory id '{first}' already used at .*trajectories.jsonl:2"):
        list(planning.iter_trajectories_of(load_suite(suite)))


def test_a_hash_collision_is_not_a_repeated_id(tmp_path, monkeypatch):
    import judgekit.run.plan as planning

    suite = example_suite(tmp_path / "s", judge={"model": MODEL, "api_base": "http://127.0.0.1:9/v1"})
    monkeypatch.setattr(planning.SeenIds, "add", lambda self, tid: True)  # every id "collides"
    ids = [item.trajectory.id for _, item in planning.iter_trajectories_of(load_suite(suite))]
    assert len(ids) == len(set(ids)) == 9  # the files were read again: no id really repeats
