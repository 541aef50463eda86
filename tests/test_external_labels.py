"""Label sets brought from elsewhere, as they are: no dates, several judges in one file,
multi-class labels mapped to pass/fail on the command line, several labellers pooled by a stated
rule, score-only detectors, unscored verdicts excluded or counted wrong.

The fixture (tests/data/external, synthetic: see its README) is read here with plain ``json``
and every figure is recomputed independently: scikit-learn for balanced accuracy, macro F1,
Cohen's kappa and the rates; Fleiss' kappa by hand from its definition (Fleiss 1971, eq. 1-9);
Krippendorff's alpha against the worked example of Krippendorff (2011), "Computing
Krippendorff's alpha-reliability", whose nominal alpha is 0.743.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import jsonschema
import numpy as np
import pytest
from click.testing import CliRunner
from sklearn.metrics import balanced_accuracy_score, cohen_kappa_score, f1_score, recall_score

from judgekit.calibration import JudgeVerdictRecord, Label, load_labels, load_verdicts
from judgekit.calibration._stats import krippendorff_alpha_nominal
from judgekit.calibration.agreement import agreement, agreement_by_judge
from judgekit.cli import main
from judgekit.errors import InputError
from judgekit.importers.llmbar import import_llmbar
from judgekit.schemas import schema_for

DATA = Path(__file__).parent / "data" / "external"
LABELS, VERDICTS = DATA / "labels.jsonl", DATA / "verdicts.jsonl"
SEVERITY = {"consistent": 0, "benign": 1, "questionable": 2, "unwanted": 3}
POSITIVE = ("consistent", "benign")  # faithful: pass
JUDGES = ["gpt-4o-judge", "hhem-2.1", "minicheck-7b"]


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _classes_by_item() -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = defaultdict(dict)
    for row in _rows(LABELS):
        out[row["trajectory_id"]][row["labeler"]] = row["category"]
    return out


def _reference(pool: str) -> dict[str, bool]:
    """Pass (True) / fail per item, by hand; a majority tie is absent."""
    ref = {}
    for tid, by in _classes_by_item().items():
        passes = [c in POSITIVE for c in by.values()]
        if pool == "all":  # FaithBench's own rule (scripts/binarize.py, "worst"): the most severe class decides
            worst = max(by.values(), key=SEVERITY.get)
            assert (worst in POSITIVE) == all(passes)
            ref[tid] = all(passes)
        elif pool == "any":
            ref[tid] = any(passes)
        elif passes.count(True) != passes.count(False):
            ref[tid] = passes.count(True) > passes.count(False)
    return ref


def _judge_calls(judge: str, threshold: float = 0.5) -> dict[str, bool | None]:
    """Pass/fail per item for one judge (None: unscored); score-only verdicts at the threshold."""
    out = {}
    for row in _rows(VERDICTS):
        if row["judge"] != judge:
            continue
        if row.get("unscored_reason"):
            out[row["trajectory_id"]] = None
        elif row.get("verdict") is not None:
            out[row["trajectory_id"]] = row["verdict"] == "pass"
        else:
            out[row["trajectory_id"]] = row["score"] >= threshold
    return out


def _expected(judge: str, pool: str, unscored: str = "exclude", threshold: float = 0.5) -> dict[str, float | int]:
    ref, calls = _reference(pool), _judge_calls(judge, threshold)
    human, pred = [], []
    n_unscored = 0
    for tid in sorted(ref):
        if tid not in calls:
            continue
        call = calls[tid]
        if call is None:
            n_unscored += 1
            if unscored == "exclude":
                continue
            call = not ref[tid]  # counted as the wrong answer
        human.append(ref[tid])
        pred.append(call)
    return {
        "n": len(human),
        "n_unscored": n_unscored,
        "balanced_accuracy": balanced_accuracy_score(human, pred),
        "f1_macro": f1_score(human, pred, average="macro"),
        "kappa": cohen_kappa_score(human, pred),
        "tpr": recall_score(human, pred, pos_label=True),
        "tnr": recall_score(human, pred, pos_label=False),
        "accuracy": float(np.mean(np.array(human) == np.array(pred))),
    }


def _report(**options):
    return agreement_by_judge(load_labels(LABELS), load_verdicts(VERDICTS), positive=POSITIVE, n_boot=300, **options)


# --- the figures, judge by judge, against scikit-learn --------------------------------------------


@pytest.mark.parametrize("pool", ["all", "any", "majority"])
@pytest.mark.parametrize("unscored", ["exclude", "wrong"])
def test_every_judge_matches_sklearn(pool: str, unscored: str):
    reports = _report(pool=pool, unscored=unscored)
    assert [r.judge for r in reports] == JUDGES
    for report in reports:
        assert (report.pool, report.unscored, report.positive_classes) == (pool, unscored, sorted(POSITIVE))
        s = report.section("faithfulness", "multiclass")
        want = _expected(report.judge, pool, unscored)
        assert (s.n, s.n_unscored) == (want["n"], want["n_unscored"]), report.judge
        for name in ("balanced_accuracy", "f1_macro", "kappa", "tpr", "tnr", "accuracy"):
            metric = getattr(s, name)
            assert metric.value == pytest.approx(want[name], abs=1e-12), (report.judge, name)
            assert metric.low <= metric.value <= metric.high, (report.judge, name)
        assert s.negative_classes == ["questionable", "unwanted"]


def test_majority_ties_are_reported_and_left_out():
    ref = _reference("majority")
    tied = sorted(set(_classes_by_item()) - set(ref))
    assert tied, "the fixture has items with two labellers who disagree on pass/fail"
    for report in _report(pool="majority"):
        s = report.section("faithfulness", "multiclass")
        assert s.tied_ids == tied and s.n_tied == len(tied) and s.n_items == 40 - len(tied)
        assert "majority" in s.reference_rule and "tie" in s.reference_rule
    for pool in ("any", "all"):
        assert _report(pool=pool)[0].section("faithfulness", "multiclass").n_tied == 0


def test_unscored_and_missing_are_always_counted():
    by_judge = {r.judge: r.section("faithfulness", "multiclass") for r in _report(pool="all")}
    assert (by_judge["gpt-4o-judge"].n_unscored, by_judge["gpt-4o-judge"].unscored_ids) == (3, ["fb-005", "fb-017", "fb-029"])
    assert (by_judge["minicheck-7b"].n_unscored, by_judge["minicheck-7b"].missing_ids) == (1, ["fb-040"])
    wrong = {r.judge: r.section("faithfulness", "multiclass") for r in _report(pool="all", unscored="wrong")}
    assert wrong["gpt-4o-judge"].n == by_judge["gpt-4o-judge"].n + 3 and wrong["gpt-4o-judge"].n_unscored == 3
    assert wrong["gpt-4o-judge"].accuracy.value < by_judge["gpt-4o-judge"].accuracy.value


def test_score_only_detector_uses_the_threshold():
    for threshold in (0.4, 0.6):
        hhem = next(r for r in _report(pool="all", threshold=threshold) if r.judge == "hhem-2.1")
        s = hhem.section("faithfulness", "multiclass")
        want = _expected("hhem-2.1", "all", threshold=threshold)
        assert s.n_from_score == 40 and s.balanced_accuracy.value == pytest.approx(want["balanced_accuracy"])
        assert s.kappa.value == pytest.approx(want["kappa"])


def test_class_confusion_counts_labels_by_hand():
    calls = _judge_calls("gpt-4o-judge")
    want: dict[str, Counter] = defaultdict(Counter)
    for tid, by in _classes_by_item().items():
        call = calls[tid]
        for category in by.values():
            want[category]["unscored" if call is None else ("pass" if call else "fail")] += 1
    s = next(r for r in _report(pool="all") if r.judge == "gpt-4o-judge").section("faithfulness", "multiclass")
    got = {row.category: Counter(pass_=row.judge_pass, fail=row.judge_fail, unscored=row.unscored) for row in s.class_confusion}
    assert {c: (w["pass"], w["fail"], w["unscored"]) for c, w in want.items()} == {
        c: (g["pass_"], g["fail"], g["unscored"]) for c, g in got.items()
    }
    assert {row.category: row.positive for row in s.class_confusion} == {c: c in POSITIVE for c in SEVERITY}


# --- inter-annotator agreement ----------------------------------------------------------------------


def _fleiss_by_hand(table: list[list[int]]) -> float:
    """Fleiss (1971): P_i = (sum_j n_ij^2 - n) / (n (n - 1)); kappa = (mean P_i - sum p_j^2) / (1 - sum p_j^2)."""
    n = sum(table[0])
    big_n = len(table)
    p_j = [sum(row[j] for row in table) / (big_n * n) for j in range(len(table[0]))]
    p_i = [(sum(x * x for x in row) - n) / (n * (n - 1)) for row in table]
    p_bar, p_e = sum(p_i) / big_n, sum(p * p for p in p_j)
    return (p_bar - p_e) / (1 - p_e)


def test_fleiss_on_the_classes_and_on_pass_fail_by_hand():
    complete = {tid: by for tid, by in _classes_by_item().items() if len(by) == 3}
    s = _report(pool="all")[0].section("faithfulness", "multiclass")
    classes = sorted({c for by in complete.values() for c in by.values()})
    table = [[list(by.values()).count(c) for c in classes] for by in complete.values()]
    ia = s.inter_annotator
    assert (ia.method, ia.on, ia.n_items, ia.labelers) == ("fleiss", "classes", len(complete), ["ann-a", "ann-b", "ann-c"])
    assert ia.kappa == pytest.approx(_fleiss_by_hand(table), abs=1e-12)
    binary = [[sum(c in POSITIVE for c in by.values()), sum(c not in POSITIVE for c in by.values())] for by in complete.values()]
    pf = s.inter_annotator_pass_fail
    assert (pf.method, pf.on) == ("fleiss", "pass/fail")
    assert pf.kappa == pytest.approx(_fleiss_by_hand(binary), abs=1e-12)
    assert pf.n_items_alpha == 40  # alpha also uses the items only two people labelled


def test_cohen_for_two_labellers_matches_sklearn():
    two = [lab for lab in load_labels(LABELS) if lab.labeler in ("ann-a", "ann-b")]
    verdicts = [v for v in load_verdicts(VERDICTS) if v.judge == "minicheck-7b"]
    s = agreement(two, verdicts, positive=POSITIVE, n_boot=0).section("faithfulness", "multiclass")
    by = _classes_by_item()
    both = [tid for tid in sorted(by) if {"ann-a", "ann-b"} <= set(by[tid])]
    a, b = [by[t]["ann-a"] for t in both], [by[t]["ann-b"] for t in both]
    assert (s.inter_annotator.method, s.inter_annotator.n_items) == ("cohen", len(both))
    assert s.inter_annotator.kappa == pytest.approx(cohen_kappa_score(a, b), abs=1e-12)
    assert s.inter_annotator_pass_fail.kappa == pytest.approx(
        cohen_kappa_score([x in POSITIVE for x in a], [x in POSITIVE for x in b]), abs=1e-12
    )


def test_krippendorff_alpha_worked_example():
    # Krippendorff (2011), section C: 4 coders, 12 units, missing values; nominal alpha = 0.743
    x = None
    coders = [
        [1, 2, 3, 3, 2, 1, 4, 1, 2, x, x, x],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, x, 3],
        [x, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, x],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, x],
    ]
    units = [[v for v in unit if v is not None] for unit in zip(*coders, strict=True)]
    assert krippendorff_alpha_nominal(units) == pytest.approx(0.743, abs=5e-4)
    assert krippendorff_alpha_nominal([[1, 1], [1, 1, 1]]) is None  # one category: undefined
    assert krippendorff_alpha_nominal([[1], [2]]) is None  # nothing pairable


# --- plain binary items: the new figures and score-only detectors ------------------------------------


def test_binary_items_get_balanced_accuracy_and_macro_f1():
    human = [1, 1, 1, 1, 1, 1, 0, 0, 0, 0]
    judge = [0.9, 0.8, 0.7, 0.6, 0.3, 0.2, 0.55, 0.1, 0.4, 0.05]  # a score-only detector
    labels = [Label(trajectory_id=f"t{i}", axis="task_success", label="pass" if h else "fail", labeler="x")
              for i, h in enumerate(human)]
    verdicts = [JudgeVerdictRecord(trajectory_id=f"t{i}", axis="task_success", score=s) for i, s in enumerate(judge)]
    s = agreement(labels, verdicts, n_boot=200, threshold=0.5).section("task_success", "binary")
    pred = [s_ >= 0.5 for s_ in judge]
    assert s.n_from_score == 10
    assert s.balanced_accuracy.value == pytest.approx(balanced_accuracy_score(human, pred))
    assert s.f1_macro.value == pytest.approx(f1_score(human, pred, average="macro"))
    assert s.balanced_accuracy.low <= s.balanced_accuracy.value <= s.balanced_accuracy.high


def test_degenerate_resamples_follow_sklearn_conventions():
    # one human class only: balanced accuracy is that class's recall, as scikit-learn computes it
    labels = [Label(trajectory_id=f"t{i}", axis="task_success", label="pass", labeler="x") for i in range(4)]
    verdicts = [JudgeVerdictRecord(trajectory_id=f"t{i}", axis="task_success", verdict=v)
                for i, v in enumerate(["pass", "pass", "fail", "pass"])]
    s = agreement(labels, verdicts, n_boot=0).section("task_success")
    with pytest.warns(UserWarning):
        want = balanced_accuracy_score([1] * 4, [1, 1, 0, 1])
    assert s.balanced_accuracy.value == pytest.approx(want)
    assert s.f1_macro.value == pytest.approx(f1_score([1] * 4, [1, 1, 0, 1], average="macro"))


# --- formats: no dates, classes ----------------------------------------------------------------------


def test_labels_without_dates_load_and_old_files_stay_valid(tmp_path: Path):
    path = tmp_path / "labels.jsonl"
    path.write_text(
        '{"trajectory_id": "a", "axis": "task_success", "label": "pass", "labeler": "x"}\n'
        '{"trajectory_id": "b", "axis": "task_success", "label": "fail", "labeler": "x", "labeled_at": "2025-03-02T10:00:00Z"}\n'
    )
    a, b = load_labels(path)
    assert a.labeled_at is None and b.labeled_at.year == 2025
    assert "labeled_at" not in a.model_dump_json(exclude_none=True)
    assert "labeled_at" not in schema_for("labels").get("required", [])


@pytest.mark.parametrize("fields", [
    pytest.param({"category": "benign", "label": "pass"}, id="category_and_label"),
    pytest.param({"category": "benign", "score": 0.5}, id="category_and_score"),
    pytest.param({"category": ""}, id="empty_category"),
    pytest.param({"category": "benign", "item_kind": "binary"}, id="kind_disagrees"),
])
def test_invalid_multiclass_labels(fields):
    with pytest.raises(ValueError):
        Label.model_validate({"trajectory_id": "t", "axis": "faithfulness", "labeler": "x", **fields})


@pytest.mark.parametrize(("positive", "message"), [
    pytest.param(None, "say which count as pass with --positive", id="no_mapping"),
    pytest.param(("benig",), "'benig' is not a class of the labels", id="typo"),
    pytest.param(tuple(SEVERITY), "nothing would count as fail", id="everything_positive"),
])
def test_class_mapping_is_stated_and_checked(positive, message):
    with pytest.raises(InputError, match=message):
        agreement_by_judge(load_labels(LABELS), load_verdicts(VERDICTS), positive=positive, n_boot=0)


# --- the command ----------------------------------------------------------------------------------------


def _cli(*args: str):
    return CliRunner().invoke(main, ["agreement", "--labels", str(LABELS), "--verdicts", str(VERDICTS), *args])


def test_command_shows_judges_side_by_side():
    done = _cli("--positive", "consistent", "--positive", "benign", "--pool", "all", "--n-boot", "200")
    assert done.exit_code == 0, done.output
    lines = done.output.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:1] == ["judge"] and "balanced" in line)
    rows = {line.split()[0]: line for line in lines[header + 2: header + 5]}
    assert sorted(rows) == JUDGES
    for judge, line in rows.items():
        want = _expected(judge, "all")
        assert f"{want['balanced_accuracy']:.3f} [" in line and f"{want['f1_macro']:.3f} [" in line, line
    assert "pooled by 'all'" in done.output and "3 judges on the same labels" in done.output
    assert "left out of the maths (counted)" in done.output


def test_command_json_is_one_report_per_judge():
    done = _cli("--positive", "consistent", "--positive", "benign", "--n-boot", "50", "--unscored", "wrong", "--json")
    assert done.exit_code == 0, done.output
    reports = [json.loads(line) for line in done.output.splitlines()]
    assert [r["judge"] for r in reports] == JUDGES and {r["unscored"] for r in reports} == {"wrong"}
    validator = jsonschema.Draft202012Validator(schema_for("agreement-report"))
    for report in reports:
        validator.validate(report)
    one = _cli("--positive", "consistent", "--positive", "benign", "--n-boot", "50", "--judge", "hhem-2.1", "--json")
    assert [json.loads(line)["judge"] for line in one.output.splitlines()] == ["hhem-2.1"]


@pytest.mark.parametrize(("args", "message"), [
    pytest.param([], "--positive CLASS", id="no_mapping"),
    pytest.param(["--positive", "benign", "--judge", "nobody"], "no verdicts from judge 'nobody'", id="unknown_judge"),
])
def test_command_refuses_what_it_cannot_state(args, message):
    done = _cli(*args)
    assert done.exit_code == 2 and message in done.output


def test_pairwise_fraction_counts_scored_verdicts_only(tmp_path: Path):
    # the fix: with one right and one unscored verdict the text said "accuracy 1.000 (1/2)"
    labels, verdicts = tmp_path / "l.jsonl", tmp_path / "v.jsonl"
    labels.write_text("".join(json.dumps({"trajectory_id": f"p{i}", "axis": "task_success", "label": "A",
                                          "labeler": "h"}) + "\n" for i in range(2)))
    verdicts.write_text(json.dumps({"trajectory_id": "p0", "axis": "task_success", "verdict": "A"}) + "\n"
                        + json.dumps({"trajectory_id": "p1", "axis": "task_success", "unscored_reason": "parse_failure"}) + "\n")
    base = ["agreement", "--labels", str(labels), "--verdicts", str(verdicts), "--n-boot", "0"]
    excluded = CliRunner().invoke(main, base)
    assert excluded.exit_code == 0, excluded.output
    assert "accuracy 1.000 (1/1 scored; 1 unscored left out)" in excluded.output and "(1/2)" not in excluded.output
    wrong = CliRunner().invoke(main, [*base, "--unscored", "wrong"])
    assert "accuracy 0.500 (1/2, 1 unscored counted wrong)" in wrong.output


# --- import llmbar without evaluators ----------------------------------------------------------------


def _llmbar_subset(folder: Path, with_results: bool) -> Path:
    items = [{"input": f"q{i}", "output_1": "a", "output_2": "b", "label": 1 + i % 2} for i in range(3)]
    folder.mkdir(parents=True)
    (folder / "dataset.json").write_text(json.dumps(items))
    if with_results:
        result = [{**item, "results": [{"swap = False": {"winner": "1"}, "swap = True": {"winner": None}}]}
                  for item in items]
        (folder / "evaluators" / "M" / "P").mkdir(parents=True)
        (folder / "evaluators" / "M" / "P" / "result.json").write_text(json.dumps(result))
    return folder


def test_import_llmbar_without_evaluators_fails_and_writes_nothing(tmp_path: Path):
    src, out = _llmbar_subset(tmp_path / "Sub", with_results=False), tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "judgekit", "import", "llmbar", str(src), "--out", str(out)],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 2 and done.stdout == ""
    assert "has no evaluators/ folder" in done.stderr and "nothing written" in done.stderr
    assert not out.exists()
    (src / "evaluators").mkdir()
    with pytest.raises(InputError, match="without any <model>/<prompt>/result.json"):
        import_llmbar(src, out)
    assert not out.exists()


def test_import_llmbar_writes_no_invented_dates(tmp_path: Path):
    written = import_llmbar(_llmbar_subset(tmp_path / "Sub", with_results=True), tmp_path / "out")
    assert [p.name for p in written] == ["labels.jsonl", "verdicts-M-P.jsonl"]
    assert all(lab.labeled_at is None for lab in load_labels(written[0]))
    verdicts = load_verdicts(written[1])
    assert [v.unscored_reason for v in verdicts if v.effective_order == "swapped"] == ["parse_failure"] * 3
