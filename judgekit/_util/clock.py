"""The wall clock: the one place judgekit reads the current time.

Every recorded time is timezone-aware UTC. Code that records a time takes the clock as a
parameter where a test needs to control it (``now: Callable[[], datetime] = utc_now``), so this
module is the default, never something to patch.
"""

from __future__ import annotations

from datetime import UTC, datetime


def utc_now() -> datetime:
    """Now, in UTC, to the microsecond (run records, verdict provenance, approvals, cache pruning)."""
    return datetime.now(UTC)


def utc_now_whole_seconds() -> datetime:
    """Now, in UTC, cut to the whole second: for times people read and write (a label's ``labeled_at``)."""
    return utc_now().replace(microsecond=0)


def as_utc(when: datetime) -> datetime:
    """A time that names no zone is UTC (records and labels brought from elsewhere may name none)."""
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)
