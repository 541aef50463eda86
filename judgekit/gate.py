"""The gate: deterministic axes always gate; a judge axis gates only with an approved judge.

A judge's verdict may fail the gate only when an approval record matches its exact fingerprint
(model pin, endpoint, parameters, rubric id@version and hash, template hash), that axis was
approved, and the API reported the pinned model (unless the suite allows a mismatch).
Otherwise the axis is advisory: shown, never gating, and the report says why and which command
would approve it. In task-success judge mode an advisory judge leaves the deterministic checks
gating on their own.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from judgekit.calibration.approval import ApprovalRecord, JudgeIdentity, find_approval
from judgekit.calibration.corrected import CorrectedRate, corrected_pass_rate
from judgekit.runner import RunRecord


class Advisory(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rubric: str
    trajectories: int
    reason: str
    command: str = Field(description="What would approve it.")


class AxisGate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    axis: str
    gating_n: int = Field(description="Trajectories whose verdict on this axis gates.")
    value: float | None = Field(None, description="Pass rate (task success) or mean score over gating verdicts.")
    minimum: float
    unscored: int = Field(0, description="Gating judge verdicts that are unscored (never pass or fail).")
    passed: bool
    reasons: list[str] = Field(default_factory=list)
    advisory: list[Advisory] = Field(default_factory=list, description="Judge verdicts shown but not gating, and why.")
    advisory_value: float | None = Field(None, description="The same figure over advisory judge verdicts.")
    corrected: CorrectedRate | None = Field(None, description="Approved binary judge: Rogan-Gladen corrected pass rate.")


class GateReport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    passed: bool
    axes: list[AxisGate]


def _approval(calibration_dir: Path, identity: JudgeIdentity, cache: dict) -> ApprovalRecord | None:
    key = identity.fingerprint
    if key not in cache:
        cache[key] = find_approval(calibration_dir, identity.rubric.split("@", 1)[0], key)
    return cache[key]


def _mismatch_reason(provenance) -> str:
    return (f"the API reported model {provenance.reported_model!r}, not the pinned {provenance.model_pin!r}: "
            "another model answered (set gate.allow_model_mismatch in the suite to let it gate)")


def _advisory_reason(record: ApprovalRecord | None, axis: str) -> str:
    if record is None:
        return ("no approval record matches this judge's fingerprint (new judge, or the model, parameters, "
                "rubric or prompt template changed since calibration)")
    if axis not in record.axes:
        return f"the approval record has no decision for {axis} (no labels for it)"
    return "the judge was refused: " + "; ".join(record.axes[axis].reasons)


def gate(record: RunRecord, *, calibration_dir: Path | None = None, seed: int = 0) -> GateReport:
    calibration_dir = Path(calibration_dir or record.calibration_dir or "calibration")
    policy = record.gate
    approvals: dict[str, ApprovalRecord | None] = {}
    gating: dict[str, list[float]] = defaultdict(list)
    advisory_values: dict[str, list[float]] = defaultdict(list)
    unscored: dict[str, int] = defaultdict(int)
    advisory: dict[tuple[str, str, str, bool], int] = defaultdict(int)  # (axis, rubric, reason, mismatch)
    calib_pairs: dict[str, list[tuple[bool, bool]]] = {}
    judge_binary: dict[str, list[bool]] = defaultdict(list)
    errors: dict[str, int] = defaultdict(int)
    for result in record.results:
        for axis, res in result.axes.items():
            if res.status == "error":
                errors[axis] += 1  # bad input: the run is not a measurement of this axis
                continue
            if res.judge is None:  # deterministic: always gates
                gating[axis].append(float(res.passed) if axis == "task_success" else res.score)
                continue
            identity = JudgeIdentity.of(res.judge)
            approval = _approval(calibration_dir, identity, approvals)
            mismatch = res.judge.model_mismatch and not policy.allow_model_mismatch
            if approval is not None and approval.approved(axis) and not mismatch:
                if res.status == "unscored":
                    unscored[axis] += 1
                    continue
                value = float(res.passed) if axis == "task_success" else res.score
                gating[axis].append(value)
                if axis == "task_success":
                    judge_check = next(c for c in res.checks if c.source == "judge")
                    judge_binary[axis].append(judge_check.passed)
                    calib_pairs[axis] = approval.axes[axis].pairs
                continue
            reason = _mismatch_reason(res.judge) if mismatch else _advisory_reason(approval, axis)
            advisory[(axis, result.rubric, reason, mismatch)] += 1
            if res.status == "scored":
                advisory_values[axis].append(float(res.passed) if axis == "task_success" else res.score)
            if axis == "task_success":  # the deterministic checks still gate
                gating[axis].append(float(all(c.passed for c in res.checks if c.source == "deterministic")))

    axes_out = []
    for axis in sorted(set(gating) | set(advisory_values) | {a for a, _, _, _ in advisory} | set(unscored) | set(errors)):
        values = gating.get(axis, [])
        minimum = policy.minimum(axis)
        value = sum(values) / len(values) if values else None
        reasons = []
        if value is not None and value < minimum:
            what = "pass rate" if axis == "task_success" else "mean score"
            reasons.append(f"{what} {value:.3f} is below {minimum}")
        if errors[axis]:
            reasons.append(f"{errors[axis]} trajectories could not be scored (input errors; see the run's output)")
        judged = len(values) + unscored[axis]
        if unscored[axis] and unscored[axis] / judged > policy.max_unscored_rate:
            reasons.append(f"{unscored[axis]} of {judged} gating judge verdicts are unscored (max rate {policy.max_unscored_rate})")
        adv = [
            Advisory(rubric=rubric, trajectories=n, reason=reason,
                     command="pin the model the API reports in the suite's judge, or set gate.allow_model_mismatch: true"
                     if mismatch else f"judgekit calibrate SUITE --labels {calibration_dir}/{rubric.split('@')[0]}/labels.jsonl")
            for (a, rubric, reason, mismatch), n in sorted(advisory.items()) if a == axis
        ]
        adv_values = advisory_values.get(axis, [])
        corrected = None
        if axis in judge_binary and judge_binary[axis]:
            corrected = corrected_pass_rate(judge_binary[axis], calib_pairs[axis], seed=seed)
        axes_out.append(AxisGate(
            axis=axis, gating_n=len(values), value=value, minimum=minimum, unscored=unscored[axis],
            passed=not reasons, reasons=reasons, advisory=adv,
            advisory_value=sum(adv_values) / len(adv_values) if adv_values else None, corrected=corrected,
        ))
    return GateReport(passed=all(a.passed for a in axes_out), axes=axes_out)
