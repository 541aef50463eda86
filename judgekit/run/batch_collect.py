"""``judgekit batch collect``: a finished batch's replies into the verdict cache.

Every line of the output and error files is hostile until checked. A reply is read exactly as
an online one (``completion_of``: litellm's conversion and the same field checks; then
``read_reply``: the strict parser and the axis's answer schema); a valid one becomes a scored
verdict whose provenance names the batch (``batch_id``), stored through the cache's writer. A
reply that reports another model than the pin is stored as an online one is, with
``model_mismatch`` set: the gate refuses it unless ``gate.allow_model_mismatch``.

What is not stored is written to the batch's record (``unscored``, by cache key, with its
reason), and a line that names no question of the batch (not JSON, an unknown ``custom_id``)
is listed in ``rejected``. A question answered twice takes neither answer (``duplicate``). A
question the batch never answered (expired, cancelled, failed, or missing from a completed
batch's files) is unscored with that reason. None of these is in the cache, so the next
``judgekit run`` asks it online (or the next ``judgekit batch submit`` sends it again).

Collecting is idempotent and resumable: a verdict the cache already holds is not stored again,
and a record is marked collected only once everything is stored, so a collect cut short is
simply run again. A batch not yet finished is left for later.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from judgekit._util.clock import utc_now
from judgekit._util.strict_json import json_line_loads
from judgekit._util.text import redact
from judgekit.cache.store import VerdictCache
from judgekit.cache.writer import CacheWriter
from judgekit.errors import InputError
from judgekit.judge.backend import CallFailed
from judgekit.judge.batch import BatchCallFailed, BatchClient, completion_of
from judgekit.judge.target import Connection
from judgekit.run.ask import provenance
from judgekit.run.batch import Servers, client_of, refresh
from judgekit.run.batch_record import (
    MAX_REJECTED_SHOWN, TERMINAL, BatchRecord, BatchRequest, Unscored, read_records, write_record,
)
from judgekit.run.estimate import Pricer
from judgekit.run.jobs import pin_mismatch
from judgekit.verdict import JudgeVerdict, ReplyProblem, read_reply


@dataclass
class CollectReport:
    """What collect did with one batch."""

    record: BatchRecord
    collected: bool
    """False: the batch is not finished (or was collected before); nothing was stored."""
    stored: int = 0
    already_stored: int = 0
    unscored: Counter[str] = field(default_factory=Counter)


def collect_batches(cache_dir: Path, *, suite: str | None = None, servers: Servers = frozenset(),
                    client_for: Callable[[str, Connection], BatchClient] = BatchClient,
                    now: Callable[[], datetime] = utc_now) -> list[CollectReport]:
    """Collect every open batch recorded in ``cache_dir`` (of ``suite``, when named) that has
    finished; see the module docstring. ``servers``: where a record may send an API key
    (``judgekit.run.batch.client_of``)."""
    reports = []
    with ExitStack() as stack:
        for _, record in read_records(cache_dir, suite=suite):
            if not record.open:
                reports.append(CollectReport(record, collected=False))
                continue
            client = client_of(record, stack, servers, client_for)
            try:
                state = refresh(record, client)
                if state.status not in TERMINAL:
                    write_record(cache_dir, record)
                    reports.append(CollectReport(record, collected=False))
                    continue
                files = [(what, client.content(file_id)) for what, file_id in
                         (("output", state.output_file_id), ("error", state.error_file_id)) if file_id]
            except BatchCallFailed as exc:
                raise InputError(f"batch {record.batch_id}: {exc}", cache_dir) from None
            reports.append(_collect(cache_dir, record, files, now))
    return reports


def _collect(cache_dir: Path, record: BatchRecord, files: list[tuple[str, bytes]],
             now: Callable[[], datetime]) -> CollectReport:
    report = CollectReport(record, collected=True)
    verdicts, unscored, rejected = read_batch(record, files, Pricer())
    with VerdictCache(cache_dir) as store:
        if not store.writable:
            raise InputError("the verdict cache cannot be written here: nothing collected", cache_dir)
        held = store.get_many([(key, verdict.axis) for key, verdict in verdicts.items()])
        fresh = {key: verdict for key, verdict in verdicts.items() if key not in held}
        requests = {request.key: request for request in record.requests}
        asyncio.run(_store(store, fresh, requests))
        if store.withheld:  # a reply that quotes a secret is never cached (see judgekit.cache.store)
            kept = store.get_many([(key, verdict.axis) for key, verdict in fresh.items()])
            for key in [key for key in fresh if key not in kept]:
                unscored[key] = _unscored("provider_error", "the reply holds a secret: it is not cached")
                del fresh[key]
    report.stored = len(fresh)
    report.already_stored = len(held)
    record.stored += report.stored
    record.already_stored = report.already_stored
    record.model_mismatch = sum(v.provenance.model_mismatch for v in verdicts.values())
    record.unscored = unscored
    record.rejected = [redact(line) for line in rejected[:MAX_REJECTED_SHOWN]]
    record.rejected_count = len(rejected)
    record.collected_at = now()
    write_record(cache_dir, record)
    report.unscored = Counter(entry.reason for entry in unscored.values())
    return report


async def _store(store: VerdictCache, verdicts: dict[str, JudgeVerdict], requests: dict[str, BatchRequest]) -> None:
    with CacheWriter(store) as writer:
        futures = [writer.put(key, verdict, requests[key].fingerprints) for key, verdict in verdicts.items()]
        writer.flush()
        await asyncio.gather(*futures)


# --- reading the files ----------------------------------------------------------------------------


def _lines(files: list[tuple[str, bytes]]) -> Iterator[tuple[str, int, Any]]:
    """(file, line number, parsed line or None when it is not a JSON object)."""
    for what, content in files:
        for number, raw in enumerate(content.splitlines(), 1):
            if not raw.strip():
                continue
            try:
                line = json_line_loads(raw)
            except ValueError:
                line = None
            yield what, number, line if isinstance(line, dict) else None


def read_batch(record: BatchRecord, files: list[tuple[str, bytes]],
               pricer: Pricer) -> tuple[dict[str, JudgeVerdict], dict[str, Unscored], list[str]]:
    """The verdicts of the batch's valid replies, why the other questions have none, and the
    lines that name no question of the batch (see the module docstring)."""
    requests = {request.key: request for request in record.requests}
    found = pricer.batch_per_token(record.litellm_model) if record.requests else None
    prices = None if found is None else found[0]
    rejected: list[str] = []
    seen: Counter[str] = Counter()
    for what, number, line in _lines(files):
        custom_id = line.get("custom_id") if line is not None else None
        if line is None:
            rejected.append(f"{what} file line {number}: not a JSON object")
        elif not isinstance(custom_id, str) or custom_id not in requests:
            rejected.append(f"{what} file line {number}: custom_id {str(custom_id)[:80]!r} names no question "
                            "of this batch")
        else:
            seen[custom_id] += 1
    verdicts: dict[str, JudgeVerdict] = {}
    unscored: dict[str, Unscored] = {}
    for what, _, line in _lines(files):
        custom_id = line.get("custom_id") if line is not None else None
        if not isinstance(custom_id, str) or custom_id not in requests:
            continue
        if seen[custom_id] > 1:
            unscored[custom_id] = _unscored("duplicate", f"the batch answered this question {seen[custom_id]} "
                                                         "times: neither answer is taken")
            continue
        outcome = _read_line(record, requests[custom_id], line, prices)
        if isinstance(outcome, Unscored):
            unscored[custom_id] = outcome
        else:
            verdicts[custom_id] = outcome
    ended = record.state if record.state in ("expired", "cancelled", "failed") else "missing"
    for key in requests:
        if key not in verdicts and key not in unscored:
            unscored[key] = _unscored(ended, "the batch's files hold no reply for this question" if ended == "missing"
                                      else f"the batch {ended} before answering this question")
    return verdicts, unscored, rejected


_ENDED = {"batch_expired": "expired", "batch_cancelled": "cancelled", "batch_failed": "failed"}


def _unscored(reason: str, detail: str) -> Unscored:
    return Unscored(reason=reason, detail=redact(detail)[:1000])


def _read_line(record: BatchRecord, request: BatchRequest, line: dict[str, Any],
               prices: tuple[float, float] | None) -> JudgeVerdict | Unscored:
    """One line about ``request``: its verdict, or why it has none. ``prices``: (input, output)
    dollars per token in a batch, None: unknown."""
    response, error = line.get("response"), line.get("error")
    code = error.get("code") if isinstance(error, dict) else None
    if code in _ENDED:  # OpenAI's error line for a request the batch never ran
        return _unscored(_ENDED[code], f"the batch ended before answering it ({code}): {str(error.get('message'))[:800]}")
    if error is not None or not isinstance(response, dict) or response.get("status_code") != 200:
        status = response.get("status_code") if isinstance(response, dict) else None
        body = response.get("body") if isinstance(response, dict) else None
        return _unscored("provider_error", f"the batch could not answer it (status {status}): {str(error or body)[:800]}")
    try:
        reply = completion_of(response.get("body"))
    except CallFailed as failed:
        return _unscored("provider_error", failed.detail)
    identity = record.identities[request.identity]
    max_tokens = int(identity["parameters"]["max_tokens"])
    outcome = read_reply(request.axis, reply.content, reply.refusal, reply.finish_reason, max_tokens)
    if isinstance(outcome, ReplyProblem):
        return _unscored(outcome.reason, outcome.detail)
    cost = None if prices is None else prices[0] * reply.prompt_tokens + prices[1] * reply.completion_tokens
    return JudgeVerdict(
        axis=request.axis, status="scored", answer=outcome,
        provenance=provenance(identity, request.key, reported_model=reply.reported_model,
                              model_mismatch=pin_mismatch(record.model_pin, reply.reported_model),
                              prompt_tokens=reply.prompt_tokens, completion_tokens=reply.completion_tokens,
                              cost_usd=cost, attempts=1, batch_id=record.batch_id),
    )
