"""Pairwise agreement: per-order accuracy, both-orders figures, order consistency, kappas."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import cohen_kappa_score

from judgekit.calibration import JudgeVerdictRecord, Label, agreement

WHEN = datetime(2025, 1, 1, tzinfo=UTC)


def pairwise_labels(choices, labeler="alice"):
    return [
        Label(trajectory_id=f"p{i}", axis="task_success", label=c, labeler=labeler, labeled_at=WHEN)
        for i, c in enumerate(choices)
    ]


def pairwise_verdicts(choices, order, repeat=None):
    out = []
    for i, c in enumerate(choices):
        if c is None:
            continue
        fields = {"unscored_reason": "unparsed_reply"} if c == "U" else {"verdict": c}
        out.append(JudgeVerdictRecord(trajectory_id=f"p{i}", axis="task_success", order=order, repeat=repeat, **fields))
    return out


HUMAN = ["A", "A", "B", "B", "A", "B"]
ORIGINAL = ["A", "B", "B", "A", "U", "B"]
SWAPPED = ["A", "A", "B", "B", "U", None]


def test_pairwise_figures_by_hand():
    verdicts = pairwise_verdicts(ORIGINAL, "original") + pairwise_verdicts(SWAPPED, "swapped")
    s = agreement(pairwise_labels(HUMAN), verdicts, n_boot=300).section("task_success")
    assert s.kind == "pairwise" and s.n == 6
    orig, swap = s.orders["original"], s.orders["swapped"]
    assert (orig.n, orig.n_unscored, orig.n_correct) == (6, 1, 3)
    assert orig.accuracy.value == pytest.approx(3 / 5) and orig.accuracy_strict == pytest.approx(3 / 6)
    assert (swap.n, swap.n_unscored, swap.n_correct) == (5, 1, 4)
    assert swap.accuracy.value == 1.0 and swap.accuracy_strict == pytest.approx(4 / 5)
    assert s.accuracy_average.value == pytest.approx(0.8)
    assert (s.n_both, s.n_correct_both) == (5, 2) and s.correct_both.value == pytest.approx(2 / 5)
    assert (s.n_both_scored, s.n_consistent, s.n_both_unscored) == (4, 2, 1)
    assert s.order_consistency.value == pytest.approx(0.5)
    assert s.kappa_between_orders.value == pytest.approx(cohen_kappa_score(ORIGINAL[:4], SWAPPED[:4]))
    scored = [0, 1, 2, 3, 5]
    expected = cohen_kappa_score([HUMAN[i] for i in scored], [ORIGINAL[i] for i in scored])
    assert orig.kappa_vs_human.value == pytest.approx(expected)
    assert s.n_unscored == 2 and s.unscored_ids == ["p4"]
    assert s.kappa_vs_human_average.value == pytest.approx((orig.kappa_vs_human.value + swap.kappa_vs_human.value) / 2)


def test_single_order_has_no_both_order_figures():
    s = agreement(pairwise_labels(HUMAN), pairwise_verdicts(HUMAN, "original"), n_boot=50).section("task_success")
    assert list(s.orders) == ["original"]
    assert s.orders["original"].accuracy.value == 1.0
    assert s.accuracy_average.value == 1.0
    assert s.n_both == 0 and s.correct_both.value is None and s.kappa_between_orders.value is None


def test_order_defaults_to_original():
    verdicts = [JudgeVerdictRecord(trajectory_id="p0", axis="task_success", verdict="A")]
    s = agreement(pairwise_labels(["A"]), verdicts, n_boot=0).section("task_success")
    assert list(s.orders) == ["original"] and s.orders["original"].n_correct == 1


def test_pairwise_repeats_per_order():
    verdicts = (
        pairwise_verdicts(["A", "B"], "original", repeat=0)
        + pairwise_verdicts(["B", "B"], "original", repeat=1)
        + pairwise_verdicts(["A", "B"], "swapped", repeat=0)
    )
    s = agreement(pairwise_labels(["A", "B"]), verdicts, n_boot=0).section("task_success")
    assert s.repeats.unstable_ids == ["p0"] and s.repeats.n_repeated == 2
    # p0 original: A then B -> tie -> repeat 0 (A) stands
    assert s.orders["original"].n_correct == 2


def test_pairwise_ties_between_labelers():
    labels = pairwise_labels(["A", "B"], "alice") + pairwise_labels(["B", "B"], "bob")
    s = agreement(labels, pairwise_verdicts(["A", "B"], "original"), n_boot=0).section("task_success")
    assert s.tied_ids == ["p0"] and s.n == 1
    assert s.inter_annotator.method == "cohen" and s.inter_annotator.n_items == 2


@settings(max_examples=30, deadline=None)
@given(st.lists(st.sampled_from("AB"), min_size=4, max_size=40))
def test_judge_equal_to_humans_in_both_orders(human):
    verdicts = pairwise_verdicts(human, "original") + pairwise_verdicts(human, "swapped")
    s = agreement(pairwise_labels(human), verdicts, n_boot=50).section("task_success")
    assert s.correct_both.value == 1.0 and s.order_consistency.value == 1.0
    if len(set(human)) == 2:
        assert s.kappa_between_orders.value == pytest.approx(1.0)
        assert s.orders["swapped"].kappa_vs_human.value == pytest.approx(1.0)
