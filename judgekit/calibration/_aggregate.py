"""From raw records to one value per item: reference labels, repeated verdicts.

Rules (documented in ``agreement``):

- Reference label of an item with several labelers: the majority label. A tie (as many "pass"
  as "fail", or "A" as "B") has no reference: the item is left out of the maths and listed in
  ``tied_ids``. A graded item's reference is the mean of its labelers' scores.
- Repeated verdicts (same item, axis and order; distinct ``repeat``): the majority of the scored
  ones; a tie goes to the verdict of the lowest-numbered scored repeat. A graded item takes the
  mean score of its scored repeats. When every repeat is unscored the item is unscored.
- A unit (item, or item x order for pairwise) is unstable when its scored repeats do not all
  agree; graded scores are compared after binarising at the threshold.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from judgekit.calibration._stats import cohen_kappa, fleiss_kappa
from judgekit.calibration.labels import ItemKind, Label
from judgekit.calibration.verdicts import JudgeVerdictRecord
from judgekit.errors import InputError


@dataclass(frozen=True)
class Reference:
    """The human reference for one item: a label ("pass"/"fail"/"A"/"B") or a mean score."""

    trajectory_id: str
    axis: str
    kind: ItemKind
    value: str | float
    n_labelers: int


@dataclass
class References:
    items: dict[tuple[str, str], Reference]
    tied: dict[tuple[str, str], list[str]]  # (axis, kind) -> trajectory ids without a majority
    kinds: dict[tuple[str, str], ItemKind]  # (trajectory_id, axis) -> kind, tied items included


def reference_labels(labels: Iterable[Label]) -> References:
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
        labelers = [lab.labeler for lab in group]
        if len(set(labelers)) != len(labelers):
            raise InputError(f"{tid!r} on {axis} has two labels from one labeler; keep one")
        if kind == "graded":
            value: str | float = float(np.mean([lab.score for lab in group]))
        else:
            ranked = Counter(lab.label for lab in group).most_common()
            if len(ranked) > 1 and ranked[0][1] == ranked[1][1]:
                tied[(axis, kind)].append(tid)
                continue
            value = str(ranked[0][0])
        items[(tid, axis)] = Reference(tid, axis, kind, value, len(group))
    return References(items, dict(tied), kinds)


class InterAnnotator(BaseModel):
    """Agreement between the human labelers themselves, on the items all of them labelled."""

    model_config = ConfigDict(extra="forbid")

    method: Literal["cohen", "fleiss"] = Field(description="Cohen's kappa for 2 labelers, Fleiss' for more.")
    labelers: list[str] = Field(description="The labelers compared (everyone who labelled this axis).")
    n_items: int = Field(description="Items labelled by all of them (the only ones used).")
    kappa: float | None = Field(description="The kappa; null when undefined (no items, or one class only).")
    note: str | None = Field(default=None, description="How graded scores were made categorical, if they were.")


def inter_annotator(labels: Sequence[Label], kind: ItemKind, threshold: float) -> InterAnnotator | None:
    """Kappa between labelers of one (axis, kind); None with fewer than two labelers."""
    labelers = sorted({lab.labeler for lab in labels})
    if len(labelers) < 2:
        return None

    def category(lab: Label) -> str:
        if kind == "graded":
            assert lab.score is not None
            return "pass" if lab.score >= threshold else "fail"
        return str(lab.label)

    by_item: dict[str, dict[str, str]] = defaultdict(dict)
    for lab in labels:
        by_item[lab.trajectory_id][lab.labeler] = category(lab)
    complete = [row for _, row in sorted(by_item.items()) if len(row) == len(labelers)]
    note = f"graded scores binarised: pass when score >= {threshold}" if kind == "graded" else None
    if len(labelers) == 2:
        a, b = labelers
        kappa = cohen_kappa([row[a] for row in complete], [row[b] for row in complete])
        return InterAnnotator(method="cohen", labelers=labelers, n_items=len(complete), kappa=kappa, note=note)
    categories = sorted({c for row in complete for c in row.values()})
    counts = np.array([[list(row.values()).count(c) for c in categories] for row in complete])
    kappa = fleiss_kappa(counts) if complete else None
    return InterAnnotator(method="fleiss", labelers=labelers, n_items=len(complete), kappa=kappa, note=note)


@dataclass(frozen=True)
class Aggregated:
    """The verdict of one unit after combining repeats; ``value`` None means unscored."""

    value: str | float | None
    n_scored: int
    unstable: bool


def _value_of(rec: JudgeVerdictRecord, kind: ItemKind) -> str | float:
    where = f"{rec.trajectory_id!r} on {rec.axis}"
    if kind == "graded":
        if rec.score is None:
            raise InputError(f"the verdict for graded item {where} has no score; graded items need a score in [0, 1]")
        return rec.score
    expected = ("pass", "fail") if kind == "binary" else ("A", "B")
    if rec.verdict not in expected:
        got = "only a score" if rec.verdict is None else repr(rec.verdict)
        raise InputError(f"the verdict for {kind} item {where} is {got}; expected {' or '.join(expected)}")
    if kind != "pairwise" and rec.order is not None:
        raise InputError(f"the verdict for {kind} item {where} has an answer order; order is for pairwise items")
    return rec.verdict


def aggregate(records: Sequence[JudgeVerdictRecord], kind: ItemKind, threshold: float) -> Aggregated:
    """Combine the repeats of one unit (same item, axis, order)."""
    ordered = sorted(records, key=lambda r: r.effective_repeat)
    values = [_value_of(r, kind) for r in ordered if r.scored]
    if not values:
        return Aggregated(None, 0, False)
    if kind == "graded":
        scores = [float(v) for v in values]
        decisions = {s >= threshold for s in scores}
        return Aggregated(float(np.mean(scores)), len(scores), len(decisions) > 1)
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

    kind: ItemKind = Field(description="Item kind of this section: binary, graded or pairwise.")
    axis: str = Field(description="The axis.")
    n_items: int = Field(description="Labelled items with a reference label (ties excluded).")
    n_missing: int = Field(description="Labelled items without any verdict.")
    missing_ids: list[str] = Field(description="Their trajectory ids, sorted.")
    n_unscored: int = Field(
        description="Units whose verdict is unscored (items; item x order for pairwise), counted "
        "apart and left out of the maths."
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
) -> dict[str, object]:
    return {
        "axis": axis,
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
