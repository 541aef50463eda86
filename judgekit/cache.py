"""The verdict cache: diskcache on disk, JSON payloads, canonical sha256 keys.

The key covers everything that can change a verdict (rubric id, version and hash, axis,
template hash, model pin, parameters, the rendered input) and nothing that cannot (timeouts,
retries, concurrency). Only validated verdicts are stored, as JSON with a format version, never
pickle. diskcache commits each write to SQLite before ``set`` returns, so a run killed at any
moment loses no verdict it already stored.

During a run, verdicts are written by one ``CacheWriter`` thread, never on the event loop:
every SQLite statement releases the GIL, and an event loop that releases it while litellm's
worker threads are busy waits up to the interpreter's switch interval (5 ms) to get it back.
"""

from __future__ import annotations

import asyncio
import json
import queue
import threading
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

    def put_many(self, items: list[tuple[str, JudgeVerdict]]) -> None:
        """Store several verdicts in one transaction: all of them, or none."""
        with self._cache.transact():
            for key, verdict in items:
                self.put(key, verdict)

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
        """Close the calling thread's SQLite connection (diskcache keeps one per thread)."""
        self._cache.close()

    def __enter__(self) -> VerdictCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_STOP = object()  # queue marker: commit what was handed over, then end the thread


class CacheWriter:
    """Stores verdicts on its own thread, for coroutines on one event loop.

    ``await writer.put(key, verdict)`` returns once the verdict is committed, or raises what
    the write raised. Verdicts are committed in groups: from the first one handed over, the
    writer sleeps for ``window_s`` (handing over does not wake it) and then commits all that
    arrived in one transaction, which costs about what committing one does. ``flush()`` ends
    the wait early (a caller needs a commit now); ``close()`` commits everything handed over,
    then stops the thread.
    """

    def __init__(self, cache: VerdictCache, *, window_s: float = 0.1):
        self.cache = cache
        self.window_s = window_s
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._wake = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=self._work, name="judgekit-cache-writer", daemon=True)
        self._thread.start()

    def put(self, key: str, verdict: JudgeVerdict) -> asyncio.Future[None]:
        if verdict.status != "scored":
            raise ValueError("only validated verdicts are cached")
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
        elif loop is not self._loop:
            raise RuntimeError("a CacheWriter serves one event loop")
        future: asyncio.Future[None] = loop.create_future()
        self._queue.put((key, verdict, future))
        return future

    def flush(self) -> None:
        self._wake.set()

    def close(self) -> None:
        self._queue.put(_STOP)
        self._wake.set()
        self._thread.join()

    def __enter__(self) -> CacheWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _work(self) -> None:
        try:
            while True:
                items = [self._queue.get()]  # idle until something is handed over
                if items[0] is not _STOP:
                    self._wake.wait(self.window_s)
                # Cleared before draining: a flush for anything handed over after the drain
                # survives to end the next wait.
                self._wake.clear()
                while not self._queue.empty():
                    items.append(self._queue.get_nowait())
                writes = [item for item in items if item is not _STOP]
                if writes:
                    self._commit(writes)
                if len(writes) < len(items):
                    return
        finally:
            self.cache.close()  # the writer thread's own connection; others stay open

    def _commit(self, writes: list[tuple[str, JudgeVerdict, asyncio.Future[None]]]) -> None:
        error: BaseException | None = None
        try:
            self.cache.put_many([(key, verdict) for key, verdict, _ in writes])
        except BaseException as exc:  # noqa: BLE001 - handed to every coroutine waiting on it
            error = exc
        futures = [future for _, _, future in writes]
        try:
            self._loop.call_soon_threadsafe(_settle, futures, error)
        except RuntimeError:
            pass  # the loop is closed: nobody is waiting any more


def _settle(futures: list[asyncio.Future[None]], error: BaseException | None) -> None:
    for future in futures:
        if future.done():  # its coroutine was cancelled
            continue
        if error is None:
            future.set_result(None)
        else:
            future.set_exception(error)
