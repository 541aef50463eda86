"""Seeded percentile bootstrap, vectorised with numpy.

Every interval in calibration comes from here, so the rules are in one place:

- Items are resampled with replacement, all statistics of one report from the SAME resamples
  (a paired bootstrap), in chunks so memory stays bounded.
- The generator for a report section is derived from ``(seed, name)``, so adding an axis never
  changes the numbers of another one, and the same seed gives the same report.
- A resample on which a statistic is undefined (kappa when both raters are constant, a TPR with
  no human pass in the resample, a Spearman correlation on constant scores...) is NaN. It is
  left out of the interval and counted in ``Metric.n_degenerate``; when every resample is
  degenerate the interval is absent.
- The interval is the plain percentile interval at ``CONFIDENCE`` (2.5th and 97.5th percentiles).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable

import numpy as np
from pydantic import BaseModel, Field

from judgekit._util.io import RECORD_CONFIG

CONFIDENCE = 0.95
_CHUNK_CELLS = 2_000_000  # resample rows x items gathered at once


class Metric(BaseModel):
    """A point estimate with its seeded bootstrap percentile interval."""

    model_config = RECORD_CONFIG

    value: float | None = Field(description="Point estimate on all the data; null when undefined there.")
    low: float | None = Field(default=None, description="Lower end of the percentile interval.")
    high: float | None = Field(default=None, description="Upper end of the percentile interval.")
    n_degenerate: int = Field(
        default=0, description="Resamples on which the statistic was undefined, left out of the interval."
    )


def rng_for(seed: int, *names: str) -> np.random.Generator:
    """A generator determined by the seed and the names only (not by call order)."""
    key = tuple(zlib.crc32(name.encode("utf-8")) for name in names)
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=key))


StatFn = Callable[[np.ndarray], dict[str, np.ndarray]]
"""Takes an index matrix (rows x n, each row a resample of item positions) and returns, for
each statistic name, one value per row (NaN where undefined)."""


def bootstrap(n: int, stat_fn: StatFn, *, n_boot: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Apply ``stat_fn`` to ``n_boot`` resamples of ``n`` items; one array of n_boot per statistic."""
    if n == 0 or n_boot == 0:
        return {}
    rows = max(1, _CHUNK_CELLS // n)
    parts: dict[str, list[np.ndarray]] = {}
    done = 0
    while done < n_boot:
        size = min(rows, n_boot - done)
        idx = rng.integers(0, n, size=(size, n))
        for name, values in stat_fn(idx).items():
            parts.setdefault(name, []).append(np.asarray(values, dtype=float))
        done += size
    return {name: np.concatenate(chunks) for name, chunks in parts.items()}


def point(stat_fn: StatFn, n: int) -> dict[str, float]:
    """The statistics on the data itself (the identity resample)."""
    if n == 0:
        return {}
    return {name: float(values[0]) for name, values in stat_fn(np.arange(n)[None, :]).items()}


def _finite_or_none(value: float | None) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return float(value)


def metric(value: float | None, samples: np.ndarray | None) -> Metric:
    """Point estimate plus the percentile interval of the defined resamples."""
    value = _finite_or_none(value)
    if samples is None or samples.size == 0:
        return Metric(value=value)
    finite = np.isfinite(samples)
    n_degenerate = int(samples.size - finite.sum())
    if value is None or not finite.any():
        return Metric(value=value, n_degenerate=n_degenerate)
    tail = (1.0 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(samples[finite], [tail, 100 - tail])
    return Metric(value=value, low=float(low), high=float(high), n_degenerate=n_degenerate)


def ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """num / den, NaN where den is 0."""
    num = np.asarray(num, dtype=float)
    den = np.asarray(den, dtype=float)
    out = np.full(np.broadcast(num, den).shape, np.nan)
    np.divide(num, den, out=out, where=den != 0)
    return out
