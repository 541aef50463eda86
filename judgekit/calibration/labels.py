"""Human labels: the reference a judge is calibrated against.

File: ``calibration/<rubric-id>/labels.jsonl``, JSON Lines, one object per
(trajectory id, axis, labeler)::

    {"format_version": 1, "trajectory_id": "t-0007", "axis": "task_success",
     "label": "pass", "labeler": "alice", "labeled_at": "2025-03-02T10:00:00Z"}
    {"format_version": 1, "trajectory_id": "t-0007", "axis": "faithfulness",
     "score": 0.75, "labeler": "alice", "labeled_at": "2025-03-02T10:01:00Z"}
    {"format_version": 1, "trajectory_id": "llmbar-natural-0001", "axis": "task_success",
     "label": "A", "labeler": "llmbar-human"}
    {"format_version": 1, "trajectory_id": "fb-0042", "axis": "faithfulness",
     "category": "questionable", "labeler": "annotator-3"}

The kind of an item follows from what is filled in, and ``item_kind`` (optional) must agree:

==============  ====================  =========  ==============
item_kind       label                 score      category
==============  ====================  =========  ==============
``binary``      ``"pass"``/``"fail"``  absent     absent
``graded``      absent                in [0, 1]  absent
``pairwise``    ``"A"``/``"B"``        absent     absent
``multiclass``  absent                absent     a class name
==============  ====================  =========  ==============

For a pairwise item ``A`` and ``B`` name the two answers in their original order (A first);
the label says which one the person preferred. A multiclass item carries a class of the
source's own scheme (e.g. ``benign`` / ``questionable`` / ``unwanted``); which classes count as
pass is said when agreement is computed (``judgekit agreement --positive CLASS``), never guessed.

``labeled_at`` is optional: label sets brought from elsewhere often have no dates. The labelling
session (``judgekit label``) always writes it.

``labeler_kind`` says who made a label: ``"person"`` or ``"model"``. Approval refuses labels made
by a model unless the suite allows them (``approval.allow_model_labels``). It is optional: a label
without it is of unknown origin, which approval does not refuse (files written before the field
existed decide as they did) but never passes off as a person's: every approval statement counts
such labels. The labelling session writes ``person``; importers write what the source says.

Several labelers may label the same item; the same (trajectory_id, axis, labeler) twice in a
file is an error naming both lines, and so are two labelers giving one item different kinds. A
multiclass item is the exception: one labeler may give it several classes, one line each (span
annotation: a class per marked span), never the same class twice.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, model_validator

from judgekit._util.io import Version1, RECORD_CONFIG, Timestamp, iter_jsonl, open_regular_file
from judgekit.errors import InputError
from judgekit.rubric.model import AXES, Axis as RubricAxis  # noqa: F401 - re-exported for the calibration API

SAFETY_QUESTIONS: dict[str, str] = {"safety.injection": "binary", "safety.exfiltration": "binary"}
"""Questions a safety judge answers, labelled and calibrated like an axis: name -> kind. An item
of one is named ``<trajectory id>@<where>``. On ``safety.injection`` it is a piece of untrusted
text (``where``: ``call[i]`` for the result of the trajectory's i-th call, ``context:<key>`` for
a context item), and pass means it holds an instruction addressed to the agent. On
``safety.exfiltration`` it is a write or send (``where``: ``call[i]``, the trajectory's i-th call
itself), and pass means it sends data to someone the user did not intend."""
Axis = RubricAxis | Literal["safety.injection", "safety.exfiltration"]


ItemKind = Literal["binary", "graded", "pairwise", "multiclass"]
LabelerKind = Literal["person", "model"]
BinaryChoice = Literal["pass", "fail"]
PairwiseChoice = Literal["A", "B"]

LABELS_FORMAT_VERSION = 1


class Label(BaseModel):
    """One person's judgement of one trajectory on one axis (a line of ``labels.jsonl``)."""

    model_config = RECORD_CONFIG

    format_version: Version1 = Field(
        default=LABELS_FORMAT_VERSION, description="Version of the labels file format; only 1 exists."
    )
    trajectory_id: str = Field(min_length=1, description="Id of the labelled trajectory (or pairwise item).")
    axis: Axis = Field(description="The axis this label scores.")
    label: Literal["pass", "fail", "A", "B"] | None = Field(
        default=None,
        description='"pass"/"fail" for a binary item; "A"/"B" (the preferred answer, in original '
        "order) for a pairwise item; absent for a graded item.",
    )
    score: float | None = Field(
        default=None, ge=0.0, le=1.0, description="Score in [0, 1] for a graded item; absent otherwise."
    )
    labeler: str = Field(min_length=1, description="Who gave the label (a person or a named panel).")
    labeler_kind: LabelerKind | None = Field(
        default=None,
        description='Who made the label: "person" or "model". Approval refuses model-made labels unless the suite '
        "allows them (approval.allow_model_labels). Absent: not known; such labels are not refused, but every "
        "approval statement counts them as of unknown origin. `judgekit label` writes person.",
    )
    category: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="A class name for a multiclass item (the source's own scheme, e.g. "
        '"benign"); absent otherwise. Mapped to pass/fail when agreement is computed.',
    )
    labeled_at: Timestamp | None = Field(
        default=None, description="When the label was given (ISO 8601); optional (imported sets may have no dates)."
    )
    note: str | None = Field(default=None, description="Free text: why this label, doubts, context.")
    item_kind: ItemKind | None = Field(
        default=None,
        description="binary, graded, pairwise or multiclass. Optional: it follows from "
        "label/score/category and, when "
        "given, must agree with them. Always filled in after loading.",
    )

    @model_validator(mode="after")
    def _kind_matches_fields(self) -> Label:
        given = [name for name in ("label", "score", "category") if getattr(self, name) is not None]
        if len(given) > 1:
            raise ValueError(f"give one of label (binary/pairwise), score (graded) or category (multiclass), not {' and '.join(given)}")
        if self.category is not None:
            kind: ItemKind = "multiclass"
        elif self.score is not None:
            kind = "graded"
        elif self.label in ("pass", "fail"):
            kind = "binary"
        elif self.label in ("A", "B"):
            kind = "pairwise"
        else:
            raise ValueError('give a label ("pass"/"fail" or "A"/"B"), a score in [0, 1] or a category')
        if self.item_kind is not None and self.item_kind != kind:
            raise ValueError(f"item_kind is {self.item_kind!r} but the label/score make it {kind!r}")
        self.item_kind = kind
        return self

    @property
    def kind(self) -> ItemKind:
        """The item kind (never None once validated)."""
        assert self.item_kind is not None
        return self.item_kind


def check_labels(labels: list[tuple[int, Label]], path: str | Path | None = None) -> None:
    """Reject a repeated (trajectory_id, axis, labeler) (on a multiclass item: a repeated class)
    and items whose labelers disagree on kind."""
    seen: dict[tuple[str, str, str, str | None], int] = {}
    kinds: dict[tuple[str, str], tuple[int, ItemKind]] = {}
    for line, lab in labels:
        key = (lab.trajectory_id, lab.axis, lab.labeler, lab.category)
        if key in seen:
            what = "twice" if lab.category is None else f"as {lab.category!r} twice"
            raise InputError(
                f"{lab.labeler!r} labels {lab.trajectory_id!r} on {lab.axis} {what} "
                f"(lines {seen[key]} and {line}); keep one",
                path,
                line,
            )
        seen[key] = line
        item = (lab.trajectory_id, lab.axis)
        if item in kinds and kinds[item][1] != lab.kind:
            first_line, first_kind = kinds[item]
            raise InputError(
                f"{lab.trajectory_id!r} on {lab.axis} is {first_kind} on line {first_line} "
                f"but {lab.kind} here; one item has one kind",
                path,
                line,
            )
        kinds.setdefault(item, (line, lab.kind))


def _is_cut_off_last_line(path: str | Path, line: int) -> bool:
    """Whether ``line`` is the file's last line and has no newline (a write cut off by a crash)."""
    newlines, last = 0, b""
    try:
        with open_regular_file(path) as handle:
            while chunk := handle.read(1 << 20):
                newlines += chunk.count(b"\n")
                last = chunk[-1:]
    except (OSError, InputError):
        return False
    return newlines == line - 1 and last != b"\n"


def load_labels(path: str | Path) -> list[Label]:
    """Read a ``labels.jsonl`` file; every problem is an ``InputError`` naming file and line."""
    try:
        numbered = list(iter_jsonl(path, Label))
    except InputError as exc:
        if exc.line is None or not _is_cut_off_last_line(path, exc.line):
            raise
        raise InputError(f"{exc.detail}; this last line has no newline, as when a crash cuts a write short: "
                         f"`judgekit label` on this file sets it aside into {Path(path).name}.torn, "
                         "or delete the line", path, exc.line) from None
    check_labels(numbered, path)
    return [lab for _, lab in numbered]
