"""Score a whole suite: deterministic axes, then judge axes through the cache and the judge."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from judgekit.cache import DEFAULT_CACHE_DIR, VerdictCache
from judgekit.checks.judged import faithfulness_from_verdict, task_success_with_verdict
from judgekit.checks.world_state import WorldState
from judgekit.errors import ConfigError, InputError
from judgekit.judge.backend import LitellmBackend
from judgekit.judge.jobs import JudgeJob, JudgeRunner, Ledger
from judgekit.judge.resolve import JudgeOverride, JudgeResolver
from judgekit.judge.spec import JudgeSpec
from judgekit.prompt import build_prompt
from judgekit.results import TaskSuccessResult, TrajectoryResult
from judgekit.rubric import Rubric
from judgekit.runner import check_registration, iter_trajectories_of, score_deterministic
from judgekit.suite import Budget, LoadedSuite
from judgekit.trajectory import LoadedTrajectory


@dataclass
class RunOptions:
    override: JudgeOverride = field(default_factory=JudgeOverride)
    allow_floating: bool = False
    concurrency: int | None = None
    cache_dir: Path | None = None
    use_cache: bool = True
    budget: Budget | None = None
    backend: LitellmBackend | None = None
    progress: Callable[[int], Callable[[], None]] | None = None  # total -> per-verdict tick
    only_ids: set[str] | None = None  # calibration: just the labelled trajectories
    repeats: int = 1  # calibration: ask each judge question this many times (flip rate)


@dataclass
class _Pending:
    result: TrajectoryResult
    axis: str
    job: JudgeJob


def prompt_for(rubric: Rubric, axis: str, loaded: LoadedTrajectory, world: WorldState, show_output: bool):
    criteria = getattr(rubric, axis)
    diff = None
    if axis == "task_success" and world.present:
        diff = world.diff
    quote = {"min_quote_chars": criteria.min_quote_chars} if axis == "faithfulness" else {}
    return build_prompt(axis, criteria.guide, loaded.trajectory, diff, show_output=show_output, **quote)


def _judge_spec(rubric: Rubric, axis: str, suite_judge: JudgeSpec | None, override: JudgeOverride) -> JudgeSpec:
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


def score_suite(loaded: LoadedSuite, options: RunOptions | None = None) -> tuple[list[TrajectoryResult], Ledger | None]:
    """Results in suite order (repeat 0), and the judge ledger (None when nothing was judged)."""
    results, ledger, _ = score_suite_with_repeats(loaded, options)
    return results, ledger


def score_suite_with_repeats(
    loaded: LoadedSuite, options: RunOptions | None = None
) -> tuple[list[TrajectoryResult], Ledger | None, dict[tuple[str, str, int], object]]:
    """Like score_suite, plus every repeat's axis result keyed by (trajectory id, axis, repeat)."""
    options = options or RunOptions()
    check_registration(loaded)  # scored criteria must be exactly as pre-registered
    suite = loaded.suite
    results: list[TrajectoryResult] = []
    pending: list[_Pending] = []
    with ExitStack() as stack:
        resolver = JudgeResolver(stack, override=options.override, allow_floating=options.allow_floating or suite.allow_floating)
        for rubric, item in iter_trajectories_of(loaded):
            if options.only_ids is not None and item.trajectory.id not in options.only_ids:
                continue
            world = WorldState(item)
            result = score_deterministic(rubric, item, world)
            results.append(result)
            for axis in rubric.judged_axes():
                if axis in result.axes and result.axes[axis].status == "error":
                    continue  # bad input already recorded; nothing to judge
                spec = _judge_spec(rubric, axis, suite.judge, options.override)
                judge = resolver.resolve(spec)
                try:
                    prompt = prompt_for(rubric, axis, item, world, spec.show_output_for_task_success)
                except InputError as exc:  # only task success reads the world for its prompt
                    result.axes[axis] = TaskSuccessResult(status="error", error=str(exc))
                    continue
                for repeat in range(options.repeats):
                    pending.append(_Pending(result, axis, JudgeJob(rubric, axis, prompt, judge, repeat)))
        if not pending:
            return results, None, {}
        cache = None
        if options.use_cache:
            cache_dir = options.cache_dir or (loaded.resolve(suite.cache_dir) if suite.cache_dir else DEFAULT_CACHE_DIR)
            cache = stack.enter_context(VerdictCache(cache_dir))
        runner = JudgeRunner(
            backend=options.backend,
            cache=cache,
            concurrency=options.concurrency or suite.concurrency,
            budget=options.budget or suite.budget,
            on_done=options.progress(len(pending)) if options.progress else None,
        )
        verdicts = asyncio.run(runner.run([p.job for p in pending]))
    repeats: dict[tuple[str, str, int], object] = {}
    for item, verdict in zip(pending, verdicts):
        if item.axis == "faithfulness":
            prompt = item.job.prompt
            axis_result = faithfulness_from_verdict(verdict, prompt.evidence, item.job.rubric.faithfulness, prompt.output)
        else:
            axis_result = task_success_with_verdict(item.result.axes["task_success"], verdict)
        repeats[(item.result.trajectory_id, item.axis, item.job.repeat)] = axis_result
        if item.job.repeat == 0:
            item.result.axes[item.axis] = axis_result
    return results, runner.ledger, repeats
