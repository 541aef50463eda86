"""Hostile run records, and the runs that write them.

Format 2 is JSON Lines (``{"header"}``, one ``{"result"}`` per trajectory, ``{"footer"}``);
``judgekit gate`` streams it (``open_run``), ``label --verdicts`` reads it whole (``read_run``),
and both take a format 1 document through ``MIGRATIONS``. Every refusal must be exit 2 with
one line naming the file (and the line where there is one), never a traceback or exit 3, and
never a gate decided on part of a file. ``judgekit run --out`` writes atomically: a run that
stops half-way (a bad line, a duplicate id, Ctrl-C, SIGTERM, a closed pipe) leaves no file and
no temporary file, and a previous record at the same path is kept byte for byte. Exit codes
tell a failed gate (1) from broken input (2) from an interruption. The table shows 40 rows and
counts the rest. A plan pickles without any secret.

Real parts only: the real CLI (``CliRunner`` in process, or a child process where a signal or
a pipe is the point), the scripted OpenAI-compatible server on 127.0.0.1, real calibration.
"""

from __future__ import annotations

import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # before anything imports litellm

import json
import pickle
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

import judgekit
from judgekit.cli import main
from judgekit.errors import ConfigError, InputError
from judgekit.gate import gate
from judgekit.run import plan_run, read_run
from judgekit.run.record import open_run
from judgekit.suite import load_suite
from judgekit.testing import Reply, ScriptedOpenAIServer

ALARM_S = 30
ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-c", "from judgekit.cli import main; main()"]
MODEL = "openai/judge-2024-08-06"
RUBRIC = {
    "id": "plan-change", "version": "1.0.0", "registered": "2026-11-30",
    "task_success": {
        "guide": "Pass only when user 1 is on the pro plan after the run and nothing else changed.",
        "postconditions": [{"check": "equals", "collection": "/users", "where": {"id": 1}, "field": "plan", "value": "pro"}],
    },
    "tool_correctness": {"guide": "One update of the plan.",
                         "expected_calls": [{"tool": "update_user", "args": {"plan": {"type": "string"}}}]},
}
FAITHFUL_RUBRIC = ("id: r\nversion: 1.0.0\nregistered: 2026-01-01\n"
                   "faithfulness:\n  guide: Every claim must come from a tool result.\n")
ANSWER = {"claims": [{"claim": "Paris is the capital", "supported": True,
                      "evidence": [{"id": "R0", "quote": '"capital": "Paris"'}]}]}


# --- fixtures: deterministic suites, their records -----------------------------------------------


def trajectory(i: int, passes: bool) -> dict:
    plan = "pro" if passes else "free"
    return {
        "id": f"t{i}", "prompt": "Move user 1 to the pro plan.",
        "calls": [{"tool": "update_user", "args": {"user_id": 1, "plan": plan}, "result": {"id": 1, "plan": plan}}],
        "output": f"User 1 is now on the {plan} plan.",
        "world": {"before": {"json": {"users": [{"id": 1, "plan": "free"}]}},
                  "after": {"json": {"users": [{"id": 1, "plan": plan}]}}},
    }


def make_suite(root: Path, n: int, *, fail_every: int | None = None) -> Path:
    """A suite of ``n`` deterministic trajectories; with ``fail_every`` k, t0, tk, t2k... fail
    task success (so the default gate, min 1.0, fails)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "rubric.yaml").write_text(yaml.safe_dump(RUBRIC, sort_keys=False))
    lines = [json.dumps(trajectory(i, not (fail_every and i % fail_every == 0))) for i in range(n)]
    (root / "t.jsonl").write_text("".join(line + "\n" for line in lines))
    suite = {"name": "records", "rubrics": ["rubric.yaml"], "trajectories": [{"file": "t.jsonl", "rubric": "plan-change"}]}
    (root / "suite.yaml").write_text(yaml.safe_dump(suite, sort_keys=False))
    return root / "suite.yaml"


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def record_of(tmp_path: Path, name: str, n: int = 5, *, fail_every: int | None = None) -> Path:
    suite = make_suite(tmp_path / f"suite-{name}", n, fail_every=fail_every)
    out = tmp_path / f"{name}.jsonl"
    ran = invoke("run", suite, "--out", out)
    assert ran.exit_code == 0, ran.output
    return out


def parts(path: Path) -> tuple[str, list[str], str]:
    lines = path.read_text().splitlines(keepends=True)
    return lines[0], lines[1:-1], lines[-1]


def line(kind: str, value: dict) -> str:
    return json.dumps({kind: value}) + "\n"


def gate_file(path: Path, text: str | bytes):
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return invoke("gate", path)


def assert_refused(result, path: Path, line_no: int | None, *words: str) -> None:
    """Exit 2, nothing on stdout, one error line naming the file (and line), no traceback."""
    assert result.exit_code == 2, (result.exit_code, result.output)
    assert result.stdout == ""
    err = result.stderr
    assert err.count("\n") == 1 and err.startswith("judgekit: error: "), err
    where = f"{path}:{line_no}: " if line_no is not None else f"{path}: "
    assert where in err, err
    assert "Traceback" not in err and "internal error" not in err
    for word in words:
        assert word in err, err


@pytest.fixture
def failing(tmp_path) -> Path:
    """5 trajectories, t0 and t3 fail task success: the gate fails (exit 1)."""
    return record_of(tmp_path, "failing", 5, fail_every=3)


@pytest.fixture
def passing(tmp_path) -> Path:
    return record_of(tmp_path, "passing", 5)


# --- 1. the reader: refusals that hold -----------------------------------------------------------


def _cases(H: str, R: list[str], F: str) -> dict:
    hd, ft = json.loads(H)["header"], json.loads(F)["footer"]
    r0 = json.loads(R[0])["result"]
    axes = r0["axes"]
    swapped = {**r0, "axes": {"tool_correctness": axes["task_success"], "task_success": axes["tool_correctness"]}}
    return {
        # name: (text, line named or None, words in the message)
        "no_footer": (H + "".join(R), None, ("ends without its footer",)),
        "header_only": (H, None, ("ends without its footer",)),
        "two_headers": (H + H + "".join(R) + F, 2, ("second header",)),
        "a_header_before_the_footer": (H + "".join(R) + H + F, len(R) + 2, ("second header",)),
        "footer_counts_more": (H + "".join(R) + line("footer", {**ft, "trajectories": 99}), len(R) + 2,
                               ("the footer counts 99 trajectories, the record holds 5",)),
        "footer_counts_fewer": (H + "".join(R) + line("footer", {**ft, "trajectories": 4}), len(R) + 2,
                                ("the footer counts 4 trajectories",)),
        "header_and_result_in_one_line": (json.dumps({"header": hd, "result": r0}) + "\n" + "".join(R) + F, 1,
                                          ("exactly one of header, result, footer",)),
        "footer_and_result_in_one_line": (H + json.dumps({"footer": ft, "result": r0}) + "\n" + "".join(R) + F, 2,
                                          ("exactly one of header, result, footer",)),
        "unknown_kind": (H + line("comment", {"x": 1}) + "".join(R) + F, 2, ("comment: unknown key",)),
        "empty_object": (H + "{}\n" + "".join(R) + F, 2, ("exactly one of",)),
        "null_result": (H + '{"result": null}\n' + "".join(R) + F, 2, ("exactly one of",)),
        "duplicate_key": (H + R[0].replace('"trajectory_id":"t0"', '"trajectory_id":"t0","trajectory_id":"t9"')
                          + "".join(R[1:]) + F, 2, ("duplicate key 'trajectory_id'",)),
        "nan": (H + R[0].replace('"score":1.0', '"score":NaN', 1) + "".join(R[1:]) + F, 2, ("NaN",)),
        "infinity": (H + R[0].replace('"score":1.0', '"score":1e999', 1) + "".join(R[1:]) + F, 2, ("too large",)),
        "format_version_4": (line("header", {**hd, "format_version": 4}) + "".join(R) + F, 1,
                             ("header.format_version",)),
        "another_format": (line("header", {**hd, "format": "other-tool"}) + "".join(R) + F, 1, ("header.format",)),
        "gate_policy_out_of_range": (line("header", {**hd, "gate": {**hd["gate"], "min": {"task_success": 1.5}}})
                                     + "".join(R) + F, 1, ("header.gate.min.task_success",)),
        "gate_policy_negative": (line("header", {**hd, "gate": {**hd["gate"], "max_unscored_rate": -0.1}})
                                 + "".join(R) + F, 1, ("header.gate.max_unscored_rate",)),
        "unknown_header_key": (line("header", {**hd, "approved_by": "me"}) + "".join(R) + F, 1, ("unknown key",)),
        "result_under_another_axis_name": (H + line("result", swapped) + "".join(R[1:]) + F, 2,
                                           ("'tool_correctness' holds a task_success result",)),
        "unknown_axis": (H + line("result", {**r0, "axes": {**axes, "vibes": axes["task_success"]}})
                         + "".join(R[1:]) + F, 2, ("'vibes' is not an axis",)),
        "not_utf8": (H.encode() + b'{"result": "\xff"}\n' + "".join(R).encode() + F.encode(), 2, ("not UTF-8",)),
        "empty_file": ("", 1, ()),
        "a_json_array": ("[1, 2]\n", None, ("not a run record",)),
    }


CASE_NAMES = [
    "no_footer", "header_only", "two_headers", "a_header_before_the_footer", "footer_counts_more", "footer_counts_fewer",
    "header_and_result_in_one_line", "footer_and_result_in_one_line", "unknown_kind", "empty_object", "null_result",
    "duplicate_key", "nan", "infinity", "format_version_4", "another_format", "gate_policy_out_of_range",
    "gate_policy_negative", "unknown_header_key", "result_under_another_axis_name", "unknown_axis", "not_utf8",
    "empty_file", "a_json_array",
]


@pytest.mark.parametrize("case", CASE_NAMES)
def test_a_broken_record_is_one_error_line_and_exit_2(failing, tmp_path, case):
    text, line_no, words = _cases(*parts(failing))[case]
    path = tmp_path / f"{case}.jsonl"
    assert_refused(gate_file(path, text), path, line_no, *words)


def test_hostile_text_in_a_refused_line_never_reaches_the_terminal_raw(failing, tmp_path):
    H, R, F = parts(failing)
    hd = json.loads(H)["header"]
    evil = "x\x1b]0;owned\x07\r\ngate: PASSED\x1b[2K\u202e"
    path = tmp_path / "evil\x1b[31m.jsonl"
    result = gate_file(path, line("header", {**hd, evil: 1}) + "".join(R) + F)
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1
    assert "\x1b" not in result.stderr and "\x07" not in result.stderr and "\r" not in result.stderr
    assert "\\x1b]0;owned" in result.stderr and "\\ngate: PASSED" in result.stderr


@pytest.mark.parametrize("kind", ["fifo", "dev_zero", "dev_null", "folder"])
def test_a_path_that_is_not_a_regular_file_is_refused_without_blocking(tmp_path, kind):
    path = {"dev_zero": Path("/dev/zero"), "dev_null": Path("/dev/null")}.get(kind, tmp_path / "run.jsonl")
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    started = time.monotonic()
    result = invoke("gate", path)
    assert time.monotonic() - started < 5
    assert result.exit_code == 2 and result.stdout == ""
    if kind != "folder":  # a folder is click's usage error
        assert_refused(result, path, None, "not a regular file")


def test_a_long_result_line_is_refused_by_its_length(failing, tmp_path, monkeypatch):
    """The 256 MiB line limit, scaled down: a result line past it is named, not read."""
    import judgekit._util.io as io

    monkeypatch.setattr(io, "MAX_LINE_BYTES", 4096)
    H, R, F = parts(failing)
    big = json.loads(R[0])
    big["result"]["metadata"] = {"padding": "A" * 10_000}
    path = tmp_path / "long.jsonl"
    assert_refused(gate_file(path, H + json.dumps(big) + "\n" + "".join(R[1:]) + F), path, 2, "longer than 4096 bytes")


def test_blank_lines_after_the_header_and_crlf_endings_gate_as_the_clean_record(failing, tmp_path):
    clean = invoke("gate", failing)
    assert clean.exit_code == 1 and clean.stdout.endswith("gate: FAILED\n")
    H, R, F = parts(failing)
    spaced = gate_file(tmp_path / "spaced.jsonl", H + "\n  \n" + "".join(R) + "\t\n" + F + "\n\n")
    crlf = gate_file(tmp_path / "crlf.jsonl", "".join(x.rstrip("\n") + "\r\n" for x in [H, *R, F]))
    assert (spaced.exit_code, spaced.stdout) == (crlf.exit_code, crlf.stdout) == (1, clean.stdout)


def _format_1(record: Path) -> dict:
    H, R, F = parts(record)
    hd, ft = json.loads(H)["header"], json.loads(F)["footer"]
    # format 1 named its suite from the working directory: absolute here (the gate reads its thresholds there)
    return {"format_version": 1, "suite": hd["suite"], "suite_path": str((record.parent / hd["suite_file"]).resolve()),
            "judgekit_version": "0.0.9", "started_at": hd["started_at"], "finished_at": ft["finished_at"],
            "rubrics": hd["rubrics"], "summary": ft["summary"], "ledger": None, "gate": hd["gate"],
            # format 1 wrote the calibration folder absolute, as the run resolved it
            "calibration_dir": str(read_run(record).calibration_path().resolve()),
            "results": [json.loads(r)["result"] for r in R]}


def test_a_format_1_record_gates_as_its_format_2_twin(failing, tmp_path):
    v1 = tmp_path / "v1.json"
    v1.write_text(json.dumps(_format_1(failing), indent=2))
    twin, old = invoke("gate", failing), invoke("gate", v1)
    assert old.exit_code == twin.exit_code == 1 and old.stdout == twin.stdout
    assert [r.trajectory_id for r in read_run(v1).results] == [r.trajectory_id for r in read_run(failing).results]


@pytest.mark.parametrize("change", ["extra_key", "format_version_3", "results_not_a_list", "no_results"])
def test_a_format_1_document_off_its_format_is_refused(failing, tmp_path, change):
    doc = _format_1(failing)
    if change == "extra_key":
        doc["gate_report"] = {"passed": True}
    elif change == "format_version_3":
        doc["format_version"] = 3
    elif change == "results_not_a_list":
        doc["results"] = {"t0": "pass"}
    else:
        del doc["results"]
    path = tmp_path / "v1.json"
    path.write_text(json.dumps(doc, indent=2))
    assert_refused(invoke("gate", path), path, None, "not a run record")


# --- 1. the reader: bugs -------------------------------------------------------------------------


def test_a_footer_followed_by_more_results_is_refused(tmp_path):
    """t0..t3 pass, t4..t5 fail. A footer after the 4 passing results (its count right for
    them), then the failing results and a footer counting all 6: the gate must not be decided
    on the first four."""
    record = record_of(tmp_path, "mixed", 6, fail_every=None)
    H, R, F = parts(record)
    failing = [json.loads(x) for x in parts(record_of(tmp_path, "bad", 6, fail_every=1))[1]]
    ft = json.loads(F)["footer"]
    text = (H + "".join(R[:4]) + line("footer", {**ft, "trajectories": 4})
            + "".join(json.dumps(x) + "\n" for x in failing[4:]) + F)
    path = tmp_path / "footer-in-the-middle.jsonl"
    assert invoke("gate", record).exit_code == 0  # the honest 6-pass record passes
    result = gate_file(path, text)
    assert result.exit_code == 2, (result.exit_code, result.stdout)  # today: exit 0, "gate: PASSED" on 4 of 6
    assert re.match(rf"judgekit: error: {re.escape(str(path))}:[67]: ", result.stderr), result.stderr


def test_two_records_in_one_file_are_refused_not_gated_on_the_first(tmp_path):
    """``cat pass.jsonl fail.jsonl > all.jsonl`` (or ``>>`` instead of ``>``): the second
    record's header comes after the first one's footer."""
    good = record_of(tmp_path, "good", 5)
    bad = record_of(tmp_path, "bad", 5, fail_every=1)
    assert invoke("gate", good).exit_code == 0 and invoke("gate", bad).exit_code == 1
    both = tmp_path / "both.jsonl"
    result = gate_file(both, good.read_bytes() + bad.read_bytes())
    assert result.exit_code == 2, (result.exit_code, result.stdout)  # today: exit 0, the first record alone
    assert_refused(result, both, 8)


def test_read_run_of_two_records_in_one_file_is_refused(tmp_path):
    """``label --verdicts`` reads through ``read_run``: it must not stratify on the first of
    two concatenated records without a word."""
    good = record_of(tmp_path, "good", 3)
    bad = record_of(tmp_path, "bad", 4, fail_every=1)
    both = tmp_path / "both.jsonl"
    both.write_bytes(good.read_bytes() + bad.read_bytes())
    with pytest.raises(InputError):
        read_run(both)


def test_a_result_before_the_header_is_named_as_such(failing, tmp_path):
    H, R, F = parts(failing)
    path = tmp_path / "result-first.jsonl"
    result = gate_file(path, R[0] + H + "".join(R[1:]) + F)
    # every line is valid JSON: "invalid JSON: Extra data" at line 2 sends the reader astray
    assert_refused(result, path, 1, "header")
    assert "invalid JSON" not in result.stderr


def test_a_first_line_past_the_line_limit_is_refused_by_its_length(failing, tmp_path, monkeypatch):
    """The 256 MiB line limit, scaled down to 4 KiB. A header line past it must be named as
    too long at line 1 (not read whole as a format 1 document and called invalid JSON at line
    2: with a real 300 MB header line that fallback reads the whole file, ~1 GB resident)."""
    import judgekit._util.io as io

    monkeypatch.setattr(io, "MAX_LINE_BYTES", 4096)
    H, R, F = parts(failing)
    hd = json.loads(H)["header"]
    path = tmp_path / "long-header.jsonl"
    result = gate_file(path, line("header", {**hd, "suite": "S" * 10_000}) + "".join(R) + F)
    assert_refused(result, path, 1, "longer than 4096 bytes")


def test_a_blank_first_line_is_skipped_like_any_other_blank_line(failing, tmp_path):
    clean = invoke("gate", failing)
    spaced = gate_file(tmp_path / "blank-first.jsonl", "\n" + failing.read_text())
    assert clean.exit_code == 1
    assert (spaced.exit_code, spaced.stdout) == (1, clean.stdout), spaced.output  # today: exit 2, "invalid JSON" at :3


def test_the_stream_gates_the_results_of_the_file_whose_header_it_read(tmp_path):
    """``judgekit gate X`` while a run writes X (``run --out X`` renames its new record over
    X): the header is read from the old file, the results from the new one. They must come
    from one file (open once), or the stream must refuse."""
    old = record_of(tmp_path, "old", 5)
    new = record_of(tmp_path, "new", 40, fail_every=1)
    stream = open_run(old)
    os.replace(new, old)
    try:
        report = gate(stream)
    except InputError:
        return  # refusing is fine
    gated = sum(a.gating_n for a in report.axes if a.axis == "task_success")
    assert (gated, report.passed) == (5, True), f"header of the old record, {gated} results of the new one"


@pytest.mark.parametrize("field", ["tool_correctness.score", "task_success.passed"])
def test_a_scored_result_without_its_value_is_an_input_error_not_an_internal_one(passing, tmp_path, field):
    axis, key = field.split(".")
    H, R, F = parts(passing)
    edited = []
    for raw in R:
        data = json.loads(raw)
        data["result"]["axes"][axis][key] = None
        edited.append(json.dumps(data) + "\n")
    path = tmp_path / "scored-without-value.jsonl"
    result = gate_file(path, H + "".join(edited) + F)
    assert result.exit_code == 2, result.output  # today: exit 3, "internal error: TypeError"
    assert_refused(result, path, 2)


def test_a_score_outside_0_to_1_is_refused_not_gated(failing, tmp_path):
    """Scores are fractions (points / maximum, supported / claims). A record holding
    ``score: 1e308`` is gated as it is: tool correctness PASSes with a mean of 2e307."""
    H, R, F = parts(failing)
    data = json.loads(R[0])
    data["result"]["axes"]["tool_correctness"]["score"] = 1e308
    path = tmp_path / "huge-score.jsonl"
    result = gate_file(path, H + json.dumps(data) + "\n" + "".join(R[1:]) + F)
    assert_refused(result, path, 2)


def test_a_run_with_no_trajectories_does_not_pass_the_gate(tmp_path):
    """An emptied trajectory file (the agent harness wrote nothing) measures nothing: exit 0
    and "gate: PASSED" tells CI the agent is fine."""
    suite = make_suite(tmp_path / "empty", 0)
    ran = invoke("run", suite, "--gate", "--out", tmp_path / "empty.jsonl")
    assert "gate: PASSED" not in ran.stdout
    assert ran.exit_code != 0
    gated = invoke("gate", tmp_path / "empty.jsonl")
    assert gated.exit_code != 0 and "gate: PASSED" not in gated.stdout


# --- the gate reads approvals from where the run found them --------------------------------------


def test_the_gate_reads_the_same_approvals_from_any_working_directory(tmp_path, monkeypatch):
    """A judge approved by calibration gates faithfulness. ``judgekit run examples/email-update
    --out run.jsonl`` records ``suite_file`` relative to the working directory; ``judgekit gate``
    then looks for the approvals relative to *its* working directory, so from another folder
    the approved judge turns advisory and a failing run PASSes (exit 0)."""
    from test_calibrate_gate import answer_like_the_labels

    project = tmp_path / "project"
    for part in ("examples", "rubrics", "calibration"):
        shutil.copytree(ROOT / part, project / part)
    suite_file = project / "examples/email-update/suite.yaml"
    suite = yaml.safe_load(suite_file.read_text())
    suite["gate"] = {"min_task_success_rate": 0.0, "min_tool_correctness": 0.0, "min_faithfulness": 0.9}
    suite_file.write_text(yaml.safe_dump(suite, sort_keys=False))
    with ScriptedOpenAIServer(answer_like_the_labels) as server:
        judge = ["--judge-model", "openai/scripted-judge-2024-08-06", "--judge-api-base", server.base_url,
                 "--cache-dir", str(project / "cache")]
        calibrated = invoke("calibrate", project / "examples/email-update/calibration.yaml",
                            "--labels", project / "calibration/update-email/labels.jsonl", *judge)
        assert calibrated.exit_code == 0, calibrated.output
        monkeypatch.chdir(project)
        ran = invoke("run", "examples/email-update", "--out", "run.jsonl", "--gate", *judge)
    assert ran.exit_code == 1 and re.search(r"^FAIL faithfulness", ran.stdout, re.M), ran.output
    here = invoke("gate", "run.jsonl")
    assert here.exit_code == 1 and re.search(r"^FAIL faithfulness", here.stdout, re.M)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    there = invoke("gate", project / "run.jsonl")
    assert (there.exit_code, there.stdout) == (here.exit_code, here.stdout), there.stdout


# --- 2. run --out: atomic, never over what is not a record ---------------------------------------


def _tmp_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


@pytest.mark.parametrize("late", ["bad_json_line", "duplicate_id"])
def test_a_run_that_fails_late_leaves_the_previous_record_and_no_temp_file(tmp_path, late):
    suite = make_suite(tmp_path / "s", 600, fail_every=7)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "run.jsonl"
    assert invoke("run", suite, "--out", out).exit_code == 0
    before = out.read_bytes()
    trajectories = tmp_path / "s" / "t.jsonl"
    lines = trajectories.read_text().splitlines(keepends=True)
    trajectories.write_text("".join(lines) + ("{not json\n" if late == "bad_json_line" else lines[3]))
    result = invoke("run", suite, "--out", out, "--format", "jsonl", "--gate")
    assert result.exit_code == 2
    assert result.stderr.startswith(f"judgekit: error: {trajectories}:601: ")
    assert ("already used" in result.stderr) == (late == "duplicate_id")
    assert len(result.stdout.splitlines()) == 512  # the first window streamed before the bad line was reached
    assert out.read_bytes() == before and sorted(p.name for p in out_dir.iterdir()) == ["run.jsonl"]


def _interrupted_run(tmp_path: Path, signum: int):
    """A judged run (the judge answers after 30 s) with --out over a previous record and
    --gate, sent ``signum`` once the first judge request arrived."""
    root = tmp_path / "judged"
    root.mkdir()
    (root / "rubric.yaml").write_text(FAITHFUL_RUBRIC)
    (root / "t.jsonl").write_text("".join(json.dumps({
        "id": f"t{i}", "prompt": "Capital of France?", "output": f"Paris ({i}).",
        "calls": [{"tool": "lookup", "args": {}, "result": {"capital": "Paris"}}]}) + "\n" for i in range(4)))
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "run.jsonl"
    shutil.copy(record_of(tmp_path, "previous", 3), out)
    before = out.read_bytes()
    with ScriptedOpenAIServer(Reply.slow(ANSWER, delay_s=30)) as server:
        (root / "suite.yaml").write_text(yaml.safe_dump({
            "name": "judged", "rubrics": ["rubric.yaml"], "trajectories": [{"file": "t.jsonl", "rubric": "r"}],
            "judge": {"model": MODEL, "api_base": server.base_url}}))
        child = subprocess.Popen([*CLI, "run", str(root), "--out", str(out), "--no-cache", "--gate"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + ALARM_S - 8
            while server.request_count == 0 and child.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            assert server.request_count > 0, "the run never asked the judge"
            child.send_signal(signum)
            stdout, stderr = child.communicate(timeout=5)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
    return child.returncode, stdout, stderr, out, before


def test_ctrl_c_keeps_the_previous_record_and_is_not_reported_as_a_failed_gate(tmp_path):
    rc, stdout, stderr, out, before = _interrupted_run(tmp_path, signal.SIGINT)
    assert out.read_bytes() == before and _tmp_files(out.parent) == []
    assert "Traceback" not in stderr
    # exit 1 is "the gate failed: the measurement says no"; an interrupted run measured nothing
    assert rc not in (0, 1), (rc, stderr)


def test_sigterm_leaves_no_temporary_file_beside_the_record(tmp_path):
    """SIGTERM is what CI timeouts, ``timeout`` and ``docker stop`` send."""
    rc, stdout, stderr, out, before = _interrupted_run(tmp_path, signal.SIGTERM)
    assert out.read_bytes() == before
    assert rc != 0
    assert _tmp_files(out.parent) == []


def test_a_closed_stdout_does_not_pass_a_failing_gate(tmp_path):
    """``judgekit run SUITE --gate --out run.jsonl --format jsonl | head -n 1``: the pipe
    closes, the run stops, no record is written and the failing gate is never decided; exit 0
    tells CI (``set -o pipefail``) the gate passed."""
    suite = make_suite(tmp_path / "s", 600, fail_every=3)
    out = tmp_path / "run.jsonl"
    child = subprocess.Popen([*CLI, "run", str(suite), "--gate", "--out", str(out), "--format", "jsonl"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert json.loads(child.stdout.readline())["trajectory_id"] == "t0"
        child.stdout.close()
        stderr = child.stderr.read().decode()
        child.wait(timeout=ALARM_S - 5)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert _tmp_files(tmp_path) == []
    assert child.returncode != 0, f"exit 0 for a failing gate; record written: {out.exists()}; stderr: {stderr!r}"


def _approval_like(path: Path) -> None:
    path.write_text(json.dumps({"format_version": 1, "fingerprint": "ab" * 32, "judge": {"model_pin": MODEL},
                                "label_set_sha256": "cd" * 32, "labels_file": "labels.jsonl",
                                "thresholds": {"min_kappa": 0.6, "min_items": 20}, "axes": {},
                                "decided_at": "2026-12-01T00:00:00Z", "judgekit_version": "0.1.0"}, indent=2))


@pytest.mark.parametrize("kind", ["rubric", "trajectories", "one_trajectory", "labels", "approval"])
def test_out_refuses_a_file_that_is_not_a_run_record(tmp_path, kind):
    suite = make_suite(tmp_path / "s", 3)
    target = tmp_path / "precious"
    target.mkdir()
    if kind == "rubric":
        path = target / "rubric.yaml"
        shutil.copy(ROOT / "rubrics" / "update-email.yaml", path)
    elif kind == "trajectories":
        path = target / "t.jsonl"
        shutil.copy(ROOT / "examples" / "email-update" / "trajectories.jsonl", path)
    elif kind == "one_trajectory":
        path = target / "t.jsonl"
        path.write_text((ROOT / "examples" / "email-update" / "trajectories.jsonl").read_text().splitlines()[0] + "\n")
    elif kind == "labels":
        path = target / "labels.jsonl"
        shutil.copy(ROOT / "calibration" / "update-email" / "labels.jsonl", path)
    else:
        path = target / ("ab" * 32 + ".json")
        _approval_like(path)
    before = path.read_bytes()
    result = invoke("run", suite, "--out", path)
    assert result.exit_code == 2 and "not a run record: refusing to overwrite it" in result.stderr
    assert path.read_bytes() == before and sorted(p.name for p in target.iterdir()) == [path.name]


def test_out_replaces_a_previous_record_of_either_format(failing, tmp_path):
    """A format 1 record is one JSON document over many lines (``gate`` reads it): ``--out``
    refused to replace it, because ``is_run_record`` gives up when the first line alone is not
    JSON."""
    suite = make_suite(tmp_path / "s", 3)
    v1 = tmp_path / "old.json"
    v1.write_text(json.dumps(_format_1(failing), indent=2))
    assert invoke("gate", v1).exit_code == 1  # a record gate reads
    for previous in (v1, failing):
        ran = invoke("run", suite, "--out", previous)
        assert ran.exit_code == 0, ran.stderr
        assert read_run(previous).trajectories == 3


def test_out_refuses_another_tools_results_document_that_gate_refuses(tmp_path):
    """``gate`` calls this file "not a run record"; ``run --out`` must not then replace it as
    one (``is_run_record`` takes any JSON object with format_version, suite and results)."""
    suite = make_suite(tmp_path / "s", 3)
    theirs = tmp_path / "nightly-results.json"
    theirs.write_text(json.dumps({"format_version": 3, "suite": "nightly", "results": [{"task": 1, "ok": True}],
                                  "notes": "six hours of GPU time"}, indent=2))
    before = theirs.read_bytes()
    assert_refused(invoke("gate", theirs), theirs, None, "not a run record")
    result = invoke("run", suite, "--out", theirs)
    assert theirs.read_bytes() == before
    assert result.exit_code == 2 and "not a run record" in result.stderr


def test_the_library_out_never_replaces_an_input_of_the_suite(tmp_path):
    """``judgekit.run_suite(suite, out=...)`` is the CLI's ``--out`` as a call: pointed at the
    suite's own trajectory file, it replaced it with the record (the trajectories are lost)."""
    suite = make_suite(tmp_path / "s", 3)
    trajectories = tmp_path / "s" / "t.jsonl"
    before = trajectories.read_bytes()
    with pytest.raises(InputError):
        judgekit.run_suite(suite, out=trajectories)
    assert trajectories.read_bytes() == before


# --- 3. exit codes -------------------------------------------------------------------------------


def _with_axis_error(suite_dir: Path) -> None:
    path = suite_dir / "t.jsonl"
    lines = path.read_text().splitlines()
    data = json.loads(lines[1])
    data["world"]["after"] = {"json_file": "missing.json"}
    lines[1] = json.dumps(data)
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize(("fail_every", "axis_error", "args", "code"), [
    pytest.param(None, False, ["--gate"], 0, id="gate_passes_with_gate"),
    pytest.param(3, False, ["--gate"], 1, id="gate_fails_with_gate"),
    pytest.param(3, False, [], 0, id="gate_fails_without_gate"),
    pytest.param(3, True, ["--gate"], 2, id="axis_error_and_failed_gate"),
    pytest.param(None, True, [], 2, id="axis_error_alone"),
    pytest.param(None, True, ["--gate", "--format", "jsonl"], 2, id="axis_error_jsonl_gate"),
    pytest.param(None, False, ["--concurrency", "0"], 2, id="bad_flag"),
])
def test_exit_codes(tmp_path, fail_every, axis_error, args, code):
    suite = make_suite(tmp_path / "s", 6, fail_every=fail_every)
    if axis_error:
        _with_axis_error(tmp_path / "s")
    out = tmp_path / "run.jsonl"
    result = invoke("run", suite, "--out", out, *args)
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    if axis_error:
        assert "judgekit: error: t1 task_success: " in result.stderr and "missing.json: file not found" in result.stderr
        assert invoke("gate", out).exit_code == 1  # the record keeps the error; the gate counts it against the axis
    shown = result.stderr if "jsonl" in args else result.stdout  # beside JSON Lines, the gate goes to stderr
    lines = shown.rstrip().splitlines()
    if "--gate" in args:  # decided and shown even when some trajectory could not be scored
        assert lines[-2] == ("gate: PASSED" if code == 0 else "gate: FAILED")
    if "--concurrency" not in args:  # a run that ran ends with its status, gated or not
        assert lines[-1].startswith("GREEN: the gate passed" if fail_every is None and not axis_error else "RED")
        assert lines[-1].startswith("RED (not gated: exit 0)") == (code == 0 and fail_every is not None)
        assert lines[-1].startswith(f"RED (exit 2: ") == (code == 2)


# --- 4. streaming output -------------------------------------------------------------------------


def test_the_table_shows_40_of_100_and_counts_the_rest(tmp_path):
    suite = make_suite(tmp_path / "s", 100, fail_every=3)
    result = invoke("run", suite)
    assert result.exit_code == 0, result.output
    rows = [found.group(1) for text in result.stdout.splitlines() if (found := re.match(r"\W*(t\d+)\s", text))]
    assert rows == [f"t{i}" for i in range(40)]
    assert "records: 100 trajectories, rubric plan-change@1.0.0" in result.stdout  # one rubric: said once
    tail = result.stdout.splitlines()[-4:]
    assert tail == ["... 60 more trajectories not shown (all of them: --format jsonl, or --out)",
                    "task_success: 100 scored, 66 passed, mean 0.660",
                    "tool_correctness: 100 scored, mean 1.000",
                    "RED (not gated: exit 0): gate: task_success: pass rate 0.660 is below 1.0"]


def test_jsonl_prints_every_result_in_suite_order(tmp_path):
    suite = make_suite(tmp_path / "s", 100, fail_every=3)
    result = invoke("run", suite, "--format", "jsonl", "--out", tmp_path / "run.jsonl")
    assert result.exit_code == 0
    printed = [json.loads(text) for text in result.stdout.splitlines()]
    assert [p["trajectory_id"] for p in printed] == [f"t{i}" for i in range(100)]
    assert [p["trajectory_id"] for p in printed] == [r.trajectory_id for r in read_run(tmp_path / "run.jsonl").results]
    assert sum(p["axes"]["task_success"]["passed"] for p in printed) == 66


def test_jsonl_stdout_stays_json_lines_with_gate(tmp_path):
    """``--format jsonl`` is for machines (``| jq``); ``--gate`` printed its text report onto
    the same stdout, so the stream no longer parses."""
    suite = make_suite(tmp_path / "s", 5, fail_every=3)
    result = invoke("run", suite, "--format", "jsonl", "--gate")
    assert result.exit_code == 1
    not_json = []
    for text in result.stdout.splitlines():
        try:
            json.loads(text)
        except ValueError:
            not_json.append(text)
    assert not_json == []


# --- 5. the library API: a plan holds no secret ---------------------------------------------------


def test_a_plan_holds_no_password_from_the_api_base(tmp_path, monkeypatch):
    from test_judge_runner import example_suite

    password = "hunter2-Zx81-" + "q" * 8
    key = "sk-live-" + "Wq8" * 12
    monkeypatch.setenv("JK_HOSTILE_KEY", key)
    suite = example_suite(tmp_path / "s", judge={"model": MODEL, "api_base": f"http://judge:{password}@127.0.0.1:9/v1",
                                                 "api_key_env": "JK_HOSTILE_KEY"})
    try:
        plan = plan_run(load_suite(suite))
    except ConfigError as refused:  # credentials in a URL are refused before anything is planned
        assert "api_base carries credentials" in str(refused) and password not in str(refused)
        return
    data = pickle.dumps(plan)
    assert key.encode() not in data
    back = pickle.loads(data)
    assert [j.job.key for j in back.judgements] == [j.job.key for j in plan.judgements]
    assert password.encode() not in data  # docs/guides/library-api.md: "A plan pickles and holds no secret"


def test_credentials_in_the_api_base_reach_the_server_or_are_refused(tmp_path):
    """``http://user:password@host/v1`` is accepted (the endpoint drops the credentials), but no
    call ever reaches the server: every verdict comes back unscored (provider_error: "Cannot
    combine AUTHORIZATION header with ... credentials encoded in URL") and the run exits 0."""
    root = tmp_path / "s"
    root.mkdir()
    (root / "rubric.yaml").write_text(FAITHFUL_RUBRIC)
    (root / "t.jsonl").write_text(json.dumps({"id": "t0", "prompt": "Capital?", "output": "Paris.",
                                              "calls": [{"tool": "lookup", "args": {}, "result": {"capital": "Paris"}}]}) + "\n")
    with ScriptedOpenAIServer(Reply.ok(ANSWER)) as server:
        (root / "suite.yaml").write_text(yaml.safe_dump({
            "name": "creds", "rubrics": ["rubric.yaml"], "trajectories": [{"file": "t.jsonl", "rubric": "r"}],
            "judge": {"model": MODEL, "api_base": f"http://judge:pw-{os.getpid()}x@127.0.0.1:{server.port}/v1",
                      "max_attempts": 1}}))
        result = invoke("run", root, "--format", "jsonl", "--no-cache")
        reached = server.request_count
    if result.exit_code == 2:
        assert "api_base" in result.stderr
        return
    verdict = json.loads(result.stdout.splitlines()[0])["axes"]["faithfulness"]
    assert reached > 0 and verdict["status"] == "scored", verdict.get("error")
