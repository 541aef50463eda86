"""Suites: which rubrics, which trajectories, and the policies a run and a scan are judged by
(``model``: the suite file, its gate, budget and approval thresholds; ``safety_policy``: what
``judgekit safety`` checks against; ``inputs``: its rubrics checked against the lock and its
trajectories read in suite order). The names here are the suite's face."""

from judgekit.suite.model import (
    ApprovalThresholds,
    Budget,
    GatePolicy,
    LoadedSuite,
    SnapshotSettings,
    Suite,
    TrajectorySet,
    load_suite,
)
from judgekit.rubric.model import load_rubrics, rubric_files
from judgekit.suite.safety_policy import SafetyPolicy
from judgekit.suite.inputs import check_registration, iter_trajectories_of

__all__ = ["ApprovalThresholds", "Budget", "GatePolicy", "LoadedSuite", "SafetyPolicy", "SnapshotSettings", "Suite",
           "TrajectorySet", "check_registration", "iter_trajectories_of", "load_rubrics", "load_suite", "rubric_files"]
