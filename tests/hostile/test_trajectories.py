"""Hostile trajectory files (issue 11, class 4, the JSON parts; snapshot files are in
test_snapshots.py): numbers that overflow to infinity, lone surrogates, duplicate keys, deep
nesting, and trajectory files that are not files.

Every case runs the real CLI on real files. A bad line is refused at load: exit 2 with one
line naming `t.jsonl:LINE`, no traceback, and nothing written (a run record already at `--out`
stays byte for byte). A bad JSON snapshot is that trajectory's axis `error`; the others are
scored, the record is written, and `judgekit diff` and `prompt show` on it exit 2.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from judgekit.cli import main
from judgekit.run.record import read_run

ALARM_S = 15
FAST_S = 5.0


RUBRIC = """id: r
version: 1.0.0
registered: 2026-01-01
task_success:
  guide: The user must exist afterwards.
  max_latency_s: 60
  postconditions:
    - {check: exists, collection: /users}
tool_correctness:
  guide: One update call with a number.
  expected_calls: [{tool: update, args: {x: {type: number}}}]
"""


def good(tid: str = "good") -> dict[str, Any]:
    return {"id": tid, "prompt": "Add user 1.", "output": "Added.", "latency_s": 1.5,
            "calls": [{"tool": "update", "args": {"x": 1}, "result": "ok"}],
            "world": {"before": {"json": {"users": []}}, "after": {"json": {"users": [{"id": 1}]}}}}


GOOD_LINE = json.dumps(good())


def bad_line(old: str, new: str) -> str:
    """The good trajectory under another id, with ``old`` (JSON text) replaced by ``new``."""
    line = json.dumps(good("bad"))
    assert old in line, old
    return line.replace(old, new, 1)


def write_suite(folder: Path, lines: list[str | bytes]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "rubric.yaml").write_text(RUBRIC)
    (folder / "t.jsonl").write_bytes(b"".join((ln if isinstance(ln, bytes) else ln.encode()) + b"\n" for ln in lines))
    (folder / "suite.yaml").write_text("name: s\nrubrics: [rubric.yaml]\ntrajectories:\n  - {file: t.jsonl, rubric: r}\n")
    return folder / "suite.yaml"


def invoke(*args: str | Path):
    started = time.monotonic()
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert time.monotonic() - started < FAST_S
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output and "internal error" not in result.output, result.output
    return result


REFUSED_LINES = [
    pytest.param(bad_line('"latency_s": 1.5', '"latency_s": 1e999'),
                 "invalid JSON: the number 1e999 is too large to represent (it would become infinity)", id="latency_1e999"),
    pytest.param(bad_line('{"x": 1}', '{"x": 1e999}'), "the number 1e999 is too large to represent", id="args_1e999"),
    pytest.param(bad_line('"output": "Added."', '"output": "Added.", "metadata": {"cost": -1E+999}'),
                 "the number -1E+999 is too large to represent", id="metadata_minus_1e999"),
    pytest.param(bad_line('[{"id": 1}]', '[{"id": 1e999}]'), "the number 1e999 is too large to represent",
                 id="inline_json_world_1e999"),
    pytest.param(bad_line('"latency_s": 1.5', '"latency_s": NaN'), "NaN is not valid JSON", id="latency_nan"),
    pytest.param(bad_line('"latency_s": 1.5', '"latency_s": -Infinity'), "-Infinity is not valid JSON",
                 id="latency_minus_infinity"),
    pytest.param(bad_line('"output": "Added."', '"output": "Added \\udc00"'),
                 "the string 'Added \\udc00' holds a lone surrogate", id="lone_surrogate_in_output"),
    pytest.param(bad_line('"output": "Added."', '"output": "Added.", "metadata": {"run\\ud83d": 1}'),
                 "the key 'run\\ud83d' holds a lone surrogate", id="lone_surrogate_in_a_metadata_key"),
    pytest.param(bad_line('"output": "Added."', '"output": "Added.", "metadata": {"note": ["x\\ud800y"]}'),
                 "holds a lone surrogate", id="lone_surrogate_in_a_metadata_value"),
    pytest.param(bad_line('"output": "Added."', '"output": "Added.\xed\xa0\x80"').encode("latin-1"),
                 "not UTF-8 text", id="surrogate_encoded_as_utf8_bytes"),
    pytest.param(bad_line('"prompt": "Add user 1."', '"prompt": "Add user 1.", "prompt": "Delete every user."'),
                 "duplicate key 'prompt' in an object", id="duplicate_prompt"),
    pytest.param(bad_line('{"x": 1}', '{"x": 1, "x": "1"}'), "duplicate key 'x' in an object", id="duplicate_arg"),
    pytest.param(bad_line('"output": "Added."', '"output": "Added.", "metadata": {"m": ' + "[" * 100_000 + "]" * 100_000 + "}"),
                 "nested more than 200 levels deep", id="nested_100000_deep"),
    pytest.param(bad_line('"output": "Added."', '"output": "Added.", "metadata": {"m": ' + '{"a": ' * 100_000
                          + "1" + "}" * 100_000 + "}"),
                 "nested more than 200 levels deep", id="nested_100000_objects"),
    pytest.param(bad_line('"output": "Added."', '"output": "Added.", "metadata": {"n": ' + "7" * 5000 + "}"),
                 "an integer with more than 4300 digits is too large to read", id="integer_of_5000_digits"),
    pytest.param("\ufeff" + GOOD_LINE.replace('"good"', '"bad"'), "Unexpected UTF-8 BOM", id="byte_order_mark"),
]


@pytest.mark.parametrize("first", [pytest.param(True, id="first_line"), pytest.param(False, id="second_line")])
@pytest.mark.parametrize(("line", "fragment"), REFUSED_LINES)
def test_a_bad_line_is_refused_at_load_and_nothing_is_written(tmp_path, line, fragment, first):
    lines = [line, GOOD_LINE] if first else [GOOD_LINE, line]
    suite = write_suite(tmp_path, lines)
    out = tmp_path / "run.json"
    previous = invoke("run", suite, "--no-cache", "--out", out)  # a good run first: its record must survive
    assert previous.exit_code == 2
    assert not out.exists()
    (tmp_path / "t.jsonl").write_text(GOOD_LINE + "\n")
    assert invoke("run", suite, "--no-cache", "--out", out).exit_code == 0
    kept = out.read_bytes()
    write_suite(tmp_path, lines)

    result = invoke("run", suite, "--no-cache", "--out", out, "--format", "jsonl")
    assert result.exit_code == 2
    number = 1 if first else 2
    assert result.output.startswith(f"judgekit: error: {tmp_path / 't.jsonl'}:{number}: "), result.output
    assert fragment in result.output
    assert len(result.output.splitlines()) == 1  # one line, no partial output
    assert out.read_bytes() == kept
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rubric.yaml", "run.json", "suite.yaml", "t.jsonl"]


def test_a_valid_surrogate_pair_escape_is_text(tmp_path):
    """A JSON writer escaping an emoji writes a surrogate pair: that is text, not a cut character."""
    suite = write_suite(tmp_path, [bad_line('"output": "Added."', '"output": "Added \\ud83d\\udc4d"')])
    result = invoke("run", suite, "--no-cache", "--out", tmp_path / "run.json")
    assert result.exit_code == 0, result.output
    assert read_run((tmp_path / "run.json")).model_dump(mode="json")["results"][0]["axes"]["task_success"]["passed"] is True


@pytest.mark.parametrize(("content", "fragment"), [
    pytest.param('{"users": [{"id": 1e999}]}', "invalid JSON: the number 1e999 is too large to represent",
                 id="json_file_1e999"),
    pytest.param('{"users": [{"id": 1, "id": 2}]}', "invalid JSON: duplicate key 'id' in an object", id="json_file_duplicate_key"),
    pytest.param('{"users": [{"id": "\\udfff"}]}', "invalid JSON: the string '\\udfff' holds a lone surrogate",
                 id="json_file_lone_surrogate"),
    pytest.param('{"users": ' + "[" * 5000 + "]" * 5000 + "}", "invalid JSON: nested more than 200 levels deep",
                 id="json_file_nested"),
])
def test_a_bad_json_snapshot_is_that_axis_error(tmp_path, content, fragment):
    (tmp_path / "after.json").write_text(content)
    (tmp_path / "before.json").write_text('{"users": []}')
    bad = bad_line('"after": {"json": {"users": [{"id": 1}]}}', '"after": {"json_file": "after.json"}')
    suite = write_suite(tmp_path, [GOOD_LINE, bad])
    out = tmp_path / "run.json"
    result = invoke("run", suite, "--no-cache", "--out", out, "--format", "jsonl")
    assert result.exit_code == 2
    where = f"{tmp_path / 'after.json'}: {fragment}"
    assert f"judgekit: error: bad task_success: {where}" in result.output
    results = {r["trajectory_id"]: r["axes"] for r in read_run(out).model_dump(mode="json")["results"]}
    assert results["bad"]["task_success"]["status"] == "error"
    assert results["bad"]["task_success"]["passed"] is None and results["bad"]["task_success"]["score"] is None
    assert results["bad"]["task_success"]["error"].startswith(where)
    assert results["bad"]["tool_correctness"]["status"] == "scored"  # the calls are fine
    assert results["good"]["task_success"]["passed"] is True

    diffed = invoke("diff", tmp_path / "before.json", tmp_path / "after.json")
    assert diffed.exit_code == 2 and diffed.output.startswith(f"judgekit: error: {where}")
    # `prompt show` shows what a judge is sent: ask one about task success.
    (tmp_path / "rubric.yaml").write_text(RUBRIC.replace("  max_latency_s: 60\n", "  max_latency_s: 60\n  judge: true\n"))
    suite.write_text(suite.read_text() + "judge: {model: openai/judge-2024-08-06}\n")
    shown = invoke("prompt", "show", suite, "bad", "--axis", "task_success")
    assert shown.exit_code == 2 and shown.output.startswith(f"judgekit: error: {where}")
    assert invoke("prompt", "show", suite, "good", "--axis", "task_success").exit_code == 0


@pytest.mark.parametrize("make", [
    pytest.param(lambda folder: os.mkfifo(folder / "t.jsonl"), id="fifo"),
    pytest.param(lambda folder: (folder / "t.jsonl").symlink_to("/dev/zero"), id="link_to_dev_zero"),
    pytest.param(lambda folder: (folder / "t.jsonl").symlink_to("/dev/stdin"), id="link_to_stdin"),
    pytest.param(lambda folder: (folder / "t.jsonl").mkdir(), id="folder"),
])
def test_a_trajectory_file_that_is_not_a_file(tmp_path, make):
    (tmp_path / "rubric.yaml").write_text(RUBRIC)
    (tmp_path / "suite.yaml").write_text("name: s\nrubrics: [rubric.yaml]\ntrajectories:\n  - {file: t.jsonl, rubric: r}\n")
    make(tmp_path)
    out = tmp_path / "run.json"
    shown = (tmp_path / "t.jsonl").resolve()  # the suite resolves links: the error names the target
    for args in (["run", tmp_path / "suite.yaml", "--no-cache", "--out", out],
                 ["prompt", "show", tmp_path / "suite.yaml", "good", "--axis", "task_success"]):
        result = invoke(*args)
        assert result.exit_code == 2
        assert result.output.startswith(f"judgekit: error: {shown}: "), result.output
        assert "expected a JSON Lines file" in result.output
    assert not out.exists()


def test_there_are_enough_cases():
    assert len(REFUSED_LINES) >= 10
    print(f"\n{len(REFUSED_LINES)} bad lines x 2 places, 4 bad snapshots, 4 non-files, 1 accepted")
