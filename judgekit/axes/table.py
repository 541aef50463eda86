"""The axis registry: name -> axis object, in report order.

Each axis is one object in its own module (``judgekit.axes.base.Axis``); this module only
registers them. ``register`` also hands the axis's result and answer models to the readers of
run records and verdicts. A third party's axis registers the same way.
"""

from __future__ import annotations

from judgekit.axes.base import Axis, Kind
from judgekit.axes.faithfulness import AXIS as FAITHFULNESS
from judgekit.axes.task_success import AXIS as TASK_SUCCESS
from judgekit.axes.tool_correctness import AXIS as TOOL_CORRECTNESS
from judgekit.results import register_result
from judgekit.rubric.model import Rubric
from judgekit.verdict import register_answer

__all__ = ["AXES", "Axis", "Kind", "axes_of", "axis_named", "judged_axes", "register", "unregister"]

AXES: dict[str, Axis] = {}
"""Name -> axis, in report order."""


def register(axis: Axis) -> Axis:
    """Add ``axis`` to the registry (and its result and answer models to the readers)."""
    AXES[axis.name] = axis
    register_result(axis.name, axis.result)
    if axis.answer is not None:
        register_answer(axis.name, axis.answer)
    return axis


def unregister(name: str) -> None:
    """Take an axis out of the registry (its result and answer readers stay)."""
    AXES.pop(name, None)


def axis_named(name: str) -> Axis:
    try:
        return AXES[name]
    except KeyError:
        raise ValueError(f"{name!r} is not an axis judgekit knows ({', '.join(AXES)})") from None


def axes_of(rubric: Rubric) -> list[Axis]:
    """The axes ``rubric`` scores, in registry order."""
    return [axis for axis in AXES.values() if axis.criteria(rubric) is not None]


def judged_axes(rubric: Rubric) -> list[Axis]:
    """The axes a judge scores under ``rubric``."""
    return [axis for axis in axes_of(rubric) if axis.judged(axis.criteria(rubric))]


for _axis in (TASK_SUCCESS, TOOL_CORRECTNESS, FAITHFULNESS):
    register(_axis)
