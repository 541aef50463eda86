"""Asking the judge: cache first, bounded concurrency, a token and cost ledger, a budget.

A job is one (trajectory, axis) verdict. Identical jobs in one run share one call. Each
validated verdict goes to the cache's writer thread the moment it exists, without holding up
the next call, and a run killed at any point repeats no call whose verdict was stored.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property, lru_cache, partial
from typing import Any

from pydantic import BaseModel, Field

from judgekit._util.io import RECORD_CONFIG, sha256_json
from judgekit._util.text import redact
from judgekit._util.clock import utc_now
from judgekit._util.version import __version__, code_sha256
from judgekit.cache.store import CacheWriter, VerdictStore, cache_key
from judgekit.judge.backend import Backend, CallFailed, CallRequest, LitellmBackend, litellm_version
from judgekit.judge.local import compact_json_grammar
from judgekit.judge.target import Connection, JudgeTarget
from judgekit.prompt import Prompt
from judgekit.rubric.model import Rubric
from judgekit.suite import Budget
from judgekit.verdict import JudgeVerdict, Provenance, ReplyProblem, answer_model, read_reply

MEMO_SIZE = 4096  # verdicts remembered across windows when no writable store keeps them


@lru_cache(maxsize=1024)
def answer_schema(axis: str, form: str = "full", evidence_ids: tuple[str, ...] = ()) -> tuple[dict[str, Any], str]:
    """The answer schema (sent as the response format) and its hash (in the cache key).

    ``full``: the axis's answer model as it is. ``compact``: its restriction for small judges
    (``_Answer.compact_schema``), built for the ids of the evidence the prompt shows; a
    different schema is a different question, so its hash keys the verdict too.
    """
    model = answer_model(axis)
    if form == "compact":
        schema = model.compact_schema(evidence_ids)
    elif form == "full":
        schema = model.model_json_schema()
    else:
        raise ValueError(f"no answer form {form!r} (full or compact)")
    return schema, sha256_json(schema)


JSON_SPACE_CHARS = 22
"""The most whitespace llama.cpp's JSON-schema grammar admits at each point it admits any
(``| " " | "\\n"{1,2} [ \\t]{0,20}``)."""


def answer_chars_bound(schema: dict[str, Any], space: int = JSON_SPACE_CHARS) -> int:
    """The longest reply a grammar built from ``schema`` admits, in characters: an upper bound
    on its tokens, as every token is at least one character. Only for bounded schemas (compact
    ones): every array has ``maxItems``, every string a ``maxLength`` and no escapes (compact
    text), every object lists all its properties as required."""
    if "enum" in schema:
        return max(len(json.dumps(value)) for value in schema["enum"]) + space
    kind = schema.get("type")
    if kind == "boolean":
        return len("false") + space
    if kind == "string":
        if "pattern" not in schema or "maxLength" not in schema:
            raise ValueError("unbounded string: no maxLength, or escapes allowed")
        return 2 + schema["maxLength"] + space
    if kind == "array":
        if "maxItems" not in schema:
            raise ValueError("unbounded array: no maxItems")
        n = schema["maxItems"]
        return 2 * (1 + space) + n * answer_chars_bound(schema["items"], space) + max(n - 1, 0) * (1 + space)
    if kind == "object":
        properties = schema["properties"]
        if set(schema.get("required", ())) != set(properties) or schema.get("additionalProperties") is not False:
            raise ValueError("an object whose properties are not all required and closed")
        members = sum(len(json.dumps(name)) + 1 + 2 * space + answer_chars_bound(value, space)
                      for name, value in properties.items())
        return 2 * (1 + space) + members + max(len(properties) - 1, 0) * (1 + space)
    raise ValueError(f"cannot bound a schema of type {kind!r}")


def direct_connection(target: JudgeTarget) -> Connection:
    """A connection without an executor's help (tests, benchmarks): no embedded judge, and no
    key read but the target's own variable."""
    from judgekit.judge.resolve import Connector

    if target.embedded:
        raise RuntimeError("the embedded judge needs a Connector that can start it")
    return Connector(None)(target)


FINGERPRINT_FORMAT = 2


@dataclass
class JudgeJob:
    rubric: Rubric
    axis: str
    prompt: Prompt
    judge: JudgeTarget
    repeat: int = 0  # calibration --repeats: the same input asked again under its own key
    inputs_sha256: str | None = None
    """sha256 of all the prompt is rendered from besides the rubric, the judge and judgekit's
    code (the trajectory's line), when that is all: then ``fingerprint`` names the question."""
    known_key: str | None = field(default=None, compare=False)
    """The key the store's memo gave for ``fingerprint`` (``key`` is then not rendered for)."""

    @cached_property
    def _answer_schema(self) -> tuple[dict[str, Any], str]:
        form = self.judge.spec.answer_form
        ids = tuple(self.prompt.evidence.items) if form == "compact" else ()  # the full schema names no id
        return answer_schema(self.axis, form, ids)

    @property
    def response_schema(self) -> dict[str, Any]:
        """The schema the judge answers in: its spec's answer form for this prompt's evidence."""
        return self._answer_schema[0]

    @property
    def compact_decoding(self) -> bool:
        """The embedded judge answers compact schemas under a grammar that admits no whitespace
        (llama.cpp's own ``response_format`` grammar lets a small model spend most of its
        tokens on indentation: measured 40 instead of 130-220 tokens per answer)."""
        return self.judge.embedded and self.judge.spec.answer_form == "compact"

    def request_format(self) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """``(response_format, extra_body)`` of this job's request."""
        if self.compact_decoding:
            return None, {"grammar": compact_json_grammar(self.response_schema)}
        return response_format(self.response_schema), None

    @property
    def key(self) -> str:
        """The verdict's cache key: the one the memo gave for the fingerprint, else computed from
        the rendered prompt (once: a job does not change once built)."""
        return self.known_key if self.known_key is not None else self.rendered_key

    @cached_property
    def rendered_key(self) -> str:
        """The cache key, from the rendered prompt: the question exactly as the judge gets it."""
        return cache_key({**self._question(), "messages": self.prompt.messages})

    @cached_property
    def fingerprint(self) -> str | None:
        """A name for this question that needs no rendering (None when it has none): the key's
        material with the prompt's inputs in place of its messages, and the digest of the code
        that renders them. The same fingerprint renders the same messages, so the store keeps
        fingerprint -> key and a rerun finds its verdicts without building a prompt."""
        code = code_sha256()
        if self.inputs_sha256 is None or code is None:
            return None
        spec = self.judge.spec
        # Every part is a hex digest or a word from a closed set: one per line is unambiguous.
        material = "\n".join((
            f"judgekit-fingerprint/{FINGERPRINT_FORMAT}", code, _static_question_sha256(self),
            self._answer_schema[1], self.inputs_sha256, spec.answer_form,
            "show-output" if spec.show_output_for_task_success else "no-output",
        ))
        return hashlib.sha256(material.encode("ascii")).hexdigest()

    def _question(self) -> dict[str, Any]:
        """The cache key's material, all but the messages."""
        return {**self._static_question(), "response_schema_sha256": self._answer_schema[1]}

    def _static_question(self) -> dict[str, Any]:
        """The part of ``_question`` that every job of one rubric, axis, judge, template and
        repeat shares (the answer schema can name the prompt's own evidence ids)."""
        repeat = {"repeat": self.repeat} if self.repeat else {}
        decoding = {"decoding": "compact-json-grammar"} if self.compact_decoding else {}
        return {
            **repeat,
            **decoding,
            "rubric": self.rubric.ref,
            "rubric_sha256": self.rubric.sha256(),
            "axis": self.axis,
            "template_sha256": self.prompt.template_sha256,
            "model": self.judge.model_pin,
            "endpoint": self.judge.endpoint,
            "override": self.judge.override,
            "parameters": self.judge.spec.cache_parameters(),
        }


_STATIC_QUESTIONS: dict[tuple[int, int, str, int, str], tuple[Rubric, JudgeTarget, str]] = {}
_STATIC_QUESTIONS_MAX = 256


def _static_question_sha256(job: JudgeJob) -> str:
    """sha256 of ``job._static_question()``, worked out once per rubric, judge, axis, repeat and
    template (a run of a million questions has a few of them). Rubrics, targets and their specs
    are frozen, so the same objects give the same digest; each entry holds its rubric and
    target, so an id is never taken for another object's."""
    key = (id(job.rubric), id(job.judge), job.axis, job.repeat, job.prompt.template_sha256)
    found = _STATIC_QUESTIONS.get(key)
    if found is not None and found[0] is job.rubric and found[1] is job.judge:
        return found[2]
    if len(_STATIC_QUESTIONS) >= _STATIC_QUESTIONS_MAX:
        _STATIC_QUESTIONS.clear()  # a long-lived process plans many runs: keep only recent ones
    digest = sha256_json(job._static_question())
    _STATIC_QUESTIONS[key] = (job.rubric, job.judge, digest)
    return digest


class Ledger(BaseModel):
    """Calls, cache use, tokens and cost of a run (litellm's usage and offline cost map).

    Ledgers of parts of a run (windows, workers) merge by summing: ``total = a + b``."""

    model_config = RECORD_CONFIG

    calls: int = Field(0, description="Calls made to judges, retries included.")
    cache_hits: int = Field(0, description="Verdicts the cache answered.")
    cache_refused: dict[str, int] = Field(default_factory=dict, description="Kind of refusal -> cache entries refused.")
    cache_read_only: bool = Field(False, description="The cache could be read but not written.")
    cache_dir: str | None = Field(None, description="The verdict cache used, if any.")
    cache_withheld: int = Field(0, description="Verdicts not stored because they held a secret.")
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = Field(0.0, description="Dollars, from litellm's offline cost map.")
    calls_without_cost: int = Field(
        0, description="Calls of unknown cost (not 0): replies the cost map could not price, and attempts that "
                       "got no reply (a provider may bill a request that timed out).")
    failed_attempts: dict[str, int] = Field(
        default_factory=dict, description="Attempts that got no usable reply, by why ('timeout', 'provider_error').")
    unscored: dict[str, int] = Field(default_factory=dict, description="Unscored reason -> verdicts.")

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Ledger) -> Ledger:
        def summed(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
            return {key: a.get(key, 0) + b.get(key, 0) for key in sorted(a.keys() | b.keys())}

        return Ledger(
            calls=self.calls + other.calls, cache_hits=self.cache_hits + other.cache_hits,
            cache_refused=summed(self.cache_refused, other.cache_refused),
            cache_read_only=self.cache_read_only or other.cache_read_only,
            cache_dir=self.cache_dir or other.cache_dir, cache_withheld=self.cache_withheld + other.cache_withheld,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cost_usd=self.cost_usd + other.cost_usd, calls_without_cost=self.calls_without_cost + other.calls_without_cost,
            failed_attempts=summed(self.failed_attempts, other.failed_attempts),
            unscored=summed(self.unscored, other.unscored),
        )

    def over(self, budget: Budget | None) -> str | None:
        if budget is None:
            return None
        if budget.max_tokens is not None and self.tokens >= budget.max_tokens:
            return f"token budget spent ({self.tokens} of {budget.max_tokens})"
        if budget.max_cost_usd is not None and self.cost_usd >= budget.max_cost_usd:
            return f"cost budget spent (${self.cost_usd:.4f} of ${budget.max_cost_usd})"
        return None

    def as_dict(self) -> dict[str, Any]:
        data = self.model_dump(mode="json")
        data["cost_usd"] = round(self.cost_usd, 6)
        data["cache_refused"] = dict(sorted(self.cache_refused.items()))
        data["unscored"] = dict(sorted(self.unscored.items()))
        return data


def response_format(schema: dict[str, Any]) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": "verdict", "schema": schema, "strict": True}}


class JudgeRunner:
    """Asks the judge the questions of a list of jobs: any ``Backend``, any ``VerdictStore``.

    ``connect`` turns a job's target into its connection (address, key); the executor's
    ``Connector`` starts the embedded judge. One runner serves every window of a run: its
    ledger adds up, and a small memo answers a question repeated in a later window when no
    store does.
    """

    def __init__(
        self,
        *,
        backend: Backend | None = None,
        cache: VerdictStore | None = None,
        concurrency: int = 8,
        budget: Budget | None = None,
        on_done: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        connect: Callable[[JudgeTarget], Connection] = direct_connection,
    ):
        self.backend = backend or LitellmBackend()
        self.cache = cache
        self.concurrency = concurrency
        self.budget = budget
        self.ledger = Ledger()
        self.on_done = on_done
        self.clock = clock
        self.connect = connect
        self.refused: list[tuple[str, str]] = []  # (key, why) of cached verdicts not taken
        self._slots: dict[tuple[str, str | None], asyncio.Semaphore] = {}
        self._versions = (__version__, litellm_version())
        self._memo: OrderedDict[str, JudgeVerdict] = OrderedDict()
        self._prepared = False

    async def run(self, jobs: list[JudgeJob]) -> list[JudgeVerdict]:
        """Verdicts in job order.

        First the plan, before any call: each job's cache key, one question per distinct key
        (jobs asking the same thing share its verdict), and the cache's answers. Hashing and
        SQLite reads both release the GIL; done here, they do not stall the event loop while
        litellm's worker threads hold it.

        Then each open question gets its own task, at most ``concurrency`` of them alive at a
        time. A task hands its validated verdict to the cache's writer thread and ends, making
        room for the next question; a job counts as done once its verdict is committed. At most
        ``concurrency`` verdicts wait to be committed at any time (a task that would exceed it
        asks the writer to commit now and waits), so a run killed at any moment loses at most
        2 x ``concurrency`` calls: those in flight and those answered but not yet stored. None
        whose verdict was stored repeats.

        A task per call, not long-lived workers: each call runs in its own copy of the run's
        context, so context variables one call sets (litellm stamps a trace id on each) cannot
        carry over to the next; and on the benchmark (benchmarks/bench_judge.py, paired rounds)
        a run took ~5% less wall and CPU than with 32 workers that went straight from one reply
        to their next call.
        """
        results: list[JudgeVerdict | None] = [None] * len(jobs)

        def answer(indexes: list[int], verdict: JudgeVerdict) -> None:
            if verdict.unscored_reason is not None:  # counted per job, like cache hits
                reason = verdict.unscored_reason
                self.ledger.unscored[reason] = self.ledger.unscored.get(reason, 0) + len(indexes)
            for index in indexes:
                results[index] = verdict
                if self.on_done is not None:
                    self.on_done()

        def hit(indexes: list[int], cached: JudgeVerdict) -> None:
            self.ledger.cache_hits += len(indexes)
            cached.provenance.cache_hit = True
            cached.provenance.attempts = 0
            answer(indexes, cached)

        def fingerprints(indexes: list[int]) -> list[str]:
            return list(dict.fromkeys(fp for index in indexes if (fp := jobs[index].fingerprint) is not None))

        questions: dict[str, list[int]] = {}
        for index in self._by_fingerprint(jobs, hit):  # rendered only when the memo cannot answer
            questions.setdefault(jobs[index].key, []).append(index)

        open_questions: list[tuple[str, list[int]]] = []
        remember: list[tuple[str, str]] = []  # (fingerprint, key) of hits the memo did not know yet
        cached_verdicts = self._cached([(key, jobs[indexes[0]].axis) for key, indexes in questions.items()])
        for key, indexes in questions.items():
            cached = cached_verdicts.get(key)
            if cached is not None and (problem := self._foreign(cached, jobs[indexes[0]])) is not None:
                self.refused.append((key, problem))
                self._count_refused(problem)
                cached = None
            if cached is None:
                open_questions.append((key, indexes))
                continue
            remember += [(fp, key) for fp in fingerprints(indexes)]
            hit(indexes, cached)
        # A read-only cache (a checkout that cannot be written) serves its hits and stores nothing.
        writable = self.cache is not None and self.cache.writable
        if not open_questions:
            if remember and writable:
                with CacheWriter(self.cache) as memo:
                    memo.remember(remember)
            return [r for r in results if r is not None]
        if not self._prepared:
            self.backend.prepare()  # imports (seconds) now, not inside the first timed call
            self._prepared = True

        writer = CacheWriter(self.cache) if writable else None
        if writer is not None and remember:
            writer.remember(remember)
        calls = asyncio.Semaphore(self.concurrency)  # questions being asked
        unstored = asyncio.Semaphore(self.concurrency)  # verdicts handed to the writer, not yet committed
        storing: set[asyncio.Future[None]] = set()
        failures: list[BaseException] = []

        def committed(indexes: list[int], verdict: JudgeVerdict, future: asyncio.Future[None]) -> None:
            unstored.release()
            storing.discard(future)
            if future.cancelled():
                return
            if (error := future.exception()) is not None:
                failures.append(error)
            else:
                answer(indexes, verdict)

        async def ask(key: str, indexes: list[int]) -> None:
            try:
                verdict = await self._judge(jobs[indexes[0]], key)
                if verdict.status == "scored" and writer is None:
                    self._remember(key, verdict)  # no store keeps it for a later window
                if writer is None or verdict.status != "scored":
                    answer(indexes, verdict)
                    return
                # Waiting for the commit would hold this question's slot for up to the writer's
                # window (it commits in groups up to 0.1 s apart), so a task waits only when
                # ``concurrency`` verdicts are already waiting to be committed.
                if unstored.locked():
                    writer.flush()  # every slot waits on the writer: commit now, not at the window's end
                await unstored.acquire()
                future = writer.put(key, verdict, fingerprints(indexes))
                storing.add(future)
                future.add_done_callback(partial(committed, indexes, verdict))
            finally:
                calls.release()

        try:
            try:
                async with asyncio.TaskGroup() as asking:  # an error in one call cancels the others
                    for key, indexes in open_questions:
                        await calls.acquire()
                        if failures:  # a failed write stops the run: nothing more can be stored
                            calls.release()
                            break
                        asking.create_task(ask(key, indexes))
            except BaseExceptionGroup as group:
                raise group.exceptions[0] from None  # as itself: callers catch judgekit's errors by type
            if storing:
                writer.flush()
                await asyncio.wait(set(storing))
        finally:
            if writer is not None:
                writer.close()  # stores what was handed over, even on cancellation
            if self.cache is not None:
                self.ledger.cache_withheld = self.cache.report().get("withheld", 0)
        if failures:
            raise failures[0]
        return [r for r in results if r is not None]

    def _by_fingerprint(self, jobs: list[JudgeJob], hit: Callable[[list[int], JudgeVerdict], None]) -> list[int]:
        """Answer (``hit``) the jobs whose fingerprint the store's memo names a stored verdict for,
        without rendering their prompts; the indexes of the others, in order. A verdict found
        this way is checked as any cached one is; one that is refused, or missing, leaves its
        jobs to be rendered and looked up by their own key (where a refusal is counted once)."""
        lookup = look_up_by_fingerprint(jobs, self.cache)
        for reason in lookup.refused:
            self._count_refused(reason)
        rest = lookup.rest
        for key, cached, indexes in lookup.found:
            if self._foreign(cached, jobs[indexes[0]]) is not None:
                rest.extend(indexes)
                continue
            for index in indexes:
                jobs[index].known_key = key
            hit(indexes, cached)
        return sorted(rest)

    def _cached(self, wanted: list[tuple[str, str]]) -> dict[str, JudgeVerdict]:
        """What this run and the store already hold for these questions, read in one go. The
        memo (verdicts this run asked for and no store could keep) comes first, and the store is
        not read for its keys: what a read-only store holds under them may be the entry refused
        when they were asked, and would be refused, and asked, again in every later window."""
        found = {key: self._memo[key].model_copy(deep=True) for key, _ in wanted if key in self._memo}
        if self.cache is not None:
            before = len(getattr(self.cache, "refused", ()))
            found |= self.cache.get_many([(key, axis) for key, axis in wanted if key not in found])
            report = self.cache.report()
            self.ledger.cache_dir = report.get("directory")
            self.ledger.cache_read_only = not self.cache.writable
            for _, reason in list(getattr(self.cache, "refused", ()))[before:]:
                self._count_refused(reason)
        return found

    def _count_refused(self, reason: str) -> None:
        kind = reason.split(" (")[0]  # the kind of refusal, without its details
        self.ledger.cache_refused[kind] = self.ledger.cache_refused.get(kind, 0) + 1

    def _remember(self, key: str, verdict: JudgeVerdict) -> None:
        self._memo[key] = verdict
        self._memo.move_to_end(key)
        while len(self._memo) > MEMO_SIZE:
            self._memo.popitem(last=False)

    def _foreign(self, cached: JudgeVerdict, job: JudgeJob) -> str | None:
        """Why a cached verdict is not this job's own (None when it is).

        The key already covers the judge, the rubric and the template; the provenance stored
        with the entry must say the same, or a tampered entry could claim another judge's
        identity (and so its approval). Whether the reported model matched the pin is worked
        out again, never taken from the entry.
        """
        if differing := differing_identity(cached, job):
            return f"its provenance names another judge or rubric ({', '.join(differing)})"
        cached.provenance.model_mismatch = _mismatch(job.judge, cached.provenance.reported_model)
        return None

    def _slot(self, judge: JudgeTarget) -> asyncio.Semaphore:
        """Calls to one server never exceed its slots, so queued calls don't time out there."""
        key = (judge.model_pin, judge.api_base)
        if key not in self._slots:
            self._slots[key] = asyncio.Semaphore(judge.max_concurrency or self.concurrency)
        return self._slots[key]

    def _provenance(self, job: JudgeJob, key: str, **extra: Any) -> Provenance:
        judgekit_version, llm_version = self._versions
        return Provenance(
            **_identity(job),
            judgekit_version=judgekit_version,
            litellm_version=llm_version,
            created_at=utc_now(),
            cache_key=key,
            **extra,
        )

    def _count_failures(self, failures: tuple[str, ...]) -> None:
        """Attempts that got no usable reply: their cost is unknown, not 0."""
        self.ledger.calls_without_cost += len(failures)
        for reason in failures:
            self.ledger.failed_attempts[reason] = self.ledger.failed_attempts.get(reason, 0) + 1

    def _unscored(self, job: JudgeJob, key: str, reason: str, detail: str, **extra: Any) -> JudgeVerdict:
        return JudgeVerdict(
            axis=job.axis, status="unscored", unscored_reason=reason, detail=redact(detail)[:1000],
            provenance=self._provenance(job, key, **extra),
        )

    async def _judge(self, job: JudgeJob, key: str) -> JudgeVerdict:
        """One question the cache could not answer: call the judge and validate its reply."""
        if (spent := self.ledger.over(self.budget)) is not None:
            return self._unscored(job, key, "budget", spent)

        spec = job.judge.spec
        connection = self.connect(job.judge)
        answer_format, extra_body = job.request_format()
        request = CallRequest(
            model=job.judge.litellm_model,
            messages=job.prompt.messages,
            response_format=answer_format,
            extra_body=extra_body,
            temperature=spec.temperature,
            seed=spec.seed,
            max_tokens=spec.max_tokens,
            timeout_s=spec.timeout_s,
            api_base=connection.api_base,
            api_key=connection.api_key,
        )
        started = self.clock()
        attempts = prompt_tokens = completion_tokens = 0
        cost: float | None = 0.0
        problem = ""
        queued_s = 0.0  # waiting for a free slot on the server is not the judge's latency

        def latency() -> float:
            return self.clock() - started - queued_s

        for _ in range(1 + spec.invalid_reply_retries):
            try:
                waiting = self.clock()
                async with self._slot(job.judge):
                    queued_s += self.clock() - waiting
                    reply = await self.backend.complete(request, max_attempts=spec.max_attempts)
            except CallFailed as failed:
                attempts += failed.attempts
                self.ledger.calls += failed.attempts
                self._count_failures(failed.failures)
                return self._unscored(job, key, failed.reason, failed.detail, attempts=attempts,
                                      latency_s=latency())
            attempts += reply.attempts
            self.ledger.calls += reply.attempts
            self._count_failures(reply.failures)
            self.ledger.prompt_tokens += reply.prompt_tokens
            self.ledger.completion_tokens += reply.completion_tokens
            prompt_tokens += reply.prompt_tokens
            completion_tokens += reply.completion_tokens
            # The embedded judge runs on this machine: no provider bill, so $0 (as the dry run
            # estimates it), not the "unknown" of a model litellm's cost map does not list.
            priced = 0.0 if job.judge.embedded else reply.cost_usd
            if priced is None:
                self.ledger.calls_without_cost += 1
                cost = None
            else:
                self.ledger.cost_usd += priced
                cost = None if cost is None else cost + priced
            usage = {
                "reported_model": reply.reported_model,
                "model_mismatch": _mismatch(job.judge, reply.reported_model),
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "cost_usd": cost,
                "attempts": attempts,
            }
            outcome = read_reply(job.axis, reply.content, reply.refusal, reply.finish_reason, spec.max_tokens)
            if isinstance(outcome, ReplyProblem):
                if outcome.retry:  # not an answer; asked again while retries are left
                    problem = outcome.detail
                    continue
                return self._unscored(job, key, outcome.reason, outcome.detail, latency_s=latency(), **usage)
            return JudgeVerdict(
                axis=job.axis, status="scored", answer=outcome,
                provenance=self._provenance(job, key, latency_s=latency(), **usage),
            )
        return self._unscored(job, key, "parse_failure", problem, latency_s=latency(), **usage)


@dataclass
class MemoLookup:
    """What a store's memo says of a list of jobs (``look_up_by_fingerprint``)."""

    found: list[tuple[str, JudgeVerdict, list[int]]]
    """(key, its stored verdict, the indexes of the jobs with that fingerprint), not yet checked
    against the jobs' own judge and rubric."""
    rest: list[int]
    """Jobs the memo cannot answer: no fingerprint, no entry, or no verdict under its key."""
    refused: list[str]
    """Why each fingerprint entry was refused (a verdict refused here is not listed: its jobs
    are in ``rest``, looked up by their key next, and counted there)."""


def look_up_by_fingerprint(jobs: list[JudgeJob], store: VerdictStore | None) -> MemoLookup:
    """The stored verdicts the memo names for these jobs, by fingerprint, without rendering a
    prompt: the one lookup a run and a dry run share. A store without a memo answers nothing."""
    keys_for = getattr(store, "keys_for", None)
    if keys_for is None:
        return MemoLookup([], list(range(len(jobs))), [])
    groups: dict[str, list[int]] = {}
    rest: list[int] = []
    for index, job in enumerate(jobs):
        if (fingerprint := job.fingerprint) is None:
            rest.append(index)
        else:
            groups.setdefault(fingerprint, []).append(index)
    if not groups:
        return MemoLookup([], rest, [])
    refused = getattr(store, "refused", [])
    before = len(refused)
    keys = keys_for(list(groups))
    reasons = [reason for _, reason in refused[before:]]
    found = store.get_many([(key, jobs[groups[fp][0]].axis) for fp, key in keys.items()]) if keys else {}
    answered: list[tuple[str, JudgeVerdict, list[int]]] = []
    for fingerprint, indexes in groups.items():
        key = keys.get(fingerprint)
        cached = found.get(key) if key is not None else None
        if cached is None:
            rest.extend(indexes)
        else:
            answered.append((key, cached, indexes))
    return MemoLookup(answered, rest, reasons)


def differing_identity(verdict: JudgeVerdict, job: JudgeJob) -> list[str]:
    """The provenance fields of a stored verdict that name another judge or rubric than the
    job's own (empty when it is the job's): a run refuses such a verdict."""
    return [name for name, value in _identity(job).items() if getattr(verdict.provenance, name) != value]


def _identity(job: JudgeJob) -> dict[str, Any]:
    """The provenance fields that say which judge answered which rubric: every verdict gets
    them, and a cached verdict must carry exactly the job's own."""
    return {
        "model_pin": job.judge.model_pin,
        "endpoint": job.judge.endpoint,
        "floating": job.judge.floating,
        "override": job.judge.override,
        "parameters": job.judge.spec.cache_parameters(),
        "rubric": job.rubric.ref,
        "rubric_sha256": job.rubric.sha256(),
        "template_sha256": job.prompt.template_sha256,
    }


def _mismatch(judge: JudgeTarget, reported: str | None) -> bool:
    """The API reported another model than the pin. Provider prefixes ('openai/') are ignored;
    a name that is merely part of the pin ('gpt-4o' for 'gpt-4o-mini-2024-07-18') is a mismatch."""
    if reported is None or judge.model_pin.startswith("local/"):
        return False
    pinned = judge.model_pin.split("@sha256:")[0].rsplit("/", 1)[-1]
    return reported.rsplit("/", 1)[-1] != pinned
