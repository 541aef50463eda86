"""How many labelled items a judge needs before its bounds can clear the approval rule.

``plan_binary``: given the thresholds and the agreement one expects (TPR, TNR, and the share of
human pass among the items to label), the smallest sample, split into pass and fail items,
on which every bound of the rule (kappa, TPR and TNR lower bounds, ``min_items``) clears with
at least the chosen probability (``power``). Exact where it can be: with the class counts
fixed, a label set is decided by (tp, tn), two independent binomials; the power is the sum of
their probabilities over the outcomes that clear, the rates by the exact Clopper-Pearson bound
and kappa by the approval's own seeded draws (``bounds.smoothed_bounds_batch``). Outcomes with
probability below ``_NEGLIGIBLE`` are counted as not clearing, so the power is never overstated.

Power is not monotone in n (the exact bound steps as k changes), so the plan is the smallest
total n from which the next ``_STEADY`` totals also reach the power.

``plan_pilot``: the same question from a pilot set of labels and verdicts. Binary axes: the
pilot's TPR, TNR and share of pass feed ``plan_binary``. Graded axes: label sets of each size
are simulated (seeded) by drawing pass and fail items from the pilot's own (human, judge)
pairs, and every bound (kappa, Spearman, MAE) is computed on each; the power is the share that
clears. Point estimates from a small pilot are optimistic: plan with a margin.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from judgekit.calibration._bootstrap import rng_for
from judgekit.calibration.approval_record import Thresholds
from judgekit.calibration.bounds import N_DRAWS, grid_of, rate_lower_array, smoothed_bounds_batch

DEFAULT_TPR = 0.9
DEFAULT_TNR = 0.9
DEFAULT_PREVALENCE = 0.5
DEFAULT_POWER = 0.8
_NEGLIGIBLE = 1e-7
_STEADY = 5
_MAX_ITEMS = 5000
_X = np.array([1.0, 0.0, 1.0, 0.0])  # cells tp, fp, fn, tn: human side
_Y = np.array([1.0, 1.0, 0.0, 0.0])  # judge side


@dataclass
class Plan:
    """How many items to label, per class, and the chance that the bounds then clear."""

    axis_kind: str
    n_pass: int
    n_fail: int
    power: float  # chance that every bound clears with this many items
    target: float
    method: str
    expected: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    reachable: bool = True

    @property
    def n(self) -> int:
        return self.n_pass + self.n_fail

    def describe(self) -> str:
        expect = ", ".join(f"{k} {v:.3f}" for k, v in self.expected.items())
        if not self.reachable:
            return (f"{self.axis_kind} axis: no sample up to {_MAX_ITEMS} items reaches power {self.target} with "
                    f"{expect}: the expected agreement is too close to the thresholds")
        return (f"{self.axis_kind} axis: label {self.n_pass} pass and {self.n_fail} fail items ({self.n} in all); "
                f"with {expect} every bound then clears with probability {self.power:.3f} (asked: {self.target}; "
                f"{self.method})")


def _split(n: int, prevalence: float) -> tuple[int, int]:
    n_pass = min(n - 1, max(1, round(prevalence * n)))
    return n_pass, n - n_pass


def _min_class(limit: float, confidence: float) -> int:
    """Fewest items of a class whose exact rate bound can reach ``limit`` (all of them right)."""
    if limit <= 0:
        return 1
    if limit >= 1:  # an exact lower bound below 1 for every finite sample: no sample reaches 1
        return _MAX_ITEMS + 1
    return max(1, math.ceil(math.log(1.0 - confidence) / math.log(limit)))


def binary_power(thresholds: Thresholds, n_pass: int, n_fail: int, tpr: float, tnr: float, *,
                 seed: int = 0, n_draws: int = N_DRAWS, below: float | None = None) -> float:
    """Exact chance that a binary axis with these class counts clears every bound. ``below``:
    when the rates alone cannot reach it, that upper bound is returned without drawing kappa."""
    from scipy.stats import binom

    if n_pass + n_fail < thresholds.min_items or n_pass == 0 or n_fail == 0:
        return 0.0
    conf = thresholds.confidence
    tps = np.arange(n_pass + 1)
    tns = np.arange(n_fail + 1)
    p_tp = binom.pmf(tps, n_pass, tpr)
    p_tn = binom.pmf(tns, n_fail, tnr)
    ok_tp = (rate_lower_array(tps, n_pass, conf) >= thresholds.min_tpr) & (p_tp > _NEGLIGIBLE)
    ok_tn = (rate_lower_array(tns, n_fail, conf) >= thresholds.min_tnr) & (p_tn > _NEGLIGIBLE)
    tp, tn = np.meshgrid(tps[ok_tp], tns[ok_tn], indexing="ij")
    tp, tn = tp.ravel(), tn.ravel()
    weight = p_tp[tp] * p_tn[tn]
    keep = weight > _NEGLIGIBLE
    tp, tn, weight = tp[keep], tn[keep], weight[keep]
    if tp.size == 0:
        return 0.0
    if below is not None and weight.sum() < below:
        return float(weight.sum())
    counts = np.column_stack([tp, n_fail - tn, n_pass - tp, tn])
    rng = rng_for(seed, "plan", str(n_pass), str(n_fail))
    _, kappa_low = smoothed_bounds_batch(_X, _Y, counts, ("kappa",), rng=rng, n_draws=n_draws,
                                         confidence=conf)["kappa"]
    clears = np.nan_to_num(kappa_low, nan=-np.inf) >= thresholds.min_kappa
    return float(weight[clears].sum())


def _smallest(power_at, start: int, target: float) -> tuple[int, float] | None:
    """Smallest n >= start with power_at(n) >= target for it and the next _STEADY - 1 totals."""
    cache: dict[int, float] = {}

    def p(n: int) -> float:
        if n not in cache:
            cache[n] = power_at(n)
        return cache[n]

    hi = max(start, 2)
    while p(hi) < target:  # grow until some total reaches it
        if hi >= _MAX_ITEMS:
            return None
        hi = min(_MAX_ITEMS, hi * 2)
    lo = start - 1  # p(lo) taken as below target
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if p(mid) >= target:
            hi = mid
        else:
            lo = mid
    n = hi
    while not all(p(m) >= target for m in range(n, n + _STEADY)):
        n += 1
        if n > _MAX_ITEMS:
            return None
    return n, p(n)


def plan_binary(thresholds: Thresholds, *, tpr: float = DEFAULT_TPR, tnr: float = DEFAULT_TNR,
                prevalence: float = DEFAULT_PREVALENCE, power: float = DEFAULT_POWER, seed: int = 0,
                n_draws: int = N_DRAWS, kind: str = "binary") -> Plan:
    """The smallest sample (at this share of human pass) on which a binary axis's bounds clear
    with probability ``power``, if the judge's true TPR and TNR are as expected."""
    thresholds = Thresholds.of(thresholds)
    conf = thresholds.confidence
    need_pass, need_fail = _min_class(thresholds.min_tpr, conf), _min_class(thresholds.min_tnr, conf)
    start = max(thresholds.min_items, 2, math.ceil(need_pass / max(prevalence, 1e-9)),
                math.ceil(need_fail / max(1 - prevalence, 1e-9)))
    expected = {"TPR": tpr, "TNR": tnr, "share of pass": prevalence}
    method = ("exact binomial sum over (tp, tn); rates by exact Clopper-Pearson bounds, kappa by the "
              f"approval's seeded draws ({n_draws}, seed {seed})")
    found = None if start > _MAX_ITEMS else _smallest(
        lambda n: binary_power(thresholds, *_split(n, prevalence), tpr, tnr, seed=seed, n_draws=n_draws, below=power),
        start, power)
    if found is None:
        return Plan(kind, 0, 0, 0.0, power, method, expected, reachable=False)
    n, achieved = found
    return Plan(kind, *_split(n, prevalence), achieved, power, method, expected)


def graded_power(thresholds: Thresholds, pilot_pass, pilot_fail, n_pass: int, n_fail: int, *, threshold: float = 0.5,
                 n_sim: int = 400, n_draws: int = 1000, seed: int = 0) -> float:
    """Share of simulated label sets (pass and fail items drawn from the pilot's own pairs)
    on which kappa, Spearman and MAE bounds all clear."""
    if n_pass + n_fail < thresholds.min_items or n_pass == 0 or n_fail == 0:
        return 0.0
    pairs = np.vstack([pilot_pass, pilot_fail])
    x, y, _ = grid_of(pairs[:, 0], pairs[:, 1])
    cell = {(a, b): i for i, (a, b) in enumerate(zip(x, y))}
    rng = rng_for(seed, "plan-graded", str(n_pass), str(n_fail))
    counts = np.zeros((n_sim, x.size), dtype=np.int64)
    for source, k in ((pilot_pass, n_pass), (pilot_fail, n_fail)):
        idx = np.array([cell[(a, b)] for a, b in source])
        picks = idx[rng.integers(0, len(idx), size=(n_sim, k))]
        np.add.at(counts, (np.repeat(np.arange(n_sim), k), picks.ravel()), 1)
    out = smoothed_bounds_batch(x, y, counts, ("kappa", "spearman", "mae"), rng=rng, n_draws=n_draws,
                                confidence=thresholds.confidence, threshold=threshold)
    kappa, spearman, mae = (np.nan_to_num(out[k][1], nan=np.nan) for k in ("kappa", "spearman", "mae"))
    with np.errstate(invalid="ignore"):
        clears = (kappa >= thresholds.min_kappa) & (spearman >= thresholds.min_spearman) & (mae <= thresholds.max_mae)
    return float(clears.mean())


def plan_graded(thresholds: Thresholds, human, judge, *, threshold: float = 0.5, prevalence: float | None = None,
                power: float = DEFAULT_POWER, seed: int = 0, n_sim: int = 400, n_draws: int = 1000) -> Plan:
    """The plan for a graded axis from pilot (human, judge) score pairs, by simulation."""
    thresholds = Thresholds.of(thresholds)
    pairs = np.column_stack([np.asarray(human, float), np.asarray(judge, float)])
    is_pass = pairs[:, 0] >= threshold
    share = float(is_pass.mean()) if prevalence is None else prevalence
    method = (f"simulation: {n_sim} label sets per size drawn from the pilot's {len(pairs)} pairs, seed {seed}; "
              f"Monte Carlo error about {math.sqrt(power * (1 - power) / n_sim):.3f}")
    expected = {"pilot items": float(len(pairs)), "share of pass": share}
    if is_pass.all() or (~is_pass).all():
        plan = Plan("graded", 0, 0, 0.0, power, method, expected, reachable=False)
        plan.notes.append("the pilot has one class only: label pass and fail items both")
        return plan
    found = _smallest(lambda n: graded_power(thresholds, pairs[is_pass], pairs[~is_pass], *_split(n, share),
                                             threshold=threshold, n_sim=n_sim, n_draws=n_draws, seed=seed),
                      max(thresholds.min_items, 2), power)
    if found is None:
        return Plan("graded", 0, 0, 0.0, power, method, expected, reachable=False)
    n, achieved = found
    return Plan("graded", *_split(n, share), achieved, power, method, expected)


def default_sample_size(thresholds: Thresholds) -> Plan:
    """The plan `judgekit label` uses when no --sample is given: the default expectations."""
    return plan_binary(Thresholds.of(thresholds))


def plan_pilot(thresholds: Thresholds, labels, verdicts, *, threshold: float = 0.5, prevalence: float | None = None,
               power: float = DEFAULT_POWER, seed: int = 0) -> dict[str, Plan]:
    """A plan per labelled axis of a pilot (labels and one judge's verdicts on them)."""
    from judgekit.calibration._aggregate import reference_labels
    from judgekit.calibration.evidence import items_of
    from judgekit.errors import InputError

    verdicts = list(verdicts)
    judges = sorted({v.judge or "" for v in verdicts})
    if len(judges) > 1:
        raise InputError(f"the pilot's verdicts come from {len(judges)} judges: plan with one judge's verdicts")
    refs = reference_labels(labels)
    plans: dict[str, Plan] = {}
    for axis in sorted({axis for (_, axis), ref in refs.items.items() if ref.kind in ("binary", "graded")}):
        kind = next(ref.kind for (_, a), ref in refs.items.items() if a == axis and ref.kind in ("binary", "graded"))
        items, _ = items_of(refs, verdicts, axis, kind, threshold)
        matched = [item for item in items if item.judge is not None]
        if not matched:
            continue
        human = np.array([item.human for item in matched])
        judge = np.array([item.judge for item in matched])
        if kind == "graded":
            plans[axis] = plan_graded(thresholds, human, judge, threshold=threshold, prevalence=prevalence,
                                      power=power, seed=seed)
            plans[axis].notes.append(f"estimated from a pilot of {len(matched)} items: optimistic when the pilot is small")
            continue
        hp, jp = human >= threshold, judge >= threshold
        if hp.all() or (~hp).all():
            plan = Plan("binary", 0, 0, 0.0, power, "", {"pilot items": float(len(matched))}, reachable=False)
            plan.notes.append("the pilot has one class only: label pass and fail items both")
            plans[axis] = plan
            continue
        tpr = float((hp & jp).sum() / hp.sum())
        tnr = float((~hp & ~jp).sum() / (~hp).sum())
        share = float(hp.mean()) if prevalence is None else prevalence
        plans[axis] = plan_binary(thresholds, tpr=tpr, tnr=tnr, prevalence=share, power=power, seed=seed)
        plans[axis].notes.append(f"TPR, TNR and share of pass estimated from a pilot of {len(matched)} items "
                                 f"({int(hp.sum())} pass, {int((~hp).sum())} fail): optimistic when the pilot is small")
    return plans
