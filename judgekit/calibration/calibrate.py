"""Calibration: measure a judge against human labels, decide per axis, record the decision.

``calibrate`` takes verdicts however they were produced (a run of this suite, another tool's
verdicts file) and decides. Producing them is a run's work: ``judgekit.run.calibrate.calibrate_suite``
runs the suite's judge on the labelled trajectories and calls ``calibrate`` per rubric, so this
package consumes verdicts only and imports nothing of the run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from judgekit._util.clock import as_utc, utc_now
from judgekit._util.version import __version__
from judgekit.axes.table import axis_named
from judgekit.calibration._aggregate import References, reference_labels
from judgekit.calibration.agreement import AgreementReport, BinaryAxisReport, GradedAxisReport, agreement
from judgekit.calibration.approval import drift_against
from judgekit.calibration.approval_record import ApprovalRecord, AxisApproval, JudgeIdentity, Thresholds
from judgekit.calibration.evidence import (
    CLOCK_SKEW,
    axis_threshold,
    items_of,
    kind_of,
    measure_axis,
)
from judgekit.calibration.labels import Label
from judgekit.calibration.verdicts import JudgeVerdictRecord
from judgekit.errors import InputError
from judgekit.results import AxisResultBase


def verdict_record(trajectory_id: str, axis_result: AxisResultBase, repeat: int) -> JudgeVerdictRecord | None:
    """What the judge itself said, as a verdicts-file record with its question's cache key
    (None when no judge took part)."""
    judge = axis_result.judge
    if judge is None:
        return None
    common = {"trajectory_id": trajectory_id, "axis": axis_result.axis, "judge": judge.model_pin, "repeat": repeat,
              "cache_key": judge.cache_key}
    if axis_result.status == "unscored":
        return JudgeVerdictRecord(**common, unscored_reason=axis_result.unscored_reason or "unscored")
    if axis_result.status != "scored":
        return None
    axis = axis_named(axis_result.axis)
    value = axis.judge_value(axis_result)
    if value is None:
        return None
    if axis.binary:
        return JudgeVerdictRecord(**common, verdict="pass" if value >= 0.5 else "fail")
    return JudgeVerdictRecord(**common, score=value)


def unjudged_records(items, axes: Sequence[str], judged: set[tuple[str, str]]) -> list[JudgeVerdictRecord]:
    """An unscored verdict for each judged axis of a labelled trajectory that could not be put
    to the judge (an input error): the item still counts as labelled, so a judge is never
    approved on the items that happened to be readable."""
    return [JudgeVerdictRecord(trajectory_id=item.trajectory_id, axis=name, repeat=0, unscored_reason="input_error")
            for item in items for name in axes
            if (item.trajectory_id, name) not in judged and (res := item.axes.get(name)) is not None
            and res.status == "error"]


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


def _shown(section) -> AxisApproval | None:
    """The agreement report's figures of one axis, to be shown beside its bounds."""
    if section is None:
        return None
    stats = section if isinstance(section, BinaryAxisReport) else section.binarised
    graded = isinstance(section, GradedAxisReport)
    return AxisApproval.model_construct(
        kappa=stats.kappa, accuracy=stats.accuracy, tpr=stats.tpr, tnr=stats.tnr,
        spearman=section.spearman if graded else None, mae=section.mae if graded else None)


def calibrate(
    labels: Sequence[Label],
    verdict_records: Sequence[JudgeVerdictRecord],
    identity: JudgeIdentity,
    thresholds: Thresholds,
    previous: ApprovalRecord | None = None,
    *,
    axes: Sequence[str] | None = None,
    labels_file: str = "",
    label_set_sha256: str = "",
    seed: int = 0,
    n_boot: int = 2000,
    threshold: float | None = None,
    report: AgreementReport | None = None,
    references: References | None = None,
) -> ApprovalRecord:
    """The approval record of the judge ``identity`` on these labels and its verdicts on them.

    Each axis is decided on its items (``evidence.items_of``) by the rule for its kind in the
    axis table, its bounds measured with this judgekit's seed and draws (``evidence.measure_axis``):
    exactly what the gate re-derives. ``axes``: the judged axes to decide (default: every axis with
    labels). ``previous``: the last approval of the same rubric, for the drift check. ``seed`` and
    ``n_boot``: the agreement report's intervals (shown, never deciding). ``threshold``: a graded
    score counting as pass (default: ``thresholds.graded_pass``). ``report``: the agreement report
    of these very labels and verdicts, when the caller computed it already (and ``references``,
    the labels' reference values it was computed from). The record is written by
    ``evidence.write_calibration``, with the verdicts beside it.
    """
    thresholds = Thresholds.of(thresholds)
    if threshold is not None and threshold != thresholds.graded_pass:
        thresholds = thresholds.model_copy(update={"graded_pass": threshold})
    refs = references if references is not None else reference_labels(labels)  # once, shared
    if report is None:
        report = agreement(labels, verdict_records, seed=seed, n_boot=n_boot, threshold=thresholds.graded_pass,
                           references=refs)
    wanted = list(axes) if axes is not None else sorted({label.axis for label in labels})
    decided: dict[str, AxisApproval] = {}
    for name in wanted:
        kind = kind_of(name)
        if kind is None:
            raise InputError(f"{name!r} is not an axis or a safety question judgekit knows")
        items, _ = items_of(refs, verdict_records, name, kind, axis_threshold(kind, thresholds))
        section = _section_for(report, name)
        if section is None and not items:
            continue
        decided[name] = measure_axis(name, kind, items, labels, thresholds, shown=_shown(section))
    record = ApprovalRecord(
        fingerprint=identity.fingerprint, judge=identity, label_set_sha256=label_set_sha256,
        labels_file=labels_file, thresholds=thresholds, axes=decided, decided_at=utc_now(),
        judgekit_version=__version__,
    )
    if previous is not None:
        record.drift = [d for a in decided.values() if (d := drift_against(previous, a, thresholds)) is not None]
    return record


def check_label_dates(labels: Sequence[Label], path: Path, now=utc_now) -> None:
    """A label dated in the future is refused: nobody labelled it yet."""
    limit = now() + CLOCK_SKEW
    for label in labels:
        if label.labeled_at is not None and as_utc(label.labeled_at) > limit:
            raise InputError(f"{label.trajectory_id[:80]!r} on {label.axis} is labelled "
                             f"{label.labeled_at.isoformat()}, in the future: fix its labeled_at", path)
