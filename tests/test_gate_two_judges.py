"""Two approved judges on one axis (two rubrics): each one's corrected pass rate comes from its own
verdicts and its own calibration, never from a mix of both."""

from __future__ import annotations

from datetime import datetime, timezone

from _approvals import approve_pairs
from judgekit._util.version import __version__
from judgekit.calibration.approval_record import JudgeIdentity, Thresholds
from judgekit.calibration.corrected import corrected_pass_rate
from judgekit.gate import gate_results
from judgekit.results import CheckOutcome, TaskSuccessResult, TrajectoryResult
from judgekit.suite import GatePolicy
from judgekit.verdict import Provenance

NOW = datetime(2026, 12, 1, tzinfo=timezone.utc)
# Lenient bounds: this test is about keeping two judges' corrections apart, not the approval rule
# (judge A's TNR of 0.7 on 20 items would not clear the default 0.8 lower bound).
LENIENT = Thresholds(min_kappa=0.0, min_tpr=0.0, min_tnr=0.0)


def provenance(rubric: str) -> Provenance:
    return Provenance(model_pin="openai/judge-2024-08-06", parameters={"temperature": 0.0, "seed": 0, "max_tokens": 64},
                      rubric=rubric, rubric_sha256="0" * 64, template_sha256="1" * 64, judgekit_version=__version__,
                      litellm_version="0", created_at=NOW, cache_key="2" * 64)


def approve(calibration_dir, rubric: str, pairs: list[tuple[bool, bool]]) -> None:
    approve_pairs(calibration_dir, JudgeIdentity.of(provenance(rubric)), pairs, LENIENT)


def judged(tid: str, rubric: str, judge_pass: bool) -> TrajectoryResult:
    checks = [CheckOutcome(check="postcondition[0]", passed=True, reason="ok"),
              CheckOutcome(check="judge", passed=judge_pass, reason="judged", source="judge")]
    result = TaskSuccessResult(source="judge", passed=judge_pass, score=float(judge_pass), checks=checks,
                               judge=provenance(rubric))
    return TrajectoryResult(trajectory_id=tid, rubric=rubric, rubric_sha256="0" * 64, source=f"t.jsonl:{tid}",
                            axes={"task_success": result})


def test_two_approved_rubrics_on_one_axis_are_corrected_apart(tmp_path):
    # Judge A errs towards pass, judge B towards fail: their calibrations differ.
    pairs_a = [(True, True)] * 18 + [(True, False)] * 2 + [(False, True)] * 6 + [(False, False)] * 14
    pairs_b = [(True, True)] * 12 + [(True, False)] * 8 + [(False, True)] * 1 + [(False, False)] * 19
    approve(tmp_path, "alpha@1.0.0", pairs_a)
    approve(tmp_path, "beta@1.0.0", pairs_b)
    verdicts_a = [True] * 30 + [False] * 10
    verdicts_b = [True] * 12 + [False] * 28
    results = [judged(f"a{i}", "alpha@1.0.0", v) for i, v in enumerate(verdicts_a)]
    results += [judged(f"b{i}", "beta@1.0.0", v) for i, v in enumerate(verdicts_b)]

    [axis] = gate_results(results, GatePolicy(min={"task_success": 0.0}), tmp_path, thresholds=LENIENT).axes
    assert axis.gating_n == 80
    by_rubric = {c.rubric: c.rate for c in axis.corrected}
    assert set(by_rubric) == {"alpha@1.0.0", "beta@1.0.0"}
    assert by_rubric["alpha@1.0.0"] == corrected_pass_rate(verdicts_a, pairs_a, seed=0)
    assert by_rubric["beta@1.0.0"] == corrected_pass_rate(verdicts_b, pairs_b, seed=0)
    mixed = corrected_pass_rate(verdicts_a + verdicts_b, pairs_b, seed=0)  # what keying by axis alone gave
    assert mixed.corrected not in (by_rubric["alpha@1.0.0"].corrected, by_rubric["beta@1.0.0"].corrected)
