"""``judgekit init``: write a first suite."""

from __future__ import annotations

from pathlib import Path

import click

from judgekit.cli._exit import handle_errors
from judgekit.cli._out import say


@click.command("init")
@click.argument("folder", required=False, default=".", type=click.Path(file_okay=False, path_type=Path))
@click.option("--world", type=click.Choice(["json", "sqlite"]), default="json", show_default=True,
              help="What the world snapshots are: JSON documents or SQLite databases.")
@handle_errors
def init(folder: Path, world: str) -> None:
    """Write a first suite into FOLDER (default: the current folder; made if missing).

    A commented suite.yaml, a rubric and its lock (rubrics/), three trajectories and their
    world snapshots: `judgekit run FOLDER --gate` is green with no API key. Nothing is
    overwritten: if any of these files exists, nothing is written (exit 2, naming them).
    """
    from judgekit.scaffold import init_suite, next_steps

    say(next_steps(init_suite(folder, world)), nl=False)
