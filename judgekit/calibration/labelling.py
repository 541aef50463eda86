"""Human labelling: a reproducible sample of a suite, shown blind, one label appended at a time.

The sample. Every trajectory gets a rank, ``sha256("<seed>:<trajectory id>")``, so the same
suite, seed and N give the same sample whatever the order of files, dicts or sets and whatever
``PYTHONHASHSEED`` is. Without judge verdicts the N lowest ranks are the sample. With a run
record (``judgekit run --out``) the trajectories are split by the judge's verdict on the first
labelled axis the judge scored (task success before faithfulness; a faithfulness score counts as
pass at ``score >= threshold``, as calibration binarises it). Each class gets N // 2, the odd one
going to judge-fail; a class short of its share is made up from the other, and trajectories
without a judge verdict fill what is still missing. Within a class the lowest ranks win.

The person labels the sample in rank order, so the order says nothing about the classes, and
never sees the judge's verdict, the trajectory's metadata, or the sample's split.

Every label is appended to ``labels.jsonl`` (by default ``<calibration_dir>/<rubric-id>/``, the
suite's calibration folder) the moment it is given: append, flush, fsync, never a rewrite. Items
this labeler already labelled are skipped, so running the same command again resumes.

A session holds each labels file locked from before it reads it until it ends, and sets a torn
last line aside (``judgekit.calibration.labels_file``).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from judgekit import _time
from judgekit._text import one_line, printable, redact
from judgekit.axes import axis_named, judged_axes
from judgekit.calibration.labels import AXES, Label, load_labels
from judgekit.calibration.labels_file import append_label
from judgekit.errors import InputError
from judgekit.rubric import Rubric
from judgekit.trajectory import LoadedTrajectory

if TYPE_CHECKING:
    from judgekit.run.record import RunRecord

PASS, FAIL, NO_VERDICT = "pass", "fail", "none"
RESULT_CHARS = 4000  # a tool result longer than this is cut, saying so
QUIT = object()
SKIP = object()


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


# --- what the person sees ----------------------------------------------------------------------


def _as_text(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)
    if len(text) > RESULT_CHARS:
        text = text[:RESULT_CHARS] + f" ... ({len(text) - RESULT_CHARS} more characters)"
    return text


def end_state(loaded: LoadedTrajectory) -> str:
    from judgekit.checks.world_state import WorldState
    from judgekit.diff import render_text

    world = WorldState(loaded)
    if not world.present:
        return "(no world snapshots)"
    try:
        return render_text(world.diff)
    except InputError as exc:
        return f"(the world snapshots could not be compared: {exc})"


def sections(loaded: LoadedTrajectory) -> list[tuple[str, str]]:
    """What a person needs to judge a trajectory, and nothing about how anyone judged it: no
    verdict, no metadata (it may hold the expected outcome)."""
    trajectory = loaded.trajectory
    calls = []
    for number, call in enumerate(trajectory.calls, 1):
        calls.append(f"{number}. {call.tool} {_as_text(call.args)}")
        calls.append(f"   ERROR: {call.error}" if call.error is not None else f"   -> {_as_text(call.result)}")
    parts = [("Task", trajectory.prompt), ("End-state diff", end_state(loaded)),
             (f"Calls ({len(trajectory.calls)})", "\n".join(calls) or "(no calls)")]
    if trajectory.context:
        parts.append(("Context", "\n".join(f"[{key}] {text}" for key, text in sorted(trajectory.context.items()))))
    parts.append(("Output", trajectory.output or "(empty)"))
    return [(title, printable(body)) for title, body in parts]


def question(axis: str) -> str:
    if axis_named(axis).binary:
        return "task_success: p = pass, f = fail (s skip, q quit): "
    return f"{axis} score in [0, 1], e.g. 1, 0.5, 0 (s skip, q quit): "


def parse_answer(axis: str, text: str) -> Any:
    """"pass"/"fail" for task success, a float in [0, 1] otherwise, SKIP, QUIT; None if invalid."""
    answer = text.strip().lower()
    if answer in ("s", "skip"):
        return SKIP
    if answer in ("q", "quit"):
        return QUIT
    if axis_named(axis).binary:
        return {"p": PASS, "pass": PASS, "f": FAIL, "fail": FAIL}.get(answer)
    try:
        score = float(answer)
    except ValueError:
        return None
    return score if math.isfinite(score) and 0.0 <= score <= 1.0 else None


class Terminal(Protocol):
    """Where the session talks to the person. ``ask`` raises EOFError / KeyboardInterrupt."""

    def section(self, title: str, body: str) -> None: ...
    def say(self, text: str) -> None: ...
    def ask(self, prompt: str) -> str: ...


class PlainTerminal:
    """Plain text through injected functions: pipes, logs, tests. Whatever is written has its
    control characters escaped and secrets masked, whoever built the text."""

    def __init__(self, write: Callable[[str], None], readline: Callable[[], str]):
        self._raw_write, self._readline = write, readline

    def _write(self, text: str) -> None:
        self._raw_write(redact(printable(text)))

    def section(self, title: str, body: str) -> None:
        self._write(f"-- {one_line(title)}\n{body}\n")

    def say(self, text: str) -> None:
        self._write(text + "\n")

    def ask(self, prompt: str) -> str:
        self._write(prompt)
        line = self._readline()
        if not line:
            raise EOFError
        return line.rstrip("\r\n")


class RichTerminal:
    """Panels on a real terminal. Trajectory text is never read as rich markup."""

    def __init__(self, console: Any = None):
        from rich.console import Console

        self._console = console or Console(highlight=False)

    def section(self, title: str, body: str) -> None:
        from rich.panel import Panel
        from rich.text import Text

        text = Text(redact(printable(body)))
        text.highlight_regex(r"(?m)^   ERROR: .*$", "bold red")  # failed calls stand out
        self._console.print(Panel(text, title=Text(redact(one_line(title)), style="bold"), title_align="left"))

    def say(self, text: str) -> None:
        from rich.text import Text

        self._console.print(Text(redact(printable(text))))

    def ask(self, prompt: str) -> str:
        from rich.text import Text

        return self._console.input(Text(prompt, style="bold cyan"))


# --- the session -------------------------------------------------------------------------------


@dataclass
class Outcome:
    labelled: int = 0
    skipped: int = 0
    left: int = 0
    stopped: bool = False
    """Quit or interrupted before the end."""

    def summary(self) -> str:
        if not self.left:
            return f"labelled {self.labelled}; every item of this sample is labelled"
        skipped = f", skipped {self.skipped}" if self.skipped else ""
        return f"labelled {self.labelled}{skipped}, {self.left} left; run the same command to resume"


class _Quit(Exception):
    """The person typed q."""


def utc_now() -> datetime:
    """Label times, to the second."""
    return _time.utc_now().replace(microsecond=0)


def _ask_axis(term: Terminal, axis: str) -> Any:
    while True:
        answer = parse_answer(axis, term.ask(question(axis)))
        if answer is not None:
            return answer
        term.say("expected p or f" if axis_named(axis).binary else "expected a number from 0 to 1")


def label_trajectory(task: Task, labeler: str, term: Terminal, now: Callable[[], datetime], outcome: Outcome,
                     append: Callable[[Path, Label], None] = append_label) -> None:
    for axis in task.axes:
        term.section(f"{axis}: guide", printable(axis_named(axis).criteria(task.rubric).guide.strip()))
        answer = _ask_axis(term, axis)
        if answer is QUIT:
            raise _Quit
        if answer is SKIP:
            outcome.skipped += 1
            continue
        note = term.ask("note (optional, Enter for none): ").strip() or None
        value = {"label": answer} if axis_named(axis).binary else {"score": answer}
        label = Label(trajectory_id=task.loaded.trajectory.id, axis=axis, labeler=labeler,
                      labeled_at=now(), note=note, **value)
        append(task.labels_path, label)
        outcome.labelled += 1
        outcome.left -= 1


def run_session(work: Plan, labeler: str, term: Terminal, now: Callable[[], datetime] = utc_now,
                append: Callable[[Path, Label], None] = append_label) -> Outcome:
    """Label every task; 'q', end of input or Ctrl-C stop cleanly with what was written kept.
    ``append`` writes each label (a session passes ``LabelFiles.append``, the locked files)."""
    outcome = Outcome(left=work.total - work.done)
    try:
        for number, task in enumerate(work.tasks, 1):
            term.say("")
            term.say(f"[{number}/{len(work.tasks)}] trajectory {one_line(task.loaded.trajectory.id)} "
                     f"(rubric {task.rubric.ref})")
            for title, body in sections(task.loaded):
                term.section(title, body)
            label_trajectory(task, labeler, term, now, outcome, append)
    except (_Quit, EOFError, KeyboardInterrupt):
        outcome.stopped = True
        term.say("")
    return outcome
