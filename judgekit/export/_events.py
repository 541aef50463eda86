"""The event both exports write: one ``gen_ai.evaluation.result`` (the file's OTLP/JSON and the
SDK's records are made from it)."""

from __future__ import annotations

from dataclasses import dataclass

EVENT_NAME = "gen_ai.evaluation.result"
SEVERITY_INFO = 9
SCOPE = "judgekit"
Attribute = str | bool | int | float


@dataclass(frozen=True)
class EvaluationEvent:
    """One ``gen_ai.evaluation.result`` event, as both the file and the SDK write it."""

    time_ns: int
    observed_ns: int
    trace_id: str
    span_id: str | None
    attributes: dict[str, Attribute]
