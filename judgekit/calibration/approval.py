"""Approval records: a judge earns the right to gate, per rubric and axis.

``calibration/<rubric-id>/approvals/<fingerprint>.json``. The fingerprint hashes exactly what
makes a judge this judge: model pin, endpoint (the server it answers from: another server
claiming the same model name is another judge), parameters, rubric id@version and content
hash, prompt template hash. Change any of them and the approval no longer applies: the axis is advisory
until someone calibrates again.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from judgekit._files import write_text_atomically
from judgekit._io import load_json_model, sha256_json
from judgekit.calibration._bootstrap import Metric
from judgekit.suite import ApprovalThresholds
from judgekit.verdict import Provenance

APPROVAL_FORMAT_VERSION = 1


Thresholds = ApprovalThresholds


class JudgeIdentity(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model_pin: str
    endpoint: str = Field("provider default", description="Where the judge answered from (see Provenance.endpoint).")
    parameters: dict[str, Any]
    rubric: str = Field(description="id@version.")
    rubric_sha256: str
    template_sha256: str

    @property
    def fingerprint(self) -> str:
        return sha256_json(self.model_dump(mode="json"))

    @classmethod
    def of(cls, provenance: Provenance) -> JudgeIdentity:
        return cls(
            model_pin=provenance.model_pin,
            endpoint=provenance.endpoint,
            parameters=provenance.parameters,
            rubric=provenance.rubric,
            rubric_sha256=provenance.rubric_sha256,
            template_sha256=provenance.template_sha256,
        )


class AxisApproval(BaseModel):
    """The decision for one axis, with the figures it rests on."""

    model_config = ConfigDict(extra="forbid")

    axis: str
    kind: str = Field(description="binary, or graded (then kappa is on scores binarised at the threshold).")
    n: int = Field(description="Labelled items with a scored verdict.")
    kappa: Metric
    accuracy: Metric
    tpr: Metric | None = None
    tnr: Metric | None = None
    mean_human: float | None = Field(None, description="Mean human label (pass = 1) on this sample.")
    mean_judge: float | None = Field(None, description="Mean judge verdict (pass = 1) on this sample.")
    pairs: list[tuple[bool, bool]] = Field(
        default_factory=list, description="(human pass, judge pass) per item: the corrected pass rate resamples them."
    )
    decision: Literal["approved", "refused"]
    reasons: list[str] = Field(description="Why, in words.")


class Drift(BaseModel):
    model_config = ConfigDict(extra="forbid")

    previous_fingerprint: str
    previous_decided_at: datetime
    axis: str
    kappa_before: Metric
    kappa_after: Metric
    accuracy_before: Metric
    accuracy_after: Metric
    kappa_change: float | None
    accuracy_change: float | None
    alarm: bool = Field(description="New kappa below the previous interval or below the threshold.")
    reason: str


class ApprovalRecord(BaseModel):
    """Whether a judge may gate a rubric's axes, and the evidence for it."""

    model_config = ConfigDict(extra="forbid")

    format_version: Literal[1] = APPROVAL_FORMAT_VERSION
    fingerprint: str
    judge: JudgeIdentity
    label_set_sha256: str = Field(description="sha256 of the labels file's bytes.")
    labels_file: str
    thresholds: Thresholds
    axes: dict[str, AxisApproval]
    drift: list[Drift] = Field(default_factory=list)
    decided_at: datetime
    judgekit_version: str

    def approved(self, axis: str) -> bool:
        return axis in self.axes and self.axes[axis].decision == "approved"


def approvals_dir(calibration_dir: Path, rubric_id: str) -> Path:
    return calibration_dir / rubric_id / "approvals"


def read_approval(path: Path) -> ApprovalRecord:
    return load_json_model(path, ApprovalRecord, expected="an approval record")


def find_approval(calibration_dir: Path, rubric_id: str, fingerprint: str) -> ApprovalRecord | None:
    path = approvals_dir(calibration_dir, rubric_id) / f"{fingerprint}.json"
    return read_approval(path) if path.exists() else None


def latest_approval(calibration_dir: Path, rubric_id: str) -> ApprovalRecord | None:
    folder = approvals_dir(calibration_dir, rubric_id)
    records = [read_approval(p) for p in sorted(folder.glob("*.json"))] if folder.is_dir() else []
    return max(records, key=lambda r: r.decided_at, default=None)


def write_approval(calibration_dir: Path, record: ApprovalRecord) -> Path:
    rubric_id = record.judge.rubric.split("@", 1)[0]
    path = approvals_dir(calibration_dir, rubric_id) / f"{record.fingerprint}.json"
    write_text_atomically(path, record.model_dump_json(indent=2) + "\n")
    return path


def decide(axis: str, kind: str, n: int, kappa: Metric, thresholds: Thresholds) -> tuple[str, list[str]]:
    reasons = []
    if n < thresholds.min_items:
        reasons.append(f"only {n} labelled item(s) with a verdict; at least {thresholds.min_items} needed")
    if kappa.value is None:
        reasons.append("kappa is undefined (one class only on one side)")
    elif kappa.value < thresholds.min_kappa:
        reasons.append(f"kappa {kappa.value:.3f} is below {thresholds.min_kappa}")
    if reasons:
        return "refused", reasons
    return "approved", [f"kappa {kappa.value:.3f} >= {thresholds.min_kappa} on {n} items"]


def drift_against(previous: ApprovalRecord, axis: AxisApproval, thresholds: Thresholds) -> Drift | None:
    before = previous.axes.get(axis.axis)
    if before is None:
        return None
    k0, k1 = before.kappa, axis.kappa
    a0, a1 = before.accuracy, axis.accuracy
    kchange = None if k0.value is None or k1.value is None else k1.value - k0.value
    achange = None if a0.value is None or a1.value is None else a1.value - a0.value
    reasons = []
    if k1.value is not None and k0.low is not None and k1.value < k0.low:
        reasons.append(f"kappa {k1.value:.3f} fell below the previous interval [{k0.low:.3f}, {k0.high:.3f}]")
    if k1.value is None or k1.value < thresholds.min_kappa:
        reasons.append(f"kappa {k1.value if k1.value is None else round(k1.value, 3)} is below the threshold {thresholds.min_kappa}")
    return Drift(
        previous_fingerprint=previous.fingerprint, previous_decided_at=previous.decided_at, axis=axis.axis,
        kappa_before=k0, kappa_after=k1, accuracy_before=a0, accuracy_after=a1,
        kappa_change=kchange, accuracy_change=achange, alarm=bool(reasons),
        reason="; ".join(reasons) or "within the previous interval",
    )
