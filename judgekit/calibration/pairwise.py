"""Pairwise agreement: a judge picks the better of two answers, ideally in both answer orders.

Human labels and verdicts name answers by their ORIGINAL label ("A" = shown first in the
original order), so a verdict from the swapped order is directly comparable. Per item and order
the judge's choice is the (repeat-aggregated) verdict; an unscored one is no choice.

Figures (each with a seeded bootstrap interval over items unless said otherwise):

- per order (``orders["original"]``, ``orders["swapped"]``): ``n`` items with a verdict in that
  order, ``n_unscored``, ``n_correct`` (choice = human), ``accuracy`` = n_correct over scored
  verdicts, ``accuracy_strict`` = n_correct / n (an unscored verdict counts as not correct, as
  in LLMBar's tables), and Cohen's kappa judge vs human (``kappa_vs_human``, scored only).

With ``unscored="wrong"`` an unscored verdict counts as choosing the answer the human did not
prefer, in every figure below (then ``accuracy`` equals ``accuracy_strict``); ``n_unscored``
and ``n_both_unscored`` still count them. The default, "exclude", is what the list describes.
- ``accuracy_average``, ``kappa_vs_human_average``: mean over the orders present.
- ``correct_both``: share of items judged in both orders that are right in both (an unscored
  order is not right); counts in ``n_correct_both`` / ``n_both``.
- ``order_consistency``: share of items scored in both orders where both orders make the same
  choice (LLMBar's "equal"); counts in ``n_consistent`` / ``n_both_scored``. ``n_both_unscored``
  counts items unscored in both orders (LLMBar's script counts those as "equal", we do not).
- ``kappa_between_orders``: Cohen's kappa between the choices of the two orders, on items
  scored in both (LLMBar's "kappa_agreement").
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from judgekit.calibration._aggregate import Aggregated, AxisCoverage, Reference, Units, aggregate, coverage_fields
from judgekit.calibration._bootstrap import Metric, bootstrap, metric, ratio, rng_for
from judgekit.calibration._stats import binary_cells, cohen_kappa, kappa_from_cells
from judgekit.calibration.labels import Label
from judgekit.calibration.verdicts import JudgeVerdictRecord, Order

ORDERS: tuple[Order, ...] = ("original", "swapped")
_MISSING, _UNSCORED = -2, -1  # choice codes besides 1 = "A", 0 = "B"


class PairwiseOrderStats(BaseModel):
    """Judge vs human in one answer order."""

    model_config = ConfigDict(extra="forbid")

    n: int = Field(description="Items with a verdict in this order, scored or not.")
    n_unscored: int = Field(description="Of those, unscored.")
    n_correct: int = Field(description="Scored verdicts that pick the human's choice.")
    accuracy: Metric = Field(description="n_correct / scored verdicts.")
    accuracy_strict: float | None = Field(
        description="n_correct / n: an unscored verdict counts as not correct (LLMBar's convention)."
    )
    kappa_vs_human: Metric = Field(description="Cohen's kappa between judge and human choices (scored only).")


class PairwiseAxisReport(AxisCoverage):
    """Agreement on one axis whose items are A-vs-B preferences."""

    kind: Literal["pairwise"] = Field(default="pairwise", description="Item kind of this section.")
    n: int = Field(description="Items with a reference label and a verdict in at least one order.")
    orders: dict[Order, PairwiseOrderStats] = Field(description="Per answer order present in the verdicts.")
    accuracy_average: Metric = Field(description="Mean of the orders' accuracy.")
    kappa_vs_human_average: Metric = Field(description="Mean of the orders' kappa_vs_human.")
    n_both: int = Field(description="Items with a verdict in both orders.")
    n_correct_both: int = Field(description="Of those, right in both orders.")
    correct_both: Metric = Field(description="n_correct_both / n_both.")
    n_both_scored: int = Field(description="Items with a scored verdict in both orders.")
    n_consistent: int = Field(description="Of those, same choice in both orders.")
    n_both_unscored: int = Field(description="Items unscored in both orders.")
    order_consistency: Metric = Field(description="n_consistent / n_both_scored.")
    kappa_between_orders: Metric = Field(
        description="Cohen's kappa between the two orders' choices, on items scored in both."
    )


def _code(agg: Aggregated | None) -> int:
    if agg is None:
        return _MISSING
    if agg.value is None:
        return _UNSCORED
    return 1 if agg.value == "A" else 0


def pairwise_report(
    axis: str,
    refs: Sequence[Reference],
    tied: list[str],
    records: dict[str, list[JudgeVerdictRecord]],
    labels: Sequence[Label],
    *,
    seed: int,
    n_boot: int,
    threshold: float,
    unscored: Literal["exclude", "wrong"] = "exclude",
    rule: str = "",
) -> PairwiseAxisReport:
    missing: list[str] = []
    unscored_ids: list[str] = []
    units: Units = {}
    human_list: list[int] = []
    code_lists: dict[Order, list[int]] = {o: [] for o in ORDERS}
    for ref in refs:
        recs = records.get(ref.trajectory_id) or []
        if not recs:
            missing.append(ref.trajectory_id)
            continue
        per_order: dict[Order, list[JudgeVerdictRecord]] = defaultdict(list)
        for rec in recs:
            per_order[rec.effective_order].append(rec)
        human_list.append(1 if ref.value == "A" else 0)
        for order in ORDERS:
            agg = aggregate(per_order[order], "pairwise", threshold) if order in per_order else None
            if agg is not None:
                units[(ref.trajectory_id, order)] = (per_order[order], agg)
                if agg.value is None:
                    unscored_ids.append(ref.trajectory_id)
            code_lists[order].append(_code(agg))

    human = np.array(human_list, dtype=int)
    given = {o: np.array(code_lists[o], dtype=int) for o in ORDERS}  # as the judge answered
    codes = dict(given)  # as the maths sees it
    if unscored == "wrong":  # an unscored verdict picks the answer the human did not prefer
        codes = {o: np.where(c == _UNSCORED, 1 - human, c) for o, c in given.items()}
    present = [o for o in ORDERS if (codes[o] != _MISSING).any()]
    n = len(human)

    def stat(idx: np.ndarray) -> dict[str, np.ndarray]:
        h = human[idx]
        out: dict[str, np.ndarray] = {}
        for o in present:
            c = codes[o][idx]
            scored = c >= 0
            out[f"{o}.accuracy"] = ratio((c == h).sum(axis=-1), scored.sum(axis=-1))
            out[f"{o}.kappa"] = kappa_from_cells(*binary_cells(h, c == 1, scored))
        out["accuracy_average"] = np.mean([out[f"{o}.accuracy"] for o in present], axis=0)
        out["kappa_average"] = np.mean([out[f"{o}.kappa"] for o in present], axis=0)
        if len(present) == 2:
            co, cs = codes["original"][idx], codes["swapped"][idx]
            both = (co != _MISSING) & (cs != _MISSING)
            both_scored = (co >= 0) & (cs >= 0)
            out["correct_both"] = ratio((both & (co == h) & (cs == h)).sum(axis=-1), both.sum(axis=-1))
            out["order_consistency"] = ratio((both_scored & (co == cs)).sum(axis=-1), both_scored.sum(axis=-1))
            out["kappa_between_orders"] = kappa_from_cells(*binary_cells(co == 1, cs == 1, both_scored))
        return out

    boots = bootstrap(n, stat, n_boot=n_boot, rng=rng_for(seed, axis, "pairwise")) if present else {}
    identity = stat(np.arange(n)[None, :]) if present and n else {}

    def pt(name: str) -> float | None:
        return float(identity[name][0]) if name in identity else None

    orders: dict[Order, PairwiseOrderStats] = {}
    for o in present:
        c = codes[o]
        has = c != _MISSING
        scored = c >= 0
        n_correct = int((c == human).sum())
        orders[o] = PairwiseOrderStats(
            n=int(has.sum()),
            n_unscored=int((given[o] == _UNSCORED).sum()),
            n_correct=n_correct,
            accuracy=metric(pt(f"{o}.accuracy"), boots.get(f"{o}.accuracy")),
            accuracy_strict=n_correct / int(has.sum()) if has.any() else None,
            kappa_vs_human=metric(cohen_kappa(human[scored], c[scored]), boots.get(f"{o}.kappa")),
        )

    co, cs = codes["original"], codes["swapped"]
    both = (co != _MISSING) & (cs != _MISSING)
    both_scored = (co >= 0) & (cs >= 0)
    kappas = [s.kappa_vs_human.value for s in orders.values()]
    kappa_average = float(np.mean(kappas)) if kappas and None not in kappas else None
    coverage = coverage_fields(
        axis, refs, tied, missing, unscored_ids, len([u for u in units.values() if u[1].value is None]),
        labels, "pairwise", threshold, units, rule,
    )
    return PairwiseAxisReport(
        **coverage,
        n=n,
        orders=orders,
        accuracy_average=metric(pt("accuracy_average"), boots.get("accuracy_average")),
        kappa_vs_human_average=metric(kappa_average, boots.get("kappa_average")),
        n_both=int(both.sum()),
        n_correct_both=int((both & (co == human) & (cs == human)).sum()),
        correct_both=metric(pt("correct_both"), boots.get("correct_both")),
        n_both_scored=int(both_scored.sum()),
        n_consistent=int((both_scored & (co == cs)).sum()),
        n_both_unscored=int(((given["original"] == _UNSCORED) & (given["swapped"] == _UNSCORED)).sum()),
        order_consistency=metric(pt("order_consistency"), boots.get("order_consistency")),
        kappa_between_orders=metric(
            cohen_kappa(co[both_scored], cs[both_scored]), boots.get("kappa_between_orders")
        ),
    )
