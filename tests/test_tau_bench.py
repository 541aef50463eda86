"""Agreement with tau-bench's own outcome labels on 100 real GPT-4o airline runs.

tau-bench computed ``reward`` from the end state of its database; judgekit never reads it. We
import the runs with ``judgekit import tau-bench``, run the suite it writes, and call a run a
success when tool correctness is 1.0 and task success passed. The rule is the same for every
task: no task id is special-cased. Run with ``-s`` to see the confusion matrix.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest
from click.testing import CliRunner

from judgekit.cli import main

pytestmark = pytest.mark.shared_data

SOURCE = "gpt-4o-airline.even-tasks.json"
MIN_AGREEMENT = 95


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


_IMPORTED: dict[str, tuple] = {}  # one import and run for the module's tests


@pytest.fixture
def scored(shared_data, tmp_path_factory):
    data = shared_data("tau-bench-airline")
    if "run" not in _IMPORTED:
        out = tmp_path_factory.mktemp("tau-bench")
        imported = cli("import", "tau-bench", data / SOURCE, "--out", out)
        assert imported.exit_code == 0, imported.output
        run = cli("run", out, "--format", "jsonl")
        assert run.exit_code == 0, run.output
        _IMPORTED["run"] = (out, [json.loads(line) for line in run.stdout.splitlines()])
    return _IMPORTED["run"]


def predicted_success(row: dict) -> bool:
    """Tool correctness 1.0, and task success passed where the task names outputs (a task
    without outputs has no task-success axis: its end state is only seen through the writes)."""
    axes = row["axes"]
    return axes["tool_correctness"]["score"] == 1.0 and axes.get("task_success", {"passed": True})["passed"] is True


def test_import_covers_every_run_and_is_pre_registered(scored):
    out, rows = scored
    assert len(rows) == 100
    assert len({row["trajectory_id"] for row in rows}) == 100
    assert len({row["rubric"] for row in rows}) == 25
    assert all(axis["status"] == "scored" for row in rows for axis in row["axes"].values())
    rubrics = out / "rubrics"
    checked = cli("rubric", "check", rubrics, "--lock", rubrics / "rubrics.lock")
    assert checked.exit_code == 0, checked.output


def test_agreement_with_tau_bench_reward(scored):
    _, rows = scored
    matrix = Counter((predicted_success(row), row["metadata"]["reward"] == 1.0) for row in rows)
    agree = matrix[(True, True)] + matrix[(False, False)]
    print(f"\ntau-bench airline, {len(rows)} runs: judgekit (rows) vs tau-bench reward (columns)")
    print(f"{'':>16}{'reward 1':>10}{'reward 0':>10}")
    print(f"{'judgekit pass':>16}{matrix[(True, True)]:>10}{matrix[(True, False)]:>10}")
    print(f"{'judgekit fail':>16}{matrix[(False, True)]:>10}{matrix[(False, False)]:>10}")
    print(f"agreement: {agree}/{len(rows)}")
    for row in rows:
        if predicted_success(row) != (row["metadata"]["reward"] == 1.0):
            print(f"  disagree: {row['trajectory_id']} reward={row['metadata']['reward']}")
    assert sum(matrix.values()) == 100
    assert agree >= MIN_AGREEMENT


def test_every_result_is_valid_against_the_exported_result_schema(scored):
    # The result records' leaves (points, notes, checks, counts) are plain dataclasses that
    # judgekit's scorers fill: the JSON a run writes must still be exactly the schema's, types
    # included (JSON Schema tells true from 1, which a pydantic read-back would coerce).
    from pathlib import Path

    from jsonschema import Draft202012Validator

    schema = json.loads((Path(__file__).resolve().parent.parent / "schemas" / "result.schema.json").read_text())
    validator = Draft202012Validator(schema)
    _, rows = scored
    problems = [f"{row['trajectory_id']}: {error.json_path}: {error.message}"
                for row in rows for error in validator.iter_errors(row)]
    assert not problems, problems[:5]
    items = [item for row in rows for item in row["axes"]["tool_correctness"]["items"]]
    assert len(items) > 500 and all(type(item["earned"]) is bool for item in items)
