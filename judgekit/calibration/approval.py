"""Approval records: a judge earns the right to gate, per rubric and axis.

``calibration/<rubric-id>/approvals/<fingerprint>.json``. The fingerprint hashes exactly what
makes a judge this judge: model pin, endpoint (the server it answers from: another server
claiming the same model name is another judge), parameters, rubric id@version and content
hash, prompt template hash. Change any of them and the approval no longer applies: the axis is advisory
until someone calibrates again.

The rule (format 2): a judge is approved on an axis when confidence bounds, not point
estimates, clear the thresholds (``Thresholds``; bounds from ``judgekit.calibration.bounds``):

- every axis: at least ``min_items`` labelled items with a verdict, and the lower bound of
  kappa at least ``min_kappa`` (graded axes: kappa on scores binarised at the threshold);
- binary axes: the lower bounds of TPR and TNR at least ``min_tpr`` and ``min_tnr``;
- graded axes: the lower bound of Spearman's correlation at least ``min_spearman`` and the
  upper bound of the mean absolute error at most ``max_mae``.

Each axis says in ``statement`` what it certifies and on which labels. Format 1 records
(approved when the point estimate of kappa reached ``min_kappa``) are read through the numbered
migration ``MIGRATIONS[1]``: what they stored (the (human, judge) pairs) is re-measured with
today's bounds, and an approval that does not clear today's rule does not gate: the gate shows
the axis as advisory and says which bound falls short (``ApprovalRecord.gates``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from judgekit._files import write_text_atomically
from judgekit._io import MAX_DOCUMENT_BYTES, describe_validation_error, read_json, sha256_json
from judgekit.calibration._bootstrap import Metric
from judgekit.errors import InputError
from judgekit.suite import ApprovalThresholds
from judgekit.verdict import Provenance

APPROVAL_FORMAT_VERSION = 2


class Thresholds(ApprovalThresholds):
    """What a judge must reach, per axis, before it may gate: bounds, not point estimates (the
    suite's ``approval`` block, ``judgekit.suite.ApprovalThresholds``)."""

    @classmethod
    def of(cls, thresholds: ApprovalThresholds) -> Thresholds:
        """The suite's thresholds, with today's defaults for what the suite does not set."""
        return thresholds if isinstance(thresholds, cls) else cls.model_validate(thresholds.model_dump())


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


class LabelSample(BaseModel):
    """The human labels an axis's decision rests on."""

    model_config = ConfigDict(extra="forbid")

    n_items: int = Field(description="Labelled items in the maths (with a scored verdict).")
    n_labels: int = Field(description="Labels on those items (several labellers: several per item).")
    n_labelers: int = Field(description="Distinct labellers among those labels.")
    first_labeled_at: datetime | None = Field(None, description="Earliest labeled_at; null when none is dated.")
    last_labeled_at: datetime | None = Field(None, description="Latest labeled_at; null when none is dated.")
    n_undated: int = Field(0, description="Labels without a labeled_at.")


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
    spearman: Metric | None = Field(None, description="Graded axes: Spearman correlation, judge vs human scores.")
    mae: Metric | None = Field(None, description="Graded axes: mean absolute error, judge vs human scores.")
    mean_human: float | None = Field(None, description="Mean human label (pass = 1) on this sample.")
    mean_judge: float | None = Field(None, description="Mean judge verdict (pass = 1) on this sample.")
    pairs: list[tuple[bool, bool]] = Field(
        default_factory=list, description="(human pass, judge pass) per item: the corrected pass rate resamples them."
    )
    n_pass: int | None = Field(None, description="Items the humans labelled pass (graded: score >= threshold).")
    n_fail: int | None = Field(None, description="Items the humans labelled fail.")
    confidence: float | None = Field(None, description="One-sided level of the bounds below.")
    kappa_lower: float | None = Field(None, description="Lower confidence bound of kappa.")
    tpr_lower: float | None = Field(None, description="Binary axes: lower confidence bound of the TPR.")
    tnr_lower: float | None = Field(None, description="Binary axes: lower confidence bound of the TNR.")
    spearman_lower: float | None = Field(None, description="Graded axes: lower confidence bound of Spearman.")
    mae_upper: float | None = Field(None, description="Graded axes: upper confidence bound of the MAE.")
    methods: dict[str, str] = Field(default_factory=dict, description="How each bound was computed, by figure.")
    sample: LabelSample | None = Field(None, description="The labels this decision rests on.")
    scores: list[tuple[float, float]] = Field(
        default_factory=list, description="Graded axes: (human score, judge score) per item, so the gate can "
        "re-measure Spearman and MAE.")
    threshold: float = Field(0.5, ge=0, le=1, description="Graded axes: the score that counts as pass.")
    bounds_seed: int = Field(0, description="Seed of the bounds' draws (the gate re-measures with it).")
    bounds_draws: int = Field(2000, ge=100, le=100_000, description="Draws behind each bootstrap bound.")
    decision: Literal["approved", "refused"]
    reasons: list[str] = Field(description="Why, in words.")
    statement: str = Field("", description="What this decision certifies and on which labels, in one sentence.")


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

    format_version: Literal[2] = APPROVAL_FORMAT_VERSION
    rule: Literal["lower-bound", "point-estimate"] = Field(
        "lower-bound",
        description="lower-bound: decided on confidence bounds (format 2). point-estimate: a format 1 record, "
        "decided on the point estimate of kappa and read through the migration; it gates only where its "
        "re-measured bounds clear today's rule.",
    )
    migrated_from: int | None = Field(None, description="The format this record was read from, when migrated.")
    fingerprint: str
    judge: JudgeIdentity
    label_set_sha256: str = Field(description="sha256 of the labels file's bytes.")
    labels_file: str
    thresholds: Thresholds
    axes: dict[str, AxisApproval]
    drift: list[Drift] = Field(default_factory=list)
    decided_at: datetime
    judgekit_version: str

    def approved(self, axis: str, thresholds: ApprovalThresholds | None = None) -> bool:
        """Whether the judge may gate ``axis`` today (see ``gates``)."""
        return self.gates(axis, thresholds)[0]

    def gates(self, axis: str, thresholds: ApprovalThresholds | None = None) -> tuple[bool, str | None]:
        """Whether the judge's verdicts on ``axis`` may gate, and if not, why.

        Nothing the record claims is taken on trust where it can be measured again: the bounds
        are re-measured from the record's own items (its (human, judge) pairs, and a graded
        axis's scores) at the level of ``thresholds`` (the suite's, when the caller has them;
        else the record's own) and must clear them. An approval whose items no longer clear
        the rule, whose counts disagree with its items, or a format 1 approval that does not
        clear today's rule is advisory, with the reason."""
        if axis not in self.axes:
            return False, f"the approval record has no decision for {axis} (no labels for it)"
        decision = self.axes[axis]
        if decision.decision != "approved":
            return False, "the judge was refused: " + "; ".join(decision.reasons)
        rule = Thresholds.of(thresholds) if thresholds is not None else self.thresholds
        checked, problems = remeasured(decision, rule)
        if self.rule == "lower-bound":  # a record whose own figures say no is no approval, whatever it says
            if decision.confidence is not None and decision.confidence < rule.confidence:
                problems.append(f"its bounds are at {_level(decision.confidence)}, below the {_level(rule.confidence)} "
                                "the rule asks")
            if any(getattr(decision, field) is not None for field in _BOUND_FIELDS.values()):
                problems += [f"as recorded, {why}" for why in shortfalls(decision, rule)]
        short = problems + shortfalls(checked, rule, migrated=self.rule == "point-estimate")
        if not short:
            return True, None
        if self.rule == "point-estimate":
            return False, ("approved under the old point-estimate rule (approval format 1), but "
                           + "; ".join(short) + ": recalibrate (`judgekit calibrate`) to certify it")
        return False, ("recorded as approved, but its own labelled items do not bear it out: " + "; ".join(short)
                       + ": recalibrate (`judgekit calibrate`)")

    def certified(self, axis: str, thresholds: ApprovalThresholds | None = None) -> str:
        """What the approval of ``axis`` certifies, rebuilt from the re-measured figures (a
        statement stored in the file is never printed as it is)."""
        rule = Thresholds.of(thresholds) if thresholds is not None else self.thresholds
        checked, _ = remeasured(self.axes[axis], rule)
        return statement_of(checked, rule)


def approvals_dir(calibration_dir: Path, rubric_id: str) -> Path:
    return calibration_dir / rubric_id / "approvals"


def _v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    """Format 1 -> 2. Format 1 approved on the point estimate of kappa and did not describe
    its labels. Its (human pass, judge pass) pairs are re-measured with today's bounds: kappa,
    TPR and TNR of a binary axis, kappa of a graded one (whose scores format 1 did not keep, so
    its Spearman and MAE bounds stay unknown and it cannot clear today's rule). The decision is
    kept as it was recorded; ``ApprovalRecord.gates`` weighs it against today's rule."""
    from judgekit.calibration.bounds import RATE_METHOD, axis_bounds

    data = {**data, "format_version": 2, "rule": "point-estimate", "migrated_from": 1}
    axes = data.get("axes")
    if not isinstance(axes, dict):
        return data
    migrated = {}
    for name, axis in axes.items():
        if not isinstance(axis, dict):
            migrated[name] = axis
            continue
        axis = {key: value for key, value in axis.items()  # format 1 had no bounds: none is carried over
                if key not in ("kappa_lower", "tpr_lower", "tnr_lower", "spearman_lower", "mae_upper", "scores")}
        pairs = axis.get("pairs") or []
        n = axis.get("n")
        kappa = axis.get("kappa") if isinstance(axis.get("kappa"), dict) else {}
        if isinstance(pairs, list) and pairs and len(pairs) == n and all(
                isinstance(p, list) and len(p) == 2 and all(isinstance(v, bool) for v in p) for p in pairs):
            human = [float(h) for h, _ in pairs]
            judge = [float(j) for _, j in pairs]
            bounds = axis_bounds("binary", human, judge, name=str(name))
            axis.update(n_pass=bounds.n_pass, n_fail=bounds.n_fail, confidence=bounds.confidence,
                        kappa_lower=bounds.bounds["kappa"].bound)
            methods = {"kappa": bounds.bounds["kappa"].method + " (re-measured from format 1's pairs)"}
            if axis.get("kind") == "binary":
                axis.update(tpr_lower=bounds.bounds["tpr"].bound, tnr_lower=bounds.bounds["tnr"].bound)
                methods.update(tpr=RATE_METHOD, tnr=RATE_METHOD)
            axis["methods"] = methods
        value = kappa.get("value")
        shown = "undefined" if not isinstance(value, (int, float)) else f"{value:.3f}"
        axis["statement"] = (f"{name} judge {axis.get('decision')} under the old point-estimate rule (approval "
                             f"format 1): kappa {shown} on {n} items; which labels was not recorded")
        migrated[name] = axis
    data["axes"] = migrated
    return data


MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: _v1_to_v2, 2: lambda data: data}
"""Format version -> the function that reads it as the current format."""


def read_approval(path: Path) -> ApprovalRecord:
    """An approval record of any format, read as the current one (numbered migrations)."""
    expected = "an approval record"
    data = read_json(path, max_bytes=MAX_DOCUMENT_BYTES, expected=expected)
    version = data.get("format_version") if isinstance(data, dict) else None
    if isinstance(version, bool) or version not in MIGRATIONS:
        raise InputError(f"not {expected}: format_version {version!r} is not one of "
                         f"{sorted(MIGRATIONS)}", path)
    try:
        return ApprovalRecord.model_validate(MIGRATIONS[version](data))
    except ValidationError as exc:
        raise InputError(f"not {expected}: {describe_validation_error(exc)}", path) from None


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


_BOUND_FIELDS = {"kappa": "kappa_lower", "tpr": "tpr_lower", "tnr": "tnr_lower", "spearman": "spearman_lower",
                 "mae": "mae_upper"}
_LABELS = {"kappa": "kappa", "tpr": "TPR", "tnr": "TNR", "spearman": "Spearman", "mae": "MAE"}


def _level(confidence: float) -> str:
    """0.95 -> "95%", 0.975 -> "97.5%", 0.999 -> "99.9%": never rounded up to a level it does not have."""
    return f"{100 * confidence:.4g}%"


def rule_of(kind: str, thresholds: Thresholds) -> list[tuple[str, str, float]]:
    """(figure, ">=" or "<=", threshold) that an axis of this kind must clear with its bounds."""
    rule = [("kappa", ">=", thresholds.min_kappa)]
    if kind == "binary":
        return rule + [("tpr", ">=", thresholds.min_tpr), ("tnr", ">=", thresholds.min_tnr)]
    return rule + [("spearman", ">=", thresholds.min_spearman), ("mae", "<=", thresholds.max_mae)]


def shortfalls(axis: AxisApproval, thresholds: Thresholds, *, migrated: bool = False) -> list[str]:
    """What keeps ``axis`` from clearing the lower-bound rule, in words (empty: it clears).
    ``migrated``: a format 1 record, whose missing bounds were never recorded."""
    level = _level(axis.confidence or thresholds.confidence)
    out = []
    if axis.n < thresholds.min_items:
        out.append(f"only {axis.n} labelled item(s) with a verdict; at least {thresholds.min_items} needed")
    for figure, op, limit in rule_of(axis.kind, thresholds):
        bound = getattr(axis, _BOUND_FIELDS[figure])
        side = "lower" if op == ">=" else "upper"
        name = _LABELS[figure]
        if bound is None:
            why = {"kappa": "one class only on one side", "tpr": "no human pass label",
                   "tnr": "no human fail label", "spearman": "constant scores on one side",
                   "mae": "no items"}[figure]
            if migrated:
                why = "approval format 1 did not record what it needs"
            out.append(f"the {level} {side} bound of {name} is unknown ({why})")
        elif op == ">=" and bound < limit:
            out.append(f"the {level} lower bound of {name} is {bound:.3f}, below {limit}")
        elif op == "<=" and bound > limit:
            out.append(f"the {level} upper bound of {name} is {bound:.3f}, above {limit}")
    return out


def remeasured(axis: AxisApproval, thresholds: Thresholds) -> tuple[AxisApproval, list[str]]:
    """``axis`` as its own items show it: n and the class counts counted from its pairs, the
    bounds measured again from them (binary: the pairs; graded: the scores) at the level of
    ``thresholds``, with the record's seed. What cannot be measured again is left unknown, so
    it cannot clear a rule. Also, in words, where the record's counts disagree with its items."""
    from judgekit.calibration.bounds import axis_bounds

    problems = []
    kind = axis.kind
    if kind == "binary" or not axis.scores:  # a graded axis without scores (format 1): kappa only
        kind = "binary"
        human = [float(h) for h, _ in axis.pairs]
        judge = [float(j) for _, j in axis.pairs]
    else:
        human = [h for h, _ in axis.scores]
        judge = [j for _, j in axis.scores]
        if [(h >= axis.threshold, j >= axis.threshold) for h, j in axis.scores] != [tuple(p) for p in axis.pairs]:
            problems.append("its pass/fail pairs disagree with its scores")
    if len(human) != axis.n:
        problems.append(f"it records {axis.n} labelled item(s) but holds {len(human)}")
    update: dict[str, Any] = {"n": len(human), "confidence": thresholds.confidence,
                              "kappa_lower": None, "tpr_lower": None, "tnr_lower": None,
                              "spearman_lower": None, "mae_upper": None}
    if human:
        bounds = axis_bounds(kind, human, judge, threshold=axis.threshold if kind == "graded" else 0.5,
                             seed=axis.bounds_seed, name=axis.axis, n_draws=axis.bounds_draws,
                             confidence=thresholds.confidence)
        update.update(n_pass=bounds.n_pass, n_fail=bounds.n_fail)
        for name, bound in bounds.bounds.items():
            if axis.kind == "binary" or name == "kappa" or kind == "graded":
                update[_BOUND_FIELDS[name]] = bound.bound
    return axis.model_copy(update=update), problems


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
