"""Rogan–Gladen corrected pass rate: formula, refusals, interval coverage by simulation."""

from __future__ import annotations

import numpy as np
import pytest

from judgekit.calibration import CorrectedRate, corrected_pass_rate


def calibration(tp, fn, fp, tn):
    """(human, judge) pairs with the given cells."""
    return [(True, True)] * tp + [(True, False)] * fn + [(False, True)] * fp + [(False, False)] * tn


def test_formula():
    calib = calibration(tp=80, fn=20, fp=10, tn=90)  # TPR 0.8, TNR 0.9
    run = [True] * 35 + [False] * 65  # observed 0.35
    r = corrected_pass_rate(run, calib, seed=0, n_boot=500)
    assert (r.tpr, r.tnr, r.observed) == pytest.approx((0.8, 0.9, 0.35))
    assert r.youden_j == pytest.approx(0.7)
    assert r.corrected == pytest.approx((0.35 + 0.9 - 1) / 0.7)
    assert r.low < r.corrected < r.high
    assert r.refused_reason is None and r.n_degenerate == 0
    assert (r.n_run, r.n_calib, r.n_calib_pass, r.n_calib_fail) == (100, 200, 100, 100)


@pytest.mark.parametrize(
    ("observed_pass", "expected"),
    [
        pytest.param(2, 0.0, id="below_false_positive_rate_clips_to_0"),
        pytest.param(95, 1.0, id="above_tpr_clips_to_1"),
    ],
)
def test_clipping(observed_pass, expected):
    r = corrected_pass_rate([True] * observed_pass + [False] * (100 - observed_pass), calibration(80, 20, 10, 90), seed=0)
    assert r.corrected == expected
    assert not 0.0 <= r.corrected_unclipped <= 1.0
    assert 0.0 <= r.low <= r.high <= 1.0


@pytest.mark.parametrize(
    ("calib", "run", "reason"),
    [
        pytest.param(calibration(40, 60, 50, 50), [True, False], "no better than chance", id="chance_judge"),
        pytest.param(calibration(20, 80, 90, 10), [True, False], "no better than chance", id="worse_than_chance"),
        pytest.param(calibration(10, 0, 0, 0), [True], "no human fail label", id="no_human_fail"),
        pytest.param(calibration(0, 0, 3, 7), [True], "no human pass label", id="no_human_pass"),
        pytest.param(calibration(9, 1, 1, 9), [], "no scored verdicts", id="empty_run"),
    ],
)
def test_refusals(calib, run, reason):
    r = corrected_pass_rate(run, calib, seed=0)
    assert r.corrected is None and r.low is None and r.high is None
    assert reason in r.refused_reason


def test_same_seed_same_result_and_json():
    args = ([True] * 30 + [False] * 70, calibration(45, 5, 8, 42))
    a = corrected_pass_rate(*args, seed=7, n_boot=300)
    assert corrected_pass_rate(*args, seed=7, n_boot=300) == a
    assert CorrectedRate.model_validate_json(a.model_dump_json()) == a
    assert corrected_pass_rate(*args, seed=8, n_boot=300).low != a.low


def test_interval_covers_truth_in_simulation():
    """Known truth 0.3, judge TPR 0.85 / TNR 0.9; a run of 500 items and a calibration set of
    200 items drawn from the same population (so about 60 human pass, 140 fail)."""
    true_rate, tpr, tnr = 0.3, 0.85, 0.9
    n_run, n_calib, n_sims = 500, 200, 1000
    rng = np.random.default_rng(2024)
    covered = refused = 0
    for sim in range(n_sims):
        truth = rng.random(n_run) < true_rate
        judged = np.where(truth, rng.random(n_run) < tpr, rng.random(n_run) >= tnr)
        human = rng.random(n_calib) < true_rate
        judge = np.where(human, rng.random(n_calib) < tpr, rng.random(n_calib) >= tnr)
        r = corrected_pass_rate(judged.tolist(), list(zip(human, judge, strict=True)), seed=sim, n_boot=500)
        if r.refused_reason is not None:
            refused += 1
            continue
        covered += r.low <= true_rate <= r.high
    coverage = covered / n_sims
    print(f"\ncorrected pass rate: 95% interval covered the truth in {coverage:.1%} of {n_sims} simulations")
    assert refused == 0
    assert coverage >= 0.93
