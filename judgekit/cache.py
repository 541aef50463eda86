"""The verdict cache: diskcache on disk, JSON payloads, canonical sha256 keys.

The key covers everything that can change a verdict (rubric id, version and hash, axis,
template hash, model pin, parameters, the rendered input) and nothing that cannot (timeouts,
retries, concurrency). Only validated verdicts are stored, as JSON with a format version, never
pickle. diskcache commits each write to SQLite before ``set`` returns, so a run killed at any
moment loses no verdict it already stored.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from judgekit._io import sha256_json
from judgekit.verdict import JudgeVerdict

CACHE_FORMAT_VERSION = 1
DEFAULT_CACHE_DIR = Path(".judgekit") / "cache"


def cache_key(material: dict[str, Any]) -> str:
    return sha256_json({"cache_format": CACHE_FORMAT_VERSION, **material})


class VerdictCache:
    def __init__(self, directory: str | Path = DEFAULT_CACHE_DIR):
        import diskcache

        self.directory = Path(directory)
        # Verdicts never expire and are never evicted behind the user's back (prune is explicit),
        # so culling (a query per write) has nothing to do.
        self._cache = diskcache.Cache(str(self.directory), eviction_policy="none", size_limit=2**40, cull_limit=0)

    def get(self, key: str) -> JudgeVerdict | None:
        raw = self._cache.get(key)
        if not isinstance(raw, str):
            return None
        try:
            payload = json.loads(raw)
        except json.JSONDecodeError:
            return None
        if payload.get("cache_format") != CACHE_FORMAT_VERSION:
            return None
        return JudgeVerdict.model_validate(payload["verdict"])

    def put(self, key: str, verdict: JudgeVerdict) -> None:
        if verdict.status != "scored":
            raise ValueError("only validated verdicts are cached")
        # pydantic's own JSON encoder (fast), wrapped in the versioned envelope.
        self._cache.set(key, f'{{"cache_format":{CACHE_FORMAT_VERSION},"verdict":{verdict.model_dump_json()}}}')

    def stats(self) -> dict[str, Any]:
        return {"directory": str(self.directory), "entries": len(self._cache), "bytes": self._cache.volume()}

    def clear(self) -> int:
        return self._cache.clear()

    def prune(self, older_than_days: float) -> int:
        """Remove verdicts created more than ``older_than_days`` ago, and unreadable entries."""
        cutoff = datetime.now(timezone.utc) - timedelta(days=older_than_days)
        removed = 0
        for key in list(self._cache.iterkeys()):
            try:
                verdict = self.get(key)
                stale = verdict is None or verdict.provenance.created_at < cutoff
            except Exception:  # noqa: BLE001 - a payload from another format version is stale
                stale = True
            if stale and self._cache.delete(key):
                removed += 1
        return removed

    def close(self) -> None:
        self._cache.close()

    def __enter__(self) -> VerdictCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
