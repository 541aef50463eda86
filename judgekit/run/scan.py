"""A run's distinct judge questions and what the verdict cache already answers, found exactly as
a run finds them, without asking anything: what ``--dry-run`` counts and ``judgekit batch
submit`` sends.

``scan_questions`` plans the suite in the run's own windows (``iter_plans``, same judges, same
keys), looks each window's questions up first by the memo's fingerprints (no prompt rendered),
then by key, refusing a cached verdict that names another judge or rubric as a run does. Only
the distinct keys seen so far are kept (32 bytes each), so a large suite is never held whole.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from judgekit.cache.store import VerdictCache
from judgekit.run.jobs import JudgeJob, differing_identity
from judgekit.run.memo import look_up_by_fingerprint
from judgekit.run.options import RunOptions
from judgekit.run.plan import RunPlan, Select, iter_plans
from judgekit.suite import LoadedSuite


@dataclass
class Question:
    """One distinct judge question of a run: its cache key, a job that asks it, and whether the
    cache answers it (a run would take that verdict and ask nothing)."""

    key: str
    job: JudgeJob
    cached: bool


@dataclass
class QuestionScan:
    """Counts kept while scanning: cached entries a run would refuse, by kind of refusal."""

    refused: dict[str, int] = field(default_factory=dict)

    def count_refused(self, reason: str) -> None:
        kind = reason.split(" (")[0]  # as the run's ledger counts them
        self.refused[kind] = self.refused.get(kind, 0) + 1


def scan_questions(loaded: LoadedSuite, options: RunOptions, store: VerdictCache | None, scan: QuestionScan, *,
                   select: Select = None) -> Iterator[tuple[RunPlan, list[Question]]]:
    """Each window's plan, with the questions first asked in it (distinct keys, in plan order)."""
    seen: set[bytes] = set()
    plans = iter_plans(loaded, select=select, override=options.override, allow_floating=options.allow_floating,
                       window=options.window)
    for plan in plans:
        answered = _by_fingerprint(plan.jobs, store, scan)
        fresh: dict[str, JudgeJob] = {}
        for judgement in plan.judgements:
            digest = bytes.fromhex(judgement.job.key)
            if digest not in seen:
                seen.add(digest)
                fresh[judgement.job.key] = judgement.job
        _by_key(fresh, store, scan, answered)
        yield plan, [Question(key, job, key in answered) for key, job in fresh.items()]


def _by_fingerprint(jobs: list[JudgeJob], store: VerdictCache | None, scan: QuestionScan) -> set[str]:
    """The keys of the questions the cache's memo answers, found as the run finds them
    (``look_up_by_fingerprint``), without rendering a prompt; each such job learns its key."""
    lookup = look_up_by_fingerprint(jobs, store)
    for reason in lookup.refused:
        scan.count_refused(reason)
    answered: set[str] = set()
    for key, verdict, indexes in lookup.found:
        if differing_identity(verdict, jobs[indexes[0]]):
            continue  # looked up by its key next, and counted there
        for index in indexes:
            jobs[index].known_key = key
        answered.add(key)
    return answered


def _by_key(fresh: dict[str, JudgeJob], store: VerdictCache | None, scan: QuestionScan, answered: set[str]) -> None:
    """Add to ``answered`` the keys of ``fresh`` the cache holds a verdict for that a run would
    take (``answered``: keys the memo already found; their verdicts are not read again)."""
    unread = {key: job for key, job in fresh.items() if key not in answered}
    if store is None or not unread:
        return
    before = len(store.refused)
    found = store.get_many([(key, job.axis) for key, job in unread.items()])
    for _, reason in store.refused[before:]:
        scan.count_refused(reason)
    for key, verdict in found.items():
        if differing_identity(verdict, unread[key]):
            scan.count_refused("its provenance names another judge or rubric")
        else:
            answered.add(key)
