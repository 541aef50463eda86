"""Judge verdicts: what the judge must answer (per axis), and the records judgekit keeps.

The judge answers in a JSON schema; a reply that does not validate is ``unscored`` with a
reason, never pass and never fail. Every verdict carries its provenance.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from judgekit._io import sha256_json, strict_json_loads

VERDICT_FORMAT_VERSION = 1
ANSWER_MAX_DEPTH = 8  # the answer schemas nest 5 deep; anything deeper is not an answer
UnscoredReason = Literal[
    "parse_failure", "refusal", "truncated", "content_filter", "timeout", "budget", "provider_error", "no_claims"
]
"""Why a verdict is missing. parse_failure: the reply was not a valid answer; refusal: the model
declined; truncated: the reply was cut at max_tokens; content_filter: the provider filtered it;
timeout / provider_error: no reply; budget: the run's budget was spent; no_claims: a faithfulness
judge listed no claim for an output that makes some."""


class _Answer(BaseModel):
    # strict: a judge answering "supported": "yes" has not answered in the schema; no coercion.
    model_config = ConfigDict(extra="forbid", strict=True)


class TaskSuccessAnswer(_Answer):
    """The judge's answer on task success: from the task and the end-state diff."""

    reasons: list[Annotated[str, Field(max_length=300)]] = Field(
        max_length=10, description="Why, one short sentence each, citing the diff."
    )
    verdict: Literal["pass", "fail"] = Field(description="Did the world end up as the task asked?")


class Evidence(_Answer):
    id: str = Field(max_length=16, description="An evidence id from the prompt: R<n> for a tool result, C<n> for context.")
    quote: str = Field(max_length=200, description="A short exact quote from that evidence that supports the claim.")


class Claim(_Answer):
    claim: str = Field(max_length=300, description="One atomic claim made in the agent's output.")
    supported: bool = Field(description="True only when the evidence states the claim.")
    evidence: list[Evidence] = Field(max_length=5, description="Citations; empty when unsupported.")


class FaithfulnessAnswer(_Answer):
    """The judge's answer on faithfulness: every claim with its evidence."""

    claims: list[Claim] = Field(max_length=30, description="Every atomic claim in the output.")


# Length limits bound what a judge may write, so a constrained decoder always closes the JSON.
ANSWERS: dict[str, type[_Answer]] = {"task_success": TaskSuccessAnswer, "faithfulness": FaithfulnessAnswer}
ANSWER_SCHEMAS: dict[str, dict[str, Any]] = {axis: model.model_json_schema() for axis, model in ANSWERS.items()}
ANSWER_SCHEMA_SHA256: dict[str, str] = {axis: sha256_json(schema) for axis, schema in ANSWER_SCHEMAS.items()}


class InvalidAnswer(ValueError):
    """A judge answer (fresh or from the cache) that is not valid JSON in the axis's schema."""


def check_answer(axis: str, data: Any) -> dict[str, Any]:
    """``data`` if it is a valid answer for ``axis`` exactly as given (strict: no coercion)."""
    try:
        ANSWERS[axis].model_validate(data)
    except ValidationError as exc:
        raise InvalidAnswer(f"ValidationError: {str(exc)[:300]}") from None
    return data


def parse_answer(axis: str, text: str | None) -> dict[str, Any]:
    """A reply's text as a valid answer, parsed as strictly as input files are (duplicate keys,
    NaN and Infinity, lone surrogates and deep nesting refused); InvalidAnswer otherwise."""
    try:
        data = strict_json_loads(text or "", max_depth=ANSWER_MAX_DEPTH)
    except json.JSONDecodeError as exc:
        raise InvalidAnswer(f"JSONDecodeError: {exc.msg} (column {exc.colno})") from None
    except ValueError as exc:
        raise InvalidAnswer(f"invalid JSON: {exc}") from None
    return check_answer(axis, data)


class Provenance(BaseModel):
    """Everything needed to reproduce or challenge a verdict."""

    model_config = ConfigDict(extra="forbid")

    model_pin: str = Field(description="The model as pinned in the spec (or the override).")
    endpoint: str = Field(
        "provider default",
        description="Who answered: the api_base it was sent to (normalised), 'embedded' for the local "
        "judge, or 'provider default'. Another server claiming the same model name is another judge.",
    )
    reported_model: str | None = Field(None, description="The model the API reported back.")
    model_mismatch: bool = Field(False, description="The reported model differs from the pin.")
    floating: bool = Field(False, description="The model is not a pinned snapshot (allowed by the suite).")
    override: bool = Field(False, description="The judge was overridden from the command line.")
    parameters: dict[str, Any] = Field(description="temperature, seed, max_tokens.")
    rubric: str = Field(description="id@version.")
    rubric_sha256: str = Field(description="Canonical hash of the rubric.")
    template_sha256: str = Field(description="Hash of the prompt template.")
    judgekit_version: str
    litellm_version: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = Field(None, description="From litellm's offline cost map; None when unknown.")
    cache_hit: bool = False
    attempts: int = Field(0, description="Calls made for this verdict (0 on a cache hit).")
    latency_s: float = Field(
        0.0, description="Wall time of the calls for it, retries and backoff included; time queued for a free server slot is not."
    )
    created_at: datetime
    cache_key: str = Field(description="sha256 of everything that can change the verdict.")


class JudgeVerdict(BaseModel):
    """One judge verdict, validated, or unscored with a reason."""

    model_config = ConfigDict(extra="forbid")

    format_version: Literal[1] = VERDICT_FORMAT_VERSION
    axis: Literal["task_success", "faithfulness"]
    status: Literal["scored", "unscored"]
    unscored_reason: UnscoredReason | None = None
    detail: str | None = Field(None, description="What went wrong, for unscored verdicts.")
    answer: dict[str, Any] | None = Field(None, description="The validated answer.")
    provenance: Provenance
