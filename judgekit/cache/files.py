"""A verdict cache folder, checked before diskcache may open it, and its rows read as text only.

A cache folder may come from a repository or a shared CI cache, so it is hostile until
checked. ``check_folder`` compares the database with a fresh cache (tables, indexes, triggers,
settings) and refuses SQLite files beside it that no WAL cache has (a ``-journal``, a link, a
FIFO), all before any connection. ``JsonTextDisk`` and ``stored_text`` let nothing but JSON
text stored in the database be read: no pickle is ever decoded, no file a row names is read or
deleted.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

import diskcache
from diskcache.core import DBNAME, DEFAULT_SETTINGS, MODE_BINARY, MODE_PICKLE, MODE_RAW, MODE_TEXT, UNKNOWN

from judgekit.errors import InputError

SQLITE_HEADER = b"SQLite format 3\x00"
SIDE_FILES = (f"{DBNAME}-wal", f"{DBNAME}-shm")  # SQLite's own beside a WAL database
JOURNAL = f"{DBNAME}-journal"  # a rollback journal: never judgekit's
# Every diskcache setting, given explicitly, so none is ever taken from the database. Verdicts
# never expire and are never evicted behind the user's back (prune is explicit), so culling (a
# query per write) has nothing to do.
SETTINGS: dict[str, Any] = {**DEFAULT_SETTINGS, "eviction_policy": "none", "size_limit": 2**40, "cull_limit": 0}


class RefusedEntry(Exception):
    """A cache row judgekit did not write the way it writes rows."""


def stored_text(mode: Any, filename: Any, value: Any) -> str:
    """A row's value if judgekit could have written it (JSON text in the database); else
    RefusedEntry, without decoding anything."""
    if mode != MODE_RAW or filename is not None or type(value) is not str:
        kind = {MODE_PICKLE: "a pickle", MODE_TEXT: "text", MODE_BINARY: "binary"}.get(mode)
        if kind is None and mode == MODE_RAW and filename is None:
            kind = {bytes: "binary", int: "a number", float: "a number", type(None): "NULL"}.get(type(value), "not text")
        kind = kind or f"mode {mode!r}"
        if filename is not None:
            kind += " in a file"
        raise RefusedEntry(f"its value is stored as {kind}, not as JSON text in the database")
    return value


class JsonTextDisk(diskcache.Disk):
    """A diskcache ``Disk`` for judgekit's rows only: text keys, JSON text values, in the database.

    Anything else a row may claim (a pickled key or value, a value in a file) is refused, never
    decoded, and no file is ever removed: judgekit writes none, so a file a row names is not
    judgekit's to delete.
    """

    def put(self, key: Any) -> tuple[str, bool]:
        if type(key) is not str:
            raise TypeError("verdict cache keys are text")
        return key, True

    def get(self, key: Any, raw: bool) -> str:
        if not raw or type(key) is not str:
            raise RefusedEntry("its key is not stored as text (diskcache would unpickle it)")
        return key

    def store(self, value: Any, read: bool, key: Any = UNKNOWN) -> tuple[int, int, None, str]:
        if read or type(value) is not str:
            raise TypeError("verdict cache values are JSON text")
        return 0, MODE_RAW, None, value

    def fetch(self, mode: int, filename: Any, value: Any, read: bool) -> str:
        return stored_text(mode, filename, value)

    def filename(self, key: Any = UNKNOWN, value: Any = UNKNOWN) -> tuple[str, str]:
        raise TypeError("judgekit stores no value in a file")

    def remove(self, file_path: str) -> None:
        return None  # see the class docstring


LOCK_WAIT_S = 60.0
"""How long a reader waits for another process's lock (diskcache's writers wait as long)."""


class CacheLocked(InputError):
    """Another process holds the cache's database locked: nothing is wrong with it, so nothing
    of it may be removed (``judgekit cache clear`` stops here)."""


def locked(directory: Path, waited_s: float) -> InputError:
    """Another process held SQLite's lock past the wait: nothing is wrong with the cache, so
    clearing it is never the advice."""
    return CacheLocked(
        f"another process has held the verdict cache locked for more than {waited_s:g} s (another run "
        "writing to it?); what it holds is kept: run again once that is done, or give this run its own "
        "--cache-dir",
        directory,
    )


def database_error(directory: Path, exc: sqlite3.DatabaseError, waited_s: float = LOCK_WAIT_S) -> InputError:
    """The error to report for what SQLite raised on the cache: locked, or unreadable."""
    if is_locked(exc):
        return locked(directory, waited_s)
    return unreadable(directory, str(exc))


def unreadable(directory: Path, why: str) -> InputError:
    return InputError(
        f"the verdict cache is unreadable ({why}): run with --no-cache, or remove it with "
        f"`judgekit cache clear --cache-dir {directory}`",
        directory,
    )


@lru_cache(maxsize=1)
def _reference() -> tuple[frozenset[tuple[str, str, str, str]], frozenset[str]]:
    """The schema objects and setting names of a fresh cache, made by this diskcache."""
    folder = tempfile.mkdtemp(prefix="judgekit-cache-reference-")
    try:
        diskcache.Cache(folder, disk=JsonTextDisk, **SETTINGS).close()
        with sqlite3.connect(os.path.join(folder, DBNAME)) as conn:
            objects = frozenset(conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master"))
            settings = frozenset(key for (key,) in conn.execute("SELECT key FROM Settings"))
        return objects, settings
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def connect_read_only(db: Path) -> sqlite3.Connection:
    """A read-only connection. In a folder that cannot be written, SQLite cannot create the WAL
    index it needs for ``mode=ro``; ``immutable=1`` then reads the database file as it is."""
    uri = db.resolve().as_uri()
    conn = sqlite3.connect(f"{uri}?mode=ro", uri=True, check_same_thread=False, timeout=LOCK_WAIT_S)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return conn
    except sqlite3.OperationalError as exc:
        conn.close()
        if is_locked(exc):
            # Another process keeps even readers out: an immutable read would skip what it has
            # committed to the WAL and answer from a stale file, without a word.
            raise
        return sqlite3.connect(f"{uri}?immutable=1", uri=True, check_same_thread=False)


def is_locked(exc: sqlite3.DatabaseError) -> bool:
    return str(exc) in ("database is locked", "database table is locked")


def check_side_files(directory: Path) -> None:
    """InputError when SQLite's files beside the database are not what a WAL cache leaves.

    Checked before any connection: SQLite opens them itself, a FIFO blocks it for good, and a
    hot ``-journal`` is replayed (pages the schema check never saw) and the super-journal it
    names is deleted. judgekit's cache never has a ``-journal``.
    """
    if os.path.lexists(directory / JOURNAL):
        raise unreadable(directory, f"{JOURNAL} is present: a verdict cache never has a rollback journal, "
                                     "and SQLite would replay it into the database")
    for name in SIDE_FILES:
        try:
            info = os.lstat(directory / name)
        except FileNotFoundError:
            continue
        if stat.S_ISLNK(info.st_mode):
            raise unreadable(directory, f"{name} is a symbolic link")
        if not stat.S_ISREG(info.st_mode):
            raise unreadable(directory, f"{name} is not a regular file")


def check_database(directory: Path, db: Path) -> None:
    """InputError unless ``db`` is a judgekit verdict cache (or an empty database)."""
    info = os.lstat(db)
    if stat.S_ISLNK(info.st_mode):
        raise unreadable(directory, f"{DBNAME} is a symbolic link")
    if not stat.S_ISREG(info.st_mode):
        raise unreadable(directory, f"{DBNAME} is not a regular file")
    if info.st_size == 0:
        return  # what SQLite leaves for a database with no table yet
    with db.open("rb") as handle:
        header = handle.read(100)
    if not header.startswith(SQLITE_HEADER):
        raise unreadable(directory, f"{DBNAME} is not a SQLite database")
    if len(header) < 100:
        raise unreadable(directory, f"{DBNAME} is truncated")
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    if header[24:28] == header[92:96] and pages and info.st_size < pages * page_size:
        raise unreadable(directory, f"{DBNAME} is truncated ({info.st_size} bytes for {pages} pages of {page_size})")
    expected_objects, expected_settings = _reference()
    try:
        conn = connect_read_only(db)
        try:
            objects = frozenset(conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master"))
            if not objects:
                return
            if objects != expected_objects:  # before Settings is read: it may not be there
                odd = sorted(name for _, name, _, _ in objects ^ expected_objects)
                raise unreadable(directory, f"not a judgekit verdict cache: unexpected or missing {', '.join(odd[:5])}")
            settings = {key for (key,) in conn.execute("SELECT key FROM Settings")}
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        if is_locked(exc):
            raise locked(directory, LOCK_WAIT_S) from None
        raise unreadable(directory, f"{DBNAME}: {exc}") from None
    if not settings <= expected_settings:
        raise unreadable(directory, f"not a judgekit verdict cache: unknown settings {', '.join(sorted(settings - expected_settings)[:5])}")


def writable(directory: Path, db: Path) -> bool:
    """Whether this process can write the cache: tried, not guessed (root ignores modes)."""
    try:
        with tempfile.TemporaryFile(dir=directory):
            pass
        if db.exists():
            os.close(os.open(db, os.O_RDWR))
        return True
    except OSError:
        return False


def clear_unreadable(directory: Path) -> list[Path]:
    """Remove the database files of a cache that cannot be opened; return what was removed.

    Only SQLite's own file names are touched, and only unlinked: a link is removed, never
    followed; a FIFO or socket goes too, never opened; a folder stays.
    """
    removed = []
    for name in (DBNAME, *SIDE_FILES, JOURNAL):
        path = directory / name
        try:
            if stat.S_ISDIR(os.lstat(path).st_mode):
                continue
        except FileNotFoundError:
            continue
        path.unlink()
        removed.append(path)
    return removed
