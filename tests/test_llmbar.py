"""Acceptance check: LLMBar's published statistics reproduced through judgekit's files and maths.

Every subset folder under ``shared/data/llmbar`` (any folder with a ``dataset.json``) and every
``evaluators/<model>/<prompt>/statistics.json`` in it is checked the same way, nothing is
special-cased: import to JSON Lines, load back with the loaders, run ``agreement``, compare.

How LLMBar's script (LLMEvaluator/evaluate.py) computes its figures, for reading the asserts:

- ``correct_False``/``correct_True``: winner == label in the original/swapped order, over all
  items (an unparsed reply counts as wrong) -> our ``n_correct`` / ``n``;
- ``correct_both``, ``equal`` (both orders pick the same answer; two unparsed replies count as
  equal there) -> ``n_correct_both``, ``n_consistent`` + ``n_both_unscored``;
- ``kappa_agreement``: Cohen's kappa between the two orders' winners -> ``kappa_between_orders``;
- ``kappa_False``/``kappa_True`` are NOT judge-vs-human kappas. The script codes the judge's
  winner as 1 for "1" and 0 for anything else, but leaves the human label coded 1/2, then calls
  cohen_kappa_score on the two codings: human 2 can never match judge 0, so the figure mixes
  three classes and measures nothing meaningful. It is reproduced below from our records with
  that same coding, to show the diagnosis; judgekit's judge-vs-human kappa is reported instead.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from sklearn.metrics import cohen_kappa_score

from judgekit.calibration import load_labels, load_verdicts
from judgekit.calibration.agreement import agreement
from judgekit.importers.llmbar import import_llmbar

try:
    from conftest import SHARED_DATA
except ImportError:  # another import mode: same rule as conftest.py
    SHARED_DATA = Path(os.environ.get("JUDGEKIT_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))

pytestmark = pytest.mark.shared_data
FRACTION = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*=\s*([-+0-9.eE]+)%\s*$")


def _cases() -> list:
    root = SHARED_DATA / "llmbar"
    cases = []
    for dataset in sorted(root.rglob("dataset.json")) if root.is_dir() else []:
        subset = dataset.parent
        for stats in sorted(subset.glob("evaluators/*/*/statistics.json")):
            judge = f"{stats.parent.parent.name}/{stats.parent.name}"
            rel = subset.relative_to(root).as_posix()
            cases.append(pytest.param(rel, judge, id=f"{rel}-{judge}"))
    # no data: one case, so that the shared_data fixture skips (or fails under CI) with its reason
    return cases or [pytest.param(".", "absent", id="llmbar-data-absent")]


def _fraction(text: str) -> tuple[int, int, float]:
    match = FRACTION.match(text)
    assert match, f"unexpected statistics format: {text!r}"
    return int(match[1]), int(match[2]), float(match[3])


def _percent(text: str) -> float:
    return float(text.strip().rstrip("%"))


@pytest.mark.parametrize(("subset", "judge"), _cases())
def test_llmbar_statistics_reproduced(shared_data, tmp_path: Path, subset: str, judge: str):
    src = shared_data("llmbar") / subset
    expected = json.loads((src / "evaluators" / judge / "statistics.json").read_text(encoding="utf-8"))

    written = import_llmbar(src, tmp_path)
    labels = load_labels(written[0])
    by_judge = {}
    for path in written[1:]:
        records = load_verdicts(path)
        by_judge[records[0].judge] = records
    verdicts = by_judge[judge]
    report = agreement(labels, verdicts, n_boot=200, seed=0)
    s = report.section("task_success", "pairwise")
    original, swapped = s.orders["original"], s.orders["swapped"]
    unscored = original.n_unscored + swapped.n_unscored

    # correct_False / correct_True: counts and totals, then the percentage
    for key, stats in (("correct_False", original), ("correct_True", swapped)):
        count, total, pct = _fraction(expected[key])
        assert (stats.n_correct, stats.n) == (count, total), key
        assert stats.accuracy_strict * 100 == pytest.approx(pct, abs=1e-9), key
        if stats.n_unscored == 0:
            assert stats.accuracy.value * 100 == pytest.approx(pct, abs=1e-9), key
    strict_average = (original.accuracy_strict + swapped.accuracy_strict) / 2
    assert strict_average * 100 == pytest.approx(_percent(expected["correct_average"]), abs=1e-9)
    if unscored == 0:
        assert s.accuracy_average.value * 100 == pytest.approx(_percent(expected["correct_average"]), abs=1e-9)

    count, total, pct = _fraction(expected["correct_both"])
    assert (s.n_correct_both, s.n_both) == (count, total)
    assert s.correct_both.value * 100 == pytest.approx(pct, abs=1e-9)

    count, total, pct = _fraction(expected["equal"])
    assert (s.n_consistent + s.n_both_unscored, s.n_both) == (count, total)
    if unscored == 0:
        assert s.order_consistency.value * 100 == pytest.approx(pct, abs=1e-9)

    # LLMBar's coding (winner "1" -> 1, anything else -> 0; human label left as 1/2)
    human = {lab.trajectory_id: 1 if lab.label == "A" else 2 for lab in labels}
    coded = {
        order: {v.trajectory_id: 1 if v.verdict == "A" else 0 for v in verdicts if v.effective_order == order}
        for order in ("original", "swapped")
    }
    ids = sorted(human)
    if unscored == 0:
        assert s.kappa_between_orders.value == pytest.approx(expected["kappa_agreement"], abs=1e-4)
    else:  # an unparsed reply is coded like "2" there; judgekit leaves it out instead
        llmbar_agreement = cohen_kappa_score([coded["original"][i] for i in ids], [coded["swapped"][i] for i in ids])
        assert llmbar_agreement == pytest.approx(expected["kappa_agreement"], abs=1e-4)
    h = [human[i] for i in ids]
    for key, order in (("kappa_False", "original"), ("kappa_True", "swapped")):
        assert cohen_kappa_score([coded[order][i] for i in ids], h) == pytest.approx(expected[key], abs=1e-4), key
    assert (expected["kappa_False"] + expected["kappa_True"]) / 2 == pytest.approx(expected["kappa_average"], abs=1e-9)

    print(
        f"\nLLMBar {subset} {judge}: n={s.n} "
        f"acc original {original.accuracy.value:.4f} swapped {swapped.accuracy.value:.4f} "
        f"correct_both {s.correct_both.value:.4f} equal {s.order_consistency.value:.4f} "
        f"kappa_between_orders {s.kappa_between_orders.value:.4f} | judge-vs-human kappa "
        f"original {original.kappa_vs_human.value:.4f} "
        f"[{original.kappa_vs_human.low:.3f}, {original.kappa_vs_human.high:.3f}] "
        f"swapped {swapped.kappa_vs_human.value:.4f} "
        f"[{swapped.kappa_vs_human.low:.3f}, {swapped.kappa_vs_human.high:.3f}] "
        f"average {s.kappa_vs_human_average.value:.4f} (unscored: {unscored})"
    )


def test_import_is_stable_and_loadable(shared_data, tmp_path: Path):
    root = shared_data("llmbar")
    subset = sorted(root.rglob("dataset.json"))[0].parent
    first = import_llmbar(subset, tmp_path / "a")
    second = import_llmbar(subset, tmp_path / "b")
    assert [p.name for p in first] == [p.name for p in second]
    for a, b in zip(first, second, strict=True):
        assert a.read_bytes() == b.read_bytes()
    labels = load_labels(first[0])
    n_items = len(json.loads((subset / "dataset.json").read_text(encoding="utf-8")))
    assert len(labels) == n_items
    assert {lab.item_kind for lab in labels} == {"pairwise"}
    assert labels[0].trajectory_id.startswith("llmbar-") and labels[0].trajectory_id.endswith("-0001")
    for path in first[1:]:
        records = load_verdicts(path)
        assert len(records) == 2 * n_items
        assert {r.order for r in records} == {"original", "swapped"}
