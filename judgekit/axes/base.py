"""The Axis type: everything judgekit knows about one axis, as one object.

An axis is a subclass of ``Axis`` with a few class attributes (its name, kind, result model,
answer model, description) and a few methods: its deterministic scorer (``score``), the judge
prompt's sections (``sections``), what a verdict becomes (``from_verdict``), the value a gate
reads of a result (``value``) and how a result reads in a table (``describe``). Each axis lives
in one module that makes its one instance; ``judgekit.axes.table`` registers them. Every other
module asks the axis object; none switches on an axis name.

A new axis is its module plus one criteria field in the rubric model (a field named after the
axis, holding the axis's criteria model): ``tests/_fourth_axis.py`` is one, whole.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from judgekit.prompt import Evidence, Prompt, Section, build_prompt
from judgekit.results import AxisResultBase
from judgekit.rubric.model import Rubric
from judgekit.suite import GatePolicy
from judgekit.trajectory import LoadedTrajectory, Trajectory, WorldState
from judgekit.verdict import JudgeVerdict
from judgekit.world.diff import Diff

Kind = Literal["binary", "graded"]


class Axis:
    """One axis. Subclasses set the class attributes and override the methods that apply:
    ``score`` for an axis scored without a model, ``judged``, ``sections`` and ``from_verdict``
    (with ``answer``) for one a judge scores; the rest have defaults for a graded score."""

    name: ClassVar[str]
    """The axis's name: the rubric's field holding its criteria, and the key of its results."""
    kind: ClassVar[Kind]
    """'binary' (pass or fail; the gate reads a pass rate) or 'graded' (a score; a mean score)."""
    result: ClassVar[type[AxisResultBase]]
    """The result model (its ``axis`` field is ``name``)."""
    description: ClassVar[str] = ""
    """What the axis measures, in one sentence for people."""
    answer: ClassVar[type | None] = None
    """The judge's answer model; None for an axis no judge scores."""
    instructions: ClassVar[str | None] = None
    """The judge's instructions for this axis when the prompt template has none for it (the
    built-in axes have theirs in the template; a third party's brings its own, and they are
    part of the template hash, so of every cache key)."""
    default_minimum: ClassVar[float] = 1.0
    """The gate's minimum for this axis when the suite's ``gate.min`` does not name it."""
    prompt_reads_world: ClassVar[bool] = False
    """The prompt shows the end-state diff (so a bad snapshot makes the axis an error)."""
    prompt_reads_task: ClassVar[bool] = True
    """The judge reads the task (compact prompts leave it out of an axis that does not)."""

    # --- what it is --------------------------------------------------------------------------

    @property
    def binary(self) -> bool:
        return self.kind == "binary"

    @property
    def figure(self) -> str:
        """What the gate value is called: "pass rate" or "mean score"."""
        return "pass rate" if self.binary else "mean score"

    @property
    def deterministic(self) -> bool:
        """Whether the axis has a scorer that needs no model (``score`` is overridden)."""
        return type(self).score is not Axis.score

    @property
    def has_fallback(self) -> bool:
        """Whether something deterministic still gates of a result whose judge is advisory."""
        return type(self).fallback_value is not Axis.fallback_value

    def criteria(self, rubric: Rubric) -> Any:
        """The rubric's section for this axis, or None when the rubric does not score it."""
        return getattr(rubric, self.name, None)

    def empty(self, criteria: Any) -> list[str]:
        """Lint: why these criteria measure nothing, if they don't."""
        return []

    # --- scoring -----------------------------------------------------------------------------

    def score(self, criteria: Any, trajectory: Trajectory, world: WorldState) -> AxisResultBase:
        """The deterministic result; only axes that have a scorer override it."""
        raise NotImplementedError(f"axis {self.name!r} has no deterministic scorer")

    def judged(self, criteria: Any) -> bool:
        """Whether a judge takes part under these criteria."""
        return False

    def sections(self, trajectory: Trajectory, evidence: Evidence, diff: Diff | None,
                 show_output: bool) -> list[Section]:
        """The judge prompt's own sections (after the task)."""
        raise NotImplementedError(f"axis {self.name!r} is not judged")

    def min_quote_chars(self, criteria: Any) -> int:
        """The shortest quote the prompt asks for."""
        return 8

    def from_verdict(self, criteria: Any, result: AxisResultBase | None, verdict: JudgeVerdict,
                     prompt: Prompt) -> AxisResultBase:
        """The result once the judge answered: ``result`` is the deterministic one, or None."""
        raise NotImplementedError(f"axis {self.name!r} is not judged")

    def error(self, message: str) -> AxisResultBase:
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
                            form=form, reads_task=self.prompt_reads_task, instructions=self.instructions)

    # --- what a gate and a reader see ----------------------------------------------------------

    def value(self, result: Any) -> float | None:
        """The value a gate reads of a scored result (1.0/0.0 for a binary pass/fail)."""
        return result.score

    def judge_value(self, result: Any) -> float | None:
        """What the judge itself said, as a number (pass = 1.0): calibration compares it with people."""
        return result.score

    def fallback_value(self, result: Any) -> float | None:
        """What still gates of a result whose judge is advisory (None: nothing)."""
        return None

    def gate_minimum(self, policy: GatePolicy) -> float:
        """The suite's minimum for the gate value (``gate.min``, else ``default_minimum``)."""
        return policy.min.get(self.name, self.default_minimum)

    def describe(self, result: Any) -> str:
        """A scored result in a few words (a table cell), with what it lost."""
        return self.headline(result)

    def headline(self, result: Any) -> str:
        """A scored result in a word or two (a narrow table cell): its figure, without the
        details ``describe`` adds."""
        return f"{result.score:.2f}"

    def lost(self, result: Any) -> list[tuple[str, str]]:
        """What a scored result lost, as (what, why): the failed check, the lost point, the
        unsupported claim. ``compare`` shows what changed between two runs from it."""
        return []

    def __repr__(self) -> str:
        return f"<axis {self.name} ({self.kind})>"
