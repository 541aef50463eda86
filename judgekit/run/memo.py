"""What a run already knows before it asks: the store's rerun memo (fingerprint -> cache key)
and, when no store keeps verdicts, the run's own memory of the ones it asked for."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from judgekit.cache.base import VerdictStore
from judgekit.run.jobs import JudgeJob
from judgekit.verdict import JudgeVerdict

MEMO_SIZE = 4096  # verdicts remembered across windows when no writable store keeps them


class Memo:
    """The last ``size`` verdicts a run asked for, by cache key: a question repeated in a later
    window is answered from here when no store keeps verdicts."""

    def __init__(self, size: int = MEMO_SIZE):
        self.size = size
        self._verdicts: OrderedDict[str, JudgeVerdict] = OrderedDict()

    def __contains__(self, key: str) -> bool:
        return key in self._verdicts

    def get(self, key: str) -> JudgeVerdict | None:
        """A copy of the verdict remembered under ``key`` (the caller may stamp it), or None."""
        verdict = self._verdicts.get(key)
        return None if verdict is None else verdict.model_copy(deep=True)

    def remember(self, key: str, verdict: JudgeVerdict) -> None:
        self._verdicts[key] = verdict
        self._verdicts.move_to_end(key)
        while len(self._verdicts) > self.size:
            self._verdicts.popitem(last=False)


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
    prompt: the one lookup a run and a dry run share. A store without a memo (``keys_for``
    finds nothing) answers nothing."""
    if store is None:
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
    before = len(store.refused)
    keys = store.keys_for(list(groups))
    reasons = [reason for _, reason in store.refused[before:]]
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
