"""The executor seam: an executor written against judgekit's public ``Executor``, ``ask`` and
``Ledger`` (and a ``Backend`` to call through) runs a suite to the same record as the local one;
``RunOptions.executor`` names an executor, built in or registered under the entry-point group
``judgekit.executors``."""

from __future__ import annotations

import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # before anything imports litellm

import json
import tomllib
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import pytest

import judgekit
from judgekit.judge.backend import LitellmBackend
from judgekit.judge.resolve import JudgeOverride
from judgekit.run import options as execute_module
from judgekit.testing import ScriptedOpenAIServer
from test_judge_runner import MODEL, scripted_judge

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "email-update"
TIMES = {"run_id", "started_at", "finished_at", "created_at", "latency_s"}


class Sequential(judgekit.Executor):
    """A toy executor: each distinct question asked once, one after another, with ``judgekit.ask``;
    no store, no memo, no concurrency."""

    def __init__(self, backend: Any = None):
        self.ledger = judgekit.Ledger()
        self.backend = backend or LitellmBackend()
        self.prepared = False
        self.closed = False
        self.asked = 0

    async def execute(self, jobs):
        if not self.prepared:
            self.backend.prepare()
            self.prepared = True
        alike: dict[str, list] = {}
        for job in jobs:
            alike.setdefault(job.key, []).append(job)
        verdicts = {}
        for key, same in alike.items():
            verdicts[key] = await judgekit.ask(same[0], self.backend, ledger=self.ledger, answers=len(same))
            self.asked += 1
        return [verdicts[job.key] for job in jobs]

    def close(self) -> None:
        self.backend.close()
        self.closed = True


made: list[Sequential] = []


def sequential_executor(loaded, options) -> Sequential:
    """The toy's factory, as a third party registers it."""
    made.append(Sequential(options.backend))
    return made[-1]


@pytest.fixture(scope="module")
def server():
    with ScriptedOpenAIServer(scripted_judge) as srv:
        yield srv


def options(server, **extra: Any) -> judgekit.RunOptions:
    return judgekit.RunOptions(override=JudgeOverride(model=MODEL, api_base=server.base_url), use_cache=False, **extra)


def record_without_times(path: Path) -> list[Any]:
    """The record's lines, without its run id and the times in it."""

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {key: strip(item) for key, item in value.items() if key not in TIMES}
        if isinstance(value, list):
            return [strip(item) for item in value]
        return value

    return [strip(json.loads(line)) for line in path.read_text().splitlines()]


@pytest.fixture
def registered(monkeypatch):
    """``sequential`` registered under the executors' entry-point group, and a plugin that
    tries to take the built-in name ``local``."""
    group = execute_module.ENTRY_POINT_GROUP
    plugins = [EntryPoint("sequential", f"{__name__}:sequential_executor", group),
               EntryPoint("local", f"{__name__}:sequential_executor", group)]
    monkeypatch.setattr(execute_module, "entry_points", lambda group: plugins if group == execute_module.ENTRY_POINT_GROUP
                        else [])
    made.clear()
    return made


def test_a_toy_executor_gives_the_local_executors_record(server, tmp_path):
    local = judgekit.run_suite(EXAMPLE, options=options(server), out=tmp_path / "local.jsonl")
    toy = Sequential()
    try:
        record = judgekit.run_suite(EXAMPLE, options=options(server, executor=toy), out=tmp_path / "toy.jsonl")
    finally:
        toy.close()
    assert toy.asked == record.ledger.calls == local.ledger.calls < len(record.results)  # identical questions asked once
    assert record_without_times(tmp_path / "toy.jsonl") == record_without_times(tmp_path / "local.jsonl")
    assert record.run_id != local.run_id


def test_an_executor_passed_in_is_its_callers_to_close(server):
    toy = Sequential()
    judgekit.run_suite(EXAMPLE, options=options(server, executor=toy))
    assert not toy.closed and toy.asked > 0
    toy.close()


def test_options_name_a_registered_executor_which_the_run_makes_and_closes(server, registered):
    record = judgekit.run_suite(EXAMPLE, options=options(server, executor="sequential"))
    [toy] = registered
    assert toy.closed and toy.asked == record.ledger.calls > 0


def test_a_plugin_cannot_take_a_built_in_name(server, registered):
    assert execute_module.executor_names() == ["local", "sequential"]
    assert execute_module.executor_factory("local") is execute_module.local_executor
    judgekit.run_suite(EXAMPLE, options=options(server, executor="local"))
    assert registered == []


def test_an_unknown_executor_name_is_a_clear_error_before_any_work(registered, tmp_path):
    with pytest.raises(judgekit.ConfigError) as error:
        judgekit.run_suite(EXAMPLE, options=judgekit.RunOptions(executor="ray", use_cache=False), out=tmp_path / "r.jsonl")
    message = str(error.value)
    assert "unknown executor 'ray'" in message and "known: local, sequential" in message
    assert "judgekit.executors" in message
    assert not (tmp_path / "r.jsonl").exists()


def test_the_package_registers_its_own_executor_under_the_group():
    entry_points = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    assert entry_points[execute_module.ENTRY_POINT_GROUP] == execute_module.BUILTIN


def test_the_seam_is_public():
    assert {"Executor", "LocalExecutor", "ask", "Ledger", "RunOptions"} <= set(judgekit.__all__)
    assert judgekit.RunOptions().executor == "local"
    local = judgekit.LocalExecutor(store=None)
    try:
        assert isinstance(local, judgekit.Executor)
    finally:
        local.close()
