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

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from judgekit.ci._history_db import (
    APPLICATION_ID, BUSY_TIMEOUT_MS, DEFAULT_HISTORY, MIGRATIONS, SCHEMA_VERSION, SQLITE_HEADER, Migration,
    history_files,
)
from judgekit.ci._history_rows import RunInfo, _bool
from judgekit.ci._history_write import AlreadyRecorded, Recorder
from judgekit.ci.compare import Noise, pooled_noise
from judgekit.errors import InputError
from judgekit.run.rows import RunRows

__all__ = [
    "APPLICATION_ID", "BUSY_TIMEOUT_MS", "DEFAULT_HISTORY", "MIGRATIONS", "SCHEMA_VERSION", "SQLITE_HEADER",
    "AlreadyRecorded", "History", "Migration", "RunInfo", "history_files", "resolve_baseline",
]


class History(Recorder):
    """A history file, opened (and created, or migrated) after its checks: ``HistoryFile`` opens
    it, ``Recorder`` writes to it, and the reads below answer from its rows."""

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
