"""From raw records to one value per item: reference labels, repeated verdicts.

Rules (documented in ``agreement``):

- Multiclass labels (``category``) become pass/fail through the classes named positive (pass);
  every other class is fail. A class named positive that no label uses is an error (a typo).
  One labeler may give an item several classes (one line per marked span): the labeler's
  classes are their union, and the labeler says pass only when every one of them is positive.
  Pooling then reads one pass/fail per labeler, so ``any`` passes an item when some labeler's
  classes are all positive (FaithBench's best-pooling) and ``all`` only when the union of every
  labeler's classes is (worst-pooling). Inter-annotator agreement has one rating per labeler and
  item (the set of their classes, or its pass/fail): never a labeler per class.
- Reference label of an item with several labelers, by the pooling rule (``Pool``) on pass/fail
  items (binary, and multiclass after mapping): ``majority`` (default; a tie has no reference:
  the item is left out of the maths and listed in ``tied_ids``), ``any`` (pass when any labeler
  says pass) or ``all`` (pass only when every labeler does). Pairwise items always take the
  majority (a tie is left out); a graded item's reference is the mean of its labelers' scores.
- Repeated verdicts (same item, axis and order; distinct ``repeat``): the majority of the scored
  ones; a tie goes to the verdict of the lowest-numbered scored repeat. A graded item takes the
  mean score of its scored repeats. When every repeat is unscored the item is unscored. A
  verdict with a score and no pass/fail on a pass/fail item is pass when score >= threshold.
- A unit (item, or item x order for pairwise) is unstable when its scored repeats do not all
  agree; graded scores are compared after binarising at the threshold.
"""

from __future__ import annotations

import math

from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from judgekit.calibration._stats import cohen_kappa, fleiss_kappa, krippendorff_alpha_nominal
from judgekit.calibration.labels import ItemKind, Label
from judgekit.calibration.verdicts import JudgeVerdictRecord
from judgekit.errors import InputError


Pool = Literal["majority", "any", "all"]
POOLS: tuple[Pool, ...] = ("majority", "any", "all")
PASS_FAIL_KINDS = ("binary", "multiclass")


@dataclass(frozen=True)
class Reference:
    """The human reference for one item: a label ("pass"/"fail"/"A"/"B") or a mean score.

    Multiclass items: ``value`` is the pooled pass/fail, ``categories`` each labeler's class."""

    trajectory_id: str
    axis: str
    kind: ItemKind
    value: str | float
    n_labelers: int
    categories: tuple[str, ...] = ()


@dataclass
class References:
    items: dict[tuple[str, str], Reference]
    tied: dict[tuple[str, str], list[str]]  # (axis, kind) -> trajectory ids without a majority
    kinds: dict[tuple[str, str], ItemKind]  # (trajectory_id, axis) -> kind, tied items included
    pool: Pool = "majority"
    positive: tuple[str, ...] = ()
    """Multiclass classes that count as pass (sorted); empty without multiclass labels."""
    classes: dict[str, list[str]] = field(default_factory=dict)
    """Axis -> every class its multiclass labels use, sorted."""


def check_positive(labels: Sequence[Label], positive: Collection[str] | None) -> tuple[str, ...]:
    """The positive classes, checked against the classes the multiclass labels use."""
    classes = sorted({lab.category for lab in labels if lab.category is not None})
    chosen = sorted(set(positive or ()))
    if not classes:
        if chosen:
            raise InputError(f"--positive {chosen[0]!r} given but no label has a category (multiclass labels)")
        return ()
    shown = ", ".join(repr(c) for c in classes)
    if not chosen:
        raise InputError(f"the labels have classes ({shown}): say which count as pass with --positive CLASS "
                         "(repeatable; every other class counts as fail)")
    unknown = [c for c in chosen if c not in classes]
    if unknown:
        raise InputError(f"--positive {unknown[0]!r} is not a class of the labels (classes: {shown})")
    if len(chosen) == len(classes):
        raise InputError(f"every class ({shown}) is positive: nothing would count as fail")
    return tuple(chosen)


def classes_by_labeler(labels: Iterable[Label]) -> dict[str, frozenset[str]]:
    """Labeler -> the union of the classes they gave one multiclass item (span annotation: one
    line per marked span), in labeler order."""
    out: dict[str, set[str]] = defaultdict(set)
    for lab in labels:
        out[lab.labeler].add(str(lab.category))
    return {name: frozenset(out[name]) for name in sorted(out)}


def labeler_says(classes: Collection[str], positive: Collection[str]) -> str:
    """One labeler's pass/fail on a multiclass item: pass when every class they gave it is
    positive (one span of a class that is not fails the item)."""
    return "pass" if all(c in positive for c in classes) else "fail"


def _pooled(values: list[str], kind: ItemKind, pool: Pool) -> str | None:
    """The reference of one item from its labelers' values; None on a majority tie."""
    if kind in PASS_FAIL_KINDS and pool != "majority":
        hits = [v == "pass" for v in values]
        return "pass" if (any(hits) if pool == "any" else all(hits)) else "fail"
    ranked = Counter(values).most_common()
    if len(ranked) > 1 and ranked[0][1] == ranked[1][1]:
        return None
    return ranked[0][0]


def reference_labels(
    labels: Iterable[Label], *, positive: Collection[str] | None = None, pool: Pool = "majority"
) -> References:
    """One reference per labelled item; ``positive``: multiclass classes that count as pass."""
    if pool not in POOLS:
        raise InputError(f"unknown pooling rule {pool!r}; use one of {', '.join(POOLS)}")
    labels = list(labels)
    chosen = check_positive(labels, positive)
    by_item: dict[tuple[str, str], list[Label]] = defaultdict(list)
    for lab in labels:
        by_item[(lab.trajectory_id, lab.axis)].append(lab)
    items: dict[tuple[str, str], Reference] = {}
    tied: dict[tuple[str, str], list[str]] = defaultdict(list)
    kinds: dict[tuple[str, str], ItemKind] = {}
    for (tid, axis), group in by_item.items():
        kind_set = {lab.kind for lab in group}
        if len(kind_set) > 1:
            raise InputError(f"{tid!r} on {axis} is labelled as {sorted(kind_set)} at once; one item has one kind")
        kind = group[0].kind
        kinds[(tid, axis)] = kind
        labelers = [(lab.labeler, lab.category) for lab in group]
        if len(set(labelers)) != len(labelers):
            raise InputError(f"{tid!r} on {axis} has two labels from one labeler; keep one")
        categories: tuple[str, ...] = ()
        n_labelers = len({lab.labeler for lab in group})
        if kind == "graded":
            # fsum: the same whatever the lines' order; rounded so 0.1, 0.2, 0.3 average to 0.2
            value: str | float | None = round(math.fsum(lab.score for lab in group) / len(group), 12)
        elif kind == "multiclass":
            ordered = sorted(group, key=lambda lab: (lab.labeler, str(lab.category)))
            categories = tuple(str(lab.category) for lab in ordered)
            value = _pooled([labeler_says(classes, chosen) for classes in classes_by_labeler(group).values()],
                            kind, pool)
        else:
            value = _pooled([str(lab.label) for lab in group], kind, pool)
        if value is None:
            tied[(axis, kind)].append(tid)
            continue
        items[(tid, axis)] = Reference(tid, axis, kind, value, n_labelers, categories)
    classes: dict[str, set[str]] = defaultdict(set)
    for lab in labels:
        if lab.category is not None:
            classes[lab.axis].add(lab.category)
    return References(items, dict(tied), kinds, pool, chosen, {a: sorted(c) for a, c in classes.items()})


def reference_rule(kind: ItemKind, pool: Pool, n_labelers: int, positive: Sequence[str] = ()) -> str:
    """The rule that made the references of one section, in words (shown in the report)."""
    mapping = f"classes {', '.join(positive)} count as pass, every other class as fail; " if kind == "multiclass" else ""
    if n_labelers <= 1:
        return mapping + "one labeler per item: that label is the reference"
    if kind == "graded":
        return "the mean of the labelers' scores"
    if kind == "multiclass":
        mapping += "a labeler with several classes on an item says pass only when all of them count as pass; "
    if kind in PASS_FAIL_KINDS and pool == "any":
        return mapping + "pooled by 'any': pass when any labeler says pass"
    if kind in PASS_FAIL_KINDS and pool == "all":
        return mapping + "pooled by 'all': pass only when every labeler says pass"
    rule = mapping + "pooled by 'majority' of the labelers; a tie has no reference and is left out (tied_ids)"
    if kind == "pairwise" and pool != "majority":
        rule += f" (pairwise items always take the majority; --pool {pool} applies to pass/fail items)"
    return rule


class InterAnnotator(BaseModel):
    """Agreement between the human labelers themselves."""

    model_config = ConfigDict(extra="forbid")

    method: Literal["cohen", "fleiss"] = Field(description="Cohen's kappa for 2 labelers, Fleiss' for more.")
    labelers: list[str] = Field(description="The labelers compared (everyone who labelled this axis).")
    n_items: int = Field(description="Items labelled by all of them (the only ones the kappa uses).")
    kappa: float | None = Field(description="The kappa; null when undefined (no items, or one class only).")
    alpha: float | None = Field(
        default=None,
        description="Krippendorff's alpha (nominal) on every item with at least two labels, whoever "
        "gave them (missing ratings allowed); null when undefined.",
    )
    n_items_alpha: int = Field(default=0, description="Items with at least two labels (the ones alpha uses).")
    on: Literal["labels", "pass/fail", "classes"] = Field(
        default="labels",
        description="What was compared: the labels as given, pass/fail after binarising graded scores "
        "or mapping classes, or the multiclass classes themselves.",
    )
    note: str | None = Field(default=None, description="How graded scores were made categorical, if they were.")


def inter_annotator(
    labels: Sequence[Label], kind: ItemKind, threshold: float, positive: Collection[str] | None = None
) -> InterAnnotator | None:
    """Agreement between labelers of one (axis, kind); None with fewer than two labelers.

    Multiclass: on the classes, or on pass/fail when ``positive`` (the classes that pass) is given."""
    labelers = sorted({lab.labeler for lab in labels})
    if len(labelers) < 2:
        return None

    by_item: dict[str, dict[str, str]] = defaultdict(dict)
    if kind == "multiclass":  # one rating per labeler and item: the set of their classes, or its pass/fail
        grouped: dict[str, list[Label]] = defaultdict(list)
        for lab in labels:
            grouped[lab.trajectory_id].append(lab)
        for tid, group in grouped.items():
            for name, classes in classes_by_labeler(group).items():
                by_item[tid][name] = "+".join(sorted(classes)) if positive is None else labeler_says(classes, positive)
    else:
        for lab in labels:
            by_item[lab.trajectory_id][lab.labeler] = (
                ("pass" if lab.score >= threshold else "fail") if kind == "graded" else str(lab.label))
    complete = [row for _, row in sorted(by_item.items()) if len(row) == len(labelers)]
    pairable = [list(row.values()) for _, row in sorted(by_item.items()) if len(row) >= 2]
    common = {
        "labelers": labelers,
        "n_items": len(complete),
        "alpha": krippendorff_alpha_nominal(pairable),
        "n_items_alpha": len(pairable),
        "on": "pass/fail" if kind == "graded" or (kind == "multiclass" and positive is not None)
        else ("classes" if kind == "multiclass" else "labels"),
        "note": f"graded scores binarised: pass when score >= {threshold}" if kind == "graded" else None,
    }
    if len(labelers) == 2:
        a, b = labelers
        kappa = cohen_kappa([row[a] for row in complete], [row[b] for row in complete])
        return InterAnnotator(method="cohen", kappa=kappa, **common)
    categories = sorted({c for row in complete for c in row.values()})
    counts = np.array([[list(row.values()).count(c) for c in categories] for row in complete])
    kappa = fleiss_kappa(counts) if complete else None
    return InterAnnotator(method="fleiss", kappa=kappa, **common)


@dataclass(frozen=True)
class Aggregated:
    """The verdict of one unit after combining repeats; ``value`` None means unscored."""

    value: str | float | None
    n_scored: int
    unstable: bool


def _value_of(rec: JudgeVerdictRecord, kind: ItemKind, threshold: float) -> str | float:
    where = f"{rec.trajectory_id!r} on {rec.axis}"
    if kind == "graded":
        if rec.score is None:
            raise InputError(f"the verdict for graded item {where} has no score; graded items need a score in [0, 1]")
        return rec.score
    if kind != "pairwise" and rec.order is not None:
        raise InputError(f"the verdict for {kind} item {where} has an answer order; order is for pairwise items")
    if kind in PASS_FAIL_KINDS and rec.verdict is None and rec.score is not None:
        return "pass" if rec.score >= threshold else "fail"  # a score-only detector
    expected = ("pass", "fail") if kind in PASS_FAIL_KINDS else ("A", "B")
    if rec.verdict not in expected:
        got = "only a score" if rec.verdict is None else repr(rec.verdict)
        raise InputError(f"the verdict for {kind} item {where} is {got}; expected {' or '.join(expected)}")
    return rec.verdict


def aggregate(records: Sequence[JudgeVerdictRecord], kind: ItemKind, threshold: float) -> Aggregated:
    """Combine the repeats of one unit (same item, axis, order). ``threshold``: graded scores,
    and scores standing alone on pass/fail items, are pass when >= threshold."""
    ordered = sorted(records, key=lambda r: r.effective_repeat)
    values = [_value_of(r, kind, threshold) for r in ordered if r.scored]
    if not values:
        return Aggregated(None, 0, False)
    if kind == "graded":
        scores = [float(v) for v in values]
        decisions = {s >= threshold for s in scores}
        return Aggregated(round(math.fsum(scores) / len(scores), 12), len(scores), len(decisions) > 1)
    counts = Counter(values)
    best = max(counts.values())
    winner = next(v for v in values if counts[v] == best)  # first scored repeat among the tied
    return Aggregated(winner, len(values), len(counts) > 1)


class RepeatsReport(BaseModel):
    """How stable the judge is across repeated runs on the same unit."""

    model_config = ConfigDict(extra="forbid")

    n_repeated: int = Field(description="Units (items; item x order for pairwise) with >= 2 scored repeats.")
    max_repeats: int = Field(description="Most scored repeats seen on one unit.")
    n_unstable: int = Field(description="Repeated units whose scored verdicts differ.")
    flip_rate: float | None = Field(description="n_unstable / n_repeated; null with no repeated unit.")
    unstable_ids: list[str] = Field(description="Trajectory ids with at least one unstable unit, sorted.")


Units = dict[tuple[str, str], tuple[Sequence[JudgeVerdictRecord], Aggregated]]
"""(trajectory_id, order or "") -> the unit's records and their aggregate."""


def repeats_report(units: Units) -> RepeatsReport | None:
    """None when no unit has more than one record (no repeats were run)."""
    if not any(len(recs) > 1 for recs, _ in units.values()):
        return None
    repeated = [(key, agg) for key, (_, agg) in units.items() if agg.n_scored >= 2]
    unstable = sorted({key[0] for key, agg in repeated if agg.unstable})
    n_unstable = sum(agg.unstable for _, agg in repeated)
    return RepeatsReport(
        n_repeated=len(repeated),
        max_repeats=max((agg.n_scored for _, agg in repeated), default=0),
        n_unstable=n_unstable,
        flip_rate=n_unstable / len(repeated) if repeated else None,
        unstable_ids=unstable,
    )


class AxisCoverage(BaseModel):
    """Which labelled items of one (axis, kind) made it into the maths, and why others did not."""

    model_config = ConfigDict(extra="forbid")

    kind: ItemKind = Field(description="Item kind of this section: binary, graded, pairwise or multiclass.")
    axis: str = Field(description="The axis.")
    reference_rule: str = Field(
        default="", description="How the reference label of an item was made from its labels, in words."
    )
    n_items: int = Field(description="Labelled items with a reference label (ties excluded).")
    n_missing: int = Field(description="Labelled items without any verdict.")
    missing_ids: list[str] = Field(description="Their trajectory ids, sorted.")
    n_unscored: int = Field(
        description="Units whose verdict is unscored (items; item x order for pairwise), always "
        "counted: left out of the maths, or counted as wrong answers (the report's ``unscored``)."
    )
    unscored_ids: list[str] = Field(description="Trajectory ids with an unscored unit, sorted.")
    n_tied: int = Field(description="Items whose labelers tie (no majority): no reference, left out.")
    tied_ids: list[str] = Field(description="Their trajectory ids, sorted.")
    inter_annotator: InterAnnotator | None = Field(
        description="Agreement among the human labelers; null with a single labeler."
    )
    repeats: RepeatsReport | None = Field(description="Flip-rate analysis; null when no repeats were run.")


def coverage_fields(
    axis: str,
    refs: Sequence[Reference],
    tied: list[str],
    missing: list[str],
    unscored: list[str],
    n_unscored: int,
    labels: Sequence[Label],
    kind: ItemKind,
    threshold: float,
    units: Units,
    rule: str = "",
) -> dict[str, object]:
    return {
        "axis": axis,
        "reference_rule": rule,
        "n_items": len(refs),
        "n_missing": len(missing),
        "missing_ids": sorted(missing),
        "n_unscored": n_unscored,
        "unscored_ids": sorted(set(unscored)),
        "n_tied": len(tied),
        "tied_ids": sorted(tied),
        "inter_annotator": inter_annotator(labels, kind, threshold),
        "repeats": repeats_report(units),
    }
