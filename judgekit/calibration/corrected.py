"""Pass rate corrected for judge error (Rogan–Gladen), with a seeded bootstrap interval.

A judge with true positive rate TPR and true negative rate TNR, measured on a human-labelled
calibration set, reports an observed pass rate ``q`` on a run. The estimated true rate is::

    p = (q + TNR - 1) / (TPR + TNR - 1)        clipped to [0, 1]

The correction divides by Youden's J = TPR + TNR - 1; when J <= 0 the judge is no better than
chance and the result is refused (``refused_reason`` says why), never a number.

The interval accounts for both sources of error: each bootstrap replicate resamples the
calibration pairs (so TPR and TNR move) and the run's verdicts (so ``q`` moves). Resampling
n items with replacement is drawn in closed form: a multinomial over the four cells of the
calibration table and a binomial for the run's pass count, which is exactly the item bootstrap
and costs O(n_boot). Replicates with an empty class or J <= 0 are left out of the percentile
interval and counted in ``n_degenerate``; many of them mean the interval is not to be trusted.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, Field

from judgekit._util.io import RECORD_CONFIG

from judgekit.calibration._bootstrap import CONFIDENCE, ratio, rng_for


class CorrectedRate(BaseModel):
    """Observed and corrected pass rate of one run, with the calibration it relies on."""

    model_config = RECORD_CONFIG

    n_run: int = Field(description="Run verdicts used (scored ones only).")
    observed: float | None = Field(description="Share of the run's verdicts that are pass.")
    n_calib: int = Field(description="Calibration pairs (human, judge).")
    n_calib_pass: int = Field(description="Calibration items the human labelled pass.")
    n_calib_fail: int = Field(description="Calibration items the human labelled fail.")
    tpr: float | None = Field(description="Judge pass among human pass on the calibration set.")
    tnr: float | None = Field(description="Judge fail among human fail on the calibration set.")
    youden_j: float | None = Field(description="TPR + TNR - 1; the correction needs it > 0.")
    corrected: float | None = Field(description="Rogan–Gladen estimate clipped to [0, 1]; null when refused.")
    corrected_unclipped: float | None = Field(description="The same before clipping (may leave [0, 1]).")
    low: float | None = Field(description="Lower end of the bootstrap percentile interval.")
    high: float | None = Field(description="Upper end of the bootstrap percentile interval.")
    confidence: float = Field(default=CONFIDENCE, description="Level of the interval.")
    seed: int = Field(description="Bootstrap seed.")
    n_boot: int = Field(description="Bootstrap replicates drawn.")
    n_degenerate: int = Field(description="Replicates left out (an empty class or TPR + TNR <= 1).")
    refused_reason: str | None = Field(default=None, description="Why no corrected rate is given; null otherwise.")


def _refusal(run: np.ndarray, n_pass: int, n_fail: int, tpr: float | None, tnr: float | None) -> str | None:
    if run.size == 0:
        return "the run has no scored verdicts"
    if n_pass == 0 or n_fail == 0:
        missing = "pass" if n_pass == 0 else "fail"
        return (
            f"the calibration set has no human {missing} label, so the judge's "
            f"{'TPR' if n_pass == 0 else 'TNR'} is unknown: label some {missing} items"
        )
    assert tpr is not None and tnr is not None
    if tpr + tnr <= 1:
        return (
            f"the judge is no better than chance on the calibration set (TPR {tpr:.3f} + TNR {tnr:.3f} "
            "<= 1), so the correction would divide by a non-positive number: improve the judge or "
            "its rubric, or check the labels"
        )
    return None


def corrected_pass_rate(
    run_verdicts: Sequence[bool],
    calib_pairs: Sequence[tuple[bool, bool]],
    *,
    seed: int,
    n_boot: int = 2000,
) -> CorrectedRate:
    """Rogan–Gladen corrected pass rate of a run; ``calib_pairs`` are (human pass, judge pass).

    Unscored run verdicts must be left out by the caller (they are neither pass nor fail).
    """
    run = np.asarray(run_verdicts, dtype=bool).reshape(-1)
    pairs = np.asarray(calib_pairs, dtype=bool).reshape(-1, 2)
    human, judge = pairs[:, 0], pairs[:, 1]
    cells = np.array([(human & judge).sum(), (human & ~judge).sum(), (~human & judge).sum(), (~human & ~judge).sum()])
    tp, fn, fp, tn = (int(c) for c in cells)
    n_pass, n_fail = tp + fn, fp + tn
    tpr = tp / n_pass if n_pass else None
    tnr = tn / n_fail if n_fail else None
    observed = float(run.mean()) if run.size else None
    common = dict(
        n_run=int(run.size), observed=observed, n_calib=len(pairs), n_calib_pass=n_pass,
        n_calib_fail=n_fail, tpr=tpr, tnr=tnr, seed=seed, n_boot=n_boot,
    )
    youden = tpr + tnr - 1 if tpr is not None and tnr is not None else None
    refused = _refusal(run, n_pass, n_fail, tpr, tnr)
    if refused is not None:
        return CorrectedRate(
            **common, youden_j=youden, corrected=None, corrected_unclipped=None, low=None, high=None,
            n_degenerate=0, refused_reason=refused,
        )
    assert observed is not None and youden is not None and tnr is not None
    raw = (observed + tnr - 1) / youden

    rng = rng_for(seed, "corrected_pass_rate")
    boot_cells = rng.multinomial(len(pairs), cells / len(pairs), size=n_boot)
    boot_obs = rng.binomial(run.size, observed, size=n_boot) / run.size
    b_tpr = ratio(boot_cells[:, 0], boot_cells[:, 0] + boot_cells[:, 1])
    b_tnr = ratio(boot_cells[:, 3], boot_cells[:, 2] + boot_cells[:, 3])
    b_j = b_tpr + b_tnr - 1
    valid = np.isfinite(b_j) & (b_j > 0)
    estimates = np.clip((boot_obs[valid] + b_tnr[valid] - 1) / b_j[valid], 0.0, 1.0)
    low = high = None
    if estimates.size:
        tail = (1.0 - CONFIDENCE) / 2 * 100
        low, high = (float(x) for x in np.percentile(estimates, [tail, 100 - tail]))
    return CorrectedRate(
        **common, youden_j=youden, corrected=float(np.clip(raw, 0.0, 1.0)), corrected_unclipped=raw,
        low=low, high=high, n_degenerate=int(n_boot - valid.sum()),
    )
