"""Hostile verdict caches (issue 11, class 1): a cache folder from a repository or a shared CI
cache, tampered with row by row or replaced by something that is not a verdict cache.

A real cache is made once by running a small faithfulness suite against the scripted OpenAI
server on 127.0.0.1; every case copies it, tampers with ``cache.db`` through sqlite3 (or the
files beside it) and runs the real ``judgekit`` command again. Each case states its exact
outcome:

- a tampered entry is a miss, refused with its reason (counted in a warning on stderr) and
  judged again: the server gets exactly one more request, the run's score is the real one, and
  the judged-again verdict replaces the tampered row; or it is read as the valid answer it is,
  and scored the way a fresh reply would be (``{"claims": []}`` is unscored ``no_claims``);
- a cache that is not judgekit's is exit 2 naming the folder and what to do, ``--no-cache``
  then works, and ``cache clear`` removes only its database files;
- a read-only cache serves its hits with no request and stores nothing.

Never, in any case: the sentinel file a pickle would create, a file outside the cache folder
removed or changed, or a case taking more than a few seconds (an alarm guards each).
"""

from __future__ import annotations

import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # before anything imports litellm

import ctypes
import json
import pickle
import random
import shutil
import signal
import sqlite3
import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from judgekit.cli import main
from judgekit.run.record import read_run
from judgekit.testing import Reply, ScriptedOpenAIServer

ALARM_S = 10
MODEL = "openai/judge-2024-08-06"
FACT = "Paris is the capital of France"
OUTPUTS = {"t0": "The capital is Paris.", "t1": "Paris is the capital."}
ANSWER = {"claims": [{"claim": "Paris is the capital", "supported": True, "evidence": [{"id": "R0", "quote": FACT}]}]}
RUBRIC = Path(__file__).resolve().parent.parent / "data" / "judge" / "rubric-faithfulness.yaml"
SCORED = ("scored", 1.0, None)  # (status, score, unscored_reason) of an honest verdict
PAGE = 4096
SUPER_JOURNAL_MAGIC = bytes.fromhex("d9d505f920a163d7")


# --- a real cache ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server():
    with ScriptedOpenAIServer(Reply.ok(ANSWER)) as scripted:
        yield scripted


def write_suite(root: Path, api_base: str) -> None:
    root.mkdir(parents=True)
    shutil.copy(RUBRIC, root / "rubric.yaml")
    lines = [json.dumps({"id": tid, "prompt": "Capital of France?", "output": output,
                         "calls": [{"tool": "lookup", "args": {"country": "France"}, "result": {"fact": FACT}}]})
             for tid, output in OUTPUTS.items()]
    (root / "t.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    suite = {"name": "hostile cache", "rubrics": ["rubric.yaml"],
             "trajectories": [{"file": "t.jsonl", "rubric": "faithful-only"}],
             "judge": {"model": MODEL, "api_base": api_base, "max_attempts": 1, "invalid_reply_retries": 0}}
    (root / "suite.yaml").write_text(yaml.safe_dump(suite, sort_keys=False), encoding="utf-8")


def judgekit(*args: str | Path):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


class Run:
    """One `judgekit run` of a project: its result, the requests it made, its axis outcomes."""

    def __init__(self, project: Path, server: ScriptedOpenAIServer, *extra: str, cache: Path | None = None,
                 out: Path | None = None):
        cache = cache or project / "cache"
        self.out = out or project / f"run-{len(list(project.glob('run-*.json')))}.json"
        before = server.request_count
        self.result = judgekit("run", project, "--cache-dir", cache, "--out", self.out, "--format", "jsonl", *extra)
        self.calls = server.request_count - before
        self.exit_code = self.result.exit_code
        self.stderr = self.result.stderr

    @property
    def record(self) -> dict[str, Any]:
        return read_run(self.out).model_dump(mode="json")

    @property
    def outcomes(self) -> dict[str, tuple[Any, Any, Any]]:
        axes = {r["trajectory_id"]: r["axes"]["faithfulness"] for r in self.record["results"]}
        return {tid: (a["status"], a["score"], a["unscored_reason"]) for tid, a in axes.items()}

    def refusal_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if "refused and judged again" in line]


def checkpoint(db: Path) -> None:
    """Fold the WAL into the file: the last connection closing removes -wal and -shm."""
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


@pytest.fixture(scope="module")
def base(tmp_path_factory, server) -> dict[str, Any]:
    """The project and its real cache, made once: copied by every case."""
    project = tmp_path_factory.mktemp("base") / "project"
    write_suite(project, server.base_url)
    run = Run(project, server)
    assert run.exit_code == 0, run.result.output
    assert run.calls == 2 and run.outcomes == {"t0": SCORED, "t1": SCORED}
    keys = {r["trajectory_id"]: r["axes"]["faithfulness"]["judge"]["cache_key"] for r in run.record["results"]}
    checkpoint(project / "cache" / "cache.db")
    for stale in project.glob("run-*.json"):
        stale.unlink()
    assert sorted(os.listdir(project / "cache")) == ["cache.db"]
    return {"project": project, "keys": keys}


class Case:
    """A copy of the project in this test's folder, with a victim file and a sentinel path
    outside its cache folder."""

    def __init__(self, tmp_path: Path, base: dict[str, Any]):
        self.root = tmp_path
        self.project = tmp_path / "project"
        shutil.copytree(base["project"], self.project, symlinks=True)
        self.cache = self.project / "cache"
        self.db = self.cache / "cache.db"
        self.keys = base["keys"]
        self.key = self.keys["t0"]
        self.victim = tmp_path / "victim"  # "../../victim" seen from the cache folder
        self.victim.write_text("a file outside the cache folder: must survive\n")
        self.sentinel = tmp_path / "SENTINEL"  # what a pickle would create
        self.outside = tmp_path / "outside"
        self.outside.mkdir()

    def sql(self, statement: str, args: tuple = ()) -> None:
        conn = sqlite3.connect(self.db)
        with conn:
            conn.execute(statement, args)
        conn.close()

    def value(self, key: str) -> str:
        conn = sqlite3.connect(self.db)
        try:
            [(value,)] = conn.execute("SELECT value FROM Cache WHERE key = ? AND raw = 1", (key,)).fetchall()
        finally:
            conn.close()
        return value

    def set_value(self, key: str, value: Any) -> None:
        self.sql("UPDATE Cache SET value = ? WHERE key = ? AND raw = 1", (value, key))

    def edit(self, change: Callable[[dict[str, Any]], None], key: str | None = None) -> None:
        """Change the JSON entry stored under ``key`` (t0's by default) and store it back."""
        key = key or self.key
        envelope = json.loads(self.value(key))
        change(envelope)
        self.set_value(key, json.dumps(envelope))

    def rows(self) -> list[tuple[Any, ...]]:
        conn = sqlite3.connect(self.db)
        try:
            return conn.execute("SELECT key, raw, mode, filename, typeof(value) FROM Cache ORDER BY rowid").fetchall()
        finally:
            conn.close()

    def untouched(self) -> None:
        """Nothing ran, nothing outside the cache folder was removed."""
        assert not self.sentinel.exists(), "a pickle was loaded"
        assert self.victim.read_text() == "a file outside the cache folder: must survive\n"


@pytest.fixture
def case(tmp_path, base) -> Case:
    made = Case(tmp_path, base)
    yield made
    made.untouched()


class Boom:
    """Pickled, it is a call to open(path, "w"): unpickling it creates the sentinel file."""

    def __init__(self, path: Path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_the_pickle_is_live(tmp_path):
    """The payload the cases plant really runs code when unpickled (so its absence means something)."""
    pickle.loads(pickle.dumps(Boom(tmp_path / "proof"))).close()
    assert (tmp_path / "proof").exists()


# --- tampered rows ---------------------------------------------------------------------------------

JSON_REFUSED = "its value is not valid JSON"
SCHEMA_REFUSED = "its answer does not validate against the faithfulness answer schema"
OTHER_QUESTION = "its verdict belongs to another question"


def pickle_row(c: Case) -> None:
    c.sql("UPDATE Cache SET mode = 4, value = ? WHERE key = ?", (pickle.dumps(Boom(c.sentinel)), c.key))


def pickle_in_a_file(c: Case) -> None:
    (c.cache / "ab").mkdir()
    (c.cache / "ab" / "cd.val").write_bytes(pickle.dumps(Boom(c.sentinel)))
    c.sql("UPDATE Cache SET mode = 4, filename = 'ab/cd.val', value = NULL WHERE key = ?", (c.key,))


def text_in_a_file_outside(c: Case) -> None:
    """diskcache would read ../../victim as the value (a file outside, read into the verdict)."""
    c.sql("UPDATE Cache SET mode = 3, filename = '../../victim', value = NULL WHERE key = ?", (c.key,))


def valid_text_naming_a_file_outside(c: Case) -> None:
    """The JSON is untouched, but the row names a file: diskcache would delete it on overwrite."""
    c.sql("UPDATE Cache SET filename = '../../victim' WHERE key = ?", (c.key,))


def binary_value(c: Case) -> None:
    c.sql("UPDATE Cache SET value = CAST(value AS BLOB) WHERE key = ?", (c.key,))


def number_value(c: Case) -> None:
    c.sql("UPDATE Cache SET value = 1 WHERE key = ?", (c.key,))


def row_flagged_pickled_key(c: Case) -> None:
    """raw = 0: diskcache would unpickle the key; judgekit never reads such a row."""
    c.sql("UPDATE Cache SET raw = 0 WHERE key = ?", (c.key,))


def extra_pickled_key_row(c: Case) -> None:
    c.sql("INSERT INTO Cache (key, raw, store_time, mode, filename, value) VALUES (?, 0, 0, 4, '../../victim', ?)",
          (pickle.dumps(Boom(c.sentinel)), pickle.dumps(Boom(c.sentinel))))


def extra_row_naming_a_file_outside(c: Case) -> None:
    c.sql("INSERT INTO Cache (key, raw, store_time, mode, filename, value) VALUES ('f' || ?, 1, 0, 2, '../../victim', NULL)",
          (c.key,))


def no_claims(c: Case) -> None:
    c.edit(lambda e: e["verdict"].update(answer={"claims": []}))


def claims_a_string(c: Case) -> None:
    c.edit(lambda e: e["verdict"].update(answer={"claims": "x"}))


def supported_as_text(c: Case) -> None:
    c.edit(lambda e: e["verdict"]["answer"]["claims"][0].update(supported="true"))


def claim_with_extra_field(c: Case) -> None:
    c.edit(lambda e: e["verdict"]["answer"]["claims"][0].update(confidence=1.0))


def thirty_one_claims(c: Case) -> None:
    c.edit(lambda e: e["verdict"]["answer"].update(claims=e["verdict"]["answer"]["claims"] * 31))


def axis_swapped(c: Case) -> None:
    c.edit(lambda e: e["verdict"].update(axis="task_success", answer={"reasons": [], "verdict": "pass"}))


def copied_from_another_key(c: Case) -> None:
    c.set_value(c.key, c.value(c.keys["t1"]))


def rebound_to_this_key(c: Case) -> None:
    """Another trajectory's verdict, its envelope rewritten to name this key (its provenance not)."""
    envelope = json.loads(c.value(c.keys["t1"]))
    envelope["key"] = c.key
    c.set_value(c.key, json.dumps(envelope))


def another_judges_provenance(c: Case) -> None:
    """A valid entry under its real key whose provenance claims another judge (so another
    judge's approval would apply to it)."""
    c.edit(lambda e: e["verdict"]["provenance"].update(model_pin="openai/another-judge-2024-01-01"))


def mismatch_flag_cleared(c: Case) -> None:
    """The entry says another model answered but that this was no mismatch: the flag is worked
    out again on read, never taken from the entry."""
    c.edit(lambda e: e["verdict"]["provenance"].update(reported_model="some-other-model", model_mismatch=False))


def not_json(c: Case) -> None:
    c.set_value(c.key, '{"cache_format": 2, "key": "unterminated')


def nan_in_payload(c: Case) -> None:
    c.set_value(c.key, c.value(c.key).replace('"cost_usd":null', '"cost_usd":NaN'))


def duplicate_verdict(c: Case) -> None:
    """Two verdicts in one entry: a lenient parser keeps the last one (here: no claims)."""
    text = c.value(c.key)
    verdict = json.loads(text)["verdict"]
    verdict["answer"] = {"claims": []}
    c.set_value(c.key, text[:-1] + ',"verdict":' + json.dumps(verdict) + "}")


def duplicate_claims(c: Case) -> None:
    text = c.value(c.key)
    c.set_value(c.key, text.replace('"answer":{"claims":', '"answer":{"claims":[],"claims":'))


def deeply_nested(c: Case) -> None:
    c.set_value(c.key, '{"cache_format": 2, "key": "k", "verdict": ' + "[" * 100_000 + "]" * 100_000 + "}")


def lone_surrogate(c: Case) -> None:
    c.set_value(c.key, c.value(c.key).replace('"claim":"Paris', '"claim":"\\ud800Paris'))


def cache_format_1(c: Case) -> None:
    c.edit(lambda e: e.update(cache_format=1))


def cache_format_as_text(c: Case) -> None:
    c.edit(lambda e: e.update(cache_format="2"))


def extra_envelope_field(c: Case) -> None:
    c.edit(lambda e: e.update(note="trust me"))


def a_list(c: Case) -> None:
    c.set_value(c.key, "[]")


def unscored_verdict(c: Case) -> None:
    c.edit(lambda e: e["verdict"].update(status="unscored", unscored_reason="timeout", answer=None))


def scored_without_answer(c: Case) -> None:
    c.edit(lambda e: e["verdict"].update(answer=None))


def verdict_with_extra_field(c: Case) -> None:
    c.edit(lambda e: e["verdict"].update(trusted=True))


def five_mib(c: Case) -> None:
    c.set_value(c.key, "x" * (5 * 2**20))


def stored(kind: str) -> str:
    return f"its value is stored as {kind}, not as JSON text in the database"


# (mutation, reason refused or None, requests of the rerun, t0's outcome, stats entries / foreign
# after the mutation, rows `cache prune` removes)
ROWS = [
    pytest.param(pickle_row, stored("a pickle"), 1, SCORED, 2, 1, 1, id="pickle_row_under_a_real_key"),
    pytest.param(pickle_in_a_file, stored("a pickle in a file"), 1, SCORED, 2, 1, 1, id="pickle_in_a_value_file"),
    pytest.param(text_in_a_file_outside, stored("text in a file"), 1, SCORED, 2, 1, 1, id="value_read_from_a_file_outside"),
    pytest.param(valid_text_naming_a_file_outside, stored("mode 1 in a file"), 1, SCORED, 2, 1, 1,
                 id="valid_entry_naming_a_file_outside_is_overwritten_not_deleted"),
    pytest.param(binary_value, stored("binary"), 1, SCORED, 2, 1, 1, id="value_as_a_blob"),
    pytest.param(number_value, stored("a number"), 1, SCORED, 2, 1, 1, id="value_as_a_number"),
    pytest.param(row_flagged_pickled_key, None, 1, SCORED, 2, 1, 1, id="row_flagged_as_pickled_key_is_never_read"),
    pytest.param(extra_pickled_key_row, None, 0, SCORED, 3, 1, 1, id="extra_pickled_key_row"),
    pytest.param(extra_row_naming_a_file_outside, None, 0, SCORED, 3, 1, 1, id="extra_row_naming_a_file_outside"),
    pytest.param(no_claims, None, 0, ("unscored", None, "no_claims"), 2, 0, 0, id="no_claims_is_unscored_never_1"),
    pytest.param(claims_a_string, SCHEMA_REFUSED, 1, SCORED, 2, 0, 1, id="claims_a_string"),
    pytest.param(supported_as_text, SCHEMA_REFUSED, 1, SCORED, 2, 0, 1, id="supported_as_text_not_coerced"),
    pytest.param(claim_with_extra_field, SCHEMA_REFUSED, 1, SCORED, 2, 0, 1, id="claim_with_an_extra_field"),
    pytest.param(thirty_one_claims, SCHEMA_REFUSED, 1, SCORED, 2, 0, 1, id="more_claims_than_the_schema_allows"),
    pytest.param(axis_swapped, OTHER_QUESTION, 1, SCORED, 2, 0, 0, id="verdict_of_another_axis"),
    pytest.param(copied_from_another_key, "it is bound to another key", 1, SCORED, 2, 0, 1, id="payload_copied_from_another_key"),
    pytest.param(rebound_to_this_key, OTHER_QUESTION, 1, SCORED, 2, 0, 1, id="payload_rebound_to_this_key"),
    pytest.param(another_judges_provenance, "its provenance names another judge or rubric", 1, SCORED, 2, 0, 0,
                 id="provenance_of_another_judge"),
    pytest.param(not_json, JSON_REFUSED, 1, SCORED, 2, 0, 1, id="not_json"),
    pytest.param(nan_in_payload, JSON_REFUSED, 1, SCORED, 2, 0, 1, id="nan_in_payload"),
    pytest.param(duplicate_verdict, JSON_REFUSED, 1, SCORED, 2, 0, 1, id="duplicate_verdict_key"),
    pytest.param(duplicate_claims, JSON_REFUSED, 1, SCORED, 2, 0, 1, id="duplicate_claims_key"),
    pytest.param(deeply_nested, JSON_REFUSED, 1, SCORED, 2, 0, 1, id="nested_100000_deep"),
    pytest.param(lone_surrogate, JSON_REFUSED, 1, SCORED, 2, 0, 1, id="lone_surrogate"),
    pytest.param(cache_format_1, "it is in cache format 1, not 2", 1, SCORED, 2, 0, 1, id="cache_format_1"),
    pytest.param(cache_format_as_text, "it is in cache format '2', not 2", 1, SCORED, 2, 0, 1, id="cache_format_as_text"),
    pytest.param(extra_envelope_field, "its value is not a judgekit cache entry", 1, SCORED, 2, 0, 1, id="extra_envelope_field"),
    pytest.param(a_list, "its value is not a judgekit cache entry", 1, SCORED, 2, 0, 1, id="value_a_json_list"),
    pytest.param(unscored_verdict, "it is not a scored verdict", 1, SCORED, 2, 0, 1, id="unscored_verdict_stored"),
    pytest.param(scored_without_answer, "it is not a scored verdict", 1, SCORED, 2, 0, 1, id="scored_without_an_answer"),
    pytest.param(verdict_with_extra_field, "its verdict is not valid: 1 validation error for JudgeVerdict", 1, SCORED,
                 2, 0, 1, id="verdict_with_an_extra_field"),
    pytest.param(five_mib, f"its value is {5 * 2**20} bytes, more than a verdict ever is", 1, SCORED, 2, 0, 1,
                 id="value_of_5_mib"),
]


@pytest.mark.parametrize(("mutate", "refused", "calls", "t0", "entries", "foreign", "pruned"), ROWS)
def test_a_tampered_row(case, server, mutate, refused, calls, t0, entries, foreign, pruned):
    mutate(case)
    stats = judgekit("cache", "stats", "--cache-dir", case.cache)
    assert stats.exit_code == 0, stats.output
    assert json.loads(stats.stdout) | {"bytes": 0} == {
        "directory": str(case.cache), "exists": True, "writable": True, "entries": entries,
        "fingerprints": 2, "foreign_entries": foreign, "bytes": 0}

    run = Run(case.project, server)
    assert run.exit_code == 0, run.result.output
    assert run.calls == calls
    assert run.outcomes == {"t0": t0, "t1": SCORED}
    if refused is None:
        assert run.refusal_lines() == []
        assert run.record["ledger"]["cache_refused"] == {}
    else:
        assert run.refusal_lines() == [f"judgekit: warning: verdict cache {case.cache}: 1 entry refused and "
                                       f"judged again ({refused}: 1)"]
        assert run.record["ledger"]["cache_refused"] == {refused: 1}
    case.untouched()

    # The verdict judged again replaced the tampered row: the next run is all hits.
    again = Run(case.project, server)
    assert (again.exit_code, again.calls, again.refusal_lines()) == (0, 0, [])
    assert again.outcomes == {"t0": t0, "t1": SCORED}
    real = [row for row in case.rows() if row[0] in case.keys.values() and row[1] == 1]
    assert sorted(real) == sorted((key, 1, 1, None, "text") for key in case.keys.values())


@pytest.mark.parametrize(("mutate", "refused", "calls", "t0", "entries", "foreign", "pruned"), ROWS)
def test_a_tampered_row_pruned_then_cleared(case, server, mutate, refused, calls, t0, entries, foreign, pruned):
    mutate(case)
    files = sorted(p.relative_to(case.root) for p in case.root.rglob("*") if p.is_file() and case.cache not in p.parents)
    pruned_run = judgekit("cache", "prune", "--cache-dir", case.cache, "--older-than-days", "3650")
    assert (pruned_run.exit_code, pruned_run.stdout) == (0, f"removed {pruned} verdict(s)\n")
    stats = json.loads(judgekit("cache", "stats", "--cache-dir", case.cache).stdout)
    assert (stats["entries"], stats["foreign_entries"]) == (entries - pruned, 0)
    cleared = judgekit("cache", "clear", "--cache-dir", case.cache)
    assert (cleared.exit_code, cleared.stdout) == (0, f"removed {entries - pruned} verdict(s)\n")
    assert json.loads(judgekit("cache", "stats", "--cache-dir", case.cache).stdout)["entries"] == 0
    # Nothing outside the cache folder went, nor any file inside it that a row named.
    assert sorted(p.relative_to(case.root) for p in case.root.rglob("*")
                  if p.is_file() and case.cache not in p.parents) == files
    if mutate is pickle_in_a_file:
        assert (case.cache / "ab" / "cd.val").exists()


def test_a_cleared_mismatch_flag_is_worked_out_again(case, server):
    mismatch_flag_cleared(case)
    run = Run(case.project, server)
    assert (run.exit_code, run.calls, run.refusal_lines()) == (0, 0, [])  # a hit, not refused
    t0 = next(r for r in run.record["results"] if r["trajectory_id"] == "t0")
    judge = t0["axes"]["faithfulness"]["judge"]
    assert (judge["reported_model"], judge["model_mismatch"], judge["cache_hit"]) == ("some-other-model", True, True)


# --- caches that are not judgekit's ----------------------------------------------------------------


def header_pages(db: Path) -> tuple[int, int]:
    header = db.read_bytes()[:100]
    return int.from_bytes(header[28:32], "big"), int.from_bytes(header[16:18], "big")


def random_bytes(c: Case) -> str:
    c.db.write_bytes(random.Random(1).randbytes(c.db.stat().st_size))
    return "cache.db is not a SQLite database"


def truncated_header(c: Case) -> str:
    c.db.write_bytes(c.db.read_bytes()[:50])
    return "cache.db is truncated"


def truncated_in_half(c: Case) -> str:
    pages, page_size = header_pages(c.db)
    data = c.db.read_bytes()
    c.db.write_bytes(data[: len(data) // 2])
    return f"cache.db is truncated ({len(data) // 2} bytes for {pages} pages of {page_size})"


def garbage_after_the_header(c: Case) -> str:
    data = c.db.read_bytes()
    c.db.write_bytes(data[:100] + random.Random(2).randbytes(len(data) - 100))
    return "cache.db: database disk image is malformed"


def foreign_database(c: Case) -> str:
    c.db.unlink()
    conn = sqlite3.connect(c.db)
    with conn:
        conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, email TEXT)")
        conn.execute("INSERT INTO users VALUES (1, 'a@example.com')")
    conn.close()
    return ("not a judgekit verdict cache: unexpected or missing Cache, Cache_expire_time, Cache_key_raw, "
            "Settings, Settings_count_delete")


def setting(name: str):
    def plant(c: Case) -> str:
        c.sql("INSERT INTO Settings VALUES (?, 1)", (name,))
        return f"not a judgekit verdict cache: unknown settings {name}"

    plant.__name__ = f"setting_{name}"
    return plant


EVIL_TRIGGER = "CREATE TRIGGER evil AFTER INSERT ON Cache BEGIN UPDATE Cache SET value = '[]'; END"


def extra_trigger(c: Case) -> str:
    c.sql(EVIL_TRIGGER)
    return "not a judgekit verdict cache: unexpected or missing evil"


def trigger_rewritten(c: Case) -> str:
    c.sql("DROP TRIGGER Settings_count_insert")
    c.sql("CREATE TRIGGER Settings_count_insert AFTER INSERT ON Cache FOR EACH ROW BEGIN "
          "UPDATE Cache SET value = '{}' WHERE rowid = NEW.rowid; END")
    return "not a judgekit verdict cache: unexpected or missing Settings_count_insert, Settings_count_insert"


def extra_view(c: Case) -> str:
    c.sql("CREATE VIEW v AS SELECT * FROM Cache")
    return "not a judgekit verdict cache: unexpected or missing v"


def symlink_to_a_cache_outside(c: Case) -> str:
    target = c.outside / "elsewhere.db"
    shutil.move(c.db, target)
    c.db.symlink_to(target)
    return "cache.db is a symbolic link"


def cache_db_a_folder(c: Case) -> str:
    c.db.unlink()
    c.db.mkdir()
    return "cache.db is not a regular file"


def cache_db_a_fifo(c: Case) -> str:
    c.db.unlink()
    os.mkfifo(c.db)
    return "cache.db is not a regular file"


def wal_symlink(c: Case) -> str:
    (c.cache / "cache.db-wal").symlink_to(c.victim)
    return "cache.db-wal is a symbolic link"


def shm_fifo(c: Case) -> str:
    os.mkfifo(c.cache / "cache.db-shm")
    return "cache.db-shm is not a regular file"


def wal_fifo(c: Case) -> str:
    os.mkfifo(c.cache / "cache.db-wal")
    return "cache.db-wal is not a regular file"


JOURNAL_REFUSED = ("cache.db-journal is present: a verdict cache never has a rollback journal, and SQLite would "
                   "replay it into the database")


def hot_journal(db: Path, live: Path, victim: Path) -> None:
    """``db`` caught mid-transaction in rollback-journal mode (changes spilled into the file, the
    originals in a hot -journal beside it), the journal naming ``victim`` as its super-journal:
    SQLite rolls such a journal back on the first read and then deletes the super-journal."""
    live.mkdir()
    source = live / "cache.db"
    shutil.copyfile(db, source)
    conn = sqlite3.connect(source, isolation_level=None)
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.execute("PRAGMA cache_size=2")  # spill changed pages into the file before commit
    conn.execute("BEGIN")
    conn.execute("UPDATE Cache SET value = value || ?", ("x" * 20000,))
    conn.execute("INSERT INTO Cache (key, raw, value) SELECT key || 'b', raw, value FROM Cache")
    shutil.copyfile(source, db)
    shutil.copyfile(f"{source}-journal", f"{db}-journal")
    conn.execute("ROLLBACK")
    conn.close()
    name = os.fsencode(victim)
    record = struct.pack(">I", 0x40000000 // PAGE + 1) + name + struct.pack(">II", len(name), sum(name)) + SUPER_JOURNAL_MAGIC
    with open(f"{db}-journal", "ab") as handle:
        handle.write(record)


def hot_journal_naming_a_file_outside(c: Case) -> str:
    hot_journal(c.db, c.outside / "live", c.victim)
    return JOURNAL_REFUSED


def journal_fifo(c: Case) -> str:
    os.mkfifo(c.cache / "cache.db-journal")
    return JOURNAL_REFUSED


def wal_adding_a_trigger(c: Case) -> str:
    """A -wal whose committed frames add a trigger the main file does not have."""
    live = c.outside / "live"
    live.mkdir()
    source = live / "cache.db"
    shutil.copyfile(c.db, source)
    conn = sqlite3.connect(source, isolation_level=None)
    conn.execute("PRAGMA wal_autocheckpoint=0")
    conn.execute(EVIL_TRIGGER)
    shutil.copyfile(source, c.db)
    shutil.copyfile(f"{source}-wal", c.cache / "cache.db-wal")
    conn.close()
    return "not a judgekit verdict cache: unexpected or missing evil"


def test_the_hostile_journal_is_live(tmp_path, base):
    """Opened by SQLite, the journal the cases plant deletes the file it names (so that the file
    surviving in the cases means something)."""
    c = Case(tmp_path, base)
    hot_journal(c.db, c.outside / "live", c.victim)
    conn = sqlite3.connect(c.db)
    conn.execute("SELECT count(*) FROM Cache").fetchall()
    conn.close()
    assert not c.victim.exists()


# (plant, database files `cache clear` removes: checking a WAL database with a read-only
# connection leaves SQLite's -wal and -shm beside it)
UNREADABLE = [
    pytest.param(random_bytes, ["cache.db"], id="random_bytes"),
    pytest.param(truncated_header, ["cache.db"], id="truncated_inside_the_header"),
    pytest.param(truncated_in_half, ["cache.db"], id="truncated_in_half"),
    pytest.param(garbage_after_the_header, ["cache.db", "cache.db-wal", "cache.db-shm"], id="garbage_after_a_valid_header"),
    pytest.param(foreign_database, ["cache.db"], id="foreign_sqlite_database"),
    pytest.param(setting("sqlite_foo"), ["cache.db", "cache.db-wal", "cache.db-shm"], id="settings_extra_sqlite_key"),
    pytest.param(setting("disk_foo"), ["cache.db", "cache.db-wal", "cache.db-shm"], id="settings_extra_disk_key"),
    pytest.param(extra_trigger, ["cache.db", "cache.db-wal", "cache.db-shm"], id="extra_trigger"),
    pytest.param(trigger_rewritten, ["cache.db", "cache.db-wal", "cache.db-shm"], id="trigger_rewritten"),
    pytest.param(extra_view, ["cache.db", "cache.db-wal", "cache.db-shm"], id="extra_view"),
    pytest.param(symlink_to_a_cache_outside, ["cache.db"], id="cache_db_links_to_a_cache_outside"),
    pytest.param(cache_db_a_fifo, ["cache.db"], id="cache_db_a_fifo"),
    pytest.param(wal_symlink, ["cache.db", "cache.db-wal"], id="wal_links_outside"),
    pytest.param(wal_fifo, ["cache.db", "cache.db-wal"], id="wal_a_fifo"),
    pytest.param(shm_fifo, ["cache.db", "cache.db-shm"], id="shm_a_fifo"),
    pytest.param(hot_journal_naming_a_file_outside, ["cache.db", "cache.db-journal"], id="hot_journal_naming_a_file_outside"),
    pytest.param(journal_fifo, ["cache.db", "cache.db-journal"], id="journal_a_fifo"),
    pytest.param(wal_adding_a_trigger, ["cache.db", "cache.db-wal", "cache.db-shm"], id="wal_adding_a_trigger"),
]


def outside_files(c: Case) -> dict[str, bytes]:
    return {str(p.relative_to(c.root)): p.read_bytes() for p in sorted(c.root.rglob("*"))
            if p.is_file() and not p.is_symlink() and c.cache not in p.parents and p.suffix != ".json"}


@pytest.mark.parametrize(("plant", "cleared"), UNREADABLE)
def test_a_cache_that_is_not_judgekits(case, server, plant, cleared):
    why = plant(case)
    before = outside_files(case)
    error = (f"judgekit: error: {case.cache}: the verdict cache is unreadable ({why}): run with --no-cache, or "
             f"remove it with `judgekit cache clear --cache-dir {case.cache}`\n")
    run = Run(case.project, server)
    assert (run.exit_code, run.calls, run.result.stdout, run.stderr) == (2, 0, "", error)
    assert not run.out.exists()
    for command in (["stats"], ["prune", "--older-than-days", "1"]):
        refused = judgekit("cache", *command, "--cache-dir", case.cache)
        assert (refused.exit_code, refused.stdout, refused.stderr) == (2, "", error), command

    bypass = Run(case.project, server, "--no-cache")
    assert (bypass.exit_code, bypass.calls, bypass.outcomes) == (0, 2, {"t0": SCORED, "t1": SCORED})

    clear = judgekit("cache", "clear", "--cache-dir", case.cache)
    assert (clear.exit_code, clear.stdout) == (
        0, f"the verdict cache at {case.cache} could not be read; removed its database files: {', '.join(cleared)}\n")
    assert outside_files(case) == before  # the link's target, the victim, the live copies: all as they were
    fresh = Run(case.project, server)
    assert (fresh.exit_code, fresh.calls, fresh.outcomes) == (0, 2, {"t0": SCORED, "t1": SCORED})


def test_a_cache_db_that_is_a_folder_is_named_and_kept(case, server):
    why = cache_db_a_folder(case)
    run = Run(case.project, server)
    assert run.exit_code == 2 and f"the verdict cache is unreadable ({why})" in run.stderr
    (case.db / "keep").write_text("not judgekit's")
    clear = judgekit("cache", "clear", "--cache-dir", case.cache)
    assert (clear.exit_code, clear.stderr) == (2, f"judgekit: error: {case.cache}: its cache.db is a folder, which no "
                                                  "verdict cache has: judgekit removes no folder, remove it yourself\n")
    assert (case.db / "keep").read_text() == "not judgekit's"
    assert Run(case.project, server, "--no-cache").exit_code == 0


# --- a read-only cache -----------------------------------------------------------------------------

MS_RDONLY, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE, CLONE_NEWNS = 1, 32, 4096, 16384, 1 << 18, 0x20000


def read_only(folder: Path, work: Callable[[], Any]) -> Any:
    """``work()`` in a forked child that sees ``folder`` mounted read-only (its own mount
    namespace: root ignores file modes, not a read-only mount). Returns what work returned."""
    reading, writing = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            os.close(reading)
            signal.alarm(ALARM_S)
            libc = ctypes.CDLL(None, use_errno=True)
            path = os.fsencode(folder)
            steps = [lambda: libc.unshare(CLONE_NEWNS),
                     lambda: libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None),
                     lambda: libc.mount(path, path, None, MS_BIND, None),
                     lambda: libc.mount(b"none", path, None, MS_REMOUNT | MS_BIND | MS_RDONLY, None)]
            for step in steps:
                if step() != 0:
                    raise PermissionError(ctypes.get_errno(), "cannot mount read-only: " + os.strerror(ctypes.get_errno()))
            answer = {"ok": work()}
        except PermissionError as exc:
            answer = {"skip": str(exc)}
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        os.write(writing, json.dumps(answer).encode())
        os._exit(0)
    os.close(writing)
    with os.fdopen(reading, "rb") as pipe:
        answer = json.loads(pipe.read() or b'{"error": "the child said nothing"}')
    os.waitpid(pid, 0)
    if "skip" in answer:
        pytest.skip(answer["skip"])
    assert "error" not in answer, answer["error"]
    return answer["ok"]


def invoke(*args: str | Path) -> dict[str, Any]:
    result = judgekit(*args)
    return {"exit": result.exit_code, "stdout": result.stdout, "stderr": result.stderr}


READ_ONLY = [
    pytest.param(None, 0, {"t0": True, "t1": True}, [], id="every_entry_a_hit_no_request"),
    pytest.param(claims_a_string, 1, {"t0": False, "t1": True},
                 ["judgekit: warning: verdict cache {dir}: 1 entry refused and judged again "
                  f"({SCHEMA_REFUSED}: 1)"], id="a_refused_entry_judged_again_not_stored"),
]


@pytest.mark.parametrize(("mutate", "calls", "hits", "warnings"), READ_ONLY)
def test_a_read_only_cache_serves_its_hits_and_stores_nothing(case, server, mutate, calls, hits, warnings):
    # Its fingerprint entries answer too (the hits), and none is learnt (the bytes stay).
    if mutate is not None:
        mutate(case)
    frozen = {p.name: p.read_bytes() for p in case.cache.iterdir()}
    out = case.root / "run.json"
    before = server.request_count

    def work():
        return [invoke("run", case.project, "--cache-dir", case.cache, "--out", out),
                invoke("cache", "stats", "--cache-dir", case.cache),
                invoke("cache", "prune", "--cache-dir", case.cache, "--older-than-days", "0"),
                invoke("cache", "clear", "--cache-dir", case.cache)]

    run, stats, prune, clear = read_only(case.cache, work)
    assert run["exit"] == 0, run
    assert server.request_count - before == calls
    assert run["stderr"].splitlines()[1:] == [line.replace("{dir}", str(case.cache)) for line in warnings] + [
        f"judgekit: note: verdict cache {case.cache} is read-only: its verdicts were used, new ones were not stored"]
    record = read_run(out).model_dump(mode="json")
    assert {r["trajectory_id"]: r["axes"]["faithfulness"]["judge"]["cache_hit"] for r in record["results"]} == hits
    assert {r["trajectory_id"]: r["axes"]["faithfulness"]["score"] for r in record["results"]} == {"t0": 1.0, "t1": 1.0}
    assert record["ledger"]["cache_read_only"] is True
    assert stats["exit"] == 0 and json.loads(stats["stdout"]) | {"bytes": 0} == {
        "directory": str(case.cache), "exists": True, "writable": False, "entries": 2, "fingerprints": 2,
        "foreign_entries": 0, "bytes": 0}
    read_only_error = f"judgekit: error: {case.cache}: the verdict cache cannot be written here (read-only)\n"
    assert (prune["exit"], prune["stderr"]) == (2, read_only_error)
    assert (clear["exit"], clear["stderr"]) == (2, read_only_error)
    assert {p.name: p.read_bytes() for p in case.cache.iterdir()} == frozen


def test_a_read_only_folder_without_a_cache(tmp_path, server):
    folder = tmp_path / "empty-cache"
    folder.mkdir()

    def work():
        return [invoke("cache", "stats", "--cache-dir", folder),
                invoke("cache", "prune", "--cache-dir", folder, "--older-than-days", "1"),
                invoke("cache", "clear", "--cache-dir", folder)]

    stats, prune, clear = read_only(folder, work)
    assert (stats["exit"], json.loads(stats["stdout"])["entries"], json.loads(stats["stdout"])["writable"]) == (0, 0, False)
    read_only_error = f"judgekit: error: {folder}: the verdict cache cannot be written here (read-only)\n"
    assert (prune["exit"], prune["stderr"]) == (2, read_only_error)  # was an internal error (exit 1)
    assert (clear["exit"], clear["stderr"]) == (2, read_only_error)
    assert list(folder.iterdir()) == []


def test_stats_on_an_empty_folder_creates_no_database(tmp_path):
    folder = tmp_path / "empty-cache"
    folder.mkdir()
    result = judgekit("cache", "stats", "--cache-dir", folder)
    assert result.exit_code == 0
    assert json.loads(result.stdout) == {"directory": str(folder), "exists": True, "writable": True,
                                         "entries": 0, "fingerprints": 0, "foreign_entries": 0, "bytes": 0}
    assert list(folder.iterdir()) == []


# --- a folder that is not there --------------------------------------------------------------------

MISSING = [
    pytest.param(["stats"], '{\n  "directory": "{dir}",\n  "exists": false,\n  "entries": 0,\n  "bytes": 0\n}\n', id="stats"),
    pytest.param(["clear"], "no verdict cache at {dir}: nothing to clear\n", id="clear"),
    pytest.param(["prune", "--older-than-days", "1"], "no verdict cache at {dir}: nothing to prune\n", id="prune"),
]


@pytest.mark.parametrize(("command", "said"), MISSING)
def test_a_missing_cache_folder_is_never_created(tmp_path, command, said):
    folder = tmp_path / "not-here" / "cache"
    result = judgekit("cache", *command, "--cache-dir", folder)
    assert (result.exit_code, result.stdout, result.stderr) == (0, said.replace("{dir}", str(folder)), "")
    assert list(tmp_path.iterdir()) == []


def test_a_cache_folder_that_is_a_file(tmp_path, server, base):
    c = Case(tmp_path, base)
    suite = c.project / "suite.yaml"
    suite.write_text(suite.read_text() + "cache_dir: not-a-folder\n")
    (c.project / "not-a-folder").write_text("a file")
    run = judgekit("run", c.project)
    assert (run.exit_code, run.stderr) == (2, f"judgekit: error: {c.project / 'not-a-folder'}: the verdict cache "
                                              "folder is a file\n")
    assert (c.project / "not-a-folder").read_text() == "a file"



class _HeldLock:
    """Another process's writer in the middle of a transaction on the cache's database."""

    def __init__(self, db: Path):
        self.conn = sqlite3.connect(db, timeout=0, isolation_level=None)

    def __enter__(self):
        self.conn.execute("BEGIN IMMEDIATE")
        return self

    def __exit__(self, *exc):
        self.conn.execute("ROLLBACK")
        self.conn.close()


def test_a_cache_another_process_keeps_locked_is_an_input_error_and_loses_nothing(tmp_path, base, monkeypatch):
    # A second run writing to the same cache (or a stuck one) holds SQLite's write lock: past the
    # wait, storing is an InputError that names the folder and says it is locked (never a raw
    # diskcache.Timeout, never the advice to clear a cache that is fine), and what it holds stays.
    import judgekit.cache.store as cache_module
    from judgekit.cache.store import VerdictCache
    from judgekit.errors import InputError

    project = tmp_path / "project"
    shutil.copytree(base["project"], project)
    monkeypatch.setattr(cache_module, "SETTINGS", {**cache_module.SETTINGS, "timeout": 0.2})
    key = base["keys"]["t0"]
    with VerdictCache(project / "cache") as store:
        verdict = store.get(key, "faithfulness")
        assert verdict is not None
        with _HeldLock(project / "cache" / "cache.db"), pytest.raises(InputError) as caught:
            store.put_many([(key, verdict)])
        assert "locked for more than 0.2 s" in str(caught.value) and "clear" not in str(caught.value)
        assert str(caught.value.path) == str(project / "cache")
        store.put_many([(key, verdict)])  # the lock gone, the same write goes through
        assert store.get(key, "faithfulness") == verdict and store.get(base["keys"]["t1"], "faithfulness")


def test_a_cache_locked_while_it_is_opened_says_so(tmp_path, base, monkeypatch):
    # diskcache retries opening a locked database for 60 s, then SQLite says "database is
    # locked": that is the same clear error, not "unreadable". (Its clock runs fast here.)
    import diskcache.core

    from judgekit.cache.store import VerdictCache
    from judgekit.errors import InputError

    class FastClock:
        now = 0.0

        def time(self):
            FastClock.now += 30.0
            return FastClock.now

        def sleep(self, seconds):
            pass

    project = tmp_path / "project"
    shutil.copytree(base["project"], project)
    monkeypatch.setattr(diskcache.core, "time", FastClock())
    with _HeldLock(project / "cache" / "cache.db"), pytest.raises(InputError) as caught:
        VerdictCache(project / "cache")
    assert "locked for more than 60 s" in str(caught.value) and "unreadable" not in str(caught.value)
    monkeypatch.undo()
    with VerdictCache(project / "cache") as store:  # nothing was lost
        assert store.get(base["keys"]["t0"], "faithfulness") is not None


class _FastClock:
    """diskcache's clock, running 30 s a reading: its 60 s wait on a locked database ends at once."""

    def __init__(self):
        self.now = 0.0

    def time(self):
        self.now += 30.0
        return self.now

    def sleep(self, seconds):
        pass


def test_cache_clear_never_removes_a_cache_another_process_holds_locked(tmp_path, base, monkeypatch):
    # Locked is not unreadable: clearing would unlink files another process still writes to,
    # and everything it stores afterwards would be lost.
    import diskcache.core

    project = tmp_path / "project"
    shutil.copytree(base["project"], project)
    before = sorted(os.listdir(project / "cache"))
    monkeypatch.setattr(diskcache.core, "time", _FastClock())
    with _HeldLock(project / "cache" / "cache.db"):
        cleared = CliRunner().invoke(main, ["cache", "clear", "--cache-dir", str(project / "cache")])
    assert cleared.exit_code == 2, cleared.output
    assert "locked" in cleared.stderr and "removed" not in cleared.output
    assert set(before) <= set(os.listdir(project / "cache"))  # SQLite's -wal and -shm come with the lock
    monkeypatch.undo()
    from judgekit.cache.store import VerdictCache

    with VerdictCache(project / "cache") as store:
        assert store.get(base["keys"]["t0"], "faithfulness") is not None


def test_a_read_only_cache_whose_readers_are_locked_out_says_so_and_never_reads_a_stale_file(tmp_path, base,
                                                                                               monkeypatch):
    # A process in exclusive locking mode keeps even readers out. Reading the database file as
    # immutable then would skip what that process committed to the WAL and answer from a stale
    # file without a word: the read-only cache (a dry run, a read-only checkout) stops instead.
    import judgekit.cache.files as cache_files
    from judgekit.cache.store import VerdictCache
    from judgekit.errors import InputError

    project = tmp_path / "project"
    shutil.copytree(base["project"], project)
    monkeypatch.setattr(cache_files, "LOCK_WAIT_S", 0.2)
    holder = sqlite3.connect(project / "cache" / "cache.db", timeout=0, isolation_level=None)
    try:
        holder.execute("PRAGMA locking_mode=EXCLUSIVE")
        holder.execute("BEGIN EXCLUSIVE")
        holder.execute("UPDATE Settings SET value = value WHERE key = 'count'")
        holder.execute("COMMIT")  # the exclusive lock stays until the connection closes
        with pytest.raises(InputError) as caught:
            VerdictCache(project / "cache", read_only=True)
        assert "locked for more than 0.2 s" in str(caught.value)
    finally:
        holder.close()
    with VerdictCache(project / "cache", read_only=True) as store:  # the lock gone, read as ever
        assert store.get(base["keys"]["t0"], "faithfulness") is not None


def test_a_fresh_process_prunes_no_verdict_younger_than_asked(case):
    """`judgekit cache prune` in a process of its own, which loads no axis table: every stored
    verdict was read as refused there, and pruned, however new (found by a hostile review)."""
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    command = [sys.executable, "-m", "judgekit", "cache"]
    before = json.loads(subprocess.run([*command, "stats", "--cache-dir", str(case.cache)], capture_output=True,
                                       text=True, env=env, check=True).stdout)["entries"]
    pruned = subprocess.run([*command, "prune", "--cache-dir", str(case.cache), "--older-than-days", "10000"],
                            capture_output=True, text=True, env=env)
    assert (pruned.returncode, pruned.stdout) == (0, "removed 0 verdict(s)\n"), pruned.stderr
    after = json.loads(subprocess.run([*command, "stats", "--cache-dir", str(case.cache)], capture_output=True,
                                      text=True, env=env, check=True).stdout)["entries"]
    assert before > 0 and after == before
