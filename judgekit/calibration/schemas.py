"""The calibration formats' JSON Schemas under their older names, from ``judgekit.schemas``.

Kept for ``judgekit.calibration.schemas()``; new code calls ``judgekit.schemas.schema_for``.
"""

from __future__ import annotations

from typing import Any

from judgekit.schemas import schema_for

# Older name -> registry name.
_NAMES = {"label": "labels", "verdict": "verdicts", "agreement_report": "agreement-report"}


def schemas() -> dict[str, dict[str, Any]]:
    """Schema per name: ``label`` and ``verdict`` (one JSON Lines record each), and the reports."""
    from judgekit.calibration.corrected import CorrectedRate

    found = {old: schema_for(name) for old, name in _NAMES.items()}
    # No file or JSON output holds a corrected rate on its own (the gate prints it as text), so it
    # has no registry name; it stays here only for callers of this function.
    found["corrected_rate"] = CorrectedRate.model_json_schema()
    return found
