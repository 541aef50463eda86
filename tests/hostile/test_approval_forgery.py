"""Forged approvals (issue 26, section 2): an approval is re-derived from its labels and verdicts
files, never read, so no edit of the record alone makes a refused judge gate.

Two judges are calibrated for real (``calibrate`` and ``write_calibration``, as `judgekit
calibrate` does) on 60 labelled task-success items: judge A is wrong on a third of them and is
refused, judge B agrees and is approved. A hostile hand then edits A's record, copies B's, moves
files, lowers thresholds, and a hypothesis search combines such edits: none may make A gate.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tracemalloc
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _approvals import approve, binary_evidence, edit_json, write_labels
from judgekit.calibration import JudgeVerdictRecord
from judgekit.calibration.approval_record import JudgeIdentity, Thresholds, approval_path
from judgekit.calibration.bounds import axis_bounds
from judgekit.calibration.evidence import derive_approval, verdicts_path
from judgekit.cli import main
from judgekit.errors import InputError
from judgekit.gate import gate_results
from judgekit.results import CheckOutcome, TaskSuccessResult, TrajectoryResult
from judgekit.suite import GatePolicy
from judgekit.verdict import Provenance

ALARM_S = 120
NOW = datetime(2026, 12, 1, tzinfo=timezone.utc)
RUBRIC = "ship@1.0.0"


def identity(endpoint: str = "http://judge-a.test/v1", **changes) -> JudgeIdentity:
    fields = {"model_pin": "openai/judge-2024-08-06", "endpoint": endpoint, "parameters": {"temperature": 0.0},
              "rubric": RUBRIC, "rubric_sha256": "0" * 64, "template_sha256": "1" * 64, **changes}
    return JudgeIdentity(**fields)


A = identity()
B = identity(endpoint="http://judge-b.test/v1")
HALF = [(i % 2 == 1, i % 2 == 1) for i in range(60)]  # 30 pass, 30 fail, the judge agreeing
WRONG_A = {i for i in range(60) if i % 3 == 0}  # judge A is wrong on 20 of 60


def pairs_of(wrong: set[int]) -> list[tuple[bool, bool]]:
    return [(human, (not said) if i in wrong else said) for i, (human, said) in enumerate(HALF)]


@pytest.fixture
def calibration(tmp_path) -> Path:
    """A calibration folder with A refused and B approved, on the same labels."""
    labels, verdicts_a = binary_evidence(pairs_of(WRONG_A), judge=A.model_pin)
    approve(tmp_path, A, labels, verdicts_a)
    _, verdicts_b = binary_evidence(HALF, judge=B.model_pin)
    approve(tmp_path, B, labels, verdicts_b)
    return tmp_path


def gates(calibration_dir: Path, judge: JudgeIdentity = A, thresholds: Thresholds | None = None,
          axis: str = "task_success") -> tuple[bool, str | None]:
    derived = derive_approval(calibration_dir, judge, thresholds or Thresholds())
    return (False, "no record") if derived is None else derived.gates(axis)


def provenance(judge: JudgeIdentity) -> Provenance:
    return Provenance(model_pin=judge.model_pin, endpoint=judge.endpoint, parameters=judge.parameters,
                      rubric=judge.rubric, rubric_sha256=judge.rubric_sha256, template_sha256=judge.template_sha256,
                      judgekit_version="0", litellm_version="0", created_at=NOW, cache_key="2" * 64)


def gate_of(calibration_dir: Path, judge: JudgeIdentity = A, thresholds: Thresholds | None = None):
    """The gate over one failing judged task-success verdict of ``judge`` (in judge mode)."""
    checks = [CheckOutcome(check="judge", passed=False, reason="judged", source="judge")]
    result = TrajectoryResult(trajectory_id="t", rubric=RUBRIC, rubric_sha256="0" * 64, source="t.jsonl:t",
                              axes={"task_success": TaskSuccessResult(source="judge", passed=False, score=0.0,
                                                                     checks=checks, judge=provenance(judge))})
    [axis] = gate_results([result], GatePolicy(min={"task_success": 0.5}), calibration_dir,
                          thresholds=thresholds).axes
    return axis


def record_of(calibration_dir: Path, judge: JudgeIdentity = A) -> Path:
    return approval_path(calibration_dir, "ship", judge.fingerprint)


def rehash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --- the starting point ---------------------------------------------------------------------------


def test_the_genuine_records_decide_as_calibrated(calibration):
    assert gates(calibration, B) == (True, None)
    allowed, why = gates(calibration, A)
    assert not allowed and "does not clear the rule" in why
    axis = gate_of(calibration, B)
    [statement] = axis.approvals
    assert "60 item(s) (30 pass, 30 fail)" in statement and "evidence: labels ship/labels.jsonl (sha256 " in statement
    assert f"verdicts ship/approvals/{B.fingerprint}.verdicts.jsonl (sha256 " in statement


# --- edits of one record ------------------------------------------------------------------------


def fabricate_items(data: dict) -> None:
    """The issue's forgery: 45 agreeing passes and 15 agreeing fails, decision approved."""
    axis = data["axes"]["task_success"]
    axis["items"] = ([{"trajectory_id": f"f{i:03d}", "human": 1.0, "judge": 1.0, "repeats": 1} for i in range(45)]
                     + [{"trajectory_id": f"g{i:03d}", "human": 0.0, "judge": 0.0, "repeats": 1} for i in range(15)])
    axis.update(decision="approved", n=60, n_pass=45, n_fail=15, kappa_lower=0.9, tpr_lower=0.9, tnr_lower=0.9)


RECORD_EDITS = [
    pytest.param(fabricate_items, "its items differ from what its labels and verdicts give", id="fabricated_items"),
    pytest.param(lambda d: d["axes"]["task_success"].update(decision="approved"), "its figures are not",
                 id="decision_flipped"),
    pytest.param(lambda d: d.update(label_set_sha256="0" * 64, labels_file="/nonexistent"),
                 "is not a file inside the calibration folder", id="labels_nonexistent_hash_zero"),
    pytest.param(lambda d: d.update(label_set_sha256="0" * 64), "changed since calibration", id="labels_hash_zero"),
    pytest.param(lambda d: d.update(labels_file="../../etc/labels.jsonl"), "is not a file inside",
                 id="labels_outside"),
    pytest.param(lambda d: d.update(verdicts_file=None), "is not a file inside", id="no_verdicts_file"),
    pytest.param(lambda d: (d["thresholds"].update(min_kappa=0.2, min_tpr=0.2, min_tnr=0.2, confidence=0.5),
                            d["axes"]["task_success"].update(decision="approved")),
                 "its figures are not", id="own_thresholds_lowered"),
    pytest.param(lambda d: d["axes"]["task_success"].update(kind="graded"), "calls the binary axis",
                 id="kind_changed"),
    pytest.param(lambda d: d.update(decided_at="2999-01-01T00:00:00Z"), "in the future", id="decided_in_2999"),
    pytest.param(lambda d: d.update(fingerprint=B.fingerprint), "another judge's", id="fingerprint_of_another"),
    pytest.param(lambda d: d["judge"].update(endpoint=B.endpoint), "another judge's (it differs in endpoint)",
                 id="judge_names_another_endpoint"),
]


@pytest.mark.parametrize(("change", "why"), RECORD_EDITS)
def test_no_edit_of_a_refused_record_makes_it_gate(calibration, change, why):
    edit_json(record_of(calibration), change)
    allowed, reason = gates(calibration)
    assert not allowed and why in reason, reason
    axis = gate_of(calibration)
    assert axis.approvals == [] and why in axis.advisory[0].reason


@pytest.mark.parametrize("change", [
    pytest.param(lambda d: d.update(format_version=3.0), id="format_version_3_0"),
    pytest.param(lambda d: d.update(decided_at=1764000000), id="decided_at_as_seconds"),
    pytest.param(lambda d: d.update(decided_at="1764000000"), id="decided_at_as_digits"),
    pytest.param(lambda d: d["axes"]["task_success"].update(n=60.0), id="a_count_as_a_float"),
    pytest.param(lambda d: d["axes"]["task_success"]["items"][0].update(judge="1.0"), id="a_verdict_as_text"),
])
def test_a_record_of_the_wrong_types_is_not_an_approval_record(calibration, change):
    # Changed on purpose: refused as advisory with the reason (issue 26), no longer an InputError
    # that stopped the whole gate; B's genuine record no longer gates once edited.
    edit_json(record_of(calibration, B), change)
    allowed, why = gates(calibration, B)
    assert not allowed and "not an approval record" in why and f"ship/approvals/{B.fingerprint}.json" in why
    axis = gate_of(calibration, B)
    assert axis.approvals == [] and "not an approval record" in axis.advisory[0].reason


def test_labels_dated_by_a_number_of_seconds_are_refused(calibration):
    labels_path = calibration / "ship" / "labels.jsonl"
    lines = [json.loads(line) for line in labels_path.read_text().splitlines()]
    lines[0]["labeled_at"] = 1764000000
    labels_path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    edit_json(record_of(calibration, B), lambda d: d.update(label_set_sha256=rehash(labels_path)))
    allowed, why = gates(calibration, B)
    assert not allowed and "a time is ISO 8601 text" in why


@pytest.mark.parametrize("extra", [{"bounds_seed": 19}, {"bounds_draws": 100}])
def test_a_record_choosing_its_own_draws_is_not_an_approval_record(calibration, extra):
    """Seeds and draws are the code's: a record that names its own is refused as malformed (advisory
    with the reason; changed on purpose from an InputError that stopped the whole gate)."""
    edit_json(record_of(calibration), lambda d: d["axes"]["task_success"].update(decision="approved", **extra))
    allowed, why = gates(calibration)
    assert not allowed and "not an approval record" in why and "unknown key" in why


@pytest.mark.parametrize("field", ["endpoint", "rubric_sha256", "template_sha256", "model_pin"])
def test_an_approved_record_copied_onto_another_judge_never_gates_it(calibration, field):
    """B's approved record (and its verdicts) filed under the fingerprint of a judge that differs in
    one part only: cp, then also with the record's fingerprint and judge rewritten to match."""
    other = identity(**{field: {"endpoint": "http://evil.test/v1", "rubric_sha256": "9" * 64,
                                "template_sha256": "8" * 64, "model_pin": "openai/other-2024-01-01"}[field]})
    target = record_of(calibration, other)
    shutil.copy(record_of(calibration, B), target)
    allowed, why = gates(calibration, other)
    assert not allowed and "another judge's" in why
    edit_json(target, lambda d: d.update(fingerprint=other.fingerprint, judge=other.model_dump(mode="json")))
    allowed, why = gates(calibration, other)
    assert not allowed and "name another judge" in why  # B's verdicts say whose they are
    assert gates(calibration, B) == (True, None)


def test_rewriting_the_verdicts_without_the_record_hash_is_seen(calibration):
    path = verdicts_path(calibration, "ship", A.fingerprint)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    for line in lines:  # every verdict made right
        line["verdict"] = "pass" if int(line["trajectory_id"][1:]) % 2 else "fail"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    allowed, why = gates(calibration)
    assert not allowed and "changed since calibration" in why


def test_rewriting_the_verdicts_alone_is_the_trust_root_and_shows_in_the_certificate(calibration):
    """The documented limit: who rewrites the verdicts file alone (the labels untouched) and
    decides the record again from it (what `judgekit calibrate` writes) forges an approval.
    Rehashing alone is not enough; the full rewrite is visible in every certificate, which names
    the verdicts file's new hash."""
    labels_before = rehash(calibration / "ship" / "labels.jsonl")
    before = rehash(verdicts_path(calibration, "ship", A.fingerprint))
    labels, _ = binary_evidence(HALF, judge=A.model_pin)
    path = verdicts_path(calibration, "ship", A.fingerprint)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    for line in lines:  # every verdict made right
        line["verdict"] = "pass" if int(line["trajectory_id"][1:]) % 2 else "fail"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    edit_json(record_of(calibration), lambda d: d.update(verdicts_sha256=rehash(path)))
    allowed, why = gates(calibration)
    assert not allowed and "its items differ" in why  # the record's own items still say what A answered
    forged = [JudgeVerdictRecord.model_validate(line) for line in lines]
    approve(calibration, A, labels, forged)
    assert gates(calibration) == (True, None)
    [statement] = gate_of(calibration).approvals
    after = rehash(path)
    assert after != before and f"{A.fingerprint}.verdicts.jsonl (sha256 {after[:12]})" in statement
    assert rehash(calibration / "ship" / "labels.jsonl") == labels_before  # the labels were never touched


def test_rewriting_the_labels_alone_is_the_trust_root_and_shows_in_the_certificate(calibration):
    """The other half of the limit: who relabels the items to agree with the judge's recorded
    verdicts (the verdicts file untouched) and decides the record again forges an approval too,
    visible in every certificate, which names the labels file's new hash. Each file alone is
    enough: review must cover both."""
    path = verdicts_path(calibration, "ship", A.fingerprint)
    labels_path = calibration / "ship" / "labels.jsonl"
    verdicts_before, labels_before = rehash(path), rehash(labels_path)
    agreeing, verdicts = binary_evidence([(said, said) for _, said in pairs_of(WRONG_A)], judge=A.model_pin)
    _, recorded = binary_evidence(pairs_of(WRONG_A), judge=A.model_pin)
    assert [v.verdict for v in verdicts] == [v.verdict for v in recorded]  # the judge's answers, as recorded
    write_labels(labels_path, agreeing)
    allowed, why = gates(calibration)
    assert not allowed and "changed since calibration" in why  # relabelling without deciding again is seen
    approve(calibration, A, agreeing, recorded)
    assert gates(calibration) == (True, None)
    assert rehash(path) == verdicts_before  # the verdicts file is byte for byte what calibration wrote
    [statement] = gate_of(calibration).approvals
    after = rehash(labels_path)
    assert after != labels_before and f"labels ship/labels.jsonl (sha256 {after[:12]})" in statement


@pytest.mark.parametrize("key", [None, "same"])
def test_verdicts_that_name_no_question_or_one_question_twice_never_certify(calibration, key):
    """A refused judge's verdicts padded with agreeing repeats (found by a hostile review: 100
    agreeing repeats without a cache key per item made it approved, and the spot check, which
    re-asks recorded questions, never saw them). calibrate refuses to write such verdicts; written
    by hand (the record rehashed), the gate refuses them."""
    labels, verdicts = binary_evidence(pairs_of(WRONG_A), judge=A.model_pin)
    padding = [JudgeVerdictRecord(trajectory_id=label.trajectory_id, axis="task_success", judge=A.model_pin,
                                  repeat=r, verdict=label.label, cache_key=None if key is None else f"k{r}",
                                  judge_fingerprint=A.fingerprint)
               for label in labels for r in range(1, 4)]
    with pytest.raises(InputError, match="a calibration records the questions its judge was asked"):
        approve(calibration, A, labels, verdicts + padding)
    path = verdicts_path(calibration, "ship", A.fingerprint)
    path.write_text(path.read_text() + "".join(v.model_dump_json(exclude_none=True) + "\n" for v in padding))
    edit_json(record_of(calibration), lambda d: d.update(verdicts_sha256=rehash(path)))
    allowed, why = gates(calibration)
    assert not allowed
    assert ("name no question" in why) if key is None else ("one cache key twice" in why), why


def test_a_verdict_of_another_kind_makes_the_judge_advisory_not_the_gate_fail_on_input(calibration):
    """An A/B (pairwise) verdict among pass/fail ones, the record rehashed: the judge is advisory
    with the reason; the gate goes on (it exited 2 before: found by a hostile review)."""
    path = verdicts_path(calibration, "ship", B.fingerprint)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    lines[0]["verdict"] = "A"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    edit_json(record_of(calibration, B), lambda d: d.update(verdicts_sha256=rehash(path)))
    allowed, why = gates(calibration, B)
    assert not allowed and "its verdicts cannot be read as binary verdicts" in why, why
    assert gate_of(calibration, B).approvals == []


def test_labels_dated_after_the_decision_void_it(calibration):
    labels_path = calibration / "ship" / "labels.jsonl"
    lines = [json.loads(line) for line in labels_path.read_text().splitlines()]
    lines[0]["labeled_at"] = "2999-01-01T00:00:00Z"
    labels_path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    edit_json(record_of(calibration, B), lambda d: d.update(label_set_sha256=rehash(labels_path)))
    allowed, why = gates(calibration, B)
    assert not allowed and "dated after the calibration" in why


def test_a_format_1_record_calling_graded_faithfulness_binary_never_gates(tmp_path):
    metric = {"value": 0.95, "low": 0.9, "high": 1.0, "n_degenerate": 0}
    pairs = [[True, True]] * 30 + [[False, False]] * 30
    data = {"format_version": 1, "fingerprint": A.fingerprint, "judge": A.model_dump(mode="json"),
            "label_set_sha256": "3" * 64, "labels_file": "labels.jsonl", "thresholds": {"min_kappa": 0.6},
            "axes": {"faithfulness": {"axis": "faithfulness", "kind": "binary", "n": 60, "kappa": metric,
                                      "accuracy": metric, "pairs": pairs, "decision": "approved", "reasons": []}},
            "drift": [], "decided_at": "2026-11-30T00:00:00Z", "judgekit_version": "0.1.0"}
    path = record_of(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(data))
    allowed, why = gates(tmp_path, axis="faithfulness")
    assert not allowed and "approval format 1" in why


def test_a_graded_axis_labelled_pass_fail_is_never_certified(tmp_path):
    """Faithfulness is graded: pass/fail labels cannot certify its Spearman and MAE."""
    labels, verdicts = binary_evidence(HALF, axis="faithfulness", judge=A.model_pin)
    verdicts = [JudgeVerdictRecord(trajectory_id=v.trajectory_id, axis="faithfulness", judge=A.model_pin,
                                   score=1.0 if v.verdict == "pass" else 0.0, cache_key=v.cache_key) for v in verdicts]
    approve(tmp_path, A, labels, verdicts)
    allowed, why = gates(tmp_path, axis="faithfulness")
    assert not allowed and "are not labelled as graded" in why


# --- abstentions, thresholds, floors ------------------------------------------------------------


def test_a_judge_unscored_on_most_labelled_items_is_refused_and_says_so(tmp_path):
    """72 labelled items; the judge answers 24 of them (all right) and is unscored on 48."""
    labels, verdicts = binary_evidence([(i % 2 == 1, i % 2 == 1) for i in range(72)], judge=A.model_pin)
    verdicts = [v if i < 24 else JudgeVerdictRecord(trajectory_id=v.trajectory_id, axis=v.axis, judge=A.model_pin,
                                                     unscored_reason="parse_failure", cache_key=v.cache_key)
                for i, v in enumerate(verdicts)]
    approve(tmp_path, A, labels, verdicts)
    allowed, why = gates(tmp_path)
    assert not allowed and "no verdict on 48 of 72 labelled item(s) (67%; at most 10% allowed)" in why


def test_a_few_abstentions_are_allowed_and_stated_in_the_certificate(tmp_path):
    labels, verdicts = binary_evidence(HALF + [(True, True)] * 4, judge=A.model_pin)
    verdicts[-1] = JudgeVerdictRecord(trajectory_id=verdicts[-1].trajectory_id, axis="task_success",
                                      judge=A.model_pin, unscored_reason="timeout", cache_key=verdicts[-1].cache_key)
    approve(tmp_path, A, labels, verdicts)
    assert gates(tmp_path) == (True, None)
    [statement] = gate_of(tmp_path).approvals
    assert "no verdict on 1 of 64 labelled item(s)" in statement


def test_a_judge_that_always_answers_the_opposite_never_gates_whatever_the_suite_sets(tmp_path):
    lenient = Thresholds(min_kappa=-1, min_tpr=0, min_tnr=0, confidence=0.5, min_items=1)
    labels, verdicts = binary_evidence([(h, not j) for h, j in HALF], judge=A.model_pin)
    approve(tmp_path, A, labels, verdicts, lenient)
    allowed, why = gates(tmp_path, thresholds=lenient)
    assert not allowed and "no better than chance (a floor no suite setting lowers)" in why


@pytest.mark.parametrize(("pairs", "confidence"), [
    pytest.param([(True, True)] * 23 + [(True, False), (False, True)], 0.5, id="kappa_-0.04_at_50_percent"),
    pytest.param([(True, True)] * 58 + [(True, False), (False, True)], 0.8, id="kappa_-0.02_at_80_percent"),
])
def test_a_judge_worse_than_chance_never_gates_at_a_lenient_confidence(tmp_path, pairs, confidence):
    """The floor is checked on the 95% bound: at a lower level the smoothed bound of a judge worse
    than chance on its items came out above 0 (found by a hostile review)."""
    lenient = Thresholds(min_kappa=0, min_tpr=0, min_tnr=0, confidence=confidence)
    labels, verdicts = binary_evidence(pairs, judge=A.model_pin)
    approve(tmp_path, A, labels, verdicts, lenient)
    allowed, why = gates(tmp_path, thresholds=lenient)
    assert not allowed and "the 95% lower bound of kappa is -" in why and "no better than chance" in why
    assert gate_of(tmp_path, thresholds=lenient).approvals == []


def test_thresholds_more_lenient_than_the_defaults_are_stated_in_every_gating_line(tmp_path):
    lenient = Thresholds(min_kappa=0.3, confidence=0.8)
    labels, verdicts = binary_evidence(pairs_of({0, 3, 6}), judge=A.model_pin)
    approve(tmp_path, A, labels, verdicts, lenient)
    axis = gate_of(tmp_path, thresholds=lenient)
    [statement] = axis.approvals
    assert ("under thresholds more lenient than judgekit's defaults: min_kappa 0.3 (default 0.6), confidence 0.8 "
            "(default 0.95)") in statement
    assert "(80% one-sided bounds)" in statement


def test_the_gate_uses_the_suites_thresholds_not_the_records(calibration):
    """B was approved under the defaults; a suite asking for more refuses it, and a record edited
    to ask for less does not help A (its figures no longer match)."""
    stricter = Thresholds(min_kappa=0.99, min_items=100)
    allowed, why = gates(calibration, B, stricter)
    assert not allowed and "at least 100 needed" in why


# --- bounds in memory bounded by the items --------------------------------------------------------


def test_bounds_of_a_graded_set_with_many_distinct_scores_stay_in_bounded_memory():
    """20,000 items with distinct scores on both sides: the table would have 4e8 cells (the
    gate once tried to allocate 201 GiB); binned, it takes a bounded amount of memory."""
    rng = np.random.default_rng(0)
    human = rng.random(20_000)
    judge = np.clip(human + rng.normal(0, 0.05, human.size), 0, 1)
    tracemalloc.start()
    try:
        bounds = axis_bounds("graded", human, judge, name="faithfulness", n_draws=500)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 400 * 2**20, peak
    assert "binned to 128 levels" in bounds.bounds["mae"].method
    exact_mae = float(np.mean(np.abs(human - judge)))
    assert bounds.bounds["mae"].bound >= exact_mae  # the widened upper bound still covers the exact MAE
    assert bounds.bounds["kappa"].estimate == pytest.approx(
        axis_bounds("binary", (human >= 0.5).astype(float), (judge >= 0.5).astype(float), n_draws=10).bounds[
            "kappa"].estimate)


# --- labels and agreement on the command line ---------------------------------------------------


def test_agreement_on_an_empty_labels_or_verdicts_file_is_an_input_error(tmp_path):
    labels = write_labels(tmp_path / "labels.jsonl", binary_evidence(HALF)[0])
    verdicts = tmp_path / "verdicts.jsonl"
    verdicts.write_text("".join(v.model_dump_json(exclude_none=True) + "\n" for v in binary_evidence(HALF)[1]))
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    for args, named in (((empty, verdicts), "empty.jsonl: no labels"), ((labels, empty), "empty.jsonl: no verdicts")):
        result = CliRunner().invoke(main, ["agreement", "--labels", str(args[0]), "--verdicts", str(args[1])])
        assert result.exit_code == 2 and named in result.output, result.output


# --- a hypothesis search over record edits --------------------------------------------------------


def _set(path: list, value):
    def change(data: dict) -> None:
        node = data
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    return change


EDIT = st.one_of(
    st.just(fabricate_items),
    st.sampled_from(["approved", "refused"]).map(lambda v: _set(["axes", "task_success", "decision"], v)),
    st.sampled_from(["binary", "graded"]).map(lambda v: _set(["axes", "task_success", "kind"], v)),
    st.integers(0, 500).map(lambda v: _set(["axes", "task_success", "n"], v)),
    st.integers(0, 50).map(lambda v: _set(["axes", "task_success", "abstained"], v)),
    st.sampled_from(["kappa_lower", "tpr_lower", "tnr_lower"]).flatmap(
        lambda f: st.one_of(st.none(), st.floats(-1, 1)).map(lambda v: _set(["axes", "task_success", f], v))),
    st.floats(0.5, 0.999).map(lambda v: _set(["axes", "task_success", "confidence"], v)),
    st.sampled_from(["min_kappa", "min_tpr", "min_tnr", "min_spearman"]).flatmap(
        lambda f: st.floats(-1, 1).map(lambda v: _set(["thresholds", f], v))),
    st.integers(1, 100).map(lambda v: _set(["thresholds", "min_items"], v)),
    st.floats(0, 1).map(lambda v: _set(["thresholds", "max_abstention_rate"], v)),
    st.floats(0.5, 0.99).map(lambda v: _set(["thresholds", "confidence"], v)),
    st.sampled_from(["0" * 64, "f" * 64]).map(lambda v: _set(["label_set_sha256"], v)),
    st.sampled_from(["0" * 64, "f" * 64]).map(lambda v: _set(["verdicts_sha256"], v)),
    st.sampled_from(["ship/labels.jsonl", "/nonexistent", "../labels.jsonl", ""]).map(lambda v: _set(["labels_file"], v)),
    st.sampled_from([1, 2, 3]).map(lambda v: _set(["format_version"], v)),
    st.sampled_from(["2026-11-30T00:00:00Z", "2999-01-01T00:00:00Z"]).map(lambda v: _set(["decided_at"], v)),
    st.sampled_from(["endpoint", "template_sha256", "rubric_sha256"]).map(
        lambda f: _set(["judge", f], getattr(B, f))),
    st.integers(0, 59).flatmap(lambda i: st.floats(0, 1).map(
        lambda v: _set(["axes", "task_success", "items", i, "judge"], v))),
    st.integers(0, 59).map(lambda i: lambda d: d["axes"]["task_success"]["items"].pop(i)),
    st.just(lambda d: d.update(fingerprint=A.fingerprint, judge=A.model_dump(mode="json"))),
    st.sampled_from([A, B]).map(lambda j: _set(["verdicts_file"], f"ship/approvals/{j.fingerprint}.verdicts.jsonl")),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=st.lists(EDIT, min_size=1, max_size=6), copy_b=st.booleans())
def test_a_search_over_record_edits_never_finds_one_that_makes_the_refused_judge_gate(calibration, edits, copy_b):
    target = record_of(calibration)
    original = target.read_text()
    try:
        if copy_b:
            shutil.copy(record_of(calibration, B), target)
        for edit in edits:
            try:
                edit_json(target, edit)
            except (IndexError, KeyError, TypeError):
                pass  # an edit of a part an earlier edit removed
        try:
            allowed, _ = gates(calibration)
        except InputError:
            allowed = False  # not an approval record at all: never an approval
        assert not allowed
    finally:
        target.write_text(original)
