"""A fourth axis, whole, in one module: concision (graded).

What adding an axis to judgekit takes, and nothing more: its criteria (one field of the rubric
model, here ``ConcisionRubric.concision``), its result and answer models, and one ``Axis``
object with its deterministic scorer, prompt sections and instructions, verdict -> result,
gate value and description. ``register(AXIS)`` puts it in the table.

Deterministic: the output's words against ``max_words`` (1.0 within it, else max_words /
words). With ``judge: true`` a judge also lists the padding (phrases that add nothing); each
one costs ``penalty``, and an advisory judge leaves the word count gating alone.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from judgekit.axes.base import Axis
from judgekit.prompt import Section
from judgekit.results import AxisResultBase
from judgekit.rubric.model import Criteria, Rubric
from judgekit.verdict import Answer

NAME = "concision"


class ConcisionCriteria(Criteria):
    """Does the answer say what it must in few words?"""

    max_words: int = Field(ge=1, description="Words the output may use for full marks.")
    penalty: float = Field(0.25, ge=0, le=1, description="What each phrase of padding the judge finds costs.")
    judge: bool = Field(False, description="Also ask the judge for padding.")


class ConcisionRubric(Rubric):
    """The rubric model with the fourth axis's one criteria field."""

    concision: ConcisionCriteria | None = Field(None, description="Concision axis.")


class ConcisionResult(AxisResultBase):
    axis: Literal["concision"] = NAME
    score: float | None = Field(None, ge=0, le=1, description="Word score, less the judge's padding penalty.")
    words: int = Field(0, description="Words in the output.")
    word_score: float | None = Field(None, ge=0, le=1, description="The deterministic part: the word count's score.")
    padding: list[str] = Field(default_factory=list, description="Phrases the judge called padding.")


class ConcisionAnswer(Answer):
    """The judge's answer on concision: the padding it found."""

    padding: list[Annotated[str, Field(max_length=120)]] = Field(max_length=10, description="Phrases that add nothing.")
    verdict: Literal["concise", "padded"]


class Concision(Axis):
    name = NAME
    kind = "graded"
    result = ConcisionResult
    answer = ConcisionAnswer
    description = "Says what it must in few words: the word count against the rubric's limit, less any padding."
    default_minimum = 0.5
    instructions = ("Axis: concision. List every phrase of the agent output that adds nothing the task needs "
                    "(filler, repetition, needless hedging), copied exactly, then the verdict \"concise\" when "
                    "there is none, else \"padded\".")

    def score(self, criteria: ConcisionCriteria, trajectory, world) -> ConcisionResult:
        words = len(trajectory.output.split())
        score = 1.0 if words <= criteria.max_words else criteria.max_words / words
        return ConcisionResult(score=score, words=words, word_score=score)

    def judged(self, criteria: ConcisionCriteria) -> bool:
        return criteria.judge

    def sections(self, trajectory, evidence, diff, show_output) -> list[Section]:
        return [("Agent output (the words to weigh)", "output", [("O", trajectory.output)])]

    def from_verdict(self, criteria: ConcisionCriteria, result: ConcisionResult, verdict, prompt) -> ConcisionResult:
        update = {"judge": verdict.provenance, "source": "judge"}
        if verdict.status != "scored":
            return result.model_copy(update={**update, "status": "unscored", "score": None,
                                             "unscored_reason": verdict.unscored_reason, "error": verdict.detail})
        padding = list(verdict.answer.padding)
        score = max(0.0, result.word_score - criteria.penalty * len(padding))
        return result.model_copy(update={**update, "score": score, "padding": padding})

    def fallback_value(self, result: ConcisionResult) -> float | None:
        return result.word_score

    def describe(self, result: ConcisionResult) -> str:
        return f"{result.score:.2f} ({result.words} words" + (f", {len(result.padding)} padding)" if result.padding
                                                             else ")")

    def empty(self, criteria: ConcisionCriteria) -> list[str]:
        return []

    def lost(self, result: ConcisionResult) -> list[tuple[str, str]]:
        return [(f"padding: {phrase}", "the judge found it adds nothing") for phrase in result.padding]


AXIS = Concision()
"""The concision axis (register it with ``judgekit.axes.table.register``)."""
