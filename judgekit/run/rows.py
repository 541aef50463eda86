"""A run's results as compare reads them: one ``AxisRow`` per trajectory and axis (its status,
score and what it lost), gathered by run in ``RunRows``. A run builds them as it scores, a record
read back rebuilds them (``judgekit.run.remeasure``), and the history stores exactly these rows;
``judgekit.ci.compare`` reads them."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from judgekit.axes.table import axis_named
from judgekit.results import TrajectoryResult

Status = Literal["scored", "unscored", "error"]

FULL_MARKS = 1.0 - 1e-9
"""A graded score at or above this has full marks: the "pass" of a graded axis per trajectory."""

Status = Literal["scored", "unscored", "error"]


@dataclass(frozen=True, slots=True)
class AxisRow:
    """One trajectory on one axis, as a comparison reads it."""

    trajectory_id: str
    axis: str
    status: Status
    score: float | None = None
    lost: tuple[tuple[str, str], ...] = ()
    """(what, why) for each failed check, lost point or unsupported claim."""
    note: str | None = None
    """Why it is not scored: the unscored reason or the error."""
    judge: str | None = None
    """The fingerprint of the judge that took part, if one did."""

    @property
    def passed(self) -> bool | None:
        """Pass/fail of a scored row: a binary axis's pass, a graded axis's full marks."""
        return None if self.score is None or self.status != "scored" else self.score >= FULL_MARKS


_IDENTITIES: dict[tuple, str] = {}


def judge_fingerprint(provenance) -> str:
    """The fingerprint of the judge behind a verdict (worked out once per judge)."""
    from judgekit.calibration.approval_record import JudgeIdentity

    key = (provenance.model_pin, provenance.endpoint, provenance.rubric, provenance.rubric_sha256,
           provenance.template_sha256, repr(sorted(provenance.parameters.items())))
    found = _IDENTITIES.get(key)
    if found is None:
        found = _IDENTITIES[key] = JudgeIdentity.of(provenance).fingerprint
    return found


def rows_of(result: TrajectoryResult) -> Iterator[AxisRow]:
    """The rows of one trajectory's result, one per axis it was scored on."""
    for name, res in result.axes.items():
        axis = axis_named(name)
        judge = judge_fingerprint(res.judge) if res.judge is not None else None
        if res.status == "scored":
            yield AxisRow(result.trajectory_id, name, "scored", res.score, tuple(axis.lost(res)), None, judge)
        else:
            note = res.unscored_reason if res.status == "unscored" else res.error
            yield AxisRow(result.trajectory_id, name, res.status, None, (), note, judge)


@dataclass
class RunRows:
    """A run as a comparison reads it: what identifies it, and its rows by axis and trajectory."""

    run_id: str
    suite: str
    started_at: datetime | None = None
    git_commit: str | None = None
    trajectories: int = 0
    gate_passed: bool | None = None
    rows: dict[str, dict[str, AxisRow]] = field(default_factory=dict)
    """Axis -> trajectory id -> row."""
    judges: dict[str, dict[str, str]] = field(default_factory=dict)
    """Judge fingerprint -> axis -> 'approved' | 'advisory', as the run's gate saw it."""
    ids: set[str] = field(default_factory=set)
    """Every trajectory id of the run."""
    rubrics: dict[str, str] = field(default_factory=dict)
    """Rubric id@version -> the hash it was scored under (the rubric lock's hash)."""

    def add(self, row: AxisRow) -> None:
        self.rows.setdefault(row.axis, {})[row.trajectory_id] = row
        self.ids.add(row.trajectory_id)

    def advisory(self, axis: str) -> bool:
        """Whether nothing of this axis gated: every row has a judge, none of them approved
        for it, and the axis keeps no deterministic part that gates in its place."""
        rows = self.rows.get(axis, {})
        if not rows or axis_named(axis).has_fallback:
            return False
        return all(row.judge is not None and self.judges.get(row.judge, {}).get(axis) != "approved"
                   for row in rows.values())
