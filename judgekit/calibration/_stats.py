"""Agreement statistics: binary confusion metrics, Cohen's and Fleiss' kappa, Krippendorff's alpha.

The vectorised forms (one value per bootstrap row) are used for resamples; point estimates of
Cohen's kappa come from scikit-learn, and tests check the two agree.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import numpy as np

from judgekit.calibration._bootstrap import ratio


def kappa_from_cells(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray, tn: np.ndarray) -> np.ndarray:
    """Cohen's kappa of a 2x2 table (rater 1 = rows "positive"/"negative", rater 2 = columns).

    Undefined (NaN) when chance agreement is 1, i.e. both raters gave one same class throughout.
    """
    tp, fp, fn, tn = (np.asarray(x, dtype=float) for x in (tp, fp, fn, tn))
    n = tp + fp + fn + tn
    po = ratio(tp + tn, n)
    pe = ratio((tp + fp) * (tp + fn) + (fn + tn) * (fp + tn), n * n)
    return ratio(po - pe, 1.0 - pe)


def binary_cells(human: np.ndarray, judge: np.ndarray, mask: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
    """(tp, fp, fn, tn) along the last axis; "positive" is pass (or A). ``mask`` keeps items."""
    human = human.astype(bool)
    judge = judge.astype(bool)
    keep = np.ones_like(human, dtype=bool) if mask is None else mask
    tp = (keep & human & judge).sum(axis=-1)
    fp = (keep & ~human & judge).sum(axis=-1)
    fn = (keep & human & ~judge).sum(axis=-1)
    tn = (keep & ~human & ~judge).sum(axis=-1)
    return tp, fp, fn, tn


def binary_metrics(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray, tn: np.ndarray) -> dict[str, np.ndarray]:
    """Everything the binary report shows, from the cells (NaN where undefined)."""
    n = tp + fp + fn + tn
    return {
        "base_rate": ratio(tp + fn, n),
        "accuracy": ratio(tp + tn, n),
        "kappa": kappa_from_cells(tp, fp, fn, tn),
        "tpr": ratio(tp, tp + fn),
        "tnr": ratio(tn, tn + fp),
        "precision": ratio(tp, tp + fp),
        "balanced_accuracy": balanced_accuracy_from_cells(tp, fp, fn, tn),
        "f1_macro": f1_macro_from_cells(tp, fp, fn, tn),
    }


def _mean_of_defined(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Element-wise mean of the defined (non-NaN) values of a and b; NaN where neither is."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    count = np.isfinite(a).astype(float) + np.isfinite(b).astype(float)
    return ratio(np.nan_to_num(a, nan=0.0) + np.nan_to_num(b, nan=0.0), count)


def balanced_accuracy_from_cells(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray, tn: np.ndarray) -> np.ndarray:
    """Mean of TPR and TNR, over the classes present in the human labels (scikit-learn's
    ``balanced_accuracy_score``): with one human class only it is that class's recall."""
    return _mean_of_defined(ratio(tp, tp + fn), ratio(tn, tn + fp))


def f1_macro_from_cells(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray, tn: np.ndarray) -> np.ndarray:
    """Mean of the F1 of pass and of fail, over the classes present on either side
    (scikit-learn's ``f1_score(average="macro")``)."""
    tp, fp, fn, tn = (np.asarray(x, dtype=float) for x in (tp, fp, fn, tn))
    return _mean_of_defined(ratio(2 * tp, 2 * tp + fp + fn), ratio(2 * tn, 2 * tn + fp + fn))


def cohen_kappa(a: Sequence[object], b: Sequence[object]) -> float | None:
    """scikit-learn's Cohen's kappa; None when undefined (no items, or one shared constant class)."""
    from sklearn.metrics import cohen_kappa_score  # seconds to import: only when needed

    if len(a) == 0:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sklearn warns about a single shared class; we return None
        value = float(cohen_kappa_score(list(a), list(b)))
    return value if math.isfinite(value) else None


def fleiss_kappa(counts: np.ndarray) -> float | None:
    """Fleiss' kappa from an items x categories table of how many raters chose each category.

    Every row must sum to the same number of raters (at least 2). None when undefined (all
    ratings in one category, so chance agreement is 1).
    """
    counts = np.asarray(counts, dtype=float)
    if counts.ndim != 2 or counts.shape[0] == 0:
        return None
    raters = counts.sum(axis=1)
    m = raters[0]
    if m < 2 or not np.all(raters == m):
        raise ValueError("every item needs the same number (>= 2) of ratings")
    n_items = counts.shape[0]
    p_item = ((counts * counts).sum(axis=1) - m) / (m * (m - 1))
    p_bar = p_item.mean()
    p_cat = counts.sum(axis=0) / (n_items * m)
    p_e = float((p_cat * p_cat).sum())
    if math.isclose(p_e, 1.0):
        return None
    return float((p_bar - p_e) / (1.0 - p_e))


def krippendorff_alpha_nominal(units: Sequence[Sequence[object]]) -> float | None:
    """Krippendorff's alpha for nominal data; ``units`` holds, per item, the values its coders
    gave (any number of coders per item: missing ratings are simply absent). Items with fewer
    than two values are not pairable and are left out. None when undefined (no pairable item,
    or every value in one category, so expected disagreement is 0).

    Coincidence-matrix form (Krippendorff 2011, "Computing Krippendorff's alpha-reliability"):
    alpha = 1 - (n - 1) * D_o / D_e with D_o = sum of off-diagonal coincidences and
    D_e = sum over c != k of n_c * n_k.
    """
    pairable = [list(values) for values in units if len(values) >= 2]
    if not pairable:
        return None
    categories = sorted({v for values in pairable for v in values}, key=repr)
    index = {c: i for i, c in enumerate(categories)}
    coincidence = np.zeros((len(categories), len(categories)))
    for values in pairable:
        counts = np.zeros(len(categories))
        for v in values:
            counts[index[v]] += 1
        m = len(values)
        # ordered pairs of values from distinct coders, each unit weighted 1 / (m - 1)
        coincidence += (np.outer(counts, counts) - np.diag(counts)) / (m - 1)
    n_c = coincidence.sum(axis=1)
    n = n_c.sum()
    observed = coincidence.sum() - np.trace(coincidence)
    expected = n_c.sum() ** 2 - (n_c * n_c).sum()
    if math.isclose(expected, 0.0):
        return None
    return float(1.0 - (n - 1) * observed / expected)
