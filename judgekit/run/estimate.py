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
from judgekit.judge.target import JudgeTarget
from judgekit.run.options import RunOptions
from judgekit.run.options import cache_dir_of
from judgekit.run.plan import Select
from judgekit.run.scan import Question, QuestionScan, scan_questions
from judgekit.suite import Budget, LoadedSuite, load_suite

Priced = Literal["litellm", "embedded", "unknown", "not needed"]
BatchPriced = Literal["litellm batch price", "half the online price", "no batch API", "unknown", "not needed"]


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
    batch_priced: BatchPriced = Field(
        "not needed", description="How a provider batch (`judgekit batch submit`) would be priced: litellm's batch "
        "prices, half the online price (the map has no batch price; providers charge about half), no batch API "
        "(the judge cannot batch: why in batch_note), unknown, or not needed.")
    batch_cost_usd_max: float | None = Field(
        None, description="Upper bound on the cost through a provider batch; None: unknown or no batch API.")
    batch_note: str | None = Field(None, description="Why this judge cannot batch, when it cannot.")


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
    first_error: str | None = Field(
        None, description="The first axis error, in suite order ('FILE:LINE TRAJECTORY AXIS: what'); None: no error.")
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
    batch_cost_usd_max: float | None = Field(
        None, description="Upper bound on the cost of the questions that can go to a provider batch, at batch "
        "prices; None when any of them is unknown.")
    judges: list[JudgeEstimate] = Field(default_factory=list, description="Per judge, in model-pin order.")
    budget: Budget | None = Field(None, description="The run's budget (--budget-*, else the suite's).")
    over_budget: str | None = Field(None, description="How the upper bound exceeds the budget, if it does.")
    invalid_reply_retries_max: int = Field(
        0, description="Most extra calls a question may take after replies that do not validate (not counted).")


# --- the cache, read only ------------------------------------------------------------------------


# --- tokens and prices ----------------------------------------------------------------------------


class Pricer:
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

    def batch_per_token(self, model: str) -> tuple[tuple[float, float], bool] | None:
        """((input, output) dollars per token in a provider batch, whether litellm's map priced
        them) or None (unknown). Without batch prices in the map: half the online ones, as the
        providers charge for their batch APIs."""
        try:
            info = self._lib().get_model_info(model)
            found = (info.get("input_cost_per_token_batches"), info.get("output_cost_per_token_batches"))
        except Exception:  # noqa: BLE001 - litellm raises several kinds for a model it does not know
            found = (None, None)
        if all(isinstance(price, int | float) for price in found):
            return (float(found[0]), float(found[1])), True
        online = self.per_token(model)
        return None if online is None else ((online[0] / 2, online[1] / 2), False)

    def batch_cost(self, model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
        """Prompt + completion cost in a provider batch (``batch_per_token``), or None: unknown."""
        found = self.batch_per_token(model)
        if found is None:
            return None
        (prompt, completion), _ = found
        return prompt * prompt_tokens + completion * completion_tokens

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
    pricer = Pricer()
    judges: dict[tuple[str, str], JudgeEstimate] = {}
    targets: dict[tuple[str, str], JudgeTarget] = {}
    scan = QuestionScan()
    try:
        for plan, questions in scan_questions(loaded, options, store, scan, select=select):
            estimate.trajectories += len(plan.items)
            for result in plan.items:
                for name, res in result.axes.items():
                    if res.status == "error" and estimate.first_error is None:
                        estimate.first_error = f"{result.source} {result.trajectory_id} {name}: {res.error}"
                    if axis_named(name).deterministic:
                        estimate.deterministic.setdefault(name, {})
                        _count(estimate.deterministic[name], res.status)
                    elif res.status == "error":
                        _count(estimate.judge_input_errors, name)
            for judgement in plan.judgements:
                _count(estimate.judged, judgement.axis)
            _estimate_window(estimate, questions, judges, pricer, targets)
    finally:
        if store is not None:
            store.close()
    estimate.cache_refused = dict(sorted(scan.refused.items()))
    estimate.deterministic = {axis: dict(sorted(counts.items())) for axis, counts in sorted(estimate.deterministic.items())}
    estimate.judges = [judges[key] for key in sorted(judges)]
    _total(estimate, pricer, targets)
    return estimate


def _estimate_window(estimate: RunEstimate, questions: list[Question], judges: dict[tuple[str, str], JudgeEstimate],
                     pricer: Pricer, targets: dict[tuple[str, str], JudgeTarget]) -> None:
    """Count one window's new questions: cached (as the run would take them) or to ask."""
    for question in questions:
        key, job = question.key, question.job
        target = job.judge
        judge = judges.get((target.model_pin, target.endpoint))
        if judge is None:
            targets[(target.model_pin, target.endpoint)] = target
            judge = judges[(target.model_pin, target.endpoint)] = JudgeEstimate(
                model_pin=target.model_pin, litellm_model=target.litellm_model, endpoint=target.endpoint,
                embedded=target.embedded, priced="embedded" if target.embedded else "unknown")
        estimate.invalid_reply_retries_max = max(estimate.invalid_reply_retries_max,
                                                 target.spec.invalid_reply_retries)
        judge.questions += 1
        if question.cached:
            judge.cached += 1
            continue
        judge.to_ask += 1
        judge.prompt_tokens += pricer.tokens(target.litellm_model, job.prompt.messages)
        judge.completion_tokens_max += target.spec.max_tokens


def _price(judge: JudgeEstimate, pricer: Pricer, target: JudgeTarget) -> None:
    if judge.to_ask == 0:  # nothing to ask costs nothing, priced or not (and litellm stays unimported)
        judge.prompt_cost_usd = judge.cost_usd_max = judge.batch_cost_usd_max = 0.0
        judge.priced = "not needed"
        return
    from judgekit.judge.batch import batch_support

    judge.batch_note = batch_support(target)
    if judge.batch_note is not None:
        judge.batch_priced = "no batch API"
    if judge.embedded:
        judge.prompt_cost_usd = judge.cost_usd_max = 0.0
        return
    cost = pricer.cost(judge.litellm_model, judge.prompt_tokens, judge.completion_tokens_max)
    if cost is not None:
        judge.priced = "litellm"
        judge.prompt_cost_usd, judge.cost_usd_max = cost
    if judge.batch_note is None:
        judge.batch_cost_usd_max = pricer.batch_cost(judge.litellm_model, judge.prompt_tokens,
                                                     judge.completion_tokens_max)
        judge.batch_priced = ("unknown" if judge.batch_cost_usd_max is None else "litellm batch price"
                              if pricer.batch_per_token(judge.litellm_model)[1] else "half the online price")


def _total(estimate: RunEstimate, pricer: Pricer, targets: dict[tuple[str, str], JudgeTarget]) -> None:
    batch: list[float | None] = []
    for judge in estimate.judges:
        _price(judge, pricer, targets[(judge.model_pin, judge.endpoint)])
        if judge.batch_note is None and judge.to_ask:
            batch.append(judge.batch_cost_usd_max)
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
    estimate.batch_cost_usd_max = None if None in batch else sum(b or 0.0 for b in batch)
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


def _batch_text(judge: JudgeEstimate) -> str:
    if judge.batch_note is not None:
        return f"no batch API ({judge.batch_note})"
    if judge.batch_cost_usd_max is None:
        return f"unknown (litellm's price map has no price for {judge.litellm_model})"
    source = ("litellm's batch price" if judge.batch_priced == "litellm batch price"
              else "half the online price: litellm's map has no batch price for this model")
    return f"at most {_usd(judge.batch_cost_usd_max)} through a provider batch ({source})"


def _lines(est: RunEstimate) -> Iterable[str]:
    yield f"dry run of {est.suite}: planned only, nothing judged, nothing spent"
    yield f"trajectories: {est.trajectories}"
    for axis, counts in est.deterministic.items():
        statuses = ", ".join(f"{n} {status}" for status, n in counts.items())
        yield f"  {axis}: deterministic, {statuses} (no cost)"
    for axis, n in sorted(est.judge_input_errors.items()):
        yield f"  {axis}: {n} not asked (their input is an error)"
    if est.first_error is not None:
        yield f"first error: {est.first_error}"
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
        if judge.to_ask:
            yield f"  batch: {_batch_text(judge)}"
    tokens = est.prompt_tokens + est.completion_tokens_max
    yield f"total: {est.to_ask} questions to ask, at most {tokens} tokens ({est.prompt_tokens} prompt)"
    if est.cost_usd_max == 0:
        yield "total cost: $0"
    elif est.cost_usd_max is not None:
        yield f"total cost: at most {_usd(est.cost_usd_max)} (completion at max_tokens: an upper bound)"
    else:
        known = f"at most {_usd(est.known_cost_usd_max)} for the priced judges + " if est.known_cost_usd_max else ""
        yield f"total cost: {known}unknown for {', '.join(est.unpriced)}"
    if est.to_ask and any(judge.batch_note is None for judge in est.judges if judge.to_ask):
        batch = "unknown" if est.batch_cost_usd_max is None else f"at most {_usd(est.batch_cost_usd_max)}"
        yield f"  through `judgekit batch submit` (the questions that can batch): {batch}"
    if est.to_ask and est.invalid_reply_retries_max:
        yield (f"  (a reply that does not validate is asked again, up to {est.invalid_reply_retries_max} more "
               "time(s): not counted above)")
    if est.over_budget:
        yield f"budget: {est.over_budget}"


def render_estimate(est: RunEstimate) -> str:
    """The estimate as plain text for the terminal, one fact a line."""
    return "\n".join(_lines(est)) + "\n"
