"""Building real SQLite files for tests."""

from __future__ import annotations

import sqlite3
from pathlib import Path


def make_db(path: Path, *statements: str | tuple[str, tuple]) -> Path:
    """A database at ``path`` after running each statement (SQL, or (SQL, parameters))."""
    conn = sqlite3.connect(path)
    with conn:
        for statement in statements:
            sql, params = statement if isinstance(statement, tuple) else (statement, ())
            conn.execute(sql, params)
    conn.close()
    return path
