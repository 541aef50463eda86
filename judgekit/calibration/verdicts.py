"""Judge verdicts to calibrate: what a judge said about the labelled items.

File: JSON Lines, one object per (trajectory id, axis, order, repeat), produced by a judge run
elsewhere::

    {"format_version": 1, "trajectory_id": "t-0007", "axis": "task_success",
     "verdict": "pass", "judge": "openai/gpt-4o-2024-08-06"}
    {"format_version": 1, "trajectory_id": "t-0007", "axis": "faithfulness",
     "score": 0.6, "judge": "openai/gpt-4o-2024-08-06", "repeat": 2}
    {"format_version": 1, "trajectory_id": "llmbar-natural-0001", "axis": "task_success",
     "verdict": "B", "order": "swapped", "judge": "GPT-4/Vanilla_NoRules"}
    {"format_version": 1, "trajectory_id": "t-0008", "axis": "task_success",
     "verdict": null, "unscored_reason": "invalid_reply"}

What must be filled in depends on the item (its kind comes from the labels):

- binary or multiclass item: ``verdict`` "pass"/"fail" (``score`` optional, kept as the judge's
  confidence); or ``score`` alone, from a score-only detector: it is made pass/fail at the
  threshold of the agreement (pass when score >= threshold; ``judgekit agreement --threshold``)
  and counted in the report (``n_from_score``);
- graded item: ``score`` in [0, 1] (``verdict`` optional);
- pairwise item: ``verdict`` "A"/"B" naming the preferred answer by its ORIGINAL label (A is
  the answer shown first in the original order), whatever order the judge saw; ``order`` says
  which order that was ("original" or "swapped"; absent means "original").
- unscored: ``unscored_reason`` set, ``verdict`` and ``score`` absent. Such a verdict is counted
  apart and is never a pass, a fail or a preference.

``repeat`` numbers repeated runs of the same judge on the same item (for flip-rate analysis);
absent means repeat 0. The same (trajectory_id, axis, judge, order, repeat) twice in a file is an
error naming both lines.

One file may hold the verdicts of several judges (detectors), told apart by ``judge``; records
without ``judge`` belong to one unnamed judge. ``judgekit agreement`` reports every judge of the
file side by side; ``agreement()`` (and calibration) take one judge at a time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, model_validator

from judgekit._util.io import Version1, RECORD_CONFIG, iter_jsonl
from judgekit.calibration.labels import Axis
from judgekit.errors import InputError

Order = Literal["original", "swapped"]
VERDICTS_FORMAT_VERSION = 1


class JudgeVerdictRecord(BaseModel):
    """One judge verdict on one item, axis, answer order and repeat (a line of a verdicts file)."""

    model_config = RECORD_CONFIG

    format_version: Version1 = Field(
        default=VERDICTS_FORMAT_VERSION, description="Version of the verdicts file format; only 1 exists."
    )
    trajectory_id: str = Field(min_length=1, description="Id of the judged trajectory (or pairwise item).")
    axis: Axis = Field(description="The axis judged.")
    verdict: Literal["pass", "fail", "A", "B"] | None = Field(
        default=None,
        description='"pass"/"fail" for a binary item; "A"/"B" for a pairwise item (the preferred '
        "answer by its original label); null when unscored; optional for a graded item.",
    )
    score: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description="Score in [0, 1]; required for a graded item. On a binary item without "
        "verdict, the detector's score, made pass/fail at the agreement's threshold.",
    )
    judge: str | None = Field(
        default=None,
        description="Judge name or model pin that gave the verdict; a file may hold several judges.",
    )
    order: Order | None = Field(
        default=None,
        description='Pairwise only: the answer order the judge saw, "original" (A first) or '
        '"swapped" (B first). Absent means "original".',
    )
    repeat: int | None = Field(
        default=None, ge=0, description="Number of this run among repeated runs (0-based); absent means 0."
    )
    unscored_reason: str | None = Field(
        default=None,
        min_length=1,
        description="Why there is no verdict (invalid reply, refusal, timeout...). Unscored "
        "verdicts are counted apart, never as pass or fail.",
    )
    judge_fingerprint: str | None = Field(
        default=None,
        description="Calibration verdicts (written by `judgekit calibrate`): the fingerprint of the judge that gave "
        "it (model pin, endpoint, parameters, rubric and prompt template hashes). The gate re-derives an approval "
        "only from verdicts naming the judge it gates.",
    )
    cache_key: str | None = Field(
        default=None, description="Calibration verdicts: the cache key of the question asked (the spot check re-asks it)."
    )

    @model_validator(mode="after")
    def _consistent(self) -> JudgeVerdictRecord:
        if self.unscored_reason is not None:
            if self.verdict is not None or self.score is not None:
                raise ValueError("an unscored verdict has neither verdict nor score")
        elif self.verdict is None and self.score is None:
            raise ValueError("give a verdict, a score, or an unscored_reason")
        if self.verdict in ("A", "B") and self.score is not None:
            raise ValueError("a pairwise verdict (A/B) has no score")
        if self.order is not None and self.verdict in ("pass", "fail"):
            raise ValueError("order is for pairwise verdicts (A/B) only")
        return self

    @property
    def scored(self) -> bool:
        return self.unscored_reason is None

    @property
    def effective_order(self) -> Order:
        return self.order or "original"

    @property
    def effective_repeat(self) -> int:
        return self.repeat or 0


def verdict_key(v: JudgeVerdictRecord) -> tuple[str, str, str, str, int]:
    """What makes a verdict unique: (trajectory_id, axis, judge, order, repeat)."""
    return (v.trajectory_id, v.axis, v.judge or "", v.effective_order, v.effective_repeat)


def load_verdicts(path: str | Path) -> list[JudgeVerdictRecord]:
    """Read a verdicts JSON Lines file; every problem is an ``InputError`` naming file and line."""
    seen: dict[tuple[str, str, str, str, int], int] = {}
    out: list[JudgeVerdictRecord] = []
    for line, rec in iter_jsonl(path, JudgeVerdictRecord):
        key = verdict_key(rec)
        if key in seen:
            raise InputError(
                f"a second verdict for {rec.trajectory_id!r} on {rec.axis} (judge {rec.judge!r}, "
                f"order {key[3]}, repeat {key[4]}) (lines {seen[key]} and {line}); give repeated "
                "runs distinct `repeat` numbers",
                path,
                line,
            )
        seen[key] = line
        out.append(rec)
    return out
