"""A suite's inputs as a run reads them: its rubrics checked against the lock they were
pre-registered in, and its trajectories in suite order, each with its rubric, ids unique.

Everything that reads a suite's trajectories (a run's plan, the safety scan, labelling, the
pytest plugin) reads them here, so they all see the same trajectories under the same checks,
each named (``LoadedTrajectory.source``) by its file relative to the suite.
"""

from __future__ import annotations

import sqlite3
from array import array
from collections.abc import Iterator

from judgekit._util.files import relative_to
from judgekit.errors import InputError
from judgekit.rubric.lock import read_lock, verify
from judgekit.rubric.model import Rubric
from judgekit.suite.model import LoadedSuite
from judgekit.trajectory import LoadedTrajectory, iter_trajectories


def check_registration(loaded: LoadedSuite) -> None:
    """With a lock named in the suite, refuse any rubric that is not exactly as pre-registered."""
    if loaded.suite.lock is None:
        return
    lock_path = loaded.resolve(loaded.suite.lock)
    lock = read_lock(lock_path)
    if not lock.rubrics:
        raise InputError("the suite names this lock but it locks no rubric: run `judgekit rubric lock`", lock_path)
    for ref, rubric in loaded.rubrics.items():
        problem = verify(rubric, loaded.rubric_files[ref], lock, lock_path)
        if problem is not None:
            raise InputError(problem.message, problem.path)


class SeenIds:
    """Trajectory ids seen so far, kept as 64-bit hashes, never as the ids. ``add`` says whether
    the hash was there already; a repeat is then confirmed or ruled out (a collision, about 1 in
    10^7 at a million ids) by reading the files again.

    The first ``memory_ids`` hashes live in one open-addressing table (at most 16 bytes an id,
    no object per id). Past that they move to a private temporary SQLite table on disk, read
    through a page cache of ``CACHE_KB``: a run of millions holds the same few megabytes as a
    run of a hundred thousand (about 3 us an id more, once there)."""

    MEMORY_IDS = 2**17
    CACHE_KB = 2048

    def __init__(self, capacity: int = 1024, *, memory_ids: int | None = None):
        self._table = array("q", bytes(8 * capacity))
        self._mask = capacity - 1
        self._count = 0
        self._memory_ids = self.MEMORY_IDS if memory_ids is None else memory_ids
        self._db: sqlite3.Connection | None = None

    def add(self, tid: str) -> bool:
        digest = hash(tid) or 1  # 0 marks an empty slot
        if self._db is not None:
            changes = self._db.total_changes
            self._db.execute("INSERT OR IGNORE INTO seen VALUES (?)", (digest,))
            return self._db.total_changes == changes
        table, mask = self._table, self._mask
        slot = digest & mask
        while (held := table[slot]) != 0:
            if held == digest:
                return True
            slot = (slot + 1) & mask
        table[slot] = digest
        self._count += 1
        if self._count >= self._memory_ids:
            self._spill()
        elif self._count * 10 > len(table) * 7:
            self._grow()
        return False

    def close(self) -> None:
        """Let the temporary table go (its file is deleted with the connection)."""
        if self._db is not None:
            self._db.close()
            self._db = None

    def _grow(self) -> None:
        old = self._table
        self._table = array("q", bytes(16 * len(old)))
        self._mask = len(self._table) - 1
        table, mask = self._table, self._mask
        for digest in old:
            if digest:
                slot = digest & mask
                while table[slot] != 0:
                    slot = (slot + 1) & mask
                table[slot] = digest

    def _spill(self) -> None:
        # "" names a private temporary database: on disk, deleted when closed. Nothing here
        # needs to survive a crash, so no journal and no syncing.
        db = sqlite3.connect("", isolation_level=None, check_same_thread=False)
        for pragma in (f"cache_size=-{self.CACHE_KB}", "journal_mode=OFF", "synchronous=OFF"):
            db.execute(f"PRAGMA {pragma}")
        db.execute("CREATE TABLE seen(h INTEGER PRIMARY KEY)")
        db.execute("BEGIN")  # one transaction for the table's life: never committed, never synced
        db.executemany("INSERT INTO seen VALUES (?)", ((d,) for d in self._table if d))
        self._db, self._table, self._mask = db, array("q"), 0


def iter_trajectories_of(loaded: LoadedSuite) -> Iterator[tuple[Rubric, LoadedTrajectory]]:
    """Every trajectory of the suite with its rubric, in suite order; ids must be unique.

    Each carries the suite's snapshot policy: its snapshot files are read only from the
    suite's ``snapshots.roots``. Ids are remembered by hash (``SeenIds``): on a hash already
    seen the files are read again up to here to tell a real repeat (an error naming both
    places) from a collision.
    """
    seen = SeenIds()
    policy = loaded.snapshot_policy()
    try:
        for entry in loaded.suite.trajectories:
            rubric = loaded.rubric_for(entry.rubric)
            path = loaded.resolve(entry.file)
            for item in iter_trajectories(path, policy=policy, name=relative_to(path, loaded.base_dir)):
                tid = item.trajectory.id
                if seen.add(tid) and (first := _first_use(loaded, tid, item)) is not None:
                    raise InputError(f"trajectory id {tid!r} already used at {first}", item.path, item.line)
                yield rubric, item
    finally:
        seen.close()


def _first_use(loaded: LoadedSuite, tid: str, here: LoadedTrajectory) -> str | None:
    """Where ``tid`` was first used before ``here``, or None (a hash collision)."""
    for entry in loaded.suite.trajectories:
        for item in iter_trajectories(loaded.resolve(entry.file)):
            if item.path == here.path and item.line == here.line:
                return None
            if item.trajectory.id == tid:
                return item.where
    return None


