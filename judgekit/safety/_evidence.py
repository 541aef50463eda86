"""What the detectors hand back: findings with their evidence masked and cut, and notes.

Every text of a finding is masked (``judgekit._util.text.redact``), the trajectory's own id,
tool and paths included: the record is written as it is. Evidence is cut around the match
after masking (``around``), never through a secret.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from judgekit._util.secrets import excerpt
from judgekit._util.text import redact
from judgekit.safety._sources import Source
from judgekit.safety.findings import Finding
from judgekit.trajectory import Trajectory

EVIDENCE_CHARS = 300


def masked(text: str, limit: int = EVIDENCE_CHARS) -> str:
    """Evidence as judgekit writes it: secrets masked, then cut."""
    text = redact(text)
    return text if len(text) <= limit else text[:limit] + f" [cut: {len(text) - limit} more chars]"


@dataclass
class Scanned:
    """What the detectors found in one trajectory."""

    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    unflagged: list[Source] = field(default_factory=list)
    """Untrusted sources no canary or pattern was found in (kept only for a judge to read)."""


def make_finding(signal: str, trajectory: Trajectory, where: str, evidence: str, detector: str,
                 tool: str | None = None, **details: Any) -> Finding:
    # Every text masked here, the trajectory's own id, tool and paths included: the record
    # is written as it is.
    return Finding(signal=signal, trajectory_id=redact(trajectory.id), where=redact(where),
                   evidence=masked(evidence), detector=redact(detector),
                   tool=redact(tool) if tool is not None else None,
                   details=json.loads(redact(json.dumps(details, default=str))))


def around(text: str, start: int, end: int, margin: int = 120) -> str:
    """The stretch of ``text`` around a match, every secret in it masked before the cut (a key
    cut first and masked after would leave its tail, which no detector knows)."""
    return excerpt(text, start, end, margin)
