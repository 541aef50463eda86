"""The axes a trajectory is scored on: the Axis type (``base``), one module per axis holding its
one object (``task_success``, ``tool_correctness``, ``faithfulness``: scorer, prompt sections,
verdict -> result, gate value), the registry (``table``), the argument matcher and predicates
they share, and the lint of a rubric's criteria (``lint``)."""

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
