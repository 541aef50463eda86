"""Writing files: atomically (a crash never leaves half a file), with the modes people expect,
and checked before a long run so that a bad ``--out`` fails at once rather than at the end.

Secrets (the judge's API key, common key shapes) are masked in everything written
(``judgekit._util.text.redact``), and a command can protect its inputs (``protect``): a write that
would replace one of them is refused, whatever path led to it.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

from judgekit._util.text import redact
from judgekit.errors import InputError

_NOT_SUPPORTED = {errno.EINVAL, errno.ENOTSUP, errno.EBADF}
_protected: ContextVar[frozenset[Path]] = ContextVar("judgekit_protected_inputs", default=frozenset())


@contextmanager
def protect(paths: Iterable[str | Path]) -> Iterator[None]:
    """Within the block, ``write_text_atomically`` refuses to replace any of ``paths``."""
    token = _protected.set(_protected.get() | {Path(p).resolve() for p in paths})
    try:
        yield
    finally:
        _protected.reset(token)

_NOT_SUPPORTED = {errno.EINVAL, errno.ENOTSUP, errno.EBADF}


def current_umask() -> int:
    """The process umask, read without changing it where the OS says it (Linux >= 4.7);
    elsewhere set and restored at once (a thread creating a file in between gets mode 0o022)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def fsync_folder(folder: Path) -> None:
    """Make a folder's entries (a new or renamed file) durable, where the OS supports it."""
    if not hasattr(os, "O_DIRECTORY"):
        return
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:  # e.g. a folder we may write but not read: the data itself is synced
        return
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in _NOT_SUPPORTED:
            raise
    finally:
        os.close(fd)


class AtomicFile:
    """A file written in pieces that appears all at once: a temporary file in the same folder,
    synced, then renamed over ``path`` when the block ends without an error (on an error it is
    removed, and ``path`` is as it was). A new file gets ``0o666 & ~umask``; a replaced file keeps
    its permission bits. Failures raise InputError naming the path.

    ``mask_secrets``: every piece is masked (``judgekit._util.text.redact``) before it is written;
    pieces are whole lines or documents, so a key is never cut in two between them.
    """

    def __init__(self, path: str | Path, *, mask_secrets: bool = True):
        self.path = Path(path)
        self.mask_secrets = mask_secrets
        self._handle = None
        self._tmp: str | None = None

    def __enter__(self) -> AtomicFile:
        path = self.path
        if path.resolve() in _protected.get():
            raise InputError("would overwrite an input of this command: write somewhere else", path)
        try:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except (FileExistsError, NotADirectoryError):
                raise InputError(f"cannot write: {_nearest_existing(path.parent)} is not a folder", path) from None
            try:
                info = os.stat(path)
            except FileNotFoundError:
                mode = 0o666 & ~current_umask()
            else:
                if stat.S_ISDIR(info.st_mode):
                    raise InputError("is a folder, expected a file to write", path)
                if not stat.S_ISREG(info.st_mode):  # never rename over /dev/null or a FIFO
                    raise InputError("not a regular file (a device, FIFO or socket); cannot replace it", path)
                mode = stat.S_IMODE(info.st_mode)
            fd, self._tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        except OSError as exc:
            raise InputError(f"cannot write: {exc.strerror or exc}", path) from None
        self._handle = os.fdopen(fd, "w", encoding="utf-8")
        try:
            if hasattr(os, "fchmod"):  # mkstemp made it 0o600
                os.fchmod(self._handle.fileno(), mode)
        except BaseException:
            self._abandon()
            raise
        return self

    def write(self, text: str) -> None:
        try:
            self._handle.write(redact(text) if self.mask_secrets else text)
        except OSError as exc:
            self._abandon()
            raise InputError(f"cannot write: {exc.strerror or exc}", self.path) from None

    def _abandon(self) -> None:
        if self._handle is not None:
            try:
                self._handle.close()
            except OSError:
                pass
            self._handle = None
        if self._tmp is not None:
            Path(self._tmp).unlink(missing_ok=True)
            self._tmp = None

    def __exit__(self, kind, exc, tb) -> None:
        if self._tmp is None:
            return  # abandoned after a failed write; its error is on its way
        if kind is not None:
            self._abandon()
            return
        try:
            self._handle.flush()
            os.fsync(self._handle.fileno())
            self._handle.close()
            self._handle = None
            os.replace(self._tmp, self.path)
            self._tmp = None
        except BaseException as error:
            self._abandon()
            if isinstance(error, OSError):
                raise InputError(f"cannot write: {error.strerror or error}", self.path) from None
            raise
        fsync_folder(self.path.parent)


def write_text_atomically(path: str | Path, text: str, *, mask_secrets: bool = True) -> None:
    """Replace ``path`` with ``text`` (UTF-8) all at once (see ``AtomicFile``).

    ``mask_secrets=False`` is for importers only: they copy another tool's records as they are,
    and a secret an agent leaked there is what a safety scan must still find.
    """
    with AtomicFile(path, mask_secrets=mask_secrets) as handle:
        handle.write(text)


def relative_to(path: str | Path, folder: str | Path) -> str:
    """``path`` relative to ``folder`` (with ``..`` where needed), POSIX separators: paths a
    record keeps this way compare across machines."""
    try:
        return Path(os.path.relpath(path, folder)).as_posix()
    except ValueError:  # another drive (Windows)
        return str(path)


def ensure_writable(path: str | Path) -> None:
    """Raise InputError naming ``path`` (and why) unless a file could be written there now.

    Proven, not guessed: a temporary file is created and removed in the nearest folder that
    exists (permissions, read-only file systems, quotas on inodes all show). Nothing is created
    that stays, not even missing parent folders.
    """
    path = Path(path)
    try:
        if path.is_dir():
            raise InputError("is a folder, expected a file to write", path)
        if path.exists() and not path.is_file():
            raise InputError("not a regular file (a device, FIFO or socket); cannot write it", path)
        folder = _nearest_existing(path.parent)
        if not folder.is_dir():
            raise InputError(f"cannot write: {folder} is not a folder", path)
    except OSError as exc:
        raise InputError(f"cannot write: {exc.strerror or exc}", path) from None
    try:
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".judgekit-probe-", suffix=".tmp")
    except OSError as exc:
        raise InputError(f"cannot write: cannot create a file in {folder}: {exc.strerror or exc}", path) from None
    os.close(fd)
    os.unlink(probe)


def _nearest_existing(folder: Path) -> Path:
    """``folder`` or its nearest ancestor that exists (a dangling link counts as existing)."""
    while not folder.exists() and not folder.is_symlink() and folder != folder.parent:
        folder = folder.parent
    return folder
