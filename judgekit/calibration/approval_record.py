"""Approval records: the file that says whether a judge may gate, per rubric and axis.

``calibration/<rubric-id>/approvals/<fingerprint>.json``, beside the judge's calibration
verdicts ``<fingerprint>.verdicts.jsonl``. The fingerprint hashes exactly what makes a judge this
judge: model pin, endpoint (the server it answers from: another server claiming the same model
name is another judge), parameters, rubric id@version and content hash, prompt template hash.
Change any of them and the approval no longer applies: the axis is advisory until someone
calibrates again.

The record is never trusted as written: the gate re-derives it from the labels and verdicts files
it names (``judgekit.calibration.evidence``), under the rule of ``judgekit.calibration.approval``.
Formats 1 and 2 are read through the numbered migrations (``MIGRATIONS``) so their figures can be
shown, but they name no items and keep no verdicts: they never gate.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from judgekit._util.io import (
    Version3,
    MAX_DOCUMENT_BYTES,
    RECORD_CONFIG,
    Timestamp,
    describe_validation_error,
    read_json,
    sha256_json,
)
from judgekit.calibration._bootstrap import Metric
from judgekit.errors import InputError
from judgekit.suite import ApprovalThresholds
from judgekit.verdict import Provenance

APPROVAL_FORMAT_VERSION = 3


class Thresholds(ApprovalThresholds):
    """What a judge must reach, per axis, before it may gate: bounds, not point estimates (the
    suite's ``approval`` block, ``judgekit.suite.ApprovalThresholds``)."""

    @classmethod
    def of(cls, thresholds: ApprovalThresholds) -> Thresholds:
        """The suite's thresholds, with today's defaults for what the suite does not set."""
        return thresholds if isinstance(thresholds, cls) else cls.model_validate(thresholds.model_dump())


class JudgeIdentity(BaseModel):
    model_config = RECORD_CONFIG

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


class LabelSample(BaseModel):
    """The human labels an axis's decision rests on."""

    model_config = RECORD_CONFIG

    n_items: int = Field(description="Labelled items in the maths (with a scored verdict).")
    n_labels: int = Field(description="Labels on those items (several labellers: several per item).")
    n_labelers: int = Field(description="Distinct labellers among those labels.")
    first_labeled_at: Timestamp | None = Field(None, description="Earliest labeled_at; null when none is dated.")
    last_labeled_at: Timestamp | None = Field(None, description="Latest labeled_at; null when none is dated.")
    n_undated: int = Field(0, description="Labels without a labeled_at.")
    n_model: int | None = Field(None, description="Labels made by a model (labeler_kind: model); null in a record "
                                "written before labels said who made them.")
    n_unknown: int | None = Field(None, description="Labels that do not say who made them (no labeler_kind): of "
                                  "unknown origin; null in a record written before labels said so.")

    @property
    def n_not_person(self) -> int:
        """Labels not known to be a person's (a model's, or of unknown origin)."""
        return (self.n_model or 0) + (self.n_unknown or 0)


class CalibrationItem(BaseModel):
    """One labelled item of an axis's calibration: which trajectory, what the humans said, what
    the judge said."""

    model_config = RECORD_CONFIG

    trajectory_id: str
    human: float = Field(ge=0, le=1, description="The humans' reference: 1.0 pass or 0.0 fail (binary axes, "
                         "majority of the labellers), or the mean of their scores (graded axes).")
    judge: float | None = Field(ge=0, le=1, description="The judge's verdict over its repeats: 1.0 pass or 0.0 fail "
                                "(binary, majority), or the mean score (graded); null when no repeat was scored "
                                "(an abstention).")
    repeats: int = Field(ge=0, description="The judge's verdicts combined (one per repeat), unscored ones included.")


class AxisApproval(BaseModel):
    """The decision for one axis, with the items and figures it rests on."""

    model_config = RECORD_CONFIG

    axis: str
    kind: Literal["binary", "graded"] = Field(
        description="The axis's kind (the axis table's): binary, or graded (kappa on scores binarised at "
        "``threshold``, and Spearman and MAE on the scores).")
    n: int = Field(description="Labelled items with a scored verdict: the items in the maths.")
    abstained: int = Field(0, description="Labelled items the judge gave no scored verdict on.")
    items: list[CalibrationItem] = Field(
        default_factory=list, description="Every labelled item of the axis the judge was asked about, in "
        "trajectory id order, abstentions included: the gate rebuilds them from the labels and verdicts files "
        "and refuses a record whose items differ.")
    kappa: Metric = Field(description="Agreement report at calibration: kappa with its percentile interval "
                          "(shown; the decision rests on the bounds below).")
    accuracy: Metric
    tpr: Metric | None = None
    tnr: Metric | None = None
    spearman: Metric | None = Field(None, description="Graded axes: Spearman correlation, judge vs human scores.")
    mae: Metric | None = Field(None, description="Graded axes: mean absolute error, judge vs human scores.")
    mean_human: float | None = Field(None, description="Mean human label (pass = 1) on this sample.")
    mean_judge: float | None = Field(None, description="Mean judge verdict (pass = 1) on this sample.")
    n_pass: int | None = Field(None, description="Items the humans labelled pass (graded: score >= threshold).")
    n_fail: int | None = Field(None, description="Items the humans labelled fail.")
    confidence: float | None = Field(None, description="One-sided level of the bounds below.")
    kappa_lower: float | None = Field(None, description="Lower confidence bound of kappa.")
    tpr_lower: float | None = Field(None, description="Binary axes: lower confidence bound of the TPR.")
    tnr_lower: float | None = Field(None, description="Binary axes: lower confidence bound of the TNR.")
    spearman_lower: float | None = Field(None, description="Graded axes: lower confidence bound of Spearman.")
    mae_upper: float | None = Field(None, description="Graded axes: upper confidence bound of the MAE.")
    methods: dict[str, str] = Field(default_factory=dict, description="How each bound was computed, by figure.")
    floor_bounds: dict[str, float | None] = Field(
        default_factory=dict, description="Kappa's (and a graded axis's Spearman's) lower bound at "
        "FLOOR_CONFIDENCE (95%) or the rule's level if higher: the floor is checked on it, whatever level the suite "
        "sets for its thresholds.")
    sample: LabelSample | None = Field(None, description="The labels this decision rests on.")
    threshold: float = Field(0.5, ge=0, le=1, description="Graded axes: the score that counts as pass.")
    decision: Literal["approved", "refused"]
    reasons: list[str] = Field(description="Why, in words.")
    statement: str = Field("", description="What this decision certifies and on which labels, in one sentence.")

    @property
    def pairs(self) -> list[tuple[bool, bool]]:
        """(human pass, judge pass) per scored item: what the corrected pass rate resamples."""
        cut = self.threshold if self.kind == "graded" else 0.5
        return [(item.human >= cut, item.judge >= cut) for item in self.items if item.judge is not None]


class Drift(BaseModel):
    model_config = RECORD_CONFIG

    previous_fingerprint: str
    previous_decided_at: Timestamp
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
    """Whether a judge may gate a rubric's axes, and the evidence it was decided on: the labels
    file and the judge's calibration verdicts file, each named and hashed. The gate re-derives
    the decision from those two files (``judgekit.calibration.evidence``); what the record says
    of its figures is shown, never trusted."""

    model_config = RECORD_CONFIG

    format_version: Version3 = APPROVAL_FORMAT_VERSION
    migrated_from: int | None = Field(
        None, description="The format this record was read from (1 or 2): such a record names no items and keeps "
        "no verdicts, so it cannot be re-derived and never gates.")
    fingerprint: str = Field(description="The judge's fingerprint (``judge`` hashed); the file's name.")
    judge: JudgeIdentity
    label_set_sha256: str = Field(description="sha256 of the labels file's bytes.")
    labels_file: str = Field(description="The labels file, relative to the calibration folder.")
    verdicts_file: str | None = Field(
        None, description="The judge's verdicts on the labelled items (JSON Lines, `judgekit schema verdicts`, each "
        "naming this judge's fingerprint), relative to the calibration folder; null only in a migrated record.")
    verdicts_sha256: str | None = Field(None, description="sha256 of the verdicts file's bytes.")
    thresholds: Thresholds = Field(
        description="The thresholds it was decided under. The gate applies the suite's thresholds of the day, "
        "never these.")
    axes: dict[str, AxisApproval]
    drift: list[Drift] = Field(default_factory=list)
    decided_at: Timestamp
    judgekit_version: str


def approvals_dir(calibration_dir: Path, rubric_id: str) -> Path:
    return calibration_dir / rubric_id / "approvals"


_AXIS_FIELDS_KEPT = {"axis", "kind", "n", "kappa", "accuracy", "tpr", "tnr", "spearman", "mae", "mean_human",
                     "mean_judge", "n_pass", "n_fail", "confidence", "kappa_lower", "tpr_lower", "tnr_lower",
                     "spearman_lower", "mae_upper", "methods", "sample", "threshold", "decision", "reasons"}


def _legacy_to_v3(data: dict[str, Any]) -> dict[str, Any]:
    """Format 1 (approved on the point estimate of kappa) or 2 (on bounds of its own stored pairs)
    -> format 3. Neither named its items' trajectories nor kept the judge's verdicts, so neither
    can be re-derived: the figures are kept to be shown, the record never gates (recalibrate)."""
    version = data.get("format_version")
    out = {key: value for key, value in data.items() if key not in ("rule", "format_version", "migrated_from")}
    out.update(format_version=APPROVAL_FORMAT_VERSION, migrated_from=version, verdicts_file=None,
               verdicts_sha256=None)
    axes = data.get("axes")
    if isinstance(axes, dict):
        migrated = {}
        for name, axis in axes.items():
            if isinstance(axis, dict):
                axis = {key: value for key, value in axis.items() if key in _AXIS_FIELDS_KEPT}
                axis["statement"] = (f"{name} judge {axis.get('decision')} under approval format {version}, which "
                                     "names no labelled items and keeps no verdicts: it cannot be re-derived")
            migrated[name] = axis
        out["axes"] = migrated
    return out


MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: _legacy_to_v3, 2: _legacy_to_v3,
                                                                     3: lambda data: data}
"""Format version -> the function that reads it as the current format."""


def read_approval(path: Path) -> ApprovalRecord:
    """An approval record of any format, read as the current one (numbered migrations)."""
    expected = "an approval record"
    data = read_json(path, max_bytes=MAX_DOCUMENT_BYTES, expected=expected)
    version = data.get("format_version") if isinstance(data, dict) else None
    if isinstance(version, bool) or not isinstance(version, int) or version not in MIGRATIONS:
        raise InputError(f"not {expected}: format_version {version!r} is not one of "
                         f"{sorted(MIGRATIONS)}", path)
    try:
        return ApprovalRecord.model_validate(MIGRATIONS[version](data))
    except ValidationError as exc:
        raise InputError(f"not {expected}: {describe_validation_error(exc)}", path) from None


def approval_path(calibration_dir: Path, rubric_id: str, fingerprint: str) -> Path:
    return approvals_dir(calibration_dir, rubric_id) / f"{fingerprint}.json"


def find_approval(calibration_dir: Path, rubric_id: str, fingerprint: str) -> ApprovalRecord | None:
    """The approval record filed under ``fingerprint``, as written: nothing in it is checked
    here (``judgekit.calibration.evidence.derive_approval`` re-derives it)."""
    path = approval_path(calibration_dir, rubric_id, fingerprint)
    return read_approval(path) if path.exists() else None


def latest_approval(calibration_dir: Path, rubric_id: str) -> ApprovalRecord | None:
    folder = approvals_dir(calibration_dir, rubric_id)
    records = [read_approval(p) for p in sorted(folder.glob("*.json"))] if folder.is_dir() else []
    return max(records, key=lambda r: r.decided_at, default=None)
