"""Merging verdicts into a plan: each judge verdict becomes its axis's result (the axis table
says how), the first repeat on the trajectory's record, every repeat for calibration."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from judgekit.axes.table import axis_named
from judgekit.results import AxisResultBase, TrajectoryResult
from judgekit.run.plan import RunPlan
from judgekit.verdict import JudgeVerdict


def judged_results(plan: RunPlan, verdicts: Sequence[JudgeVerdict], judgements: Sequence | None = None
                   ) -> Iterator[tuple[int, str, int, AxisResultBase]]:
    """(item index, axis, repeat, axis result) for every judgement of the plan (or those given,
    whose verdicts ``verdicts`` are), in that order."""
    judgements = plan.judgements if judgements is None else judgements
    if len(verdicts) != len(judgements):
        raise ValueError(f"{len(verdicts)} verdicts for {len(judgements)} judge questions")
    for judgement, verdict in zip(judgements, verdicts):
        axis = axis_named(judgement.axis)
        job = judgement.job
        deterministic = plan.items[judgement.item].axes.get(axis.name)
        yield judgement.item, axis.name, judgement.repeat, axis.from_verdict(
            axis.criteria(job.rubric), deterministic, verdict, job.prompt)


def merge(plan: RunPlan, verdicts: Sequence[JudgeVerdict]) -> list[TrajectoryResult]:
    """The plan's results with every first-repeat verdict merged in, in suite order."""
    merged = list(judged_results(plan, verdicts))  # all from the deterministic results, before any is replaced
    for item, axis, repeat, result in merged:
        if repeat == 0:
            plan.items[item].axes[axis] = result
    return plan.items
