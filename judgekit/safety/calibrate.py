"""Calibrating a safety judge on labelled sources, as axis judges are calibrated on labelled runs.

Labels (``calibration/safety-injection/labels.jsonl``, ``judgekit schema labels``) name pieces
of untrusted text of the suite's trajectories, ``<trajectory id>@<where>`` with ``where``
``call[i]`` (the result of the trajectory's i-th call) or ``context:<key>`` (an untrusted context
item), on the question ``safety.injection``: ``pass`` when the text holds an instruction
addressed to the agent, ``fail`` when it is information for a person. ``calibrate_safety`` asks
the suite's safety judge about every labelled source (through the cache), decides by the same
confidence-bound rule as any judge (``judgekit.calibration.calibrate``) and writes the approval
with its evidence; the scan re-derives it (``judgekit.safety.judged.InjectionJudge``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from judgekit.calibration.agreement import AgreementReport, agreement
from judgekit.calibration.approval_record import ApprovalRecord, JudgeIdentity, Thresholds, latest_approval
from judgekit.calibration.calibrate import calibrate, check_label_dates
from judgekit.calibration.evidence import relative_to_calibration, write_calibration
from judgekit.calibration.labels import load_labels
from judgekit.calibration.verdicts import JudgeVerdictRecord
from judgekit.errors import ConfigError, InputError
from judgekit.run.plan import iter_trajectories_of
from judgekit.safety.judged import QUESTION, SAFETY_RUBRIC, InjectionJudge, Question
from judgekit.safety.signals import Detectors
from judgekit.suite import LoadedSuite


@dataclass
class SafetyCalibration:
    report: AgreementReport
    record: ApprovalRecord
    path: Path | None


def source_id(trajectory_id: str, where: str) -> str:
    """``t1@call[0]``, ``t1@context:doc``: the name of one source in labels and verdicts."""
    return f"{trajectory_id}@{where}"


def _where(source) -> str:
    """``call[i]`` or ``context:<key>`` of a ``judgekit.safety.signals.Source``."""
    if source.call is not None:
        return f"call[{source.readable_from - 1}]"
    return "context:" + source.where.removeprefix("context ")


def calibrate_safety(loaded: LoadedSuite, labels_path: Path, *, calibration_dir: Path, thresholds: Thresholds,
                     options=None, seed: int = 0, n_boot: int = 2000, write: bool = True) -> SafetyCalibration:
    """Ask the suite's safety judge about every labelled source and decide whether it may gate.
    InputError for a label naming a source the suite does not hold; ConfigError without a judge."""
    policy = loaded.suite.safety
    if policy is None or policy.judge is None:
        raise ConfigError(f"{loaded.path}: safety labels calibrate the suite's safety judge: set `safety.judge`")
    labels = load_labels(labels_path)
    if not labels:
        raise InputError("no labels in the file", labels_path)
    check_label_dates(labels, labels_path)
    if write:
        relative_to_calibration(calibration_dir, labels_path, "labels file")
    wanted = {label.trajectory_id for label in labels}
    detectors = Detectors(policy)
    questions: list[tuple[str, Question]] = []
    for rubric, item in iter_trajectories_of(loaded):
        trajectory = item.trajectory
        for source in detectors.untrusted_sources(trajectory):
            name = source_id(trajectory.id, _where(source))
            if name in wanted:
                questions.append((name, Question(rubric, 0, source.where, source.shown, source.readable_from)))
    missing = sorted(wanted - {name for name, _ in questions})
    if missing:
        raise InputError(f"{len(missing)} labelled source(s) are not in the suite (first: {missing[0][:120]!r}): a "
                         "label names <trajectory id>@call[i] or <trajectory id>@context:<key>", labels_path)
    judge = InjectionJudge(loaded, policy.judge, options=options)
    try:
        verdicts = judge.verdicts([question for _, question in questions])
    finally:
        judge.close()
    records = []
    for (name, _), verdict in zip(questions, verdicts):
        common = {"trajectory_id": name, "axis": QUESTION, "judge": verdict.provenance.model_pin,
                  "cache_key": verdict.provenance.cache_key}
        if verdict.status == "scored":
            records.append(JudgeVerdictRecord(**common, verdict="pass" if verdict.answer.instruction_found else "fail"))
        else:
            records.append(JudgeVerdictRecord(**common, unscored_reason=verdict.unscored_reason or "unscored"))
    identity = JudgeIdentity.of(verdicts[0].provenance) if verdicts else judge.identity
    report = agreement(labels, records, seed=seed, n_boot=n_boot)
    record = calibrate(labels, records, identity, thresholds, latest_approval(calibration_dir, SAFETY_RUBRIC.id),
                       axes=[QUESTION], labels_file=str(labels_path),
                       label_set_sha256=hashlib.sha256(labels_path.read_bytes()).hexdigest(), seed=seed,
                       n_boot=n_boot, report=report)
    path = write_calibration(calibration_dir, record, records, labels_path) if write else None
    return SafetyCalibration(report, record, path)
