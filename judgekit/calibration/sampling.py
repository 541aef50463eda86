"""The labelling sample: reproducible, blind, optionally stratified by the judge's verdicts.

Every trajectory gets a rank, ``sha256("<seed>:<trajectory id>")``, so the same suite, seed and
N give the same sample whatever the order of files, dicts or sets and whatever
``PYTHONHASHSEED`` is. Without judge verdicts the N lowest ranks are the sample. With a run
record (``judgekit run --out``) the trajectories are split by the judge's verdict on the first
labelled axis the judge scored (task success before faithfulness; a faithfulness score counts as
pass at ``score >= threshold``, as calibration binarises it). Each class gets N // 2, the odd one
going to judge-fail; a class short of its share is made up from the other, and trajectories
without a judge verdict fill what is still missing. Within a class the lowest ranks win.

Items this labeler already labelled are left out, so running the same command again resumes.
The terminal session that shows the sample is ``judgekit.calibration.labelling``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from judgekit.axes.table import axis_named, judged_axes
from judgekit.calibration.labels import AXES, Label, load_labels
from judgekit.errors import InputError
from judgekit.rubric.model import Rubric
from judgekit.trajectory import LoadedTrajectory

if TYPE_CHECKING:
    from judgekit.run.record import RunRecord

PASS, FAIL, NO_VERDICT = "pass", "fail", "none"


# --- the sample --------------------------------------------------------------------------------


def rank(seed: int, trajectory_id: str) -> str:
    """The trajectory's place in the seeded order: independent of any iteration order."""
    return hashlib.sha256(f"{seed}:{trajectory_id}".encode()).hexdigest()


def allocate(n: int, sizes: dict[str, int]) -> dict[str, int]:
    """How many to draw from each class: half pass, half fail (odd one to fail), shortfalls
    made up from the other class, then from trajectories without a verdict."""
    want_fail = min(sizes.get(FAIL, 0), n - n // 2)
    want_pass = min(sizes.get(PASS, 0), n // 2)
    want_fail += min(sizes.get(FAIL, 0) - want_fail, n // 2 - want_pass)
    want_pass += min(sizes.get(PASS, 0) - want_pass, n - want_fail - want_pass)
    rest = min(sizes.get(NO_VERDICT, 0), n - want_pass - want_fail)
    return {PASS: want_pass, FAIL: want_fail, NO_VERDICT: rest}


def draw_sample(ids: Iterable[str], n: int, seed: int, classes: dict[str, str] | None = None) -> list[str]:
    """N trajectory ids in rank order; stratified by ``classes`` (id -> pass/fail) when given."""
    ranked = sorted(set(ids), key=lambda tid: (rank(seed, tid), tid))
    if classes is None:
        return ranked[:n]
    pools: dict[str, list[str]] = {PASS: [], FAIL: [], NO_VERDICT: []}
    for tid in ranked:
        pools[classes.get(tid, NO_VERDICT)].append(tid)
    counts = allocate(n, {name: len(pool) for name, pool in pools.items()})
    chosen = {tid for name, pool in pools.items() for tid in pool[: counts[name]]}
    return [tid for tid in ranked if tid in chosen]


def judge_classes(record: RunRecord, refs: dict[str, str], axis: str, threshold: float) -> dict[str, str]:
    """Trajectory id -> the judge's pass/fail on ``axis`` in a run record, for trajectories whose
    result was scored by a judge under the rubric the suite has now (``refs``: id -> id@version)."""
    classes: dict[str, str] = {}
    for result in record.results:
        verdict = result.axes.get(axis)
        if refs.get(result.trajectory_id) != result.rubric or verdict is None:
            continue
        if verdict.source != "judge" or verdict.status != "scored":
            continue
        spec = axis_named(axis)
        value = spec.value(verdict)
        passed = bool(value) if spec.binary else value is not None and value >= threshold
        classes[result.trajectory_id] = PASS if passed else FAIL
    return classes


# --- what is left to label ---------------------------------------------------------------------


@dataclass(frozen=True)
class Task:
    """One sampled trajectory and the axes this labeler has still to label on it."""

    rubric: Rubric
    loaded: LoadedTrajectory
    axes: tuple[str, ...]
    labels_path: Path


@dataclass
class Plan:
    tasks: list[Task]
    total: int = 0
    """Items (trajectory, axis) in the sample."""
    done: int = 0
    """Of those, already labelled by this labeler."""
    notes: list[str] = field(default_factory=list)


def kind_of(axis: str) -> str:
    """A binary axis is labelled pass/fail; a graded one with a score in [0, 1]."""
    return axis_named(axis).kind


def default_labels_path(rubric: Rubric, calibration_dir: Path) -> Path:
    """``<calibration_dir>/<rubric-id>/labels.jsonl``, where ``judgekit calibrate`` reads them."""
    return calibration_dir / rubric.id / "labels.jsonl"


def read_existing(path: Path) -> list[Label]:
    """The labels already in ``path`` (none when it does not exist); a bad line is an InputError."""
    return load_labels(path) if path.exists() else []


def _axes_per_rubric(rubrics: Iterable[Rubric], axes: Sequence[str], notes: list[str]) -> dict[str, tuple[str, ...]]:
    """id@version -> the axes to label: those asked for (default: the judged ones) it has."""
    axes_of: dict[str, tuple[str, ...]] = {}
    for rubric in rubrics:
        if rubric.ref in axes_of:
            continue
        wanted = [a for a in AXES if a in axes] if axes else [a.name for a in judged_axes(rubric)]
        axes_of[rubric.ref] = tuple(a for a in wanted if axis_named(a).criteria(rubric) is not None)
        if len(axes_of[rubric.ref]) < len(wanted):
            missing = ", ".join(a for a in wanted if a not in axes_of[rubric.ref])
            notes.append(f"rubric {rubric.ref} has no {missing} section; its trajectories are not labelled on it")
    return axes_of


def _stratify_by(record: RunRecord, refs: dict[str, str], label_axes: list[str], threshold: float,
                 notes: list[str]) -> dict[str, str] | None:
    """The judge's classes on the first labelled axis it scored, or None (said in ``notes``)."""
    for axis in label_axes:
        found = judge_classes(record, refs, axis, threshold)
        if found:
            rule = "passed" if axis_named(axis).binary else f"score >= {threshold} counts as pass"
            notes.append(f"sample stratified by the judge's {axis} verdict ({rule}); "
                         "the split is not shown, to keep labelling blind")
            return found
    notes.append(f"the run record has no judge verdict on {'/'.join(label_axes)} for this "
                 "suite's trajectories (under these rubric versions); plain seeded sample")
    return None


def plan(
    pairs: Sequence[tuple[Rubric, LoadedTrajectory]],
    *,
    n: int,
    seed: int,
    labeler: str,
    axes: Sequence[str] = (),
    labels_path: Callable[[Rubric], Path],
    record: RunRecord | None = None,
    threshold: float = 0.5,
    read: Callable[[Path], list[Label]] = read_existing,
) -> Plan:
    """Draw the sample and drop the items ``labeler`` has already labelled.

    ``axes`` empty means each rubric's judged axes. Every labels file involved is read (and
    checked) through ``read`` before anything is written; a session passes ``LabelFiles.read``,
    which locks each file first.
    """
    if not labeler.strip():
        raise InputError("the labeler's name is empty: say who labels with --labeler NAME")
    notes: list[str] = []
    axes_of = _axes_per_rubric([rubric for rubric, _ in pairs], axes, notes)
    candidates = {item.trajectory.id: (rubric, item) for rubric, item in pairs if axes_of[rubric.ref]}
    if not candidates:
        hint = "name axes with --axis" if not axes else "choose axes the suite's rubrics have"
        raise InputError(f"nothing to label: no rubric of the suite has a {'/'.join(axes) or 'judged'} axis; {hint}")
    if n > len(candidates):
        notes.append(f"the suite has {len(candidates)} trajectories to label; labelling all of them, not {n}")
    classes = None
    if record is not None:
        refs = {tid: rubric.ref for tid, (rubric, _) in candidates.items()}
        label_axes = [a for a in AXES if any(a in have for have in axes_of.values())]
        classes = _stratify_by(record, refs, label_axes, threshold, notes)

    existing: dict[Path, list[Label]] = {}
    for rubric, _ in candidates.values():
        path = labels_path(rubric)
        if path not in existing:
            existing[path] = read(path)
    done = {(lab.trajectory_id, lab.axis) for labels in existing.values() for lab in labels if lab.labeler == labeler}
    kinds = {(lab.trajectory_id, lab.axis): (path, lab) for path, labels in existing.items() for lab in labels}

    result = Plan(tasks=[], notes=notes)
    for tid in draw_sample(candidates, n, seed, classes):
        rubric, item = candidates[tid]
        have = axes_of[rubric.ref]
        left = tuple(a for a in have if (tid, a) not in done)
        for axis in left:
            path, other = kinds.get((tid, axis), (None, None))
            if other is not None and other.kind != kind_of(axis):
                raise InputError(f"{other.labeler!r} labelled {tid!r} on {axis} as a {other.kind} item; "
                                 f"this tool labels it {kind_of(axis)}: label it with another labels file", path)
        result.total += len(have)
        result.done += len(have) - len(left)
        if left:
            result.tasks.append(Task(rubric, item, left, labels_path(rubric)))
    return result
