"""Approval records: a judge earns the right to gate, per rubric and axis.

``calibration/<rubric-id>/approvals/<fingerprint>.json``, beside the judge's calibration
verdicts ``<fingerprint>.verdicts.jsonl``. The fingerprint hashes exactly what makes a judge this
judge: model pin, endpoint (the server it answers from: another server claiming the same model
name is another judge), parameters, rubric id@version and content hash, prompt template hash.
Change any of them and the approval no longer applies: the axis is advisory until someone
calibrates again.

The rule: a judge is approved on an axis when confidence bounds, not point estimates, clear the
suite's thresholds (``Thresholds``; bounds from ``judgekit.calibration.bounds``):

- every axis: at least ``min_items`` labelled items with a verdict, no more than
  ``max_abstention_rate`` of the labelled items without one, and the lower bound of kappa at
  least ``min_kappa`` (graded axes: kappa on scores binarised at ``graded_pass``);
- binary axes: the lower bounds of TPR and TNR at least ``min_tpr`` and ``min_tnr``;
- graded axes: the lower bound of Spearman's correlation at least ``min_spearman`` and the
  upper bound of the mean absolute error at most ``max_mae``;
- whatever the suite sets, a kappa or Spearman bound at or below 0 never clears (``FLOORS``).

This module holds the record and the rule. The record is never trusted as written: the gate
re-derives it from the labels and verdicts files it names (``judgekit.calibration.evidence``).
Formats 1 and 2 are read through the numbered migrations (``MIGRATIONS``) so their figures can be
shown, but they name no items and keep no verdicts: they never gate.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timezone
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


_BOUND_FIELDS = {"kappa": "kappa_lower", "tpr": "tpr_lower", "tnr": "tnr_lower", "spearman": "spearman_lower",
                 "mae": "mae_upper"}
_LABELS = {"kappa": "kappa", "tpr": "TPR", "tnr": "TNR", "spearman": "Spearman", "mae": "MAE"}
FLOORS = {"kappa": 0.0, "spearman": 0.0}
"""A lower bound at or below this never clears, whatever a suite sets: a judge no better than
chance (kappa), or not even ordering the items as the humans do (Spearman), never gates."""
FLOOR_CONFIDENCE = 0.95
"""The level the floors are checked at, whatever level the suite asks for its thresholds: at a
lower level the smoothed bound comes near the posterior median, which its prior can lift above 0
for a judge that is worse than chance on the items (seen: observed kappa -0.04, bound +0.10 at 50%)."""


def _level(confidence: float) -> str:
    """0.95 -> "95%", 0.975 -> "97.5%", 0.999 -> "99.9%": never rounded up to a level it does not have."""
    return f"{100 * confidence:.4g}%"


def rule_of(kind: str, thresholds: Thresholds) -> list[tuple[str, str, float]]:
    """(figure, ">=" or "<=", threshold) that an axis of this kind must clear with its bounds."""
    rule = [("kappa", ">=", thresholds.min_kappa)]
    if kind == "binary":
        return rule + [("tpr", ">=", thresholds.min_tpr), ("tnr", ">=", thresholds.min_tnr)]
    return rule + [("spearman", ">=", thresholds.min_spearman), ("mae", "<=", thresholds.max_mae)]


def shortfalls(axis: AxisApproval, thresholds: Thresholds) -> list[str]:
    """What keeps ``axis`` from clearing the lower-bound rule, in words (empty: it clears)."""
    level = _level(axis.confidence or thresholds.confidence)
    out = []
    if axis.n < thresholds.min_items:
        out.append(f"only {axis.n} labelled item(s) with a verdict; at least {thresholds.min_items} needed")
    labelled = axis.n + axis.abstained
    if axis.abstained and axis.abstained > thresholds.max_abstention_rate * labelled:
        out.append(f"the judge gave no verdict on {axis.abstained} of {labelled} labelled item(s) "
                   f"({100 * axis.abstained / labelled:.0f}%; at most {100 * thresholds.max_abstention_rate:g}% "
                   "allowed): approval never rests on the items a judge chose to answer")
    for figure, op, limit in rule_of(axis.kind, thresholds):
        bound = getattr(axis, _BOUND_FIELDS[figure])
        side = "lower" if op == ">=" else "upper"
        name = _LABELS[figure]
        if bound is None:
            why = {"kappa": "one class only on one side", "tpr": "no human pass label",
                   "tnr": "no human fail label", "spearman": "constant scores on one side",
                   "mae": "no items"}[figure]
            out.append(f"the {level} {side} bound of {name} is unknown ({why})")
        elif op == ">=" and bound < limit:
            out.append(f"the {level} lower bound of {name} is {bound:.3f}, below {limit}")
        elif op == "<=" and bound > limit:
            out.append(f"the {level} upper bound of {name} is {bound:.3f}, above {limit}")
        elif figure in FLOORS and (floor := axis.floor_bounds.get(figure, bound)) is not None and floor <= FLOORS[figure]:
            floor_level = _level(max(FLOOR_CONFIDENCE, axis.confidence or thresholds.confidence))
            out.append(f"the {floor_level} lower bound of {name} is {floor:.3f}: not above {FLOORS[figure]:g}, no better "
                       "than chance (a floor no suite setting lowers)")
    return out


def lowered(thresholds: Thresholds) -> list[str]:
    """The suite's thresholds that are more lenient than judgekit's defaults, in words (every
    gating line states them)."""
    defaults = Thresholds()
    out = []
    for name, value in thresholds.model_dump().items():
        default = getattr(defaults, name)
        more_lenient = value > default if name in ("max_mae", "max_abstention_rate") else value < default
        if name == "graded_pass":
            more_lenient = value != default
        if more_lenient:
            out.append(f"{name} {value:g} (default {default:g})")
    return out


def describe_sample(sample: LabelSample | None) -> str:
    """ "24 items labelled 2026-11-30 by 1 labeller" """
    if sample is None:
        return "an undescribed label set"
    first, last = sample.first_labeled_at, sample.last_labeled_at
    if first is None or last is None:
        when = "labelled on dates not recorded"
    elif first.date() == last.date():
        when = f"labelled {first.date().isoformat()}"
    else:
        when = f"labelled {first.date().isoformat()} to {last.date().isoformat()}"
    if sample.n_undated and first is not None:
        when += f" ({sample.n_undated} label(s) undated)"
    who = f"{sample.n_labelers} labeller" + ("" if sample.n_labelers == 1 else "s")
    return f"{sample.n_items} item(s) {when} by {who}"


def statement_of(axis: AxisApproval, thresholds: Thresholds) -> str:
    """One sentence: the decision, the bounds it rests on, the labels they come from."""
    level = _level(axis.confidence or thresholds.confidence)
    figures = []
    for figure, op, _ in rule_of(axis.kind, thresholds):
        bound = getattr(axis, _BOUND_FIELDS[figure])
        figures.append(f"{_LABELS[figure]} {op} {'unknown' if bound is None else f'{bound:.2f}'}")
    classes = "" if axis.n_pass is None else f" ({axis.n_pass} pass, {axis.n_fail} fail)"
    sample = describe_sample(axis.sample)
    if axis.sample is not None:
        sample = sample.replace(f"{axis.sample.n_items} item(s)", f"{axis.sample.n_items} item(s){classes}", 1)
    text = f"{axis.axis} judge {axis.decision}: {', '.join(figures)} ({level} one-sided bounds) on {sample}"
    if axis.abstained:
        text += f"; no verdict on {axis.abstained} of {axis.n + axis.abstained} labelled item(s)"
    if axis.decision == "refused":
        text += "; short of the rule: " + "; ".join(shortfalls(axis, thresholds))
    return text


def decide(axis: AxisApproval, thresholds: Thresholds) -> tuple[str, list[str]]:
    """Approved when every bound of ``axis`` clears ``thresholds`` (``rule_of``)."""
    short = shortfalls(axis, thresholds)
    if short:
        return "refused", short
    level = _level(axis.confidence or thresholds.confidence)
    cleared = [f"{_LABELS[f]} {op} {getattr(axis, _BOUND_FIELDS[f]):.3f} ({'lower' if op == '>=' else 'upper'} "
               f"bound; needed {op} {limit})" for f, op, limit in rule_of(axis.kind, thresholds)]
    return "approved", [f"on {axis.n} items, {level} one-sided bounds: " + ", ".join(cleared)]


def label_sample(labels: Sequence[Any], axis: str, trajectory_ids: set[str]) -> LabelSample:
    """The labels of ``axis`` on the items in the maths: how many, when, by how many people."""
    chosen = [lab for lab in labels if lab.axis == axis and lab.trajectory_id in trajectory_ids]
    dated = [when if when.tzinfo is not None else when.replace(tzinfo=timezone.utc)
             for lab in chosen if (when := getattr(lab, "labeled_at", None)) is not None]
    return LabelSample(
        n_items=len({lab.trajectory_id for lab in chosen}), n_labels=len(chosen),
        n_labelers=len({lab.labeler for lab in chosen}),
        first_labeled_at=min(dated, default=None), last_labeled_at=max(dated, default=None),
        n_undated=len(chosen) - len(dated),
    )


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
