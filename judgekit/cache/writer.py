"""The cache's writer thread: verdicts stored as they are validated, off the event loop.

During a run, verdicts are written by one ``CacheWriter`` thread, never on the event loop:
every SQLite statement releases the GIL, and an event loop that releases it while litellm's
worker threads are busy waits up to the interpreter's switch interval (5 ms) to get it back.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Sequence

from judgekit.cache.base import VerdictStore
from judgekit.verdict import JudgeVerdict

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

    def __init__(self, cache: VerdictStore, *, window_s: float = 0.1):
        self.cache = cache
        self.window_s = window_s
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._wake = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=self._work, name="judgekit-cache-writer", daemon=True)
        self._thread.start()

    def put(self, key: str, verdict: JudgeVerdict, fingerprints: Sequence[str] = ()) -> asyncio.Future[None]:
        """Store ``verdict`` under ``key``, and remember ``key`` for the question fingerprints
        (after the verdict's commit, and best effort: the memo only saves rendering)."""
        if verdict.status != "scored":
            raise ValueError("only validated verdicts are cached")
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
        elif loop is not self._loop:
            raise RuntimeError("a CacheWriter serves one event loop")
        future: asyncio.Future[None] = loop.create_future()
        self._queue.put((key, verdict, tuple(fingerprints), future))
        return future

    def remember(self, pairs: Sequence[tuple[str, str]]) -> None:
        """Remember (fingerprint, key) pairs of verdicts already stored, best effort."""
        for fingerprint, key in pairs:
            self._queue.put((key, None, (fingerprint,), None))

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
            self.cache.close_thread()  # the writer thread's own connection; others stay open

    def _commit(self, writes: list[tuple[str, JudgeVerdict | None, tuple[str, ...], asyncio.Future[None] | None]]) -> None:
        error: BaseException | None = None
        try:
            verdicts = [(key, verdict) for key, verdict, _, _ in writes if verdict is not None]
            if verdicts:
                self.cache.put_many(verdicts)
        except BaseException as exc:  # noqa: BLE001 - handed to every coroutine waiting on it
            error = exc
        pairs = [(fingerprint, key) for key, _, fingerprints, _ in writes for fingerprint in fingerprints]
        if error is None and pairs:
            # Best effort: a memo the store cannot take (locked, full, broken) makes the next
            # rerun render its prompts, nothing worse; the verdicts are committed already.
            try:
                self.cache.put_keys(pairs)
            except Exception:  # noqa: BLE001
                pass
        futures = [future for _, _, _, future in writes if future is not None]
        if not futures:
            return
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
