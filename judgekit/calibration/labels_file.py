"""Labels files held by a labelling session: locked, appended to, a torn last line set aside.

A session holds each labels file under an exclusive lock (``flock``) from before it reads it
until it ends, however it ends, so a second session on the same file is refused at once instead
of writing the same label twice. A final line cut off by a crash mid-append (no newline, not a
label) is set aside on resume: its bytes go to ``labels.jsonl.torn`` beside it, then the labels
file is cut back to its last complete line, and the person is told.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Self

from judgekit._util.files import fsync_folder
from judgekit._util.strict_json import strict_json_loads
from judgekit._util.text import printable
from judgekit.calibration.labels import Label, load_labels
from judgekit.errors import InputError


def _write_label(fd: int, label: Label) -> None:
    """One line at the end of an open labels file (O_APPEND), on disk before returning. A last
    line without its newline (hand-edited) gets one first, so two labels never join."""
    line = (label.model_dump_json(exclude_none=True) + "\n").encode()
    size = os.fstat(fd).st_size
    if size and os.pread(fd, 1, size - 1) != b"\n":
        line = b"\n" + line
    view = memoryview(line)
    while view:
        view = view[os.write(fd, view):]
    os.fsync(fd)


def append_label(path: Path, label: Label) -> None:
    """Append one label to ``path`` without a lock (a session appends through ``LabelFiles``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    created = not path.exists()
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o666)
    try:
        _write_label(fd, label)
    finally:
        os.close(fd)
    if created:  # make the new file's name durable too
        fsync_folder(path.parent)


# --- the labels files, held for the session ----------------------------------------------------


def torn_path(path: Path) -> Path:
    """Where a cut-off final line of ``path`` is set aside: ``<name>.torn`` beside it."""
    return path.with_name(path.name + ".torn")


def _is_label(raw: bytes) -> bool:
    try:
        Label.model_validate(strict_json_loads(raw.decode("utf-8")))
    except ValueError:  # UnicodeDecodeError, JSONDecodeError and ValidationError are ValueErrors
        return False
    return True


def _read_at(fd: int, offset: int, size: int) -> bytes:
    parts = []
    while size > 0 and (chunk := os.pread(fd, min(size, 1 << 20), offset)):
        parts.append(chunk)
        offset, size = offset + len(chunk), size - len(chunk)
    return b"".join(parts)


@dataclass
class _Torn:
    start: int
    """Offset of the cut-off line: the file is truncated back to it."""
    line: int
    data: bytes


def _torn_tail(fd: int) -> _Torn | None:
    """The final line when it has no newline and is not a label (blank is not torn)."""
    size = os.fstat(fd).st_size
    if not size or os.pread(fd, 1, size - 1) == b"\n":
        return None
    start, newlines = 0, 0
    pos = size
    while pos > 0:  # back to the last newline
        step = min(pos, 1 << 16)
        found = os.pread(fd, step, pos - step).rfind(b"\n")
        if found >= 0:
            start = pos - step + found + 1
            break
        pos -= step
    for offset in range(0, start, 1 << 20):
        newlines += _read_at(fd, offset, min(1 << 20, start - offset)).count(b"\n")
    data = _read_at(fd, start, size - start)
    if not data.strip() or _is_label(data):
        return None
    return _Torn(start, newlines + 1, data)


def _append_bytes(path: Path, data: bytes) -> None:
    """Append ``data`` as one line to the side file ``path``, on disk before returning."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o666)
    except OSError as exc:
        raise InputError(f"cannot set a cut-off line aside here: {exc.strerror}", path) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise InputError("not a regular file; cannot set a cut-off line aside here", path)
        size = info.st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            data = b"\n" + data
        view = memoryview(data + b"\n")
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    fsync_folder(path.parent)


@dataclass
class _Held:
    path: Path
    fd: int
    created: bool
    """This session created the file (it is removed at the end if still empty)."""
    folders: list[Path]
    """Folders this session created for it, outermost first."""


class LabelFiles:
    """The labels files of one labelling session, each locked from before it is read until
    ``close`` (use ``with``): a second session on a held file is refused at once. Appends go
    through the locked descriptor. A file that this session created and left empty is removed at
    the end, with the folders made for it, so a session that labels nothing leaves nothing."""

    def __init__(self, say: Callable[[str], None] = lambda _: None):
        self._say = say
        self._held: dict[Path, _Held] = {}

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def read(self, path: Path) -> list[Label]:
        """Lock ``path``, set aside a cut-off final line (saying so), and return its labels."""
        held = self._hold(path)
        torn = _torn_tail(held.fd)
        try:
            return load_labels(path)
        except InputError as exc:
            if torn is None or exc.line != torn.line:
                raise
        side = torn_path(path)
        _append_bytes(side, torn.data)  # kept first, then cut: never lost
        os.ftruncate(held.fd, torn.start)
        os.fsync(held.fd)
        self._say(printable(f"{path}:{torn.line}: the last line is cut off ({len(torn.data)} bytes without a newline, "
                            f"not a complete label), as a crash mid-write leaves it; set aside in {side} and "
                            "removed from the labels file"))
        return load_labels(path)

    def append(self, path: Path, label: Label) -> None:
        held = self._hold(path)
        first = os.fstat(held.fd).st_size == 0
        _write_label(held.fd, label)
        if first and held.created:  # make the new file's name (and new folders) durable too
            for folder in [path.parent, *(f.parent for f in held.folders)]:
                fsync_folder(folder)
            held.created = False

    def close(self) -> None:
        """Release every lock; remove files (and folders) this session created and left empty."""
        distinct = {id(held): held for held in self._held.values()}.values()  # a file may have two names
        self._held.clear()
        for held in distinct:
            try:
                if held.created and os.fstat(held.fd).st_size == 0 and _same_file(held.path, held.fd):
                    held.path.unlink()
            except OSError:
                pass
            finally:
                os.close(held.fd)
            _remove_folders(held.folders)

    def _hold(self, path: Path) -> _Held:
        key = Path(os.path.abspath(path))
        if key in self._held:
            return self._held[key]
        folders = _make_folders(path.parent)
        while True:
            try:
                fd, created = _open_labels(path)
            except BaseException:
                _remove_folders(folders)
                raise
            try:
                info = os.fstat(fd)
                if not stat.S_ISREG(info.st_mode):
                    raise InputError("not a regular file (a device, FIFO or socket), expected a labels file", path)
                for other in self._held.values():  # the same file under another name
                    if os.path.samestat(info, os.fstat(other.fd)):
                        os.close(fd)
                        self._held[key] = other
                        return other
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError as exc:
                    if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                        raise InputError("another `judgekit label` session holds this labels file; finish or quit "
                                         "it first (or label into another file with --labels)", path) from None
                    raise InputError(f"cannot lock the labels file: {exc.strerror}", path) from None
                if not _same_file(path, fd):  # removed or replaced before we locked it: again
                    os.close(fd)
                    continue
            except BaseException:
                if created and os.fstat(fd).st_size == 0 and _same_file(path, fd):
                    path.unlink(missing_ok=True)
                os.close(fd)
                _remove_folders(folders)
                raise
            os.set_blocking(fd, True)
            held = self._held[key] = _Held(path, fd, created, folders)
            return held


def _same_file(path: Path, fd: int) -> bool:
    try:
        return os.path.samestat(os.stat(path), os.fstat(fd))
    except OSError:
        return False


def _open_labels(path: Path) -> tuple[int, bool]:
    """(descriptor, created): open the labels file for appending, creating it if missing."""
    flags = os.O_RDWR | os.O_APPEND | os.O_NONBLOCK | os.O_CLOEXEC  # no FIFO blocks the open
    while True:
        try:
            try:
                return os.open(path, flags), False
            except FileNotFoundError:
                return os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o666), True
        except FileExistsError:  # created by someone else in between: open that one
            if os.path.islink(path) and not os.path.exists(path):
                raise InputError("is a link to nothing, expected a labels file", path) from None
            continue
        except IsADirectoryError:
            raise InputError("is a folder, expected a labels file", path) from None
        except OSError as exc:
            raise InputError(f"cannot open the labels file to append to it: {exc.strerror}", path) from None


def _remove_folders(folders: list[Path]) -> None:
    """Remove the folders ``_make_folders`` made, innermost first, as long as they are empty."""
    for folder in reversed(folders):
        try:
            folder.rmdir()
        except OSError:  # not empty (another labels file, a .torn file) or gone
            return


def _make_folders(folder: Path) -> list[Path]:
    """Create ``folder`` and missing parents; the ones created here, outermost first."""
    missing = []
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    made = []
    for each in reversed(missing):
        try:
            each.mkdir()
            made.append(each)
        except FileExistsError:
            pass
        except OSError as exc:
            raise InputError(f"cannot create the folder for the labels file: {exc.strerror}", each) from None
    return made
