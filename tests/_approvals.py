"""Genuine approvals for tests: labels written in the calibration folder, the judge's verdicts,
decided by ``calibrate`` and written with their evidence, exactly as ``judgekit calibrate``
writes them. A test that edits the files afterwards plays the hostile hand."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone
from pathlib import Path

from judgekit.calibration import JudgeVerdictRecord, Label
from judgekit.calibration.approval_record import JudgeIdentity, Thresholds
from judgekit.calibration.calibrate import calibrate
from judgekit.calibration.evidence import write_calibration

LABELLED_AT = datetime(2026, 12, 1, tzinfo=timezone.utc)


def binary_evidence(pairs: list[tuple[bool, bool]], axis: str = "task_success", judge: str = "judge",
                    ) -> tuple[list[Label], list[JudgeVerdictRecord]]:
    """One labelled item per (human pass, judge pass) pair, ids t000, t001, ..."""
    labels, verdicts = [], []
    for i, (human, said) in enumerate(pairs):
        tid = f"t{i:03d}"
        labels.append(Label(trajectory_id=tid, axis=axis, label="pass" if human else "fail", labeler="alice",
                            labeled_at=LABELLED_AT))
        verdicts.append(JudgeVerdictRecord(trajectory_id=tid, axis=axis, verdict="pass" if said else "fail", judge=judge,
                                           cache_key=question_key(tid, axis)))
    return labels, verdicts


def question_key(trajectory_id: str, axis: str, repeat: int = 0) -> str:
    """A cache key for a verdict made up in a test (every calibration verdict names its question)."""
    return hashlib.sha256(f"{trajectory_id}\n{axis}\n{repeat}".encode()).hexdigest()


def as_persons(labels: list[Label]) -> list[Label]:
    """Test labels stand for a person's: one that does not say who made it is made a person's
    (``labeler_kind: person``, as ``judgekit label`` writes it); one that says ``model`` stays so."""
    return [label.model_copy(update={"labeler_kind": label.labeler_kind or "person"}) for label in labels]


def write_labels(path: Path, labels: list[Label]) -> Path:
    """The labels file, as a person's labelling session writes it (``as_persons``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(label.model_dump_json(exclude_none=True) + "\n" for label in as_persons(labels)))
    return path


def approve(calibration_dir: Path, identity: JudgeIdentity, labels: list[Label], verdicts: list[JudgeVerdictRecord],
            thresholds: Thresholds | None = None) -> Path:
    """Calibrate ``identity`` on these labels and verdicts and write the record with its evidence
    (the labels in ``<calibration_dir>/<rubric id>/labels.jsonl``); the record's path."""
    rubric_id = identity.rubric.split("@", 1)[0]
    labels = as_persons(labels)
    labels_path = write_labels(Path(calibration_dir) / rubric_id / "labels.jsonl", labels)
    record = calibrate(labels, verdicts, identity, thresholds or Thresholds(), n_boot=200)
    return write_calibration(Path(calibration_dir), record, verdicts, labels_path)


def approve_pairs(calibration_dir: Path, identity: JudgeIdentity, pairs: list[tuple[bool, bool]],
                  thresholds: Thresholds | None = None, axis: str = "task_success") -> Path:
    labels, verdicts = binary_evidence(pairs, axis, identity.model_pin)
    return approve(calibration_dir, identity, labels, verdicts, thresholds)


def edit_json(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data, indent=2))
