"""Calibration: how far a judge agrees with human labels, and what that does to pass rates."""

from judgekit.calibration._aggregate import AxisCoverage, InterAnnotator, RepeatsReport
from judgekit.calibration._bootstrap import Metric
from judgekit.calibration.agreement import (
    AgreementReport,
    BinaryAxisReport,
    BinaryStats,
    ClassRow,
    Confusion,
    GradedAxisReport,
    MulticlassAxisReport,
    agreement,
    agreement_by_judge,
)
from judgekit.calibration.corrected import CorrectedRate, corrected_pass_rate
from judgekit.calibration.labels import AXES, Axis, ItemKind, Label, load_labels
from judgekit.calibration.pairwise import PairwiseAxisReport, PairwiseOrderStats
from judgekit.calibration.schemas import schemas
from judgekit.calibration.verdicts import JudgeVerdictRecord, Order, load_verdicts

__all__ = [
    "AXES",
    "AgreementReport",
    "Axis",
    "AxisCoverage",
    "BinaryAxisReport",
    "BinaryStats",
    "ClassRow",
    "Confusion",
    "CorrectedRate",
    "GradedAxisReport",
    "InterAnnotator",
    "ItemKind",
    "JudgeVerdictRecord",
    "Label",
    "Metric",
    "MulticlassAxisReport",
    "Order",
    "PairwiseAxisReport",
    "PairwiseOrderStats",
    "RepeatsReport",
    "agreement",
    "agreement_by_judge",
    "corrected_pass_rate",
    "load_labels",
    "load_verdicts",
    "schemas",
]
