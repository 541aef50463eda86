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
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterable
from datetime import date
from pathlib import Path, PurePosixPath
from types import TracebackType
from typing import IO, Any

import yaml
from pydantic import BaseModel

from judgekit._files import _protected, fsync_folder
from judgekit.errors import InputError

#: The day an imported rubric is registered on when neither the input nor ``--registered``
#: gives one. A fixed day, so that an import is byte-identical whenever it runs; it says "the
#: criteria come from the source's ground truth, which predates every run scored against it".
DEFAULT_REGISTERED = date(1970, 1, 1)


MAX_NAME = 100
"""The longest name part ``name_part`` gives: file names built from it stay far below 255 bytes."""


def name_part(text: str, default: str = "") -> str:
    """``text`` as a part of a rubric id or a file name under ``--out``: lower case, each run of
    characters other than letters, digits, '.', '_' and '-' one '-', no leading or trailing
    punctuation (``default`` when nothing is left). A name longer than ``MAX_NAME`` is cut and
    ends in 12 hex digits of the whole text's sha256, so two long names cut alike stay apart."""
    part = re.sub(r"[^a-z0-9._-]+", "-", text.lower()).strip("-._")
    if len(part) > MAX_NAME:
        part = f"{part[:MAX_NAME - 13].rstrip('-._')}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"
    return part or default


def _relative(name: str | PurePosixPath) -> PurePosixPath:
    path = PurePosixPath(name)
    if path.is_absolute() or not path.parts or any(part in ("", ".", "..") for part in path.parts):
        raise ValueError(f"an importer may only write below --out, not {str(name)!r}")
    return path


class LineSink:
    """One JSON Lines file being streamed to the staging folder."""

    def __init__(self, handle: IO[str], relative: PurePosixPath):
        self._handle = handle
        self.relative = relative
        self.count = 0

    def add(self, record: BaseModel | dict[str, Any]) -> None:
        """Append one record: a model (dumped without its defaults) or a plain JSON object."""
        if isinstance(record, BaseModel):
            line = record.model_dump_json(exclude_defaults=True)
        else:
            line = json.dumps(record, ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False)
        self._handle.write(line + "\n")
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
        staged.parent.mkdir(parents=True, exist_ok=True)
        return relative, staged

    def lines(self, name: str | PurePosixPath) -> LineSink:
        """The JSON Lines file ``name`` (relative to ``--out``), opened on first use and kept
        open: records may be added to several files in any interleaving."""
        relative = _relative(name)
        if relative not in self._open:
            relative, staged = self._target(relative)
            handle = staged.open("x", encoding="utf-8", newline="\n")
            self._open[relative] = (handle, LineSink(handle, relative))
        return self._open[relative][1]

    def text(self, name: str | PurePosixPath, text: str) -> Path:
        relative, staged = self._target(name)
        if relative in self._open:
            raise ValueError(f"{relative} is being streamed; it cannot also be written whole")
        with staged.open("w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
        return self.out / relative

    def json(self, name: str | PurePosixPath, value: Any) -> Path:
        return self.text(name, json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n")

    def yaml(self, name: str | PurePosixPath, value: Any) -> Path:
        return self.text(name, yaml.safe_dump(value, sort_keys=False, allow_unicode=True))

    def rubric(self, rubric: Any, folder: str = "rubrics") -> Path:
        """Write ``rubric`` (a ``judgekit.rubric.Rubric``) as ``folder/<id>.yaml``; the folder is
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
        return self.yaml("suite.yaml", document)

    # --- the end -----------------------------------------------------------------------------

    def _finish(self) -> None:
        from judgekit import lock as locking

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
        try:
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
        except OSError as exc:
            raise InputError(f"cannot write: {exc.strerror or exc}", self.out) from None
