"""Human labelling: the sample (``judgekit.calibration.sampling``) shown blind, one label
appended at a time.

The person labels the sample in rank order, so the order says nothing about the classes, and
never sees the judge's verdict, the trajectory's metadata, or the sample's split.

Every label is appended to ``labels.jsonl`` (by default ``<calibration_dir>/<rubric-id>/``, the
suite's calibration folder) the moment it is given: append, flush, fsync, never a rewrite. Items
this labeler already labelled are skipped, so running the same command again resumes.

A session holds each labels file locked from before it reads it until it ends, and sets a torn
last line aside (``judgekit.calibration.labels_file``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from judgekit._util import clock as _time
from judgekit._util.text import one_line, printable, redact
from judgekit.axes.table import axis_named
from judgekit.calibration.labels import Label
from judgekit.calibration.labels_file import append_label
from judgekit.calibration.sampling import FAIL, PASS, Plan, Task
from judgekit.errors import InputError
from judgekit.trajectory import LoadedTrajectory

if TYPE_CHECKING:
    pass

RESULT_CHARS = 4000  # a tool result longer than this is cut, saying so
QUIT = object()
SKIP = object()


# --- what the person sees ----------------------------------------------------------------------


def _as_text(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)
    if len(text) > RESULT_CHARS:
        text = text[:RESULT_CHARS] + f" ... ({len(text) - RESULT_CHARS} more characters)"
    return text


def end_state(loaded: LoadedTrajectory) -> str:
    from judgekit.trajectory import WorldState
    from judgekit.world.diff import render_text

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
        label = Label(trajectory_id=task.loaded.trajectory.id, axis=axis, labeler=labeler, labeler_kind="person",
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
