"""Snapshot files: which may be read, how they are opened, and SQLite databases checked.

A trajectory names its snapshot files, so their paths are hostile: a ``SnapshotPolicy``
confines them, symlinks followed, to allowed folders; every file is opened without blocking and
checked on the open descriptor to be a regular file within a size cap. A SQLite database must
have a header whose page count matches its size and pass ``PRAGMA quick_check``, and nothing is
ever written beside it: it is opened ``immutable``, or, when it has a ``-wal`` or ``-journal``
beside it, copied into a private folder where SQLite replays the WAL or rolls the journal back.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
import struct
import tempfile
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from judgekit._util.io import unreadable
from judgekit.errors import InputError

SQLITE_HEADER = b"SQLite format 3\x00"
DEFAULT_MAX_SNAPSHOT_BYTES = 256 * 1024 * 1024


# --- which files may be read --------------------------------------------------------------------

_ALLOW_HINT = "to allow it, add a folder that holds it to `snapshots: roots:` in the suite file"
_SIZE_HINT = "raise `snapshots: max_bytes:` in the suite file to allow it"


@dataclass(frozen=True)
class SnapshotPolicy:
    """Which snapshot files may be read: inside one of ``roots`` once every symlink is
    followed, regular files only, at most ``max_bytes`` each (a SQLite ``-wal`` or
    ``-journal`` beside a database counts as a file of its own)."""

    roots: tuple[Path, ...]
    max_bytes: int = DEFAULT_MAX_SNAPSHOT_BYTES

    def __post_init__(self) -> None:
        if self.max_bytes <= 0:
            raise ValueError(f"max_bytes must be > 0, got {self.max_bytes}")
        object.__setattr__(self, "roots", tuple(Path(os.path.realpath(root)) for root in self.roots))

    @classmethod
    def unconfined(cls, max_bytes: int = DEFAULT_MAX_SNAPSHOT_BYTES) -> SnapshotPolicy:
        """Any folder: for files a person names themselves (``judgekit diff A B``), never for
        paths read from a trajectory. The other checks still apply."""
        return cls((Path(os.path.abspath(os.sep)),), max_bytes)

    def confine(self, path: Path, spelled: str | None = None) -> Path:
        """``path`` with every symlink followed; InputError when that lies outside every root.

        ``spelled`` is how the trajectory wrote it (e.g. ``sqlite: '../x.db'``), for the message.
        """
        try:
            resolved = Path(os.path.realpath(path))
        except ValueError:  # a NUL in the name: no file can have it
            raise InputError("the snapshot path holds a NUL character", path) from None
        if any(resolved == root or resolved.is_relative_to(root) for root in self.roots):
            return resolved
        named = f"snapshot {spelled} (relative to the trajectory file's folder)" if spelled else "this snapshot file"
        roots = ", ".join(str(root) for root in self.roots)
        raise InputError(
            f"{named} resolves to {resolved}, outside the folders snapshots may be read from ({roots}); {_ALLOW_HINT}",
            path,
        )


_FILE_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _not_regular(mode: int, path: Path, expected: str) -> InputError:
    if stat.S_ISDIR(mode):
        return InputError(f"is a folder, expected {expected}", path)
    kind = next((name for test, name in _FILE_KINDS if test(mode)), "not a regular file")
    return InputError(f"is {kind}, not a regular file; expected {expected}", path)


@contextmanager
def open_checked(
    path: Path, policy: SnapshotPolicy, expected: str, spelled: str | None = None
) -> Iterator[tuple[int, Path, int]]:
    """``(descriptor, resolved path, size)`` of a confined, regular file within the size cap.

    O_NONBLOCK: opening a FIFO must not wait for a writer. The checks are made on the opened
    descriptor (fstat), so what is checked is what is read.
    """
    resolved = policy.confine(path, spelled)
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(resolved, flags)
    except OSError as exc:
        try:  # a socket cannot be opened at all (ENXIO): say what it is
            mode = os.stat(resolved).st_mode
        except OSError:
            mode = stat.S_IFREG
        if not stat.S_ISREG(mode):
            raise _not_regular(mode, path, expected) from None
        raise unreadable(exc, path, expected) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _not_regular(info.st_mode, path, expected)
        if info.st_size > policy.max_bytes:
            raise InputError(
                f"is {info.st_size:,} bytes, over the {policy.max_bytes:,}-byte limit for a snapshot file; {_SIZE_HINT}",
                path,
            )
        yield fd, resolved, info.st_size
    finally:
        os.close(fd)


def chunks(fd: int, limit: int, path: Path) -> Iterator[bytes]:
    """The file at ``fd`` in chunks, refusing one that has grown past ``limit`` since fstat."""
    total = 0
    while chunk := os.read(fd, min(1 << 20, limit + 1 - total)):
        total += len(chunk)
        if total > limit:
            raise InputError(f"grew past the {limit:,}-byte limit for a snapshot file while being read", path)
        yield chunk


def copy_fd(fd: int, target: Path, limit: int, path: Path) -> None:
    with open(target, "xb") as out:
        out.writelines(chunks(fd, limit, path))


# The 100-byte header (https://www.sqlite.org/fileformat.html#the_database_header), big-endian.
_HEADER_SIZE = 100
_SIDECARS = ("-wal", "-journal")
# A rollback journal that ends with this magic names a "super-journal" (a multi-database
# transaction). Rolling it back makes SQLite delete the file it names, wherever it is: a hostile
# snapshot could delete any file. Such journals are refused.
_JOURNAL_MAGIC = bytes.fromhex("d9d505f920a163d7")
_UNREADABLE = "cannot read SQLite database: "


def check_magic(header: bytes, path: Path) -> None:
    # A 0-byte file is what SQLite itself leaves for a database with no tables yet.
    if header and not header.startswith(SQLITE_HEADER):
        if SQLITE_HEADER.startswith(header):
            raise InputError(f"{_UNREADABLE}truncated: {len(header)} bytes, shorter than the 100-byte header", path)
        raise InputError("not a SQLite database (it does not start with the 'SQLite format 3' header)", path)


def _check_header(header: bytes, size: int, path: Path) -> None:
    """The file size must be what the header says: a truncated file is refused, not read as a world."""
    check_magic(header, path)
    if size == 0:
        return
    if len(header) < _HEADER_SIZE:
        raise InputError(f"{_UNREADABLE}truncated: {size} bytes, shorter than the 100-byte header", path)
    (raw_page_size,) = struct.unpack_from(">H", header, 16)
    page_size = 65536 if raw_page_size == 1 else raw_page_size
    if page_size < 512 or page_size & (page_size - 1):
        raise InputError(f"{_UNREADABLE}damaged header: page size {raw_page_size} is not a power of two from 512 to 65536", path)
    (change_counter, pages) = struct.unpack_from(">II", header, 24)
    (valid_for,) = struct.unpack_from(">I", header, 92)
    # The in-header size counts only when written by the same change as the counter (SQLite >= 3.7.0).
    if pages and valid_for == change_counter:
        if size != pages * page_size:
            raise InputError(
                f"{_UNREADABLE}truncated or damaged: the header says {pages} pages of {page_size} bytes "
                f"({pages * page_size:,} bytes) but the file has {size:,} bytes",
                path,
            )
    elif size % page_size:
        raise InputError(f"{_UNREADABLE}truncated: {size:,} bytes is not a whole number of {page_size}-byte pages", path)


def readable_database(path: Path, owner: object, policy: SnapshotPolicy, spelled: str | None) -> Path:
    """The file SQLite may open for the database at ``path``: the checked file itself when it
    stands alone, else a private recovered copy (removed when ``owner`` is finalized)."""
    expected = "a SQLite database file"
    with open_checked(path, policy, expected, spelled) as (fd, resolved, size):
        header = os.pread(fd, _HEADER_SIZE, 0)
        check_magic(header, path)
        sidecars = _sidecars(resolved)
        if not sidecars:
            _check_header(header, size, path)
            return resolved
        try:
            folder = Path(tempfile.mkdtemp(prefix="judgekit-snapshot-"))
        except OSError as exc:
            raise InputError(
                f"it has a -wal or -journal beside it, so it is read from a private copy, but no private "
                f"folder can be made in {tempfile.gettempdir()} ({exc.strerror}): set TMPDIR to a writable folder",
                path,
            ) from None
        weakref.finalize(owner, shutil.rmtree, folder, ignore_errors=True)
        copy_path = folder / "snapshot.db"  # a plain name: the sidecars' names follow from it
        copy_fd(fd, copy_path, policy.max_bytes, path)
    for sidecar in sidecars:
        suffix = sidecar.name[len(resolved.name) :]
        with open_checked(sidecar, policy, f"the {suffix} file of a SQLite database") as (fd, _, _):
            copy_fd(fd, Path(f"{copy_path}{suffix}"), policy.max_bytes, sidecar)
    _recover(copy_path, path)
    with open(copy_path, "rb") as handle:
        _check_header(handle.read(_HEADER_SIZE), os.fstat(handle.fileno()).st_size, path)
    return copy_path


def _sidecars(resolved: Path) -> list[Path]:
    """The ``-wal`` / ``-journal`` beside the database that SQLite would read: any that is not
    an empty regular file (a symlink, a FIFO... is checked, and refused, when copied)."""
    found = []
    for suffix in _SIDECARS:
        sidecar = Path(f"{resolved}{suffix}")
        try:
            info = os.lstat(sidecar)
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise unreadable(exc, sidecar) from None
        if info.st_size or not stat.S_ISREG(info.st_mode):
            found.append(sidecar)
    return found


def _recover(copy_path: Path, path: Path) -> None:
    """Let SQLite replay the WAL or roll back a hot journal in the private copy, then leave it
    a database on its own (no WAL), so that it can be opened immutable like any other."""
    journal = Path(f"{copy_path}-journal")
    if journal.exists():
        with open(journal, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(size - 8, 0))
            if handle.read(8) == _JOURNAL_MAGIC:
                raise InputError(
                    "its -journal names a super-journal (a multi-database transaction); rolling it back "
                    "would make SQLite delete the file it names, so it is not read",
                    path,
                )
    try:
        conn = sqlite3.connect(copy_path, isolation_level=None)  # read-write, but only our own copy
    except sqlite3.Error as exc:
        raise InputError(f"cannot open SQLite database: {exc}", path) from None
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # replays / rolls back
        if conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal":
            busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            if busy:
                raise InputError("cannot replay its -wal file into a private copy (checkpoint busy)", path)
            conn.execute("PRAGMA journal_mode=DELETE")
    except sqlite3.DatabaseError as exc:
        raise InputError(f"cannot recover SQLite database with its -wal/-journal: {exc}", path) from None
    finally:
        conn.close()


def quick_check(uri: str, path: Path) -> None:
    """PRAGMA quick_check: b-tree structure, page use and record formats (not index contents)."""
    try:
        conn = sqlite3.connect(uri, uri=True)
        try:
            problems = [row[0] for row in conn.execute("PRAGMA quick_check(3)").fetchall()]
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        raise InputError(f"{_UNREADABLE}damaged: {exc}", path) from None
    if problems != ["ok"]:
        first = " ".join(" ".join(problems).split())
        first = first if len(first) <= 300 else first[:300] + " ..."
        raise InputError(f"{_UNREADABLE}damaged (PRAGMA quick_check: {first})", path)
