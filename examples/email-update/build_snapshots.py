"""Rebuild the example's SQLite snapshots (committed; this script shows how they were made).

Run: python examples/email-update/build_snapshots.py
Each snapshot is a small users database; the "after" files are the worlds the example
trajectories left behind.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

HERE = Path(__file__).resolve().parent / "snapshots"
SCHEMA = """
CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT NOT NULL, email TEXT NOT NULL, plan TEXT NOT NULL);
CREATE TABLE outbox (id INTEGER PRIMARY KEY, to_address TEXT NOT NULL, subject TEXT NOT NULL);
"""
USERS = [
    (1, "Alice Example", "alice.old@example.org", "pro"),
    (2, "Bob Builder", "bob@example.org", "free"),
    (3, "Carol Chen", "carol@example.org", "free"),
]


def build(name: str, users: list[tuple], outbox: list[tuple] = ()) -> None:
    path = HERE / f"{name}.db"
    path.unlink(missing_ok=True)
    with sqlite3.connect(path) as conn:
        conn.executescript(SCHEMA)
        conn.executemany("INSERT INTO users VALUES (?, ?, ?, ?)", users)
        conn.executemany("INSERT INTO outbox VALUES (?, ?, ?)", outbox)
    conn.close()


def with_user(user_id: int, **changes) -> list[tuple]:
    rows = []
    for row in USERS:
        if row[0] == user_id:
            record = dict(zip(("id", "name", "email", "plan"), row)) | changes
            row = tuple(record.values())
        rows.append(row)
    return rows


def main() -> None:
    HERE.mkdir(exist_ok=True)
    build("before", USERS)
    build("before-no-alice", [row for row in USERS if row[0] != 1])
    build("after-ok", with_user(1, email="alice@example.com"))
    build("after-other-field", with_user(1, email="alice@example.com", plan="free"))
    build(
        "after-extra-email",
        with_user(1, email="alice@example.com"),
        [(1, "alice@example.com", "Your email address was changed")],
    )
    build("after-created", USERS + [(4, "Alice Example", "alice@example.com", "free")])
    build("after-bad-arg", with_user(1, email="alice at example.com"))


if __name__ == "__main__":
    main()
