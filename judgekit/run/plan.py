"""Planning a run: every trajectory scored on the deterministic axes, every judge question built.

``plan_run`` is pure: it reads the suite, its rubrics, trajectories and snapshots, scores what
needs no model and builds each judge job (prompt, target, cache key), but it starts no server,
reads no API key and calls nothing. A plan pickles: it can be executed in another process or on
another machine, and it holds no secret. ``iter_plans`` cuts the same plan into windows of
trajectories so a run of millions never holds them all.
"""

from __future__ import annotations

import sqlite3
from array import array
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from judgekit._util.files import relative_to
from judgekit.axes.table import axes_of, axis_named, judged_axes
from judgekit.trajectory import WorldState
from judgekit.errors import ConfigError, InputError
from judgekit.judge.resolve import JudgeOverride, JudgeResolver
from judgekit.judge.spec import JudgeSpec
from judgekit.judge.target import JudgeTarget
from judgekit.rubric.lock import read_lock, verify
from judgekit.results import TrajectoryResult
from judgekit.rubric.model import Rubric
from judgekit.run.jobs import JudgeJob
from judgekit.suite import LoadedSuite
from judgekit.trajectory import LoadedTrajectory, Trajectory, iter_trajectories

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
    for axis in axes_of(rubric):
        if not axis.deterministic:
            continue
        try:
            result.axes[axis.name] = axis.score(axis.criteria(rubric), trajectory, world)
        except InputError as exc:
            result.axes[axis.name] = axis.error(str(exc))
    return result


class SeenIds:
    """Trajectory ids seen so far, kept as 64-bit hashes, never as the ids. ``add`` says whether
    the hash was there already; a repeat is then confirmed or ruled out (a collision, about 1 in
    10^7 at a million ids) by reading the files again.

    The first ``memory_ids`` hashes live in one open-addressing table (at most 16 bytes an id,
    no object per id). Past that they move to a private temporary SQLite table on disk, read
    through a page cache of ``CACHE_KB``: a run of millions holds the same few megabytes as a
    run of a hundred thousand (about 3 us an id more, once there)."""

    MEMORY_IDS = 2**17
    CACHE_KB = 2048

    def __init__(self, capacity: int = 1024, *, memory_ids: int | None = None):
        self._table = array("q", bytes(8 * capacity))
        self._mask = capacity - 1
        self._count = 0
        self._memory_ids = self.MEMORY_IDS if memory_ids is None else memory_ids
        self._db: sqlite3.Connection | None = None

    def add(self, tid: str) -> bool:
        digest = hash(tid) or 1  # 0 marks an empty slot
        if self._db is not None:
            changes = self._db.total_changes
            self._db.execute("INSERT OR IGNORE INTO seen VALUES (?)", (digest,))
            return self._db.total_changes == changes
        table, mask = self._table, self._mask
        slot = digest & mask
        while (held := table[slot]) != 0:
            if held == digest:
                return True
            slot = (slot + 1) & mask
        table[slot] = digest
        self._count += 1
        if self._count >= self._memory_ids:
            self._spill()
        elif self._count * 10 > len(table) * 7:
            self._grow()
        return False

    def close(self) -> None:
        """Let the temporary table go (its file is deleted with the connection)."""
        if self._db is not None:
            self._db.close()
            self._db = None

    def _grow(self) -> None:
        old = self._table
        self._table = array("q", bytes(16 * len(old)))
        self._mask = len(self._table) - 1
        table, mask = self._table, self._mask
        for digest in old:
            if digest:
                slot = digest & mask
                while table[slot] != 0:
                    slot = (slot + 1) & mask
                table[slot] = digest

    def _spill(self) -> None:
        # "" names a private temporary database: on disk, deleted when closed. Nothing here
        # needs to survive a crash, so no journal and no syncing.
        db = sqlite3.connect("", isolation_level=None, check_same_thread=False)
        for pragma in (f"cache_size=-{self.CACHE_KB}", "journal_mode=OFF", "synchronous=OFF"):
            db.execute(f"PRAGMA {pragma}")
        db.execute("CREATE TABLE seen(h INTEGER PRIMARY KEY)")
        db.execute("BEGIN")  # one transaction for the table's life: never committed, never synced
        db.executemany("INSERT INTO seen VALUES (?)", ((d,) for d in self._table if d))
        self._db, self._table, self._mask = db, array("q"), 0


def iter_trajectories_of(loaded: LoadedSuite) -> Iterator[tuple[Rubric, LoadedTrajectory]]:
    """Every trajectory of the suite with its rubric, in suite order; ids must be unique.

    Each carries the suite's snapshot policy: its snapshot files are read only from the
    suite's ``snapshots.roots``. Ids are remembered by hash (``SeenIds``): on a hash already
    seen the files are read again up to here to tell a real repeat (an error naming both
    places) from a collision.
    """
    seen = SeenIds()
    policy = loaded.snapshot_policy()
    try:
        for entry in loaded.suite.trajectories:
            rubric = loaded.rubric_for(entry.rubric)
            for item in iter_trajectories(loaded.resolve(entry.file), policy=policy):
                tid = item.trajectory.id
                if seen.add(tid) and (first := _first_use(loaded, tid, item)) is not None:
                    raise InputError(f"trajectory id {tid!r} already used at {first}", item.path, item.line)
                yield rubric, item
    finally:
        seen.close()


def _first_use(loaded: LoadedSuite, tid: str, here: LoadedTrajectory) -> str | None:
    """Where ``tid`` was first used before ``here``, or None (a hash collision)."""
    for entry in loaded.suite.trajectories:
        for item in iter_trajectories(loaded.resolve(entry.file)):
            if item.path == here.path and item.line == here.line:
                return None
            if item.trajectory.id == tid:
                return item.where
    return None


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
                 repeats: int = 1, show_output: bool = False):
        if repeats < 1:
            raise ValueError("repeats must be at least 1")
        self.loaded = loaded
        self.override = override or JudgeOverride()
        self.repeats = repeats
        self.show_output = show_output
        """Plan every judge as if it set ``show_output_for_task_success`` (``prompt show --show-output``)."""
        self.resolver = JudgeResolver(override=self.override,
                                      allow_floating=allow_floating or loaded.suite.allow_floating)
        self._relative: dict[Path, str] = {}  # trajectory file -> its path relative to the suite
        self._judges: dict[tuple[str, str], tuple[JudgeSpec, JudgeTarget]] = {}  # (rubric, axis) -> its judge

    def judge_for(self, rubric: Rubric, axis: str) -> tuple[JudgeSpec, JudgeTarget]:
        """The judge of ``axis`` under ``rubric``, as configured and as resolved: once per run
        (the suite, its rubrics and the override do not change while it is planned)."""
        if (found := self._judges.get((rubric.ref, axis))) is None:
            spec = judge_spec_for(rubric, axis, self.loaded.suite.judge, self.override)
            if self.show_output and not spec.show_output_for_task_success:
                spec = spec.model_copy(update={"show_output_for_task_success": True})
            found = self._judges[(rubric.ref, axis)] = (spec, self.resolver.resolve(spec))
        return found

    def add(self, plan: RunPlan, rubric: Rubric, item: LoadedTrajectory) -> None:
        world = WorldState(item)
        result = score_deterministic(rubric, item, world)
        if (file := self._relative.get(item.path)) is None:  # once per file, not per line
            file = self._relative[item.path] = relative_to(item.path, self.loaded.base_dir)
        result.source = f"{file}:{item.line}"  # compares across machines
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


def plan_question(loaded: LoadedSuite, trajectory_id: str, axis: str, *, override: JudgeOverride | None = None,
                  allow_floating: bool = False, show_output: bool = False) -> JudgeJob:
    """The question a run of ``loaded`` asks the judge of ``axis`` about ``trajectory_id``,
    planned as the run plans it (``Planner.add``): its prompt is exactly what that judge is
    sent, in its answer form's template. The lock is not checked (a rubric may be looked at
    before it is locked). ``show_output``: as if the judge set ``show_output_for_task_success``.

    InputError when the suite has no such trajectory, its rubric does not judge ``axis``, or a
    run would ask nothing (the axis could not be scored from its input: the error says why)."""
    chosen = axis_named(axis)
    planner = Planner(loaded, override=override, allow_floating=allow_floating, show_output=show_output)
    for rubric, item in iter_trajectories_of(loaded):
        if item.trajectory.id != trajectory_id:
            continue
        if chosen.criteria(rubric) is None or not chosen.judged(chosen.criteria(rubric)):
            raise InputError(f"rubric {rubric.ref} asks no judge about {axis}: a run sends no prompt for it",
                             loaded.rubric_files[rubric.ref])
        plan = RunPlan()
        planner.add(plan, rubric, item)
        for planned in plan.judgements:
            if planned.axis == axis:
                return planned.job
        # The axis could not be scored from its input: its error names the file that is wrong.
        raise InputError(f"{plan.items[0].axes[axis].error} (so a run asks the judge nothing about "
                         f"{trajectory_id!r} on {axis})")
    raise InputError(f"no trajectory {trajectory_id!r} in the suite", loaded.path)


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
