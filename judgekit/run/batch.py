"""Provider batches as a cache filler: ``judgekit batch submit`` and ``judgekit batch status``.

``submit_batches`` plans the suite exactly as ``--dry-run`` does (``scan_questions``: same
windows, keys and memo), takes the questions the cache does not answer and that no open batch
of this cache folder already holds, and sends them as one batch per judge endpoint (at most
``MAX_BATCH_REQUESTS`` lines each, the providers' limit), each line with its cache key as
``custom_id`` and the very request an online call sends as its body. A record of each batch is
written beside the cache (``judgekit.run.batch_record``). A judge that cannot batch (the
embedded judge; a provider litellm sends no batch to) is skipped and said why; when no judge
with questions to ask can batch, nothing is sent and ``submit_batches`` raises ConfigError.

``collect_batches`` (``judgekit.run.batch_collect``) stores the answers; then ``judgekit run``
finds every verdict in the cache.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO

from judgekit._util.clock import utc_now
from judgekit._util.text import redact
from judgekit.cache.store import VerdictCache
from judgekit.errors import ConfigError, InputError
from judgekit.judge.batch import (
    BatchCallFailed, BatchClient, BatchState, batch_body, batch_line, batch_support, batchable_providers, provider_of,
)
from judgekit.judge.resolve import Connector, JudgeOverride
from judgekit.judge.spec import JudgeSpec
from judgekit.judge.target import Connection, JudgeTarget
from judgekit.run.ask import call_request
from judgekit.run.batch_record import (
    BatchRecord, BatchRequest, plan_hasher, read_records, write_record,
)
from judgekit.run.estimate import Pricer
from judgekit.run.jobs import JudgeJob, identity_of
from judgekit.run.options import RunOptions, cache_dir_of
from judgekit.run.plan import Select
from judgekit.run.scan import QuestionScan, scan_questions
from judgekit.suite import LoadedSuite

MAX_BATCH_REQUESTS = 50_000  # OpenAI's limit on the lines of one batch


@dataclass
class _Part:
    """One batch to send: its lines spooled to a temporary file (prompts are let go window by
    window, so a large suite is never held in memory), and the questions they ask."""

    file: IO[bytes]
    requests: list[BatchRequest] = field(default_factory=list)
    prompt_tokens: int = 0


@dataclass
class _Pending:
    """The questions of one judge endpoint to send, in parts of at most ``MAX_BATCH_REQUESTS``."""

    target: JudgeTarget
    parts: list[_Part] = field(default_factory=list)
    identities: dict[str, int] = field(default_factory=dict)
    identity_list: list[dict] = field(default_factory=list)

    def add(self, line: bytes, request: BatchRequest, prompt_tokens: int, stack: ExitStack) -> None:
        if not self.parts or len(self.parts[-1].requests) >= MAX_BATCH_REQUESTS:
            self.parts.append(_Part(stack.enter_context(tempfile.TemporaryFile())))
        part = self.parts[-1]
        part.file.write(line + b"\n")
        part.requests.append(request)
        part.prompt_tokens += prompt_tokens


@dataclass
class SubmitReport:
    """What ``submit_batches`` did."""

    cache_dir: Path
    questions: int = 0
    cached: int = 0
    in_open_batches: int = 0
    records: list[BatchRecord] = field(default_factory=list)
    skipped: dict[str, tuple[int, str]] = field(default_factory=dict)
    """Judge (model pin at endpoint) -> (questions not sent, why it cannot batch)."""


def submit_batches(loaded: LoadedSuite, options: RunOptions | None = None, *, select: Select = None,
                   client_for: Callable[[str, Connection], BatchClient] = BatchClient,
                   now: Callable[[], datetime] = utc_now) -> SubmitReport:
    """Send the suite's uncached judge questions as provider batches and record them (see the
    module docstring). ``client_for(provider, connection)`` makes the files-and-batches client."""
    options = options or RunOptions()
    if not options.use_cache:
        raise ConfigError("a batch fills the verdict cache: it cannot run with --no-cache")
    directory = cache_dir_of(loaded, options)
    report = SubmitReport(directory)
    in_flight = {request.key for _, record in read_records(directory) if record.open for request in record.requests}
    store = VerdictCache(directory, read_only=True) if directory.exists() else None
    pricer = Pricer()
    pending: dict[tuple[str, str], _Pending] = {}
    plan = plan_hasher(loaded.suite.name)
    with ExitStack() as stack:
        connect = Connector(stack)
        try:
            for _, questions in scan_questions(loaded, options, store, QuestionScan(), select=select):
                for question in questions:
                    plan.update(bytes.fromhex(question.key))
                    report.questions += 1
                    if question.cached:
                        report.cached += 1
                    elif question.key in in_flight:
                        report.in_open_batches += 1
                    else:
                        _add(pending, question.key, question.job, report, connect, pricer, stack)
        finally:
            if store is not None:
                store.close()
        if not pending and report.skipped:
            why = "; ".join(f"{judge}: {reason}" for judge, (_, reason) in sorted(report.skipped.items()))
            raise ConfigError(f"no judge of this suite with questions to ask can batch ({why})")
        fingerprint = plan.hexdigest()
        for batch in pending.values():
            for part in batch.parts:
                record = _send(batch, part, connect, client_for, pricer, report, loaded.suite.name, fingerprint, now)
                write_record(directory, record)
                report.records.append(record)
    return report


def _add(pending: dict[tuple[str, str], _Pending], key: str, job: JudgeJob, report: SubmitReport,
         connect: Connector, pricer: Pricer, stack: ExitStack) -> None:
    target = job.judge
    name = f"{target.model_pin} at {target.endpoint}"
    if name in report.skipped:
        report.skipped[name] = (report.skipped[name][0] + 1, report.skipped[name][1])
        return
    batch = pending.get((target.model_pin, target.endpoint))
    if batch is None:
        if (why := batch_support(target)) is not None:
            report.skipped[name] = (1, why)
            return
        batch = pending[(target.model_pin, target.endpoint)] = _Pending(target)
    identity = identity_of(job)
    material = repr(sorted(identity.items()))
    if material not in batch.identities:
        batch.identities[material] = len(batch.identity_list)
        batch.identity_list.append(identity)
    fingerprints = [job.fingerprint] if job.fingerprint is not None else []
    batch.add(batch_line(key, batch_body(target, call_request(job, connect(target)))),
              BatchRequest(key=key, axis=job.axis, identity=batch.identities[material], fingerprints=fingerprints),
              pricer.tokens(target.litellm_model, job.prompt.messages), stack)


def _send(batch: _Pending, part: _Part, connect: Connector, client_for: Callable[[str, Connection], BatchClient],
          pricer: Pricer, report: SubmitReport, suite: str, fingerprint: str, now: Callable[[], datetime]) -> BatchRecord:
    target = batch.target
    provider, _ = provider_of(target)
    requests, prompt_tokens = part.requests, part.prompt_tokens
    completion_max = len(requests) * target.spec.max_tokens
    online = pricer.cost(target.litellm_model, prompt_tokens, completion_max)
    found = pricer.batch_per_token(target.litellm_model)
    client = client_for(provider, connect(target))
    try:
        part.file.seek(0)
        batch_id, input_file_id = client.submit(part.file, {"judgekit_suite": suite[:500], "judgekit_plan": fingerprint})
    except BatchCallFailed as exc:
        raise InputError(f"{target.model_pin} at {target.endpoint}: {exc} (nothing was sent for this judge; "
                         f"{len(report.records)} batch(es) sent before it are recorded)", report.cache_dir) from None
    return BatchRecord(
        batch_id=batch_id, input_file_id=input_file_id, provider=provider, model_pin=target.model_pin,
        litellm_model=target.litellm_model, endpoint=target.endpoint, api_base=target.api_base,
        api_key_env=target.api_key_env, suite=suite, plan_fingerprint=fingerprint, created_at=now(),
        questions=report.questions, cached=report.cached, sent=len(requests), prompt_tokens=prompt_tokens,
        completion_tokens_max=completion_max,
        priced="unknown" if found is None else "litellm batch price" if found[1] else "half the online price",
        estimated_cost_usd_max=pricer.batch_cost(target.litellm_model, prompt_tokens, completion_max),
        online_cost_usd_max=None if online is None else online[1],
        identities=batch.identity_list, requests=requests,
    )


# --- status ---------------------------------------------------------------------------------------


Servers = frozenset[tuple[str, str]]
"""(api_base, api_key_env) pairs a batch record may send that key to that server by."""


def servers_of(loaded: LoadedSuite | None, override: JudgeOverride | None = None) -> Servers:
    """The (api_base, api_key_env) pairs the suite's judges name (with the command line's
    override), and the override's own: the servers a record may send an API key to."""
    override = override or JudgeOverride()
    specs = [] if loaded is None else [loaded.suite.judge, *(rubric.judge for rubric in loaded.rubrics.values())]
    pairs = {(override.api_base or spec.api_base, override.api_key_env or spec.api_key_env)
             for spec in specs if spec is not None}
    pairs.add((override.api_base, override.api_key_env))
    return frozenset((base, env) for base, env in pairs if base and env)


def client_of(record: BatchRecord, stack: ExitStack, servers: Servers = frozenset(),
              client_for: Callable[[str, Connection], BatchClient] = BatchClient) -> BatchClient:
    """The client that reaches ``record``'s batch: its server, and the key from its variable.

    A record is read from the cache folder, which may come from a shared CI cache: it may send
    the key of its ``api_key_env`` to its own ``api_base`` only when that pair is in ``servers``
    (the suite's judges, the command line), never because the record says so. Without a server
    (the provider's own) or without a key, nothing needs vouching for."""
    if record.api_base and record.api_key_env and (record.api_base, record.api_key_env) not in servers:
        raise ConfigError(
            f"batch {record.batch_id}'s record would send the API key in ${record.api_key_env} to {record.api_base}, "
            "which neither the suite's judges nor the command line name: name the suite "
            "(`judgekit batch collect SUITE`) or pass --judge-api-base and --judge-api-key-env")
    if record.provider not in batchable_providers():
        raise ConfigError(f"batch {record.batch_id}'s record names provider {record.provider!r}, which judgekit "
                          "sends no batch to")
    target = JudgeTarget(spec=JudgeSpec(model=record.model_pin), litellm_model=record.litellm_model,
                         model_pin=record.model_pin, api_base=record.api_base, api_key_env=record.api_key_env,
                         endpoint=record.endpoint)
    return client_for(record.provider, Connector(stack)(target))


def refresh(record: BatchRecord, client: BatchClient) -> BatchState:
    """Ask the provider for the batch's state and counts, and note them in ``record``."""
    state = client.state(record.batch_id)
    record.state = state.status
    record.counts = {"total": state.total, "completed": state.completed, "failed": state.failed}
    record.provider_errors = None if state.errors is None else redact(state.errors)
    return state


def batch_status(cache_dir: Path, *, suite: str | None = None, servers: Servers = frozenset(),
                 client_for: Callable[[str, Connection], BatchClient] = BatchClient) -> list[BatchRecord]:
    """Every batch recorded in ``cache_dir`` (of ``suite``, when named), oldest first; the open
    ones with their state and counts as the provider reports them now (written to the record)."""
    records = []
    with ExitStack() as stack:
        for _, record in read_records(cache_dir, suite=suite):
            if record.open:
                try:
                    refresh(record, client_of(record, stack, servers, client_for))
                except BatchCallFailed as exc:
                    raise InputError(f"batch {record.batch_id}: {exc}", cache_dir) from None
                write_record(cache_dir, record)
            records.append(record)
    return records


def cancel_batch(cache_dir: Path, batch_id: str, *, servers: Servers = frozenset(),
                 client_for: Callable[[str, Connection], BatchClient] = BatchClient) -> BatchRecord:
    """Ask the provider to cancel ``batch_id`` (recorded in ``cache_dir``); its state is noted in
    the record. What it answered before is still collected; the rest is unscored ``cancelled``."""
    found = [record for _, record in read_records(cache_dir) if record.batch_id == batch_id]
    if not found:
        raise InputError(f"no batch {batch_id!r} is recorded here: see `judgekit batch status`", cache_dir)
    [record] = found
    if not record.open:
        raise InputError(f"batch {batch_id!r} was collected already: nothing to cancel", cache_dir)
    with ExitStack() as stack:
        client = client_of(record, stack, servers, client_for)
        try:
            client.cancel(batch_id)
            refresh(record, client)
        except BatchCallFailed as exc:
            raise InputError(f"batch {batch_id}: {exc}", cache_dir) from None
    write_record(cache_dir, record)
    return record
