"""``judgekit init``: a first suite that runs green out of the box.

The files come from the templates in ``templates/`` (package data): a commented suite, a
rubric for the world's kind, three trajectories and the world before and after them. The
world is one document (``world.json``) written as JSON snapshots or built into SQLite
databases; the rubric is pre-registered by the lock code itself (``judgekit.rubric.lock``).

Nothing is overwritten: when any file to write exists (or a rubric file in ``rubrics/``, which
the suite would read too), nothing is written and the error names them. The files are made in a staging folder inside the target and moved into place only once
all of them, the lock included, are made.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import tempfile
import textwrap
from dataclasses import dataclass
from datetime import date
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any, Literal

import judgekit.rubric.lock as locking
from judgekit.errors import InputError
from judgekit.rubric.model import rubric_files

WorldKind = Literal["json", "sqlite"]
WORLD_KINDS: tuple[WorldKind, ...] = ("json", "sqlite")
RUBRIC_ID = "ship-order"
_SNAPSHOT = {"json": ("json_file", "json"), "sqlite": ("sqlite", "db")}  # kind -> (trajectory key, suffix)
_SQL_TYPES = {bool: "INTEGER", int: "INTEGER", float: "REAL", str: "TEXT"}


@dataclass(frozen=True)
class Scaffold:
    """What ``init_suite`` wrote: the folder, and every file in it, relative to the folder."""

    folder: Path
    files: tuple[str, ...]
    world: WorldKind

    @property
    def suite(self) -> Path:
        return self.folder / "suite.yaml"


def planned_files(world: WorldKind) -> tuple[str, ...]:
    """The files ``init_suite`` writes for ``world``, relative to its folder, in writing order."""
    suffix = _SNAPSHOT[world][1]
    return ("suite.yaml", f"rubrics/{RUBRIC_ID}.yaml", f"rubrics/{locking.LOCK_NAME}", "trajectories.jsonl",
            f"snapshots/before.{suffix}", f"snapshots/after.{suffix}")


def init_suite(folder: str | Path = ".", world: WorldKind = "json", *, today: date | None = None) -> Scaffold:
    """Write a first suite into ``folder`` (made if missing) for a world of JSON documents or
    SQLite databases. ``today``: the rubric's registration day (default: today). Refuses,
    writing nothing, when any of its files exists there, or any rubric file in its rubrics/
    folder (InputError naming them)."""
    if world not in WORLD_KINDS:
        raise ValueError(f"world must be one of {', '.join(WORLD_KINDS)}, not {world!r}")
    folder = Path(folder)
    files = planned_files(world)
    if folder.exists() and not folder.is_dir():
        raise InputError("is a file: `judgekit init` writes into a folder", folder)
    existing = [name for name in files if os.path.lexists(folder / name)]
    # The suite reads every rubric in rubrics/: one already there would join it unlocked.
    existing += [p.relative_to(folder).as_posix() for p in rubric_files([folder / "rubrics"])] if (
        folder / "rubrics").is_dir() else []
    if existing:
        raise InputError(f"already there: {', '.join(existing)}; nothing written (init never replaces a file, nor "
                         "adds its rubric beside others): choose another folder, or move them away", folder)
    shown = folder.as_posix()
    values = {"dir": shown, "rubrics": f"{shown}/rubrics", "registered": (today or date.today()).isoformat(),
              "source": _SNAPSHOT[world][0], "ext": _SNAPSHOT[world][1],
              "world_files": "JSON documents" if world == "json" else "SQLite databases"}
    folder.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(dir=folder, prefix=".judgekit-init-"))
    try:
        _write(stage, world, values)
        _, problems = locking.lock([stage / "rubrics"], stage / "rubrics" / locking.LOCK_NAME)
        if problems:  # the templates are ours: a problem here is a bug, said as it is
            raise InputError("; ".join(map(str, problems)), folder / "rubrics")
        for name in files:
            target = folder / name
            target.parent.mkdir(parents=True, exist_ok=True)
            if os.path.lexists(target):  # appeared while we wrote: still never replaced
                raise InputError("appeared while init was writing; left as it is", target)
            os.replace(stage / name, target)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return Scaffold(folder, files, world)


def _template(name: str) -> str:
    return resources.files("judgekit.scaffold").joinpath("templates", name).read_text(encoding="utf-8")


def _write(stage: Path, world: WorldKind, values: dict[str, str]) -> None:
    def text(name: str, template: str) -> None:
        path = stage / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(Template(_template(template)).substitute(values), encoding="utf-8", newline="\n")

    text("suite.yaml", "suite.yaml")
    text(f"rubrics/{RUBRIC_ID}.yaml", f"rubric-{world}.yaml")
    text("trajectories.jsonl", "trajectories.jsonl")
    snapshots = json.loads(_template("world.json"))
    (stage / "snapshots").mkdir()
    for side in ("before", "after"):
        path = stage / "snapshots" / f"{side}.{values['ext']}"
        if world == "json":
            path.write_text(json.dumps(snapshots[side], indent=2) + "\n", encoding="utf-8", newline="\n")
        else:
            _build_database(path, snapshots[side])


def _build_database(path: Path, collections: dict[str, list[dict[str, Any]]]) -> None:
    """One table per collection, its first field the primary key, rows in the order given."""
    connection = sqlite3.connect(path)
    try:
        with connection:
            for table, rows in collections.items():
                columns = list(rows[0])
                declared = ", ".join(f'"{c}" {_SQL_TYPES[type(rows[0][c])]}' + (" PRIMARY KEY" if i == 0 else "")
                                     for i, c in enumerate(columns))
                connection.execute(f'CREATE TABLE "{table}" ({declared})')
                marks = ", ".join("?" for _ in columns)
                connection.executemany(f'INSERT INTO "{table}" VALUES ({marks})', [[row[c] for c in columns] for row in rows])
    finally:
        connection.close()


def next_steps(scaffold: Scaffold) -> str:
    """What to do next, for the person who ran ``judgekit init``."""
    shown = scaffold.folder.as_posix()
    return "\n".join([
        f"wrote a first suite in {shown} ({scaffold.world} world):",
        textwrap.fill(", ".join(scaffold.files), width=80, initial_indent="  ", subsequent_indent="  ",
                      break_on_hyphens=False, break_long_words=False),
        "next:",
        "  run it (green, no API key needed):",
        f"    judgekit run {shown} --gate",
        f"  make it yours: edit {shown}/rubrics/{RUBRIC_ID}.yaml; put your agent's runs in",
        f"    {shown}/trajectories.jsonl and their worlds in {shown}/snapshots/ (`judgekit schema trajectory`)",
        "  after editing a rubric, bump its version and lock it again:",
        f"    judgekit rubric lock {shown}/rubrics --lock {shown}/rubrics/{locking.LOCK_NAME}",
        "  in CI, compare each run with the last green one:",
        f"    judgekit run {shown} --gate --compare",
        "  docs: docs/getting-started.md",
    ]) + "\n"
