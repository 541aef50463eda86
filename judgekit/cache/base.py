"""The verdict store's contract and its keys.

``VerdictStore`` is everything a run asks of a store; ``BaseVerdictStore`` gives the parts a
store may leave out (the rerun memo, refusals, the writer thread's connection) their do-nothing
defaults, so a store keeps only ``get_many`` and ``put_many`` of its own. ``cache_key`` names a
question: sha256 over canonical JSON of exactly the inputs that change its verdict.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, Protocol

from judgekit._util.io import sha256_json
from judgekit.verdict import JudgeVerdict

CACHE_FORMAT_VERSION = 2


def cache_key(material: dict[str, Any]) -> str:
    return sha256_json({"cache_format": CACHE_FORMAT_VERSION, **material})


class VerdictStore(Protocol):
    """Where validated verdicts are kept between runs, by cache key. ``VerdictCache`` (SQLite
    through diskcache, on this machine) is one; a shared service could be another. Subclass
    ``BaseVerdictStore`` to inherit the defaults of all but ``get_many`` and ``put_many``.

    The rerun memo (``keys_for``, ``put_keys``) names the cache key of a question by its
    inputs' fingerprint, so a rerun finds its verdicts without rendering a prompt; a store
    without one is answered all the same, rendering its prompts to find their keys."""

    writable: bool
    """Verdicts can be stored (a read-only store still serves what it holds)."""

    refused: Sequence[tuple[str, str]]
    """(key, reason) of every entry refused since the store was opened, oldest first: a run
    counts the ones a read added."""

    def get_many(self, wanted: Sequence[tuple[str, str]]) -> dict[str, JudgeVerdict]:
        """The stored verdicts of these (key, axis) questions that can be trusted, by key."""
        ...

    def put_many(self, items: Sequence[tuple[str, JudgeVerdict]]) -> None:
        """Store scored verdicts, all or none."""
        ...

    def keys_for(self, fingerprints: Sequence[str]) -> dict[str, str]:
        """Fingerprint -> cache key, for the fingerprints the memo holds."""
        ...

    def put_keys(self, pairs: Sequence[tuple[str, str]]) -> None:
        """Remember (fingerprint, key) pairs of stored verdicts."""
        ...

    def report(self) -> dict[str, Any]:
        """What a ledger records of the store: ``directory``, ``withheld`` (verdicts not stored)."""
        ...

    def close_thread(self) -> None:
        """Release what the calling thread holds (the writer thread calls it when it ends)."""
        ...

    def close(self) -> None:
        """Done with the store: release everything it holds."""
        ...


class BaseVerdictStore(ABC):
    """``VerdictStore``'s defaults: writable, refuses nothing, keeps no memo (``keys_for`` finds
    nothing, ``put_keys`` keeps nothing), reports no folder, holds nothing to release."""

    writable: bool = True
    refused: Sequence[tuple[str, str]] = ()

    @abstractmethod
    def get_many(self, wanted: Sequence[tuple[str, str]]) -> dict[str, JudgeVerdict]:
        """The stored verdicts of these (key, axis) questions that can be trusted, by key."""

    @abstractmethod
    def put_many(self, items: Sequence[tuple[str, JudgeVerdict]]) -> None:
        """Store scored verdicts, all or none."""

    def keys_for(self, fingerprints: Sequence[str]) -> dict[str, str]:
        return {}

    def put_keys(self, pairs: Sequence[tuple[str, str]]) -> None:
        return None

    def report(self) -> dict[str, Any]:
        return {"directory": None, "withheld": 0}

    def close_thread(self) -> None:
        return None

    def close(self) -> None:
        return None
