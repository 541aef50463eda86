"""The verdict cache on disk: diskcache, JSON payloads, canonical sha256 keys.

The key covers everything that can change a verdict (rubric id, version and hash, axis,
template hash, model pin, endpoint, parameters, the rendered input) and nothing that cannot
(timeouts, retries, concurrency). Only validated verdicts are stored, as JSON text with a format
version, never pickle. diskcache commits each write to SQLite before ``set`` returns, so a run
killed at any moment loses no verdict it already stored.

A cache folder is hostile until checked: it may come from a repository or a shared CI cache.

- diskcache would unpickle any row whose ``mode`` says pickle and delete any file a row names.
  judgekit's own ``Disk`` stores text keys and JSON text values in the database and reads
  nothing else: a row in another mode, with a file name or a non-text key is refused, and it
  deletes no file at all (judgekit writes none). Rows are read by judgekit's own query, so no
  key is ever unpickled either.
- Before diskcache opens the database, its tables, indexes, triggers and settings are compared
  with those of a fresh cache: a foreign or corrupt database is an ``InputError`` naming the
  folder and what to do, never a crash, and diskcache never runs a setting it did not write.
  SQLite's files beside it are checked first: a ``-wal`` or ``-shm`` must be a regular file,
  and a ``-journal`` is refused outright. judgekit's cache runs in WAL mode and never has one,
  and SQLite would replay a hot journal into the database on the first read (after the check)
  and delete the super-journal file it names, wherever that is.
- Every entry is checked on read: valid JSON in this format, bound to the key it is stored
  under (the key is inside the payload), a scored verdict whose answer validates against the
  axis's answer schema exactly as a fresh reply must. A refused entry is a miss, counted in
  ``refused`` with its reason, and judged again.
- A cache that cannot be written (a read-only checkout) still serves its hits; new verdicts
  are then not stored, and ``writable`` says so.
- Beside the verdicts, a memo: ``fingerprint:<sha256>`` -> the cache key of the question whose
  inputs have that fingerprint (``judgekit.run.jobs.JudgeJob.fingerprint``), so a rerun finds
  its verdicts without rendering a prompt. An entry is bound to its fingerprint like a verdict
  to its key; one that does not check out is refused, and the question is rendered as before.
  The memo is trusted as the verdicts are: whoever can write the folder can write either.
- Nothing secret is stored: a verdict whose entry holds a registered API key or a common key
  shape (a judge that echoed the key) is not cached at all, rather than cached masked, since a
  masked quote or claim would score differently when read back. It is judged again next run.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
from collections.abc import Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import diskcache
from diskcache.core import DBNAME
from pydantic import ValidationError

from judgekit.cache.base import CACHE_FORMAT_VERSION, BaseVerdictStore
from judgekit.cache.base import VerdictStore, cache_key  # noqa: F401 - their home before cache/base.py
from judgekit.cache.files import (
    MODE_RAW,
    SETTINGS,
    JsonTextDisk,
    RefusedEntry,
    check_database,
    check_side_files,
    connect_read_only,
    database_error,
    is_locked,
    locked,
    stored_text,
    writable,
)
from judgekit._util.strict_json import strict_json_loads
from judgekit._util.text import redact
from judgekit._util.clock import utc_now
from judgekit.cache.writer import CacheWriter  # noqa: F401 - its home before cache/writer.py
from judgekit.errors import InputError
from judgekit.verdict import JudgeVerdict

DEFAULT_CACHE_DIR = Path(".judgekit") / "cache"
MAX_ENTRY_BYTES = 4 * 2**20  # a verdict is a few kB; a bigger row is not judgekit's
_BATCH = 500  # keys per lookup (SQLite allows 999 parameters in older builds)


FINGERPRINT_PREFIX = "fingerprint:"
"""Memo rows are stored under this prefix and a fingerprint; verdict rows under a bare key."""
_HEX64 = re.compile(r"[0-9a-f]{64}")


def _envelope(text: str, fields: set[str], kind: str) -> dict[str, Any]:
    """A row's JSON envelope with exactly ``fields``, in this cache format, or RefusedEntry."""
    try:
        payload = strict_json_loads(text)
    except ValueError as exc:
        raise RefusedEntry(f"its value is not valid JSON ({exc})") from None
    if not isinstance(payload, dict) or set(payload) != fields:
        raise RefusedEntry(f"its value is not a judgekit {kind}")
    if payload["cache_format"] != CACHE_FORMAT_VERSION:
        # Bounded: the reason is printed and counted, and its value is the entry's own.
        raise RefusedEntry(f"it is in cache format {repr(payload['cache_format'])[:40]}, not {CACHE_FORMAT_VERSION}")
    return payload


def _decode_key(fingerprint: str, text: str) -> str:
    """The cache key a memo entry stored under ``fingerprint`` names, or RefusedEntry."""
    payload = _envelope(text, {"cache_format", "fingerprint", "key"}, "fingerprint entry")
    if payload["fingerprint"] != fingerprint:
        raise RefusedEntry("it is bound to another fingerprint (moved or copied between keys)")
    key = payload["key"]
    if type(key) is not str or not _HEX64.fullmatch(key):
        raise RefusedEntry("its key is not a cache key")
    return key


class VerdictCache(BaseVerdictStore):
    """The verdict cache in ``directory`` (created when missing, unless ``create`` is False).

    ``read_only``: checks and reads only, through SQLite's read-only connection; nothing is
    created or written (diskcache writes its settings whenever it opens a writable folder).
    A folder that does not exist then reads as empty."""

    def __init__(self, directory: str | Path = DEFAULT_CACHE_DIR, *, create: bool = True, read_only: bool = False):
        self.directory = Path(directory)
        self.refused: list[tuple[str, str]] = []
        """(key, reason) of every entry refused since the cache was opened."""
        self.withheld = 0
        """Verdicts not stored because they hold a secret (a judge echoed an API key)."""
        self._db = self.directory / DBNAME
        self._cache: diskcache.Cache | None = None
        self._reader: sqlite3.Connection | None = None
        if self.directory.exists() and not self.directory.is_dir():
            raise InputError("the verdict cache folder is a file", self.directory)
        if read_only:
            self.writable = False
            if not self.directory.exists():
                return
            check_side_files(self.directory)
            if not os.path.lexists(self._db):
                return
            check_database(self.directory, self._db)
            try:
                self._reader = connect_read_only(self._db)
            except sqlite3.DatabaseError as exc:
                raise database_error(self.directory, exc) from None
            return
        if not self.directory.exists():
            if not create:
                raise InputError("no verdict cache here", self.directory)
            try:
                self.directory.mkdir(parents=True)
            except OSError as exc:
                raise InputError(f"cannot create the verdict cache folder: {exc.strerror}", self.directory) from None
        check_side_files(self.directory)
        if os.path.lexists(self._db):
            check_database(self.directory, self._db)
        self.writable = writable(self.directory, self._db)
        try:
            if self.writable:
                self._cache = diskcache.Cache(str(self.directory), disk=JsonTextDisk, **SETTINGS)
            elif not self._db.exists():
                return  # nothing to read, nowhere to write
            self._reader = connect_read_only(self._db)
        except sqlite3.DatabaseError as exc:
            self.close()
            raise database_error(self.directory, exc) from None

    # --- reading ------------------------------------------------------------------------------

    def _rows(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        if self._reader is None:
            return []
        try:
            return self._reader.execute(sql, args).fetchall()
        except sqlite3.DatabaseError as exc:
            raise database_error(self.directory, exc) from None

    def get(self, key: str, axis: str | None = None) -> JudgeVerdict | None:
        """The verdict stored under ``key`` (for ``axis``), or None: absent, or refused."""
        return self.get_many([(key, axis)]).get(key)

    def get_many(self, wanted: Sequence[tuple[str, str]]) -> dict[str, JudgeVerdict]:
        """The verdicts stored for these (key, axis) questions, read in batches; refused entries
        are left out (and listed in ``refused``)."""
        axes = dict(wanted)
        found: dict[str, JudgeVerdict] = {}
        for key, text in self._stored(list(axes), "a verdict"):
            if key in found:
                continue
            try:
                found[key] = self._decode(key, text, axes[key])
            except RefusedEntry as exc:
                self.refused.append((key, str(exc)))
        return found

    def keys_for(self, fingerprints: Sequence[str]) -> dict[str, str]:
        """Fingerprint -> cache key, for the fingerprints the memo holds; entries refused are
        left out (and listed in ``refused``)."""
        found: dict[str, str] = {}
        names = [FINGERPRINT_PREFIX + fingerprint for fingerprint in dict.fromkeys(fingerprints)]
        for name, text in self._stored(names, "a fingerprint entry"):
            if not name.startswith(FINGERPRINT_PREFIX):
                continue
            fingerprint = name.removeprefix(FINGERPRINT_PREFIX)
            try:
                found[fingerprint] = _decode_key(fingerprint, text)
            except RefusedEntry as exc:
                self.refused.append((name, str(exc)))
        return found

    def _stored(self, names: list[str], what: str) -> Iterator[tuple[str, str]]:
        """(name, value) of the rows stored under these names, read in batches; a row too large
        or in another form than judgekit writes is refused here (listed in ``refused``)."""
        for start in range(0, len(names), _BATCH):
            batch = names[start:start + _BATCH]
            rows = self._rows(
                "SELECT key, mode, filename, CASE WHEN length(value) <= ? THEN value END, length(value) "
                f"FROM Cache WHERE raw = 1 AND key IN ({','.join('?' * len(batch))})",
                (MAX_ENTRY_BYTES, *batch),
            )
            for name, mode, filename, value, size in rows:
                if type(name) is not str:
                    continue
                try:
                    if size is not None and size > MAX_ENTRY_BYTES:
                        raise RefusedEntry(f"its value is {size} bytes, more than {what} ever is")
                    text = stored_text(mode, filename, value)
                except RefusedEntry as exc:
                    self.refused.append((name, str(exc)))
                    continue
                yield name, text

    def report(self) -> dict[str, Any]:
        return {"directory": str(self.directory), "withheld": self.withheld}

    def _decode(self, key: str, text: str, axis: str | None) -> JudgeVerdict:
        payload = _envelope(text, {"cache_format", "key", "verdict"}, "cache entry")
        if payload["key"] != key:
            raise RefusedEntry("it is bound to another key (moved or copied between keys)")
        try:
            verdict = JudgeVerdict.model_validate(payload["verdict"])
        except ValidationError as exc:
            answer = [e for e in exc.errors() if e["loc"][:1] == ("answer",)]
            if answer and isinstance(payload["verdict"], dict):
                axis_name = str(payload["verdict"].get("axis"))[:40]
                raise RefusedEntry(f"its answer does not validate against the {axis_name} answer schema "
                                   f"({answer[0]['msg'][:300]})") from None
            raise RefusedEntry(f"its verdict is not valid: {str(exc).splitlines()[0]}") from None
        if verdict.status != "scored" or verdict.answer is None:
            raise RefusedEntry("it is not a scored verdict (only those are ever stored)")
        if verdict.provenance.cache_key != key or (axis is not None and verdict.axis != axis):
            raise RefusedEntry("its verdict belongs to another question")
        return verdict

    # --- writing ------------------------------------------------------------------------------

    def put_keys(self, pairs: Sequence[tuple[str, str]]) -> None:
        """Remember fingerprint -> key for these questions, in one transaction."""
        try:
            with self._writer().transact():
                for fingerprint, key in pairs:
                    envelope = json.dumps({"cache_format": CACHE_FORMAT_VERSION, "fingerprint": fingerprint, "key": key},
                                          separators=(",", ":"))
                    self._writer().set(FINGERPRINT_PREFIX + fingerprint, envelope)
        except (sqlite3.DatabaseError, diskcache.Timeout) as exc:
            raise InputError(f"cannot store fingerprints in the verdict cache ({exc or 'locked'})",
                             self.directory) from None

    def _writer(self) -> diskcache.Cache:
        if self._cache is None:
            raise InputError("the verdict cache cannot be written here (read-only)", self.directory)
        return self._cache

    def put(self, key: str, verdict: JudgeVerdict) -> bool:
        """Store ``verdict`` under ``key``; False when it is not stored because it holds a secret
        (see the module docstring: masked, it would score differently when read back)."""
        if verdict.status != "scored":
            raise ValueError("only validated verdicts are cached")
        # pydantic's own JSON encoder (fast), wrapped in the versioned envelope bound to its key.
        envelope = f'{{"cache_format":{CACHE_FORMAT_VERSION},"key":{json.dumps(key)},"verdict":{verdict.model_dump_json()}}}'
        if redact(envelope) != envelope:
            self.withheld += 1
            return False
        self._writer().set(key, envelope)
        return True

    def put_many(self, items: list[tuple[str, JudgeVerdict]]) -> None:
        """Store several verdicts in one transaction: all of them, or none."""
        try:
            with self._writer().transact():
                for key, verdict in items:
                    self.put(key, verdict)
        except diskcache.Timeout:
            raise locked(self.directory, self._writer().timeout) from None
        except sqlite3.DatabaseError as exc:
            if is_locked(exc):
                raise locked(self.directory, self._writer().timeout) from None
            raise InputError(f"cannot store verdicts in the verdict cache ({exc}): run with --no-cache, or "
                             f"`judgekit cache clear --cache-dir {self.directory}`", self.directory) from None

    # --- housekeeping -------------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        [(rows, fingerprints, foreign)] = self._rows(
            "SELECT count(*), coalesce(sum(typeof(key) = 'text' AND substr(key, 1, ?) = ?), 0), "
            "coalesce(sum(raw IS NOT 1 OR mode IS NOT ? OR filename IS NOT NULL OR typeof(value) != 'text'), 0) "
            "FROM Cache",
            (len(FINGERPRINT_PREFIX), FINGERPRINT_PREFIX, MODE_RAW),
        ) or [(0, 0, 0)]
        size = self._db.stat().st_size if self._db.exists() else 0
        return _stats(self.directory, self.writable, rows - fingerprints, foreign, size, fingerprints)

    def clear(self) -> int:
        """Remove every entry, the memo's too (the files rows may name are not judgekit's and
        stay); the number of verdict entries removed."""
        entries = self.stats()["entries"]
        self._delete(None)
        return entries

    def prune(self, older_than_days: float) -> int:
        """Remove verdicts created more than ``older_than_days`` ago, entries that are refused,
        and fingerprint entries whose verdict is gone; the number of verdict entries removed."""
        self._writer()  # a read-only cache can be read, never pruned
        cutoff = utc_now() - timedelta(days=older_than_days)
        stale = []
        kept: set[str] = set()
        memo: list[tuple[int, str]] = []  # (rowid, key it names)
        rows = "SELECT rowid, key, raw, mode, filename, CASE WHEN length(value) <= ? THEN value END FROM Cache"
        try:
            for rowid, key, raw, mode, filename, value in self._reader.execute(rows, (MAX_ENTRY_BYTES,)):
                if raw and type(key) is str and key.startswith(FINGERPRINT_PREFIX):
                    try:
                        memo.append((rowid, _decode_key(key.removeprefix(FINGERPRINT_PREFIX),
                                                        stored_text(mode, filename, value))))
                    except RefusedEntry:
                        memo.append((rowid, ""))  # names no verdict: goes
                    continue
                try:
                    if not raw or type(key) is not str:
                        raise RefusedEntry("its key is not stored as text")
                    verdict = self._decode(key, stored_text(mode, filename, value), None)
                except RefusedEntry:
                    stale.append(rowid)
                    continue
                if verdict.provenance.created_at < cutoff:
                    stale.append(rowid)
                else:
                    kept.add(key)
        except sqlite3.DatabaseError as exc:
            raise database_error(self.directory, exc) from None
        self._delete(stale + [rowid for rowid, key in memo if key not in kept])
        return len(stale)

    def _delete(self, rowids: list[int] | None) -> int:
        """Delete rows by id (all rows for None) with SQL alone, in one transaction: diskcache's
        own delete would decode the rows' keys and remove files they name."""
        self._writer()
        try:
            conn = sqlite3.connect(self._db, timeout=60, isolation_level=None)
            try:
                conn.execute("BEGIN IMMEDIATE")
                if rowids is None:
                    removed = conn.execute("DELETE FROM Cache").rowcount
                else:
                    conn.executemany("DELETE FROM Cache WHERE rowid = ?", [(rowid,) for rowid in rowids])
                    removed = len(rowids)
                conn.execute("COMMIT")
            finally:
                conn.close()
        except sqlite3.DatabaseError as exc:
            raise database_error(self.directory, exc) from None
        return removed

    def close_thread(self) -> None:
        """Close the calling thread's diskcache connection (diskcache keeps one per thread)."""
        if self._cache is not None:
            self._cache.close()

    def close(self) -> None:
        """Close the calling thread's connection and the reading one: the cache is done with."""
        self.close_thread()
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    def __enter__(self) -> VerdictCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _stats(directory: Path, is_writable: bool, entries: int, foreign: int, size: int,
           fingerprints: int = 0) -> dict[str, Any]:
    return {"directory": str(directory), "exists": True, "writable": is_writable, "entries": entries,
            "fingerprints": fingerprints, "foreign_entries": foreign, "bytes": size}


def cache_stats(directory: str | Path) -> dict[str, Any]:
    """What ``cache stats`` reports, creating nothing: a missing folder is said to be missing,
    a folder without a database has no entries (opening it would create one)."""
    directory = Path(directory)
    if not directory.exists():
        return {"directory": str(directory), "exists": False, "entries": 0, "bytes": 0}
    if directory.is_dir() and not os.path.lexists(directory / DBNAME):
        return _stats(directory, writable(directory, directory / DBNAME), 0, 0, 0)
    with VerdictCache(directory, create=False) as store:
        return store.stats()
