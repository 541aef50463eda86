"""The axis table: everything judgekit knows about an axis, in one place.

Each axis says what kind it is (binary or graded), where its criteria sit in a rubric, how it
is scored without a model (if it can be), whether and how a judge scores it (prompt sections,
answer model, verdict -> result), the value a gate reads of its result, and how a result reads
in a table. Every other module asks the table; none switches on an axis name. A new axis is one
``register(Axis(...))`` here (a test adds a toy one that way).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from judgekit.axes.judged import faithfulness_from_verdict, task_success_with_verdict
from judgekit.axes.task_success import score_task_success
from judgekit.axes.tool_correctness import score_tool_correctness
from judgekit.trajectory import WorldState
from judgekit.prompt import Prompt, Section, build_prompt, faithfulness_sections, task_success_sections
from judgekit.results import (
    AxisResultBase,
    FaithfulnessResult,
    TaskSuccessResult,
    ToolCorrectnessResult,
    register_result,
)
from judgekit.rubric.model import Rubric
from judgekit.suite import GatePolicy
from judgekit.trajectory import LoadedTrajectory
from judgekit.verdict import FaithfulnessAnswer, JudgeVerdict, TaskSuccessAnswer, register_answer

Kind = Literal["binary", "graded"]


def _never(criteria: Any) -> bool:
    return False


def _always(criteria: Any) -> bool:
    return True


def _no_findings(criteria: Any) -> list[str]:
    return []


def _score(result: Any) -> float | None:
    return result.score


@dataclass(frozen=True)
class Axis:
    """One axis: its kind, its criteria, its scorers, and what a gate and a reader see of it."""

    name: str
    kind: Kind
    result: type[AxisResultBase]
    """The result model (its ``axis`` field is ``name``)."""
    criteria: Callable[[Rubric], Any]
    """The rubric's section for this axis, or None when the rubric does not score it."""
    gate_minimum: Callable[[GatePolicy], float]
    """The suite's minimum for the gate value."""
    figure: str
    """What the gate value is called: "pass rate" or "mean score"."""
    value: Callable[[Any], float | None]
    """The value a gate reads of a scored result (1.0/0.0 for a binary pass/fail)."""
    describe: Callable[[Any], str]
    """A scored result in a few words (a table cell)."""
    score: Callable[[Any, Any, WorldState], Any] | None = None
    """Deterministic scorer ``(criteria, trajectory, world) -> result``; None: only a judge scores it."""
    judged: Callable[[Any], bool] = _never
    """Whether a judge takes part under these criteria."""
    answer: type | None = None
    """The judge's answer model."""
    sections: Callable[..., list[Section]] | None = None
    """The judge prompt's sections: ``(trajectory, evidence, diff, show_output)``."""
    prompt_reads_world: bool = False
    """The prompt shows the end-state diff (so a bad snapshot makes the axis an error)."""
    prompt_reads_task: bool = True
    """The judge reads the task (compact prompts leave it out of an axis that does not)."""
    min_quote_chars: Callable[[Any], int] = lambda criteria: 8
    from_verdict: Callable[[Any, Any, JudgeVerdict, Prompt], Any] | None = None
    """``(criteria, deterministic result or None, verdict, prompt) -> result``."""
    judge_value: Callable[[Any], float | None] = _score
    """What the judge itself said, as a number (pass = 1.0): calibration compares it with people."""
    fallback_value: Callable[[Any], float | None] | None = None
    """What still gates of a result whose judge is advisory (None: nothing)."""
    empty: Callable[[Any], list[str]] = _no_findings
    """Lint: why these criteria measure nothing, if they don't."""
    lost: Callable[[Any], list[tuple[str, str]]] = lambda result: []
    """What a scored result lost, as (what, why): the failed check, the lost point, the unsupported
    claim. ``compare`` shows what changed between two runs from it."""

    @property
    def binary(self) -> bool:
        return self.kind == "binary"

    def error(self, message: str) -> Any:
        """This axis's result for input it could not score (never pass or fail)."""
        return self.result(status="error", error=message)

    def prompt(self, rubric: Rubric, loaded: LoadedTrajectory, world: WorldState, show_output: bool,
               form: str = "full") -> Prompt:
        """The judge prompt for this axis in an answer form's template (InputError when the
        world it shows cannot be read)."""
        criteria = self.criteria(rubric)
        diff = world.diff if self.prompt_reads_world and world.present else None
        return build_prompt(self.name, criteria.guide, loaded.trajectory, self.sections, diff=diff,
                            show_output=show_output, min_quote_chars=self.min_quote_chars(criteria),
                            form=form, reads_task=self.prompt_reads_task)


AXES: dict[str, Axis] = {}
"""Name -> axis, in report order."""


def register(axis: Axis) -> Axis:
    """Add ``axis`` to the table (and its result and answer models to the readers)."""
    AXES[axis.name] = axis
    register_result(axis.name, axis.result)
    if axis.answer is not None:
        register_answer(axis.name, axis.answer)
    return axis


def axis_named(name: str) -> Axis:
    try:
        return AXES[name]
    except KeyError:
        raise ValueError(f"{name!r} is not an axis judgekit knows ({', '.join(AXES)})") from None


def axes_of(rubric: Rubric) -> list[Axis]:
    """The axes ``rubric`` scores, in table order."""
    return [axis for axis in AXES.values() if axis.criteria(rubric) is not None]


def judged_axes(rubric: Rubric) -> list[Axis]:
    """The axes a judge scores under ``rubric``."""
    return [axis for axis in axes_of(rubric) if axis.judged(axis.criteria(rubric))]


# --- the built-in axes ----------------------------------------------------------------------


def _passed(result: TaskSuccessResult) -> float | None:
    return None if result.passed is None else float(result.passed)


def _judge_check(result: TaskSuccessResult) -> float | None:
    check = next((c for c in result.checks if c.source == "judge"), None)
    return None if check is None else float(check.passed)


def _deterministic_checks(result: TaskSuccessResult) -> float:
    return float(all(c.passed for c in result.checks if c.source == "deterministic"))


def _describe_task_success(result: TaskSuccessResult) -> str:
    if result.passed:
        return "PASS"
    failed = [c.check for c in result.checks if not c.passed]
    return "FAIL " + ", ".join(failed[:2]) + ("..." if len(failed) > 2 else "")


def _failed_checks(result: TaskSuccessResult) -> list[tuple[str, str]]:
    return [(check.check, check.reason) for check in result.checks if not check.passed]


def _lost_points(result: ToolCorrectnessResult) -> list[tuple[str, str]]:
    return [(item.point, item.reason) for item in result.items if not item.earned]


def _unsupported_claims(result: FaithfulnessResult) -> list[tuple[str, str]]:
    return [(f"claim: {claim.claim}", claim.citation_error or "not supported by any tool result or context item")
            for claim in result.claims if not claim.supported]


def _task_success_empty(criteria) -> list[str]:
    checks = (criteria.preconditions, criteria.postconditions, criteria.side_effects, criteria.max_latency_s,
              criteria.required_outputs)
    if not any(check not in (None, []) for check in checks):
        return ["task_success has no check (no pre/postcondition, side_effects, max_latency_s or required_outputs): "
                "it would pass everything"]
    return []


def _describe_tool_correctness(result: ToolCorrectnessResult) -> str:
    text = f"{result.score:.2f} ({result.points}/{result.max_points})"
    lost = [item.point for item in result.items if not item.earned]
    if lost:
        text += " lost: " + ", ".join(lost[:2]) + ("..." if len(lost) > 2 else "")
    return text


def _tool_correctness_empty(criteria) -> list[str]:
    if not criteria.expected_calls and not criteria.forbidden.tools and not criteria.forbidden.effects:
        return ["tool_correctness expects no call and forbids nothing: it measures only the call count"]
    return []


def _describe_faithfulness(result: FaithfulnessResult) -> str:
    text = f"{result.score:.2f} ({result.supported}/{result.claims_total} claims)"
    return text + (f", {result.citation_errors} citation error(s)" if result.citation_errors else "")


register(Axis(
    name="task_success", kind="binary", result=TaskSuccessResult,
    criteria=lambda rubric: rubric.task_success,
    gate_minimum=lambda policy: policy.min_task_success_rate, figure="pass rate",
    value=_passed, describe=_describe_task_success,
    score=score_task_success,
    judged=lambda criteria: criteria.judge,
    answer=TaskSuccessAnswer, sections=task_success_sections, prompt_reads_world=True,
    from_verdict=lambda criteria, result, verdict, prompt: task_success_with_verdict(result, verdict),
    judge_value=_judge_check, fallback_value=_deterministic_checks,
    empty=_task_success_empty, lost=_failed_checks,
))
register(Axis(
    name="tool_correctness", kind="graded", result=ToolCorrectnessResult,
    criteria=lambda rubric: rubric.tool_correctness,
    gate_minimum=lambda policy: policy.min_tool_correctness, figure="mean score",
    value=_score, describe=_describe_tool_correctness,
    score=score_tool_correctness,
    empty=_tool_correctness_empty, lost=_lost_points,
))
register(Axis(
    name="faithfulness", kind="graded", result=FaithfulnessResult,
    criteria=lambda rubric: rubric.faithfulness,
    gate_minimum=lambda policy: policy.min_faithfulness, figure="mean score",
    value=_score, describe=_describe_faithfulness,
    judged=_always, answer=FaithfulnessAnswer, sections=faithfulness_sections, prompt_reads_task=False,
    min_quote_chars=lambda criteria: criteria.min_quote_chars,
    from_verdict=lambda criteria, result, verdict, prompt: faithfulness_from_verdict(
        verdict, prompt.evidence, criteria, prompt.output),
    lost=_unsupported_claims,
))
