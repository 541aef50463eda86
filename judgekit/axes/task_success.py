"""Deterministic task success: precondition, postcondition, no extra side effect, latency.

Judged from the world's end state, never from the agent's wording; the one exception is
``required_outputs``, values the rubric says the answer itself must state.
"""

from __future__ import annotations

import re

from judgekit.axes._paths import path_matches
from judgekit.world.diff import render_path
from judgekit.axes.predicates import evaluate
from judgekit.trajectory import WorldState
from judgekit.results import CheckOutcome, TaskSuccessResult
from judgekit.rubric.model import TaskSuccessCriteria
from judgekit.trajectory import Trajectory

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
    return CheckOutcome(
        check="side_effects", passed=False, reason=f"{len(extra)} change(s) not allowed: {shown}{more}"
    )


def _latency(limit: float, latency: float | None) -> CheckOutcome:
    if latency is None:
        return CheckOutcome(check="latency", passed=False, reason="the trajectory records no latency_s")
    ok = latency <= limit
    return CheckOutcome(check="latency", passed=ok, reason=f"took {latency:g} s; limit {limit:g} s")
