"""`calibrate --plan`, checked by simulation: with the planned sample, the approval's own bounds
clear in at least the promised share of simulated label sets; and `label` samples the plan's n
when --sample is not given.

Each simulated label set has the planned pass and fail items; the judge is right on each pass
item with probability TPR and on each fail item with probability TNR; the set is decided by the
approval path itself (``axis_bounds``, then ``decide``). Monte Carlo error of a share p over
N_SIM sets: sqrt(p (1 - p) / N_SIM), about 0.012 at p = 0.82 and N_SIM = 1000.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from judgekit.calibration._bootstrap import Metric
from judgekit.calibration.approval import decide
from judgekit.calibration.approval_record import AxisApproval, Thresholds
from judgekit.calibration.bounds import axis_bounds
from judgekit.calibration.planning import binary_power, plan_binary, plan_graded
from judgekit.cli import main

ROOT = Path(__file__).resolve().parent.parent
N_SIM = 1000


def approved(kind: str, human, judge, thresholds: Thresholds, seed: int) -> bool:
    """The approval rule on one label set, as calibrate applies it."""
    b = axis_bounds(kind, human, judge, seed=seed, name="simulated", n_draws=2000)
    figure = {name: bound.bound for name, bound in b.bounds.items()}
    axis = AxisApproval(
        axis="simulated", kind=kind, n=b.n, kappa=Metric(value=None), accuracy=Metric(value=None),
        n_pass=b.n_pass, n_fail=b.n_fail, confidence=b.confidence, kappa_lower=figure.get("kappa"),
        tpr_lower=figure.get("tpr"), tnr_lower=figure.get("tnr"), spearman_lower=figure.get("spearman"),
        mae_upper=figure.get("mae"), decision="refused", reasons=[],
    )
    return decide(axis, thresholds)[0] == "approved"


def simulate_binary(n_pass: int, n_fail: int, tpr: float, tnr: float, thresholds: Thresholds, seed: int) -> float:
    rng = np.random.default_rng(seed)
    human = np.r_[np.ones(n_pass), np.zeros(n_fail)]
    clears = 0
    for i in range(N_SIM):
        right = np.r_[rng.random(n_pass) < tpr, rng.random(n_fail) < tnr]
        judge = np.where(right, human, 1 - human)
        clears += approved("binary", human, judge, thresholds, seed=i)
    return clears / N_SIM


@pytest.mark.parametrize(("tpr", "tnr", "prevalence"), [
    pytest.param(0.95, 0.95, 0.5, id="good_judge_balanced"),
    pytest.param(0.97, 0.93, 0.35, id="unbalanced_classes"),
])
def test_the_planned_sample_clears_in_the_promised_share_of_label_sets(tpr, tnr, prevalence):
    thresholds = Thresholds()
    plan = plan_binary(thresholds, tpr=tpr, tnr=tnr, prevalence=prevalence, power=0.8)
    assert plan.reachable and plan.power >= 0.8
    assert plan.n_pass + plan.n_fail == plan.n and plan.n_pass == round(prevalence * plan.n)
    measured = simulate_binary(plan.n_pass, plan.n_fail, tpr, tnr, thresholds, seed=7)
    se = math.sqrt(plan.power * (1 - plan.power) / N_SIM)
    print(f"\nplan TPR {tpr} TNR {tnr} share {prevalence}: {plan.n_pass} pass + {plan.n_fail} fail, "
          f"promised {plan.target}, exact {plan.power:.3f}, simulated {measured:.3f} (MC error {se:.3f})")
    assert measured >= plan.target
    assert abs(measured - plan.power) <= 3.5 * se  # the exact power is what the approval path does
    # and the plan is not padded: a sample a fifth smaller falls short of the promise
    smaller = round(0.8 * plan.n)
    n_pass = round(prevalence * smaller)
    assert binary_power(thresholds, n_pass, smaller - n_pass, tpr, tnr) < 0.8


def test_a_judge_too_close_to_the_thresholds_is_said_to_be_unreachable():
    plan = plan_binary(Thresholds(), tpr=0.81, tnr=0.81)
    assert not plan.reachable and "too close to the thresholds" in plan.describe()


def test_a_graded_plan_from_a_pilot_clears_in_the_promised_share():
    """Pilot: 40 graded items (scores 0, 0.5, 1) and a judge that is off by one step on 10% of
    them. The plan draws label sets from the pilot's pairs; so does this check, through the
    approval path, with other seeds."""
    rng = np.random.default_rng(3)
    human = rng.choice([0.0, 0.5, 1.0], size=40, p=[0.3, 0.3, 0.4])
    step = np.where(rng.random(40) < 0.1, rng.choice([-0.5, 0.5], size=40), 0.0)
    judge = np.clip(human + step, 0.0, 1.0)
    thresholds = Thresholds()
    plan = plan_graded(thresholds, human, judge, power=0.8, n_sim=300, n_draws=600)
    assert plan.reachable and plan.power >= 0.8
    passing, failing = np.flatnonzero(human >= 0.5), np.flatnonzero(human < 0.5)
    sims, clears = 300, 0
    for i in range(sims):
        pick = np.r_[rng.choice(passing, plan.n_pass), rng.choice(failing, plan.n_fail)]
        clears += approved("graded", human[pick], judge[pick], thresholds, seed=100 + i)
    measured = clears / sims
    se = math.sqrt(0.8 * 0.2 / sims)
    print(f"\ngraded plan: {plan.n_pass} pass + {plan.n_fail} fail, simulated power {plan.power:.3f}, "
          f"checked {measured:.3f} (MC error {se:.3f})")
    assert measured >= plan.target - 2 * se  # two simulations, each with its Monte Carlo error


@pytest.fixture
def example(tmp_path: Path) -> Path:
    for part in ("examples", "rubrics", "calibration"):
        shutil.copytree(ROOT / part, tmp_path / part)
    return tmp_path / "examples" / "email-update"


def test_calibrate_plan_prints_the_plan_for_the_suites_thresholds(example):
    result = CliRunner().invoke(main, ["calibrate", str(example / "suite.yaml"), "--plan", "--expect-tpr", "0.95",
                                       "--expect-tnr", "0.95"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    plan = plan_binary(Thresholds(), tpr=0.95, tnr=0.95)
    assert f"label {plan.n_pass} pass and {plan.n_fail} fail items ({plan.n} in all)" in result.output
    assert "kappa >= 0.6, TPR >= 0.8, TNR >= 0.8" in result.output
    without = CliRunner().invoke(main, ["calibrate", str(example / "suite.yaml")])
    assert without.exit_code == 2 and "--labels is required" in without.output


def test_calibrate_plan_from_a_pilot(example, tmp_path):
    labels, verdicts = tmp_path / "pilot-labels.jsonl", tmp_path / "pilot-verdicts.jsonl"
    rows, votes = [], []
    for i in range(40):
        human = "pass" if i % 2 else "fail"
        judge = human if i % 20 not in (0, 5) else ("fail" if human == "pass" else "pass")  # wrong on 2 + 2
        rows.append({"trajectory_id": f"p{i}", "axis": "task_success", "label": human, "labeler": "a",
                     "labeled_at": "2026-12-01T00:00:00Z"})
        votes.append({"trajectory_id": f"p{i}", "axis": "task_success", "verdict": judge, "judge": "j"})
    labels.write_text("".join(json.dumps(r) + "\n" for r in rows))
    verdicts.write_text("".join(json.dumps(v) + "\n" for v in votes))
    result = CliRunner().invoke(main, ["calibrate", str(example / "suite.yaml"), "--plan", "--pilot", str(labels),
                                       str(verdicts)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    plan = plan_binary(Thresholds(), tpr=18 / 20, tnr=18 / 20, prevalence=0.5)
    assert f"task_success: binary axis: label {plan.n_pass} pass and {plan.n_fail} fail" in result.output
    assert "estimated from a pilot of 40 items (20 pass, 20 fail)" in result.output


def test_label_samples_the_plans_n_unless_told(example, tmp_path):
    plan = plan_binary(Thresholds())
    result = CliRunner().invoke(main, ["label", str(example), "--seed", "1", "--labeler", "a", "--labels",
                                       str(tmp_path / "l.jsonl")], input="q\n", catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert f"--sample not given: {plan.n} trajectories" in result.output
    told = CliRunner().invoke(main, ["label", str(example), "--sample", "2", "--seed", "1", "--labeler", "a",
                                     "--labels", str(tmp_path / "m.jsonl")], input="q\n", catch_exceptions=False)
    assert "--sample not given" not in told.output and "2 item(s) to label" in told.output
