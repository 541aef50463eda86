"""The task-success axis (binary): did the world end up as asked?

Deterministic checks: precondition, postcondition, no extra side effect, latency. Judged from
the world's end state, never from the agent's wording; the one exception is
``required_outputs``, values the rubric says the answer itself must state. With
``judge: true`` a judge also answers from the task and the end-state diff, and the axis passes
only if the checks and the judge pass.
"""

from __future__ import annotations

import re

from judgekit.axes._paths import path_matches
from judgekit.axes.base import Axis
from judgekit.axes.predicates import evaluate
from judgekit.prompt import DIFF_MAX_CHARS, Evidence, Section
from judgekit.results import CheckOutcome, TaskSuccessResult
from judgekit.rubric.model import TaskSuccessCriteria
from judgekit.trajectory import Trajectory, WorldState
from judgekit.verdict import JudgeVerdict, TaskSuccessAnswer
from judgekit.world.diff import Change, Diff, render_path, render_text
from judgekit.world.snapshot import format_pointer

# A comma between two digits. Written to start with the comma, not with a look-behind: the
# matcher then jumps from comma to comma instead of trying the look-behind at every character
# of a long answer. Same matches as r"(?<=\d),(?=\d)".
_THOUSANDS = re.compile(r",(?<=\d,)(?=\d)")
_SHOW_AT_MOST = 5


def normalise_text(text: str) -> str:
    """Case-folded, whitespace collapsed, thousands separators dropped ('1,786' -> '1786')."""
    # split() and join() collapse runs of whitespace and trim the ends exactly as
    # re.sub(r"\s+", " ", ...).strip() does (both use str.isspace), without a match per run.
    return " ".join(_THOUSANDS.sub("", text.casefold()).split())


def score_task_success(
    criteria: TaskSuccessCriteria, trajectory: Trajectory, world: WorldState
) -> TaskSuccessResult:
    checks: list[CheckOutcome] = []
    for i, predicate in enumerate(criteria.preconditions):
        passed, reason = evaluate(predicate, world.before)
        checks.append(CheckOutcome(check=f"precondition[{i}] {predicate.check}", passed=passed, reason=reason))
    for i, predicate in enumerate(criteria.postconditions):
        passed, reason = evaluate(predicate, world.after)
        checks.append(CheckOutcome(check=f"postcondition[{i}] {predicate.check}", passed=passed, reason=reason))
    if criteria.side_effects is not None:
        checks.append(_side_effects(criteria.side_effects.allow, world))
    if criteria.max_latency_s is not None:
        checks.append(_latency(criteria.max_latency_s, trajectory.latency_s))
    output = normalise_text(trajectory.output)
    for i, required in enumerate(criteria.required_outputs):
        found = normalise_text(required) in output
        reason = f"the answer {'states' if found else 'does not state'} {required!r}"
        checks.append(CheckOutcome(check=f"output[{i}]", passed=found, reason=reason))
    passed = all(check.passed for check in checks)
    return TaskSuccessResult(passed=passed, score=1.0 if passed else 0.0, checks=checks)


def _side_effects(allow: list[str], world: WorldState) -> CheckOutcome:
    changes = world.diff.changes
    extra = [c for c in changes if not any(path_matches(pattern, c.path) for pattern in allow)]
    if not extra:
        return CheckOutcome(
            check="side_effects", passed=True, reason=f"all {len(changes)} change(s) in the diff are allowed"
        )
    shown = ", ".join(f"{c.op} {render_path(c.path)}" for c in extra[:_SHOW_AT_MOST])
    more = f" and {len(extra) - _SHOW_AT_MOST} more" if len(extra) > _SHOW_AT_MOST else ""
    hint = _keys_hint(extra) if world.diff.kind == "json" else ""
    return CheckOutcome(
        check="side_effects", passed=False, reason=f"{len(extra)} change(s) not allowed: {shown}{more}{hint}"
    )


def _keys_hint(changes: list[Change]) -> str:
    """How to match a JSON list's records by key, when a change's path runs through a list index
    (a list diffed by position: an inserted or reordered record shifts every index after it)."""
    for change in changes:
        index = next((i for i, seg in enumerate(change.path) if isinstance(seg, int)), None)
        if index is not None:
            pointer = format_pointer(change.path[:index])
            return (f" ({render_path(change.path[:index + 1])}: the list {pointer!r} is diffed by position; to match "
                    f"its records by a field, declare world.keys: {{{pointer!r}: FIELD}} (e.g. id) in the rubric "
                    "or the suite)")
    return ""


def _latency(limit: float, latency: float | None) -> CheckOutcome:
    if latency is None:
        return CheckOutcome(check="latency", passed=False, reason="the trajectory records no latency_s")
    ok = latency <= limit
    return CheckOutcome(check="latency", passed=ok, reason=f"took {latency:g} s; limit {limit:g} s")


def task_success_sections(trajectory: Trajectory, evidence: Evidence, diff: Diff | None, show_output: bool) -> list[Section]:
    """The end-state diff (and, when asked, the agent's output): task success reads the world."""
    diff_lines = render_text(diff, max_chars=DIFF_MAX_CHARS).splitlines() if diff is not None else ["(no world snapshots)"]
    sections: list[Section] = [("End-state diff", "diff", [(f"D{i}", line) for i, line in enumerate(diff_lines)])]
    if show_output:
        sections.append(("Agent output (its own claims; judge the world, not the wording)", "output", [("O", trajectory.output)]))
    return sections


def task_success_with_verdict(result: TaskSuccessResult, verdict: JudgeVerdict) -> TaskSuccessResult:
    """Add the judge's check to the deterministic ones; unscored makes the axis unscored."""
    if result.status == "error":
        return result
    update = {"judge": verdict.provenance, "source": "judge"}
    if verdict.status != "scored":
        return result.model_copy(
            update={**update, "status": "unscored", "unscored_reason": verdict.unscored_reason,
                    "error": verdict.detail, "passed": None, "score": None}
        )
    answer = verdict.answer
    check = CheckOutcome(check="judge", passed=answer.verdict == "pass", reason="; ".join(answer.reasons) or answer.verdict,
                         source="judge")
    checks = [*result.checks, check]
    passed = all(c.passed for c in checks)
    return result.model_copy(update={**update, "checks": checks, "passed": passed, "score": 1.0 if passed else 0.0})


class TaskSuccess(Axis):
    name = "task_success"
    kind = "binary"
    result = TaskSuccessResult
    answer = TaskSuccessAnswer
    description = "Did the world end up as the task asked? Pass only if every check (and the judge, if asked) passes."
    prompt_reads_world = True

    def score(self, criteria: TaskSuccessCriteria, trajectory: Trajectory, world: WorldState) -> TaskSuccessResult:
        return score_task_success(criteria, trajectory, world)

    def judged(self, criteria: TaskSuccessCriteria) -> bool:
        return criteria.judge

    def sections(self, trajectory, evidence, diff, show_output) -> list[Section]:
        return task_success_sections(trajectory, evidence, diff, show_output)

    def from_verdict(self, criteria, result, verdict, prompt) -> TaskSuccessResult:
        return task_success_with_verdict(result, verdict)

    def value(self, result: TaskSuccessResult) -> float | None:
        return None if result.passed is None else float(result.passed)

    def judge_value(self, result: TaskSuccessResult) -> float | None:
        check = next((c for c in result.checks if c.source == "judge"), None)
        return None if check is None else float(check.passed)

    def fallback_value(self, result: TaskSuccessResult) -> float:
        """An advisory judge leaves the deterministic checks gating on their own."""
        return float(all(c.passed for c in result.checks if c.source == "deterministic"))

    def describe(self, result: TaskSuccessResult) -> str:
        if result.passed:
            return "PASS"
        failed = [c.check for c in result.checks if not c.passed]
        return "FAIL " + ", ".join(failed[:2]) + ("..." if len(failed) > 2 else "")

    def headline(self, result: TaskSuccessResult) -> str:
        """PASS, or FAIL and the first failed check (+N: how many more failed)."""
        if result.passed:
            return "PASS"
        failed = [c.check for c in result.checks if not c.passed]
        if not failed:
            return "FAIL"
        return f"FAIL {failed[0]}" + (f" +{len(failed) - 1}" if len(failed) > 1 else "")

    def empty(self, criteria: TaskSuccessCriteria) -> list[str]:
        checks = (criteria.preconditions, criteria.postconditions, criteria.side_effects, criteria.max_latency_s,
                  criteria.required_outputs)
        if not any(check not in (None, []) for check in checks):
            return ["task_success has no check (no pre/postcondition, side_effects, max_latency_s or "
                    "required_outputs): it would pass everything"]
        return []

    def lost(self, result: TaskSuccessResult) -> list[tuple[str, str]]:
        return [(check.check, check.reason) for check in result.checks if not check.passed]


AXIS = TaskSuccess()
"""The task-success axis."""
