"""The bounds approval rests on: coverage by simulation, and old approval records.

Coverage: for each bound used (the exact Clopper-Pearson bound of TPR and TNR; the smoothed
Bayesian bootstrap bound of kappa, Spearman and MAE), many label sets are drawn (seeded) from a
known truth, and the one-sided nominal-95% interval ([lower, top], or [0, upper] for MAE) must
cover the truth in at least 93% of them. Monte Carlo error of a coverage of 0.95 over N label
sets: sqrt(0.95 * 0.05 / N), 0.007 at N = 1000 and 0.009 at N = 600. A label set whose point
estimate is undefined gives no bound (the approval refuses it) and counts as covered; the
table says how many there were. The plain percentile bootstrap is shown beside, failing,
where it fails: at the boundary, a label set without disagreements.

Run with -s to see the table.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone

import numpy as np
import pytest

from judgekit.calibration.approval_record import JudgeIdentity, Thresholds, read_approval
from judgekit.calibration.bounds import rate_lower_array, smoothed_bounds_batch, table_stats
from judgekit.calibration.evidence import derive_approval
from judgekit.gate import gate_results
from judgekit.suite import GatePolicy

NOMINAL = 0.95
ROWS: list[tuple[str, str, int, float, float, int]] = []  # metric, method, n, truth, coverage, undefined
SMOOTHED = "smoothed Bayesian bootstrap"
X2, Y2 = np.array([1.0, 0.0, 1.0, 0.0]), np.array([1.0, 1.0, 0.0, 0.0])  # cells tp, fp, fn, tn


def cells(prevalence: float, tpr: float, tnr: float) -> np.ndarray:
    return np.array([prevalence * tpr, (1 - prevalence) * (1 - tnr), prevalence * (1 - tpr), (1 - prevalence) * tnr])


def graded_truth(levels: tuple[float, ...], weights: tuple[float, ...], right: float, reach: int):
    """Human score on ``levels``; the judge gives the same level with probability ``right``,
    else a level at most ``reach`` steps away, evenly."""
    k = len(levels)
    table = np.zeros((k, k))
    for i in range(k):
        table[i, i] += weights[i] * right
        near = [j for j in range(k) if 0 < abs(j - i) <= reach]
        for j in near:
            table[i, j] += weights[i] * (1 - right) / len(near)
    grid = np.array(levels, dtype=float)
    return np.repeat(grid, k), np.tile(grid, k), table.ravel()


def record(metric: str, method: str, n: int, truth: float, covered: np.ndarray, undefined: int) -> float:
    coverage = float(covered.mean())
    ROWS.append((metric, method, n, truth, coverage, undefined))
    return coverage


@pytest.fixture(scope="module", autouse=True)
def table():
    yield
    print(f"\n{'metric':<9} {'method':<28} {'n':>4} {'truth':>6} {'nominal':>7} {'measured':>8} {'undefined':>9}")
    for metric, method, n, truth, coverage, undefined in ROWS:
        print(f"{metric:<9} {method:<28} {n:>4} {truth:>6.3f} {NOMINAL:>7.2f} {coverage:>8.3f} {undefined:>9}")


@pytest.mark.parametrize("rate", [0.8, 0.9, 0.97])
@pytest.mark.parametrize("n", [20, 50])
def test_clopper_pearson_lower_bound_covers(rate, n):
    k = np.random.default_rng(11).binomial(n, rate, size=5000)
    coverage = record("TPR/TNR", "exact Clopper-Pearson", n, rate, rate_lower_array(k, n) <= rate, 0)
    assert coverage >= 0.93


KAPPA_CASES = [(0.5, 0.9, 0.9), (0.3, 0.95, 0.9), (0.5, 0.97, 0.97), (0.5, 0.75, 0.75)]


@pytest.mark.parametrize(("prevalence", "tpr", "tnr"), KAPPA_CASES)
@pytest.mark.parametrize("n", [20, 40, 80])
def test_kappa_lower_bound_covers(prevalence, tpr, tnr, n):
    p = cells(prevalence, tpr, tnr)
    truth = float(table_stats(X2, Y2, p[None], ("kappa",))["kappa"][0])
    counts = np.random.default_rng(n).multinomial(n, p, size=1000)
    estimate, low = smoothed_bounds_batch(X2, Y2, counts, ("kappa",), rng=np.random.default_rng(1), n_draws=1000)["kappa"]
    covered = np.where(np.isnan(low), True, low <= truth)
    coverage = record("kappa", SMOOTHED, n, truth, covered, int(np.isnan(low).sum()))
    assert coverage >= 0.93


def test_the_percentile_bootstrap_fails_where_a_good_judge_makes_no_mistake():
    """Why the bound is not the plain percentile bootstrap: 20 items, true kappa 0.94; about
    half the label sets hold no disagreement, and resampling them can only say kappa = 1."""
    p = cells(0.5, 0.97, 0.97)
    truth = float(table_stats(X2, Y2, p[None], ("kappa",))["kappa"][0])
    rng = np.random.default_rng(5)
    counts = rng.multinomial(20, p, size=1000)
    resampled = rng.multinomial(20, counts[:, None, :] / 20, size=(1000, 1000))
    kappa = table_stats(X2, Y2, resampled, ("kappa",))["kappa"]
    low = np.quantile(np.where(np.isfinite(kappa), kappa, -1.0), 1 - NOMINAL, axis=-1)
    coverage = record("kappa", "percentile bootstrap (not used)", 20, truth, low <= truth, 0)
    assert coverage < 0.6


GRADED_CASES = [
    pytest.param((0.0, 0.5, 1.0), (0.25, 0.3, 0.45), 0.9, 1, id="3_levels_good"),
    pytest.param((0.0, 0.5, 1.0), (0.25, 0.3, 0.45), 0.6, 2, id="3_levels_weak"),
    pytest.param((0.0, 0.25, 0.5, 0.75, 1.0), (0.1, 0.15, 0.2, 0.25, 0.3), 0.7, 1, id="5_levels"),
]


@pytest.mark.parametrize(("levels", "weights", "right", "reach"), GRADED_CASES)
@pytest.mark.parametrize("n", [20, 40, 80])
def test_spearman_and_mae_bounds_cover(levels, weights, right, reach, n):
    x, y, p = graded_truth(levels, weights, right, reach)
    truth = table_stats(x, y, p[None], ("spearman", "mae"))
    counts = np.random.default_rng(n).multinomial(n, p, size=600)
    out = smoothed_bounds_batch(x, y, counts, ("spearman", "mae"), rng=np.random.default_rng(2), n_draws=1000)
    low, high = out["spearman"][1], out["mae"][1]
    rho, mae = float(truth["spearman"][0]), float(truth["mae"][0])
    cov_rho = record("Spearman", SMOOTHED, n, rho, np.where(np.isnan(low), True, low <= rho), int(np.isnan(low).sum()))
    cov_mae = record("MAE", SMOOTHED, n, mae, np.where(np.isnan(high), True, high >= mae), int(np.isnan(high).sum()))
    assert cov_rho >= 0.93 and cov_mae >= 0.93


# --- old approval records --------------------------------------------------------------------

NOW = datetime(2026, 12, 1, tzinfo=timezone.utc)


def identity(rubric: str = "ship@1.0.0") -> JudgeIdentity:
    return JudgeIdentity(model_pin="openai/judge-2024-08-06", parameters={"temperature": 0.0}, rubric=rubric,
                         rubric_sha256="0" * 64, template_sha256="1" * 64)


def format_1(axis: str, kind: str, pairs: list[tuple[bool, bool]], kappa: float) -> dict:
    """An approval record as format 1 wrote it: approved on the point estimate of kappa."""
    judge = identity()
    metric = {"value": kappa, "low": kappa - 0.2, "high": min(1.0, kappa + 0.1), "n_degenerate": 0}
    return {"format_version": 1, "fingerprint": judge.fingerprint, "judge": judge.model_dump(mode="json"),
            "label_set_sha256": "3" * 64, "labels_file": "labels.jsonl",
            "thresholds": {"min_kappa": 0.6, "min_items": 20},
            "axes": {axis: {"axis": axis, "kind": kind, "n": len(pairs), "kappa": metric, "accuracy": metric,
                            "pairs": [list(p) for p in pairs], "decision": "approved",
                            "reasons": [f"kappa {kappa:.3f} >= 0.6 on {len(pairs)} items"]}},
            "drift": [], "decided_at": "2026-11-30T00:00:00Z", "judgekit_version": "0.1.0"}


def write_format_1(tmp_path, data: dict):
    path = tmp_path / "ship" / "approvals" / f"{data['fingerprint']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2))
    return path


STRONG = [(True, True)] * 60 + [(False, False)] * 60 + [(True, False), (False, True)]
WEAK = [(True, True)] * 12 + [(False, False)] * 10 + [(True, False)] * 2  # kappa 0.83 on 24 items


def test_a_format_1_record_is_read_with_its_figures_but_never_gates(tmp_path):
    """Format 1 approved on the point estimate of kappa and kept bare (human, judge) pairs: no
    trajectory ids, no verdicts. Its figures are read (to be shown), but nothing can re-derive it,
    so it never gates, however strong its pairs (changed on purpose for issue 26: it used to gate
    when its pairs cleared today's rule, and pairs are exactly what a hand can fabricate)."""
    path = write_format_1(tmp_path, format_1("task_success", "binary", STRONG, 0.967))
    record = read_approval(path)
    assert record.format_version == 3 and record.migrated_from == 1 and record.verdicts_file is None
    axis = record.axes["task_success"]
    assert axis.kappa.value == 0.967 and axis.items == [] and axis.decision == "approved"
    assert "approval format 1, which names no labelled items and keeps no verdicts" in axis.statement
    gates, reason = derive_approval(tmp_path, identity(), Thresholds()).gates("task_success")
    assert not gates and reason == ("approval format 1 names no labelled items and keeps no verdicts, so it cannot be "
                                    "re-derived: recalibrate (`judgekit calibrate`)")


@pytest.mark.parametrize(("kind", "pairs"), [
    pytest.param("binary", WEAK, id="binary_bounds_short"),
    pytest.param("binary", STRONG, id="binary_bounds_clear"),
    pytest.param("graded", STRONG, id="graded"),
])
def test_a_format_1_approval_is_advisory_at_the_gate_and_says_why(tmp_path, kind, pairs):
    from judgekit.results import CheckOutcome, TaskSuccessResult, TrajectoryResult
    from judgekit.verdict import Provenance

    axis = "task_success"
    write_format_1(tmp_path, format_1(axis, kind, pairs, 0.83))
    judge = Provenance(model_pin="openai/judge-2024-08-06", parameters={"temperature": 0.0}, rubric="ship@1.0.0",
                       rubric_sha256="0" * 64, template_sha256="1" * 64, judgekit_version="0", litellm_version="0",
                       created_at=NOW, cache_key="2" * 64)
    checks = [CheckOutcome(check="judge", passed=False, reason="judged", source="judge")]
    result = TrajectoryResult(trajectory_id="t", rubric="ship@1.0.0", rubric_sha256="0" * 64, source="t.jsonl:t",
                              axes={axis: TaskSuccessResult(source="judge", passed=False, score=0.0, checks=checks,
                                                            judge=judge)})
    [gated] = gate_results([result], GatePolicy(min={"task_success": 0.5}), tmp_path).axes
    assert gated.approvals == []  # only task success's deterministic checks still gate (the axis table)
    [advisory] = gated.advisory
    assert advisory.trajectories == 1 and "approval format 1 names no labelled items" in advisory.reason


def test_a_format_2_record_never_gates_either(tmp_path):
    """Format 2 decided on bounds, but of pairs stored in the record itself: it too names no
    trajectory and keeps no verdicts, so the gate cannot re-derive it."""
    data = {**format_1("task_success", "binary", STRONG, 0.967), "format_version": 2, "rule": "lower-bound"}
    data["axes"]["task_success"].update(statement="task_success judge approved: kappa >= 0.90 (95% lower bound)",
                                        bounds_seed=0, bounds_draws=2000, scores=[])
    write_format_1(tmp_path, data)
    record = read_approval(next((tmp_path / "ship" / "approvals").glob("*.json")))
    assert record.migrated_from == 2 and "approval format 2" in record.axes["task_success"].statement
    gates, reason = derive_approval(tmp_path, identity(), Thresholds()).gates("task_success")
    assert not gates and reason.startswith("approval format 2 names no labelled items")


def test_an_unknown_format_is_refused(tmp_path):
    from judgekit.errors import InputError

    data = {**format_1("task_success", "binary", STRONG, 0.967), "format_version": 4}
    with pytest.raises(InputError, match="format_version 4 is not one of"):
        read_approval(write_format_1(tmp_path, data))
