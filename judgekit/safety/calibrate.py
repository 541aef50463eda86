"""Calibrating a safety judge on labelled items, as axis judges are calibrated on labelled runs.

Labels (``calibration/<question's rubric id>/labels.jsonl``, ``judgekit schema labels``) name
items of the suite's trajectories, ``<trajectory id>@<where>``, on one safety question:

- ``safety.injection`` (``calibration/safety-injection/``): a piece of untrusted text, ``where``
  ``call[i]`` (the result of the trajectory's i-th call) or ``context:<key>`` (an untrusted
  context item); ``pass`` when the text holds an instruction addressed to the agent, ``fail``
  when it is information for a person.
- ``safety.exfiltration`` (``calibration/safety-exfiltration/``): a write or send, ``where``
  ``call[i]`` (the trajectory's i-th call, of a tool the policy classes ``write`` or ``send``);
  ``pass`` when it sends data to someone the user did not intend, ``fail`` when it goes where
  the user meant it to.

``calibrate_safety`` asks the suite's safety judge about every labelled item (through the
cache), decides by the same confidence-bound rule as any judge
(``judgekit.calibration.calibrate``) and writes the approval with its evidence; the scan
re-derives it (``judgekit.safety.judged.SafetyJudge``).
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
from judgekit.suite.inputs import iter_trajectories_of
from judgekit.safety.exfiltration import action, is_action
from judgekit.safety.judged import QUESTION, QUESTIONS, Question, SafetyJudge
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
    """Ask the suite's safety judge the labels' question about every labelled item and decide
    whether it may gate. InputError for labels on two questions, or a label naming an item the
    suite does not hold; ConfigError without a judge."""
    policy = loaded.suite.safety
    if policy is None or policy.judge is None:
        raise ConfigError(f"{loaded.path}: safety labels calibrate the suite's safety judge: set `safety.judge`")
    labels = load_labels(labels_path)
    if not labels:
        raise InputError("no labels in the file", labels_path)
    names = sorted({label.axis for label in labels})
    if len(names) > 1 or names[0] not in QUESTIONS:
        raise InputError(f"the labels are on {', '.join(names)}: one file calibrates one safety question "
                         f"({', '.join(QUESTIONS)}), so keep each in its own file", labels_path)
    question = QUESTIONS[names[0]]
    check_label_dates(labels, labels_path)
    if write:
        relative_to_calibration(calibration_dir, labels_path, "labels file")
    wanted = {label.trajectory_id for label in labels}
    detectors = Detectors(policy)
    items: list[tuple[str, object]] = []
    for rubric, item in iter_trajectories_of(loaded):
        trajectory = item.trajectory
        if question.name == QUESTION:
            for source in detectors.untrusted_sources(trajectory):
                name = source_id(trajectory.id, _where(source))
                if name in wanted:
                    items.append((name, Question(rubric, 0, source.where, source.shown, source.readable_from)))
        else:
            for i in range(len(trajectory.calls)):
                name = source_id(trajectory.id, f"call[{i}]")
                if name in wanted and is_action(detectors, trajectory, i):
                    items.append((name, action(detectors, rubric, trajectory, 0, i)))
    missing = sorted(wanted - {name for name, _ in items})
    if missing:
        what, shape = (("source(s)", "<trajectory id>@call[i] or <trajectory id>@context:<key>")
                       if question.name == QUESTION else
                       ("write(s) or send(s)", "<trajectory id>@call[i], a call of a tool safety.tools classes write "
                        "or send"))
        raise InputError(f"{len(missing)} labelled {what} are not in the suite (first: "
                         f"{missing[0][:120]!r}): a label names {shape}", labels_path)
    judge = SafetyJudge(loaded, policy.judge, question, options=options)
    try:
        verdicts = judge.verdicts([asked for _, asked in items])
    finally:
        judge.close()
    records = []
    for (name, _), verdict in zip(items, verdicts):
        common = {"trajectory_id": name, "axis": question.name, "judge": verdict.provenance.model_pin,
                  "cache_key": verdict.provenance.cache_key}
        if verdict.status == "scored":
            records.append(JudgeVerdictRecord(**common, verdict="pass" if question.found(verdict.answer) else "fail"))
        else:
            records.append(JudgeVerdictRecord(**common, unscored_reason=verdict.unscored_reason or "unscored"))
    identity = JudgeIdentity.of(verdicts[0].provenance) if verdicts else judge.identity
    report = agreement(labels, records, seed=seed, n_boot=n_boot)
    record = calibrate(labels, records, identity, thresholds, latest_approval(calibration_dir, question.rubric.id),
                       axes=[question.name], labels_file=str(labels_path),
                       label_set_sha256=hashlib.sha256(labels_path.read_bytes()).hexdigest(), seed=seed,
                       n_boot=n_boot, report=report)
    path = write_calibration(calibration_dir, record, records, labels_path) if write else None
    return SafetyCalibration(report, record, path)
