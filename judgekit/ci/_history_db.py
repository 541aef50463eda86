"""The history file itself: what marks it as judgekit's, its numbered migrations, and the
checks made before SQLite opens it or judgekit writes to it (``judgekit.ci.history`` says what a
history holds).

``HistoryFile`` opens a history after its checks (creating or migrating it) and gives the one
transaction and query helpers the reading and recording parts build on."""

from __future__ import annotations

import os
import sqlite3
import stat
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Self

from judgekit._util.clock import utc_now
from judgekit.errors import InputError

DEFAULT_HISTORY = Path(".judgekit/history.sqlite")
APPLICATION_ID = 0x4A4B4854  # "JKHT": what marks a SQLite file as a judgekit history
SQLITE_HEADER = b"SQLite format 3\x00"
BUSY_TIMEOUT_MS = 60_000


def history_files(path: Path) -> list[Path]:
    """The history file and the files SQLite keeps beside it (WAL, shared memory, journal)."""
    return [path] + [path.with_name(path.name + suffix) for suffix in ("-wal", "-shm", "-journal")]


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "runs, their axes and per-trajectory rows", """
        CREATE TABLE schema_migrations (
            version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL);
        CREATE TABLE runs (
            pk INTEGER PRIMARY KEY,
            run_id TEXT NOT NULL UNIQUE,
            suite TEXT NOT NULL,
            git_commit TEXT,
            git_dirty INTEGER,
            ci_build TEXT,
            started_at TEXT NOT NULL,
            finished_at TEXT NOT NULL,
            judgekit_version TEXT NOT NULL,
            trajectories INTEGER NOT NULL,
            gate_passed INTEGER,
            compare_passed INTEGER,
            green INTEGER NOT NULL,
            rubrics_sha256 TEXT NOT NULL,
            header TEXT NOT NULL,
            footer TEXT NOT NULL,
            recorded_at TEXT NOT NULL);
        CREATE INDEX runs_by_suite ON runs (suite, started_at);
        CREATE INDEX runs_by_commit ON runs (suite, git_commit);
        CREATE TABLE axes (pk INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
        CREATE TABLE trajectory_ids (pk INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE);
        CREATE TABLE judges (pk INTEGER PRIMARY KEY, fingerprint TEXT NOT NULL UNIQUE);
        CREATE TABLE run_axes (
            run_pk INTEGER NOT NULL, axis_pk INTEGER NOT NULL,
            scored INTEGER NOT NULL, unscored INTEGER NOT NULL, errors INTEGER NOT NULL,
            full_marks INTEGER NOT NULL, mean_score REAL, advisory INTEGER NOT NULL,
            PRIMARY KEY (run_pk, axis_pk)) WITHOUT ROWID;
        CREATE TABLE results (
            run_pk INTEGER NOT NULL, trajectory_pk INTEGER NOT NULL, axis_pk INTEGER NOT NULL,
            status INTEGER NOT NULL, score REAL, judge_pk INTEGER, lost TEXT, note TEXT,
            PRIMARY KEY (run_pk, trajectory_pk, axis_pk)) WITHOUT ROWID;
    """),
    Migration(2, "safety scans", """
        CREATE TABLE safety_scans (
            pk INTEGER PRIMARY KEY,
            scan_id TEXT NOT NULL UNIQUE,
            suite TEXT NOT NULL,
            git_commit TEXT,
            git_dirty INTEGER,
            ran_as TEXT NOT NULL,
            started_at TEXT NOT NULL,
            finished_at TEXT NOT NULL,
            trajectories INTEGER NOT NULL,
            findings INTEGER NOT NULL,
            open_findings INTEGER NOT NULL,
            stop_ship INTEGER NOT NULL,
            document TEXT NOT NULL,
            recorded_at TEXT NOT NULL);
        CREATE INDEX safety_scans_by_suite ON safety_scans (suite, started_at);
    """),
    Migration(3, "how each run came in", """
        ALTER TABLE runs ADD COLUMN came_in TEXT NOT NULL DEFAULT 'run' CHECK (came_in IN ('run', 'import'));
    """),
)
SCHEMA_VERSION = MIGRATIONS[-1].version


class HistoryFile:
    """A history file, opened (and created, or migrated) after its checks."""

    def __init__(self, path: str | Path = DEFAULT_HISTORY, *, create: bool = True):
        self.path = Path(path)
        existed = self._check_file(create)
        if not existed:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None,
                                         check_same_thread=False)
        except sqlite3.Error as exc:
            raise InputError(f"cannot open the history: {exc}", self.path) from None
        try:
            self._conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            self._migrate()
            self._conn.execute("PRAGMA journal_mode = WAL")
            self._conn.execute("PRAGMA synchronous = NORMAL")
        except sqlite3.DatabaseError as exc:
            self._conn.close()
            raise InputError(f"not a readable judgekit history: {exc}; judgekit never writes over it", self.path) from None
        except BaseException:
            self._conn.close()
            raise
        self._axis_pks: dict[str, int] = {}
        self._judge_pks: dict[str, int] = {}

    # --- opening ------------------------------------------------------------------------------

    def _check_file(self, create: bool) -> bool:
        """Whether the file exists; InputError for anything but a regular file holding SQLite
        (or nothing), and for odd files beside it, before SQLite opens any of them."""
        try:
            info = os.lstat(self.path)
        except FileNotFoundError:
            if not create:
                raise InputError("no history here (nothing recorded yet)", self.path) from None
            info = None
        except OSError as exc:
            raise InputError(f"cannot read the history: {exc.strerror}", self.path) from None
        if info is not None and (stat.S_ISLNK(info.st_mode) or not stat.S_ISREG(info.st_mode)):
            raise InputError("the history is not a regular file (a link, a folder or a device): judgekit "
                             "never writes through it", self.path)
        for side in history_files(self.path)[1:]:  # SQLite opens (and may delete) these itself
            try:
                side_info = os.lstat(side)
            except FileNotFoundError:
                continue
            if not stat.S_ISREG(side_info.st_mode):
                raise InputError(f"{side.name} beside the history is not a regular file: refused", self.path)
            if info is None:
                raise InputError(f"{side.name} lies beside a history that does not exist: whose is it? Remove it "
                                 "or pass another --history", self.path)
        if info is None:
            return False
        if info.st_size:
            with self.path.open("rb") as handle:
                head = handle.read(100)
            if not head.startswith(SQLITE_HEADER):
                raise InputError("not a judgekit history (not an SQLite database): judgekit never writes over "
                                 "it; move it away or pass another --history", self.path)
            if len(head) < 100:
                raise InputError("the history is truncated (shorter than an SQLite header)", self.path)
        return True

    def _migrate(self) -> None:
        conn = self._conn
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if app_id != APPLICATION_ID:
            tables = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
            if tables or app_id:
                raise InputError("an SQLite database, but not a judgekit history (another program's file): judgekit "
                                 "never writes over it; move it away or pass another --history", self.path)
        if version > SCHEMA_VERSION:
            raise InputError(f"written by a newer judgekit (history schema {version}; this one knows up to "
                             f"{SCHEMA_VERSION}): upgrade judgekit to read it", self.path)
        if app_id == APPLICATION_ID:
            self._check_migrations(version)
            self._check_schema(version)
        if version == SCHEMA_VERSION and app_id == APPLICATION_ID:
            return
        with self._transaction():
            version = conn.execute("PRAGMA user_version").fetchone()[0]  # another writer may have migrated it
            for migration in MIGRATIONS:
                if migration.version <= version:
                    continue
                for statement in _statements(migration.sql):
                    conn.execute(statement)
                conn.execute("INSERT INTO schema_migrations VALUES (?, ?, ?)",
                             (migration.version, migration.name, utc_now().isoformat()))
                conn.execute(f"PRAGMA user_version = {migration.version}")
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")

    def _check_migrations(self, version: int) -> None:
        """The migrations the file says it has are exactly those ``user_version`` counts, by the
        names this judgekit gives them: a file claiming a newer schema in one place is never written."""
        try:
            applied = self._conn.execute("SELECT version, name FROM schema_migrations ORDER BY version").fetchall()
        except sqlite3.DatabaseError:
            applied = None
        expected = [(m.version, m.name) for m in MIGRATIONS if m.version <= version]
        if applied != expected:
            newest = max((v for v, _ in applied if isinstance(v, int)), default=0) if applied else 0
            if newest > SCHEMA_VERSION:
                raise InputError(f"written by a newer judgekit (schema_migrations names version {newest}; this one knows "
                                 f"up to {SCHEMA_VERSION}): upgrade judgekit to read it", self.path)
            raise InputError(f"the history's schema_migrations does not match its user_version {version} (was it "
                             "edited?): judgekit never writes to it", self.path)

    def _check_schema(self, version: int) -> None:
        """The file holds exactly the tables and indexes its migrations make, as they make them:
        a trigger, a view or a table made otherwise could change what is recorded (a trigger
        marking every run green) or read, so judgekit never writes to such a file."""
        found = self._conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall()
        if set(found) != _schema_of(version):
            extra = sorted(f"{kind} {name}" for kind, name, _, _ in set(found) - _schema_of(version))
            raise InputError("the history holds schema objects its migrations do not make"
                             + (f" ({', '.join(extra[:3])[:200]})" if extra else " (a table or index changed)")
                             + ": was it edited? judgekit never writes to it", self.path)

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def migrations(self) -> list[tuple[int, str, str]]:
        """(version, name, applied_at) of each migration applied to this file."""
        return [tuple(row) for row in self._conn.execute("SELECT version, name, applied_at FROM schema_migrations "
                                                        "ORDER BY version")]

    def _query(self, sql: str, params: Iterable[Any] = ()) -> list[tuple]:
        try:
            return self._conn.execute(sql, tuple(params)).fetchall()
        except sqlite3.DatabaseError as exc:
            raise InputError(f"the history cannot be read: {exc}", self.path) from None


def _statements(sql: str) -> list[str]:
    return [part.strip() for part in sql.split(";") if part.strip()]


@cache
def _schema_of(version: int) -> frozenset[tuple]:
    """(type, name, table, sql) of every schema object the migrations up to ``version`` make."""
    conn = sqlite3.connect(":memory:")
    try:
        for migration in MIGRATIONS:
            if migration.version <= version:
                for statement in _statements(migration.sql):
                    conn.execute(statement)
        return frozenset(conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall())
    finally:
        conn.close()
