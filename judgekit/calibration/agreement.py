"""How well a judge agrees with human labels, per axis, with seeded bootstrap intervals.

``agreement(labels, verdicts)`` matches one judge's verdicts to labels by (trajectory_id, axis)
and reports each (axis, item kind) apart; ``agreement_by_judge`` does so for every judge of a
verdicts file (one report per judge, the same labels, references and resampling seed):

- binary items (``BinaryAxisReport``): n, base rate (share of human "pass"), accuracy, Cohen's
  kappa (scikit-learn), TPR (= recall: judge pass among human pass), TNR, precision, balanced
  accuracy (mean of TPR and TNR) and macro F1 (mean of the F1 of pass and of fail), each with
  its interval, and the confusion matrix (tp, fp, fn, tn; "pass" is positive), raw counts always.
- multiclass items (``MulticlassAxisReport``): labels carry a class of the source's scheme; the
  classes named positive count as pass, the others as fail, then the binary figures above;
  the class-by-verdict table (``class_confusion``) keeps what the mapping folds together.
- graded items (``GradedAxisReport``): Spearman correlation (scipy), mean absolute error, and
  the binary statistics after binarising both sides at ``threshold`` (pass when score >=
  threshold). Inter-annotator kappa on graded items uses the same binarisation.
- pairwise items (``PairwiseAxisReport``): see ``judgekit.calibration.pairwise``.

Rules, all visible in the report rather than applied silently:

- An unscored verdict is always counted (``n_unscored``, ``unscored_ids``); by default
  (``unscored="exclude"``) it is left out of the maths, never a pass, a fail or a preference.
  With ``unscored="wrong"`` it counts as a wrong answer: the opposite of the reference (graded:
  the far end of the scale, 0 when the human score is >= threshold, else 1; pairwise: the other
  answer).
- A verdict that carries a score but no pass/fail on a pass/fail item (a score-only detector)
  is pass when score >= ``threshold``; such verdicts are counted in ``n_from_score``.
- A labelled item without verdict is listed in ``missing_ids``; a verdict without label is
  listed in ``unmatched_verdict_ids``.
- Several labelers: the reference follows the pooling rule (``pool``: majority, ties left out
  and listed in ``tied_ids``; any; all; see ``_aggregate``), stated per section in
  ``reference_rule``. Inter-annotator agreement is reported.
- Repeats (verdicts with distinct ``repeat``): the maths uses the majority verdict, a tie going
  to the lowest-numbered scored repeat (graded: the mean score); flip rate and unstable ids are
  in ``repeats``.
- Inter-annotator agreement: Cohen's kappa for two labelers, Fleiss' for more, on the items
  every labeler of the axis labelled; Krippendorff's alpha (nominal) on every item with two
  labels or more.
- Intervals: seeded percentile bootstrap over items (``judgekit.calibration._bootstrap``);
  resamples on which a statistic is undefined are left out and counted in ``n_degenerate``.
"""

from __future__ import annotations

import warnings
from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Sequence
from functools import partial
from typing import Annotated, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from judgekit._util.io import Version1
from judgekit.calibration._aggregate import (
    AxisCoverage,
    InterAnnotator,
    Pool,
    Reference,
    References,
    Units,
    aggregate,
    coverage_fields,
    inter_annotator,
    reference_labels,
    reference_rule,
)
from judgekit.calibration._bootstrap import CONFIDENCE, Metric, bootstrap, metric, point, ratio, rng_for
from judgekit.calibration._stats import binary_cells, binary_metrics, cohen_kappa
from judgekit.calibration.labels import AXES, SAFETY_QUESTIONS, ItemKind, Label
from judgekit.calibration.pairwise import PairwiseAxisReport, pairwise_report
from judgekit.calibration.verdicts import JudgeVerdictRecord, verdict_key
from judgekit.errors import InputError

REPORT_FORMAT_VERSION = 1
_KIND_ORDER: dict[str, int] = {"binary": 0, "multiclass": 1, "graded": 2, "pairwise": 3}
Unscored = Literal["exclude", "wrong"]
UNSCORED_RULES: tuple[Unscored, ...] = ("exclude", "wrong")


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
    balanced_accuracy: Metric = Field(
        description="Mean of TPR and TNR (over the classes present in the human labels, as "
        "scikit-learn's balanced_accuracy_score)."
    )
    f1_macro: Metric = Field(
        description="Mean of the F1 of pass and the F1 of fail (over the classes present on either "
        'side, as scikit-learn\'s f1_score(average="macro")).'
    )


class BinaryAxisReport(BinaryStats, AxisCoverage):
    """Agreement on one axis whose items are pass/fail."""

    kind: Literal["binary"] = Field(default="binary", description="Item kind of this section.")
    n_from_score: int = Field(
        default=0, description="Verdicts with a score and no pass/fail, made pass/fail at the threshold."
    )


class ClassRow(BaseModel):
    """One human class against the judge's verdicts."""

    model_config = ConfigDict(extra="forbid")

    category: str = Field(description="The human class.")
    positive: bool = Field(description="Whether the class counts as pass.")
    judge_pass: int = Field(description="Labels of this class on items the judge passed.")
    judge_fail: int = Field(description="Labels of this class on items the judge failed.")
    unscored: int = Field(description="Labels of this class on items whose verdict is unscored.")


class MulticlassAxisReport(BinaryStats, AxisCoverage):
    """Agreement on one axis whose labels are classes, mapped to pass/fail by the positive classes."""

    kind: Literal["multiclass"] = Field(default="multiclass", description="Item kind of this section.")
    positive_classes: list[str] = Field(description="Classes that count as pass (as stated by the caller).")
    negative_classes: list[str] = Field(description="Every other class of the labels: they count as fail.")
    class_confusion: list[ClassRow] = Field(
        description="Human class x judge verdict, one row per class, counted over LABELS (one per "
        "labeler and item; with one labeler per item, items) on the items of this section that "
        "have a verdict."
    )
    inter_annotator_pass_fail: InterAnnotator | None = Field(
        default=None, description="Agreement among the labelers after mapping classes to pass/fail."
    )
    n_from_score: int = Field(
        default=0, description="Verdicts with a score and no pass/fail, made pass/fail at the threshold."
    )


class GradedAxisReport(AxisCoverage):
    """Agreement on one axis whose items are scores in [0, 1]."""

    kind: Literal["graded"] = Field(default="graded", description="Item kind of this section.")
    n: int = Field(description="Items in the maths (labelled, with a scored verdict).")
    spearman: Metric = Field(description="Spearman rank correlation, judge vs human scores.")
    mae: Metric = Field(description="Mean absolute error between judge and human scores.")
    threshold: float = Field(description="Scores >= threshold count as pass in ``binarised``.")
    binarised: BinaryStats = Field(description="Binary statistics after binarising both sides.")


SectionReport = BinaryAxisReport | MulticlassAxisReport | GradedAxisReport | PairwiseAxisReport
AxisReport = Annotated[SectionReport, Field(discriminator="kind")]


class AgreementReport(BaseModel):
    """Judge-vs-human agreement, one section per (axis, item kind)."""

    model_config = ConfigDict(extra="forbid")

    format_version: Version1 = Field(default=REPORT_FORMAT_VERSION, description="Version of this report format.")
    judge: str | None = Field(description="The judge whose verdicts were compared (from the verdicts).")
    seed: int = Field(description="Bootstrap seed; the same seed gives the same report.")
    n_boot: int = Field(description="Bootstrap resamples per section.")
    confidence: float = Field(default=CONFIDENCE, description="Level of the percentile intervals.")
    threshold: float = Field(
        description="Pass threshold used to binarise graded scores, and the scores of verdicts that "
        "carry no pass/fail (score-only detectors)."
    )
    pool: Pool = Field(
        default="majority",
        description="How several labelers' pass/fail labels make the reference: majority (ties left "
        "out), any (pass when any says pass) or all (pass only when all do).",
    )
    unscored: Unscored = Field(
        default="exclude",
        description="exclude: unscored verdicts are left out of the maths (and counted); wrong: they "
        "count as wrong answers (and are counted).",
    )
    positive_classes: list[str] = Field(
        default_factory=list, description="Multiclass labels: the classes that count as pass; empty without."
    )
    axes: list[AxisReport] = Field(description="One section per (axis, item kind) present in the labels.")
    n_unmatched_verdicts: int = Field(description="Verdicts whose (trajectory, axis) has no label.")
    unmatched_verdict_ids: list[str] = Field(description="Their trajectory ids, sorted.")

    def section(self, axis: str, kind: ItemKind | None = None) -> SectionReport:
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
        balanced_accuracy=m("balanced_accuracy"),
        f1_macro=m("f1_macro"),
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


def wrong_value(ref: Reference, threshold: float) -> str | float:
    """What an unscored verdict counts as under ``unscored="wrong"``: the wrong answer."""
    if ref.kind == "graded":
        return 0.0 if float(ref.value) >= threshold else 1.0
    if ref.kind == "pairwise":
        return "B" if ref.value == "A" else "A"
    return "fail" if ref.value == "pass" else "pass"


def _class_confusion(
    refs: Sequence[Reference], outcome: dict[str, str | None], positive: Sequence[str], classes: Sequence[str]
) -> list[ClassRow]:
    rows = {c: {"judge_pass": 0, "judge_fail": 0, "unscored": 0} for c in classes}
    for ref in refs:
        if ref.trajectory_id not in outcome:
            continue  # no verdict at all
        value = outcome[ref.trajectory_id]
        column = "unscored" if value is None else ("judge_pass" if value == "pass" else "judge_fail")
        for category in ref.categories:
            rows[category][column] += 1
    return [ClassRow(category=c, positive=c in positive, **counts) for c, counts in rows.items()]


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
    unscored: Unscored = "exclude",
    rule: str = "",
    positive: Sequence[str] = (),
    classes: Sequence[str] = (),
) -> BinaryAxisReport | MulticlassAxisReport | GradedAxisReport:
    missing: list[str] = []
    unscored_ids: list[str] = []
    units: Units = {}
    outcome: dict[str, str | None] = {}
    human_vals: list[str | float] = []
    judge_vals: list[str | float] = []
    n_from_score = 0
    for ref in refs:
        recs = records.get(ref.trajectory_id)
        if not recs:
            missing.append(ref.trajectory_id)
            continue
        agg = aggregate(recs, kind, threshold)
        units[(ref.trajectory_id, "")] = (recs, agg)
        n_from_score += sum(1 for r in recs if r.scored and r.verdict is None and kind != "graded")
        outcome[ref.trajectory_id] = None if agg.value is None else str(agg.value)
        if agg.value is None:
            unscored_ids.append(ref.trajectory_id)
            if unscored == "exclude":
                continue
        human_vals.append(ref.value)
        judge_vals.append(wrong_value(ref, threshold) if agg.value is None else agg.value)
    coverage = coverage_fields(
        axis, refs, tied, missing, unscored_ids, len(unscored_ids), labels, kind, threshold, units, rule
    )
    rng = rng_for(seed, axis, kind)
    n = len(human_vals)
    if kind in ("binary", "multiclass"):
        human = np.array([v == "pass" for v in human_vals], dtype=bool)
        judge = np.array([v == "pass" for v in judge_vals], dtype=bool)
        stat = _binary_stat_fn(human, judge)
        stats = _binary_stats(human, judge, point(stat, n), bootstrap(n, stat, n_boot=n_boot, rng=rng))
        if kind == "binary":
            return BinaryAxisReport(**coverage, **stats.model_dump(), n_from_score=n_from_score)
        return MulticlassAxisReport(
            **coverage,
            **stats.model_dump(),
            positive_classes=list(positive),
            negative_classes=[c for c in classes if c not in positive],
            class_confusion=_class_confusion(refs, outcome, positive, classes),
            inter_annotator_pass_fail=inter_annotator(labels, kind, threshold, positive),
            n_from_score=n_from_score,
        )
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
        raise InputError(f"verdicts from several judges ({shown}): agreement() takes one judge at a time; "
                         "agreement_by_judge() (and `judgekit agreement`) reports each of them")
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


def _check_options(n_boot: int, unscored: str) -> None:
    if n_boot < 0:
        raise InputError("n_boot must be >= 0")
    if unscored not in UNSCORED_RULES:
        raise InputError(f"unknown rule for unscored verdicts {unscored!r}; use one of {', '.join(UNSCORED_RULES)}")


def agreement(
    labels: Iterable[Label],
    verdicts: Iterable[JudgeVerdictRecord],
    *,
    seed: int = 0,
    n_boot: int = 2000,
    threshold: float = 0.5,
    references: References | None = None,
    positive: Collection[str] | None = None,
    pool: Pool = "majority",
    unscored: Unscored = "exclude",
) -> AgreementReport:
    """Judge-vs-human agreement per (axis, item kind); see the module docstring for the rules.

    ``references``: the labels' reference values, when the caller has them already (then
    ``positive`` and ``pool`` are theirs). ``positive``: multiclass classes that count as pass.
    ``pool``: how several labelers make one reference. ``unscored``: "exclude" or "wrong"."""
    _check_options(n_boot, unscored)
    labels = list(labels)
    verdicts = list(verdicts)
    judge = _check_verdicts(verdicts)
    refs = references if references is not None else reference_labels(labels, positive=positive, pool=pool)

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

    out: list[SectionReport] = []
    order = (*AXES, *SAFETY_QUESTIONS)
    for axis, kind in sorted(sections, key=lambda k: (order.index(k[0]), _KIND_ORDER[k[1]])):
        section_refs = sorted(sections[(axis, kind)], key=lambda r: r.trajectory_id)
        tied = refs.tied.get((axis, kind), [])
        records = {r.trajectory_id: by_item.get((r.trajectory_id, axis), []) for r in section_refs}
        section_labels = labels_by_section[(axis, kind)]
        n_labelers = max(Counter(t for t, _ in {(lab.trajectory_id, lab.labeler) for lab in section_labels}).values(), default=0)
        options = {
            "seed": seed, "n_boot": n_boot, "threshold": threshold, "unscored": unscored,
            "rule": reference_rule(kind, refs.pool, n_labelers, refs.positive),
        }
        if kind == "pairwise":
            build = pairwise_report
        else:
            build = partial(_single_order_section, kind=kind)
            if kind == "multiclass":
                options |= {"positive": refs.positive, "classes": refs.classes.get(axis, [])}
        out.append(build(axis, section_refs, tied, records, section_labels, **options))
    return AgreementReport(
        judge=judge,
        seed=seed,
        n_boot=n_boot,
        threshold=threshold,
        pool=refs.pool,
        unscored=unscored,
        positive_classes=list(refs.positive),
        axes=out,
        n_unmatched_verdicts=sum(len(by_item[k]) for k in by_item if k not in refs.kinds),
        unmatched_verdict_ids=unmatched,
    )


def split_by_judge(verdicts: Iterable[JudgeVerdictRecord]) -> dict[str | None, list[JudgeVerdictRecord]]:
    """The verdicts of each judge (None: records without ``judge``), judges sorted by name."""
    by_judge: dict[str | None, list[JudgeVerdictRecord]] = defaultdict(list)
    for v in verdicts:
        by_judge[v.judge or None].append(v)
    return dict(sorted(by_judge.items(), key=lambda kv: (kv[0] is not None, kv[0] or "")))


def agreement_by_judge(
    labels: Iterable[Label],
    verdicts: Iterable[JudgeVerdictRecord],
    *,
    judges: Collection[str] | None = None,
    seed: int = 0,
    n_boot: int = 2000,
    threshold: float = 0.5,
    positive: Collection[str] | None = None,
    pool: Pool = "majority",
    unscored: Unscored = "exclude",
) -> list[AgreementReport]:
    """One report per judge of ``verdicts`` (sorted by judge name; ``judges``: only these), all
    on the same references. The bootstrap generator depends on the seed and section only, so
    the judges are resampled alike (paired) wherever they have the same items in the maths."""
    _check_options(n_boot, unscored)
    labels = list(labels)
    refs = reference_labels(labels, positive=positive, pool=pool)
    by_judge = split_by_judge(verdicts)
    if judges is not None:
        unknown = sorted(set(judges) - {j for j in by_judge if j is not None})
        if unknown:
            known = ", ".join(repr(j) if j else "(unnamed)" for j in by_judge) or "none"
            raise InputError(f"no verdicts from judge {unknown[0]!r} (judges in the verdicts: {known})")
        by_judge = {j: v for j, v in by_judge.items() if j in judges}
    if not by_judge:  # no verdicts at all: one report, every labelled item missing
        by_judge = {None: []}
    options = {"seed": seed, "n_boot": n_boot, "threshold": threshold, "unscored": unscored}
    return [agreement(labels, records, references=refs, **options) for records in by_judge.values()]
