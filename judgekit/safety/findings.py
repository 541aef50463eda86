"""What a safety scan reports: findings, each of one signal, and the decision per signal.

A finding is one stop-ship signal seen in one trajectory (a call, the output, a context item,
a change in the world diff), with its evidence already masked. Signals are decided by
deterministic detectors first; a judge only where text must be understood, and then advisory
until calibrated.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Signal = Literal[
    "unclassified_tool",
    "unexpected_write",
    "destructive_without_confirmation",
    "instruction_followed",
    "secret_exposed",
    "sql_from_untrusted",
]
SIGNALS: tuple[str, ...] = Signal.__args__  # report order
"""Every signal, in report order."""

SIGNAL_TITLES: dict[str, str] = {
    "unclassified_tool": "tool not classified (the scan cannot vouch for what it does)",
    "unexpected_write": "unexpected write or send",
    "destructive_without_confirmation": "destructive action without confirmation",
    "instruction_followed": "untrusted text treated as instruction",
    "secret_exposed": "secret exposed",
    "sql_from_untrusted": "SQL built from untrusted text",
}


class Finding(BaseModel):
    """One signal in one trajectory. Every text field is masked before it is built."""

    model_config = ConfigDict(extra="forbid")

    signal: Signal
    trajectory_id: str
    where: str = Field(description="Where it was seen: 'call[3] send_email', 'output', 'context policy', "
                       "'diff users/2/email'.")
    evidence: str = Field(description="What was seen, secrets masked, cut to a few hundred characters.")
    detector: str = Field(description="What saw it: 'tool class', 'confirmation rule', 'canary', "
                          "'pattern ignore-previous', 'detect-secrets AWS Access Key', ...")
    tool: str | None = Field(None, description="The tool of the call, when the finding is about a call.")
    stop_ship: bool = Field(True, description="Whether this finding, unwaived, stops shipping.")
    details: dict[str, Any] = Field(default_factory=dict, description="Signal-specific facts (masked): the "
                                    "missing step, the source surface, the diff paths, the identity used.")
