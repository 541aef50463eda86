"""The spot check: re-ask a sample of an approval's recorded calibration questions.

An approval rests on its labels file and its verdicts file (``judgekit.calibration.evidence``);
whoever can rewrite both can still forge one. The nightly job can catch it, and catch a model
that drifted behind its pin. The spot check (``judgekit.run.calibrate.spot_check``, a run) plans
the labelled items exactly as calibration does (the same questions, under the same cache keys),
finds the approval of the judge the suite names today, and

- lists labelled items the plan asks about that have no recorded verdict (dropped from the
  verdicts file), recorded verdicts whose question the plan does not ask (fabricated, or the
  trajectory, rubric or prompt changed since calibration), and recorded verdicts filed under
  another item than the question their key names (an answer moved to the item it fits);
- re-asks a seeded sample of the recorded questions, past the cache, and lists the answers that
  differ from the recorded ones.

Nothing is written: not the cache, not the approval.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from judgekit.calibration.verdicts import JudgeVerdictRecord

SCORE_TOLERANCE = 1e-9


@dataclass
class Difference:
    trajectory_id: str
    axis: str
    repeat: int
    recorded: str
    now: str


@dataclass
class RubricSpotCheck:
    """The spot check of one rubric's judge."""

    rubric: str
    fingerprint: str
    problem: str | None = None
    """Why nothing was checked (no approval for today's judge, no verdicts file)."""
    recorded: int = 0
    asked: int = 0
    same: int = 0
    differences: list[Difference] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    """Planned questions (trajectory id, axis) with no recorded verdict."""
    unknown: list[str] = field(default_factory=list)
    """Recorded verdicts whose question the plan does not ask."""
    misplaced: list[str] = field(default_factory=list)
    """Recorded verdicts filed under another item or axis than the question their key names."""

    @property
    def clean(self) -> bool:
        return (self.problem is None and not self.differences and not self.missing and not self.unknown
                and not self.misplaced)


def said(record: JudgeVerdictRecord) -> str:
    if not record.scored:
        return f"unscored ({record.unscored_reason})"
    return record.verdict if record.verdict is not None else f"score {record.score:.3f}"


def agree(a: JudgeVerdictRecord, b: JudgeVerdictRecord) -> bool:
    if a.scored != b.scored:
        return False
    if not a.scored:
        return True
    if a.verdict != b.verdict:
        return False
    return (a.score is None) == (b.score is None) and (a.score is None or abs(a.score - b.score) <= SCORE_TOLERANCE)
