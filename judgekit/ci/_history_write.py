"""Recording into a history: runs (as they ran, or measured again from a record file), safety
scans, a run's comparison outcome, and pruning; each change one ``BEGIN IMMEDIATE`` transaction."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from datetime import timedelta
from pathlib import Path

from judgekit._util.clock import utc_now
from judgekit._util.text import redact
from judgekit.ci._history_rows import _STATUS, RowReader, RunInfo
from judgekit.ci.compare import ComparePolicy, Comparison, compare
from judgekit.errors import InputError
from judgekit.run.rows import FULL_MARKS, RunRows

_BATCH = 500


class AlreadyRecorded(InputError):
    """The run is in the history already."""


class Recorder(RowReader):
    """The writing half of ``History`` (which gives it ``find``, ``last_green``, ``rows`` and
    ``noise``)."""

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

