"""The world of one trajectory: its snapshots and their diff, loaded once and shared by axes."""

from __future__ import annotations

from functools import cached_property

from judgekit.diff import Diff, diff_snapshots
from judgekit.errors import InputError
from judgekit.trajectory import LoadedTrajectory
from judgekit.world import Snapshot, load_snapshot


class WorldState:
    """Lazy access to a trajectory's before/after snapshots and end-state diff."""

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
