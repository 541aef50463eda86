"""Reading a history's rows back: each stored field checked as the record format checks it, so
a row edited by hand is refused (InputError naming it), never read as a result."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from judgekit._util.strict_json import strict_json_loads
from judgekit.ci._history_db import HistoryFile
from judgekit.errors import InputError
from judgekit.run.rows import AxisRow

_STATUS = {"scored": 0, "unscored": 1, "error": 2}
_STATUS_NAME = {code: name for name, code in _STATUS.items()}


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


class RowReader(HistoryFile):
    """The history's checked readers of stored rows, timestamps and JSON."""

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

    def _check_green(self, info: RunInfo) -> None:
        """A run about to be a baseline is green as its stored footer says: its gate passed there,
        and its comparison did not fail (a ``green`` column edited alone is refused)."""
        _, footer = self.documents(info.run_id)
        report = footer.get("gate_report")
        passed = report.get("passed") if isinstance(report, dict) else None
        if passed is not True or info.gate_passed is not True or info.compare_passed is False or not info.green:
            raise self._malformed(f"run {info.run_id[:80]!r} is marked green, but its stored footer's gate "
                                  f"{'passed' if passed is True else 'did not pass'}")

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

