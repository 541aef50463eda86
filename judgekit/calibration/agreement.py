"""How well a judge agrees with human labels, per axis, with seeded bootstrap intervals.

``agreement(labels, verdicts)`` matches verdicts to labels by (trajectory_id, axis) and reports
each (axis, item kind) apart:

- binary items (``BinaryAxisReport``): n, base rate (share of human "pass"), accuracy, Cohen's
  kappa (scikit-learn), TPR (= recall: judge pass among human pass), TNR, precision and the
  confusion matrix (tp, fp, fn, tn; "pass" is positive), raw counts always.
- graded items (``GradedAxisReport``): Spearman correlation (scipy), mean absolute error, and
  the binary statistics after binarising both sides at ``threshold`` (pass when score >=
  threshold). Inter-annotator kappa on graded items uses the same binarisation.
- pairwise items (``PairwiseAxisReport``): see ``judgekit.calibration.pairwise``.

Rules, all visible in the report rather than applied silently:

- An unscored verdict is counted apart (``n_unscored``, ``unscored_ids``) and left out of the
  maths; it is never a pass, a fail or a preference.
- A labelled item without verdict is listed in ``missing_ids``; a verdict without label is
  listed in ``unmatched_verdict_ids``.
- Several labelers: the reference is the majority label; a tie has no reference and the item is
  listed in ``tied_ids`` (graded: the mean score). Inter-annotator agreement is reported.
- Repeats (verdicts with distinct ``repeat``): the maths uses the majority verdict, a tie going
  to the lowest-numbered scored repeat (graded: the mean score); flip rate and unstable ids are
  in ``repeats``.
- Inter-annotator agreement: Cohen's kappa for two labelers, Fleiss' for more, on the items
  every labeler of the axis labelled.
- Intervals: seeded percentile bootstrap over items (``judgekit.calibration._bootstrap``);
  resamples on which a statistic is undefined are left out and counted in ``n_degenerate``.
- Verdicts must come from one judge: calibrate judges one at a time.
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from collections.abc import Iterable, Sequence
from functools import partial
from typing import Annotated, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from judgekit.calibration._aggregate import (
    AxisCoverage,
    Reference,
    References,
    Units,
    aggregate,
    coverage_fields,
    reference_labels,
)
from judgekit.calibration._bootstrap import CONFIDENCE, Metric, bootstrap, metric, point, ratio, rng_for
from judgekit.calibration._stats import binary_cells, binary_metrics, cohen_kappa
from judgekit.calibration.labels import AXES, ItemKind, Label
from judgekit.calibration.pairwise import PairwiseAxisReport, pairwise_report
from judgekit.calibration.verdicts import JudgeVerdictRecord, verdict_key
from judgekit.errors import InputError

REPORT_FORMAT_VERSION = 1
_KIND_ORDER: dict[str, int] = {"binary": 0, "graded": 1, "pairwise": 2}


class Confusion(BaseModel):
    """Counts of the 2x2 table, "pass" being positive: human in the rows, judge in the columns."""

    model_config = ConfigDict(extra="forbid")

    tp: int = Field(description="Human pass, judge pass.")
    fp: int = Field(description="Human fail, judge pass.")
    fn: int = Field(description="Human pass, judge fail.")
    tn: int = Field(description="Human fail, judge fail.")


class BinaryStats(BaseModel):
    """Judge-vs-human statistics on pass/fail decisions."""

    model_config = ConfigDict(extra="forbid")

    n: int = Field(description="Items in the maths (labelled, with a scored verdict).")
    confusion: Confusion = Field(description="Raw counts.")
    base_rate: Metric = Field(description="Share of human pass.")
    accuracy: Metric = Field(description="Share of items where judge and human agree.")
    kappa: Metric = Field(description="Cohen's kappa, judge vs human (null when undefined).")
    tpr: Metric = Field(description="True positive rate: judge pass among human pass.")
    tnr: Metric = Field(description="True negative rate: judge fail among human fail.")
    precision: Metric = Field(description="Human pass among judge pass.")
    recall: Metric = Field(description="Same as tpr, under its other name.")


class BinaryAxisReport(BinaryStats, AxisCoverage):
    """Agreement on one axis whose items are pass/fail."""

    kind: Literal["binary"] = Field(default="binary", description="Item kind of this section.")


class GradedAxisReport(AxisCoverage):
    """Agreement on one axis whose items are scores in [0, 1]."""

    kind: Literal["graded"] = Field(default="graded", description="Item kind of this section.")
    n: int = Field(description="Items in the maths (labelled, with a scored verdict).")
    spearman: Metric = Field(description="Spearman rank correlation, judge vs human scores.")
    mae: Metric = Field(description="Mean absolute error between judge and human scores.")
    threshold: float = Field(description="Scores >= threshold count as pass in ``binarised``.")
    binarised: BinaryStats = Field(description="Binary statistics after binarising both sides.")


AxisReport = Annotated[BinaryAxisReport | GradedAxisReport | PairwiseAxisReport, Field(discriminator="kind")]


class AgreementReport(BaseModel):
    """Judge-vs-human agreement, one section per (axis, item kind)."""

    model_config = ConfigDict(extra="forbid")

    format_version: Literal[1] = Field(default=REPORT_FORMAT_VERSION, description="Version of this report format.")
    judge: str | None = Field(description="The judge whose verdicts were compared (from the verdicts).")
    seed: int = Field(description="Bootstrap seed; the same seed gives the same report.")
    n_boot: int = Field(description="Bootstrap resamples per section.")
    confidence: float = Field(default=CONFIDENCE, description="Level of the percentile intervals.")
    threshold: float = Field(description="Pass threshold used to binarise graded scores.")
    axes: list[AxisReport] = Field(description="One section per (axis, item kind) present in the labels.")
    n_unmatched_verdicts: int = Field(description="Verdicts whose (trajectory, axis) has no label.")
    unmatched_verdict_ids: list[str] = Field(description="Their trajectory ids, sorted.")

    def section(
        self, axis: str, kind: ItemKind | None = None
    ) -> BinaryAxisReport | GradedAxisReport | PairwiseAxisReport:
        """The section for ``axis`` (and ``kind`` when an axis has several); KeyError if absent."""
        found = [s for s in self.axes if s.axis == axis and (kind is None or s.kind == kind)]
        if len(found) != 1:
            raise KeyError(f"{len(found)} sections for axis {axis!r} kind {kind!r}")
        return found[0]


def _binary_stat_fn(human: np.ndarray, judge: np.ndarray, prefix: str = ""):
    def stat(idx: np.ndarray) -> dict[str, np.ndarray]:
        cells = binary_cells(human[idx], judge[idx])
        return {prefix + k: v for k, v in binary_metrics(*cells).items()}

    return stat


def _binary_stats(
    human: np.ndarray, judge: np.ndarray, points: dict[str, float], boots: dict[str, np.ndarray], prefix: str = ""
) -> BinaryStats:
    tp, fp, fn, tn = (int(x) for x in binary_cells(human, judge))
    # the point kappa comes from scikit-learn; the vectorised one serves the resamples
    kappa = cohen_kappa(list(human), list(judge))

    def m(name: str, value: float | None = None) -> Metric:
        key = prefix + name
        return metric(points.get(key) if value is None else value, boots.get(key))

    return BinaryStats(
        n=len(human),
        confusion=Confusion(tp=tp, fp=fp, fn=fn, tn=tn),
        base_rate=m("base_rate"),
        accuracy=m("accuracy"),
        kappa=metric(kappa, boots.get(prefix + "kappa")),
        tpr=m("tpr"),
        tnr=m("tnr"),
        precision=m("precision"),
        recall=m("tpr"),
    )


def _spearman_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    from scipy.stats import rankdata

    rx = rankdata(x, axis=-1)
    ry = rankdata(y, axis=-1)
    rx = rx - rx.mean(axis=-1, keepdims=True)
    ry = ry - ry.mean(axis=-1, keepdims=True)
    return ratio((rx * ry).sum(axis=-1), np.sqrt((rx * rx).sum(axis=-1) * (ry * ry).sum(axis=-1)))


def _spearman_point(x: np.ndarray, y: np.ndarray) -> float | None:
    if len(x) < 2:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from scipy.stats import spearmanr

        value = float(spearmanr(x, y).statistic)
    return value if np.isfinite(value) else None


def _single_order_section(
    axis: str,
    refs: Sequence[Reference],
    tied: list[str],
    records: dict[str, list[JudgeVerdictRecord]],
    labels: Sequence[Label],
    *,
    kind: ItemKind,
    seed: int,
    n_boot: int,
    threshold: float,
) -> BinaryAxisReport | GradedAxisReport:
    missing: list[str] = []
    unscored: list[str] = []
    units: Units = {}
    human_vals: list[str | float] = []
    judge_vals: list[str | float] = []
    for ref in refs:
        recs = records.get(ref.trajectory_id)
        if not recs:
            missing.append(ref.trajectory_id)
            continue
        agg = aggregate(recs, kind, threshold)
        units[(ref.trajectory_id, "")] = (recs, agg)
        if agg.value is None:
            unscored.append(ref.trajectory_id)
            continue
        human_vals.append(ref.value)
        judge_vals.append(agg.value)
    coverage = coverage_fields(
        axis, refs, tied, missing, unscored, len(unscored), labels, kind, threshold, units
    )
    rng = rng_for(seed, axis, kind)
    n = len(human_vals)
    if kind == "binary":
        human = np.array([v == "pass" for v in human_vals], dtype=bool)
        judge = np.array([v == "pass" for v in judge_vals], dtype=bool)
        stat = _binary_stat_fn(human, judge)
        stats = _binary_stats(human, judge, point(stat, n), bootstrap(n, stat, n_boot=n_boot, rng=rng))
        return BinaryAxisReport(**coverage, **stats.model_dump())
    x = np.array(human_vals, dtype=float)
    y = np.array(judge_vals, dtype=float)
    binary = _binary_stat_fn(x >= threshold, y >= threshold, prefix="bin_")

    def stat(idx: np.ndarray) -> dict[str, np.ndarray]:
        out = binary(idx)
        out["spearman"] = _spearman_rows(x[idx], y[idx])
        out["mae"] = np.abs(x[idx] - y[idx]).mean(axis=-1)
        return out

    points = point(stat, n)
    boots = bootstrap(n, stat, n_boot=n_boot, rng=rng)
    return GradedAxisReport(
        **coverage,
        n=n,
        spearman=metric(_spearman_point(x, y), boots.get("spearman")),
        mae=metric(points.get("mae"), boots.get("mae")),
        threshold=threshold,
        binarised=_binary_stats(x >= threshold, y >= threshold, points, boots, prefix="bin_"),
    )


def _check_verdicts(verdicts: Sequence[JudgeVerdictRecord]) -> str | None:
    judges = sorted({v.judge or "" for v in verdicts})
    if len(judges) > 1:
        shown = ", ".join(repr(j) if j else "(unnamed)" for j in judges)
        raise InputError(f"verdicts from several judges ({shown}): calibrate one judge at a time, filter by `judge`")
    seen: set[tuple[str, str, str, str, int]] = set()
    for v in verdicts:
        key = verdict_key(v)
        if key in seen:
            raise InputError(
                f"two verdicts for {v.trajectory_id!r} on {v.axis} with the same order and repeat "
                f"({key[3]}, {key[4]}); give repeated runs distinct `repeat` numbers"
            )
        seen.add(key)
    return (judges[0] or None) if judges else None


def agreement(
    labels: Iterable[Label],
    verdicts: Iterable[JudgeVerdictRecord],
    *,
    seed: int = 0,
    n_boot: int = 2000,
    threshold: float = 0.5,
    references: References | None = None,
) -> AgreementReport:
    """Judge-vs-human agreement per (axis, item kind); see the module docstring for the rules.

    ``references``: the labels' reference values, when the caller has them already."""
    if n_boot < 0:
        raise InputError("n_boot must be >= 0")
    labels = list(labels)
    verdicts = list(verdicts)
    judge = _check_verdicts(verdicts)
    refs = references if references is not None else reference_labels(labels)

    by_item: dict[tuple[str, str], list[JudgeVerdictRecord]] = defaultdict(list)
    for v in verdicts:
        by_item[(v.trajectory_id, v.axis)].append(v)
    unmatched = sorted({tid for (tid, axis) in by_item if (tid, axis) not in refs.kinds})

    sections: dict[tuple[str, str], list[Reference]] = defaultdict(list)
    for ref in refs.items.values():
        sections[(ref.axis, ref.kind)].append(ref)
    for key in refs.tied:
        sections.setdefault(key, [])
    labels_by_section: dict[tuple[str, str], list[Label]] = defaultdict(list)
    for lab in labels:
        labels_by_section[(lab.axis, lab.kind)].append(lab)

    out: list[BinaryAxisReport | GradedAxisReport | PairwiseAxisReport] = []
    for axis, kind in sorted(sections, key=lambda k: (AXES.index(k[0]), _KIND_ORDER[k[1]])):
        section_refs = sorted(sections[(axis, kind)], key=lambda r: r.trajectory_id)
        tied = refs.tied.get((axis, kind), [])
        records = {r.trajectory_id: by_item.get((r.trajectory_id, axis), []) for r in section_refs}
        build = pairwise_report if kind == "pairwise" else partial(_single_order_section, kind=kind)
        section_labels = labels_by_section[(axis, kind)]
        options = {"seed": seed, "n_boot": n_boot, "threshold": threshold}
        out.append(build(axis, section_refs, tied, records, section_labels, **options))
    return AgreementReport(
        judge=judge,
        seed=seed,
        n_boot=n_boot,
        threshold=threshold,
        axes=out,
        n_unmatched_verdicts=sum(len(by_item[k]) for k in by_item if k not in refs.kinds),
        unmatched_verdict_ids=unmatched,
    )
