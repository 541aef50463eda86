"""Planning a run: every trajectory scored on the deterministic axes, every judge question built.

``plan_run`` is pure: it reads the suite, its rubrics, trajectories and snapshots, scores what
needs no model and builds each judge job (prompt, target, cache key), but it starts no server,
reads no API key and calls nothing. A plan pickles: it can be executed in another process or on
another machine, and it holds no secret. ``iter_plans`` cuts the same plan into windows of
trajectories so a run of millions never holds them all.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field

from judgekit.axes.table import axes_of, judged_axes
from judgekit.trajectory import WorldState
from judgekit.errors import ConfigError, InputError
from judgekit.judge.resolve import JudgeOverride, JudgeResolver
from judgekit.judge.spec import JudgeSpec
from judgekit.judge.target import JudgeTarget
from judgekit.results import TrajectoryResult
from judgekit.rubric.model import Rubric
from judgekit.run.jobs import JudgeJob
from judgekit.suite import LoadedSuite
from judgekit.suite.inputs import SeenIds, check_registration, iter_trajectories_of
from judgekit.trajectory import LoadedTrajectory, Trajectory

DEFAULT_WINDOW = 512  # trajectories per window: judged together, then merged and let go

Select = Collection[str] | Callable[[Trajectory], bool] | None
"""Which trajectories a run covers: all (None), these ids, or those a predicate accepts."""


@dataclass
class PlannedJudgement:
    """One judge question of a plan: which trajectory (index in ``items``), axis and repeat."""

    item: int
    axis: str
    repeat: int
    job: JudgeJob


@dataclass
class RunPlan:
    """What a run will do: results with the deterministic axes scored, and the judge questions
    still to ask. Merge the executor's verdicts into it with ``judgekit.run.merge``."""

    items: list[TrajectoryResult] = field(default_factory=list)
    judgements: list[PlannedJudgement] = field(default_factory=list)

    @property
    def jobs(self) -> list[JudgeJob]:
        return [j.job for j in self.judgements]


def score_deterministic(rubric: Rubric, loaded: LoadedTrajectory, world: WorldState | None = None) -> TrajectoryResult:
    """Score the axes that need no model. A bad snapshot makes that axis 'error', not a crash."""
    trajectory = loaded.trajectory
    world = world or WorldState(loaded)
    result = TrajectoryResult(
        trajectory_id=trajectory.id,
        rubric=rubric.ref,
        rubric_sha256=rubric.sha256(),
        source=loaded.source,
        metadata=trajectory.metadata,
    )
    for axis in axes_of(rubric):
        if not axis.deterministic:
            continue
        try:
            result.axes[axis.name] = axis.score(axis.criteria(rubric), trajectory, world)
        except InputError as exc:
            result.axes[axis.name] = axis.error(str(exc))
    return result


def judge_spec_for(rubric: Rubric, axis: str, suite_judge: JudgeSpec | None, override: JudgeOverride) -> JudgeSpec:
    """The rubric's judge, else the suite's, else one named only on the command line."""
    spec = rubric.judge or suite_judge
    if spec is None and override.model:
        spec = JudgeSpec(model=override.model)
    if spec is None:
        raise ConfigError(
            f"rubric {rubric.ref} needs a judge for {axis} but none is configured: add `judge:` "
            "to the suite or the rubric, or pass --judge-model"
        )
    return spec


def _selector(select: Select) -> Callable[[Trajectory], bool]:
    if select is None:
        return lambda trajectory: True
    if callable(select):
        return select
    ids = frozenset(select)
    return lambda trajectory: trajectory.id in ids


class Planner:
    """Plans trajectories one at a time, resolving each judge once for the whole run."""

    def __init__(self, loaded: LoadedSuite, *, override: JudgeOverride | None = None, allow_floating: bool = False,
                 repeats: int = 1):
        if repeats < 1:
            raise ValueError("repeats must be at least 1")
        self.loaded = loaded
        self.override = override or JudgeOverride()
        self.repeats = repeats
        self.resolver = JudgeResolver(override=self.override,
                                      allow_floating=allow_floating or loaded.suite.allow_floating)
        self._judges: dict[tuple[str, str], tuple[JudgeSpec, JudgeTarget]] = {}  # (rubric, axis) -> its judge

    def judge_for(self, rubric: Rubric, axis: str) -> tuple[JudgeSpec, JudgeTarget]:
        """The judge of ``axis`` under ``rubric``, as configured and as resolved: once per run
        (the suite, its rubrics and the override do not change while it is planned)."""
        if (found := self._judges.get((rubric.ref, axis))) is None:
            spec = judge_spec_for(rubric, axis, self.loaded.suite.judge, self.override)
            found = self._judges[(rubric.ref, axis)] = (spec, self.resolver.resolve(spec))
        return found

    def add(self, plan: RunPlan, rubric: Rubric, item: LoadedTrajectory) -> None:
        world = WorldState(item)
        result = score_deterministic(rubric, item, world)
        index = len(plan.items)
        plan.items.append(result)
        line_sha256: str | None = None
        for axis in judged_axes(rubric):
            if axis.name in result.axes and result.axes[axis.name].status == "error":
                continue  # bad input already recorded; nothing to judge
            spec, target = self.judge_for(rubric, axis.name)
            try:
                prompt = axis.prompt(rubric, item, world, spec.show_output_for_task_success, target.spec.answer_form)
            except InputError as exc:  # the prompt shows a world that cannot be read
                result.axes[axis.name] = axis.error(str(exc))
                continue
            # A prompt that shows no world is a function of the trajectory's line (and of the
            # rubric, the judge and the code, which the fingerprint covers): the line names it.
            if not axis.prompt_reads_world and line_sha256 is None:
                line_sha256 = item.line_sha256
            for repeat in range(self.repeats):
                job = JudgeJob(rubric, axis.name, prompt, target, repeat,
                               inputs_sha256=None if axis.prompt_reads_world else line_sha256)
                # Hashing is planning's work, and it travels with the job: the fingerprint, which
                # the store's memo may answer without rendering, or else the key itself.
                if job.fingerprint is None:
                    job.key
                plan.judgements.append(PlannedJudgement(index, axis.name, repeat, job))


def iter_plans(
    loaded: LoadedSuite,
    *,
    select: Select = None,
    repeats: int = 1,
    override: JudgeOverride | None = None,
    allow_floating: bool = False,
    window: int = DEFAULT_WINDOW,
) -> Iterator[RunPlan]:
    """The run's plan in windows of at most ``window`` trajectories, in suite order."""
    check_registration(loaded)  # scored criteria must be exactly as pre-registered
    planner = Planner(loaded, override=override, allow_floating=allow_floating, repeats=repeats)
    wanted = _selector(select)
    plan = RunPlan()
    for rubric, item in iter_trajectories_of(loaded):
        if not wanted(item.trajectory):
            continue
        planner.add(plan, rubric, item)
        if len(plan.items) >= window:
            yield plan
            plan = RunPlan()
    if plan.items:
        yield plan


def plan_run(
    loaded: LoadedSuite,
    *,
    select: Select = None,
    repeats: int = 1,
    override: JudgeOverride | None = None,
    allow_floating: bool = False,
) -> RunPlan:
    """The whole run's plan at once (for suites that fit in memory; ``iter_plans`` streams)."""
    whole = RunPlan()
    for part in iter_plans(loaded, select=select, repeats=repeats, override=override,
                           allow_floating=allow_floating, window=2**62):
        whole = part
    return whole


def iter_deterministic(loaded: LoadedSuite) -> Iterator[TrajectoryResult]:
    """Deterministic axes only, streamed in suite order (no judge resolved, nothing planned)."""
    check_registration(loaded)
    for rubric, item in iter_trajectories_of(loaded):
        yield score_deterministic(rubric, item)
