"""The ledger: calls, cache use, tokens and cost of a run, and the budget it is held to."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from judgekit._util.io import RECORD_CONFIG
from judgekit.suite import Budget


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
    unscored: dict[str, int] = Field(
        default_factory=dict,
        description="Unscored reason -> judge verdicts with no valid answer (the judge's own failures). A result "
                    "an axis makes unscored from a valid answer (no_claims) is not one: the run's unscored "
                    "results are counted in its summary.")

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
        """Why this ledger's spend is past ``budget`` (None while it is not)."""
        return budget_spent(budget, self.tokens, self.cost_usd)

    def as_dict(self) -> dict[str, Any]:
        data = self.model_dump(mode="json")
        data["cost_usd"] = round(self.cost_usd, 6)
        data["cache_refused"] = dict(sorted(self.cache_refused.items()))
        data["unscored"] = dict(sorted(self.unscored.items()))
        return data

    def count_refused(self, reason: str) -> None:
        """A cached entry refused for ``reason``, counted by its kind (the reason without its details)."""
        kind = reason.split(" (")[0]
        self.cache_refused[kind] = self.cache_refused.get(kind, 0) + 1

    def count_failures(self, failures: tuple[str, ...]) -> None:
        """Attempts that got no usable reply, by why: their cost is unknown, not 0."""
        self.calls_without_cost += len(failures)
        for reason in failures:
            self.failed_attempts[reason] = self.failed_attempts.get(reason, 0) + 1

    def count_unscored(self, reason: str, jobs: int = 1) -> None:
        """``jobs`` jobs got an unscored verdict for ``reason`` (counted per job, like cache hits)."""
        self.unscored[reason] = self.unscored.get(reason, 0) + jobs


def budget_spent(budget: Budget | None, tokens: int, cost_usd: float) -> str | None:
    """Why ``tokens`` and ``cost_usd`` spent are past ``budget`` (None while they are not)."""
    if budget is None:
        return None
    if budget.max_tokens is not None and tokens >= budget.max_tokens:
        return f"token budget spent ({tokens} of {budget.max_tokens})"
    if budget.max_cost_usd is not None and cost_usd >= budget.max_cost_usd:
        return f"cost budget spent (${cost_usd:.4f} of ${budget.max_cost_usd})"
    return None
