"""Hostile cases for approval by confidence bounds and for label sets brought from elsewhere.

Approval records are built the way calibration builds them (``calibrate`` on real labels and
verdicts, ``write_approval``), then edited on disk as a careless or hostile hand could: the gate
must not trust what it can re-measure (the stored pairs, the record's own bounds and
thresholds), and must neither silently trust nor crash on a format 1 record. Plans are checked
against the approval path itself. Agreement figures are checked against scikit-learn.
"""

from __future__ import annotations

import json
import math
import warnings
from datetime import UTC, datetime
from pathlib import Path

import jsonschema
import numpy as np
import pytest
import yaml
from click.testing import CliRunner
from sklearn.metrics import balanced_accuracy_score, cohen_kappa_score, f1_score

from judgekit.calibration import JudgeVerdictRecord, Label
from judgekit.calibration.agreement import agreement, agreement_by_judge
from _approvals import approve, question_key
from judgekit.calibration.approval_record import JudgeIdentity, Thresholds, read_approval
from judgekit.calibration.evidence import derive_approval
from judgekit.calibration.bounds import axis_bounds
from judgekit.calibration.calibrate import calibrate
from judgekit.calibration.planning import plan_binary
from judgekit.cli import main
from judgekit.gate import gate_results
from judgekit.suite import GatePolicy

ALARM_S = 60  # plans and simulations take seconds, not minutes

NOW = datetime(2026, 12, 1, tzinfo=UTC)
PIN = "openai/judge-2024-08-06"
RUBRIC_REF = "ship@1.0.0"


# --- helpers --------------------------------------------------------------------------------------


def identity() -> JudgeIdentity:
    return JudgeIdentity(model_pin=PIN, parameters={"temperature": 0.0}, rubric=RUBRIC_REF,
                         rubric_sha256="0" * 64, template_sha256="1" * 64)


def binary_set(n: int, wrong: set[int] = frozenset()) -> tuple[list[Label], list[JudgeVerdictRecord]]:
    """n task-success items, half pass; the judge is right except on the items in ``wrong``."""
    labels, verdicts = [], []
    for i in range(n):
        human = "pass" if i % 2 else "fail"
        judge = ("fail" if human == "pass" else "pass") if i in wrong else human
        labels.append(Label(trajectory_id=f"t{i:03d}", axis="task_success", label=human, labeler="alice",
                            labeled_at=NOW))
        verdicts.append(JudgeVerdictRecord(trajectory_id=f"t{i:03d}", axis="task_success", verdict=judge, judge=PIN,
                                           cache_key=question_key(f"t{i:03d}", "task_success")))
    return labels, verdicts


def approval_file(tmp_path: Path, n: int = 60, wrong: set[int] = frozenset()) -> Path:
    """A genuine approval record with its evidence, written where the gate looks for it."""
    labels, verdicts = binary_set(n, wrong)
    return approve(tmp_path, identity(), labels, verdicts)


def edit(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data, indent=2))


def gated_axis(tmp_path: Path):
    """The gate over one judged task-success verdict of this judge (in judge mode)."""
    from judgekit.results import CheckOutcome, TaskSuccessResult, TrajectoryResult
    from judgekit.verdict import Provenance

    judge = Provenance(model_pin=PIN, parameters={"temperature": 0.0}, rubric=RUBRIC_REF, rubric_sha256="0" * 64,
                       template_sha256="1" * 64, judgekit_version="0", litellm_version="0", created_at=NOW,
                       cache_key="2" * 64)
    checks = [CheckOutcome(check="judge", passed=True, reason="judged", source="judge")]
    result = TrajectoryResult(trajectory_id="t", rubric=RUBRIC_REF, rubric_sha256="0" * 64, source="t.jsonl:t",
                              axes={"task_success": TaskSuccessResult(source="judge", passed=True, score=1.0,
                                                                     checks=checks, judge=judge)})
    [axis] = gate_results([result], GatePolicy(min={"task_success": 0.5}), tmp_path).axes
    return axis


def gates(tmp_path: Path) -> bool:
    """Whether the judge's verdict gated (not advisory). In task-success judge mode an advisory
    judge still leaves the deterministic checks gating, so gating_n alone does not tell."""
    axis = gated_axis(tmp_path)
    return not axis.advisory


def format_1(pairs: list[tuple[bool, bool]], kind: str = "binary", **axis_extra) -> dict:
    """An approval record as format 1 wrote it (approved on the point estimate of kappa)."""
    judge = identity()
    metric = {"value": 0.9, "low": 0.7, "high": 1.0, "n_degenerate": 0}
    axis = {"axis": "task_success", "kind": kind, "n": len(pairs), "kappa": metric, "accuracy": metric,
            "pairs": [list(p) for p in pairs], "decision": "approved", "reasons": ["kappa 0.900 >= 0.6"],
            **axis_extra}
    return {"format_version": 1, "fingerprint": judge.fingerprint, "judge": judge.model_dump(mode="json"),
            "label_set_sha256": "3" * 64, "labels_file": "labels.jsonl",
            "thresholds": {"min_kappa": 0.6, "min_items": 20}, "axes": {"task_success": axis},
            "drift": [], "decided_at": "2026-11-30T00:00:00Z", "judgekit_version": "0.1.0"}


def write_format_1(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "ship" / "approvals" / f"{data['fingerprint']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2))
    return path


def write_rows(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def invoke(args: list[str], **kw):
    return CliRunner().invoke(main, args, **kw)


def make_suite(root: Path, approval: dict | None = None, n: int = 4) -> Path:
    """A small deterministic suite (no judge) with an ``approval:`` block."""
    rubric = {
        "id": "plan-change", "version": "1.0.0", "registered": "2026-11-30",
        "task_success": {
            "guide": "Pass only when user 1 is on the pro plan after the run.",
            "postconditions": [{"check": "equals", "collection": "/users", "where": {"id": 1}, "field": "plan",
                                "value": "pro"}],
        },
    }
    trajectory = {"prompt": "Move user 1 to the pro plan.",
                  "calls": [{"tool": "update_user", "args": {"user_id": 1, "plan": "pro"},
                             "result": {"id": 1, "plan": "pro"}}],
                  "output": "User 1 is now on the pro plan.",
                  "world": {"before": {"json": {"users": [{"id": 1, "plan": "free"}]}},
                            "after": {"json": {"users": [{"id": 1, "plan": "pro"}]}}}}
    root.mkdir(parents=True, exist_ok=True)
    (root / "rubric.yaml").write_text(yaml.safe_dump(rubric, sort_keys=False))
    (root / "trajectories.jsonl").write_text("".join(json.dumps({"id": f"t{i}", **trajectory}) + "\n" for i in range(n)))
    suite = {"name": "plans", "rubrics": ["rubric.yaml"],
             "trajectories": [{"file": "trajectories.jsonl", "rubric": "plan-change"}]}
    if approval is not None:
        suite["approval"] = approval
    (root / "suite.yaml").write_text(yaml.safe_dump(suite, sort_keys=False))
    return root / "suite.yaml"


# --- the gate does not trust what it can re-measure ----------------------------------------------


def test_a_genuine_approval_gates_and_its_statement_is_shown(tmp_path):
    """Baseline for the tampering cases below: an untouched record of an agreeing judge gates."""
    approval_file(tmp_path)
    axis = gated_axis(tmp_path)
    assert axis.gating_n == 1 and not axis.advisory
    [statement] = axis.approvals
    assert statement.startswith("task_success judge approved: kappa >= ") and "60 item(s) (30 pass, 30 fail)" in statement


@pytest.mark.parametrize("tamper", [
    pytest.param({"kappa_lower": 0.2}, id="kappa_bound_below_threshold"),
    pytest.param({"tnr_lower": None}, id="tnr_bound_unknown"),
    pytest.param({"n": 5}, id="below_min_items"),
    pytest.param({"confidence": 0.5}, id="bounds_at_50_percent"),
])
def test_an_approved_decision_whose_own_bounds_fall_short_does_not_gate(tmp_path, tamper):
    """A format 2 record says "approved" but its own bounds (or item count, or confidence level)
    do not clear its own thresholds: the gate must not take the word "approved" on trust."""
    path = approval_file(tmp_path)
    edit(path, lambda d: d["axes"]["task_success"].update(tamper))
    assert not gates(tmp_path)


def test_an_approval_whose_stored_items_contradict_its_bounds_does_not_gate(tmp_path):
    """The record lists its items (human, judge per trajectory); here the judge is wrong on every
    one of them while the stored bounds still claim 0.9. The gate rebuilds the items from the
    labels and verdicts files and must refuse the record."""
    path = approval_file(tmp_path)
    edit(path, lambda d: d["axes"]["task_success"].update(
        items=[{**item, "judge": 1.0 - item["judge"]} for item in d["axes"]["task_success"]["items"]]))
    assert not gates(tmp_path)


def test_the_gate_does_not_print_a_statement_that_claims_more_than_the_pairs(tmp_path):
    """The statement the gate prints ("certified: ...") must say what the record's evidence
    supports: not 1000 items when 60 pairs were stored."""
    path = approval_file(tmp_path)
    claim = ("task_success judge approved: kappa >= 0.99, TPR >= 0.99, TNR >= 0.99 (95% one-sided bounds) on "
             "1000 item(s) (500 pass, 500 fail) labelled 2026-12-01 by 5 labellers")
    edit(path, lambda d: d["axes"]["task_success"].update(statement=claim))
    axis = gated_axis(tmp_path)
    assert all("1000 item" not in text for text in axis.approvals), axis.approvals


# --- format 1 records --------------------------------------------------------------------------


STRONG = [(True, True)] * 60 + [(False, False)] * 60 + [(True, False), (False, True)]
WEAK = [(True, True)] * 12 + [(False, False)] * 10 + [(True, False)] * 2


def test_a_genuine_format_1_record_is_read_but_never_gates(tmp_path):
    """Format 1 as it was written (no bound fields, no item ids, no verdicts): strong or weak, it
    cannot be re-derived, so it is advisory with that reason (changed on purpose for issue 26: a
    strong one used to keep gating on pairs a hand could have written)."""
    for name, pairs in (("strong", STRONG), ("weak", WEAK)):
        write_format_1(tmp_path / name, format_1(pairs))
        axis = gated_axis(tmp_path / name)
        [advisory] = axis.advisory
        assert axis.approvals == [] and "approval format 1 names no labelled items" in advisory.reason


@pytest.mark.parametrize(("kind", "pairs", "injected"), [
    pytest.param("binary", [], {"n": 100, "kappa_lower": 0.95, "tpr_lower": 0.95, "tnr_lower": 0.95}, id="binary_no_pairs"),
    pytest.param("binary", WEAK, {"n": 25, "kappa_lower": 0.95, "tpr_lower": 0.95, "tnr_lower": 0.95},
                 id="binary_pairs_not_matching_n"),
    pytest.param("graded", STRONG, {"spearman_lower": 0.95, "mae_upper": 0.01}, id="graded_scores_never_kept"),
])
def test_a_format_1_record_carrying_bounds_format_1_never_had_does_not_gate(tmp_path, kind, pairs, injected):
    """Format 1 had no bound fields at all (it decided on the point estimate of kappa). A
    "format 1" record that carries them was edited; the migration must not adopt them as if
    they had been measured."""
    write_format_1(tmp_path, format_1(pairs, kind, **injected))
    read_approval(next((tmp_path / "ship" / "approvals").glob("*.json")))  # read, figures and all
    assert not derive_approval(tmp_path, identity(), Thresholds()).gates("task_success")[0]
    if kind == "binary":
        assert not gates(tmp_path)


# --- bounds: undefined figures, edges, monotone, deterministic --------------------------------------


@pytest.mark.parametrize(("kind", "human", "judge", "why"), [
    pytest.param("binary", [1.0] * 30, [1.0] * 30, "no human fail label", id="binary_no_human_fail"),
    pytest.param("binary", [0.0] * 30, [0.0] * 25 + [1.0] * 5, "no human pass label", id="binary_no_human_pass"),
    pytest.param("graded", list(np.linspace(0, 1, 30)), [0.8] * 30, "Spearman is unknown", id="graded_constant_judge"),
    pytest.param("graded", list(np.linspace(0.6, 1, 30)), list(np.linspace(0.6, 1, 30)), "kappa is unknown",
                 id="graded_one_class_after_binarising"),
])
def test_min_items_met_but_a_figure_undefined_is_refused(kind, human, judge, why):
    """30 items clear min_items, but a bound is undefined (a class empty, constant scores):
    refused, saying which, whatever the other bounds say (min_kappa -1 included)."""
    from judgekit.calibration._bootstrap import Metric
    from judgekit.calibration.approval import decide
    from judgekit.calibration.approval_record import AxisApproval

    b = axis_bounds(kind, human, judge, name="task_success")
    f = {k: v.bound for k, v in b.bounds.items()}
    axis = AxisApproval(axis="task_success", kind=kind, n=b.n, kappa=Metric(value=None), accuracy=Metric(value=None),
                        n_pass=b.n_pass, n_fail=b.n_fail, confidence=b.confidence, kappa_lower=f.get("kappa"),
                        tpr_lower=f.get("tpr"), tnr_lower=f.get("tnr"), spearman_lower=f.get("spearman"),
                        mae_upper=f.get("mae"), decision="refused", reasons=[])
    lenient = Thresholds(min_kappa=-1, min_tpr=0, min_tnr=0, min_spearman=-1, max_mae=1)
    decision, reasons = decide(axis, lenient)
    assert decision == "refused" and why in "; ".join(reasons)


def test_the_kappa_bound_never_drops_when_a_disagreement_becomes_an_agreement():
    """More agreement never gives a lower kappa bound (binary, 30 items, up to 3 + 3 errors)."""
    def low(tp, fp, fn, tn):
        human = [1.0] * tp + [0.0] * fp + [1.0] * fn + [0.0] * tn
        judge = [1.0] * tp + [1.0] * fp + [0.0] * fn + [0.0] * tn
        return axis_bounds("binary", human, judge, name="task_success", n_draws=1000).bounds["kappa"].bound

    n = 30
    for tp in range(10, 20, 3):
        for fp in range(1, 4):
            for fn in range(4):
                tn = n - tp - fp - fn
                assert low(tp, fp - 1, fn, tn + 1) >= low(tp, fp, fn, tn)


def test_same_labels_same_bounds_whatever_the_order_of_the_items():
    rng = np.random.default_rng(3)
    human = rng.integers(0, 5, 40) / 4
    judge = np.clip(human + rng.choice([-0.25, 0, 0.25], 40), 0, 1)
    first = axis_bounds("graded", human, judge, name="faithfulness", seed=7)
    order = rng.permutation(40)
    again = axis_bounds("graded", human[order], judge[order], name="faithfulness", seed=7)
    assert first == again


def test_a_binary_axis_is_not_binarised_at_the_graded_threshold(tmp_path):
    """`calibrate --threshold` binarises graded scores; a binary label is pass or fail whatever
    it is. At --threshold 0 every fail label was read as pass: the record said "60 pass, 0
    fail", refused a perfect judge for "no human fail label", and stored all-pass pairs."""
    labels, verdicts = binary_set(60)
    record = calibrate(labels, verdicts, identity(), Thresholds(), threshold=0.0, n_boot=200)
    axis = record.axes["task_success"]
    assert (axis.n_pass, axis.n_fail) == (30, 30)
    assert sorted(set(axis.pairs)) == [(False, False), (True, True)]
    assert axis.decision == "approved"


@pytest.mark.parametrize(("confidence", "shown"), [(0.999, "99.9%"), (0.975, "97.5%")])
def test_a_statement_names_the_confidence_level_its_bounds_have(confidence, shown):
    """A suite may ask for 99.9% bounds (confidence < 1 is allowed). The statement rounded the
    level to a whole percent: "(100% one-sided bounds)", a certainty no bound has; 0.975 read 98%."""
    labels, verdicts = binary_set(200)
    record = calibrate(labels, verdicts, identity(), Thresholds(confidence=confidence), n_boot=500)
    statement = record.axes["task_success"].statement
    assert f"({shown} one-sided bounds)" in statement, statement


# --- planning ------------------------------------------------------------------------------------


@pytest.mark.parametrize("approval", [{"min_tpr": 1.0}, {"min_tnr": 1.0}])
def test_plan_with_a_rate_threshold_of_1_is_answered_not_an_internal_error(tmp_path, approval):
    """A suite may set min_tpr/min_tnr to 1.0 (allowed: le=1). No exact lower bound ever reaches
    1, so no sample clears: --plan must say so (exit 0 or 2), and `label` without --sample must
    refuse (exit 2), never exit 3 (ZeroDivisionError in planning._min_class)."""
    suite = make_suite(tmp_path / "s", approval)
    planned = invoke(["calibrate", str(suite), "--plan"])
    assert planned.exit_code in (0, 2) and "internal error" not in planned.output, planned.output
    labelled = invoke(["label", str(suite.parent), "--seed", "1", "--labeler", "a", "--axis", "task_success",
                       "--labels", str(tmp_path / "l.jsonl")], input="q\n")
    assert labelled.exit_code in (0, 2) and "internal error" not in labelled.output, labelled.output


def test_label_default_sample_follows_the_suites_stricter_thresholds(tmp_path):
    """Without --sample, `label` plans for the suite's own thresholds, not the defaults."""
    stricter = {"min_items": 100, "min_kappa": 0.7}
    suite = make_suite(tmp_path / "s", stricter)
    expected = plan_binary(Thresholds(**stricter))
    assert expected.n > plan_binary(Thresholds()).n and expected.n >= 100
    result = invoke(["label", str(suite.parent), "--seed", "1", "--labeler", "a", "--axis", "task_success",
                     "--labels", str(tmp_path / "l.jsonl")], input="q\n")
    assert result.exit_code == 0, result.output
    assert f"--sample not given: {expected.n} trajectories" in result.output


def simulate(plan, thresholds: Thresholds, tpr: float, tnr: float, n_sim: int, seed: int) -> float:
    """Share of label sets with the plan's class counts that the approval path approves."""
    rng = np.random.default_rng(seed)
    human = np.r_[np.ones(plan.n_pass), np.zeros(plan.n_fail)]
    clears = 0
    for i in range(n_sim):
        right = np.r_[rng.random(plan.n_pass) < tpr, rng.random(plan.n_fail) < tnr]
        judge = np.where(right, human, 1 - human)
        b = axis_bounds("binary", human, judge, name="task_success", seed=i, confidence=thresholds.confidence)
        k, a, c = (b.bounds[x].bound for x in ("kappa", "tpr", "tnr"))
        clears += (b.n >= thresholds.min_items and None not in (k, a, c) and k >= thresholds.min_kappa
                   and a >= thresholds.min_tpr and c >= thresholds.min_tnr)
    return clears / n_sim


def test_a_plan_under_stricter_thresholds_delivers_its_promise_by_simulation():
    """Own check, other settings than the project's tests: stricter thresholds, 99% bounds."""
    thresholds = Thresholds(min_kappa=0.7, min_tpr=0.85, min_tnr=0.85, min_items=40, confidence=0.99)
    plan = plan_binary(thresholds, tpr=0.98, tnr=0.97, prevalence=0.4, power=0.8)
    assert plan.reachable and plan.n >= 40 and plan.n_pass and plan.n_fail
    share = simulate(plan, thresholds, 0.98, 0.97, n_sim=400, seed=5)
    assert share >= plan.target - 3 * math.sqrt(plan.target * (1 - plan.target) / 400)


# --- label sets from elsewhere: references ----------------------------------------------------------


def test_a_graded_reference_does_not_depend_on_the_order_of_its_labels_lines():
    """Three labellers score 0.1, 0.2 and 0.3: the mean is 0.2, a pass at --threshold 0.2,
    whatever order the lines come in (floating-point summation order made it 0.19999...)."""
    def confusion(scores):
        labels = [Label(trajectory_id="t0", axis="faithfulness", score=s, labeler=w) for w, s in scores]
        labels.append(Label(trajectory_id="t1", axis="faithfulness", score=0.0, labeler="a"))
        verdicts = [JudgeVerdictRecord(trajectory_id="t0", axis="faithfulness", score=0.25, judge="j"),
                    JudgeVerdictRecord(trajectory_id="t1", axis="faithfulness", score=0.0, judge="j")]
        return agreement(labels, verdicts, threshold=0.2, n_boot=0).axes[0].binarised.confusion

    forward = confusion([("a", 0.1), ("b", 0.2), ("c", 0.3)])
    backward = confusion([("c", 0.3), ("b", 0.2), ("a", 0.1)])
    assert forward == backward
    assert (forward.tp, forward.tn) == (1, 1)


# --- label sets from elsewhere: the figures against scikit-learn -------------------------------------


def lab(i, value, who="a", axis="task_success"):
    key = "category" if value not in ("pass", "fail", "A", "B") else "label"
    return {"trajectory_id": f"t{i}", "axis": axis, key: value, "labeler": who}


def ver(i, value, judge="j", axis="task_success"):
    row = {"trajectory_id": f"t{i}", "axis": axis, "judge": judge}
    if value is None:
        row["unscored_reason"] = "timeout"
    elif isinstance(value, float):
        row["score"] = value
    else:
        row["verdict"] = value
    return row


def agree_json(tmp_path, labels, verdicts, *extra):
    result = invoke(["agreement", "--labels", str(write_rows(tmp_path / "l.jsonl", labels)), "--verdicts",
                     str(write_rows(tmp_path / "v.jsonl", verdicts)), "--n-boot", "50", "--json", *extra])
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.output.splitlines()]


@pytest.mark.parametrize(("human", "calls", "extra"), [
    pytest.param(["pass"] * 6, ["pass", "pass", "fail", "pass", "fail", "pass"], [], id="one_human_class"),
    pytest.param(["fail"] * 5, ["pass"] * 5, [], id="every_call_wrong_one_class"),
    pytest.param(["pass", "fail", "pass", "fail"], [0.7, 0.69999, 0.7, 0.1], ["--threshold", "0.7"],
                 id="score_only_exactly_at_threshold"),
    pytest.param(["pass", "fail", "pass", "fail", "pass"], ["pass", None, None, "fail", "fail"], ["--unscored", "wrong"],
                 id="unscored_counted_wrong"),
])
def test_agreement_figures_match_scikit_learn_on_edge_inputs(tmp_path, human, calls, extra):
    [report] = agree_json(tmp_path, [lab(i, h) for i, h in enumerate(human)], [ver(i, c) for i, c in enumerate(calls)],
                          *extra)
    section = report["axes"][0]
    threshold = float(extra[1]) if extra[:1] == ["--threshold"] else 0.5
    pred = []
    for h, c in zip(human, calls):
        if c is None:
            c = "fail" if h == "pass" else "pass"
        elif isinstance(c, float):
            c = "pass" if c >= threshold else "fail"
        pred.append(c)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = {"balanced_accuracy": balanced_accuracy_score(human, pred),
                    "f1_macro": f1_score(human, pred, average="macro"), "kappa": cohen_kappa_score(human, pred)}
    for name, value in expected.items():
        got = section[name]["value"]
        assert (got is None and math.isnan(value)) or got == pytest.approx(value), name


def test_majority_ties_are_left_out_and_listed(tmp_path):
    labels = [lab(0, "pass", "a"), lab(0, "fail", "b"), lab(1, "pass", "a"), lab(1, "pass", "b"),
              lab(2, "fail", "a"), lab(2, "fail", "b")]
    [report] = agree_json(tmp_path, labels, [ver(0, "pass"), ver(1, "pass"), ver(2, "fail")])
    section = report["axes"][0]
    assert section["tied_ids"] == ["t0"] and section["n"] == 2 and section["confusion"] == {"tp": 1, "fp": 0, "fn": 0, "tn": 1}


def test_a_class_named_pass_or_fail_is_mapped_as_stated_not_by_its_name(tmp_path):
    labels = [{"trajectory_id": f"t{i}", "axis": "faithfulness", "category": c, "labeler": "a"}
              for i, c in enumerate(["fail", "fail", "pass"])]
    verdicts = [ver(0, "pass", axis="faithfulness"), ver(1, "pass", axis="faithfulness"), ver(2, "fail", axis="faithfulness")]
    [report] = agree_json(tmp_path, labels, verdicts, "--positive", "fail")
    section = report["axes"][0]
    assert section["kind"] == "multiclass" and section["positive_classes"] == ["fail"]
    assert section["confusion"] == {"tp": 2, "fp": 0, "fn": 0, "tn": 1}


def test_labellers_with_one_label_each_give_no_alpha_and_no_error(tmp_path):
    labels = [lab(0, "pass", "a"), lab(1, "fail", "b"), lab(2, "pass", "c")]
    [report] = agree_json(tmp_path, labels, [ver(0, "pass"), ver(1, "fail"), ver(2, "pass")])
    ia = report["axes"][0]["inter_annotator"]
    assert ia["alpha"] is None and ia["n_items_alpha"] == 0 and ia["kappa"] is None


@pytest.mark.parametrize("rows", [
    pytest.param([{"trajectory_id": "t0", "axis": "faithfulness", "category": "benign", "labeler": "a"},
                  {"trajectory_id": "t0", "axis": "faithfulness", "label": "pass", "labeler": "b"}], id="two_lines"),
    pytest.param([{"trajectory_id": "t0", "axis": "faithfulness", "category": "benign", "label": "pass",
                   "labeler": "a"}], id="one_line"),
])
def test_an_item_labelled_both_by_category_and_by_label_is_an_input_error(tmp_path, rows):
    result = invoke(["agreement", "--labels", str(write_rows(tmp_path / "l.jsonl", rows)), "--verdicts",
                     str(write_rows(tmp_path / "v.jsonl", [ver(0, "pass", axis="faithfulness")])),
                     "--positive", "benign"])
    assert result.exit_code == 2, result.output


def test_several_judges_one_missing_items_with_hostile_names_stay_on_schema_and_off_the_terminal(tmp_path):
    """Two judges, one without verdicts on half the items, one named with an escape sequence and
    a newline; class names hostile too. --json lines validate; the text table escapes them."""
    hostile = "evil\x1b[2J\nname"
    labels, verdicts = [], []
    for i in range(8):
        labels.append({"trajectory_id": f"t{i}", "axis": "faithfulness", "category": ["ok", "bad\x07"][i % 2],
                       "labeler": "a"})
        verdicts.append(ver(i, "pass" if i % 2 == 0 else "fail", judge="steady", axis="faithfulness"))
        if i < 4:
            verdicts.append(ver(i, None if i == 0 else 0.9, judge=hostile, axis="faithfulness"))
    schema = json.loads(invoke(["schema", "agreement-report"]).output)
    reports = agree_json(tmp_path, labels, verdicts, "--positive", "ok")
    for report in reports:
        jsonschema.validate(report, schema)
    by_judge = {r["judge"]: r["axes"][0] for r in reports}
    assert by_judge[hostile]["n_missing"] == 4 and by_judge[hostile]["n_unscored"] == 1
    text = invoke(["agreement", "--labels", str(tmp_path / "l.jsonl"), "--verdicts", str(tmp_path / "v.jsonl"),
                   "--n-boot", "20", "--positive", "ok"])
    assert text.exit_code == 0, text.output
    assert "\x1b" not in text.output and "\x07" not in text.output and "evil\\x1b[2J\\nname" in text.output


def test_every_judge_is_reported_against_the_same_references():
    """agreement_by_judge: a judge without a verdict on an item has it missing, not dropped from
    the references; the other judge's figures are unchanged by it."""
    labels = [Label(**lab(i, "pass" if i % 2 else "fail")) for i in range(6)]
    verdicts = [JudgeVerdictRecord(**ver(i, "pass" if i % 2 else "fail", judge="full")) for i in range(6)]
    verdicts += [JudgeVerdictRecord(**ver(i, "pass", judge="half")) for i in range(3)]
    full, half = agreement_by_judge(labels, verdicts, n_boot=0)
    alone = agreement(labels, [v for v in verdicts if v.judge == "full"], n_boot=0)
    assert full.axes[0].confusion == alone.axes[0].confusion and full.axes[0].n == 6
    assert half.axes[0].n == 3 and half.axes[0].missing_ids == ["t3", "t4", "t5"]


def test_import_llmbar_without_evaluators_refuses_and_writes_nothing(tmp_path):
    subset = tmp_path / "Natural"
    subset.mkdir()
    (subset / "dataset.json").write_text(json.dumps([{"input": "q", "output_1": "a", "output_2": "b", "label": 1}]))
    result = invoke(["import", "llmbar", str(subset), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert not (tmp_path / "out").exists()
