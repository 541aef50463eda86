"""Hostile --out paths: a run or a calibration never overwrites what it reads, and a bad --out
fails before any work (no judge call), with exit 2 naming the file.

Each case points --out at something a careless or hostile command line could name: the suite's
own files, a snapshot, a device, a place that cannot be written. The file named must be
unchanged afterwards, and for a judged suite the scripted judge must have received no request.
"""

from __future__ import annotations

import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # before anything imports litellm

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from judgekit.cli import main
from judgekit.run.record import read_run
from judgekit.testing import Reply, ScriptedOpenAIServer

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "judge"
MODEL = "openai/judge-2024-08-06"
ANSWER = {"claims": [{"claim": "user 1 is on the pro plan", "supported": True,
                      "evidence": [{"id": "R0", "quote": '"plan": "pro"'}]}]}
RUBRIC = {
    "id": "plan-change", "version": "1.0.0", "registered": "2026-11-30",
    "task_success": {
        "guide": "Pass only when user 1 is on the pro plan after the run and nothing else changed.",
        "postconditions": [{"check": "equals", "collection": "/users", "where": {"id": 1}, "field": "plan", "value": "pro"}],
    },
}


def trajectory(i: int) -> dict:
    return {
        "id": f"t{i}", "prompt": "Move user 1 to the pro plan.",
        "calls": [{"tool": "update_user", "args": {"user_id": 1, "plan": "pro"}, "result": {"id": 1, "plan": "pro"}}],
        "output": "User 1 is now on the pro plan.",
        "world": {"before": {"json": {"users": [{"id": 1, "plan": "free"}]}}, "after": {"json_file": "after.json"}},
    }


def make_suite(root: Path, judge: dict | None = None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "rubric.yaml").write_text(yaml.safe_dump(RUBRIC, sort_keys=False))
    (root / "after.json").write_text(json.dumps({"users": [{"id": 1, "plan": "pro"}]}))
    with sqlite3.connect(root / "world.db") as conn:
        conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, plan TEXT)")
    (root / "trajectories.jsonl").write_text("".join(json.dumps(trajectory(i)) + "\n" for i in range(2)))
    suite = {"name": "outputs", "rubrics": ["rubric.yaml"],
             "trajectories": [{"file": "trajectories.jsonl", "rubric": "plan-change"}]}
    if judge is not None:
        shutil.copy(DATA / "rubric-faithfulness.yaml", root / "faithful.yaml")
        (root / "faithful.jsonl").write_text(json.dumps(trajectory(9)) + "\n")
        suite["rubrics"].append("faithful.yaml")
        suite["trajectories"].append({"file": "faithful.jsonl", "rubric": "faithful-only"})
        suite["judge"] = judge
    (root / "suite.yaml").write_text(yaml.safe_dump(suite, sort_keys=False))
    return root / "suite.yaml"


def invoke(*args: str | Path):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# Where --out points, relative to the suite folder, and what the refusal says.
REFUSED = [
    pytest.param("suite.yaml", "an input of this suite", id="the_suite_file"),
    pytest.param("trajectories.jsonl", "an input of this suite", id="a_trajectory_file"),
    pytest.param("rubric.yaml", "an input of this suite", id="a_rubric_file"),
    pytest.param("./sub/../rubric.yaml", "an input of this suite", id="a_rubric_file_by_another_spelling"),
    pytest.param("after.json", "not a run record", id="a_json_snapshot"),
    pytest.param("world.db", "not a run record", id="a_sqlite_snapshot"),
    pytest.param("rubric.yaml/run.json", "is not a folder", id="under_a_file"),
    pytest.param("/dev/null", "not a run record", id="a_device"),
]


@pytest.mark.parametrize(("out", "reason"), REFUSED)
def test_run_refuses_an_out_that_would_overwrite_what_it_reads(tmp_path, out, reason):
    with ScriptedOpenAIServer(Reply.ok(ANSWER)) as server:
        suite = make_suite(tmp_path / "suite", judge={"model": MODEL, "api_base": server.base_url})
        (tmp_path / "suite" / "sub").mkdir()
        before = snapshot(tmp_path / "suite")
        target = out if out.startswith("/") else tmp_path / "suite" / out
        result = invoke("run", suite, "--out", target, "--no-cache")
        assert server.request_count == 0  # refused before any work
    assert result.exit_code == 2, result.output
    assert reason in result.stderr and "judgekit: error: " in result.stderr
    assert snapshot(tmp_path / "suite") == before


def test_run_replaces_its_own_previous_record(tmp_path):
    suite = make_suite(tmp_path / "suite")
    out = tmp_path / "run.json"
    assert invoke("run", suite, "--out", out).exit_code == 0
    first = read_run(out).model_dump(mode="json")
    assert invoke("run", suite, "--out", out).exit_code == 0
    second = read_run(out).model_dump(mode="json")
    assert second["started_at"] != first["started_at"] and second["summary"] == first["summary"]


def test_a_folder_as_out_is_a_usage_error(tmp_path):
    suite = make_suite(tmp_path / "suite")
    result = invoke("run", suite, "--out", tmp_path)
    assert result.exit_code == 2 and "is a directory" in result.output


def test_calibrate_refuses_to_write_over_its_labels(tmp_path):
    suite = make_suite(tmp_path / "suite")
    labels = tmp_path / "suite" / "labels.jsonl"
    labels.write_text(json.dumps({"trajectory_id": "t0", "axis": "task_success", "label": "pass",
                                  "labeler": "a", "labeled_at": "2026-11-30T00:00:00Z"}) + "\n")
    before = labels.read_bytes()
    result = invoke("calibrate", suite, "--labels", labels, "--out", labels)
    assert result.exit_code == 2 and "an input of this suite" in result.stderr
    assert labels.read_bytes() == before


def test_import_never_overwrites_its_source(tmp_path):
    """openai-chat writes trajectories.jsonl into --out: a source of that name in that folder
    is refused instead of being replaced by its own import."""
    src = tmp_path / "trajectories.jsonl"
    chat = {"id": "c1", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}
    src.write_text(json.dumps(chat) + "\n")
    before = src.read_bytes()
    result = invoke("import", "openai-chat", src, "--out", tmp_path)
    assert result.exit_code == 2 and "would overwrite an input" in result.stderr
    assert src.read_bytes() == before
