"""The tool-correctness axis (graded): deterministic, scored exactly as pre-registered.

Points: 1 per expected call matched by a successful call to the right tool; 1 per expected
argument that holds (its JSON Schema, its value expectation, its tool's declared schema: see
``judgekit.axes.arguments``, the one matcher); 1 if the number of successful in-scope calls
equals the number expected; 1 if no forbidden tool was called and no forbidden effect shows in
the end-state diff. Score = points / maximum. A failed call changed nothing, so it earns
nothing and is not counted. What matched calls did that no point covers (keys their tool does
not declare) is reported in ``notes``, never scored.
"""

from __future__ import annotations

import numpy as np

from judgekit.rubric.json_schema import first_error_within_budget
from judgekit.rubric.regex import check_budget
from judgekit.axes._paths import path_matches
from judgekit.axes.arguments import CallPlan, Verdict, call_notes, plans_for
from judgekit.axes.base import Axis
from judgekit.world.diff import render_path
from judgekit.trajectory import WorldState
from judgekit.results import ToolCorrectnessResult, ToolCounts, ToolNote, ToolPoint
from judgekit.rubric.model import ExpectedCall, ToolCorrectnessCriteria
from judgekit.trajectory import Call, Trajectory


def _arg_verdicts(plan: CallPlan, call: Call) -> list[Verdict]:
    """(argument, valid, reason, pinned exactly) for each expected argument of one call. The
    schema checker is looked up here, at call time, and passed in: inside score_tool_correctness's
    budget."""
    return plan.verdicts(call.args, first_error_within_budget)


def _pair_score(verdicts: list[Verdict] | None) -> int:
    """1 for the right tool plus 1 per valid argument; 0 for another tool (``verdicts`` None)."""
    if verdicts is None:
        return 0
    return 1 + sum(verdict[1] for verdict in verdicts)


def _match_unordered(scores: np.ndarray) -> dict[int, int]:
    from scipy.optimize import linear_sum_assignment  # optimal matching; imported on first use

    rows, cols = linear_sum_assignment(scores, maximize=True)
    table = scores.tolist()  # plain ints: indexing a small array element by element is slower
    return {r: c for r, c in zip(rows.tolist(), cols.tolist()) if table[r][c] > 0}


def _match_ordered(scores: np.ndarray) -> dict[int, int]:
    """Best monotone alignment of expected calls to actual calls (an LCS with weights)."""
    n, m = scores.shape
    best = np.zeros((n + 1, m + 1), dtype=np.int64)
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            take = best[i - 1, j - 1] + scores[i - 1, j - 1] if scores[i - 1, j - 1] > 0 else -1
            best[i, j] = max(best[i - 1, j], best[i, j - 1], take)
    pairs: dict[int, int] = {}
    i, j = n, m
    while i > 0 and j > 0:
        if scores[i - 1, j - 1] > 0 and best[i, j] == best[i - 1, j - 1] + scores[i - 1, j - 1]:
            pairs[i - 1] = j - 1
            i, j = i - 1, j - 1
        elif best[i, j] == best[i - 1, j]:
            i -= 1
        else:
            j -= 1
    return pairs


def score_tool_correctness(
    criteria: ToolCorrectnessCriteria, trajectory: Trajectory, world: WorldState
) -> ToolCorrectnessResult:
    # How many calls there are is up to the agent, and each is checked against every expected
    # call: all the argument checks of one trajectory share one time budget.
    with check_budget():
        return _score(criteria, trajectory, world)


def _score(criteria: ToolCorrectnessCriteria, trajectory: Trajectory, world: WorldState) -> ToolCorrectnessResult:
    succeeded = [(index, call) for index, call in enumerate(trajectory.calls) if call.succeeded]
    in_scope = [
        (index, call) for index, call in succeeded if criteria.in_scope is None or call.tool in criteria.in_scope
    ]
    expected = criteria.expected_calls
    plans = plans_for(criteria)
    # The argument verdicts of every (expected call, call to its tool) pair, computed once: the
    # matching scores them and the points of matched pairs repeat them.
    verdicts = [[_arg_verdicts(p, call) if p.tool == call.tool else None for _, call in in_scope] for p in plans]
    scores = np.array(
        [[_pair_score(pair) for pair in row] for row in verdicts], dtype=np.int64
    ).reshape(len(expected), len(in_scope))
    pairs = _match_ordered(scores) if criteria.ordered else _match_unordered(scores)

    items: list[ToolPoint] = []
    args_valid = 0
    for i, (exp, plan) in enumerate(zip(expected, plans)):
        if i in pairs:
            index, _ = in_scope[pairs[i]]
            items.append(ToolPoint(point=plan.tool_point, earned=True, reason=f"matched by call #{index}"))
            for point, (_, ok, reason, _) in zip(plan.arg_points, verdicts[i][pairs[i]]):
                args_valid += ok
                items.append(ToolPoint(point=point, earned=ok, reason=f"call #{index}: {reason}"))
        else:
            why = _why_unmatched(exp, in_scope, criteria.ordered)
            items.append(ToolPoint(point=plan.tool_point, earned=False, reason=why))
            items.extend(ToolPoint(point=point, earned=False, reason="no matching call") for point in plan.arg_points)

    count_ok = len(in_scope) == len(expected)
    items.append(
        ToolPoint(
            point="call count",
            earned=count_ok,
            reason=f"{len(in_scope)} successful in-scope call(s), {len(expected)} expected",
        )
    )
    hits = _forbidden_hits(criteria, succeeded, world)
    items.append(
        ToolPoint(
            point="no forbidden side effect",
            earned=not hits,
            reason="none" if not hits else "; ".join(hits[:5]) + (f"; and {len(hits) - 5} more" if len(hits) > 5 else ""),
        )
    )
    points = sum(item.earned for item in items)
    counts = ToolCounts(
        calls_total=len(trajectory.calls),
        calls_failed=len(trajectory.calls) - len(succeeded),
        calls_in_scope=len(in_scope),
        calls_expected=len(expected),
        calls_matched=len(pairs),
        args_expected=sum(len(p.names) for p in plans),
        args_valid=args_valid,
        forbidden_hits=len(hits),
    )
    notes = _notes(plans, pairs, in_scope, verdicts) if criteria.tools else []
    return ToolCorrectnessResult(
        score=points / len(items), points=points, max_points=len(items), counts=counts, items=items, notes=notes
    )


def _notes(plans: list[CallPlan], pairs: dict[int, int], in_scope: list[tuple[int, Call]],
           verdicts: list[list[list[Verdict] | None]]) -> list[ToolNote]:
    """What the matched calls did that no point covers, in call order (reported, not scored)."""
    notes: list[ToolNote] = []
    for i, j in sorted(pairs.items(), key=lambda pair: pair[1]):
        index, call = in_scope[j]
        notes += call_notes(plans[i], index, call.args, verdicts[i][j] or [], first_error_within_budget)
    return notes


def _why_unmatched(exp: ExpectedCall, in_scope: list[tuple[int, Call]], ordered: bool) -> str:
    same_tool = [index for index, call in in_scope if call.tool == exp.tool]
    if not same_tool:
        called = sorted({call.tool for _, call in in_scope})
        return f"no successful call to {exp.tool}" + (f" (called: {', '.join(called)})" if called else "")
    return f"call(s) #{', #'.join(map(str, same_tool))} to {exp.tool} were matched to other expected calls" + (
        " or out of order" if ordered else ""
    )


def _forbidden_hits(
    criteria: ToolCorrectnessCriteria, succeeded: list[tuple[int, Call]], world: WorldState
) -> list[str]:
    hits = [f"call #{index} to forbidden tool {call.tool}" for index, call in succeeded if call.tool in criteria.forbidden.tools]
    if criteria.forbidden.effects:
        for change in world.diff.changes:
            for pattern in criteria.forbidden.effects:
                if path_matches(pattern, change.path):
                    hits.append(f"forbidden effect {change.op} {render_path(change.path)} (matches {pattern!r})")
                    break
    return hits


class ToolCorrectness(Axis):
    name = "tool_correctness"
    kind = "graded"
    result = ToolCorrectnessResult
    description = "Right tools, valid arguments, the expected number of calls, no forbidden side effect: points earned over points available."

    def score(self, criteria: ToolCorrectnessCriteria, trajectory: Trajectory, world: WorldState) -> ToolCorrectnessResult:
        return score_tool_correctness(criteria, trajectory, world)

    def headline(self, result: ToolCorrectnessResult) -> str:
        return f"{result.score:.2f} ({result.points}/{result.max_points})"

    def describe(self, result: ToolCorrectnessResult) -> str:
        text = self.headline(result)
        lost = [item.point for item in result.items if not item.earned]
        if lost:
            text += " lost: " + ", ".join(lost[:2]) + ("..." if len(lost) > 2 else "")
        return text

    def empty(self, criteria: ToolCorrectnessCriteria) -> list[str]:
        if not criteria.expected_calls and not criteria.forbidden.tools and not criteria.forbidden.effects:
            return ["tool_correctness expects no call and forbids nothing: it measures only the call count"]
        return []

    def lost(self, result: ToolCorrectnessResult) -> list[tuple[str, str]]:
        return [(item.point, item.reason) for item in result.items if not item.earned]


AXIS = ToolCorrectness()
"""The tool-correctness axis."""
