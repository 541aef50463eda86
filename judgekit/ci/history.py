"""The run history: an embedded SQLite file of run records, keyed by suite, run id and the
evaluated project's git commit, with green runs marked.

Each run is a row of ``runs`` (its header and footer as JSON, whether its gate and its
comparison passed), a row per axis in ``run_axes`` (counts and mean), and a row per trajectory
and axis in ``results`` (status, score, what it lost, its judge), so a comparison reads two
runs' rows and never a whole record. Trajectory ids, axis names and judge fingerprints are
stored once each and referenced by number.

A run is **green** when its gate passed and its comparison (if it was compared) did not fail:
a run that regressed never becomes the baseline that hides the regression. Nothing a record
claims is recorded on trust: a record read from a file is measured again from its results first
(``judgekit.run.remeasure``), and refused when its footer disagrees with them. "Last green" is the
green run recorded last (the history's own order), never the run that claims the latest time.

The file is hostile until checked: it must be an SQLite database that judgekit's history
marks as its own (``application_id``), with a schema version this judgekit knows, recorded the
same in ``user_version`` and in ``schema_migrations``; anything else is refused with the reason
and never written to. The schema grows by numbered, named
migrations. Writers (two CI jobs at once) are serialised by SQLite: WAL journal, a busy
timeout, and one ``BEGIN IMMEDIATE`` transaction per run.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import stat
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from judgekit._util.text import redact
from judgekit._util.clock import utc_now
from judgekit.ci.compare import ComparePolicy, Comparison, Noise, compare, pooled_noise
from judgekit.run.rows import FULL_MARKS, AxisRow, RunRows
from judgekit._util.io import strict_json_loads
from judgekit.errors import InputError

DEFAULT_HISTORY = Path(".judgekit/history.sqlite")
APPLICATION_ID = 0x4A4B4854  # "JKHT": what marks a SQLite file as a judgekit history
SQLITE_HEADER = b"SQLite format 3\x00"
BUSY_TIMEOUT_MS = 60_000
_STATUS = {"scored": 0, "unscored": 1, "error": 2}
_STATUS_NAME = {code: name for name, code in _STATUS.items()}
_BATCH = 500


def history_files(path: Path) -> list[Path]:
    """The history file and the files SQLite keeps beside it (WAL, shared memory, journal)."""
    return [path] + [path.with_name(path.name + suffix) for suffix in ("-wal", "-shm", "-journal")]


class AlreadyRecorded(InputError):
    """The run is in the history already."""


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


@dataclass(frozen=True)
class RunInfo:
    """One run in the history, without its rows."""

    run_id: str
    suite: str
    started_at: datetime
    finished_at: datetime
    git_commit: str | None
    git_dirty: bool | None
    ci_build: str | None
    trajectories: int
    gate_passed: bool | None
    compare_passed: bool | None
    green: bool
    axes: dict[str, dict[str, Any]]
    """Axis -> scored, unscored, errors, full_marks, mean_score, advisory."""
    came_in: str = "run"
    """'run': recorded as it ran (``run --record``); 'import': a record file measured again."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id, "suite": self.suite, "started_at": self.started_at.isoformat(),
            "finished_at": self.finished_at.isoformat(), "git_commit": self.git_commit, "git_dirty": self.git_dirty,
            "ci_build": self.ci_build, "trajectories": self.trajectories, "gate_passed": self.gate_passed,
            "compare_passed": self.compare_passed, "green": self.green, "axes": self.axes, "came_in": self.came_in,
        }


def _bool(value: int | None) -> bool | None:
    return None if value is None else bool(value)


class History:
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

    def __enter__(self) -> History:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def migrations(self) -> list[tuple[int, str, str]]:
        """(version, name, applied_at) of each migration applied to this file."""
        return [tuple(row) for row in self._conn.execute("SELECT version, name, applied_at FROM schema_migrations "
                                                        "ORDER BY version")]

    # --- writing ------------------------------------------------------------------------------

    def record(self, record, *, compare_passed: bool | None = None) -> RunInfo:
        """Record a run (one transaction): a ``RunRecord`` made by ``run_suite(keep_rows=True)``,
        recorded with the footer and rows the run made; any other record (a ``RunRecord`` read
        from a file, a stream from ``open_run``, read once) is measured again from its results
        first and refused (InputError) when its footer disagrees with them."""
        from judgekit.run.record import RunRecord
        from judgekit.run.remeasure import remeasure

        if isinstance(record, RunRecord) and record._rows is not None:
            return self._write(record.header, record.footer, record._rows, compare_passed)
        measured = remeasure(record)
        return self._write(measured.header, measured.footer, measured.rows, compare_passed, came_in="import")

    def import_file(self, path: str | Path, *, policy: ComparePolicy | None = None, suite=None
                    ) -> tuple[RunInfo, bool, Comparison | None]:
        """Record the run record at ``path``, measured again from its results (refused when its
        footer disagrees with them) and compared with the suite's last green run under ``policy``
        (default: ``ComparePolicy()``), exactly as ``run --compare`` would: a run that regressed is
        recorded but never green, so a record brought in from elsewhere never lowers the baseline
        unseen. (the run, whether it was new, the comparison: None when there was no baseline or
        the run was there already). ``suite``: the ``LoadedSuite`` it must be a run of (default:
        the suite file it names). A run already in the history is left as it is."""
        from judgekit.run.record import open_run
        from judgekit.run.remeasure import remeasure

        opened = open_run(path)
        try:
            existing = self.find(opened.header.run_id)
            if existing is not None:
                return existing, False, None
            measured = remeasure(opened, loaded=suite)
            found = self.last_green(measured.header.suite)
            comparison = None
            if found is not None:
                comparison = compare(measured.rows, self.rows(found.run_id), policy or ComparePolicy(),
                                     baseline_source=f"last-green ({found.run_id})",
                                     noise=self.noise(measured.header.suite))
            try:
                info = self._write(measured.header, measured.footer, measured.rows,
                                   comparison.passed if comparison is not None else None, came_in="import")
                return info, True, comparison
            except AlreadyRecorded:  # another job recorded it since the look-up
                return self.find(opened.header.run_id), False, None
        finally:
            if hasattr(opened, "close"):
                opened.close()

    def _pk(self, table: str, column: str, value: str, memo: dict[str, int]) -> int:
        pk = memo.get(value)
        if pk is None:
            self._conn.execute(f"INSERT OR IGNORE INTO {table} ({column}) VALUES (?)", (value,))
            pk = memo[value] = self._conn.execute(f"SELECT pk FROM {table} WHERE {column} = ?", (value,)).fetchone()[0]
        return pk

    def _trajectory_pks(self, ids: set[str]) -> dict[str, int]:
        conn = self._conn
        found: dict[str, int] = {}
        ordered = sorted(ids)
        for start in range(0, len(ordered), _BATCH):
            chunk = ordered[start:start + _BATCH]
            conn.executemany("INSERT OR IGNORE INTO trajectory_ids (id) VALUES (?)", ((tid,) for tid in chunk))
            marks = ",".join("?" * len(chunk))
            found.update(conn.execute(f"SELECT id, pk FROM trajectory_ids WHERE id IN ({marks})", chunk))
        return found

    def _write(self, header, footer, rows: RunRows, compare_passed: bool | None, *, came_in: str = "run") -> RunInfo:
        gate_passed = footer.gate_report.passed if footer.gate_report is not None else None
        green = bool(gate_passed) and compare_passed is not False
        rubrics = hashlib.sha256(json.dumps({ref: entry.sha256 for ref, entry in header.rubrics.items()},
                                            sort_keys=True).encode()).hexdigest()
        conn = self._conn
        try:
            with self._transaction():
                if conn.execute("SELECT 1 FROM runs WHERE run_id = ?", (header.run_id,)).fetchone():
                    raise AlreadyRecorded(f"run {header.run_id} is already in the history", self.path)
                cursor = conn.execute(
                    "INSERT INTO runs (run_id, suite, git_commit, git_dirty, ci_build, started_at, finished_at, "
                    "judgekit_version, trajectories, gate_passed, compare_passed, green, rubrics_sha256, header, footer, "
                    "recorded_at, came_in) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (header.run_id, header.suite, header.project.git_commit,
                     None if header.project.git_dirty is None else int(header.project.git_dirty),
                     header.project.ci_build, header.started_at.isoformat(), footer.finished_at.isoformat(),
                     header.judgekit_version, footer.trajectories,
                     None if gate_passed is None else int(gate_passed),
                     None if compare_passed is None else int(compare_passed), int(green), rubrics,
                     redact(header.model_dump_json()), redact(footer.model_dump_json()), utc_now().isoformat(), came_in))
                run_pk = cursor.lastrowid
                trajectory_pks = self._trajectory_pks(rows.ids)
                for name, by_id in rows.rows.items():
                    axis_pk = self._pk("axes", "name", name, self._axis_pks)
                    judge_pks = {fp: self._pk("judges", "fingerprint", fp, self._judge_pks)
                                 for fp in {row.judge for row in by_id.values() if row.judge is not None}}
                    conn.executemany(
                        "INSERT INTO results VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                        ((run_pk, trajectory_pks[row.trajectory_id], axis_pk, _STATUS[row.status], row.score,
                          judge_pks[row.judge] if row.judge is not None else None,
                          redact(json.dumps(row.lost, ensure_ascii=False)) if row.lost else None,
                          row.note and redact(row.note))
                         for row in by_id.values()))
                    scores = [row.score for row in by_id.values() if row.status == "scored"]
                    statuses = [row.status for row in by_id.values()]
                    conn.execute("INSERT INTO run_axes VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                                 (run_pk, axis_pk, len(scores), statuses.count("unscored"), statuses.count("error"),
                                  sum(score >= FULL_MARKS for score in scores),
                                  sum(scores) / len(scores) if scores else None, int(rows.advisory(name))))
        except sqlite3.DatabaseError as exc:
            raise InputError(f"could not record the run: {exc}", self.path) from None
        finally:
            self._axis_pks.clear()  # pks seen inside a transaction that rolled back are not real
            self._judge_pks.clear()
        return self.find(header.run_id)

    def record_safety(self, report) -> str:
        """Record a safety scan (a ``SafetyReport``, its evidence already masked); returns its id."""
        document = redact(report.model_dump_json())
        try:
            with self._transaction():
                if self._conn.execute("SELECT 1 FROM safety_scans WHERE scan_id = ?", (report.scan_id,)).fetchone():
                    raise AlreadyRecorded(f"safety scan {report.scan_id} is already in the history", self.path)
                self._conn.execute(
                    "INSERT INTO safety_scans (scan_id, suite, git_commit, git_dirty, ran_as, started_at, finished_at, "
                    "trajectories, findings, open_findings, stop_ship, document, recorded_at) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (report.scan_id, report.suite, report.project.git_commit,
                     None if report.project.git_dirty is None else int(report.project.git_dirty), report.ran_as,
                     report.started_at.isoformat(), report.finished_at.isoformat(), report.trajectories,
                     len(report.findings), sum(1 for f in report.findings if f.waived_by is None and f.stop_ship),
                     int(report.stop_ship), document, utc_now().isoformat()))
        except sqlite3.DatabaseError as exc:
            raise InputError(f"could not record the safety scan: {exc}", self.path) from None
        return report.scan_id

    def safety_scans(self, *, suite: str | None = None, limit: int | None = 20) -> list[dict[str, Any]]:
        """The newest safety scans first: id, suite, commit, who ran it, counts, stop-ship."""
        sql = ("SELECT scan_id, suite, git_commit, git_dirty, ran_as, started_at, trajectories, findings, "
               "open_findings, stop_ship FROM safety_scans")
        params: list[Any] = []
        if suite is not None:
            sql += " WHERE suite = ?"
            params.append(suite)
        sql += " ORDER BY pk DESC"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(int(limit))
        names = ("scan_id", "suite", "git_commit", "git_dirty", "ran_as", "started_at", "trajectories", "findings",
                 "open_findings", "stop_ship")
        scans = []
        for row in self._query(sql, params):
            scan = dict(zip(names, row))
            if not all(isinstance(scan[k], int) for k in ("trajectories", "findings", "open_findings", "stop_ship")):
                raise self._malformed("a safety scan's counts")
            scan["started_at"] = self._time(scan["started_at"])
            scan["stop_ship"], scan["git_dirty"] = bool(scan["stop_ship"]), _bool(scan["git_dirty"])
            scans.append(scan)
        return scans

    def mark(self, run_id: str, *, compare_passed: bool) -> RunInfo:
        """Set a recorded run's comparison outcome (and so whether it is green)."""
        with self._transaction():
            self._conn.execute("UPDATE runs SET compare_passed = ?, green = (gate_passed = 1 AND ?) WHERE run_id = ?",
                               (int(compare_passed), int(compare_passed), run_id))
        return self.find(run_id)

    def prune(self, *, keep: int | None = None, older_than_days: float | None = None,
              suite: str | None = None) -> int:
        """Remove runs: beyond the ``keep`` recorded last of each suite, or recorded longer ago
        than the given age. The green run recorded last of each suite is always kept (it is the
        baseline)."""
        conn = self._conn
        doomed: set[int] = set()
        suites = [suite] if suite else [s for (s,) in self._query("SELECT DISTINCT suite FROM runs")]
        if suite is not None and not self._query("SELECT 1 FROM runs WHERE suite = ? LIMIT 1", (suite,)):
            raise InputError(f"no run of suite {suite[:200]!r} in the history: nothing to prune", self.path)
        for name in suites:
            runs = self._query("SELECT pk, recorded_at, green FROM runs WHERE suite = ? ORDER BY pk DESC", (name,))
            newest_green = next((pk for pk, _, green in runs if green), None)
            for index, (pk, recorded_at, _) in enumerate(runs):
                if pk == newest_green:
                    continue
                if keep is not None and index >= keep:
                    doomed.add(pk)
                if older_than_days is not None and self._time(recorded_at) < utc_now() - timedelta(days=older_than_days):
                    doomed.add(pk)
        with self._transaction():
            for pk in doomed:
                conn.execute("DELETE FROM results WHERE run_pk = ?", (pk,))
                conn.execute("DELETE FROM run_axes WHERE run_pk = ?", (pk,))
                conn.execute("DELETE FROM runs WHERE pk = ?", (pk,))
            conn.execute("DELETE FROM trajectory_ids WHERE pk NOT IN (SELECT DISTINCT trajectory_pk FROM results)")
        if doomed:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            conn.execute("VACUUM")
        return len(doomed)

    # --- reading ------------------------------------------------------------------------------

    def _query(self, sql: str, params: Iterable[Any] = ()) -> list[tuple]:
        try:
            return self._conn.execute(sql, tuple(params)).fetchall()
        except sqlite3.DatabaseError as exc:
            raise InputError(f"the history cannot be read: {exc}", self.path) from None

    _RUN_COLUMNS = ("pk, run_id, suite, started_at, finished_at, git_commit, git_dirty, ci_build, trajectories, "
                    "gate_passed, compare_passed, green, came_in")

    def _infos(self, rows: list[tuple]) -> list[RunInfo]:
        if not rows:
            return []
        pks = [row[0] for row in rows]
        axes: dict[int, dict[str, dict[str, Any]]] = {pk: {} for pk in pks}
        marks = ",".join("?" * len(pks))
        for run_pk, name, scored, unscored, errors, full, mean, advisory in self._query(
                f"SELECT r.run_pk, a.name, r.scored, r.unscored, r.errors, r.full_marks, r.mean_score, r.advisory "
                f"FROM run_axes r JOIN axes a ON a.pk = r.axis_pk WHERE r.run_pk IN ({marks})", pks):
            axes[run_pk][name] = {"scored": scored, "unscored": unscored, "errors": errors, "full_marks": full,
                                  "mean_score": mean, "advisory": bool(advisory),
                                  "pass_rate": full / scored if scored else None}
        for found in axes.values():
            for name, axis in found.items():
                mean = axis["mean_score"]
                if mean is not None and not (isinstance(mean, float | int) and 0 <= mean <= 1):
                    raise self._malformed(f"run_axes holds a mean score of {str(mean)[:40]} for {name[:60]}")
        return [RunInfo(run_id=run_id, suite=suite, started_at=self._time(started),
                        finished_at=self._time(finished), git_commit=commit, git_dirty=_bool(dirty),
                        ci_build=build, trajectories=n, gate_passed=_bool(gate), compare_passed=_bool(compared),
                        green=bool(green), axes=dict(sorted(axes[pk].items())), came_in=came_in)
                for pk, run_id, suite, started, finished, commit, dirty, build, n, gate, compared, green, came_in in rows]

    def _malformed(self, what: str) -> InputError:
        return InputError(f"the history holds a malformed row ({what}): was it edited? judgekit reads it no "
                          "further", self.path)

    def _time(self, text: Any) -> datetime:
        """A stored timestamp (UTC when it names no zone); a malformed one is InputError."""
        try:
            value = datetime.fromisoformat(text)
        except (TypeError, ValueError):
            raise self._malformed(f"a timestamp {str(text)[:40]!r}") from None
        return value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)

    def _json(self, text: Any, what: str) -> Any:
        try:
            return strict_json_loads(text)
        except (TypeError, ValueError):
            raise self._malformed(f"{what} that is not JSON") from None

    def runs(self, *, suite: str | None = None, limit: int | None = 20, green_only: bool = False) -> list[RunInfo]:
        """Runs, the one recorded last first."""
        where, params = [], []
        if suite is not None:
            where.append("suite = ?")
            params.append(suite)
        if green_only:
            where.append("green = 1")
        sql = f"SELECT {self._RUN_COLUMNS} FROM runs" + (f" WHERE {' AND '.join(where)}" if where else "")
        sql += " ORDER BY pk DESC" + (f" LIMIT {int(limit)}" if limit is not None else "")
        return self._infos(self._query(sql, params))

    def find(self, run_id: str) -> RunInfo | None:
        found = self._infos(self._query(f"SELECT {self._RUN_COLUMNS} FROM runs WHERE run_id = ?", (run_id,)))
        return found[0] if found else None

    def documents(self, run_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """The run's header and footer, as recorded."""
        found = self._query("SELECT header, footer FROM runs WHERE run_id = ?", (run_id,))
        if not found:
            raise InputError(f"no run {run_id!r} in the history", self.path)
        header, footer = self._json(found[0][0], "a header"), self._json(found[0][1], "a footer")
        if not isinstance(header, dict) or not isinstance(footer, dict):
            raise self._malformed("a header or footer that is not an object")
        return header, footer

    def last_green(self, suite: str, *, before: str | None = None) -> RunInfo | None:
        """The green run of ``suite`` recorded last (recorded before run ``before``, when given):
        the history's own order, never the time a record claims."""
        sql = f"SELECT {self._RUN_COLUMNS} FROM runs WHERE suite = ? AND green = 1"
        params: list[Any] = [suite]
        if before is not None:
            sql += " AND pk < (SELECT pk FROM runs WHERE run_id = ?)"
            params += [before]
        found = self._infos(self._query(sql + " ORDER BY pk DESC LIMIT 1", params))
        if found:
            self._check_green(found[0])
        return found[0] if found else None

    def _check_green(self, info: RunInfo) -> None:
        """A run about to be a baseline is green as its stored footer says: its gate passed there,
        and its comparison did not fail (a ``green`` column edited alone is refused)."""
        _, footer = self.documents(info.run_id)
        report = footer.get("gate_report")
        passed = report.get("passed") if isinstance(report, dict) else None
        if passed is not True or info.gate_passed is not True or info.compare_passed is False or not info.green:
            raise self._malformed(f"run {info.run_id[:80]!r} is marked green, but its stored footer's gate "
                                  f"{'passed' if passed is True else 'did not pass'}")

    def rows(self, run_id: str) -> RunRows:
        """A recorded run's rows, for ``compare``."""
        found = self._query("SELECT pk, suite, started_at, git_commit, trajectories, gate_passed, header, footer "
                            "FROM runs WHERE run_id = ?", (run_id,))
        if not found:
            raise InputError(f"no run {run_id!r} in the history", self.path)
        pk, suite, started, commit, n, gate, header, footer = found[0]
        from judgekit.run.record import RunFooter, RunHeader

        try:
            header = RunHeader.model_validate(self._json(header, "a header"))
            footer = RunFooter.model_validate(self._json(footer, "a footer"))
        except ValidationError:
            raise self._malformed(f"the header or footer of run {run_id[:80]!r}") from None
        if header.run_id != run_id or header.suite != suite or footer.trajectories != n:
            raise self._malformed(f"the header or footer of run {run_id[:80]!r}, which names another run")
        rows = RunRows(run_id=run_id, suite=suite, started_at=self._time(started), git_commit=commit,
                       trajectories=n, gate_passed=_bool(gate),
                       judges={seen.fingerprint: dict(seen.axes) for seen in footer.judges},
                       rubrics={ref: entry.sha256 for ref, entry in header.rubrics.items()})
        for tid, axis, status, score, lost, note, judge in self._query(
                "SELECT t.id, a.name, r.status, r.score, r.lost, r.note, j.fingerprint FROM results r "
                "JOIN trajectory_ids t ON t.pk = r.trajectory_pk JOIN axes a ON a.pk = r.axis_pk "
                "LEFT JOIN judges j ON j.pk = r.judge_pk WHERE r.run_pk = ?", (pk,)):
            rows.add(self._row(tid, axis, status, score, lost, note, judge))
        return rows

    def _row(self, tid, axis, status, score, lost, note, judge) -> AxisRow:
        """One stored row, each field checked as the record format checks it."""
        name = _STATUS_NAME.get(status)
        if name is None:
            raise self._malformed(f"a status code {str(status)[:20]}")
        if name == "scored":
            if isinstance(score, bool) or not isinstance(score, float | int) or not 0 <= score <= 1:
                raise self._malformed(f"a score of {str(score)[:40]} for {str(tid)[:80]!r}")
        elif score is not None:
            raise self._malformed(f"a score on a row that is not scored ({str(tid)[:80]!r})")
        parsed: tuple = ()
        if lost is not None:
            items = self._json(lost, "a lost list")
            if not isinstance(items, list) or not all(
                    isinstance(item, list) and len(item) == 2 and all(isinstance(part, str) for part in item)
                    for item in items):
                raise self._malformed(f"a lost list that is not [what, why] pairs ({str(tid)[:80]!r})")
            parsed = tuple((what, why) for what, why in items)
        if not all(isinstance(v, str) for v in (tid, axis)) or not isinstance(note, str | None):
            raise self._malformed("a row whose ids are not text")
        return AxisRow(tid, axis, name, None if score is None else float(score), parsed, note, judge)

    def noise(self, suite: str, *, exclude: str | None = None, limit: int = 200) -> dict[str, Noise]:
        """Per axis, the run-to-run spread of the mean among recent green runs of ``suite`` that
        should agree (one clean commit, one set of rubric hashes): repeated runs, judge axes'
        wobble. Only green runs count, and never the run being compared (``exclude``): a
        regressed run's spread must not excuse the same regression next time. Only runs this
        history recorded as they ran count (``run --record``): an imported record's commit is its
        claim, and a hostile review widened the noise with imported runs until a 69% drop passed."""
        groups: dict[tuple[str, str, str], list[float]] = {}
        for commit, rubrics, name, mean in self._query(
                "SELECT r.git_commit, r.rubrics_sha256, a.name, x.mean_score FROM "
                "(SELECT * FROM runs WHERE suite = ? AND green = 1 AND run_id != ? AND git_commit IS NOT NULL "
                " AND git_dirty = 0 AND came_in = 'run' ORDER BY pk DESC LIMIT ?) r "
                "JOIN run_axes x ON x.run_pk = r.pk JOIN axes a ON a.pk = x.axis_pk WHERE x.mean_score IS NOT NULL",
                (suite, exclude or "", limit)):
            if isinstance(mean, bool) or not isinstance(mean, float | int) or not 0 <= mean <= 1:
                raise self._malformed(f"run_axes holds a mean score of {str(mean)[:40]}")
            groups.setdefault((name, commit, rubrics), []).append(mean)
        by_axis: dict[str, list[list[float]]] = {}
        for (name, _, _), means in groups.items():
            by_axis.setdefault(name, []).append(means)
        found = {name: pooled_noise(lists) for name, lists in by_axis.items()}
        return {name: noise for name, noise in found.items() if noise is not None}


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


def resolve_baseline(spec: str, run: RunRows, history: History | None, *, suite=None) -> tuple[RunRows | None, str]:
    """The baseline ``spec`` names for ``run``: 'last-green' (the suite's green run recorded last
    in the history, this run excluded), a run record file (measured again from its results), or a
    run id in the history. (None, how) when last-green finds none; InputError when a named
    baseline is not there, or a file's footer disagrees with its results. ``suite``: the
    ``LoadedSuite`` a baseline file is measured under (default: the suite file it names)."""
    from judgekit.run.remeasure import remeasured_file

    if spec == "last-green":
        if history is None:
            return None, "last-green (no history)"
        before = run.run_id if history.find(run.run_id) is not None else None
        found = history.last_green(run.suite, before=before)
        if found is None:
            return None, "last-green"
        baseline, source = history.rows(found.run_id), f"last-green ({found.run_id})"
    elif Path(spec).is_file():
        baseline, source = remeasured_file(spec, loaded=suite).rows, f"file {spec}"
    elif history is not None and history.find(spec) is not None:
        baseline, source = history.rows(spec), f"run {spec}"
    else:
        where = f" in the history {history.path}" if history is not None else " (no history given)"
        raise InputError(f"--baseline {spec!r}: no such run record file, and no run with that id{where}")
    if baseline.suite != run.suite:
        raise InputError(f"--baseline {spec!r} is a run of suite {baseline.suite!r}, not {run.suite!r}: "
                         "runs of different suites are not compared")
    if baseline.run_id == run.run_id:
        raise InputError(f"--baseline {spec!r} is the run itself")
    return baseline, source
