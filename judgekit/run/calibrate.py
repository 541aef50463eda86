"""Calibration's runs: the suite's judge asked the labelled questions, then decided on.

``calibrate_suite`` runs the suite's judge on the labelled trajectories
(``plan_run(select=labelled ids, repeats=k)``, through the cache), calls
``judgekit.calibration.calibrate.calibrate`` per rubric and writes each approval record beside
the verdicts it rests on (``judgekit.calibration.evidence``), from which the gate re-derives it.
``spot_check`` re-asks a sample of an approval's recorded questions past the cache
(``judgekit.calibration.spot_check`` says what it finds). Both live with the run because they run
the suite; the calibration package consumes verdicts only.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
from collections import defaultdict
from pathlib import Path

from judgekit.axes.table import judged_axes
from judgekit.calibration._aggregate import reference_labels
from judgekit.calibration.agreement import agreement
from judgekit.calibration.approval_record import JudgeIdentity, Thresholds, find_approval, latest_approval
from judgekit.calibration.calibrate import (
    RubricCalibration,
    calibrate,
    check_label_dates,
    unjudged_records,
    verdict_record,
)
from judgekit.calibration.evidence import relative_to_calibration, within, write_calibration
from judgekit.calibration.labels import load_labels
from judgekit.calibration.spot_check import Difference, RubricSpotCheck, agree, said
from judgekit.calibration.verdicts import JudgeVerdictRecord, load_verdicts
from judgekit.errors import InputError
from judgekit.results import AxisResultBase
from judgekit.run.options import RunOptions
from judgekit.run.options import local_executor
from judgekit.run.jobs import identity_of
from judgekit.run.merge import judged_results
from judgekit.run.plan import plan_run
from judgekit.suite import LoadedSuite

__all__ = ["RubricCalibration", "RubricSpotCheck", "calibrate_suite", "spot_check"]


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
    threshold: float | None = None,
    write: bool = True,
) -> list[RubricCalibration]:
    """Run the suite's judge on the labelled trajectories (``repeats`` times each) and
    calibrate each rubric's judge on them. Unless ``write`` is off, each approval record is
    written with its evidence (``evidence.write_calibration``): the labels file must then lie in
    the calibration folder, where the gate re-reads it."""
    options = options or RunOptions()
    thresholds = Thresholds.of(thresholds)
    if threshold is not None and threshold != thresholds.graded_pass:
        raise InputError(f"--threshold {threshold:g} differs from the suite's approval.graded_pass "
                         f"({thresholds.graded_pass:g}): the gate re-derives approvals with the suite's, so set it "
                         "there", loaded.path)
    labels = load_labels(labels_path)
    if not labels:
        raise InputError("no labels in the file", labels_path)
    check_label_dates(labels, labels_path)
    if write:
        relative_to_calibration(calibration_dir, labels_path, "labels file")  # refused before any judge is paid
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
        records = [rec for tid, result, repeat in judged if (rec := verdict_record(tid, result, repeat)) is not None]
        records += unjudged_records([item for item in plan.items if item.rubric == rubric_ref], axes,
                             {(tid, result.axis) for tid, result, _ in judged})
        records.sort(key=lambda rec: (rec.trajectory_id, rec.axis, rec.effective_repeat))
        rubric_labels = [label for label in labels if label.trajectory_id in ids and label.axis in axes]
        if not records:
            raise InputError(f"rubric {rubric_ref} has no judged axis among the labelled items", labels_path)
        provenance = next((result.judge for _, result, _ in judged if result.judge is not None), None)
        if provenance is None:
            raise InputError(f"no judge verdict for rubric {rubric_ref}: every judged axis failed on input", labels_path)
        refs = reference_labels(rubric_labels)
        report = agreement(rubric_labels, records, seed=seed, n_boot=n_boot, threshold=thresholds.graded_pass,
                           references=refs)
        record = calibrate(
            rubric_labels, records, JudgeIdentity.of(provenance), thresholds,
            latest_approval(calibration_dir, rubric.id), axes=axes, labels_file=str(labels_path),
            label_set_sha256=label_set_sha256, seed=seed, n_boot=n_boot, report=report, references=refs,
        )
        path = write_calibration(calibration_dir, record, records, labels_path) if write else None
        outcomes.append(RubricCalibration(rubric_ref, report, record, path))
    return outcomes


def spot_check(loaded: LoadedSuite, labels_path: Path, *, calibration_dir: Path, sample: int, seed: int = 0,
               options=None, repeats: int = 1) -> list[RubricSpotCheck]:
    """Check the approval of each rubric's judge of today against the questions calibration
    asked (see the module's docstring). ``sample``: recorded questions to re-ask per rubric;
    ``repeats``: as the calibration asked them (its questions' keys name their repeat)."""
    options = options or RunOptions()
    labels = load_labels(labels_path)
    if not labels:
        raise InputError("no labels in the file", labels_path)
    plan = plan_run(loaded, select={label.trajectory_id for label in labels}, repeats=repeats,
                    override=options.override, allow_floating=options.allow_floating)
    by_rubric: dict[str, list[int]] = {}
    for index, judgement in enumerate(plan.judgements):
        by_rubric.setdefault(judgement.job.rubric.ref, []).append(index)
    checks = []
    to_ask: list[tuple[RubricSpotCheck, list[int], dict[tuple[str, int], JudgeVerdictRecord]]] = []
    for rubric_ref, indices in sorted(by_rubric.items()):
        first = plan.judgements[indices[0]].job
        identity = JudgeIdentity(**{name: value for name, value in identity_of(first).items()
                                    if name in JudgeIdentity.model_fields})
        check = RubricSpotCheck(rubric=rubric_ref, fingerprint=identity.fingerprint)
        checks.append(check)
        record = find_approval(calibration_dir, first.rubric.id, identity.fingerprint)
        path = within(calibration_dir, record.verdicts_file or "") if record is not None else None
        if record is None or path is None:
            check.problem = ("no approval of this judge to check" if record is None else
                             "its approval keeps no verdicts file inside the calibration folder")
            continue
        lines = load_verdicts(path)
        recorded = {(v.cache_key, v.effective_repeat): v for v in lines if v.cache_key is not None}
        check.recorded = len(recorded)
        check.unknown = sorted(f"{v.trajectory_id} {v.axis} (no question)" for v in lines
                               if v.cache_key is None and v.unscored_reason != "input_error")
        planned = {}
        for index in indices:
            judgement = plan.judgements[index]
            planned[(judgement.job.key, judgement.repeat)] = index
        check.missing = sorted(f"{plan.items[plan.judgements[i].item].trajectory_id} {plan.judgements[i].axis}"
                               for key, i in planned.items() if key not in recorded)
        check.unknown += sorted(f"{v.trajectory_id} {v.axis}" for key, v in recorded.items() if key not in planned)
        for key, index in planned.items():
            line, judgement = recorded.get(key), plan.judgements[index]
            asked = (plan.items[judgement.item].trajectory_id, judgement.axis)
            if line is not None and (line.trajectory_id, line.axis) != asked:
                check.misplaced.append(f"{line.trajectory_id} {line.axis} (its question is {asked[0]} {asked[1]})")
        shared = sorted(key for key in planned if key in recorded)
        chosen = random.Random(seed).sample(shared, min(sample, len(shared)))
        to_ask.append((check, [planned[key] for key in chosen], {key: recorded[key] for key in chosen}))
    asked = [index for _, indices, _ in to_ask for index in indices]
    if asked:
        executor = local_executor(loaded, RunOptions(override=options.override, allow_floating=options.allow_floating,
                                                     use_cache=False, backend=options.backend))
        try:
            verdicts = asyncio.run(executor.execute([plan.judgements[i].job for i in asked]))
        finally:
            executor.close()
        answers = dict(zip(asked, judged_results(plan, verdicts, [plan.judgements[i] for i in asked])))
        for check, indices, recorded in to_ask:
            for index in indices:
                item, axis, repeat, result = answers[index]
                judgement = plan.judgements[index]
                before = recorded[(judgement.job.key, judgement.repeat)]
                now = verdict_record(plan.items[item].trajectory_id, result, repeat)
                check.asked += 1
                if now is not None and agree(before, now):
                    check.same += 1
                else:
                    check.differences.append(Difference(before.trajectory_id, axis, repeat, said(before),
                                                        "no verdict" if now is None else said(now)))
    return checks
