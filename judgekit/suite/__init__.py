"""Suites: which rubrics, which trajectories, and the policies a run and a scan are judged by
(``model``: the suite file, its gate, budget and approval thresholds; ``safety_policy``: what
``judgekit safety`` checks against). The names here are the suite's face."""

from judgekit.suite.model import (
    ApprovalThresholds,
    Budget,
    GatePolicy,
    LoadedSuite,
    RUBRIC_PLACEHOLDER,
    SnapshotSettings,
    Suite,
    TrajectorySet,
    load_suite,
)
from judgekit.rubric.model import load_rubrics, rubric_files
from judgekit.suite.safety_policy import SafetyPolicy

__all__ = ["RUBRIC_PLACEHOLDER", "ApprovalThresholds", "Budget", "GatePolicy", "LoadedSuite", "SafetyPolicy", "SnapshotSettings", "Suite",
           "TrajectorySet", "load_rubrics", "load_suite", "rubric_files"]
