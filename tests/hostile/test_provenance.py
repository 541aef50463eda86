"""Provenance that cannot be swapped (issue 11, class 5): who answered, what model answered,
the API key, and what reaches the terminal.

Every case runs the real `judgekit` command (click's runner, or a child process where everything
the process writes to its file descriptors matters) against scripted OpenAI servers on
127.0.0.1, on a copy of the example project with its human labels:

- the same model name on two servers is two judges: no verdict is reused across them, and an
  approval of one never lets the other gate;
- a server that reports another model than the pin only advises, with the reason, unless the
  suite sets ``gate.allow_model_mismatch``;
- an API key from the environment, echoed by the server (a 401 "Incorrect API key provided:
  <key>" and claims quoting it), is in no file judgekit wrote and in nothing it printed;
- trajectory ids and other untrusted strings with terminal controls never reach the terminal
  raw, and no printed line can pass for the gate's verdict.
"""

from __future__ import annotations

import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # before anything imports litellm

import hashlib
import json
import re
import secrets
import shutil
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from judgekit.cli import main
from judgekit.run.record import RunRecord, read_run
from judgekit.testing import Reply, ScriptedOpenAIServer

ROOT = Path(__file__).resolve().parents[2]
MODEL = "openai/scripted-judge-2024-08-06"
# Only a hang trips these limits: a child process pays litellm's import (about 6 s of CPU), scipy's
# and six judgekit commands, ~10 s alone and two to three times that on a loaded runner (it waits
# on nothing: no retry, no sleep, loopback only); the first case in this process pays the import too.
ALARM_S = 120
LABELS = {json.loads(line)["trajectory_id"]: json.loads(line)["score"]
          for line in (ROOT / "calibration/update-email/labels.jsonl").read_text().splitlines()}
OUTPUTS = {json.loads(line)["output"]: json.loads(line)["id"]
           for line in (ROOT / "examples/email-update/calibration-sample.jsonl").read_text().splitlines()}
SUPPORTED = {"claim": "the email is alice@example.com", "supported": True,
             "evidence": [{"id": "R1", "quote": "alice@example.com"}]}
UNSUPPORTED = {"claim": "something the tools never said", "supported": False, "evidence": []}


def output_of(request: dict) -> str:
    user = request["messages"][1]["content"]
    return json.loads(re.search(r'^O = (".*")$', user, re.M).group(1))


def claims_like_the_labels(request: dict) -> list[dict]:
    score = LABELS.get(OUTPUTS.get(output_of(request)), 1.0)
    return {1.0: [SUPPORTED], 0.5: [SUPPORTED, UNSUPPORTED], 0.0: [UNSUPPORTED]}[score]


def like_the_labels(request: dict, n: int) -> Reply:
    return Reply.ok({"claims": claims_like_the_labels(request)})


def reporting(model: str):
    def answer(request: dict, n: int) -> Reply:
        return Reply.ok({"claims": claims_like_the_labels(request)}, model=model)

    return answer


@pytest.fixture
def project(tmp_path) -> Path:
    """A copy of the example project (suites, rubric, lock, labels)."""
    for part in ("examples", "rubrics", "calibration"):
        shutil.copytree(ROOT / part, tmp_path / part)
    return tmp_path


def judgekit(*args: str | Path):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def judge_args(server: ScriptedOpenAIServer) -> list[str]:
    return ["--judge-model", MODEL, "--judge-api-base", server.base_url]


def calibrate(project: Path, server: ScriptedOpenAIServer, cache: str = "cache"):
    return judgekit("calibrate", project / "examples/email-update/calibration.yaml",
                    "--labels", project / "calibration/update-email/labels.jsonl",
                    "--cache-dir", project / cache, *judge_args(server))


def run(project: Path, server: ScriptedOpenAIServer, out: str, cache: str = "cache") -> tuple[Any, dict, int]:
    """`judgekit run` of the example suite: its result, its record, the requests it made."""
    before = server.request_count
    result = judgekit("run", project / "examples/email-update", "--out", project / out, "--cache-dir", project / cache,
                      *judge_args(server))
    return result, read_run((project / out)).model_dump(mode="json"), server.request_count - before


GATING = re.compile(r"(?:PASS|FAIL) faithfulness: [\d.]+ \(min 1\.0\) over 9 gating verdict\(s\)\n")


def faithfulness_section(output: str) -> str:
    """The gate's faithfulness block: its status line and what follows until the next axis."""
    match = re.search(r"^(?:PASS|FAIL|ADVISORY) faithfulness: .*?(?=^(?:PASS|FAIL|ADVISORY) |^gate: )", output, re.M | re.S)
    assert match, output
    return match.group(0)


def hit(result: dict) -> bool:
    return result["axes"]["faithfulness"]["judge"]["cache_hit"]


def keys(record: dict) -> set[str]:
    return {r["axes"]["faithfulness"]["judge"]["cache_key"] for r in record["results"]}


def endpoints(record: dict) -> set[str]:
    return {r["axes"]["faithfulness"]["judge"]["endpoint"] for r in record["results"]}


# --- the endpoint is part of who the judge is ----------------------------------------------------


def test_the_same_model_on_two_servers_is_two_judges(project):
    with ScriptedOpenAIServer(like_the_labels) as first, ScriptedOpenAIServer(like_the_labels) as second:
        assert first.port != second.port
        approved = calibrate(project, first)
        assert approved.exit_code == 0 and "faithfulness: APPROVED" in approved.output

        _, record_first, calls_first = run(project, first, "first.json")
        assert endpoints(record_first) == {first.base_url}
        # The same model name, the same questions, the same cache: the other server is asked
        # every distinct question again (none is a hit), and its verdicts say where they came from.
        _, record_second, calls_second = run(project, second, "second.json")
        assert endpoints(record_second) == {second.base_url}
        assert [hit(r) for r in record_second["results"]] == [False] * 9
        assert calls_second == len(keys(record_second)) == second.request_count
        assert calls_second >= calls_first > 0
        assert not keys(record_first) & keys(record_second)
        _, again, calls_again = run(project, first, "again.json")  # each server's verdicts stay its own
        assert calls_again == 0 and endpoints(again) == {first.base_url}

    gated_first = faithfulness_section(judgekit("gate", project / "first.json").output)
    assert GATING.match(gated_first) and "advisory" not in gated_first, gated_first
    gated_second = judgekit("gate", project / "second.json")
    section = faithfulness_section(gated_second.output)
    assert section.startswith("ADVISORY faithfulness: n/a (min 1.0) over 0 gating verdict(s)\n")
    assert "no approval record matches this judge's fingerprint" in section


def test_an_approval_is_for_one_endpoint_however_it_is_spelled(project):
    """An approval recorded against http://127.0.0.1:PORT/v1 holds for HTTP://127.0.0.1:PORT/v1/
    (the same server) and for no other port."""
    with ScriptedOpenAIServer(like_the_labels) as server:
        assert calibrate(project, server).exit_code == 0
        url = server.base_url
        spelled = url.replace("http://", "HTTP://") + "/"
        result = judgekit("run", project / "examples/email-update", "--out", project / "spelled.json",
                          "--cache-dir", project / "cache", "--judge-model", MODEL, "--judge-api-base", spelled)
        assert result.exit_code == 0, result.output
    record = read_run((project / "spelled.json")).model_dump(mode="json")
    assert endpoints(record) == {url}
    assert GATING.match(faithfulness_section(judgekit("gate", project / "spelled.json").output))


# --- the model that answered ---------------------------------------------------------------------


def test_a_server_reporting_another_model_only_advises(project):
    with ScriptedOpenAIServer(reporting("gpt-4o-mini-2024-07-18")) as server:
        assert calibrate(project, server).exit_code == 0
        _, record, calls = run(project, server, "run.json")
        assert calls > 0
        judges = [r["axes"]["faithfulness"]["judge"] for r in record["results"]]
        assert {(j["reported_model"], j["model_mismatch"]) for j in judges} == {("gpt-4o-mini-2024-07-18", True)}

        gated = judgekit("gate", project / "run.json")
        section = faithfulness_section(gated.output)
        assert section == (
            "ADVISORY faithfulness: n/a (min 1.0) over 0 gating verdict(s)\n"
            f"  advisory (advisory value {float(re.search(r'advisory value ([0-9.]+)', section).group(1)):.3f}): "
            "update-email@1.0.0, 9 trajectories: the API reported model 'gpt-4o-mini-2024-07-18', not the pinned "
            f"'{MODEL}': another model answered (set gate.allow_model_mismatch in the suite to let it gate). "
            "What to do: pin the model the API reports in the suite's judge, or set gate.allow_model_mismatch: true\n")
        # Faithfulness only advises; the deterministic axes meet the minimums the example declares.
        assert gated.exit_code == 0 and gated.output.endswith("gate: PASSED\n")

        # The suite says it accepts the mismatch: the same verdicts (from the cache) now gate.
        suite = project / "examples/email-update/suite.yaml"
        suite.write_text(suite.read_text().replace("\ngate:\n", "\ngate:\n  allow_model_mismatch: true\n"))
        _, allowed, calls = run(project, server, "allowed.json")
        assert calls == 0 and allowed["gate"]["allow_model_mismatch"] is True
    section = faithfulness_section(judgekit("gate", project / "allowed.json").output)
    assert GATING.match(section) and "advisory" not in section, section


# --- the API key, echoed by the server ------------------------------------------------------------

KEY_ENV = "JUDGEKIT_HOSTILE_TEST_KEY"
DRIVER = """
import json, sys
from judgekit.cli import main
codes = []
for args in json.loads(sys.argv[1]):
    try:
        main(args, prog_name="judgekit")
    except SystemExit as exc:
        codes.append(exc.code)
    sys.stdout.flush()
    sys.stderr.flush()
with open(sys.argv[2], "w") as handle:
    json.dump(codes, handle)
"""


RUN_OUTPUTS = sorted({json.loads(line)["output"] for line in (ROOT / "examples/email-update/trajectories.jsonl")
                      .read_text().splitlines()})
ECHO_KINDS = ("auth_error", "quotes_the_key", "clean")


def echo_kind(request: dict) -> str:
    """Per trajectory output, fixed: a 401 echoing the key, a verdict quoting it, or a clean one
    (the example suite's outputs take each in turn; the calibration sample's by their hash)."""
    output = output_of(request)
    if output in RUN_OUTPUTS:
        return ECHO_KINDS[RUN_OUTPUTS.index(output) % 3]
    return ECHO_KINDS[hashlib.sha256(output.encode()).digest()[0] % 3]


def key_echoing(key: str):
    def answer(request: dict, n: int) -> Reply:
        kind = echo_kind(request)
        if kind == "auth_error":
            return Reply.auth_error()
        claims = claims_like_the_labels(request)
        if kind == "quotes_the_key":
            claims = [*claims, {"claim": f"the agent used the key {key}", "supported": True,
                                "evidence": [{"id": "R0", "quote": f"api_key={key}"}]}]
        return Reply.ok({"claims": claims})

    return answer


def test_an_echoed_api_key_is_in_nothing_judgekit_writes_or_prints(project):
    key = "sk-test-" + secrets.token_urlsafe(30)[:40]
    leaks = {key.encode(), json.dumps(key)[1:-1].encode(), key[8:24].encode()}  # whole, JSON-escaped, a piece
    suite, sample = project / "examples/email-update", project / "examples/email-update/calibration.yaml"
    judge = ["--judge-model", MODEL, "--judge-api-key-env", KEY_ENV]
    with ScriptedOpenAIServer(key_echoing(key)) as server:
        judge += ["--judge-api-base", server.base_url]
        commands = [
            ["run", str(suite), "--out", "run.json", "--cache-dir", "cache", *judge],
            ["run", str(suite), "--format", "jsonl", "--out", "run-2.json", "--cache-dir", "cache", *judge],
            ["gate", "run.json"],
            ["calibrate", str(sample), "--labels", "calibration/update-email/labels.jsonl", "--cache-dir", "cache",
             "--out", "calibration-report.json", *judge],
            ["run", str(suite), "--gate", "--out", "run-3.json", "--cache-dir", "cache", *judge],
            ["cache", "stats", "--cache-dir", "cache"],
        ]
        env = {**os.environ, KEY_ENV: key, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "JUDGEKIT_DEBUG": ""}
        done = subprocess.run([sys.executable, "-c", DRIVER, json.dumps(commands), str(project / "codes.json")],
                              cwd=project, env=env, capture_output=True, timeout=ALARM_S - 10, check=False)
        kinds = {echo_kind(request) for request in server.requests}
    assert done.returncode == 0, done.stderr.decode()
    codes = json.loads((project / "codes.json").read_text())
    # Both gates pass: faithfulness only advises (the calibration between them approves no judge), and
    # the deterministic axes meet the minimums the example declares.
    assert codes[0] == codes[1] == codes[2] == codes[4] == codes[5] == 0, (codes, done.stderr.decode())
    assert kinds == {"auth_error", "quotes_the_key", "clean"}

    # The server did echo it, and judgekit masked it where it kept what the server said.
    record = read_run((project / "run.json")).model_dump(mode="json")
    faith = [r["axes"]["faithfulness"] for r in record["results"]]
    assert any(a["unscored_reason"] == "provider_error" and "Incorrect API key provided: [REDACTED]" in a["error"]
               for a in faith)
    assert any(c["claim"] == "the agent used the key [REDACTED]" for a in faith for c in a.get("claims") or [])
    # Verdicts quoting the key are not cached (masked, they would score otherwise): asked again.
    runs = [read_run((project / name)).model_dump(mode="json") for name in ("run.json", "run-2.json")]
    quoting = {r["trajectory_id"] for r in runs[0]["results"]
               if any("[REDACTED]" in c["claim"] for c in r["axes"]["faithfulness"].get("claims") or [])}
    hits = {r["trajectory_id"] for r in runs[1]["results"] if r["axes"]["faithfulness"]["judge"]["cache_hit"]}
    assert quoting and not quoting & hits and hits

    written = [p for p in project.rglob("*") if p.is_file()]
    assert project / "cache" / "cache.db" in written and project / "calibration-report.json" in written
    assert any(p.parent.name == "approvals" for p in written)
    for path in written:
        data = path.read_bytes()
        assert not any(leak in data for leak in leaks), f"the key is in {path}"
    for name, stream in (("stdout", done.stdout), ("stderr", done.stderr)):
        assert not any(leak in stream for leak in leaks), f"the key is on {name}"
    assert b"[REDACTED]" in done.stdout  # the jsonl run printed the masked detail


def test_words_that_merely_contain_a_key_prefix_are_kept_and_cached(project):
    """ "disk-usage-monitoring-dashboard" holds "sk-" and 20 more characters: no key, so a verdict
    quoting it is written as it is, and cached (masked, it was mangled and judged again forever)."""
    claim = {"claim": "the disk-usage-monitoring-dashboard says alice@example.com", "supported": False, "evidence": []}
    with ScriptedOpenAIServer(Reply.ok({"claims": [claim]})) as server:
        _, _, calls = run(project, server, "first.json")
        _, second, again = run(project, server, "second.json")
    assert calls > 0 and again == 0
    assert {c["claim"] for r in second["results"] for c in r["axes"]["faithfulness"]["claims"]} == {claim["claim"]}


def test_credentials_in_the_api_base_are_never_written(project):
    """``http://user:password@host/v1``: refused before any call (credentials in a URL are never
    sent, the HTTP client refuses them beside a key), and the password is in nothing written."""
    password = "hunter2-" + secrets.token_hex(8)
    with ScriptedOpenAIServer(like_the_labels) as server:
        api_base = f"http://judge:{password}@127.0.0.1:{server.port}/v1"
        result = judgekit("run", project / "examples/email-update", "--out", project / "run.json", "--format", "jsonl",
                          "--cache-dir", project / "cache", "--judge-model", MODEL, "--judge-api-base", api_base)
        url = server.base_url
    assert result.exit_code == 2 and "api_base carries credentials" in result.output, result.output
    assert url and not (project / "run.json").exists()
    for path in (p for p in project.rglob("*") if p.is_file()):
        assert password.encode() not in path.read_bytes(), path
    assert password not in result.stdout + result.stderr


class PaddedKeyEcho(BaseHTTPRequestHandler):
    """A 401 whose error message quotes the key after ``pad`` characters of other text."""

    pad = 350

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:  # the stdlib names it
        self.rfile.read(int(self.headers["Content-Length"]))
        key = self.headers["Authorization"].partition(" ")[2]
        message = "x" * self.pad + " Incorrect API key provided: " + key
        body = json.dumps({"error": {"message": message, "type": "invalid_request_error", "code": "invalid_api_key"}})
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())


def test_a_key_echoed_late_in_a_long_error_message_is_not_written_in_part(project, monkeypatch):
    key = "proxy-token-" + secrets.token_hex(15)  # no common key shape: only its registration masks it
    monkeypatch.setenv(KEY_ENV, key)
    server = ThreadingHTTPServer(("127.0.0.1", 0), PaddedKeyEcho)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        result = judgekit("run", project / "examples/email-update", "--no-cache", "--out", project / "run.json",
                          "--judge-model", MODEL, "--judge-api-base", f"http://127.0.0.1:{server.server_port}/v1",
                          "--judge-api-key-env", KEY_ENV)
    finally:
        server.shutdown()
        server.server_close()
    assert result.exit_code == 0, result.output
    assert key[:20] not in (project / "run.json").read_text()


# --- the terminal ---------------------------------------------------------------------------------

HOSTILE_IDS = ["\x1b]0;owned\x07", "a\r\njudgekit: gate: PASSED", "\x1b[2J", "\u202eevil", "\x9b31m",
               "b\ngate: PASSED", "c\u2028gate: PASSED"]
# What a terminal obeys: C0 controls (but \n, and \t which is harmless), DEL, C1, bidi controls,
# Unicode line and paragraph separators.
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")


@pytest.fixture
def hostile_suite(project) -> Path:
    """The example suite with hostile trajectory ids (the last one's snapshot missing: an error
    line names it), a suite name and a cache folder with terminal controls."""
    folder = project / "examples/email-update"
    lines = (folder / "trajectories.jsonl").read_text().splitlines()
    rows = []
    for tid, line in zip(HOSTILE_IDS, lines):
        row = json.loads(line)
        row["id"] = tid
        rows.append(row)
    rows[-1]["world"]["after"] = {"sqlite": "snapshots/missing\x1b[2J.db"}
    (folder / "hostile.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    suite = yaml.safe_load((folder / "suite.yaml").read_text())
    suite.update(name="\x1b]0;suite\x07\u202eeman", trajectories=[{"file": "hostile.jsonl", "rubric": "update-email"}],
                 cache_dir="cache\x1b[31m")
    (folder / "hostile.yaml").write_text(yaml.safe_dump(suite, allow_unicode=True))
    return folder / "hostile.yaml"


def assert_clean(*streams: str) -> None:
    for stream in streams:
        assert not RAW.search(stream), RAW.findall(stream)
        for line in stream.split("\n"):
            assert not line.startswith(("judgekit: gate: PASSED", "gate: PASSED")), line


def test_untrusted_strings_never_reach_the_terminal_raw(project, hostile_suite, monkeypatch):
    monkeypatch.setenv("COLUMNS", "300")  # the table's cells whole, not cut to 80 columns
    with ScriptedOpenAIServer(like_the_labels) as server:
        args = ["run", hostile_suite, *judge_args(server)]
        table = judgekit(*args, "--out", project / "table.json")
        jsonl = judgekit(*args, "--format", "jsonl", "--out", project / "jsonl.json")
        gated = judgekit(*args, "--gate")
    for result in (table, jsonl, gated):
        assert result.exit_code == 2  # the missing snapshot
        assert_clean(result.stdout, result.stderr)
    assert "\\x1b]0;owned\\x07" in table.stdout and "a\\r\\njudgekit: gate: PASSED" in table.stdout
    assert "\\u202eevil" in table.stdout and "\\x9b31m" in table.stdout and "\\x1b]0;suite\\x07" in table.stdout
    # The error line names the trajectory, escaped, on one line.
    assert "judgekit: error: c\\u2028gate: PASSED task_success: " in table.stderr
    assert "missing\\x1b[2J.db" in table.stderr
    # JSON lines stay valid JSON with the ids intact.
    ids = [json.loads(line)["trajectory_id"] for line in jsonl.stdout.splitlines()]
    assert ids == HOSTILE_IDS
    # Both records hold the ids as they are (files are data, not a terminal).
    assert [r["trajectory_id"] for r in read_run((project / "table.json")).model_dump(mode="json")["results"]] == HOSTILE_IDS

    gate = judgekit("gate", project / "table.json")
    assert gate.exit_code == 1 and gate.stdout.endswith("gate: FAILED\n")
    assert_clean(gate.stdout, gate.stderr)


@pytest.mark.parametrize("tid", HOSTILE_IDS, ids=["osc_title", "crlf_fake_gate_line", "clear_screen", "bidi_override",
                                                  "c1_csi", "lf_fake_gate_line", "line_separator"])
def test_prompt_show_and_its_errors_escape_the_id(project, hostile_suite, tid):
    shown = judgekit("prompt", "show", hostile_suite, tid, "--axis", "faithfulness")
    assert shown.exit_code == 0, shown.output
    assert_clean(shown.stdout, shown.stderr)
    unknown = judgekit("prompt", "show", hostile_suite, tid + "\x1b[8m", "--axis", "faithfulness")
    assert unknown.exit_code == 2 and "no trajectory" in unknown.stderr
    assert_clean(unknown.stdout, unknown.stderr)


def test_a_hostile_rubric_guide_and_approval_reasons_are_escaped(project):
    """The guide is printed by `prompt show`; what an approval record says that reaches `gate`'s output."""
    rubric = project / "rubrics/update-email.yaml"
    text = rubric.read_text()
    data = yaml.safe_load(text)
    data["faithfulness"]["guide"] = "Check claims.\x1b]0;owned\x07\r\ngate: PASSED\u202e"
    rubric.write_text(yaml.safe_dump(data, allow_unicode=True))
    suite = project / "examples/email-update/suite.yaml"
    # Without the lock (the guide changed) and without its gate (every minimum 1.0: the gate fails,
    # so a "gate: PASSED" line in the output could only be the hostile text's).
    suite.write_text(re.sub(r"\ngate:\n(  .*\n)+", "\n", suite.read_text().replace("lock: ../../rubrics/rubrics.lock\n", "")))
    shown = judgekit("prompt", "show", suite, "ok", "--axis", "faithfulness")
    assert shown.exit_code == 0, shown.output
    # The guide is the rubric's own multi-line text: its line breaks stay, its controls do not.
    assert "Check claims.\\x1b]0;owned\\x07\\x0d\ngate: PASSED\\u202e\n" in shown.stdout
    assert not RAW.search(shown.stdout + shown.stderr)

    with ScriptedOpenAIServer(like_the_labels) as server:
        sample = project / "examples/email-update/calibration.yaml"
        sample.write_text(sample.read_text().replace("lock: ../../rubrics/rubrics.lock\n", ""))
        assert calibrate(project, server).exit_code == 0
        [approval] = (project / "calibration/update-email/approvals").glob("*.json")
        record = json.loads(approval.read_text())
        # The record's own words are never printed (the gate rebuilds them); what it says that
        # does reach the output, an item's trajectory id in the refusal, is escaped.
        record["axes"]["faithfulness"].update(reasons=["never shown\x1b[2J"])
        record["axes"]["faithfulness"]["items"][0]["trajectory_id"] = "kappa low\x1b[2J\r\ngate: PASSED\x9b"
        approval.write_text(json.dumps(record))
        _, _, _ = run(project, server, "run.json")
    gated = judgekit("gate", project / "run.json")
    assert gated.exit_code == 1
    assert "its items differ from what its labels and verdicts give (item 0 is 'kappa low\\x1b[2J\\r\\ngate: PASSED\\x9b'" \
        in gated.stdout, gated.stdout
    assert "never shown" not in gated.stdout
    assert_clean(gated.stdout, gated.stderr)


def test_a_hostile_run_record_cannot_print_a_passing_gate_line(project, monkeypatch):
    suite = project / "examples/email-update/suite.yaml"  # without its gate: every minimum 1.0, so it fails
    suite.write_text(re.sub(r"\ngate:\n(  .*\n)+", "\n", suite.read_text()))
    monkeypatch.chdir(project)  # the record read back names its suite file from here: this copy's
    with ScriptedOpenAIServer(like_the_labels) as server:
        _, record, _ = run(project, server, "run.json")
    for result in record["results"]:
        result["rubric"] = "update-email@1.0.0\ngate: PASSED\n"
    RunRecord.model_validate(record).write(project / "hostile.json")
    gated = judgekit("gate", project / "hostile.json")
    assert gated.exit_code == 1 and gated.stdout.endswith("gate: FAILED\n")
    assert_clean(gated.stdout, gated.stderr)
