"""The record of a provider batch, kept beside the verdict cache: ``<cache>/batches/<batch id>.json``.

``judgekit batch submit`` writes one per batch it creates; ``status`` updates its state and
counts; ``collect`` stores the valid verdicts in the cache and writes here what it did not store
and why (``unscored``), and the lines it could not attribute to a question (``rejected``). A
question unscored here is not in the cache: the next ``judgekit run`` asks it online, or the
next ``judgekit batch submit`` sends it in a new batch.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime
from hashlib import sha256
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from judgekit._util.files import write_text_atomically
from judgekit._util.io import MAX_FILE_BYTES, load_json_model
from judgekit.errors import InputError

BATCH_RECORD_FORMAT = 1
BATCHES_FOLDER = "batches"
TERMINAL = ("completed", "expired", "cancelled", "failed")
"""Batch states after which nothing more will be answered: collect then."""
MAX_REJECTED_SHOWN = 100

BatchUnscoredReason = Literal[
    "parse_failure", "refusal", "truncated", "content_filter", "provider_error", "duplicate", "expired",
    "cancelled", "failed", "missing",
]
"""Why a batched question got no verdict: the reply-level reasons of an online call
(parse_failure, refusal, truncated, content_filter, provider_error: the error file's lines and
bodies that are no chat completion), duplicate (the batch answered it more than once: none
is taken), expired / cancelled / failed (the batch ended before answering it), missing (the
batch completed and its files hold no line for it)."""

BatchPriced = Literal["litellm batch price", "half the online price", "unknown"]


class BatchRequest(BaseModel):
    """One question sent in the batch."""

    model_config = ConfigDict(extra="forbid")

    key: str = Field(description="The question's cache key, sent as the line's custom_id.")
    axis: str = Field(description="The axis judged.")
    identity: int = Field(ge=0, description="Index in the record's identities: the judge and rubric it names.")
    fingerprints: list[str] = Field(default_factory=list, description="Its fingerprints, for the cache's memo.")


class Unscored(BaseModel):
    """Why a question of the batch got no verdict."""

    model_config = ConfigDict(extra="forbid")

    reason: BatchUnscoredReason
    detail: str = Field(description="What went wrong, masked and cut to 1000 characters.")


class BatchRecord(BaseModel):
    """One provider batch of judge questions: what was sent, where, and what came of it."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    format_version: Literal[1] = BATCH_RECORD_FORMAT
    batch_id: str = Field(description="The provider's batch id.")
    input_file_id: str = Field(description="The uploaded file of requests.")
    provider: str = Field(description="litellm's provider for the judge ('openai').")
    model_pin: str = Field(description="The judge's pinned model.")
    litellm_model: str = Field(description="The name litellm calls.")
    endpoint: str = Field(description="Who answers: 'provider default' or the server (as verdicts record it).")
    api_base: str | None = Field(None, description="The server the batch was sent to (no credentials).")
    api_key_env: str | None = Field(None, description="The variable holding the API key (never the key).")
    suite: str = Field(description="The suite's name.")
    plan_fingerprint: str = Field(
        description="sha256 of the run's distinct question keys in plan order: the same plan, the same fingerprint.")
    created_at: datetime
    questions: int = Field(description="Distinct judge questions of the run (all judges).")
    cached: int = Field(description="Of them, answered by the cache when submitted.")
    sent: int = Field(description="Questions sent in this batch.")
    prompt_tokens: int = Field(0, description="Prompt tokens of the questions sent (litellm's token_counter).")
    completion_tokens_max: int = Field(0, description="Upper bound on completion tokens (max_tokens each).")
    priced: BatchPriced = Field(description="Where the batch cost comes from.")
    estimated_cost_usd_max: float | None = Field(
        None, description="Upper bound on the batch's cost at batch prices; None: unknown.")
    online_cost_usd_max: float | None = Field(None, description="The same questions asked online, for comparison.")
    identities: list[dict[str, Any]] = Field(
        description="The judge-and-rubric identities the questions name (provenance fields).")
    requests: list[BatchRequest] = Field(description="The questions sent, in file order.")
    state: str = Field("submitted", description="The provider's last reported state.")
    counts: dict[str, int] = Field(default_factory=dict, description="The provider's last request counts.")
    provider_errors: str | None = Field(None, description="Errors the provider reported for the whole batch.")
    collected_at: datetime | None = Field(None, description="When collect finished with it; None: not yet.")
    stored: int = Field(0, description="Verdicts collect stored in the cache.")
    already_stored: int = Field(0, description="Valid replies whose verdict the cache already held (not stored again).")
    model_mismatch: int = Field(0, description="Stored verdicts whose reply reported another model than the pin.")
    unscored: dict[str, Unscored] = Field(default_factory=dict, description="Cache key -> why it got no verdict.")
    rejected: list[str] = Field(
        default_factory=list, description=f"Lines not attributed to a question and why (first {MAX_REJECTED_SHOWN}).")
    rejected_count: int = Field(0, description="All such lines.")

    @property
    def open(self) -> bool:
        """Not collected yet: its questions may still be answered."""
        return self.collected_at is None


_SAFE_ID = re.compile(r"[A-Za-z0-9_.-]{1,128}")


def batches_dir(cache_dir: Path) -> Path:
    return cache_dir / BATCHES_FOLDER


def record_path(cache_dir: Path, batch_id: str) -> Path:
    """Where the record of ``batch_id`` lives; an id that is no plain file name is hashed."""
    name = batch_id if _SAFE_ID.fullmatch(batch_id) and not batch_id.startswith(".") else \
        "id-" + sha256(batch_id.encode()).hexdigest()[:32]
    return batches_dir(cache_dir) / f"{name}.json"


def write_record(cache_dir: Path, record: BatchRecord) -> Path:
    path = record_path(cache_dir, record.batch_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Not masked as a whole: the masker takes ``"api_key_env": "NAME"`` for a secret and would
    # write the variable's name masked. What could quote a secret (a reply's detail, a provider's
    # error, a rejected line) is masked where it is made.
    write_text_atomically(path, record.model_dump_json(indent=1) + "\n", mask_secrets=False)
    return path


def read_records(cache_dir: Path, *, suite: str | None = None) -> Iterator[tuple[Path, BatchRecord]]:
    """The batch records of this cache folder (of ``suite`` only, when named), oldest first."""
    folder = batches_dir(cache_dir)
    if not folder.is_dir():
        return
    found: list[tuple[Path, BatchRecord]] = []
    for path in sorted(folder.glob("*.json")):
        record = load_json_model(path, BatchRecord, max_bytes=MAX_FILE_BYTES, expected="a judgekit batch record")
        if path != record_path(cache_dir, record.batch_id):
            raise InputError(f"this record is of batch {record.batch_id!r}, not of its file name: "
                             "a batch record is never renamed", path)
        if suite is None or record.suite == suite:
            found.append((path, record))
    yield from sorted(found, key=lambda item: (item[1].created_at, item[1].batch_id))


def plan_hasher(suite: str):
    """The plan fingerprint's hash: feed it each distinct question key in plan order
    (``update(bytes.fromhex(key))``), then read ``hexdigest()``."""
    return sha256(f"judgekit-batch-plan/1\n{suite}\n".encode())
