"""Provider batch APIs through litellm: upload a JSON Lines file of requests, create a batch,
read its state, download its output and error files, cancel it.

Only the providers litellm sends to an OpenAI-compatible files and batches API are supported
(``litellm.types.utils.OPENAI_COMPATIBLE_BATCH_AND_FILES_PROVIDERS``, less the ones litellm
runs itself): ``openai`` (any OpenAI-compatible ``api_base`` that serves ``/v1/files`` and
``/v1/batches``) and ``litellm_proxy``. The embedded judge runs on this machine and has no batch
API. ``batch_support`` says why a judge cannot batch. litellm is imported on first use.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import IO, Any

from judgekit.judge.backend import CallRequest, RawReply, _describe, _litellm, reply_of, request_params
from judgekit.judge.target import Connection, JudgeTarget

BATCH_ENDPOINT = "/v1/chat/completions"
COMPLETION_WINDOW = "24h"


class BatchCallFailed(Exception):
    """A files or batches call the provider (or litellm) refused: ``detail`` says what and why."""


def provider_of(target: JudgeTarget) -> tuple[str, str]:
    """(litellm's provider, the model name the provider is sent) for ``target``."""
    model, provider, _, _ = _litellm().get_llm_provider(target.litellm_model)
    return provider, model


def batchable_providers() -> list[str]:
    from litellm.types.utils import LITELLM_EXECUTED_BATCH_PROVIDERS, OPENAI_COMPATIBLE_BATCH_AND_FILES_PROVIDERS

    _litellm()
    return sorted(OPENAI_COMPATIBLE_BATCH_AND_FILES_PROVIDERS - LITELLM_EXECUTED_BATCH_PROVIDERS)


def batch_support(target: JudgeTarget) -> str | None:
    """None when ``target``'s questions can go to a provider batch; otherwise why not."""
    if target.embedded:
        return "the embedded judge runs on this machine and has no batch API: `judgekit run` asks it"
    try:
        provider, _ = provider_of(target)
    except Exception as exc:  # noqa: BLE001 - litellm raises several kinds for a model it cannot place
        return f"litellm cannot tell the provider of {target.litellm_model} ({_describe(exc)[:200]})"
    if provider not in batchable_providers():
        return (f"litellm cannot create batches for provider {provider!r} through an OpenAI-compatible batch API "
                f"(judgekit batches: {', '.join(batchable_providers())}): `judgekit run` asks it online")
    return None


def batch_body(target: JudgeTarget, request: CallRequest) -> dict[str, Any]:
    """The body of one batch line: exactly what an online call of ``request`` sends the provider
    (``request_params``, the provider's model name, and ``extra_body`` merged in as the
    OpenAI client merges it)."""
    _, model = provider_of(target)
    return {"model": model, **request_params(request), **(request.extra_body or {})}


def batch_line(custom_id: str, body: dict[str, Any]) -> bytes:
    return json.dumps({"custom_id": custom_id, "method": "POST", "url": BATCH_ENDPOINT, "body": body},
                      separators=(",", ":"), ensure_ascii=False).encode()


def completion_of(body: Any) -> RawReply:
    """A batch output line's response body as the reply an online call would read: litellm's own
    conversion of a chat-completion JSON, then the same checks (``reply_of``); ``CallFailed``
    for a body that is no chat completion."""
    from judgekit.judge.backend import CallFailed

    if not isinstance(body, dict):
        raise CallFailed("provider_error", "malformed reply: its body is not a JSON object", ("provider_error",))
    try:
        from litellm.litellm_core_utils.llm_response_utils.convert_dict_to_response import (
            convert_to_model_response_object,
        )

        response = convert_to_model_response_object(response_object=body,
                                                     model_response_object=_litellm().ModelResponse())
    except Exception as exc:  # noqa: BLE001 - litellm raises several kinds for a body it cannot read
        raise CallFailed("provider_error", f"could not read the reply: {_describe(exc)[:500]}",
                         ("provider_error",)) from None
    return reply_of(response)


@dataclass
class BatchState:
    """What the provider says of a batch."""

    status: str
    total: int
    completed: int
    failed: int
    output_file_id: str | None
    error_file_id: str | None
    errors: str | None = None


class BatchClient:
    """The files and batches calls of one judge endpoint, through litellm."""

    def __init__(self, provider: str, connection: Connection):
        self.provider = provider
        self.connection = connection

    def _kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"custom_llm_provider": self.provider}
        if self.connection.api_base:
            kwargs["api_base"] = self.connection.api_base
        if self.connection.api_key:
            kwargs["api_key"] = self.connection.api_key
        return kwargs

    def _call(self, what: str, function: str, **kwargs: Any) -> Any:
        try:
            return getattr(_litellm(), function)(**kwargs, **self._kwargs())
        except Exception as exc:  # noqa: BLE001 - whatever the provider or litellm raised, said in one line
            raise BatchCallFailed(f"{what} failed: {_describe(exc)[:1000]}") from None

    def submit(self, data: IO[bytes], metadata: dict[str, str]) -> tuple[str, str]:
        """Upload ``data`` (JSON Lines of requests, read from where it stands) and create its
        batch: (batch id, input file id)."""
        uploaded = self._call("uploading the batch file", "create_file", file=("judgekit-batch.jsonl", data),
                              purpose="batch")
        batch = self._call("creating the batch", "create_batch", completion_window=COMPLETION_WINDOW,
                           endpoint=BATCH_ENDPOINT, input_file_id=uploaded.id, metadata=metadata)
        return str(batch.id), str(uploaded.id)

    def state(self, batch_id: str) -> BatchState:
        batch = self._call(f"reading batch {batch_id}", "retrieve_batch", batch_id=batch_id)
        counts = getattr(batch, "request_counts", None)
        errors = getattr(batch, "errors", None)
        return BatchState(
            status=str(batch.status), total=int(getattr(counts, "total", 0) or 0),
            completed=int(getattr(counts, "completed", 0) or 0), failed=int(getattr(counts, "failed", 0) or 0),
            output_file_id=getattr(batch, "output_file_id", None), error_file_id=getattr(batch, "error_file_id", None),
            errors=None if not errors else str(errors)[:1000])

    def content(self, file_id: str) -> bytes:
        return bytes(self._call(f"downloading file {file_id}", "file_content", file_id=file_id).content)

    def cancel(self, batch_id: str) -> str:
        return str(self._call(f"cancelling batch {batch_id}", "cancel_batch", batch_id=batch_id).status)
