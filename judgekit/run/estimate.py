"""What a run would cost, from its plan alone: ``judgekit run --dry-run``.

``estimate_run`` plans the suite exactly as ``run_suite`` does (same windows, same judges, same
cache keys), scores the deterministic axes (free) and, for the judge questions, counts what the
verdict cache already answers (first by the memo's fingerprints, as a rerun does, so a warm
cache is counted without rendering a prompt) and estimates the rest: prompt tokens counted
with litellm's ``token_counter`` (for a model litellm does not know, with its default
tokenizer: an approximation), completion tokens bounded by each judge's ``max_tokens`` (an
upper bound, not a forecast), cost from litellm's offline price map. Nothing is spent: no judge
is called, the embedded judge is not started, no API key is read into a connection, and the
cache is only read (opened read-only; a cache folder that does not exist is not created).

A model the price map cannot price has cost ``None`` ("unknown"), never 0. The embedded judge
runs on this machine: it has no provider bill, so its cost is 0 and says why.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from judgekit.axes.table import axis_named
from judgekit.cache.store import VerdictCache
from judgekit.run.options import RunOptions
from judgekit.run.options import cache_dir_of
from judgekit.run.jobs import JudgeJob, differing_identity
from judgekit.run.memo import look_up_by_fingerprint
from judgekit.run.plan import Select, iter_plans
from judgekit.suite import Budget, LoadedSuite, load_suite

Priced = Literal["litellm", "embedded", "unknown", "not needed"]


class JudgeEstimate(BaseModel):
    """The questions one judge (model pin at an endpoint) would be asked, and their cost."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    model_pin: str = Field(description="The pinned model, as verdicts record it.")
    litellm_model: str = Field(description="The name litellm calls and prices.")
    endpoint: str = Field(description="Who answers: 'provider default', a server, or 'embedded'.")
    embedded: bool = Field(False, description="The embedded local judge (started only by a real run).")
    questions: int = Field(0, description="Distinct questions (cache keys) for this judge.")
    cached: int = Field(0, description="Questions the verdict cache already answers.")
    to_ask: int = Field(0, description="Questions a run would send to the judge.")
    prompt_tokens: int = Field(0, description="Prompt tokens of the questions to ask (litellm's token_counter).")
    completion_tokens_max: int = Field(
        0, description="Upper bound on completion tokens: each question to ask at its judge's max_tokens.")
    priced: Priced = Field(description="Where the cost comes from: litellm's price map, the embedded judge "
                                       "(no bill), unknown (the map has no price for this model), or not "
                                       "needed (nothing to ask).")
    prompt_cost_usd: float | None = Field(None, description="Cost of the prompt tokens; None: unknown.")
    cost_usd_max: float | None = Field(
        None, description="Upper bound on the cost (prompt + completion at max_tokens); None: unknown, never 0.")


class RunEstimate(BaseModel):
    """A dry run: what ``judgekit run`` would do and spend, worked out before anything is spent."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    suite: str = Field(description="The suite's name.")
    trajectories: int = Field(0, description="Trajectories the run covers.")
    deterministic: dict[str, dict[str, int]] = Field(
        default_factory=dict, description="Deterministic axis -> status -> trajectories; no model, no cost.")
    judged: dict[str, int] = Field(
        default_factory=dict, description="Judged axis -> judge questions planned (before identical ones merge).")
    judge_input_errors: dict[str, int] = Field(
        default_factory=dict, description="Judged axis -> trajectories not asked: their input is an error.")
    questions: int = Field(0, description="Distinct judge questions (cache keys) in the whole run.")
    cached: int = Field(0, description="Questions the verdict cache already answers.")
    to_ask: int = Field(0, description="Questions a run would send to a judge.")
    cache_dir: str | None = Field(None, description="The verdict cache read; None with --no-cache.")
    cache_exists: bool = Field(False, description="Whether that cache exists (a dry run never creates it).")
    cache_refused: dict[str, int] = Field(
        default_factory=dict, description="Kind of refusal -> cached entries a run would not take (asked again).")
    prompt_tokens: int = Field(0, description="Prompt tokens of the questions to ask.")
    completion_tokens_max: int = Field(0, description="Upper bound on their completion tokens (max_tokens each).")
    prompt_cost_usd: float | None = Field(None, description="Cost of the prompt tokens; None when any is unknown.")
    cost_usd_max: float | None = Field(None, description="Upper bound on the run's cost; None when any is unknown.")
    known_cost_usd_max: float = Field(0.0, description="Upper bound on the cost of the judges that could be priced.")
    unpriced: list[str] = Field(default_factory=list, description="Judges with questions to ask and no price.")
    judges: list[JudgeEstimate] = Field(default_factory=list, description="Per judge, in model-pin order.")
    budget: Budget | None = Field(None, description="The run's budget (--budget-*, else the suite's).")
    over_budget: str | None = Field(None, description="How the upper bound exceeds the budget, if it does.")
    invalid_reply_retries_max: int = Field(
        0, description="Most extra calls a question may take after replies that do not validate (not counted).")


# --- the cache, read only ------------------------------------------------------------------------


# --- tokens and prices ----------------------------------------------------------------------------


class _Pricer:
    """litellm's token counter and offline price map, imported on first use (seconds)."""

    def __init__(self):
        self._litellm = None
        self._prices: dict[str, tuple[float, float] | None] = {}

    def _lib(self):
        if self._litellm is None:
            from judgekit.judge.backend import _litellm  # sets LITELLM_LOCAL_MODEL_COST_MAP first

            self._litellm = _litellm()
        return self._litellm

    def tokens(self, model: str, messages: list[dict[str, str]]) -> int:
        from judgekit.judge.backend import count_prompt_tokens  # as a run reserves them against its rate

        return count_prompt_tokens(model, messages)

    def per_token(self, model: str) -> tuple[float, float] | None:
        """(input, output) dollars per token, or None when the map has no price for ``model``."""
        if model not in self._prices:
            try:
                prompt, completion = self._lib().cost_per_token(model=model, prompt_tokens=1_000_000,
                                                                completion_tokens=1_000_000)
                self._prices[model] = (float(prompt) / 1_000_000, float(completion) / 1_000_000)
            except Exception:  # noqa: BLE001 - litellm raises several kinds for a model it cannot price
                self._prices[model] = None
        return self._prices[model]

    def cost(self, model: str, prompt_tokens: int, completion_tokens: int) -> tuple[float, float] | None:
        """(prompt cost, prompt + completion cost) from litellm's map, or None: unknown."""
        if self.per_token(model) is None:
            return None
        prompt, completion = self._lib().cost_per_token(model=model, prompt_tokens=prompt_tokens,
                                                        completion_tokens=completion_tokens)
        return float(prompt), float(prompt) + float(completion)


# --- the estimate ---------------------------------------------------------------------------------


def _count(table: dict[str, int], key: str, n: int = 1) -> None:
    table[key] = table.get(key, 0) + n


def _refused_kind(reason: str) -> str:
    return reason.split(" (")[0]  # as the run's ledger counts them


def estimate_run(loaded: LoadedSuite | str | Path, options: RunOptions | None = None, *,
                 select: Select = None) -> RunEstimate:
    """What ``run_suite(loaded, options=options, select=select)`` would ask and spend.

    Planned in the run's own windows (``options.window`` trajectories at a time), so a large
    suite is never held whole: only the distinct question keys are kept (32 bytes each)."""
    options = options or RunOptions()
    loaded = loaded if isinstance(loaded, LoadedSuite) else load_suite(loaded)
    estimate = RunEstimate(suite=loaded.suite.name, budget=options.budget or loaded.suite.budget)
    store: VerdictCache | None = None
    if options.use_cache:
        directory = cache_dir_of(loaded, options)
        estimate.cache_dir = str(directory)
        estimate.cache_exists = directory.exists()
        if estimate.cache_exists:
            store = VerdictCache(directory, read_only=True)
    pricer = _Pricer()
    judges: dict[tuple[str, str], JudgeEstimate] = {}
    seen: set[bytes] = set()
    try:
        plans = iter_plans(loaded, select=select, override=options.override, allow_floating=options.allow_floating,
                           window=options.window)
        for plan in plans:
            estimate.trajectories += len(plan.items)
            for result in plan.items:
                for name, res in result.axes.items():
                    if axis_named(name).deterministic:
                        estimate.deterministic.setdefault(name, {})
                        _count(estimate.deterministic[name], res.status)
                    elif res.status == "error":
                        _count(estimate.judge_input_errors, name)
            answered = _by_fingerprint(plan.jobs, store, estimate)
            fresh: dict[str, JudgeJob] = {}
            for judgement in plan.judgements:
                _count(estimate.judged, judgement.axis)
                digest = bytes.fromhex(judgement.job.key)
                if digest not in seen:
                    seen.add(digest)
                    fresh[judgement.job.key] = judgement.job
            _estimate_window(estimate, fresh, store, judges, pricer, answered)
    finally:
        if store is not None:
            store.close()
    estimate.deterministic = {axis: dict(sorted(counts.items())) for axis, counts in sorted(estimate.deterministic.items())}
    estimate.judges = [judges[key] for key in sorted(judges)]
    _total(estimate, pricer)
    return estimate


def _by_fingerprint(jobs: list[JudgeJob], store: VerdictCache | None, estimate: RunEstimate) -> set[str]:
    """The keys of the questions the cache's memo answers, found as the run finds them
    (``look_up_by_fingerprint``), without rendering a prompt; each such job learns its key."""
    lookup = look_up_by_fingerprint(jobs, store)
    for reason in lookup.refused:
        _count(estimate.cache_refused, _refused_kind(reason))
    answered: set[str] = set()
    for key, verdict, indexes in lookup.found:
        if differing_identity(verdict, jobs[indexes[0]]):
            continue  # looked up by its key next, and counted there
        for index in indexes:
            jobs[index].known_key = key
        answered.add(key)
    return answered


def _estimate_window(estimate: RunEstimate, fresh: dict[str, JudgeJob], store: VerdictCache | None,
                     judges: dict[tuple[str, str], JudgeEstimate], pricer: _Pricer, answered: set[str]) -> None:
    """Count one window's new questions: cached (as the run would take them) or to ask.
    ``answered``: keys the memo already found (their verdicts are not read again); the keys
    found here are added to it."""
    unread = {key: job for key, job in fresh.items() if key not in answered}
    if store is not None and unread:
        before = len(store.refused)
        found = store.get_many([(key, job.axis) for key, job in unread.items()])
        for _, reason in store.refused[before:]:
            _count(estimate.cache_refused, _refused_kind(reason))
        for key, verdict in found.items():
            if differing_identity(verdict, unread[key]):
                _count(estimate.cache_refused, "its provenance names another judge or rubric")
            else:
                answered.add(key)
    for key, job in fresh.items():
        target = job.judge
        judge = judges.get((target.model_pin, target.endpoint))
        if judge is None:
            judge = judges[(target.model_pin, target.endpoint)] = JudgeEstimate(
                model_pin=target.model_pin, litellm_model=target.litellm_model, endpoint=target.endpoint,
                embedded=target.embedded, priced="embedded" if target.embedded else "unknown")
        estimate.invalid_reply_retries_max = max(estimate.invalid_reply_retries_max,
                                                 target.spec.invalid_reply_retries)
        judge.questions += 1
        if key in answered:
            judge.cached += 1
            continue
        judge.to_ask += 1
        judge.prompt_tokens += pricer.tokens(target.litellm_model, job.prompt.messages)
        judge.completion_tokens_max += target.spec.max_tokens


def _price(judge: JudgeEstimate, pricer: _Pricer) -> None:
    if judge.to_ask == 0:  # nothing to ask costs nothing, priced or not (and litellm stays unimported)
        judge.prompt_cost_usd = judge.cost_usd_max = 0.0
        judge.priced = "not needed"
        return
    if judge.embedded:
        judge.prompt_cost_usd = judge.cost_usd_max = 0.0
        return
    cost = pricer.cost(judge.litellm_model, judge.prompt_tokens, judge.completion_tokens_max)
    if cost is not None:
        judge.priced = "litellm"
        judge.prompt_cost_usd, judge.cost_usd_max = cost


def _total(estimate: RunEstimate, pricer: _Pricer) -> None:
    for judge in estimate.judges:
        _price(judge, pricer)
        estimate.questions += judge.questions
        estimate.cached += judge.cached
        estimate.to_ask += judge.to_ask
        estimate.prompt_tokens += judge.prompt_tokens
        estimate.completion_tokens_max += judge.completion_tokens_max
        if judge.cost_usd_max is None:
            estimate.unpriced.append(judge.model_pin)
        else:
            estimate.known_cost_usd_max += judge.cost_usd_max
    if not estimate.unpriced:
        estimate.cost_usd_max = estimate.known_cost_usd_max
        estimate.prompt_cost_usd = sum(j.prompt_cost_usd or 0.0 for j in estimate.judges)
    estimate.over_budget = _over(estimate)


def _over(estimate: RunEstimate) -> str | None:
    budget = estimate.budget
    if budget is None:
        return None
    tokens = estimate.prompt_tokens + estimate.completion_tokens_max
    if budget.max_tokens is not None and tokens > budget.max_tokens:
        return f"up to {tokens} tokens, budget {budget.max_tokens}: the run stops judging at the budget"
    if budget.max_cost_usd is not None and estimate.known_cost_usd_max > budget.max_cost_usd:
        return (f"up to ${estimate.known_cost_usd_max:.4f}, budget ${budget.max_cost_usd}: "
                "the run stops judging at the budget")
    unpriced = [judge.litellm_model for judge in estimate.judges if judge.to_ask and judge.cost_usd_max is None]
    if budget.max_cost_usd is not None and unpriced:
        return (f"the cost of {', '.join(sorted(set(unpriced)))} is unknown (litellm's price map has no price), so "
                f"the ${budget.max_cost_usd} budget cannot be checked against it: the run would not stop for it")
    return None


# --- text -----------------------------------------------------------------------------------------


def _usd(value: float) -> str:
    return f"${value:.4f}"


def _cost_text(judge: JudgeEstimate) -> str:
    if judge.cost_usd_max is None:
        return f"unknown (litellm's price map has no price for {judge.litellm_model})"
    if judge.embedded:
        return "$0 (the embedded judge runs on this machine: no provider bill)"
    if judge.to_ask == 0:
        return "$0 (nothing to ask)"
    return f"at most {_usd(judge.cost_usd_max)} (prompt {_usd(judge.prompt_cost_usd or 0.0)}; litellm's price map)"


def _lines(est: RunEstimate) -> Iterable[str]:
    yield f"dry run of {est.suite}: planned only, nothing judged, nothing spent"
    yield f"trajectories: {est.trajectories}"
    for axis, counts in est.deterministic.items():
        statuses = ", ".join(f"{n} {status}" for status, n in counts.items())
        yield f"  {axis}: deterministic, {statuses} (no cost)"
    for axis, n in sorted(est.judge_input_errors.items()):
        yield f"  {axis}: {n} not asked (their input is an error)"
    cache = ("not used (--no-cache)" if est.cache_dir is None
             else f"{est.cache_dir}" + ("" if est.cache_exists else " (does not exist yet)"))
    yield f"verdict cache: {cache}"
    planned = ", ".join(f"{axis} {n}" for axis, n in sorted(est.judged.items())) or "none"
    yield f"judge questions: {est.questions} distinct (planned: {planned}); cached {est.cached}, to ask {est.to_ask}"
    if est.cache_refused:
        refused = "; ".join(f"{n} {kind}" for kind, n in sorted(est.cache_refused.items()))
        yield f"  cached entries a run would not take (asked again): {refused}"
    for judge in est.judges:
        where = "embedded" if judge.embedded else judge.endpoint
        yield f"judge {judge.model_pin} ({where}): {judge.questions} questions, cached {judge.cached}, to ask {judge.to_ask}"
        if judge.to_ask:
            yield f"  prompt tokens: {judge.prompt_tokens} (counted by litellm's token_counter)"
            yield f"  completion tokens: at most {judge.completion_tokens_max} (max_tokens per question; an upper bound)"
        yield f"  cost: {_cost_text(judge)}"
    tokens = est.prompt_tokens + est.completion_tokens_max
    yield f"total: {est.to_ask} questions to ask, at most {tokens} tokens ({est.prompt_tokens} prompt)"
    if est.cost_usd_max == 0:
        yield "total cost: $0"
    elif est.cost_usd_max is not None:
        yield f"total cost: at most {_usd(est.cost_usd_max)} (completion at max_tokens: an upper bound)"
    else:
        known = f"at most {_usd(est.known_cost_usd_max)} for the priced judges + " if est.known_cost_usd_max else ""
        yield f"total cost: {known}unknown for {', '.join(est.unpriced)}"
    if est.to_ask and est.invalid_reply_retries_max:
        yield (f"  (a reply that does not validate is asked again, up to {est.invalid_reply_retries_max} more "
               "time(s): not counted above)")
    if est.over_budget:
        yield f"budget: {est.over_budget}"


def render_estimate(est: RunEstimate) -> str:
    """The estimate as plain text for the terminal, one fact a line."""
    return "\n".join(_lines(est)) + "\n"
