"""The axes a trajectory is scored on: the table (``table``), one scorer per deterministic axis
(``task_success``, ``tool_correctness``), what a judge's verdict becomes (``judged``), the argument
matcher and predicates they share, and the lint of a rubric's criteria (``lint``)."""

from judgekit.axes.table import (
    AXES,
    Axis,
    Kind,
    axes_of,
    axis_named,
    judged_axes,
    register,
)

__all__ = [
    "AXES",
    "Axis",
    "Kind",
    "axes_of",
    "axis_named",
    "judged_axes",
    "register",
]
