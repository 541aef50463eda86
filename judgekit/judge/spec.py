"""Judge specs: an axis guide + a prompt template + a pinned model + parameters.

A judge model must be a pinned snapshot: a dated provider model
(``openai/gpt-4o-2024-08-06``, ``anthropic/claude-3-5-sonnet-20241022``) or a local GGUF pinned
by its sha256 (``local`` resolves to the embedded judge, pinned that way). Floating aliases
(``gpt-4o``, ``*-latest``, no date) are refused unless the suite sets ``allow_floating``, and
then every verdict says so. Temperature is always 0.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, field_validator, model_serializer

from judgekit.errors import ConfigError

LOCAL_MODEL = "local"
_DATED = re.compile(r"(?<!\d)(20\d{2}-?[01]\d-?[0-3]\d)(?!\d)")
_SHA_PIN = re.compile(r"@sha256:[0-9a-f]{64}$")
_FLOATING = re.compile(r"(-latest|:latest|-preview)$", re.IGNORECASE)


def is_pinned(model: str) -> bool:
    """A dated snapshot or a sha256 pin; '-latest' and undated names float."""
    if model == LOCAL_MODEL or _SHA_PIN.search(model):
        return True
    if _FLOATING.search(model):
        return False
    return bool(_DATED.search(model.rsplit("/", 1)[-1]))


class RateLimit(BaseModel):
    """How fast one judge endpoint may be called: what its provider allows this key, per minute."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)

    requests_per_minute: int | None = Field(
        None, gt=0, description="Most calls a minute to the endpoint, retries included (None: no limit).")
    tokens_per_minute: int | None = Field(
        None, gt=0, description="Most tokens a minute (prompt + completion): each call reserves its prompt's "
        "counted tokens plus max_tokens before it is sent, and the reply's usage settles the difference "
        "(None: no limit).")

    def over(self, base: RateLimit | None) -> RateLimit:
        """This limit, each figure it leaves unset taken from ``base``."""
        if base is None:
            return self
        return RateLimit(requests_per_minute=self.requests_per_minute or base.requests_per_minute,
                         tokens_per_minute=self.tokens_per_minute or base.tokens_per_minute)


class JudgeSpec(BaseModel):
    """Which model judges, and how. Set in a suite (all rubrics) or a rubric (overrides)."""

    # Frozen: a spec is part of every cache key, fingerprint and provenance made from it, so it
    # never changes once read (``model_copy(update=...)`` makes another).
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)

    model: str = Field(
        description="litellm model name pinned to a snapshot ('openai/gpt-4o-2024-08-06'), "
        "a GGUF pin ('name@sha256:<hex>'), or 'local' for the embedded judge."
    )
    api_base: str | None = Field(None, description="OpenAI-compatible server (vLLM, llama.cpp, Ollama).")
    api_key_env: str | None = Field(None, description="Environment variable holding the API key.")
    temperature: Literal[0] = Field(0, description="Always 0; a rubric cannot raise it.")
    seed: int = Field(0, description="Fixed sampling seed, where the provider supports one.")
    max_tokens: int = Field(1024, gt=0, le=32768, description="Most tokens the judge may answer with.")
    timeout_s: float = Field(60.0, gt=0, description="Per-call timeout (not part of the cache key).")
    max_attempts: int = Field(4, ge=1, le=10, description="Attempts per call for transient errors.")
    invalid_reply_retries: int = Field(
        2, ge=0, le=5, description="Extra calls after a reply that fails validation, before 'unscored'."
    )
    answer: Literal["full", "compact"] | None = Field(
        None,
        description="The answer schema and prompt the judge answers in. full: the axis's answer model and "
        "the full prompt. compact: its restriction for small judges (few claims and reasons, short texts, "
        "evidence ids only among those the prompt shows), shorter to generate and always closed within "
        "max_tokens, asked in the compact prompt (fewer words, nothing the axis does not read); the embedded "
        "judge answers it without whitespace. Default: compact for the embedded judge (model: local), full "
        "for any other. Part of the cache key.",
    )
    show_output_for_task_success: bool = Field(
        False,
        description="Show the agent's output to the task-success judge. Off by default: judge the "
        "world, not the wording.",
    )

    rate: RateLimit | None = Field(
        None,
        description="Requests and tokens per minute for this judge's endpoint, shared by every call to it "
        "(--rpm and --tpm override them). How fast, not what is asked: not part of any cache key, fingerprint, "
        "provenance or rubric hash.",
    )

    @model_serializer(mode="wrap")
    def _unset_rate_unwritten(self, write: SerializerFunctionWrapHandler) -> dict:
        # A spec written without a rate dumps as it did before the field existed, so the hashes
        # of settings that dump it whole (a safety report's suite_sha256) stay as they were.
        data = write(self)
        if self.rate is None and isinstance(data, dict):
            data.pop("rate", None)
        return data

    @field_validator("model")
    @classmethod
    def _not_empty(cls, model: str) -> str:
        if not model.strip():
            raise ValueError("must name a model")
        return model

    @property
    def answer_form(self) -> Literal["full", "compact"]:
        """``answer`` as set, else compact for the embedded judge and full for any other."""
        if self.answer is not None:
            return self.answer
        return "compact" if self.model == LOCAL_MODEL else "full"

    def cache_parameters(self) -> dict:
        """Parameters that can change a verdict (timeouts and retries cannot)."""
        return {"temperature": self.temperature, "seed": self.seed, "max_tokens": self.max_tokens}


def check_pinned(model: str, *, allow_floating: bool) -> bool:
    """Return True when the model floats (and that is allowed); raise when it floats and is not."""
    if is_pinned(model):
        return False
    if allow_floating:
        return True
    raise ConfigError(
        f"judge model {model!r} is not pinned to a snapshot: name a dated version "
        "(e.g. 'openai/gpt-4o-2024-08-06') or a sha256 pin, or set `allow_floating: true` in the "
        "suite or pass --allow-floating (verdicts will then say the model floated)"
    )
