"""Hostile snapshots: paths that leave the suite, files that are not files, damaged or live
SQLite databases, and read-only checkouts.

Every case builds real files (real SQLite databases, FIFOs, symlinks) and states its exact
outcome. Refusals go through the real CLI (`judgekit run SUITE --no-cache --format jsonl`):
exit 2, the axis `error` with a message that starts with the file it names, never pass or fail.
Each test runs under an alarm, so a regression that blocks (a FIFO opened for reading) fails
instead of hanging; cases that could exhaust memory on a regression (/dev/zero) run in a child
process with a memory limit.
"""

from __future__ import annotations

import gc
import json
import os
import random
import resource
import select
import shutil
import signal
import socket
import sqlite3
import struct
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from judgekit.cli import main
from judgekit.errors import InputError
from judgekit.world.snapshot import (
    SnapshotPolicy,
    SnapshotSpec,
    SqliteSnapshot,
    load_snapshot,
    snapshot_from_path,
)

ALARM_S = 10
PROCESS_ALARM_S = 90
"""Tests that start ``judgekit`` processes: three interpreter starts on a loaded machine."""
PAGE = 4096


@pytest.fixture(autouse=True)
def private_tmp(tmp_path, monkeypatch) -> Path:
    """Private copies go to a folder of this test, so the test can see them made and removed."""
    folder = tmp_path / "private-tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


# --- real databases -------------------------------------------------------------------------------

USERS = "CREATE TABLE users (id INTEGER PRIMARY KEY, email TEXT NOT NULL)"
UNCOMMITTED = "changed-but-never-committed"


def email(i: int) -> str:
    return f"u{i}@x.com".ljust(300, "~")  # wide rows: several pages, and a journal that spills


def make_db(path: Path, ids, *, journal: str = "DELETE") -> Path:
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA journal_mode={journal}")
    with conn:
        conn.execute(USERS)
        conn.executemany("INSERT INTO users VALUES (?, ?)", [(i, email(i)) for i in ids])
    conn.close()
    return path


def immutable_rows(path: Path) -> dict[int, str]:
    """What the main file alone holds (what `immutable=1` without a replay would read)."""
    conn = sqlite3.connect(path.resolve().as_uri() + "?mode=ro&immutable=1", uri=True)
    try:
        return dict(conn.execute("SELECT id, email FROM users ORDER BY id"))
    finally:
        conn.close()


def wal_db(path: Path, committed, in_wal, live: Path) -> Path:
    """A WAL database whose ``in_wal`` rows are committed but not checkpointed: copied, with its
    -wal, while the writer still holds it open (as a snapshot of a live sandbox would be)."""
    live.mkdir(exist_ok=True)
    source = live / f"{path.name}.live"
    conn = sqlite3.connect(source, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA wal_autocheckpoint=0")
    conn.execute(USERS)
    conn.executemany("INSERT INTO users VALUES (?, ?)", [(i, email(i)) for i in committed])
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.executemany("INSERT INTO users VALUES (?, ?)", [(i, email(i)) for i in in_wal])
    shutil.copyfile(source, path)
    shutil.copyfile(f"{source}-wal", f"{path}-wal")
    conn.close()
    assert Path(f"{path}-wal").stat().st_size > 0
    assert sorted(immutable_rows(path)) == sorted(committed)  # the WAL rows really are only in the WAL
    return path


def hot_journal_db(path: Path, committed, live: Path) -> Path:
    """A database caught mid-transaction: uncommitted changes already spilled into the file,
    the originals in a hot -journal beside it (a snapshot taken during a write, or a crash)."""
    live.mkdir(exist_ok=True)
    source = make_db(live / f"{path.name}.live", committed)
    before_bytes = source.read_bytes()
    conn = sqlite3.connect(source, isolation_level=None)
    conn.execute("PRAGMA cache_size=2")  # spill changed pages into the file before commit
    conn.execute("BEGIN")
    conn.execute("UPDATE users SET email = ?", (UNCOMMITTED,))
    conn.execute("INSERT INTO users VALUES (9999, 'phantom')")
    shutil.copyfile(source, path)
    shutil.copyfile(f"{source}-journal", f"{path}-journal")
    conn.execute("ROLLBACK")
    conn.close()
    assert path.read_bytes() != before_bytes, "the uncommitted change did not reach the file"
    # Read without its journal, the file shows the change that was never committed.
    assert UNCOMMITTED in immutable_rows(path).values()
    return path


def truncated(path: Path, cut: Callable[[int], int], ids=range(1, 101)) -> Path:
    make_db(path, ids)
    data = path.read_bytes()
    path.write_bytes(data[: cut(len(data))])
    return path


def legacy_header(data: bytes) -> bytes:
    """As written by SQLite before 3.7.0: the in-header page count is not valid (offset 92 != 24)."""
    return data[:92] + struct.pack(">I", struct.unpack_from(">I", data, 24)[0] + 1) + data[96:]


def garbage_page(path: Path, page: int) -> Path:
    make_db(path, range(1, 201))
    data = bytearray(path.read_bytes())
    data[(page - 1) * PAGE : page * PAGE] = random.Random(page).randbytes(PAGE)
    path.write_bytes(bytes(data))
    return path


SUPER_JOURNAL_MAGIC = bytes.fromhex("d9d505f920a163d7")


def naming_super_journal(journal: Path, victim: Path) -> None:
    """Append the record a multi-database commit leaves: the name of its super-journal."""
    name = os.fsencode(victim)
    record = struct.pack(">I", 0x40000000 // PAGE + 1) + name + struct.pack(">II", len(name), sum(name)) + SUPER_JOURNAL_MAGIC
    with open(journal, "ab") as handle:
        handle.write(record)


# --- suites ---------------------------------------------------------------------------------------

RUBRIC = """\
id: hostile
version: 1.0.0
registered: 2024-05-01
task_success:
  guide: User 2 is added; nothing else in the users table changes.
  preconditions:
    - check: exists
      collection: users
      where: {id: 1}
  postconditions:
    - check: exists
      collection: users
      where: {id: 2}
  side_effects:
    allow: [users/2]
"""


def write_suite(folder: Path, world: dict, settings: str = "") -> Path:
    """A suite of one trajectory with ``world`` in ``folder``; ``before.db`` is there already."""
    (folder / "rubrics").mkdir(exist_ok=True)
    (folder / "rubrics" / "hostile.yaml").write_text(RUBRIC, encoding="utf-8")
    record = {"id": "t1", "prompt": "Add user 2", "output": "Done.", "world": world}
    (folder / "runs.jsonl").write_text(json.dumps(record) + "\n", encoding="utf-8")
    suite = "name: hostile\nrubrics: [rubrics]\ntrajectories:\n  - file: runs.jsonl\n    rubric: hostile\n" + settings
    (folder / "suite.yaml").write_text(suite, encoding="utf-8")
    return folder / "suite.yaml"


def run_suite(suite: Path):
    result = CliRunner().invoke(main, ["run", str(suite), "--no-cache", "--format", "jsonl"])
    assert "Traceback" not in result.output
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    return result, lines


def listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.fixture
def tree(tmp_path) -> tuple[Path, Path]:
    """(suite folder, a folder beside it that is outside the suite's tree)."""
    suite, outside = tmp_path / "suite", tmp_path / "outside"
    suite.mkdir()
    outside.mkdir()
    make_db(suite / "before.db", [1])
    return suite, outside


# --- refused, through `judgekit run` --------------------------------------------------------------
# Each builder makes the hostile file(s) and returns (after spec, the path the error must start
# with, a fragment of the reason, extra suite settings). The secret never reaches any output.

SECRET = "s3cr3t-do-not-leak"


def absolute_path_outside(suite: Path, outside: Path):
    (outside / "secret.json").write_text(json.dumps({"users": [SECRET]}), encoding="utf-8")
    target = str(outside / "secret.json")
    return {"json_file": target}, target, f"resolves to {outside.resolve() / 'secret.json'}, outside", ""


def dotdot_escape(suite: Path, outside: Path):
    make_db(outside / "other.db", [1, 2])
    return {"sqlite": "../outside/other.db"}, f"{suite}/../outside/other.db", "outside the folders snapshots may be read from", ""


def symlink_leaving_the_tree(suite: Path, outside: Path):
    make_db(outside / "other.db", [1, 2])
    (suite / "link.db").symlink_to(outside / "other.db")
    return {"sqlite": "link.db"}, f"{suite}/link.db", f"resolves to {outside.resolve() / 'other.db'}, outside", ""


def symlinked_folder_leaving_the_tree(suite: Path, outside: Path):
    make_db(outside / "other.db", [1, 2])
    (suite / "worlds").symlink_to(outside, target_is_directory=True)
    return {"sqlite": "worlds/other.db"}, f"{suite}/worlds/other.db", "outside the folders snapshots may be read from", ""


def wal_sidecar_symlink_leaving_the_tree(suite: Path, outside: Path):
    wal_db(outside / "w.db", [1], [2], outside / "live")
    shutil.copyfile(outside / "w.db", suite / "w.db")
    (suite / "w.db-wal").symlink_to(outside / "w.db-wal")
    return {"sqlite": "w.db"}, f"{suite.resolve()}/w.db-wal", "outside the folders snapshots may be read from", ""


def fifo(suite: Path, outside: Path):
    os.mkfifo(suite / "pipe.json")
    return {"json_file": "pipe.json"}, f"{suite}/pipe.json", "is a FIFO (named pipe), not a regular file", ""


def fifo_as_sqlite(suite: Path, outside: Path):
    os.mkfifo(suite / "pipe.db")
    return {"sqlite": "pipe.db"}, f"{suite}/pipe.db", "is a FIFO (named pipe), not a regular file", ""


def unix_socket(suite: Path, outside: Path):
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(suite / "sock.db"))
    server.close()  # the socket file stays
    return {"sqlite": "sock.db"}, f"{suite}/sock.db", "is a socket, not a regular file", ""


def folder(suite: Path, outside: Path):
    (suite / "worlds").mkdir()
    return {"json_file": "worlds"}, f"{suite}/worlds", "is a folder, expected a JSON document", ""


def symlink_loop(suite: Path, outside: Path):
    (suite / "loop.db").symlink_to("loop.db")
    return {"sqlite": "loop.db"}, f"{suite}/loop.db", "cannot read: Too many levels of symbolic links", ""


def nul_in_path(suite: Path, outside: Path):
    return {"json_file": "w\u0000.json"}, f"{suite}/w\u0000.json", "the snapshot path holds a NUL character", ""


def oversize_file(suite: Path, outside: Path):
    make_db(suite / "big.db", range(1, 50))
    return {"sqlite": "big.db"}, f"{suite}/big.db", "over the 8,192-byte limit for a snapshot file; raise `snapshots: max_bytes:`", "snapshots:\n  max_bytes: 8192\n"


def oversize_wal_sidecar(suite: Path, outside: Path):
    wal_db(suite / "w.db", [1], range(2, 200), outside / "live")
    size = (suite / "w.db").stat().st_size
    return {"sqlite": "w.db"}, f"{suite.resolve()}/w.db-wal", "-byte limit for a snapshot file", f"snapshots:\n  max_bytes: {size}\n"


def truncated_mid_header(suite: Path, outside: Path):
    truncated(suite / "cut.db", lambda n: 50)
    return {"sqlite": "cut.db"}, f"{suite}/cut.db", "truncated: 50 bytes, shorter than the 100-byte header", ""


def truncated_to_one_page(suite: Path, outside: Path):
    truncated(suite / "cut.db", lambda n: PAGE)
    return {"sqlite": "cut.db"}, f"{suite}/cut.db", "truncated or damaged: the header says", ""


def truncated_mid_page(suite: Path, outside: Path):
    truncated(suite / "cut.db", lambda n: n // 2 + 123)
    return {"sqlite": "cut.db"}, f"{suite}/cut.db", "truncated or damaged: the header says", ""


def truncated_last_page(suite: Path, outside: Path):
    truncated(suite / "cut.db", lambda n: n - PAGE)
    return {"sqlite": "cut.db"}, f"{suite}/cut.db", "truncated or damaged: the header says", ""


def truncated_by_one_byte(suite: Path, outside: Path):
    truncated(suite / "cut.db", lambda n: n - 1)
    return {"sqlite": "cut.db"}, f"{suite}/cut.db", "truncated or damaged: the header says", ""


def grown_with_garbage(suite: Path, outside: Path):
    path = make_db(suite / "grown.db", range(1, 20))
    path.write_bytes(path.read_bytes() + random.Random(1).randbytes(PAGE))
    return {"sqlite": "grown.db"}, f"{suite}/grown.db", "truncated or damaged: the header says", ""


def truncated_legacy_header(suite: Path, outside: Path):
    # No valid in-header size to compare with: quick_check finds the pages that are gone.
    path = make_db(suite / "old.db", range(1, 101))
    data = legacy_header(path.read_bytes())
    path.write_bytes(data[: 3 * PAGE])
    return {"sqlite": "old.db"}, f"{suite}/old.db", "damaged (PRAGMA quick_check:", ""


def truncated_legacy_header_mid_page(suite: Path, outside: Path):
    path = make_db(suite / "old.db", range(1, 101))
    path.write_bytes(legacy_header(path.read_bytes())[: 3 * PAGE + 7])
    return {"sqlite": "old.db"}, f"{suite}/old.db", "truncated: 12,295 bytes is not a whole number of 4096-byte pages", ""


def garbage_leaf_page(suite: Path, outside: Path):
    garbage_page(suite / "bad.db", 5)
    return {"sqlite": "bad.db"}, f"{suite}/bad.db", "cannot read SQLite database: damaged", ""


def garbage_root_page(suite: Path, outside: Path):
    garbage_page(suite / "bad.db", 2)
    return {"sqlite": "bad.db"}, f"{suite}/bad.db", "cannot read SQLite database: damaged", ""


def bad_page_size(suite: Path, outside: Path):
    path = make_db(suite / "bad.db", [1, 2])
    data = path.read_bytes()
    path.write_bytes(data[:16] + struct.pack(">H", 1000) + data[18:])
    return {"sqlite": "bad.db"}, f"{suite}/bad.db", "damaged header: page size 1000 is not a power of two", ""


def json_given_as_sqlite(suite: Path, outside: Path):
    (suite / "w.db").write_text(json.dumps({"users": [{"id": 1}, {"id": 2}]}), encoding="utf-8")
    return {"sqlite": "w.db"}, f"{suite}/w.db", "not a SQLite database (it does not start with the 'SQLite format 3' header)", ""


def sqlite_given_as_json(suite: Path, outside: Path):
    make_db(suite / "w.json", [1, 2])
    return {"json_file": "w.json"}, f"{suite}/w.json", "not UTF-8 text, expected a JSON document", ""


def journal_naming_a_super_journal(suite: Path, outside: Path):
    victim = outside / "victim.txt"
    victim.write_text("precious\n", encoding="utf-8")
    hot_journal_db(suite / "w.db", [1, *range(2, 200)], outside / "live")
    naming_super_journal(suite / "w.db-journal", victim)
    return {"sqlite": "w.db"}, f"{suite}/w.db", "its -journal names a super-journal", ""


REFUSED = [
    pytest.param(absolute_path_outside, id="absolute_path_outside_the_suite"),
    pytest.param(dotdot_escape, id="dotdot_escape"),
    pytest.param(symlink_leaving_the_tree, id="symlink_leaving_the_tree"),
    pytest.param(symlinked_folder_leaving_the_tree, id="symlinked_folder_leaving_the_tree"),
    pytest.param(wal_sidecar_symlink_leaving_the_tree, id="wal_sidecar_symlink_leaving_the_tree"),
    pytest.param(fifo, id="fifo_as_json"),
    pytest.param(fifo_as_sqlite, id="fifo_as_sqlite"),
    pytest.param(unix_socket, id="unix_socket"),
    pytest.param(folder, id="folder"),
    pytest.param(symlink_loop, id="symlink_loop"),
    pytest.param(nul_in_path, id="nul_in_path"),
    pytest.param(oversize_file, id="oversize_file"),
    pytest.param(oversize_wal_sidecar, id="oversize_wal_sidecar"),
    pytest.param(truncated_mid_header, id="truncated_mid_header"),
    pytest.param(truncated_to_one_page, id="truncated_to_one_page"),
    pytest.param(truncated_mid_page, id="truncated_mid_page"),
    pytest.param(truncated_last_page, id="truncated_last_page"),
    pytest.param(truncated_by_one_byte, id="truncated_by_one_byte"),
    pytest.param(grown_with_garbage, id="grown_with_a_garbage_page"),
    pytest.param(truncated_legacy_header, id="truncated_legacy_header_caught_by_quick_check"),
    pytest.param(truncated_legacy_header_mid_page, id="truncated_legacy_header_mid_page"),
    pytest.param(garbage_leaf_page, id="garbage_leaf_page"),
    pytest.param(garbage_root_page, id="garbage_root_page"),
    pytest.param(bad_page_size, id="bad_page_size"),
    pytest.param(json_given_as_sqlite, id="json_given_as_sqlite"),
    pytest.param(sqlite_given_as_json, id="sqlite_given_as_json"),
    pytest.param(journal_naming_a_super_journal, id="journal_naming_a_super_journal"),
]


@pytest.mark.parametrize("build", REFUSED)
def test_hostile_snapshot_is_that_axis_error_and_exit_2(tree, private_tmp, build):
    suite, outside = tree
    after, named, reason, settings = build(suite, outside)
    before = listing(suite), listing(outside)
    result, lines = run_suite(write_suite(suite, {"before": {"sqlite": "before.db"}, "after": after}, settings))
    assert result.exit_code == 2, result.output
    (line,) = lines
    axis = line["axes"]["task_success"]
    assert (axis["status"], axis["passed"], axis["score"]) == ("error", None, None)
    assert axis["error"].startswith(f"{named}: "), axis["error"]
    assert reason in axis["error"]
    # The terminal line says the same (control characters, such as a NUL, escaped there).
    assert "judgekit: error: t1 task_success: " in result.stderr and reason in result.stderr
    assert SECRET not in result.output
    # Nothing was written beside the snapshots, nothing outside was removed, no copy is left.
    assert (listing(suite), listing(outside)) == (
        sorted({*before[0], "rubrics", "rubrics/hostile.yaml", "runs.jsonl", "suite.yaml"}),
        before[1],
    )
    gc.collect()
    assert listing(private_tmp) == []


def test_a_super_journal_named_by_a_hostile_journal_is_never_deleted(tree):
    # Rolling the journal back would make SQLite delete the file it names (checked: it does).
    suite, outside = tree
    journal_naming_a_super_journal(suite, outside)
    with pytest.raises(InputError, match="names a super-journal"):
        SqliteSnapshot(suite / "w.db")
    assert (outside / "victim.txt").read_text(encoding="utf-8") == "precious\n"


def test_refused_snapshot_never_reaches_the_judge_prompt(tree):
    suite, outside = tree
    (outside / "secret.json").write_text(json.dumps({"users": [{"id": 2, "token": SECRET}]}), encoding="utf-8")
    (suite / "world.json").symlink_to(outside / "secret.json")
    (suite / "before.json").write_text(json.dumps({"users": [{"id": 1}]}), encoding="utf-8")
    path = write_suite(suite, {"before": {"json_file": "before.json"}, "after": {"json_file": "world.json"}},
                       "judge: {model: openai/judge-2024-08-06}\n")
    # A judge is asked about task success, so `prompt show` would print its prompt, with the world
    # (whose checks name JSON pointers here: the world is JSON).
    rubric = suite / "rubrics" / "hostile.yaml"
    rubric.write_text(RUBRIC.replace("task_success:\n", "task_success:\n  judge: true\n")
                      .replace("collection: users", "collection: /users"), encoding="utf-8")
    result = CliRunner().invoke(main, ["prompt", "show", str(path), "t1", "--axis", "task_success"])
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert result.stderr.startswith(f"judgekit: error: {suite}/world.json: snapshot json_file: 'world.json' ")
    assert SECRET not in result.output


# --- accepted, through `judgekit run`: the world read is the committed one -------------------------


def symlink_inside_the_tree(suite: Path, outside: Path):
    (suite / "worlds").mkdir()
    make_db(suite / "worlds" / "after.db", [1, 2])
    (suite / "after.db").symlink_to(Path("worlds") / "after.db")
    return {"sqlite": "after.db"}, ""


def wal_with_uncheckpointed_rows(suite: Path, outside: Path):
    wal_db(suite / "after.db", [1], [2], outside / "live")
    return {"sqlite": "after.db"}, ""


def hot_journal_rolled_back(suite: Path, outside: Path):
    (suite / "before.db").unlink()
    make_db(suite / "before.db", [1, *range(3, 200)])
    hot_journal_db(suite / "after.db", range(1, 200), outside / "live")
    return {"sqlite": "after.db"}, ""


def odd_names(suite: Path, outside: Path):
    make_db(suite / "what?mode=rw #1 50%20.db", [1, 2])
    return {"sqlite": "what?mode=rw #1 50%20.db"}, ""


def odd_names_with_wal(suite: Path, outside: Path):
    wal_db(suite / "a?b#c%41.db", [1], [2], outside / "live")
    return {"sqlite": "a?b#c%41.db"}, ""


def another_root_allowed_by_the_suite(suite: Path, outside: Path):
    make_db(outside / "after.db", [1, 2])
    return {"sqlite": "../outside/after.db"}, "snapshots:\n  roots: [., ../outside]\n"


def empty_sidecars_ignored(suite: Path, outside: Path):
    make_db(suite / "after.db", [1, 2])
    (suite / "after.db-wal").write_bytes(b"")
    (suite / "after.db-journal").write_bytes(b"")
    return {"sqlite": "after.db"}, ""


ACCEPTED = [
    pytest.param(symlink_inside_the_tree, id="symlink_inside_the_tree"),
    pytest.param(wal_with_uncheckpointed_rows, id="wal_with_uncheckpointed_rows_seen"),
    pytest.param(hot_journal_rolled_back, id="hot_journal_rolled_back"),
    pytest.param(odd_names, id="question_hash_percent_in_name"),
    pytest.param(odd_names_with_wal, id="question_hash_percent_in_name_with_wal"),
    pytest.param(another_root_allowed_by_the_suite, id="another_root_allowed_by_the_suite"),
    pytest.param(empty_sidecars_ignored, id="empty_sidecars_ignored"),
]


@pytest.mark.parametrize("build", ACCEPTED)
def test_snapshot_read_as_committed_and_nothing_written_beside_it(tree, private_tmp, build):
    suite, outside = tree
    after, settings = build(suite, outside)
    path = write_suite(suite, {"before": {"sqlite": "before.db"}, "after": after}, settings)
    before = listing(suite), listing(outside)
    result, lines = run_suite(path)
    assert result.exit_code == 0, result.output
    (line,) = lines
    axis = line["axes"]["task_success"]
    assert (axis["status"], axis["passed"]) == ("scored", True), axis
    assert [c["reason"] for c in axis["checks"] if c["check"] == "side_effects"] == [
        "all 1 change(s) in the diff are allowed"
    ]
    assert (listing(suite), listing(outside)) == before
    gc.collect()
    assert listing(private_tmp) == []


# --- `judgekit diff A B`: paths a person names are not confined, but are still checked ------------


def test_diff_refuses_a_fifo_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    make_db(tmp_path / "w.db", [1])
    result = CliRunner().invoke(main, ["diff", str(tmp_path / "pipe"), str(tmp_path / "w.db")])
    assert result.exit_code == 2
    assert result.stderr == (
        f"judgekit: error: {tmp_path}/pipe: is a FIFO (named pipe), not a regular file; "
        "expected a JSON document or a SQLite database\n"
    )


def test_diff_refuses_a_sparse_file_over_the_cap_without_reading_it(tmp_path):
    big = tmp_path / "big.json"
    with open(big, "wb") as handle:
        handle.truncate(256 * 1024 * 1024 + 1)  # sparse: no time or disk spent making it
    (tmp_path / "w.json").write_text("{}", encoding="utf-8")
    result = CliRunner().invoke(main, ["diff", str(big), str(tmp_path / "w.json")])
    assert result.exit_code == 2
    assert "is 268,435,457 bytes, over the 268,435,456-byte limit for a snapshot file" in result.stderr


@pytest.mark.parametrize(
    "cut",
    [
        pytest.param(lambda n: 100, id="header_only"),
        pytest.param(lambda n: n - PAGE, id="last_page_gone"),
        pytest.param(lambda n: n // 3, id="two_thirds_gone"),
    ],
)
def test_diff_refuses_a_truncated_database(tmp_path, cut):
    make_db(tmp_path / "before.db", range(1, 101))
    truncated(tmp_path / "after.db", cut)
    result = CliRunner().invoke(main, ["diff", str(tmp_path / "before.db"), str(tmp_path / "after.db")])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"judgekit: error: {tmp_path}/after.db: cannot read SQLite database: truncated")


def _limited_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))  # a regression dies, not the machine


def _judgekit(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.run(
        [sys.executable, "-m", "judgekit", *args], cwd=cwd, env=env, capture_output=True, text=True,
        timeout=PROCESS_ALARM_S - 10, preexec_fn=_limited_memory, check=False,
    )


@pytest.mark.alarm(PROCESS_ALARM_S)
@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero on this system")
def test_dev_zero_is_refused_not_read(tree):
    suite, _ = tree
    (suite / "zero.json").write_text("{}", encoding="utf-8")
    diff = _judgekit("diff", "/dev/zero", str(suite / "zero.json"), cwd=suite)
    assert (diff.returncode, diff.stderr) == (
        2, "judgekit: error: /dev/zero: is a character device, not a regular file; expected a JSON document or a SQLite database\n"
    )
    # In a suite: outside the tree first; and even with /dev allowed as a root, not a regular file.
    write_suite(suite, {"before": {"sqlite": "before.db"}, "after": {"json_file": "/dev/zero"}})
    run = _judgekit("run", "suite.yaml", "--no-cache", "--format", "jsonl", cwd=suite)
    assert run.returncode == 2
    assert "/dev/zero: snapshot json_file: '/dev/zero' (relative to the trajectory file's folder) resolves to /dev/zero, outside" in run.stderr
    write_suite(suite, {"before": {"sqlite": "before.db"}, "after": {"json_file": "/dev/zero"}}, "snapshots:\n  roots: [., /dev]\n")
    run = _judgekit("run", "suite.yaml", "--no-cache", "--format", "jsonl", cwd=suite)
    assert run.returncode == 2
    (line,) = [json.loads(x) for x in run.stdout.splitlines()]
    assert line["axes"]["task_success"]["error"] == (
        "/dev/zero: is a character device, not a regular file; expected a JSON document"
    )


# --- suite settings -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        pytest.param("snapshots:\n  max_bytes: 0\n", "suite.yaml:7: snapshots.max_bytes: Input should be greater than 0", id="max_bytes_zero"),
        pytest.param("snapshots:\n  roots: []\n", "suite.yaml:7: snapshots.roots: List should have at least 1 item", id="no_roots"),
        pytest.param("snapshots:\n  root: [.]\n", "suite.yaml:7: snapshots.root: unknown key", id="unknown_key"),
    ],
)
def test_bad_snapshot_settings_are_refused_with_file_and_line(tree, settings, message):
    suite, _ = tree
    result, _ = run_suite(write_suite(suite, {"before": {"sqlite": "before.db"}, "after": {"sqlite": "before.db"}}, settings))
    assert result.exit_code == 2
    assert message in result.stderr


def test_loaded_trajectory_without_a_policy_is_confined_to_its_own_folder(tree):
    suite, outside = tree
    make_db(outside / "other.db", [1])
    spec = SnapshotSpec.model_validate({"sqlite": "../outside/other.db"})
    with pytest.raises(InputError, match="outside the folders snapshots may be read from"):
        load_snapshot(spec, suite)
    assert load_snapshot(spec, suite, policy=SnapshotPolicy((suite, outside))).records("users")[0]["id"] == 1


# --- read-only checkouts --------------------------------------------------------------------------


def _as_nobody(action: Callable[[], object]) -> object:
    """Run ``action`` in a forked child that has dropped to uid/gid 65534, and return its result.

    A fork, not an exec: the interpreter here lives under /root (mode 0700 on this kind of
    machine), which uid 65534 cannot read, so the child keeps the modules already imported.
    """
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        os.close(read)
        signal.alarm(ALARM_S)
        try:
            try:
                os.setgroups([])
                os.setgid(65534)
                os.setuid(65534)
            except OSError as exc:
                payload = {"skip": f"cannot drop privileges to uid 65534: {exc}"}
            else:
                payload = {"result": action()}
                gc.collect()  # finalize every snapshot: os._exit below runs no finalizer
        except BaseException as exc:  # noqa: BLE001 - report everything to the parent
            payload = {"error": f"{type(exc).__name__}: {exc}"}
        os.write(write, json.dumps(payload).encode())
        os._exit(0)
    os.close(write)
    chunks = []
    while True:
        ready, _, _ = select.select([read], [], [], ALARM_S)
        if not ready:
            os.kill(pid, signal.SIGKILL)
            break
        chunk = os.read(read, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(read)
    os.waitpid(pid, 0)
    payload = json.loads(b"".join(chunks) or b'{"error": "the child gave no answer in time"}')
    if "skip" in payload:
        pytest.skip(payload["skip"])
    assert "error" not in payload, payload["error"]
    return payload["result"]


@pytest.fixture
def read_only_tree():
    """A suite folder that uid 65534 can read but not write (outside pytest's 0700 tmp)."""
    if os.getuid() != 0:
        pytest.skip("dropping to uid 65534 needs root; as any other user, chmod already makes a folder read-only")
    top = Path(tempfile.mkdtemp(prefix="judgekit-ro-", dir="/tmp"))
    scratch = Path(tempfile.mkdtemp(prefix="judgekit-ro-tmp-", dir="/tmp"))
    scratch.chmod(0o777)  # where uid 65534 makes its private copies
    suite = top / "suite"
    suite.mkdir()
    yield top, suite, scratch
    for path in [top, *top.rglob("*")]:
        if path.is_dir() and not path.is_symlink():
            path.chmod(0o755)
    shutil.rmtree(top)
    shutil.rmtree(scratch)


def _freeze(top: Path) -> None:
    for path in top.rglob("*"):
        if not path.is_symlink():
            path.chmod(0o555 if path.is_dir() else 0o444)
    top.chmod(0o555)


def test_wal_database_read_from_a_read_only_folder(read_only_tree):
    top, suite, scratch = read_only_tree
    make_db(suite / "before.db", [1])
    wal_db(suite / "after.db", [1], [2], top / "live")
    hot_journal_db(suite / "hot.db", range(1, 200), top / "live")
    shutil.rmtree(top / "live")
    write_suite(suite, {"before": {"sqlite": "before.db"}, "after": {"sqlite": "after.db"}})
    run_suite(suite / "suite.yaml")  # as root first: every module the command needs is imported
    _freeze(top)
    before = listing(top)

    def read():
        assert not os.access(suite, os.W_OK), "the folder is writable: this test would prove nothing"
        tempfile.tempdir = str(scratch)
        try:
            (suite / "probe").write_text("x")
        except PermissionError:
            pass
        else:
            raise AssertionError("wrote into the read-only folder")
        result, lines = run_suite(suite / "suite.yaml")
        hot = SqliteSnapshot(suite / "hot.db", SnapshotPolicy((suite,)))
        return {
            "uid": os.getuid(),
            "exit": result.exit_code,
            "task_success": lines[0]["axes"]["task_success"]["passed"],
            "wal_rows": [r["id"] for r in SqliteSnapshot(suite / "after.db").records("users")],
            "hot_rows": len(hot.records("users")),
            "uncommitted": sum(r["id"] == 9999 or r["email"] == UNCOMMITTED for r in hot.records("users")),
            "diff": json.loads(CliRunner().invoke(main, ["diff", str(suite / "before.db"), str(suite / "after.db")]).stdout),
        }

    seen = _as_nobody(read)
    assert seen["uid"] == 65534
    assert (seen["exit"], seen["task_success"]) == (0, True)
    assert seen["wal_rows"] == [1, 2]
    assert (seen["hot_rows"], seen["uncommitted"]) == (199, 0)
    assert [(c["op"], c["path"]) for c in seen["diff"]["changes"]] == [("add", ["users", "2"])]
    assert listing(top) == before
    assert listing(scratch) == []  # the private copies were removed


# --- the private copy -----------------------------------------------------------------------------


def test_private_copy_is_removed_when_the_snapshot_is_finalized(tmp_path, private_tmp):
    path = wal_db(tmp_path / "w.db", [1], [2], tmp_path / "live")
    beside = listing(tmp_path)
    snapshot = snapshot_from_path(path)
    assert [r["id"] for r in snapshot.records("users")] == [1, 2]
    (copy,) = private_tmp.iterdir()
    assert copy.name.startswith("judgekit-snapshot-") and (copy.stat().st_mode & 0o777) == 0o700
    assert sorted(p.name for p in copy.iterdir()) == ["snapshot.db"]  # the WAL replayed, then gone
    del snapshot
    gc.collect()
    assert list(private_tmp.iterdir()) == []
    assert listing(tmp_path) == beside


def test_standalone_database_is_opened_in_place_and_immutable(tmp_path, private_tmp):
    path = make_db(tmp_path / "w.db", [1], journal="WAL")  # WAL mode, but its WAL checkpointed away
    snapshot = SqliteSnapshot(path)
    assert snapshot.uri == path.resolve().as_uri() + "?mode=ro&immutable=1"
    assert snapshot.records("users")[0]["id"] == 1
    assert list(private_tmp.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["private-tmp", "w.db"]
