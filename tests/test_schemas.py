"""The JSON Schemas committed under schemas/ are exactly what the code generates, and valid."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from jsonschema import Draft202012Validator

from judgekit.schemas import SCHEMA_NAMES, schema_for

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("name", SCHEMA_NAMES)
def test_committed_schema_matches_the_code(name):
    committed = json.loads((ROOT / "schemas" / f"{name}.schema.json").read_text())
    assert committed == schema_for(name), f"schemas/{name}.schema.json is stale: run `python -m judgekit.schemas schemas`"
    Draft202012Validator.check_schema(committed)


@pytest.mark.parametrize(
    ("name", "path"),
    [
        pytest.param("rubric", "rubrics/update-email.yaml", id="rubric"),
        pytest.param("suite", "examples/email-update/suite.yaml", id="suite"),
        pytest.param("suite", "examples/email-update/calibration.yaml", id="calibration_suite"),
    ],
)
def test_bundled_files_validate_against_their_schema(name, path):
    # YAML reads an unquoted date as a date; editors (YAML 1.2) and the schema see a string.
    document = json.loads(json.dumps(yaml.safe_load((ROOT / path).read_text()), default=str))
    errors = list(Draft202012Validator(schema_for(name)).iter_errors(document))
    assert not errors, [e.message for e in errors]


@pytest.mark.parametrize(
    ("name", "path"),
    [
        pytest.param("trajectory", "examples/email-update/trajectories.jsonl", id="trajectories"),
        pytest.param("labels", "calibration/update-email/labels.jsonl", id="labels"),
    ],
)
def test_bundled_lines_validate_against_their_schema(name, path):
    validator = Draft202012Validator(schema_for(name))
    for line in (ROOT / path).read_text().splitlines():
        assert not list(validator.iter_errors(json.loads(line)))


def test_results_of_a_judged_run_are_valid_against_the_result_schema():
    # Every kind of record a run writes (task-success checks, faithfulness claims with their
    # citations, tool points and counts), written as JSON, is exactly the exported schema's.
    from judgekit.judge.resolve import JudgeOverride
    from judgekit.run import RunOptions, run_suite
    from judgekit.testing import ScriptedOpenAIServer
    from test_judge_runner import MODEL, scripted_judge

    validator = Draft202012Validator(schema_for("result"))
    with ScriptedOpenAIServer(scripted_judge) as server:
        record = run_suite(ROOT / "examples" / "email-update", options=RunOptions(
            override=JudgeOverride(model=MODEL, api_base=server.base_url), use_cache=False))
    rows = [json.loads(result.model_dump_json()) for result in record.results]
    assert {axis for row in rows for axis in row["axes"]} == {"task_success", "tool_correctness", "faithfulness"}
    assert any(row["axes"]["faithfulness"].get("claims") for row in rows)
    for row in rows:
        errors = list(validator.iter_errors(row))
        assert not errors, (row["trajectory_id"], [e.message for e in errors[:3]])
