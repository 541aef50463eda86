"""Calibration: measure a judge against human labels, decide per axis, record the decision.

``calibrate`` takes verdicts however they were produced (a run of this suite, another tool's
verdicts file) and decides; ``calibrate_suite`` produces them by running the suite's judge on
the labelled trajectories (``plan_run(select=labelled ids, repeats=k)``, through the cache),
then calls ``calibrate`` per rubric and writes the approval records.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from judgekit._time import utc_now
from judgekit._version import __version__
from judgekit.axes import axis_named, judged_axes
from judgekit.calibration._aggregate import References, aggregate, reference_labels
from judgekit.calibration.agreement import AgreementReport, BinaryAxisReport, GradedAxisReport, agreement
from judgekit.calibration.approval import (
    ApprovalRecord,
    AxisApproval,
    JudgeIdentity,
    Thresholds,
    decide,
    drift_against,
    label_sample,
    latest_approval,
    statement_of,
    write_approval,
)
from judgekit.calibration.bounds import axis_bounds
from judgekit.calibration.labels import Label, load_labels
from judgekit.calibration.verdicts import JudgeVerdictRecord
from judgekit.errors import InputError
from judgekit.results import AxisResultBase
from judgekit.suite import LoadedSuite


def verdict_record(trajectory_id: str, axis_result: AxisResultBase, repeat: int) -> JudgeVerdictRecord | None:
    """What the judge itself said, as a verdicts-file record (None when no judge took part)."""
    judge = axis_result.judge
    if judge is None:
        return None
    common = {"trajectory_id": trajectory_id, "axis": axis_result.axis, "judge": judge.model_pin, "repeat": repeat}
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


def _matched(refs: References, records: list[JudgeVerdictRecord], axis: str, threshold: float
             ) -> list[tuple[str, float, float]]:
    """(trajectory id, human, judge) per labelled item with a scored verdict; pass = 1.0, fail =
    0.0. Repeats are combined as the agreement report combines them (majority; graded: mean)."""
    by_item: dict[str, list[JudgeVerdictRecord]] = defaultdict(list)
    for rec in records:
        if rec.axis == axis:
            by_item[rec.trajectory_id].append(rec)
    matched = []
    for (tid, ref_axis), ref in sorted(refs.items.items()):
        if ref_axis != axis or ref.kind not in ("binary", "graded") or not by_item.get(tid):
            continue
        judged = aggregate(by_item[tid], ref.kind, threshold).value
        if judged is None:
            continue  # unscored: never a pass or a fail
        human = float(ref.value == "pass") if ref.kind == "binary" else float(ref.value)
        judge = float(judged == "pass") if ref.kind == "binary" else float(judged)
        matched.append((tid, human, judge))
    return matched


def decide_axis(section, matched: list[tuple[str, float, float]], labels: Sequence[Label], thresholds: Thresholds,
                *, threshold: float = 0.5, seed: int = 0, n_draws: int = 2000) -> AxisApproval:
    """The decision for one axis: its bounds from the matched items, the rule, the statement."""
    stats = section if isinstance(section, BinaryAxisReport) else section.binarised
    human = [h for _, h, _ in matched]
    judge = [j for _, _, j in matched]
    graded = isinstance(section, GradedAxisReport)
    threshold = threshold if graded else 0.5  # a binary axis is pass (1.0) or fail (0.0): never re-cut
    bounds = axis_bounds(section.kind, human, judge, threshold=threshold, seed=seed, name=section.axis,
                         n_draws=n_draws, confidence=thresholds.confidence)
    figure = {name: bound.bound for name, bound in bounds.bounds.items()}
    axis = AxisApproval(
        axis=section.axis, kind=section.kind, n=stats.n, kappa=stats.kappa, accuracy=stats.accuracy,
        tpr=stats.tpr, tnr=stats.tnr, spearman=section.spearman if graded else None, mae=section.mae if graded else None,
        mean_human=sum(human) / len(human) if human else None,
        mean_judge=sum(judge) / len(judge) if judge else None,
        pairs=[(h >= threshold, j >= threshold) for h, j in zip(human, judge)],
        scores=list(zip(human, judge)) if graded else [], threshold=threshold, bounds_seed=seed, bounds_draws=n_draws,
        n_pass=bounds.n_pass, n_fail=bounds.n_fail, confidence=bounds.confidence,
        kappa_lower=figure.get("kappa"), tpr_lower=figure.get("tpr"), tnr_lower=figure.get("tnr"),
        spearman_lower=figure.get("spearman"), mae_upper=figure.get("mae"),
        methods={name: bound.method for name, bound in bounds.bounds.items()},
        sample=label_sample(labels, section.axis, {tid for tid, _, _ in matched}),
        decision="refused", reasons=[],
    )
    decision, reasons = decide(axis, thresholds)
    axis = axis.model_copy(update={"decision": decision, "reasons": reasons})
    return axis.model_copy(update={"statement": statement_of(axis, thresholds)})


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
    threshold: float = 0.5,
    report: AgreementReport | None = None,
    references: References | None = None,
) -> ApprovalRecord:
    """The approval record of the judge ``identity`` on these labels and its verdicts on them.

    ``axes``: the judged axes to decide (default: every axis with labels). ``previous``: the
    last approval of the same rubric, for the drift check. ``report``: the agreement report
    of these very labels and verdicts, when the caller computed it already (and ``references``,
    the labels' reference values it was computed from).
    """
    refs = references if references is not None else reference_labels(labels)  # once, shared
    if report is None:
        report = agreement(labels, verdict_records, seed=seed, n_boot=n_boot, threshold=threshold, references=refs)
    wanted = list(axes) if axes is not None else sorted({label.axis for label in labels})
    thresholds = Thresholds.of(thresholds)
    decided: dict[str, AxisApproval] = {}
    for name in wanted:
        section = _section_for(report, name)
        if section is None:
            continue
        matched = _matched(refs, list(verdict_records), name, threshold)
        decided[name] = decide_axis(section, matched, labels, thresholds, threshold=threshold, seed=seed,
                                    n_draws=n_boot)
    record = ApprovalRecord(
        fingerprint=identity.fingerprint, judge=identity, label_set_sha256=label_set_sha256,
        labels_file=labels_file, thresholds=thresholds, axes=decided, decided_at=utc_now(),
        judgekit_version=__version__,
    )
    if previous is not None:
        record.drift = [d for a in decided.values() if (d := drift_against(previous, a, thresholds)) is not None]
    return record


def calibrate_suite(
    loaded: LoadedSuite,
    labels_path: Path,
    *,
    calibration_dir: Path,
    thresholds: Thresholds,
    options=None,
    repeats: int = 1,
    seed: int = 0,
    n_boot: int = 2000,
    threshold: float = 0.5,
    write: bool = True,
) -> list[RubricCalibration]:
    """Run the suite's judge on the labelled trajectories (``repeats`` times each) and
    calibrate each rubric's judge on them; approval records are written unless ``write`` is off."""
    from judgekit.run.api import RunOptions, local_executor
    from judgekit.run.merge import judged_results
    from judgekit.run.plan import plan_run

    options = options or RunOptions()
    labels = load_labels(labels_path)
    if not labels:
        raise InputError("no labels in the file", labels_path)
    label_set_sha256 = hashlib.sha256(labels_path.read_bytes()).hexdigest()
    plan = plan_run(loaded, select={label.trajectory_id for label in labels}, repeats=repeats,
                    override=options.override, allow_floating=options.allow_floating)
    if not plan.items:
        raise InputError("none of the labelled trajectory ids is in the suite", labels_path)
    verdicts = []
    if plan.judgements:
        executor = local_executor(loaded, options)
        try:
            verdicts = asyncio.run(executor.execute(plan.jobs))
        finally:
            executor.close()
    by_rubric: dict[str, list[tuple[str, AxisResultBase, int]]] = defaultdict(list)
    for item, axis, repeat, result in judged_results(plan, verdicts):
        by_rubric[plan.items[item].rubric].append((plan.items[item].trajectory_id, result, repeat))
    rubrics_seen = {result.rubric for result in plan.items}

    outcomes = []
    for rubric_ref in sorted(rubrics_seen):
        rubric = loaded.rubrics[rubric_ref]
        judged = by_rubric.get(rubric_ref, [])
        ids = {result.trajectory_id for result in plan.items if result.rubric == rubric_ref}
        axes = [axis.name for axis in judged_axes(rubric)]
        records = [rec for tid, result, repeat in sorted(judged, key=lambda j: (j[0], j[1].axis, j[2]))
                   if (rec := verdict_record(tid, result, repeat)) is not None]
        rubric_labels = [label for label in labels if label.trajectory_id in ids and label.axis in axes]
        if not records:
            raise InputError(f"rubric {rubric_ref} has no judged axis among the labelled items", labels_path)
        provenance = next((result.judge for _, result, _ in judged if result.judge is not None), None)
        if provenance is None:
            raise InputError(f"no judge verdict for rubric {rubric_ref}: every judged axis failed on input", labels_path)
        refs = reference_labels(rubric_labels)
        report = agreement(rubric_labels, records, seed=seed, n_boot=n_boot, threshold=threshold, references=refs)
        record = calibrate(
            rubric_labels, records, JudgeIdentity.of(provenance), thresholds,
            latest_approval(calibration_dir, rubric.id), axes=axes, labels_file=str(labels_path),
            label_set_sha256=label_set_sha256, seed=seed, n_boot=n_boot, threshold=threshold, report=report,
            references=refs,
        )
        path = write_approval(calibration_dir, record) if write else None
        outcomes.append(RubricCalibration(rubric_ref, report, record, path))
    return outcomes
