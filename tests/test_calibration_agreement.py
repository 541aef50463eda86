"""Judge-vs-human agreement on binary and graded axes: figures, rules, intervals, properties."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.stats import spearmanr
from sklearn.metrics import cohen_kappa_score

from judgekit.calibration import AgreementReport, JudgeVerdictRecord, Label, agreement
from judgekit.calibration._stats import binary_cells, fleiss_kappa, kappa_from_cells
from judgekit.errors import InputError

WHEN = datetime(2025, 1, 1, tzinfo=UTC)


def labels_for(values, axis="task_success", labeler="alice", prefix="t"):
    out = []
    for i, value in enumerate(values):
        if value is None:
            continue
        fields = {"score": value} if isinstance(value, float) else {"label": value}
        out.append(Label(trajectory_id=f"{prefix}{i}", axis=axis, labeler=labeler, labeled_at=WHEN, **fields))
    return out


def verdicts_for(values, axis="task_success", repeat=None, prefix="t"):
    out = []
    for i, value in enumerate(values):
        if value is None:
            continue
        if value == "unscored":
            fields = {"unscored_reason": "invalid_reply"}
        elif isinstance(value, float):
            fields = {"score": value}
        else:
            fields = {"verdict": value}
        out.append(JudgeVerdictRecord(trajectory_id=f"{prefix}{i}", axis=axis, repeat=repeat, judge="j@1", **fields))
    return out


def pf(flags):
    return ["pass" if f else "fail" for f in flags]


# human: 6 pass, 4 fail; judge: tp 4, fn 2, fp 1, tn 3
HUMAN = pf([1, 1, 1, 1, 1, 1, 0, 0, 0, 0])
JUDGE = pf([1, 1, 1, 1, 0, 0, 1, 0, 0, 0])


def test_binary_figures_by_hand():
    report = agreement(labels_for(HUMAN), verdicts_for(JUDGE), n_boot=200)
    s = report.section("task_success")
    assert s.kind == "binary"
    assert (s.n, s.n_items, s.n_unscored, s.n_missing) == (10, 10, 0, 0)
    assert s.confusion.model_dump() == {"tp": 4, "fp": 1, "fn": 2, "tn": 3}
    assert s.base_rate.value == pytest.approx(0.6)
    assert s.accuracy.value == pytest.approx(0.7)
    assert s.tpr.value == pytest.approx(4 / 6) == s.recall.value
    assert s.tnr.value == pytest.approx(3 / 4)
    assert s.precision.value == pytest.approx(4 / 5)
    # po = 0.7, pe = 0.5*0.6 + 0.5*0.4 = 0.5
    assert s.kappa.value == pytest.approx(0.4)
    assert s.kappa.value == pytest.approx(cohen_kappa_score(HUMAN, JUDGE))
    assert report.judge == "j@1"


@pytest.mark.parametrize(
    ("human", "judge", "expected"),
    [
        pytest.param([1, 1, 0, 0], [1, 1, 0, 0], 1.0, id="perfect"),
        pytest.param([1, 1, 0, 0], [0, 0, 1, 1], -1.0, id="inverse"),
        pytest.param([1, 0, 1, 0], [1, 1, 1, 1], 0.0, id="constant_judge"),
        pytest.param([1, 1, 1, 1], [1, 1, 1, 1], None, id="both_constant_same"),
        pytest.param([1, 1, 1, 1], [0, 0, 0, 0], 0.0, id="both_constant_different"),
    ],
)
def test_vectorised_kappa_matches_sklearn(human, judge, expected):
    cells = binary_cells(np.array(human, bool), np.array(judge, bool))
    value = float(kappa_from_cells(*cells))
    if expected is None:
        assert np.isnan(value)
    else:
        assert value == pytest.approx(expected)
        assert value == pytest.approx(cohen_kappa_score(human, judge))


def test_unscored_counted_apart_and_missing_listed():
    judge = ["pass", "unscored", "fail", None]
    report = agreement(labels_for(["pass", "pass", "fail", "fail"]), verdicts_for(judge), n_boot=50)
    s = report.section("task_success")
    assert (s.n_items, s.n, s.n_unscored, s.n_missing) == (4, 2, 1, 1)
    assert s.unscored_ids == ["t1"] and s.missing_ids == ["t3"]
    assert s.confusion.model_dump() == {"tp": 1, "fp": 0, "fn": 0, "tn": 1}


def test_unmatched_verdicts_reported():
    extra = verdicts_for(["pass"], prefix="other")
    report = agreement(labels_for(["pass"]), verdicts_for(["pass"]) + extra, n_boot=0)
    assert report.unmatched_verdict_ids == ["other0"]
    assert report.n_unmatched_verdicts == 1


def test_majority_reference_ties_excluded_and_cohen_between_two():
    alice = labels_for(["pass", "pass", "fail", "fail"], labeler="alice")
    bob = labels_for(["pass", "fail", "fail", "fail"], labeler="bob")
    carol = labels_for(["pass", None, None, "pass"], labeler="carol")
    report = agreement(alice + bob + carol, verdicts_for(["pass", "pass", "fail", "fail"]), n_boot=0)
    s = report.section("task_success")
    # t0: 3 pass; t1: pass/fail tie; t2: 2 fail; t3: fail, fail, pass -> fail
    assert s.tied_ids == ["t1"] and s.n_items == 3
    assert s.confusion.model_dump() == {"tp": 1, "fp": 0, "fn": 0, "tn": 2}
    ia = s.inter_annotator
    assert ia.method == "fleiss" and ia.labelers == ["alice", "bob", "carol"]
    assert ia.n_items == 2  # t0 and t3 are the only items all three labelled
    two = agreement(alice + bob, verdicts_for(["pass"] * 4), n_boot=0).section("task_success").inter_annotator
    assert two.method == "cohen" and two.n_items == 4
    assert two.kappa == pytest.approx(cohen_kappa_score(pf([1, 1, 0, 0]), pf([1, 0, 0, 0])))


def test_fleiss_kappa_textbook_example():
    # Fleiss (1971) as tabulated on Wikipedia: 10 subjects, 14 raters, 5 categories -> 0.210
    table = [
        [0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7],
    ]
    assert fleiss_kappa(np.array(table)) == pytest.approx(0.2099, abs=1e-4)
    assert fleiss_kappa(np.array([[3, 0], [3, 0]])) is None


def test_repeats_majority_flip_rate_and_tie_rule():
    verdicts = (
        verdicts_for(["pass", "pass", "fail", "pass"], repeat=0)
        + verdicts_for(["pass", "fail", "fail", "fail"], repeat=1)
        + verdicts_for(["pass", "fail", "fail", None], repeat=2)
    )
    report = agreement(labels_for(["pass", "pass", "fail", "fail"]), verdicts, n_boot=0)
    s = report.section("task_success")
    rep = s.repeats
    assert rep.n_repeated == 4 and rep.max_repeats == 3
    assert rep.unstable_ids == ["t1", "t3"] and rep.flip_rate == pytest.approx(0.5)
    # t1: pass, fail, fail -> fail (majority); t3: pass, fail -> tie -> repeat 0 says pass
    assert s.confusion.model_dump() == {"tp": 1, "fp": 1, "fn": 1, "tn": 1}


def test_no_repeats_section_without_repeats():
    report = agreement(labels_for(HUMAN), verdicts_for(JUDGE), n_boot=0)
    assert report.section("task_success").repeats is None


def test_graded_axis_spearman_mae_binarised():
    human = [0.1, 0.4, 0.35, 0.8, 0.9, 0.6]
    judge = [0.2, 0.3, 0.5, 0.7, 1.0, 0.4]
    report = agreement(labels_for(human, axis="faithfulness"), verdicts_for(judge, axis="faithfulness"), n_boot=300)
    s = report.section("faithfulness")
    assert s.kind == "graded" and s.n == 6
    assert s.spearman.value == pytest.approx(spearmanr(human, judge).statistic)
    assert s.mae.value == pytest.approx(np.mean(np.abs(np.array(human) - np.array(judge))))
    # binarised at 0.5: human F F F P P P, judge F F P P P F
    assert s.binarised.confusion.model_dump() == {"tp": 2, "fp": 1, "fn": 1, "tn": 2}
    assert s.spearman.low <= s.spearman.value <= s.spearman.high


def test_graded_constant_scores_have_no_spearman():
    report = agreement(labels_for([0.5, 0.5, 0.5], axis="faithfulness"), verdicts_for([0.1, 0.2, 0.3], axis="faithfulness"))
    s = report.section("faithfulness")
    assert s.spearman.value is None and s.spearman.low is None
    assert s.spearman.n_degenerate == 2000


def test_degenerate_resamples_are_counted():
    # one human fail among 20: many resamples have no fail, where TNR is undefined
    human = pf([1] * 19 + [0])
    report = agreement(labels_for(human), verdicts_for(human), n_boot=1000)
    s = report.section("task_success")
    assert s.tnr.value == 1.0
    assert 250 < s.tnr.n_degenerate < 500  # (19/20)^20 ~ 0.36 of resamples
    assert s.accuracy.n_degenerate == 0
    assert s.tnr.low == 1.0


@pytest.mark.parametrize(
    ("labels", "verdicts", "message"),
    [
        pytest.param(labels_for(["pass"]), verdicts_for(["A"]), "expected pass or fail", id="pairwise_verdict_binary_item"),
        pytest.param(labels_for(["A"]), verdicts_for(["pass"]), "expected A or B", id="binary_verdict_pairwise_item"),
        # changed on purpose (issue 14): a score alone on a binary item is a score-only detector,
        # made pass/fail at the threshold (tests/test_external_labels.py); A/B stays an error
        pytest.param(labels_for(["pass"]), verdicts_for(["B"]), "expected pass or fail", id="pairwise_b_binary_item"),
        pytest.param(labels_for([0.5]), verdicts_for(["pass"]), "has no score", id="no_score_graded_item"),
        pytest.param(
            labels_for(["pass"]),
            verdicts_for(["pass"]) + [JudgeVerdictRecord(trajectory_id="t0", axis="task_success", verdict="fail", judge="other")],
            "several judges",
            id="two_judges",
        ),
        pytest.param(labels_for(["pass"]), verdicts_for(["pass"]) + verdicts_for(["fail"]), "same order and repeat", id="duplicate"),
    ],
)
def test_mismatches_are_input_errors(labels, verdicts, message):
    with pytest.raises(InputError, match=message):
        agreement(labels, verdicts, n_boot=0)


def test_report_is_json_round_trippable():
    report = agreement(labels_for(HUMAN) + labels_for([0.2, 0.9], axis="faithfulness"), verdicts_for(JUDGE), n_boot=100)
    text = report.model_dump_json()
    assert AgreementReport.model_validate(json.loads(text)) == report
    assert [s.axis for s in report.axes] == ["task_success", "faithfulness"]
    assert report.section("faithfulness").missing_ids == ["t0", "t1"]


# --- properties ---------------------------------------------------------------------------

PROPS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
flags = st.lists(st.booleans(), min_size=2, max_size=60)


@st.composite
def paired(draw, min_size=2, max_size=60):
    human = draw(st.lists(st.booleans(), min_size=min_size, max_size=max_size))
    judge = draw(st.lists(st.booleans(), min_size=len(human), max_size=len(human)))
    return human, judge


@PROPS
@given(flags)
def test_identical_judge_has_kappa_one(human):
    s = agreement(labels_for(pf(human)), verdicts_for(pf(human)), n_boot=50).section("task_success")
    assert s.accuracy.value == 1.0
    if len(set(human)) == 2:
        assert s.kappa.value == pytest.approx(1.0)
    else:
        assert s.kappa.value is None  # one class on both sides: chance agreement is 1


@PROPS
@given(flags, st.booleans())
def test_constant_judge_has_kappa_zero(human, constant):
    s = agreement(labels_for(pf(human)), verdicts_for(pf([constant] * len(human))), n_boot=50).section("task_success")
    if len(set(human)) == 2:
        assert s.kappa.value == pytest.approx(0.0, abs=1e-12)


@PROPS
@given(paired())
def test_rates_are_in_unit_interval(pair):
    s = agreement(labels_for(pf(pair[0])), verdicts_for(pf(pair[1])), n_boot=50).section("task_success")
    for name in ("accuracy", "base_rate", "tpr", "tnr", "precision"):
        m = getattr(s, name)
        for x in (m.value, m.low, m.high):
            assert x is None or 0.0 <= x <= 1.0
    assert s.kappa.value is None or -1.0 <= s.kappa.value <= 1.0


@st.composite
def non_degenerate(draw):
    """At least 30 items and at least 5 in every confusion cell."""
    cells = [draw(st.integers(5, 40)) for _ in range(4)]
    human = [True] * (cells[0] + cells[2]) + [False] * (cells[1] + cells[3])
    judge = [True] * cells[0] + [False] * cells[2] + [True] * cells[1] + [False] * cells[3]
    order = draw(st.permutations(range(len(human))))
    return [human[i] for i in order], [judge[i] for i in order]


@PROPS
@given(non_degenerate(), st.integers(0, 2**32 - 1))
def test_intervals_contain_point_estimates(pair, seed):
    s = agreement(labels_for(pf(pair[0])), verdicts_for(pf(pair[1])), n_boot=300, seed=seed).section("task_success")
    for name in ("accuracy", "base_rate", "kappa", "tpr", "tnr", "precision"):
        m = getattr(s, name)
        assert m.low <= m.value <= m.high, name
        # With >= 5 items per cell a resample rarely lacks a class: 10 negatives in 40 leave
        # none in a resample with probability 0.75**40 (1e-5), so hypothesis, over enough
        # examples x 300 resamples, finds one. Rare, never common.
        assert m.n_degenerate <= 3, (name, m.n_degenerate)


@PROPS
@given(paired(), st.integers(0, 1000))
def test_same_seed_same_report(pair, seed):
    labels, verdicts = labels_for(pf(pair[0])), verdicts_for(pf(pair[1]))
    first = agreement(labels, verdicts, seed=seed, n_boot=100)
    assert agreement(labels, verdicts, seed=seed, n_boot=100).model_dump() == first.model_dump()


def test_different_seed_different_interval():
    a = agreement(labels_for(HUMAN * 5), verdicts_for(JUDGE * 5), seed=1, n_boot=200).section("task_success")
    b = agreement(labels_for(HUMAN * 5), verdicts_for(JUDGE * 5), seed=2, n_boot=200).section("task_success")
    assert (a.kappa.low, a.kappa.high) != (b.kappa.low, b.kappa.high)
    assert a.kappa.value == b.kappa.value
