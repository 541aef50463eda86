"""The approval rule: a judge earns the right to gate, per rubric and axis.

The rule: a judge is approved on an axis when confidence bounds, not point estimates, clear the
suite's thresholds (``Thresholds``; bounds from ``judgekit.calibration.bounds``):

- every axis: at least ``min_items`` labelled items with a verdict, no more than
  ``max_abstention_rate`` of the labelled items without one, and the lower bound of kappa at
  least ``min_kappa`` (graded axes: kappa on scores binarised at ``graded_pass``);
- binary axes: the lower bounds of TPR and TNR at least ``min_tpr`` and ``min_tnr``;
- graded axes: the lower bound of Spearman's correlation at least ``min_spearman`` and the
  upper bound of the mean absolute error at most ``max_mae``;
- whatever the suite sets, a kappa or Spearman bound at or below 0 never clears (``FLOORS``);
- no label in the maths was made by a model (``labeler_kind: model``) unless the suite allows
  model-made labels (``allow_model_labels``); then the statement says how many were. A label
  that does not say who made it is of unknown origin: it is not refused (label files written
  before ``labeler_kind`` existed keep deciding as they did), but never passed off as a
  person's either: every statement counts the labels of unknown origin.

This module holds the rule; the record it fills, and its file format, are
``judgekit.calibration.approval_record``. The record is never trusted as written: the gate
re-derives it from the labels and verdicts files it names (``judgekit.calibration.evidence``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timezone
from typing import Any

from judgekit.calibration.approval_record import ApprovalRecord, AxisApproval, Drift, LabelSample, Thresholds

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
    if axis.sample is not None and axis.sample.n_model and not thresholds.allow_model_labels:
        out.append(f"{axis.sample.n_model} of its {axis.sample.n_labels} label(s) were made by a model (labeler_kind: "
                   "model): a judge is approved against people's labels, unless the suite allows model-made ones "
                   "(approval.allow_model_labels: true)")
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
        if isinstance(value, bool):
            if value != default:
                out.append(f"{name} {str(value).lower()} (default {str(default).lower()})")
            continue
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
    if sample.n_not_person:
        who += f"; of its {sample.n_labels} label(s), {_not_a_person(sample)}"
    return f"{sample.n_items} item(s) {when} by {who}"


def _not_a_person(sample: LabelSample) -> str:
    """ "3 made by a model and 2 of unknown origin" (labels not known to be a person's)"""
    parts = [f"{sample.n_model} made by a model" if sample.n_model else "",
             f"{sample.n_unknown} of unknown origin" if sample.n_unknown else ""]
    return " and ".join(part for part in parts if part)


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
    if axis.decision == "approved" and axis.sample is not None and axis.sample.n_model:
        text += "; on labels partly made by a model, as the suite allows (approval.allow_model_labels)"
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
        n_model=sum(getattr(lab, "labeler_kind", None) == "model" for lab in chosen),
        n_unknown=sum(getattr(lab, "labeler_kind", None) is None for lab in chosen),
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
