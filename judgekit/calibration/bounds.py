"""The confidence bounds an approval rests on, and how each one is computed.

A judge is approved on an axis when one-sided bounds at ``CONFIDENCE`` (95%) clear the
thresholds: lower bounds for kappa, TPR, TNR and Spearman, an upper bound for the mean absolute
error. One-sided: "kappa >= 0.71 (95% lower bound)" means that the rule which produced 0.71,
applied to label sets drawn the same way, lands at or below the judge's true kappa in at least
95% of them; ``[lower, 1]`` is the nominal-95% interval whose coverage
tests/test_calibration_bounds.py measures by simulation.

Methods (each bound names its own in the approval record):

- TPR and TNR, rates within a class: the exact Clopper-Pearson lower bound, the
  ``1 - CONFIDENCE`` quantile of Beta(k, n - k + 1) (0 when k = 0). Never below nominal.
- Kappa, Spearman and MAE: a seeded, smoothed Bayesian bootstrap of the (human x judge) table.
  The cells are every pair of an observed human level and an observed judge level (four on a
  binary axis); each draw gives the cells probabilities from Dirichlet(counts + prior), the
  prior being ``PRIOR_ITEMS`` = 2 pseudo-items spread evenly over the cells (0.5 per cell of a
  2x2 table: Jeffreys' prior); the bound is the 5% (MAE: 95%) quantile of the statistic over
  the draws.
- Why not the plain percentile or BCa bootstrap: both resample only what was seen, so a label
  set without a single disagreement (likely for a good judge on 20-40 items) gives "kappa >=
  1.00" whatever the truth. Measured: true kappa 0.94 on 20 items, both cover it in 44% of
  label sets; 0.80 on 20 items, 88%. Every smoothed bound covers its truth in at least 94% of label
  sets in every case simulated (kappa at least 95.6%), at the price of being conservative on
  small samples (docs/explanation/approval-statistics.md: the coverage table).
- A draw on which a statistic is undefined (kappa when both sides are one same class,
  Spearman on constant scores) counts as the worst value, -1: it never helps a judge clear a
  bound. An undefined point estimate gives no bound at all.
- Memory is bounded by the number of items, not by the table: a graded label set with more than
  ``MAX_LEVELS`` distinct scores on a side has its scores binned to ``MAX_LEVELS`` levels, half on
  each side of the pass threshold (so the binarised table, and kappa, are exact); the MAE's upper
  bound is then widened by the largest error the binning adds, and the method says so.

Seeds and draws are this module's (``BOUNDS_SEED``, ``N_DRAWS``): an approval's bounds are
the same wherever they are measured, and no record chooses its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from judgekit.calibration._bootstrap import ratio, rng_for
from judgekit.calibration._stats import kappa_from_cells

CONFIDENCE = 0.95
PRIOR_ITEMS = 2.0
N_DRAWS = 2000
BOUNDS_SEED = 0
MAX_LEVELS = 128
"""Distinct scores per side above which a graded label set is binned (the table then has at
most 128 x 128 cells, whatever the number of items)."""
RATE_METHOD = "exact Clopper-Pearson one-sided lower bound"
_WORST = {"kappa": -1.0, "spearman": -1.0}
_CHUNK_CELLS = 4_000_000  # resamples x distinct pairs drawn at once

Side = Literal["lower", "upper"]
SIDES: dict[str, Side] = {"kappa": "lower", "spearman": "lower", "mae": "upper", "tpr": "lower", "tnr": "lower"}


def draws_method(n_draws: int = N_DRAWS, seed: int = 0) -> str:
    return (f"seeded smoothed Bayesian bootstrap of the human x judge table (Dirichlet, {PRIOR_ITEMS:g} "
            f"prior items over the observed cells), one-sided, {n_draws} draws, seed {seed}")


# -- rates -----------------------------------------------------------------------------------

def rate_lower_array(k: np.ndarray, n: np.ndarray, confidence: float = CONFIDENCE) -> np.ndarray:
    """Clopper-Pearson one-sided lower bounds of k successes in n trials (NaN where n = 0)."""
    from scipy.stats import beta

    k = np.asarray(k, dtype=float)
    n = np.asarray(n, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        low = beta.ppf(1.0 - confidence, np.maximum(k, 1e-300), n - k + 1.0)
    low = np.where(k <= 0, 0.0, low)
    return np.where(n <= 0, np.nan, low)


def rate_lower(k: int, n: int, confidence: float = CONFIDENCE) -> float | None:
    """The exact lower bound of a rate; None with no trials."""
    value = float(rate_lower_array(np.array(k), np.array(n), confidence))
    return None if np.isnan(value) else value


# -- statistics of count tables ---------------------------------------------------------------

def _midranks(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Mid-rank of each distinct pair's value on one side, per row of ``counts`` (..., U).

    Ranks are only compared (Pearson correlation), so ``cumsum - count / 2`` (average rank
    minus 1/2) serves, for counts and for probabilities alike."""
    levels, inverse = np.unique(values, return_inverse=True)
    onehot = np.zeros((values.size, levels.size))
    onehot[np.arange(values.size), inverse] = 1.0
    per_level = counts @ onehot
    ranks = np.cumsum(per_level, axis=-1) - per_level / 2.0
    return ranks[..., inverse]


def table_stats(x: np.ndarray, y: np.ndarray, counts: np.ndarray, names: tuple[str, ...], threshold: float = 0.5
                ) -> dict[str, np.ndarray]:
    """Kappa (both sides binarised at ``threshold``), Spearman and MAE of count rows (..., U)."""
    counts = np.asarray(counts, dtype=float)
    n = counts.sum(axis=-1)
    out: dict[str, np.ndarray] = {}
    if "kappa" in names:
        hx, hy = x >= threshold, y >= threshold
        cells = [counts @ (a & b).astype(float) for a, b in ((hx, hy), (~hx, hy), (hx, ~hy), (~hx, ~hy))]
        out["kappa"] = kappa_from_cells(*cells)
    if "spearman" in names:
        rx, ry = _midranks(x, counts), _midranks(y, counts)
        mx = ratio((counts * rx).sum(axis=-1), n)[..., None]
        my = ratio((counts * ry).sum(axis=-1), n)[..., None]
        cov = (counts * (rx - mx) * (ry - my)).sum(axis=-1)
        var = (counts * (rx - mx) ** 2).sum(axis=-1) * (counts * (ry - my) ** 2).sum(axis=-1)
        # float noise on constant ranks must read as undefined, not as a huge correlation
        var = np.where(var <= 1e-12 * np.maximum(n, 1.0) ** 6, 0.0, var)
        out["spearman"] = ratio(cov, np.sqrt(var))
    if "mae" in names:
        out["mae"] = ratio(counts @ np.abs(x - y), n)
    return out


# -- the smoothed Bayesian bootstrap ----------------------------------------------------------

def grid_of(human, judge) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The table of one label set: every (observed human level, observed judge level) cell, and
    how many items fall in each (most cells of a graded axis hold none)."""
    human = np.asarray(human, dtype=float)
    judge = np.asarray(judge, dtype=float)
    hx, ix = np.unique(human, return_inverse=True)
    hy, iy = np.unique(judge, return_inverse=True)
    counts = np.zeros(hx.size * hy.size, dtype=np.int64)
    np.add.at(counts, ix * hy.size + iy, 1)
    return np.repeat(hx, hy.size), np.tile(hy, hx.size), counts


def _observed_cells(x: np.ndarray, y: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Per row, the cells whose human level and judge level both occur in that row's items."""
    seen = counts > 0
    lx, ix = np.unique(x, return_inverse=True)
    ly, iy = np.unique(y, return_inverse=True)
    on_x = np.zeros((*counts.shape[:-1], lx.size), dtype=bool)
    on_y = np.zeros((*counts.shape[:-1], ly.size), dtype=bool)
    for cell in range(x.size):  # cells are few in simulations; a real axis has one row
        on_x[..., ix[cell]] |= seen[..., cell]
        on_y[..., iy[cell]] |= seen[..., cell]
    return on_x[..., ix] & on_y[..., iy]


def smoothed_bounds_batch(
    x: np.ndarray,
    y: np.ndarray,
    counts: np.ndarray,
    names: tuple[str, ...],
    *,
    rng: np.random.Generator,
    n_draws: int = 2000,
    confidence: float = CONFIDENCE,
    threshold: float = 0.5,
    prior_items: float = PRIOR_ITEMS,
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """For each row of ``counts`` (S, U), one label set over the cells ``x``, ``y``: name ->
    (point estimates (S,), one-sided bounds (S,)); NaN where the estimate is undefined.

    The bound is a quantile of the statistic over ``n_draws`` draws of the table's cell
    probabilities from Dirichlet(counts + prior), the prior being ``prior_items`` pseudo-items
    spread evenly over the row's observed cells (0.5 per cell of a 2x2 table: Jeffreys)."""
    counts = np.atleast_2d(np.asarray(counts, dtype=np.int64))
    S, U = counts.shape
    points = table_stats(x, y, counts, names, threshold)
    out = {name: (points[name], np.full(S, np.nan)) for name in names}
    if U == 0 or n_draws <= 0:
        return out
    cells = _observed_cells(x, y, counts)
    alpha = np.where(cells, counts + prior_items / np.maximum(cells.sum(axis=-1, keepdims=True), 1), 0.0)
    draws = {name: np.empty((S, n_draws)) for name in names}
    rows_step = max(1, _CHUNK_CELLS // max(1, n_draws * U))
    draw_step = max(1, min(n_draws, _CHUNK_CELLS // max(1, U)))
    for start in range(0, S, rows_step):
        rows = slice(start, start + rows_step)
        a = alpha[rows][:, None, :]
        for d0 in range(0, n_draws, draw_step):
            m = min(draw_step, n_draws - d0)
            g = rng.standard_gamma(np.where(a > 0, a, 1.0), size=(a.shape[0], m, U)) * (a > 0)
            probs = g / g.sum(axis=-1, keepdims=True)
            for name, values in table_stats(x, y, probs, names, threshold).items():
                draws[name][rows, d0:d0 + m] = _worst(name, values)
    for name in names:
        q = 1.0 - confidence if SIDES[name] == "lower" else confidence
        bound = np.quantile(draws[name], q, axis=-1)
        out[name][1][:] = np.where(np.isfinite(points[name]), bound, np.nan)
    return out


def _worst(name: str, values: np.ndarray) -> np.ndarray:
    return np.where(np.isfinite(values), values, _WORST.get(name, np.nan))


# -- one axis ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Bound:
    """One certified figure: the estimate, its one-sided bound, and how the bound was made."""

    name: str
    side: Side
    estimate: float | None
    bound: float | None
    method: str


@dataclass(frozen=True)
class AxisBounds:
    """The bounds of one axis, and the per-class counts they rest on."""

    kind: str
    n: int
    n_pass: int  # human pass (graded: score >= threshold)
    n_fail: int
    confidence: float
    bounds: dict[str, Bound]

    def get(self, name: str) -> Bound | None:
        return self.bounds.get(name)


def binned(scores: np.ndarray, threshold: float) -> tuple[np.ndarray, float]:
    """Scores in [0, 1] moved to the middles of ``MAX_LEVELS / 2`` equal bins below ``threshold``
    and as many from it up, so that no score crosses the threshold; and the largest distance a
    score moved."""
    half = MAX_LEVELS // 2
    out = np.empty_like(scores)
    below = scores < threshold
    widths = []
    for side, low, high in ((below, 0.0, threshold), (~below, threshold, 1.0)):
        if not side.any():
            continue
        width = (high - low) / half if high > low else 0.0
        if width == 0.0:
            out[side] = scores[side]
            continue
        index = np.clip(np.floor((scores[side] - low) / width), 0, half - 1)
        out[side] = low + (index + 0.5) * width
        widths.append(width / 2)
    moved = float(np.max(np.abs(out - scores))) if scores.size else 0.0
    return out, moved


def _finite(value) -> float | None:
    value = float(value)
    return value if np.isfinite(value) else None


def axis_bounds(
    kind: str,
    human,
    judge,
    *,
    threshold: float = 0.5,
    seed: int = 0,
    name: str = "",
    n_draws: int = N_DRAWS,
    confidence: float = CONFIDENCE,
) -> AxisBounds:
    """The bounds approval uses for one axis: kappa, TPR, TNR (binary), or kappa on the scores
    binarised at ``threshold``, Spearman and MAE (graded). ``human``/``judge``: one value per
    item (pass = 1.0, fail = 0.0, or a score in [0, 1]). The draws' generator is derived from
    ``(seed, name, kind)``: the same labels, verdicts and seed always give the same bounds."""
    human = np.asarray(human, dtype=float)
    judge = np.asarray(judge, dtype=float)
    hpass, jpass = human >= threshold, judge >= threshold
    n_pass, n_fail = int(hpass.sum()), int((~hpass).sum())
    names = ("kappa",) if kind == "binary" else ("kappa", "spearman", "mae")
    bounds: dict[str, Bound] = {}
    if human.size:
        widen = 0.0
        described = draws_method(n_draws, seed)
        if kind == "graded" and max(np.unique(human).size, np.unique(judge).size) > MAX_LEVELS:
            (human, h_err), (judge, j_err) = binned(human, threshold), binned(judge, threshold)
            widen = h_err + j_err
            described += (f"; scores binned to {MAX_LEVELS} levels ({MAX_LEVELS // 2} on each side of the pass "
                          f"threshold), the MAE bound widened by {widen:.4f}")
        x, y, counts = grid_of(human, judge)
        rng = rng_for(seed, "approval-bounds", name, kind)
        drawn = smoothed_bounds_batch(x, y, counts[None, :], names, rng=rng, n_draws=n_draws,
                                      confidence=confidence, threshold=threshold)
        for stat in names:
            estimate, bound = drawn[stat]
            bound_value = _finite(bound[0])
            if stat == "mae" and bound_value is not None:
                bound_value = min(1.0, bound_value + widen)
            bounds[stat] = Bound(stat, SIDES[stat], _finite(estimate[0]), bound_value, described)
    else:
        bounds = {stat: Bound(stat, SIDES[stat], None, None, draws_method(n_draws, seed)) for stat in names}
    if kind == "binary":
        tp, tn = int((hpass & jpass).sum()), int((~hpass & ~jpass).sum())
        for stat, k, m in (("tpr", tp, n_pass), ("tnr", tn, n_fail)):
            bounds[stat] = Bound(stat, "lower", k / m if m else None, rate_lower(k, m, confidence), RATE_METHOD)
    return AxisBounds(kind=kind, n=int(human.size), n_pass=n_pass, n_fail=n_fail, confidence=confidence,
                      bounds=bounds)
