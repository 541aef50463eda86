"""Trajectories: what an agent was asked, every tool call it made, what it answered.

A trajectory file is JSON Lines, one trajectory per line, read as a stream. World snapshots
(``world.before`` / ``world.after``) name files relative to the trajectory file's folder.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from judgekit._util.io import Version1, iter_jsonl_raw
from judgekit.errors import InputError
from judgekit.world.diff import Diff, diff_snapshots
from judgekit.world.snapshot import Snapshot, SnapshotPolicy, SnapshotSpec, load_snapshot

TRAJECTORY_FORMAT_VERSION = 1


class Call(BaseModel):
    """One tool call and what came back."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    id: str | None = Field(None, description="The call id the agent framework gave it, if any.")
    tool: str = Field(description="Name of the tool called.")
    args: dict[str, Any] = Field(default_factory=dict, description="Arguments, as the agent sent them.")
    result: Any = Field(None, description="What the tool returned (any JSON value).")
    error: str | None = Field(
        None,
        description="Set when the call failed. A failed call changed nothing in the world: it earns "
        "no tool-correctness point and is not counted as a side effect.",
    )
    started_at: datetime | None = Field(None, description="When the call started.")
    ended_at: datetime | None = Field(None, description="When the call returned.")

    @property
    def succeeded(self) -> bool:
        """False when the call failed, and so changed nothing."""
        return self.error is None


class World(BaseModel):
    """The world before and after the run, as snapshots of the same kind."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    before: SnapshotSpec = Field(description="The world before the agent ran.")
    after: SnapshotSpec = Field(description="The world after the agent ran.")
    keys: dict[str, str] = Field(
        default_factory=dict,
        description="JSON snapshots only: JSON pointer of a list -> id field its records are matched by.",
    )


class UserTurn(BaseModel):
    """A message from the user after the prompt, in a run of several turns."""

    model_config = ConfigDict(extra="forbid")

    text: str = Field(description="What the user said.")
    before_call: int = Field(ge=0, description="How many calls the agent had made when the user said it "
                             "(the index of the first call after it).")


class Trajectory(BaseModel):
    """One agent run."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    format_version: Version1 = Field(TRAJECTORY_FORMAT_VERSION, description="Trajectory format version.")
    id: str = Field(min_length=1, description="Unique id of this run within its suite.")
    prompt: str = Field(description="What the agent was asked to do.")
    calls: list[Call] = Field(default_factory=list, description="Every tool call, in order.")
    output: str = Field("", description="The agent's final answer to the user.")
    context: dict[str, str] = Field(
        default_factory=dict,
        description="Context given to the agent (id -> text); faithful claims may cite it.",
    )
    metadata: dict[str, Any] = Field(
        default_factory=dict,
        description="Free labels: model name, framework version, timestamp... Never scored.",
    )
    latency_s: float | None = Field(None, ge=0, description="Wall time of the whole run, in seconds.")
    world: World | None = Field(None, description="World snapshots, when the task changes a world.")
    turns: list[UserTurn] = Field(
        default_factory=list,
        description="Later messages from the user, in order, each placed among the calls (a user's "
        "confirmation before a destructive call is one). Importers also put them in context.",
    )

    @model_validator(mode="after")
    def _turns_among_calls(self) -> Trajectory:
        placed = [turn.before_call for turn in self.turns]
        if placed and max(placed) > len(self.calls):
            raise ValueError(f"a turn is placed after call {max(placed)}, but the run made {len(self.calls)} call(s)")
        if placed != sorted(placed):
            raise ValueError("turns must be in order (before_call never decreasing)")
        return self


@dataclass(frozen=True)
class LoadedTrajectory:
    """A trajectory with where it came from (file and line), for messages and relative paths,
    and which snapshot files it may read (``policy``; None: only inside its own folder)."""

    trajectory: Trajectory
    path: Path
    line: int
    policy: SnapshotPolicy | None = None
    raw: bytes | None = field(default=None, repr=False, compare=False)
    """The line as read (None for a trajectory made in memory): the trajectory is its function."""
    name: str | None = field(default=None, compare=False)
    """The file as its suite names it (relative to the suite's folder, POSIX separators), or
    None: ``source`` then names the file as read."""

    @property
    def line_sha256(self) -> str | None:
        """sha256 of the line the trajectory was read from (None when it was not read from one)."""
        return None if self.raw is None else hashlib.sha256(self.raw).hexdigest()

    @property
    def base_dir(self) -> Path:
        return self.path.parent

    @property
    def snapshot_policy(self) -> SnapshotPolicy:
        return self.policy or SnapshotPolicy((self.base_dir,))

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    @property
    def source(self) -> str:
        """file:line as a record keeps it: the suite's name for the file, which compares across
        machines, where there is one."""
        return f"{self.name or self.path}:{self.line}"


def iter_trajectories(path: str | Path, policy: SnapshotPolicy | None = None, *,
                      name: str | None = None) -> Iterator[LoadedTrajectory]:
    """Stream trajectories from a JSON Lines file; errors name the file and line. ``policy``:
    the snapshot files they may read (a suite's), given to each as it is made; ``name``: the
    file as the suite names it (see ``LoadedTrajectory.source``)."""
    path = Path(path)
    for line, trajectory, raw in iter_jsonl_raw(path, Trajectory):
        yield LoadedTrajectory(trajectory, path, line, policy, raw, name)


class WorldState:
    """The world of one trajectory, loaded once and shared by the axes: lazy access to its
    before/after snapshots and its end-state diff."""

    def __init__(self, loaded: LoadedTrajectory):
        self._loaded = loaded
        self._world = loaded.trajectory.world

    @property
    def present(self) -> bool:
        return self._world is not None

    def _require(self):
        if self._world is None:
            raise InputError(
                "the rubric checks the world but the trajectory has no `world` snapshots",
                self._loaded.path,
                self._loaded.line,
            )
        return self._world

    @cached_property
    def before(self) -> Snapshot:
        return load_snapshot(self._require().before, self._loaded.base_dir, policy=self._loaded.snapshot_policy)

    @cached_property
    def after(self) -> Snapshot:
        return load_snapshot(self._require().after, self._loaded.base_dir, policy=self._loaded.snapshot_policy)

    @cached_property
    def diff(self) -> Diff:
        return diff_snapshots(self.before, self.after, keys=self._require().keys or None)
