"""Compare a run with a baseline run, axis by axis, on the trajectories both scored.

A run is read as rows (``judgekit.run.rows``): one ``AxisRow`` per trajectory and axis (its
status, score and what it lost), from a run record or from the history (which stores exactly
these rows). ``compare`` then, per axis:

- takes the trajectory ids both runs hold (an id in one run only is listed, not compared);
- computes the mean score and the pass rate (binary axes: passed; graded axes: full marks) of
  each run over the ids both scored;
- flags the axis when its mean dropped by more than ``max_drop`` relative (5% unless set per
  axis) and, when the history gives an estimate of run-to-run noise, by more than that noise
  (1.96 standard deviations of the difference of two runs' means);
- puts a paired test beside it: McNemar's exact test for pass/fail axes, a paired bootstrap for
  graded ones (seeded, 2,000 resamples), with the 95% interval of the change in mean.

It fails closed: an empty run, a run with fewer trajectories than its baseline, a gating axis
with only unscored or error results, or a missing baseline when one is required is a failure
with its own reason. Advisory axes (their judge is not approved) are compared and flagged the
same way, but never fail the comparison.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from judgekit.axes.table import AXES, axis_named
from judgekit.run.rows import FULL_MARKS, AxisRow, RunRows

DEFAULT_MAX_DROP = 0.05
NOISE_Z = 1.96
BOOTSTRAP_RESAMPLES = 2000
MAX_LISTED = 200
"""Regressions and one-sided ids listed in a comparison (the counts are always complete)."""
# --- the comparison -------------------------------------------------------------------------


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class PairedTest(_Model):
    method: Literal["mcnemar_exact", "paired_bootstrap"]
    n: int = Field(description="Trajectories both runs scored.")
    p_value: float = Field(description="Two-sided: no change in the axis between the runs.")
    ci_low: float = Field(description="95% interval of the change in mean (run minus baseline): low end.")
    ci_high: float
    worse: int | None = Field(None, description="McNemar: trajectories that went from pass to fail.")
    better: int | None = Field(None, description="McNemar: trajectories that went from fail to pass.")


class AxisComparison(_Model):
    axis: str
    kind: Literal["binary", "graded"]
    advisory: bool = Field(description="Its judge is not approved: shown and flagged, never failing.")
    shared: int = Field(description="Trajectories both runs scored on this axis.")
    mean: float | None = Field(None, description="This run's mean score over the shared trajectories.")
    baseline_mean: float | None = None
    pass_rate: float | None = Field(None, description="Pass (binary) or full marks (graded) over the shared trajectories.")
    baseline_pass_rate: float | None = None
    scored: int = Field(0, description="Trajectories this run scored on this axis (shared or not).")
    unscored: int = 0
    errors: int = 0
    drop: float | None = Field(None, description="Baseline mean minus this run's mean.")
    relative_drop: float | None = Field(None, description="drop / baseline mean.")
    max_drop: float = Field(description="The relative drop that flags this axis.")
    noise_sd: float | None = Field(None, description="Run-to-run standard deviation of the mean, from the history.")
    noise_runs: int = Field(0, description="Runs the noise estimate rests on.")
    test: PairedTest | None = None
    flagged: bool = False
    reasons: list[str] = Field(default_factory=list, description="Why it is flagged or failed.")


class Regression(_Model):
    trajectory_id: str
    axis: str
    baseline_score: float | None
    score: float | None
    flipped: bool = Field(description="It passed (full marks) in the baseline and no longer does.")
    status: Literal["scored", "unscored", "error", "missing"] = Field(
        "scored", description="Its status in this run; 'missing': the trajectory is there, this axis is not.")
    lost: list[str] = Field(default_factory=list, description="What it lost that it had in the baseline.")
    note: str | None = Field(None, description="Why it is no longer scored, if it is not.")


class RunRef(_Model):
    run_id: str
    suite: str
    started_at: datetime | None = None
    git_commit: str | None = None
    trajectories: int = 0


class RubricChange(_Model):
    rubric: str = Field(description="id@version.")
    baseline_sha256: str | None = Field(description="Its hash in the baseline (null: the baseline did not use it).")
    sha256: str | None = Field(description="Its hash in this run (null: this run did not use it).")


class Comparison(_Model):
    """The comparison of a run with its baseline: per-axis figures and flags, regressions, and
    whether it passes (no gating axis flagged, no fail-closed reason)."""

    run: RunRef
    baseline: RunRef | None = None
    baseline_source: str = Field(description="How the baseline was chosen: 'last-green', a run id, or a file.")
    passed: bool
    reasons: list[str] = Field(default_factory=list, description="Why it fails, each its own sentence.")
    notes: list[str] = Field(default_factory=list, description="What a reader should know that does not fail it.")
    axes: list[AxisComparison] = Field(default_factory=list)
    regressions: list[Regression] = Field(default_factory=list, description=f"Up to {MAX_LISTED}, flips first.")
    regressions_total: int = 0
    only_in_run: list[str] = Field(default_factory=list, description=f"Up to {MAX_LISTED} ids.")
    only_in_run_total: int = 0
    only_in_baseline: list[str] = Field(default_factory=list, description=f"Up to {MAX_LISTED} ids.")
    only_in_baseline_total: int = 0
    rubrics_changed: list[RubricChange] = Field(
        default_factory=list, description="Rubrics whose hash (the rubric lock's) differs between the runs: their "
        "axes compare scores given under different criteria.")

    @property
    def flagged(self) -> list[str]:
        return [axis.axis for axis in self.axes if axis.flagged]

    @property
    def against(self) -> str:
        """The baseline in words, its run id said once: 'last-green (RUN)', 'RUN (file F)',
        'no baseline (last-green)'."""
        source = self.baseline_source
        if self.baseline is None:
            return f"no baseline ({source})"
        return source if self.baseline.run_id in source else f"{self.baseline.run_id} ({source})"


@dataclass(frozen=True)
class ComparePolicy:
    max_drop: float = DEFAULT_MAX_DROP
    per_axis: dict[str, float] = field(default_factory=dict)
    """Axis -> its own relative drop that flags it."""
    axes: tuple[str, ...] | None = None
    """Only these axes (None: every axis either run scored)."""
    require_baseline: bool = False

    def drop_for(self, axis: str) -> float:
        return self.per_axis.get(axis, self.max_drop)


@dataclass(frozen=True)
class Noise:
    """Run-to-run spread of an axis's mean, pooled over groups of runs of one commit."""

    sd: float
    runs: int


def _ref(rows: RunRows) -> RunRef:
    return RunRef(run_id=rows.run_id, suite=rows.suite, started_at=rows.started_at, git_commit=rows.git_commit,
                  trajectories=rows.trajectories)


def _listed(ids: Iterable[str]) -> tuple[list[str], int]:
    ordered = sorted(ids)
    return ordered[:MAX_LISTED], len(ordered)


def compare(run: RunRows, baseline: RunRows | None, policy: ComparePolicy = ComparePolicy(), *,
            baseline_source: str = "last-green", noise: dict[str, Noise] | None = None,
            seed: int = 0) -> Comparison:
    """``run`` against ``baseline`` (None: none was found) under ``policy``."""
    noise = noise or {}
    reasons: list[str] = []
    notes: list[str] = []
    names = [name for name in AXES if name in run.rows or (baseline is not None and name in baseline.rows)]
    if policy.axes is not None:
        names = [name for name in names if name in policy.axes]
        missing = [name for name in policy.axes if name not in names]
        for name in missing:
            reasons.append(f"{name}: the run has no result on this axis")
    if not run.ids:
        reasons.append("the run holds no trajectory: an empty run never passes")
    if baseline is None:
        if policy.require_baseline:
            reasons.append(f"no baseline ({baseline_source}) to compare with, and one is required")
        else:
            notes.append(f"no baseline ({baseline_source}): nothing compared; the run is measured on its own")
    elif baseline.run_id == run.run_id:
        reasons.append("the baseline is the run itself: a run is never its own baseline")
    elif baseline.ids - run.ids:
        missing = sorted(baseline.ids - run.ids)
        held = (f"the run holds {len(run.ids)} trajectories, fewer than the baseline's {len(baseline.ids)}"
                if len(run.ids) < len(baseline.ids) else f"the run holds {len(run.ids)} trajectories")
        reasons.append(f"{held}, and lacks {len(missing)} of the baseline's (first: {missing[0][:80]!r}): a partial run "
                       "is never compared as if it were whole")

    axes_out: list[AxisComparison] = []
    regressions: list[Regression] = []
    for name in names:
        out, lost = _compare_axis(name, run, baseline, policy, noise.get(name), seed)
        axes_out.append(out)
        regressions.extend(lost)
        if out.reasons and not out.advisory:
            reasons.extend(f"{name}: {why}" for why in out.reasons)
        elif out.reasons:
            notes.extend(f"{name} (advisory, not gating): {why}" for why in out.reasons)

    changed = _rubric_changes(run, baseline) if baseline is not None else []
    if changed:
        shown = ", ".join(f"{c.rubric} {(c.baseline_sha256 or 'none')[:12]} -> {(c.sha256 or 'none')[:12]}"
                          for c in changed[:5])
        notes.insert(0, f"the rubrics differ from the baseline's ({shown}): their axes compare scores given under "
                        "different criteria")
    regressions.sort(key=lambda r: (not r.flipped, r.axis, r.trajectory_id))
    only_run, only_run_n = _listed(run.ids - baseline.ids) if baseline is not None else ([], 0)
    only_base, only_base_n = _listed(baseline.ids - run.ids) if baseline is not None else ([], 0)
    if only_run_n or only_base_n:
        notes.append(f"{only_run_n} trajectory id(s) only in the run, {only_base_n} only in the baseline: "
                     "listed, not compared")
    return Comparison(
        run=_ref(run), baseline=_ref(baseline) if baseline is not None else None, baseline_source=baseline_source,
        passed=not reasons, reasons=reasons, notes=notes, axes=axes_out,
        regressions=regressions[:MAX_LISTED], regressions_total=len(regressions),
        only_in_run=only_run, only_in_run_total=only_run_n,
        only_in_baseline=only_base, only_in_baseline_total=only_base_n, rubrics_changed=changed,
    )


def _rubric_changes(run: RunRows, baseline: RunRows) -> list[RubricChange]:
    """Rubrics whose hash differs between the runs, or that only one of them used (nothing when
    either run's rubrics are unknown: rows built by hand)."""
    if not run.rubrics or not baseline.rubrics:
        return []
    return [RubricChange(rubric=ref, baseline_sha256=baseline.rubrics.get(ref), sha256=run.rubrics.get(ref))
            for ref in sorted(run.rubrics.keys() | baseline.rubrics.keys())
            if run.rubrics.get(ref) != baseline.rubrics.get(ref)]


compare_runs = compare
"""``compare`` under the name the package exports (``judgekit.ci.compare`` is this module)."""


def _compare_axis(name: str, run: RunRows, baseline: RunRows | None, policy: ComparePolicy,
                  noise: Noise | None, seed: int) -> tuple[AxisComparison, list[Regression]]:
    axis = axis_named(name)
    mine = run.rows.get(name, {})
    counts = {"scored": 0, "unscored": 0, "error": 0}
    for row in mine.values():
        counts[row.status] += 1
    out = AxisComparison(axis=name, kind=axis.kind, advisory=run.advisory(name), shared=0,
                         scored=counts["scored"], unscored=counts["unscored"], errors=counts["error"],
                         max_drop=policy.drop_for(name),
                         noise_sd=noise.sd if noise else None, noise_runs=noise.runs if noise else 0)
    if not counts["scored"]:
        out.reasons.append(f"no trajectory was scored ({counts['unscored']} unscored, {counts['error']} errors): "
                           "nothing measured, so nothing can pass")
    if baseline is None:
        scores = [row.score for row in mine.values() if row.status == "scored"]
        if scores:
            out.mean = sum(scores) / len(scores)
            out.pass_rate = sum(s >= FULL_MARKS for s in scores) / len(scores)
        return out, []

    theirs = baseline.rows.get(name, {})
    shared = sorted(tid for tid in mine.keys() & theirs.keys()
                    if mine[tid].status == "scored" and theirs[tid].status == "scored")
    out.shared = len(shared)
    regressions = _regressions(name, mine, theirs, run.ids)
    baseline_scored = sum(row.status == "scored" for tid, row in theirs.items() if tid in run.ids)
    if baseline_scored and counts["scored"] and baseline_scored - len(shared) > out.max_drop * baseline_scored:
        out.reasons.append(f"only {len(shared)} of the {baseline_scored} trajectories the baseline scored are scored in "
                           f"this run: coverage dropped by more than {100 * out.max_drop:g}%")
    if not shared:
        if counts["scored"]:
            out.reasons.append("no trajectory was scored in both runs: nothing to compare")
        return out, regressions
    now = [mine[tid].score for tid in shared]
    before = [theirs[tid].score for tid in shared]
    out.mean, out.baseline_mean = sum(now) / len(now), sum(before) / len(before)
    out.pass_rate = sum(s >= FULL_MARKS for s in now) / len(now)
    out.baseline_pass_rate = sum(s >= FULL_MARKS for s in before) / len(before)
    out.drop = out.baseline_mean - out.mean
    if out.baseline_mean > 0:
        out.relative_drop = out.drop / out.baseline_mean
    out.test = paired_test(now, before, binary=axis.binary, seed=seed)
    if out.relative_drop is not None and out.relative_drop > out.max_drop + 1e-12:
        beyond_noise = noise is None or out.drop > NOISE_Z * math.sqrt(2) * noise.sd
        if beyond_noise:
            out.flagged = True
            why = (f"mean {out.mean:.3f} against {out.baseline_mean:.3f} in the baseline: down "
                   f"{100 * out.relative_drop:.1f}% (more than {100 * out.max_drop:g}%)")
            if noise is not None:
                why += f" and beyond run-to-run noise (sd {noise.sd:.3f} over {noise.runs} runs)"
            out.reasons.append(why + f"; {_describe_test(out.test)}")
    return out, regressions


def _describe_test(test: PairedTest) -> str:
    interval = f"95% interval of the change [{test.ci_low:+.3f}, {test.ci_high:+.3f}]"
    if test.method == "mcnemar_exact":
        return f"McNemar p = {test.p_value:.3g} ({test.worse} worse, {test.better} better), {interval}"
    return f"paired bootstrap p = {test.p_value:.3g}, {interval}"


def _regressions(name: str, mine: dict[str, AxisRow], theirs: dict[str, AxisRow], ids: set[str]) -> list[Regression]:
    """Trajectories that were scored in the baseline and are now worse: a lower score, no longer
    scored, or without this axis at all; each with what it lost that it had not lost before."""
    found = []
    for tid in theirs.keys() & ids:
        before = theirs[tid]
        if before.status != "scored":
            continue
        now = mine.get(tid)
        if now is None:
            found.append(Regression(trajectory_id=tid, axis=name, baseline_score=before.score, score=None,
                                    flipped=bool(before.passed), status="missing",
                                    note="this axis has no result for it in this run"))
            continue
        if now.status == "scored" and now.score >= before.score - 1e-12:
            continue
        known = {what for what, _ in before.lost}
        lost = [f"{what}: {why}" for what, why in now.lost if what not in known]
        found.append(Regression(
            trajectory_id=tid, axis=name, baseline_score=before.score, score=now.score,
            flipped=bool(before.passed) and not now.passed, status=now.status, lost=lost,
            note=now.note if now.status != "scored" else None,
        ))
    return found


# --- statistics -----------------------------------------------------------------------------


def paired_test(now: list[float], before: list[float], *, binary: bool, seed: int = 0,
                resamples: int = BOOTSTRAP_RESAMPLES) -> PairedTest:
    """McNemar's exact test (binary) or a paired bootstrap (graded) on paired scores, with the
    95% paired-bootstrap percentile interval of the change in mean in both cases."""
    import numpy as np

    diffs = np.asarray(now, dtype=float) - np.asarray(before, dtype=float)
    means = bootstrap_means(diffs, resamples=resamples, seed=seed)
    low, high = (float(v) for v in np.quantile(means, [0.025, 0.975]))
    if binary:
        worse = int(np.sum(diffs < 0))
        better = int(np.sum(diffs > 0))
        p = mcnemar_exact(worse, better)
        return PairedTest(method="mcnemar_exact", n=len(diffs), p_value=min(1.0, p), ci_low=low, ci_high=high,
                          worse=worse, better=better)
    if not np.any(diffs):
        p = 1.0
    else:
        # Two-sided percentile p-value: how often a resampled mean falls on the other side of 0.
        p = 2 * min(float(np.mean(means <= 0)), float(np.mean(means >= 0)))
        p = max(p, 1 / resamples)
    return PairedTest(method="paired_bootstrap", n=len(diffs), p_value=min(1.0, p), ci_low=low, ci_high=high)


def mcnemar_exact(worse: int, better: int) -> float:
    """McNemar's exact test: two-sided binomial p-value of ``worse`` among the ``worse + better``
    discordant pairs at p = 1/2 (scipy's ``binomtest`` gives the same; this avoids importing
    scipy.stats, half a second of ``judgekit compare``)."""
    n = worse + better
    if n == 0:
        return 1.0
    tail = min(worse, better)
    log_half = n * math.log(2)
    log_n = math.lgamma(n + 1)
    total = sum(math.exp(log_n - math.lgamma(k + 1) - math.lgamma(n - k + 1) - log_half) for k in range(tail + 1))
    return min(1.0, 2 * total)


def bootstrap_means(diffs, *, resamples: int, seed: int):
    """Means of ``resamples`` bootstrap resamples of ``diffs``, exactly as resampling all n
    values would give, but drawing only the nonzero ones: how many of the n draws land on a
    nonzero value is binomial, and which ones is uniform among them. Two runs of one suite
    mostly agree, so this is fast on 100,000 trajectories."""
    import numpy as np

    rng = np.random.default_rng(seed)
    n = len(diffs)
    nonzero = diffs[diffs != 0]
    if n == 0:
        return np.zeros(resamples)
    if not len(nonzero):
        return np.zeros(resamples)
    hits = rng.binomial(n, len(nonzero) / n, size=resamples)
    draws = nonzero[rng.integers(0, len(nonzero), size=int(hits.sum()))]
    ends = np.cumsum(hits)
    starts = ends - hits
    totals = np.concatenate([[0.0], np.cumsum(draws)])
    sums = totals[ends] - totals[starts]
    return sums / n


def pooled_noise(groups: Iterable[list[float]]) -> Noise | None:
    """Pooled standard deviation of run means within groups of runs that should agree (one
    commit, one set of rubrics): None with no group of two runs."""
    squares = 0.0
    dof = 0
    runs = 0
    for means in groups:
        if len(means) < 2:
            continue
        centre = sum(means) / len(means)
        squares += sum((m - centre) ** 2 for m in means)
        dof += len(means) - 1
        runs += len(means)
    if not dof:
        return None
    return Noise(sd=math.sqrt(squares / dof), runs=runs)
