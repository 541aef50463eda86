"""Pre-registration: ``rubrics.lock`` freezes each rubric's canonical hash under its id@version.

Locking is append-only. Once ``id@version`` is locked, its content may not change: a change
needs a version bump, which is locked as a new entry. ``judgekit rubric check`` (and any run of
a suite that names the lock) refuses a rubric whose content drifted from its locked hash.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from judgekit._util.files import write_text_atomically
from judgekit._util.io import Version1, load_json_model
from judgekit.rubric.model import Rubric
from judgekit.rubric.model import load_rubrics

LOCK_NAME = "rubrics.lock"


class LockEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sha256: str = Field(description="sha256 of the rubric's canonical JSON.")
    file: str = Field(description="Where it was locked from, relative to the lock file.")
    registered: str = Field(description="The rubric's registered date.")


class LockFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    format_version: Version1 = 1
    rubrics: dict[str, LockEntry] = Field(default_factory=dict, description="id@version -> entry.")


def read_lock(path: Path) -> LockFile:
    if not path.exists():
        return LockFile()
    return load_json_model(path, LockFile, expected="a rubrics.lock file")


@dataclass
class Problem:
    path: Path
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


def verify(rubric: Rubric, rubric_path: Path, lock: LockFile, lock_path: Path) -> Problem | None:
    entry = lock.rubrics.get(rubric.ref)
    if entry is None:
        return Problem(rubric_path, f"{rubric.ref} is not pre-registered in {lock_path}: run `judgekit rubric lock`")
    if entry.sha256 != rubric.sha256():
        return Problem(
            rubric_path,
            f"{rubric.ref} changed since it was locked (sha256 {entry.sha256[:12]}... -> "
            f"{rubric.sha256()[:12]}...): bump its version, then lock again",
        )
    return None


def check(paths: list[Path], lock_path: Path) -> list[Problem]:
    """Every problem with the rubrics under ``paths`` against the lock (empty when all is well)."""
    lock = read_lock(lock_path)
    rubrics, files = load_rubrics(paths)  # raises on two files claiming one id@version
    return [p for ref in sorted(rubrics) if (p := verify(rubrics[ref], files[ref], lock, lock_path))]


def lock(paths: list[Path], lock_path: Path) -> tuple[list[str], list[Problem]]:
    """Lock every rubric not locked yet. Returns (newly locked refs, problems); on any problem
    nothing is written."""
    current = read_lock(lock_path)
    rubrics, files = load_rubrics(paths)
    added: list[str] = []
    problems: list[Problem] = []
    for ref in sorted(rubrics):
        rubric = rubrics[ref]
        if ref not in current.rubrics:
            relative = os.path.relpath(files[ref].resolve(), lock_path.resolve().parent)
            current.rubrics[ref] = LockEntry(
                sha256=rubric.sha256(), file=Path(relative).as_posix(), registered=rubric.registered.isoformat()
            )
            added.append(ref)
        elif (problem := verify(rubric, files[ref], current, lock_path)) is not None:
            problems.append(problem)
    if not problems and added:
        current.rubrics = dict(sorted(current.rubrics.items()))
        write_text_atomically(lock_path, json.dumps(current.model_dump(mode="json"), indent=2, sort_keys=True) + "\n")
    return added, problems
