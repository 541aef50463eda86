"""Score a suite: every trajectory against its rubric, one independent result per axis."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from judgekit._version import __version__
from judgekit.checks.task_success import score_task_success
from judgekit.checks.tool_correctness import score_tool_correctness
from judgekit.checks.world_state import WorldState
from judgekit.errors import InputError
from judgekit.lock import read_lock, verify
from judgekit.results import TaskSuccessResult, ToolCorrectnessResult, TrajectoryResult
from judgekit.rubric import Rubric
from judgekit.suite import GatePolicy, LoadedSuite
from judgekit.trajectory import LoadedTrajectory, iter_trajectories

RUN_FORMAT_VERSION = 1


def check_registration(loaded: LoadedSuite) -> None:
    """With a lock named in the suite, refuse any rubric that is not exactly as pre-registered."""
    if loaded.suite.lock is None:
        return
    lock_path = loaded.resolve(loaded.suite.lock)
    lock = read_lock(lock_path)
    if not lock.rubrics:
        raise InputError("the suite names this lock but it locks no rubric: run `judgekit rubric lock`", lock_path)
    for ref, rubric in loaded.rubrics.items():
        problem = verify(rubric, loaded.rubric_files[ref], lock, lock_path)
        if problem is not None:
            raise InputError(problem.message, problem.path)


def score_deterministic(rubric: Rubric, loaded: LoadedTrajectory, world: WorldState | None = None) -> TrajectoryResult:
    """Score the axes that need no model. A bad snapshot makes that axis 'error', not a crash."""
    trajectory = loaded.trajectory
    world = world or WorldState(loaded)
    result = TrajectoryResult(
        trajectory_id=trajectory.id,
        rubric=rubric.ref,
        rubric_sha256=rubric.sha256(),
        source=loaded.where,
        metadata=trajectory.metadata,
    )
    if rubric.task_success is not None:
        try:
            result.axes["task_success"] = score_task_success(rubric.task_success, trajectory, world)
        except InputError as exc:
            result.axes["task_success"] = TaskSuccessResult(status="error", error=str(exc))
    if rubric.tool_correctness is not None:
        try:
            result.axes["tool_correctness"] = score_tool_correctness(rubric.tool_correctness, trajectory, world)
        except InputError as exc:
            result.axes["tool_correctness"] = ToolCorrectnessResult(status="error", error=str(exc))
    return result


def iter_trajectories_of(loaded: LoadedSuite) -> Iterator[tuple[Rubric, LoadedTrajectory]]:
    """Every trajectory of the suite with its rubric, in suite order; ids must be unique.

    Each carries the suite's snapshot policy: its snapshot files are read only from the
    suite's ``snapshots.roots``.
    """
    seen: dict[str, str] = {}
    policy = loaded.snapshot_policy()
    for entry in loaded.suite.trajectories:
        rubric = loaded.rubric_for(entry.rubric)
        for item in iter_trajectories(loaded.resolve(entry.file)):
            tid = item.trajectory.id
            if tid in seen:
                raise InputError(f"trajectory id {tid!r} already used at {seen[tid]}", item.path, item.line)
            seen[tid] = item.where
            yield rubric, replace(item, policy=policy)


def iter_results(loaded: LoadedSuite) -> Iterator[TrajectoryResult]:
    """Deterministic axes only, streamed in suite order."""
    for rubric, item in iter_trajectories_of(loaded):
        yield score_deterministic(rubric, item)


class AxisSummary(BaseModel):
    model_config = ConfigDict(extra="forbid")

    scored: int = Field(description="Trajectories scored on this axis.")
    unscored: int = Field(0, description="Trajectories the judge gave no valid verdict for (never pass or fail).")
    errors: int = Field(description="Trajectories whose axis could not be scored (bad input).")
    passed: int | None = Field(None, description="Binary axes: how many passed.")
    mean_score: float | None = Field(None, description="Mean score over scored trajectories.")


class RunRecord(BaseModel):
    """Everything one run produced, with what is needed to reproduce it."""

    model_config = ConfigDict(extra="forbid")

    format_version: Literal[1] = RUN_FORMAT_VERSION
    suite: str = Field(description="Suite name.")
    suite_path: str = Field(description="Suite file.")
    judgekit_version: str = Field(description="judgekit version that produced it.")
    started_at: datetime
    finished_at: datetime
    rubrics: dict[str, dict[str, Any]] = Field(description="id@version -> sha256 and file.")
    summary: dict[str, AxisSummary] = Field(description="Axis -> summary.")
    ledger: dict[str, Any] | None = Field(None, description="Judge calls, cache hits, tokens and cost of the run.")
    gate: GatePolicy = Field(default_factory=GatePolicy, description="The suite's gate policy at run time.")
    calibration_dir: str | None = Field(None, description="Where the suite's approval records live.")
    results: list[TrajectoryResult] = Field(description="One record per trajectory.")


def summarise(results: list[TrajectoryResult]) -> dict[str, AxisSummary]:
    summary: dict[str, AxisSummary] = {}
    axes = sorted({axis for r in results for axis in r.axes})
    for axis in axes:
        records = [r.axes[axis] for r in results if axis in r.axes]
        scored = [a for a in records if a.status == "scored"]
        scores = [a.score for a in scored if a.score is not None]
        summary[axis] = AxisSummary(
            scored=len(scored),
            unscored=sum(a.status == "unscored" for a in records),
            errors=sum(a.status == "error" for a in records),
            passed=sum(bool(a.passed) for a in scored) if axis == "task_success" else None,
            mean_score=round(sum(scores) / len(scores), 6) if scores else None,
        )
    return summary


def now() -> datetime:
    return datetime.now(timezone.utc)


def build_record(
    loaded: LoadedSuite, results: list[TrajectoryResult], started_at: datetime, ledger: dict[str, Any] | None = None
) -> RunRecord:
    return RunRecord(
        ledger=ledger,
        gate=loaded.suite.gate,
        calibration_dir=str(loaded.resolve(loaded.suite.calibration_dir)),
        suite=loaded.suite.name,
        suite_path=str(loaded.path),
        judgekit_version=__version__,
        started_at=started_at,
        finished_at=now(),
        rubrics={
            ref: {"sha256": rubric.sha256(), "file": str(loaded.rubric_files[ref])}
            for ref, rubric in sorted(loaded.rubrics.items())
        },
        summary=summarise(results),
        results=results,
    )
