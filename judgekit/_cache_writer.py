"""The verdict cache's writer process: commits the verdicts a run hands over, in groups.

Run as a script, ``python -P -S _cache_writer.py DIRECTORY BUSY_TIMEOUT_S PARENT_PID SITE_DIR``,
so it imports only the standard library and diskcache (from SITE_DIR), not judgekit, pydantic
or litellm. The judge process's side is ``judgekit.cache.CacheWriter``.

One line per message, in order:

    run -> writer   P <key> <payload JSON>   store this (a compact JSON line: no raw newline)
                    S                         commit what you have, then exit
    writer -> run   K <n>                     the next n verdicts handed over are committed
                    E <n> <message>           the next n are not: the commit failed

The writer commits whatever has arrived in one transaction (about the cost of committing one
verdict), then whatever arrived meanwhile, and so on.

The writer dies with its run. On Linux it asks the kernel to SIGKILL it when the run dies;
elsewhere it exits when its input ends without ``S``. Either way, verdicts handed over but not
yet committed are lost (as they would be on a thread of the killed run) and nothing is
committed after the run died, so a run started again finds the cache as the kill left it.
"""

from __future__ import annotations

import os
import queue
import sys
import threading
from pathlib import Path
from typing import IO, Any

# Verdicts never expire and are never evicted behind the user's back (prune is explicit), so
# culling (a query per write) has nothing to do.
STORE_SETTINGS: dict[str, Any] = {"eviction_policy": "none", "size_limit": 2**40, "cull_limit": 0}
DEFAULT_BUSY_TIMEOUT_S = 60.0  # diskcache's own default: how long a write waits for a lock


def open_store(directory: str | Path, *, busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S):
    import diskcache

    return diskcache.Cache(str(directory), timeout=busy_timeout_s, **STORE_SETTINGS)


def _die_with(parent_pid: int) -> None:
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        pr_set_pdeathsig = 1
        try:
            ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)
        except (OSError, AttributeError):
            pass  # no prctl: end of input still ends the writer
    if os.getppid() != parent_pid:  # the run died before the request was in place
        sys.exit(0)


def _read_lines(fd: int, lines: queue.SimpleQueue) -> None:
    # Raw reads: a daemon thread blocked inside a buffered reader at exit aborts the interpreter.
    rest = b""
    while chunk := os.read(fd, 1 << 16):
        *complete, rest = (rest + chunk).split(b"\n")
        for line in complete:
            lines.put(line)
    lines.put(None)  # end of input


def _commit(store: Any, group: list[tuple[str, str]], out: IO[bytes]) -> None:
    try:
        with store.transact():
            for key, payload in group:
                store.set(key, payload)
    except Exception as exc:  # noqa: BLE001 - reported to the run, which raises it
        detail = str(exc) or (type(exc).__doc__ or "").strip().split("\n")[0]  # diskcache.Timeout has no message
        message = f"{type(exc).__name__}: {detail}".replace("\n", " ")
        out.write(f"E {len(group)} {message}\n".encode())
    else:
        out.write(f"K {len(group)}\n".encode())
    out.flush()


def serve(store: Any, lines: queue.SimpleQueue, out: IO[bytes]) -> bool:
    """Commit groups until ``S`` (True) or until input ends without it (False: the run died).

    A group is everything that arrived while the previous one was being committed: no waiting,
    so a verdict is committed as soon as the disk allows, and a busy run gets big groups.
    """
    while True:
        group: list[tuple[str, str]] = []
        line = lines.get()
        while True:
            if line is None:
                return False
            if line == b"S":
                if group:
                    _commit(store, group, out)
                return True
            _, key, payload = line.split(b" ", 2)
            group.append((key.decode(), payload.decode()))
            try:
                line = lines.get_nowait()
            except queue.Empty:
                break
        _commit(store, group, out)


def main(argv: list[str]) -> int:
    directory, busy_timeout_s, parent_pid, site_dir = argv
    _die_with(int(parent_pid))
    sys.path.append(site_dir)
    store = open_store(directory, busy_timeout_s=float(busy_timeout_s))
    lines: queue.SimpleQueue = queue.SimpleQueue()
    threading.Thread(target=_read_lines, args=(sys.stdin.fileno(), lines), daemon=True).start()
    try:
        stopped = serve(store, lines, sys.stdout.buffer)
    except BrokenPipeError:  # the run is gone: nobody to answer
        return 0
    if stopped:
        store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
