"""The one way an importer writes: staged, streamed, deterministic, and all-or-nothing.

An import writes into a staging folder beside ``--out`` (same file system); only when the
importer returns without an error are its files moved into ``--out`` (``--out`` missing: the
staging folder is renamed to it, one atomic step; present: each file is renamed into place, so
files there that this import does not write stay as they were). On any error the staging
folder is removed, and so are the folders above ``--out`` made for it: a failed import leaves
nothing behind.

Trajectories are streamed line by line to disk (a 1 GB log never sits in memory). What is
written depends only on the input: lines in the order the importer adds them, YAML and JSON
with fixed key order, rubrics registered on the date the importer is given (never "today").

Importers copy other tools' records as they are (``mask_secrets=False``): a secret an agent
leaked there is what a safety scan must still find.

An import that writes trajectories (``trajectories``) but no suite (``suite``) gets a
``suite.yaml`` to fill in: commented, naming those files, with ``FILL-IN`` where the rubric's
id goes (``judgekit run`` refuses it and says what to write there). A ``suite.yaml`` already in
``--out`` is kept: it may be that one, filled in.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import date
from pathlib import Path, PurePosixPath
from types import TracebackType
from typing import IO, Any

import yaml
from pydantic import BaseModel

from judgekit._util.files import _protected, fsync_folder
from judgekit.errors import InputError

SUITE_NAME = "suite.yaml"

#: The day an imported rubric is registered on when neither the input nor ``--registered``
#: gives one. A fixed day, so that an import is byte-identical whenever it runs; it says "the
#: criteria come from the source's ground truth, which predates every run scored against it".
DEFAULT_REGISTERED = date(1970, 1, 1)


MAX_NAME = 100
"""The longest name ``file_name`` gives, in characters and so in bytes (it gives ASCII only):
with a prefix and an extension a file name built from it stays far below the 255 bytes file
systems allow."""
MAX_PART = 255
"""The longest part of a path under ``--out`` the writer accepts, in bytes (the file systems' limit)."""

_OTHER = re.compile(r"[^A-Za-z0-9._-]+")
# Device names Windows reserves, whatever follows a dot: "nul.jsonl" is the device too.
_DEVICE = re.compile(r"(?i)(?:con|prn|aux|nul|com[0-9]|lpt[0-9])(?:\..*)?")


def file_name(text: str, default: str, *, lower: bool = False) -> str:
    """``text``, a name taken from an input (a task, dataset, category, model, conversation or
    question), as one file or folder name under ``--out`` or a part of one. Every name an
    importer writes under goes through here, whatever it names; ``lower``: also a part of a
    rubric id (lower case).

    Each run of characters other than ASCII letters, digits, '.', '_' and '-' becomes one '-',
    and leading and trailing '.' and '-' go: the name holds no path separator, control or
    bidirectional character, and is never '.', '..' or hidden. An ordinary name (``my_task``)
    is itself. A name that is then empty (``default``, an ordinary name, stands for it),
    longer than ``MAX_NAME`` (cut) or a device name Windows reserves (``CON``, ``nul.x``) ends
    in '-' and 12 hex digits of ``text``'s sha256, so that two such names stay apart. Names
    that differ only in the characters replaced (``a/b``, ``a b``) or in case become one: an
    importer that writes several names keeps them apart with ``Names`` or a check of its own.
    """
    part = _OTHER.sub("-", text.lower() if lower else text).strip(".-")
    device = _DEVICE.fullmatch(part) is not None
    if part and len(part) <= MAX_NAME and not device:
        return part
    if device:
        part = part.replace(".", "-", 1)  # "nul-x...", not "nul.x-...": Windows reads up to the first dot
    stem = part[:MAX_NAME - 13].rstrip(".-") or default
    return f"{stem}-{hashlib.sha256(text.encode('utf-8', 'surrogatepass')).hexdigest()[:12]}"


class Names:
    """The file names one import gives things of its input (``file_name``), so that no two of
    them share one (the second would silently replace the first). Names are compared in lower
    case, as macOS and Windows compare them."""

    def __init__(self) -> None:
        self._owners: dict[str, str] = {}

    def give(self, text: str, default: str, src: Path, *, owner: str | None = None, lower: bool = False) -> str:
        """``file_name(text, default, lower=lower)`` for ``owner`` (a description of the thing
        named, ``text`` when not given); an InputError naming ``src`` when another owner has it."""
        name = file_name(text, default, lower=lower)
        owner = text if owner is None else owner
        first = self._owners.setdefault(name.lower(), owner)
        if first != owner:
            raise InputError(f"{owner} and {first} would both be written as {name!r}: rename one", src)
        return name


def _relative(name: str | PurePosixPath) -> PurePosixPath:
    path = PurePosixPath(name)
    if path.is_absolute() or not path.parts or any(part in ("", ".", "..") for part in path.parts):
        raise ValueError(f"an importer may only write below --out, not {str(name)!r}")
    # A bug in an importer, not an input error: every name from the input goes through file_name.
    if any(_OTHER.search(part) or part.startswith(".") or len(part) > MAX_PART for part in path.parts):
        raise ValueError(f"an importer writes names file_name gives, not {str(name)[:300]!r}")
    return path


@contextmanager
def _writing(path: Path) -> Iterator[None]:
    """An OSError while writing (no space, no permission, a path too long) as an InputError
    naming ``path``: the import stops with nothing written, and says why."""
    try:
        yield
    except OSError as exc:
        raise InputError(f"cannot write: {exc.strerror or exc}", path) from None


class LineSink:
    """One JSON Lines file being streamed to the staging folder."""

    def __init__(self, handle: IO[str], final: Path):
        self._handle = handle
        self.final = final
        self.count = 0

    def add(self, record: BaseModel | dict[str, Any]) -> None:
        """Append one record: a model (dumped without its defaults) or a plain JSON object."""
        if isinstance(record, BaseModel):
            line = record.model_dump_json(exclude_defaults=True)
        else:
            line = json.dumps(record, ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False)
        try:
            self._handle.write(line + "\n")
        except OSError as exc:  # not _writing: a plain try costs nothing per record
            raise InputError(f"cannot write: {exc.strerror or exc}", self.final) from None
        self.count += 1


class ImportWriter:
    """Everything one import writes. Use as ``with ImportWriter(out) as writer: ...``; the files
    appear in ``out`` when the block ends without an error. ``written`` lists their final paths
    in the order they were first written."""

    def __init__(self, out: str | Path):
        self.out = Path(out)
        self.written: list[Path] = []
        self._written: set[Path] = set()  # the same, for a constant-time "written already?"
        self._stage: Path | None = None
        self._open: dict[PurePosixPath, tuple[IO[str], LineSink]] = {}
        self._rubric_folders: dict[PurePosixPath, PurePosixPath] = {}
        self._made: list[Path] = []  # folders above --out this import created, deepest first
        self._trajectory_files: list[PurePosixPath] = []
        self._suite_name = ""
        self._suite_written = False

    # --- the block ---------------------------------------------------------------------------

    def __enter__(self) -> ImportWriter:
        out = self.out
        if out.exists() and not out.is_dir():
            raise InputError("--out must be a folder; this is a file", out)
        parent = out.parent if out.parent != Path("") else Path(".")
        nearest = parent
        while not nearest.exists() and nearest != nearest.parent:
            self._made.append(nearest)
            nearest = nearest.parent
        try:
            parent.mkdir(parents=True, exist_ok=True)
            self._stage = Path(tempfile.mkdtemp(dir=parent, prefix=f".{out.name or 'import'}.importing-"))
        except OSError as exc:
            self._remove_made()
            raise InputError(f"cannot write: {exc.strerror or exc}", out) from None
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        try:
            if kind is None:
                self._finish()
        finally:
            for handle, _ in self._open.values():
                handle.close()
            self._open.clear()
            if self._stage is not None and self._stage.exists():
                shutil.rmtree(self._stage, ignore_errors=True)
            self._stage = None
            if not self.out.exists():  # failed: the folders made for it go too
                self._remove_made()

    def _remove_made(self) -> None:
        for folder in self._made:
            try:
                folder.rmdir()
            except OSError:  # not empty (someone else wrote there meanwhile) or already gone
                return

    # --- writing -----------------------------------------------------------------------------

    def _target(self, name: str | PurePosixPath) -> tuple[PurePosixPath, Path]:
        if self._stage is None:
            raise RuntimeError("ImportWriter used outside its with-block")
        relative = _relative(name)
        final = self.out / relative
        if final.resolve() in _protected.get():
            raise InputError("would overwrite an input of this import: write somewhere else", final)
        if final not in self._written:
            self._written.add(final)
            self.written.append(final)
        staged = self._stage / relative
        with _writing(final):
            staged.parent.mkdir(parents=True, exist_ok=True)
        return relative, staged

    def lines(self, name: str | PurePosixPath) -> LineSink:
        """The JSON Lines file ``name`` (relative to ``--out``), opened on first use and kept
        open: records may be added to several files in any interleaving."""
        relative = _relative(name)
        if relative not in self._open:
            relative, staged = self._target(relative)
            with _writing(self.out / relative):
                handle = staged.open("x", encoding="utf-8", newline="\n")
            self._open[relative] = (handle, LineSink(handle, self.out / relative))
        return self._open[relative][1]

    def trajectories(self, name: str | PurePosixPath, *, suite_name: str) -> LineSink:
        """``lines(name)`` for a trajectory file: without a ``suite`` it is named in the
        ``suite.yaml`` to fill in that the import ends with, called ``suite_name`` (the first
        one given: say what was imported, e.g. "openai-chat import of chat.jsonl")."""
        relative = _relative(name)
        if relative not in self._trajectory_files:
            self._trajectory_files.append(relative)
            self._suite_name = self._suite_name or suite_name
        return self.lines(relative)

    def text(self, name: str | PurePosixPath, text: str) -> Path:
        """Write the file ``name`` whole, once: a second file of one import under the same name
        (two inputs that name it alike) is an InputError, never a silent replacement."""
        if self.out / _relative(name) in self._written:
            raise InputError(f"two things of this import would both be written as {_relative(name)}: rename one",
                             self.out / _relative(name))
        relative, staged = self._target(name)
        if relative in self._open:
            raise ValueError(f"{relative} is being streamed; it cannot also be written whole")
        with _writing(self.out / relative), staged.open("w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
        return self.out / relative

    def json(self, name: str | PurePosixPath, value: Any) -> Path:
        return self.text(name, json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n")

    def yaml(self, name: str | PurePosixPath, value: Any) -> Path:
        return self.text(name, yaml.safe_dump(value, sort_keys=False, allow_unicode=True))

    def rubric(self, rubric: Any, folder: str = "rubrics") -> Path:
        """Write ``rubric`` (a ``judgekit.rubric.model.Rubric``) as ``folder/<id>.yaml``; the folder is
        pre-registered in its own lock when the import ends (``suite`` names that lock)."""
        relative = _relative(folder)
        self._rubric_folders[relative] = relative
        return self.text(relative / f"{rubric.id}.yaml", rubric.to_yaml())

    def suite(self, name: str, entries: Iterable[dict[str, Any]], *, folder: str = "rubrics", **extra: Any) -> Path:
        """``suite.yaml``: the rubric folder, its lock, and ``entries`` ({file, rubric})."""
        rubrics = _relative(folder)
        self._rubric_folders[rubrics] = rubrics
        document = {
            "name": name,
            "rubrics": [rubrics.as_posix()],
            "lock": (rubrics / "rubrics.lock").as_posix(),
            **extra,
            "trajectories": list(entries),
        }
        self._suite_written = True
        return self.yaml(SUITE_NAME, document)

    # --- the end -----------------------------------------------------------------------------

    def _finish(self) -> None:
        import judgekit.rubric.lock as locking

        if self._trajectory_files and not self._suite_written and not (self.out / SUITE_NAME).exists():
            self.text(SUITE_NAME, suite_to_fill(self._suite_name, self._trajectory_files))

        with _writing(self.out):
            for handle, _ in self._open.values():
                handle.flush()
                os.fsync(handle.fileno())
                handle.close()
        self._open.clear()
        assert self._stage is not None
        for folder in sorted(self._rubric_folders):
            staged_folder = self._stage / folder
            staged_folder.mkdir(parents=True, exist_ok=True)
            lock_path = staged_folder / locking.LOCK_NAME
            self._target(folder / locking.LOCK_NAME)
            _, problems = locking.lock([staged_folder], lock_path)
            if problems:
                raise InputError("; ".join(map(str, problems)), self.out / folder / locking.LOCK_NAME)
            if not lock_path.exists():  # no rubric: an empty lock still says "nothing registered"
                empty = locking.LockFile().model_dump(mode="json")
                lock_path.write_text(json.dumps(empty, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        self._move_into_place()

    def _move_into_place(self) -> None:
        assert self._stage is not None
        with _writing(self.out):
            if not self.out.exists():
                os.replace(self._stage, self.out)
                self._stage = None
                fsync_folder(self.out.parent if self.out.parent != Path("") else Path("."))
                return
            for final in self.written:  # every clash is found before the first file moves
                if final.is_dir() or (final.exists() and not final.is_file()):
                    raise InputError("is in the way: expected a regular file or nothing there", final)
            for final in self.written:
                staged = self._stage / final.relative_to(self.out)
                final.parent.mkdir(parents=True, exist_ok=True)
                os.replace(staged, final)
                fsync_folder(final.parent)


def suite_to_fill(name: str, files: Iterable[PurePosixPath]) -> str:
    """The ``suite.yaml`` of an import that wrote trajectories (``files``) and no rubric: it
    names them, and what is still missing (the rubric) is ``RUBRIC_PLACEHOLDER``, which the suite
    loader refuses with a message saying what to write there."""
    from judgekit.suite import RUBRIC_PLACEHOLDER

    entries = "".join(f"  - file: {json.dumps(path.as_posix())}\n    rubric: {RUBRIC_PLACEHOLDER}"
                      "  # the id of your rubric (step 1)\n" for path in files)
    return f"""\
# A judgekit suite for the trajectories this import wrote. It does not run yet: judgekit needs
# a rubric, the criteria each trajectory is scored against. In this folder:
#
#   1. Write a rubric in rubrics/ (its format: `judgekit rubric schema`; `judgekit init` writes
#      a commented one to start from).
#   2. Pre-register it: `judgekit rubric lock` (writes rubrics/rubrics.lock).
#   3. Put its id where it says {RUBRIC_PLACEHOLDER} below, then `judgekit run .`
name: {json.dumps(name)}
rubrics: [rubrics]
lock: rubrics/rubrics.lock
# The embedded judge scores faithfulness with no API key; it is uncalibrated, so advisory. A
# real model: judge: {{model: openai/gpt-4o-2024-08-06, api_key_env: OPENAI_API_KEY}}
judge:
  model: local
trajectories:
{entries}"""
