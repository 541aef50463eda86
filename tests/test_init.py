"""`judgekit init`: a first suite that runs green out of the box, in either kind of world,
whose files are valid against their JSON Schemas, and that never overwrites a file."""

from __future__ import annotations

import json

import pytest
import yaml
from click.testing import CliRunner
from jsonschema import Draft202012Validator

import judgekit.rubric.lock as locking
from judgekit.cli import main as cli_main
from judgekit.scaffold import planned_files
from judgekit.schemas import schema_for


def invoke(*args: str):
    return CliRunner().invoke(cli_main, list(args))


@pytest.mark.parametrize("world", ["json", "sqlite"])
def test_init_then_run_is_green(tmp_path, world, monkeypatch):
    monkeypatch.chdir(tmp_path)
    made = invoke("init", "evals", "--world", world)
    assert made.exit_code == 0, made.output
    assert sorted(p.relative_to(tmp_path / "evals").as_posix() for p in (tmp_path / "evals").rglob("*")
                  if p.is_file()) == sorted(planned_files(world))
    for step in ("judgekit run evals --gate", "judgekit rubric lock evals/rubrics --lock evals/rubrics/rubrics.lock",
                 "judgekit run evals --gate --compare", "docs/getting-started.md"):
        assert step in made.output
    ran = invoke("run", "evals", "--gate", "--compare", "--history", "h.sqlite")
    assert ran.exit_code == 0, ran.output
    assert "PASS task_success: 1.000 (min 1.0) over 3 gating" in ran.output
    assert "PASS tool_correctness: 1.000 (min 1.0) over 3 gating" in ran.output
    assert "gate: PASSED" in ran.output and "compare: PASSED" in ran.output
    # The lock is the lock code's own: the rubric matches it as `judgekit rubric check` sees it.
    assert locking.check([tmp_path / "evals/rubrics"], tmp_path / "evals/rubrics/rubrics.lock") == []
    header = (tmp_path / "evals/snapshots" / f"before.{'db' if world == 'sqlite' else 'json'}").read_bytes()[:16]
    assert (header == b"SQLite format 3\x00") == (world == "sqlite")


@pytest.mark.parametrize("world", ["json", "sqlite"])
def test_the_written_files_validate_against_their_schemas(tmp_path, world):
    assert invoke("init", str(tmp_path), "--world", world).exit_code == 0
    documents = {
        "suite": [yaml.safe_load((tmp_path / "suite.yaml").read_text())],
        "rubric": [yaml.safe_load((tmp_path / "rubrics/ship-order.yaml").read_text())],
        "lock": [json.loads((tmp_path / "rubrics/rubrics.lock").read_text())],
        "trajectory": [json.loads(line) for line in (tmp_path / "trajectories.jsonl").read_text().splitlines()],
    }
    for name, items in documents.items():
        validator = Draft202012Validator(schema_for(name))
        for item in items:
            item = json.loads(json.dumps(item, default=str))  # YAML's dates as the strings editors see
            assert not [e.message for e in validator.iter_errors(item)], name


def test_init_refuses_to_overwrite_and_writes_nothing(tmp_path):
    mine = tmp_path / "trajectories.jsonl"
    mine.write_text("my own runs\n")
    refused = invoke("init", str(tmp_path))
    assert refused.exit_code == 2
    assert "already there: trajectories.jsonl; nothing written" in refused.output
    assert mine.read_text() == "my own runs\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trajectories.jsonl"]  # no staging folder left either


def test_init_refuses_a_rubrics_folder_that_holds_other_rubrics(tmp_path):
    (tmp_path / "rubrics").mkdir()
    (tmp_path / "rubrics/mine.yaml").write_text("id: mine\n")
    refused = invoke("init", str(tmp_path))
    assert refused.exit_code == 2 and "already there: rubrics/mine.yaml; nothing written" in refused.output
    assert not (tmp_path / "suite.yaml").exists()


def test_init_into_a_file_is_refused(tmp_path):
    (tmp_path / "f").write_text("")
    refused = invoke("init", str(tmp_path / "f"))
    assert refused.exit_code == 2


def test_init_without_a_folder_writes_into_the_current_one(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    made = invoke("init")
    assert made.exit_code == 0 and "judgekit run . --gate" in made.output
    assert (tmp_path / "suite.yaml").is_file() and (tmp_path / "snapshots/after.json").is_file()
