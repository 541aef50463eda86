"""JSON Schemas of the calibration file formats and reports (for editors, docs and checks)."""

from __future__ import annotations

from typing import Any

from judgekit.calibration.agreement import AgreementReport
from judgekit.calibration.corrected import CorrectedRate
from judgekit.calibration.labels import Label
from judgekit.calibration.verdicts import JudgeVerdictRecord


def schemas() -> dict[str, dict[str, Any]]:
    """Schema per name: ``label`` and ``verdict`` (one JSON Lines record each), and the reports."""
    return {
        "label": Label.model_json_schema(),
        "verdict": JudgeVerdictRecord.model_json_schema(),
        "agreement_report": AgreementReport.model_json_schema(),
        "corrected_rate": CorrectedRate.model_json_schema(),
    }
