"""Judge verdicts: what the judge must answer (per axis), and the records judgekit keeps.

The judge answers in a JSON schema; a reply that does not validate is ``unscored`` with a
reason, never pass and never fail. Every verdict carries its provenance.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_serializer, field_validator

from judgekit._util.io import Version1, RECORD_CONFIG, Timestamp
from judgekit._util.strict_json import strict_json_loads

VERDICT_FORMAT_VERSION = 1
ANSWER_MAX_DEPTH = 8  # the answer schemas nest 5 deep; anything deeper is not an answer
UnscoredReason = Literal[
    "parse_failure", "refusal", "truncated", "content_filter", "timeout", "budget", "provider_error", "no_claims"
]
"""Why a verdict is missing. parse_failure: the reply was not a valid answer; refusal: the model
declined; truncated: the reply was cut at max_tokens; content_filter: the provider filtered it;
timeout / provider_error: no reply; budget: the run's budget was spent; no_claims: a faithfulness
judge listed no claim for an output that makes some."""


COMPACT_CHARS = "[ !#-\\[\\]-~]"
"""One character of compact answer text: printable ASCII but ``"`` and ``\\``, so it needs no
escape and costs at most one token (every token is at least one character)."""


def compact_text(max_chars: int) -> dict[str, Any]:
    """A short string of compact characters (the bound is in ``pattern``, which llama.cpp's
    grammar follows, and in ``maxLength``, which every validator reads)."""
    return {"type": "string", "minLength": 1, "maxLength": max_chars, "pattern": f"^{COMPACT_CHARS}{{1,{max_chars}}}$"}


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


class _Answer(BaseModel):
    # strict: a judge answering "supported": "yes" has not answered in the schema; no coercion.
    model_config = ConfigDict(extra="forbid", strict=True)

    @classmethod
    def compact_schema(cls, evidence_ids: tuple[str, ...]) -> dict[str, Any]:
        """A restriction of the answer schema for small judges: every answer it admits is a
        valid answer of the model, in fewer tokens (bounded counts and lengths, no escapes,
        evidence ids only among ``evidence_ids``, those of the prompt)."""
        raise NotImplementedError(f"{cls.__name__} has no compact schema")


Answer = _Answer
"""The base of a judge's answer model: strict, extra keys refused (an axis of one's own
subclasses it; ``compact_schema`` only for the compact answer form)."""


class TaskSuccessAnswer(_Answer):
    """The judge's answer on task success: from the task and the end-state diff."""

    reasons: list[Annotated[str, Field(max_length=300)]] = Field(
        max_length=10, description="Why, one short sentence each, citing the diff."
    )
    verdict: Literal["pass", "fail"] = Field(description="Did the world end up as the task asked?")

    COMPACT_REASONS: ClassVar[int] = 3
    COMPACT_REASON_CHARS: ClassVar[int] = 100

    @classmethod
    def compact_schema(cls, evidence_ids: tuple[str, ...]) -> dict[str, Any]:
        reasons = {"type": "array", "items": compact_text(cls.COMPACT_REASON_CHARS), "minItems": 1,
                   "maxItems": cls.COMPACT_REASONS}
        return _object({"reasons": reasons, "verdict": {"type": "string", "enum": ["pass", "fail"]}})


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

    COMPACT_CLAIMS: ClassVar[int] = 3
    COMPACT_CLAIM_CHARS: ClassVar[int] = 80
    COMPACT_CITATIONS: ClassVar[int] = 1
    COMPACT_QUOTE_CHARS: ClassVar[int] = 60

    @classmethod
    def compact_schema(cls, evidence_ids: tuple[str, ...]) -> dict[str, Any]:
        # Ids the prompt does not show cannot be cited; with none, a claim cites nothing.
        ids = list(evidence_ids)
        evidence = _object({"id": {"type": "string", "enum": ids}, "quote": compact_text(cls.COMPACT_QUOTE_CHARS)})
        claim = _object({
            "claim": compact_text(cls.COMPACT_CLAIM_CHARS),
            "supported": {"type": "boolean"},
            "evidence": {"type": "array", "items": evidence, "maxItems": cls.COMPACT_CITATIONS if ids else 0},
        })
        return _object({"claims": {"type": "array", "items": claim, "maxItems": cls.COMPACT_CLAIMS}})


class InvalidAnswer(ValueError):
    """A judge answer (fresh or from the cache) that is not valid JSON in the axis's schema."""


_ANSWER_MODELS: dict[str, type[_Answer]] = {"task_success": TaskSuccessAnswer, "faithfulness": FaithfulnessAnswer}
"""Axis -> the model of its judge's answer. The built-in axes' are here from the start, beside
their models: a verdict read back by code that never loads the axis table (``judgekit cache
prune``) is read as a run reads it (it once read every stored verdict as refused and pruned
them all). Other axes register theirs (``judgekit.axes.table``)."""


def register_answer(axis: str, model: type[_Answer]) -> None:
    _ANSWER_MODELS[axis] = model


def answer_model(axis: str) -> type[_Answer]:
    try:
        return _ANSWER_MODELS[axis]
    except KeyError:
        raise InvalidAnswer(f"no judge answers on axis {axis!r}") from None


def check_answer(model: type[_Answer], data: Any) -> _Answer:
    """``data`` as a valid ``model`` answer, exactly as given (strict: no coercion)."""
    if isinstance(data, model):
        return data
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise InvalidAnswer(f"ValidationError: {str(exc)[:300]}") from None


def parse_answer(model: type[_Answer], text: str | None) -> _Answer:
    """A reply's text as a valid answer, parsed as strictly as input files are (duplicate keys,
    NaN and Infinity, lone surrogates and deep nesting refused); InvalidAnswer otherwise."""
    try:
        data = strict_json_loads(text or "", max_depth=ANSWER_MAX_DEPTH)
    except json.JSONDecodeError as exc:
        raise InvalidAnswer(f"JSONDecodeError: {exc.msg} (column {exc.colno})") from None
    except ValueError as exc:
        raise InvalidAnswer(f"invalid JSON: {exc}") from None
    return check_answer(model, data)


@dataclass(frozen=True)
class ReplyProblem:
    """Why a judge's reply is no answer: unscored for ``reason``, or (``retry``) worth asking again."""

    reason: UnscoredReason
    detail: str
    retry: bool = False


def read_reply(axis: str, content: str | None, refusal: str | None, finish_reason: str | None,
               max_tokens: int) -> _Answer | ReplyProblem:
    """A judge's reply as the axis's typed answer, or the problem with it.

    A refusal is a refusal. A reply cut short (``finish_reason`` length) or filtered is not the
    judge's whole answer, even when what arrived happens to parse; asking again at temperature
    0 would get the same. Text that is not a valid answer may be asked again (``retry``).
    """
    if refusal or (content is None and refusal is not None):
        return ReplyProblem("refusal", refusal or "refused")
    if finish_reason == "length":
        return ReplyProblem("truncated", f"the reply was cut at max_tokens={max_tokens} (finish_reason length): "
                            "raise the judge's max_tokens")
    if finish_reason == "content_filter":
        return ReplyProblem("content_filter", "the provider filtered the reply (finish_reason content_filter)")
    try:
        return parse_answer(answer_model(axis), content)  # strict: valid as sent, or not at all
    except InvalidAnswer as exc:
        return ReplyProblem("parse_failure", str(exc), retry=True)


class Provenance(BaseModel):
    """Everything needed to reproduce or challenge a verdict."""

    model_config = RECORD_CONFIG

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
    batch_id: str | None = Field(
        None, description="The provider batch that answered it (`judgekit batch collect`); None: asked online.")
    attempts: int = Field(0, description="Calls made for this verdict (0 on a cache hit).")
    latency_s: float = Field(
        0.0, description="Wall time of the calls for it, retries and backoff included; time queued for a free server slot is not."
    )
    created_at: Timestamp
    cache_key: str = Field(description="sha256 of everything that can change the verdict.")


class JudgeVerdict(BaseModel):
    """One judge verdict: its answer typed and validated against the axis's answer model, or
    unscored with a reason."""

    model_config = RECORD_CONFIG

    format_version: Version1 = VERDICT_FORMAT_VERSION
    axis: str = Field(description="The axis judged (one the axis table says a judge answers).")
    status: Literal["scored", "unscored"]
    unscored_reason: UnscoredReason | None = None
    detail: str | None = Field(None, description="What went wrong, for unscored verdicts.")
    answer: _Answer | None = Field(None, description="The validated answer.")
    provenance: Provenance

    @field_validator("axis")
    @classmethod
    def _judged_axis(cls, axis: str) -> str:
        answer_model(axis)  # raises for an axis no judge answers
        return axis

    @field_validator("answer", mode="plain", json_schema_input_type=TaskSuccessAnswer | FaithfulnessAnswer | None)
    @classmethod
    def _typed_answer(cls, value: Any, info: ValidationInfo) -> _Answer | None:
        if value is None:
            return None
        if "axis" not in info.data:
            raise ValueError("no valid axis to read the answer for")
        return check_answer(answer_model(info.data["axis"]), value)

    @field_serializer("answer")
    def _dump_answer(self, answer: _Answer | None) -> dict[str, Any] | None:
        return None if answer is None else answer.model_dump(mode="json")
