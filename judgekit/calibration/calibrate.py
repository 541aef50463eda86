"""``judgekit calibrate``: run the judge on the labelled trajectories, measure, decide, record.

For each rubric with labelled items: run its judge (through the cache) on those trajectories,
compare with the human labels (``agreement``), decide per axis against the thresholds, compare
with the previous approval of the same rubric (drift), and write the approval record.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from judgekit._version import __version__
from judgekit.calibration._aggregate import reference_labels
from judgekit.calibration.agreement import AgreementReport, BinaryAxisReport, GradedAxisReport, agreement
from judgekit.calibration.approval import (
    ApprovalRecord,
    AxisApproval,
    JudgeIdentity,
    Thresholds,
    decide,
    drift_against,
    latest_approval,
    now,
    write_approval,
)
from judgekit.calibration.labels import Label, load_labels
from judgekit.calibration.verdicts import JudgeVerdictRecord
from judgekit.errors import InputError
from judgekit.results import FaithfulnessResult, TaskSuccessResult
from judgekit.scoring import RunOptions, score_suite_with_repeats
from judgekit.suite import LoadedSuite


def verdict_record(trajectory_id: str, axis_result, repeat: int) -> JudgeVerdictRecord | None:
    """What the judge itself said, as a verdicts-file record (None when no judge took part)."""
    judge = axis_result.judge
    if judge is None:
        return None
    common = {"trajectory_id": trajectory_id, "axis": axis_result.axis, "judge": judge.model_pin, "repeat": repeat}
    if axis_result.status == "unscored":
        return JudgeVerdictRecord(**common, unscored_reason=axis_result.unscored_reason or "unscored")
    if isinstance(axis_result, FaithfulnessResult):
        return JudgeVerdictRecord(**common, score=axis_result.score)
    if isinstance(axis_result, TaskSuccessResult):
        check = next((c for c in axis_result.checks if c.source == "judge"), None)
        if check is None:
            return None
        return JudgeVerdictRecord(**common, verdict="pass" if check.passed else "fail")
    return None


@dataclass
class RubricCalibration:
    rubric: str
    report: AgreementReport
    record: ApprovalRecord
    path: Path | None


def _section_for(report: AgreementReport, axis: str):
    for section in report.axes:
        if section.axis == axis and isinstance(section, (BinaryAxisReport, GradedAxisReport)):
            return section
    return None


def _matched(labels: list[Label], records: list[JudgeVerdictRecord], axis: str) -> list[tuple[float, float]]:
    """(human, judge) per labelled item with a scored first verdict; pass = 1.0, fail = 0.0."""
    refs = reference_labels(labels).items
    judged = {r.trajectory_id: r for r in records if r.axis == axis and r.repeat in (None, 0) and r.unscored_reason is None}
    matched = []
    for (tid, ref_axis), ref in sorted(refs.items()):
        if ref_axis != axis or tid not in judged:
            continue
        rec = judged[tid]
        human = float(ref.value == "pass") if ref.kind == "binary" else float(ref.value)
        judge = float(rec.verdict == "pass") if rec.verdict in ("pass", "fail") else float(rec.score or 0.0)
        matched.append((human, judge))
    return matched


def calibrate(
    loaded: LoadedSuite,
    labels_path: Path,
    *,
    calibration_dir: Path,
    options: RunOptions,
    thresholds: Thresholds,
    seed: int = 0,
    n_boot: int = 2000,
    threshold: float = 0.5,
    write: bool = True,
) -> list[RubricCalibration]:
    labels = load_labels(labels_path)
    if not labels:
        raise InputError("no labels in the file", labels_path)
    label_set_sha256 = hashlib.sha256(labels_path.read_bytes()).hexdigest()
    options.only_ids = {label.trajectory_id for label in labels}
    results, _, repeats = score_suite_with_repeats(loaded, options)
    by_rubric: dict[str, list[str]] = defaultdict(list)
    for result in results:
        by_rubric[result.rubric].append(result.trajectory_id)
    if not by_rubric:
        raise InputError("none of the labelled trajectory ids is in the suite", labels_path)

    outcomes = []
    for rubric_ref, ids in sorted(by_rubric.items()):
        rubric = loaded.rubrics[rubric_ref]
        wanted = set(ids)
        records = [
            rec
            for (tid, _axis, repeat), axis_result in sorted(repeats.items())
            if tid in wanted and (rec := verdict_record(tid, axis_result, repeat)) is not None
        ]
        rubric_labels = [label for label in labels if label.trajectory_id in wanted and label.axis in rubric.judged_axes()]
        if not records:
            raise InputError(f"rubric {rubric_ref} has no judged axis among the labelled items", labels_path)
        report = agreement(rubric_labels, records, seed=seed, n_boot=n_boot, threshold=threshold)
        provenance = next(
            (r.axes[a].judge for r in results if r.rubric == rubric_ref for a in r.axes if r.axes[a].judge), None
        )
        if provenance is None:
            raise InputError(f"no judge verdict for rubric {rubric_ref}: every judged axis failed on input", labels_path)
        identity = JudgeIdentity.of(provenance)
        previous = latest_approval(calibration_dir, rubric.id)
        axes: dict[str, AxisApproval] = {}
        for axis in rubric.judged_axes():
            section = _section_for(report, axis)
            if section is None:
                continue
            stats = section if isinstance(section, BinaryAxisReport) else section.binarised
            decision, reasons = decide(axis, section.kind, stats.n, stats.kappa, thresholds)
            matched = _matched(rubric_labels, records, axis)
            pairs = [(human >= threshold, judge >= threshold) for human, judge in matched]
            axes[axis] = AxisApproval(
                axis=axis, kind=section.kind, n=stats.n, kappa=stats.kappa, accuracy=stats.accuracy,
                tpr=stats.tpr, tnr=stats.tnr,
                mean_human=sum(h for h, _ in matched) / len(matched) if matched else None,
                mean_judge=sum(j for _, j in matched) / len(matched) if matched else None,
                pairs=pairs, decision=decision, reasons=reasons,
            )
        record = ApprovalRecord(
            fingerprint=identity.fingerprint, judge=identity, label_set_sha256=label_set_sha256,
            labels_file=str(labels_path), thresholds=thresholds, axes=axes, decided_at=now(),
            judgekit_version=__version__,
        )
        if previous is not None:
            record.drift = [d for a in axes.values() if (d := drift_against(previous, a, thresholds)) is not None]
        path = write_approval(calibration_dir, record) if write else None
        outcomes.append(RubricCalibration(rubric_ref, report, record, path))
    return outcomes
