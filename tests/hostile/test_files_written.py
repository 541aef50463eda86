"""Hostile inputs to the files judgekit writes (issue 11, class 6): labels files that are not
files, held by another session, or cut off mid-line; side files that point elsewhere; output
paths that cannot be written; an ``--n-boot`` typo.

Every case runs the real command in a child process with a time limit and asserts the exact
outcome: the exit code, the message naming the file, and that nothing was lost or changed
(the labels file byte for byte, a cut-off line kept whole in ``<labels>.torn``).
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from judgekit._util.files import ensure_writable, write_text_atomically
from judgekit.calibration.labels import load_labels
from judgekit.errors import InputError

CLI = [sys.executable, "-c", "from judgekit.cli import main; main()"]
LIMIT_S = 20  # "no hang": every case ends well within this

GOOD = b'{"trajectory_id": "t0", "axis": "faithfulness", "score": 1, "labeler": "old", "labeled_at": "2026-01-01T00:00:00Z"}\n'
MINE = b'{"trajectory_id": "t0", "axis": "faithfulness", "score": 1, "labeler": "a", "labeled_at": "2026-01-01T00:00:00Z"}'
SENTINEL = b"outside the labels folder: must never change\n"
HELD = "another `judgekit label` session holds this labels file; finish or quit it first (or label into another file with --labels)"


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    """Two trajectories, a faithfulness-only rubric, no world snapshots."""
    folder = tmp_path / "suite"
    folder.mkdir()
    (folder / "rubric.yaml").write_text(
        "id: r\nversion: 1.0.0\nregistered: 2026-01-01\n"
        "faithfulness:\n  guide: Every claim must come from a tool result.\n", encoding="utf-8")
    lines = [json.dumps({"id": f"t{i}", "prompt": "Capital of France?", "output": "Paris.",
                         "calls": [{"tool": "lookup", "args": {}, "result": {"capital": "Paris"}}]}) for i in range(2)]
    (folder / "t.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (folder / "suite.yaml").write_text("name: s\nrubrics: [rubric.yaml]\ntrajectories:\n  - {file: t.jsonl, rubric: r}\n",
                                       encoding="utf-8")
    return folder


def judgekit(*args: str | Path, input: str = "", cwd: Path | None = None) -> subprocess.CompletedProcess:
    started = time.monotonic()
    done = subprocess.run([*CLI, *map(str, args)], input=input, capture_output=True, text=True, timeout=LIMIT_S,
                          cwd=cwd, check=False)
    assert time.monotonic() - started < LIMIT_S
    return done


def snapshot(root: Path) -> dict[str, bytes | str]:
    """Every entry under ``root``: file bytes, or what kind of thing it is."""
    found: dict[str, bytes | str] = {}
    for path in sorted(root.rglob("*")):
        key = str(path.relative_to(root))
        if path.is_symlink():
            found[key] = f"link -> {os.readlink(path)}"
        elif path.is_file():
            found[key] = path.read_bytes()
        else:
            found[key] = "folder" if path.is_dir() else "special"
    return found


# --- labels files that must be refused, with nothing changed -----------------------------------


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def _file_then(path: Path, content: bytes) -> Path:
    path.write_bytes(content)
    return path


def _side(labels: Path, make) -> Path:
    """A labels file with a cut-off last line, and its side file already made hostile."""
    labels.write_bytes(GOOD + b'{"trajectory_id": "t1", "ax')
    make(labels.with_name(labels.name + ".torn"))
    return labels


REFUSED = [
    pytest.param(lambda d: _fifo(d / "l.jsonl"), "{labels}: not a regular file (a device, FIFO or socket), expected a labels file",
                 id="labels_is_a_fifo"),
    pytest.param(lambda d: (d / "l.jsonl").symlink_to(_fifo(d / "pipe")) or d / "l.jsonl",
                 "{labels}: not a regular file (a device, FIFO or socket), expected a labels file", id="labels_links_to_a_fifo"),
    pytest.param(lambda d: Path("/dev/null"), "/dev/null: not a regular file (a device, FIFO or socket), expected a labels file",
                 id="labels_is_dev_null_labels_would_vanish"),
    pytest.param(lambda d: Path("/dev/zero"), "/dev/zero: not a regular file (a device, FIFO or socket), expected a labels file",
                 id="labels_is_dev_zero"),
    pytest.param(lambda d: (d / "l.jsonl").symlink_to(d / "nowhere") or d / "l.jsonl",
                 "{labels}: is a link to nothing, expected a labels file", id="labels_is_a_dangling_link"),
    pytest.param(lambda d: _file_then(d / "plain", b"x") / "l.jsonl",
                 "{labels}: cannot open the labels file to append to it: Not a directory", id="labels_parent_is_a_file"),
    pytest.param(lambda d: _file_then(d / "plain", b"x") / "sub" / "l.jsonl",
                 "{d}/plain/sub: cannot create the folder for the labels file: Not a directory", id="labels_grandparent_is_a_file"),
    pytest.param(lambda d: _side(d / "l.jsonl", lambda s: s.symlink_to(d / "sentinel")),
                 "{side}: cannot set a cut-off line aside here: Too many levels of symbolic links",
                 id="side_file_is_a_link_to_a_file_outside"),
    pytest.param(lambda d: _side(d / "l.jsonl", lambda s: s.mkdir()),
                 "{side}: cannot set a cut-off line aside here: Is a directory", id="side_file_is_a_folder"),
    pytest.param(lambda d: _side(d / "l.jsonl", _fifo),
                 "{side}: not a regular file; cannot set a cut-off line aside here", id="side_file_is_a_fifo"),
    pytest.param(lambda d: _file_then(d / "l.jsonl", GOOD + b'{"bad": \n' + GOOD[:40]),
                 "{labels}:2: invalid JSON: Expecting value (column 1)", id="bad_middle_line_before_a_torn_last_line"),
    pytest.param(lambda d: _file_then(d / "l.jsonl", GOOD + GOOD.rstrip(b"\n")),
                 "{labels}:2: 'old' labels 't0' on faithfulness twice (lines 1 and 2); keep one",
                 id="unterminated_last_line_is_a_valid_duplicate_label"),
    pytest.param(lambda d: _file_then(d / "l.jsonl", b"\xff\xfe not text\n" + GOOD[:30]),
                 "{labels}:1: not UTF-8 text", id="binary_first_line_and_a_torn_last_line"),
]


@pytest.mark.parametrize("make, message", REFUSED)
def test_labels_file_refused_with_nothing_changed(suite: Path, tmp_path: Path, make, message: str):
    work = tmp_path / "work"
    work.mkdir()
    (work / "sentinel").write_bytes(SENTINEL)
    labels = make(work)
    before = snapshot(work)
    done = judgekit("label", suite, "--sample", "2", "--seed", "0", "--labeler", "a", "--labels", labels, input="1\n\n" * 2)
    side = labels.with_name(labels.name + ".torn")
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr == f"judgekit: error: {message.format(labels=labels, side=side, d=work)}\n"
    assert "trajectory t" not in done.stdout  # refused before showing anything
    assert snapshot(work) == before
    assert (work / "sentinel").read_bytes() == SENTINEL


def test_labels_held_by_another_session_is_refused(suite: Path, tmp_path: Path):
    labels = _file_then(tmp_path / "l.jsonl", GOOD)
    with open(labels, "rb") as holder:
        fcntl.flock(holder, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as a running session holds it
        done = judgekit("label", suite, "--sample", "2", "--seed", "0", "--labeler", "old", "--labels", labels,
                        input="1\n\n" * 2)
    assert done.returncode == 2 and done.stderr == f"judgekit: error: {labels}: {HELD}\n"
    assert labels.read_bytes() == GOOD and sorted(os.listdir(tmp_path)) == ["l.jsonl", "suite"]


def test_labels_path_that_is_a_folder_is_a_usage_error(suite: Path, tmp_path: Path):
    (tmp_path / "l.jsonl").mkdir()
    done = judgekit("label", suite, "--sample", "1", "--seed", "0", "--labeler", "a", "--labels", tmp_path / "l.jsonl")
    assert done.returncode == 2 and f"'{tmp_path / 'l.jsonl'}' is a directory" in done.stderr
    assert os.listdir(tmp_path / "l.jsonl") == []


# --- cut-off last lines: set aside whole, the session goes on ----------------------------------

SET_ASIDE = [
    pytest.param(b'{"trajectory_id": "t1", "axis": "faithf', id="json_cut_mid_string"),
    pytest.param(b"\xff\xfe\x00\x80 binary garbage \x1b[2J", id="not_utf8_with_escapes"),
    pytest.param(b"\x00" * 4096, id="zeros_a_crash_leaves_after_a_size_update"),
    pytest.param(b'{"trajectory_id": "t1"}', id="valid_json_not_a_label"),
    pytest.param(b'{"trajectory_id": "t1", "axis": "faithfulness", "score": 7, "labeler": "z", "labeled_at": "2026-01-01T00:00:00Z"}',
                 id="complete_json_score_out_of_range"),
    pytest.param(b'{"a": "' + b"x" * (1 << 20), id="one_mebibyte_without_newline"),
    pytest.param(b"[" * 100_000, id="nested_100k_deep"),
]


@pytest.mark.parametrize("torn", SET_ASIDE)
def test_torn_last_line_is_kept_in_the_side_file_and_the_session_resumes(suite: Path, tmp_path: Path, torn: bytes):
    labels = _file_then(tmp_path / "l.jsonl", GOOD + torn)
    done = judgekit("label", suite, "--sample", "2", "--seed", "0", "--labeler", "a", "--labels", labels,
                    input="0.5\n\n" * 2)
    assert done.returncode == 0, done.stderr
    side = tmp_path / "l.jsonl.torn"
    assert (f"note: {labels}:2: the last line is cut off ({len(torn)} bytes without a newline, not a complete label), "
            f"as a crash mid-write leaves it; set aside in {side} and removed from the labels file") in done.stdout
    assert side.read_bytes() == torn + b"\n"  # nothing lost: every byte, as one line
    assert labels.read_bytes().startswith(GOOD)
    assert sorted((lab.labeler, lab.trajectory_id) for lab in load_labels(labels)) == [("a", "t0"), ("a", "t1"), ("old", "t0")]
    assert "labelled 2; every item" in done.stdout


@pytest.mark.parametrize("tail", [
    pytest.param(MINE, id="valid_label_without_newline"),
    pytest.param(b"   \t", id="blank_without_newline"),
])
def test_unterminated_last_line_that_is_no_damage_is_kept(suite: Path, tmp_path: Path, tail: bytes):
    labels = _file_then(tmp_path / "l.jsonl", GOOD + tail)
    done = judgekit("label", suite, "--sample", "2", "--seed", "0", "--labeler", "a", "--labels", labels,
                    input="0.5\n\n" * 2)
    assert done.returncode == 0, done.stderr
    assert "cut off" not in done.stdout and not (tmp_path / "l.jsonl.torn").exists()
    assert labels.read_bytes().startswith(GOOD + tail + b"\n")
    assert len(load_labels(labels)) == 3
    assert f"({1 if tail == MINE else 0} already done)" in done.stdout


@pytest.mark.parametrize("command", [
    pytest.param(lambda labels, tmp: ["agreement", "--labels", labels, "--verdicts", tmp / "v.jsonl"], id="agreement"),
    pytest.param(lambda labels, tmp: ["calibrate", tmp / "suite" / "suite.yaml", "--labels", labels], id="calibrate"),
])
def test_calibration_names_the_torn_line_and_the_way_out(suite: Path, tmp_path: Path, command):
    labels = _file_then(tmp_path / "l.jsonl", GOOD + b'{"trajectory_id": "t1", "ax')
    (tmp_path / "v.jsonl").write_text('{"trajectory_id": "t0", "axis": "faithfulness", "score": 1}\n')
    done = judgekit(*command(labels, tmp_path))
    assert done.returncode == 2
    assert done.stderr == (f"judgekit: error: {labels}:2: invalid JSON: Unterminated string starting at (column 25); "
                           "this last line has no newline, as when a crash cuts a write short: `judgekit label` on this "
                           "file sets it aside into l.jsonl.torn, or delete the line\n")
    assert labels.read_bytes() == GOOD + b'{"trajectory_id": "t1", "ax' and not (tmp_path / "l.jsonl.torn").exists()


# --- agreement --n-boot ------------------------------------------------------------------------


@pytest.mark.parametrize("value", [
    pytest.param("1000000", id="a_typo_of_ten_times_the_bound"),
    pytest.param("100001", id="just_past_the_bound"),
    pytest.param("-1", id="negative"),
    pytest.param("1e9", id="not_an_integer"),
])
def test_n_boot_out_of_bounds_is_refused_at_once(tmp_path: Path, value: str):
    labels = _file_then(tmp_path / "l.jsonl", GOOD)
    (tmp_path / "v.jsonl").write_text('{"trajectory_id": "t0", "axis": "faithfulness", "score": 1}\n')
    started = time.monotonic()
    done = judgekit("agreement", "--labels", labels, "--verdicts", tmp_path / "v.jsonl", "--n-boot", value)
    assert done.returncode == 2 and time.monotonic() - started < 10
    assert "Invalid value for '--n-boot'" in done.stderr
    if value != "1e9":
        assert "0<=x<=100000" in done.stderr


def test_n_boot_bound_is_in_the_help():
    done = judgekit("agreement", "--help")
    text = " ".join(done.stdout.split())
    assert done.returncode == 0 and "resamples for the 95% intervals, 0 to 100000" in text and "0<=x<=100000" in text


# --- output paths --------------------------------------------------------------------------------


def _write_both(path: Path) -> list[str]:
    """The errors of ensure_writable and write_text_atomically on ``path`` ('' for none)."""
    found = []
    for attempt in (lambda: ensure_writable(path), lambda: write_text_atomically(path, "{}\n")):
        try:
            attempt()
            found.append("")
        except InputError as exc:
            found.append(str(exc))
    return found


OUT = [
    pytest.param(lambda d: (d / "out").mkdir() or d / "out", "is a folder, expected a file to write",
                 "is a folder, expected a file to write", id="out_is_a_folder"),
    pytest.param(lambda d: (d / "out").symlink_to(_fifo(d / "pipe")) or d / "out",
                 "not a regular file (a device, FIFO or socket); cannot write it",
                 "not a regular file (a device, FIFO or socket); cannot replace it", id="out_links_to_a_fifo"),
    pytest.param(lambda d: (d / "out").symlink_to("/dev/null") or d / "out",
                 "not a regular file (a device, FIFO or socket); cannot write it",
                 "not a regular file (a device, FIFO or socket); cannot replace it", id="out_links_to_dev_null"),
    pytest.param(lambda d: _file_then(d / "plain", b"x") / "out.json", "cannot write: {d}/plain is not a folder",
                 "cannot write: {d}/plain is not a folder", id="out_parent_is_a_file"),
]


@pytest.mark.parametrize("make, checked, written", OUT)
def test_output_path_refused_before_and_at_the_write(tmp_path: Path, make, checked: str, written: str):
    out = make(tmp_path)
    before = snapshot(tmp_path)
    assert _write_both(out) == [f"{out}: {checked.format(d=tmp_path)}", f"{out}: {written.format(d=tmp_path)}"]
    assert snapshot(tmp_path) == before  # no temporary or probe file left, nothing replaced
