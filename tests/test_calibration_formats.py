"""Labels and verdicts files: validation, loaders with file:line errors, JSON Schemas."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import jsonschema
import pytest
from pydantic import ValidationError

from judgekit.calibration import (
    JudgeVerdictRecord,
    Label,
    load_labels,
    load_verdicts,
    schemas,
)
from judgekit.errors import InputError

WHEN = "2025-03-02T10:00:00Z"


def label(**fields):
    base = {"trajectory_id": "t1", "axis": "task_success", "labeler": "alice", "labeled_at": WHEN}
    return {**base, **fields}


def verdict(**fields):
    return {"trajectory_id": "t1", "axis": "task_success", **fields}


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("fields", "kind"),
    [
        pytest.param({"label": "pass"}, "binary", id="binary_pass"),
        pytest.param({"label": "fail", "item_kind": "binary"}, "binary", id="binary_with_kind"),
        pytest.param({"score": 0.25, "axis": "faithfulness"}, "graded", id="graded"),
        pytest.param({"score": 0.0, "item_kind": "graded"}, "graded", id="graded_zero"),
        pytest.param({"label": "B"}, "pairwise", id="pairwise"),
        pytest.param({"label": "A", "item_kind": "pairwise", "note": "close call"}, "pairwise", id="pairwise_note"),
    ],
)
def test_label_kinds(fields, kind):
    lab = Label.model_validate(label(**fields))
    assert lab.item_kind == kind
    assert lab.format_version == 1


@pytest.mark.parametrize(
    "fields",
    [
        pytest.param({}, id="nothing"),
        pytest.param({"label": "pass", "score": 0.5}, id="label_and_score"),
        pytest.param({"score": 1.5}, id="score_above_1"),
        pytest.param({"score": -0.1}, id="score_below_0"),
        pytest.param({"label": "maybe"}, id="unknown_label"),
        pytest.param({"label": "pass", "item_kind": "pairwise"}, id="kind_disagrees_binary"),
        pytest.param({"label": "A", "item_kind": "binary"}, id="kind_disagrees_pairwise"),
        pytest.param({"score": 0.3, "item_kind": "binary"}, id="kind_disagrees_graded"),
        pytest.param({"label": "pass", "axis": "style"}, id="unknown_axis"),
        pytest.param({"label": "pass", "extra": 1}, id="extra_key"),
        pytest.param({"label": "pass", "format_version": 2}, id="future_version"),
    ],
)
def test_label_invalid(fields):
    with pytest.raises(ValidationError):
        Label.model_validate(label(**fields))


@pytest.mark.parametrize(
    "fields",
    [
        pytest.param({"verdict": "pass"}, id="binary"),
        pytest.param({"verdict": "fail", "score": 0.2}, id="binary_with_confidence"),
        pytest.param({"score": 0.7, "axis": "faithfulness"}, id="graded"),
        pytest.param({"verdict": "A", "order": "swapped", "judge": "m@1"}, id="pairwise"),
        pytest.param({"verdict": "B", "repeat": 3}, id="repeat"),
        pytest.param({"unscored_reason": "invalid_reply"}, id="unscored"),
        pytest.param({"verdict": None, "unscored_reason": "timeout", "order": "swapped"}, id="unscored_pairwise"),
    ],
)
def test_verdict_valid(fields):
    JudgeVerdictRecord.model_validate(verdict(**fields))


@pytest.mark.parametrize(
    "fields",
    [
        pytest.param({}, id="nothing"),
        pytest.param({"verdict": "pass", "unscored_reason": "x"}, id="verdict_and_unscored"),
        pytest.param({"score": 0.3, "unscored_reason": "x"}, id="score_and_unscored"),
        pytest.param({"verdict": "A", "score": 0.3}, id="pairwise_with_score"),
        pytest.param({"verdict": "pass", "order": "swapped"}, id="order_on_binary"),
        pytest.param({"verdict": "pass", "repeat": -1}, id="negative_repeat"),
        pytest.param({"verdict": "pass", "unscored_reason": ""}, id="empty_reason"),
        pytest.param({"verdict": "yes"}, id="unknown_verdict"),
    ],
)
def test_verdict_invalid(fields):
    with pytest.raises(ValidationError):
        JudgeVerdictRecord.model_validate(verdict(**fields))


def test_load_labels_round_trip(tmp_path):
    rows = [label(label="pass"), label(label="fail", labeler="bob"), label(trajectory_id="t2", score=0.4, axis="faithfulness")]
    loaded = load_labels(write_jsonl(tmp_path / "labels.jsonl", rows))
    assert [lab.kind for lab in loaded] == ["binary", "binary", "graded"]
    assert loaded[0].labeled_at == datetime(2025, 3, 2, 10, tzinfo=UTC)


def test_duplicate_label_names_both_lines(tmp_path):
    rows = [label(label="pass"), label(trajectory_id="t2", label="pass"), label(label="fail")]
    with pytest.raises(InputError) as err:
        load_labels(write_jsonl(tmp_path / "labels.jsonl", rows))
    assert err.value.line == 3
    assert "lines 1 and 3" in str(err.value)
    assert str(err.value).startswith(f"{tmp_path / 'labels.jsonl'}:3: ")


def test_labels_of_one_item_must_share_kind(tmp_path):
    rows = [label(label="pass"), label(label="A", labeler="bob")]
    with pytest.raises(InputError, match="binary on line 1 but pairwise"):
        load_labels(write_jsonl(tmp_path / "labels.jsonl", rows))


def test_label_error_has_file_and_line(tmp_path):
    path = tmp_path / "labels.jsonl"
    path.write_text(json.dumps(label(label="pass")) + "\n\n" + json.dumps(label(labeler="bob", score=2)) + "\n")
    with pytest.raises(InputError) as err:
        load_labels(path)
    assert err.value.line == 3
    assert "score" in str(err.value)


def test_duplicate_verdict_names_both_lines(tmp_path):
    rows = [verdict(verdict="pass"), verdict(verdict="pass", repeat=1), verdict(verdict="fail", repeat=0)]
    with pytest.raises(InputError) as err:
        load_verdicts(write_jsonl(tmp_path / "v.jsonl", rows))
    assert err.value.line == 3
    assert "lines 1 and 3" in str(err.value)


def test_same_item_in_both_orders_is_not_a_duplicate(tmp_path):
    rows = [verdict(verdict="A"), verdict(verdict="B", order="swapped")]
    assert len(load_verdicts(write_jsonl(tmp_path / "v.jsonl", rows))) == 2


def test_missing_file_is_input_error(tmp_path):
    with pytest.raises(InputError, match="file not found"):
        load_verdicts(tmp_path / "absent.jsonl")


def test_schemas_validate_real_records():
    found = schemas()
    assert set(found) == {"label", "verdict", "agreement_report", "corrected_rate"}
    jsonschema.validate(label(label="A", item_kind="pairwise"), found["label"])
    jsonschema.validate(verdict(verdict="B", order="swapped", repeat=1), found["verdict"])
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(label(label="pass", surprise=True), found["label"])
    for schema in found.values():
        for model in [schema, *schema.get("$defs", {}).values()]:
            for name, prop in model.get("properties", {}).items():
                assert prop.get("description"), f"{model.get('title')}.{name} has no description"
