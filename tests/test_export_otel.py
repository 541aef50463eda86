"""``judgekit export RUN --otel FILE [--otlp-endpoint URL]``: verdicts as OTel GenAI evaluation events.

Real run records (the example suite with the scripted judge; an imported OTel trace scored
deterministically) are exported; the file is read back with the OpenTelemetry protobuf
definitions and every axis score of the record is found in it; the endpoint path is checked
against a loopback OTLP/HTTP receiver that decodes the protobuf bodies (real HTTP, no mocks).
"""

from __future__ import annotations

import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # before anything imports litellm

import base64
import hashlib
import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from _records import refoot_file
from click.testing import CliRunner
from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest, ExportLogsServiceResponse
from test_import_otel import scored_suite
from test_judge_runner import MODEL, scripted_judge

from judgekit.cli import main as cli_main
from judgekit.run.rows import judge_fingerprint
from judgekit.importers.otel_genai import import_otel_genai
from judgekit.judge.resolve import JudgeOverride
from judgekit.rubric.model import Rubric
from judgekit.run import RunOptions, read_run, run_suite
from judgekit.testing import ScriptedOpenAIServer

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).parent / "data" / "otel"
sys.path.insert(0, str(DATA))
import make_traces as mt  # noqa: E402

EMAIL_RUBRIC = Rubric.model_validate({
    "id": "email-from-otel", "version": "1.0.0", "registered": "2026-01-01",
    "task_success": {"guide": "The answer states the new email.", "required_outputs": ["alice@example.com"]},
    "tool_correctness": {"guide": "Update the email.", "expected_calls": [
        {"tool": "update_user", "args": {"user_id": {"const": 1}, "email": {"const": "alice@example.com"}}}],
        "in_scope": ["update_user"]},
})


# --- reading OTLP back --------------------------------------------------------------------------


def parse_otlp_json(line: str) -> ExportLogsServiceRequest:
    """One line of the file as the protobuf message. OTLP/JSON writes trace and span ids in hex
    where the protobuf JSON mapping has base64: they are turned back, as a collector does."""
    document = json.loads(line)
    for resource in document.get("resourceLogs", []):
        for scope in resource.get("scopeLogs", []):
            for record in scope.get("logRecords", []):
                for key in ("traceId", "spanId"):
                    if key in record:
                        record[key] = base64.b64encode(bytes.fromhex(record[key])).decode()
    return json_format.Parse(json.dumps(document), ExportLogsServiceRequest())


def _python(value) -> object:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None


def events(request: ExportLogsServiceRequest) -> list[dict]:
    found = []
    for resource in request.resource_logs:
        service = {a.key: _python(a.value) for a in resource.resource.attributes}["service.name"]
        for scope in resource.scope_logs:
            for record in scope.log_records:
                found.append({"trace": record.trace_id.hex(), "span": record.span_id.hex(), "name": record.event_name,
                              "severity": record.severity_number, "time": record.time_unix_nano, "service": service,
                              "scope": scope.scope.name, "attrs": {a.key: _python(a.value) for a in record.attributes}})
    return found


def file_events(path: Path) -> list[dict]:
    return [event for line in path.read_text(encoding="utf-8").splitlines() for event in events(parse_otlp_json(line))]


def export(*args: str):
    return CliRunner().invoke(cli_main, ["export", *map(str, args)])


# --- runs ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def judged(tmp_path_factory) -> Path:
    """The example suite, faithfulness judged by the scripted judge: a format 2 record."""
    base = tmp_path_factory.mktemp("judged")
    with ScriptedOpenAIServer(scripted_judge) as server:
        options = RunOptions(override=JudgeOverride(model=MODEL, api_base=server.base_url), cache_dir=base / "cache")
        record = run_suite(ROOT / "examples" / "email-update", options=options)
    record.write(base / "run.jsonl")
    return base / "run.jsonl"


@pytest.fixture(scope="module")
def from_otel(tmp_path_factory) -> Path:
    """Trajectories imported from an OTel trace file, scored deterministically."""
    base = tmp_path_factory.mktemp("from-otel")
    import_otel_genai(DATA / "mixed.jsonl", base / "imported")
    record = run_suite(scored_suite(base, base / "imported" / "trajectories.jsonl", EMAIL_RUBRIC))
    record.write(base / "run.jsonl")
    return base / "run.jsonl"


# --- the file -----------------------------------------------------------------------------------


def test_every_axis_score_of_the_run_is_found_back_in_the_otlp_file(judged, tmp_path):
    done = export(judged, "--otel", tmp_path / "events.jsonl")
    record = read_run(judged)
    assert done.exit_code == 0, done.output
    assert done.output.strip() == f"wrote 27 evaluation events of 9 trajectories to {tmp_path / 'events.jsonl'}"
    found = {(e["attrs"]["judgekit.trajectory.id"], e["attrs"]["gen_ai.evaluation.name"]): e
             for e in file_events(tmp_path / "events.jsonl")}
    expected = {(r.trajectory_id, axis): (r, res) for r in record.results for axis, res in r.axes.items()}
    assert set(found) == set(expected) and len(expected) == 27
    approvals = {seen.fingerprint: seen.axes for seen in record.judges}
    run_trace = hashlib.sha256(f"judgekit-run:{record.run_id}".encode()).hexdigest()[:32]
    for key, (result, res) in expected.items():
        event, attrs = found[key], found[key]["attrs"]
        assert (event["name"], event["severity"], event["service"]) == ("gen_ai.evaluation.result", 9, "judgekit")
        assert (event["trace"], event["span"]) == (run_trace, "")  # not from a trace: the run's own
        assert attrs["gen_ai.evaluation.score.value"] == res.score
        full = res.passed if key[1] == "task_success" else res.score >= 1.0
        assert attrs["gen_ai.evaluation.score.label"] == ("pass" if full else "fail")
        assert attrs["judgekit.rubric.model"] == result.rubric and attrs["judgekit.rubric.model.sha256"] == result.rubric_sha256
        assert attrs["judgekit.run.id"] == record.run_id and attrs["judgekit.axis.status"] == "scored"
        if res.judge is None:
            assert attrs["judgekit.approval"] == "not_judged" and "judgekit.judge.model_pin" not in attrs
        else:
            fingerprint = judge_fingerprint(res.judge)
            assert attrs["judgekit.judge.fingerprint"] == fingerprint and attrs["judgekit.judge.model_pin"] == MODEL
            assert attrs["judgekit.approval"] == approvals[fingerprint][key[1]]
            assert event["time"] // 1000 == int(res.judge.created_at.timestamp() * 10**6)
        if res.status == "scored" and axis_lost(key[1], res):
            assert attrs["gen_ai.evaluation.explanation"].startswith(("FAIL", "0."))
    assert found[("wrong-tool", "task_success")]["attrs"]["gen_ai.evaluation.explanation"].startswith(
        "FAIL; postcondition[0] equals: ")


def axis_lost(name, res):
    from judgekit.axes.table import axis_named

    return axis_named(name).lost(res)


def test_imported_runs_are_parented_to_the_root_span_of_their_trace(from_otel, tmp_path):
    assert export(from_otel, "--otel", tmp_path / "events.jsonl").exit_code == 0
    found = file_events(tmp_path / "events.jsonl")
    assert len(found) == 4  # two runs, two axes each
    for event in found:
        name = "email-current" if event["trace"] == mt.trace_id("email-current") else "email-events"
        assert (event["trace"], event["span"]) == (mt.trace_id(name), mt.root_span_id(name))
        assert event["attrs"]["judgekit.trajectory.id"] == mt.trajectory_id(name)
        assert event["attrs"]["gen_ai.evaluation.score.value"] == 1.0


def test_a_result_that_is_not_scored_has_an_error_type_and_no_score(judged, tmp_path):
    lines = judged.read_text(encoding="utf-8").splitlines()
    row = json.loads(lines[1])
    row["result"]["axes"]["faithfulness"].update(status="unscored", unscored_reason="timeout", score=None)
    row["result"]["axes"]["tool_correctness"].update(status="error", error="snapshot missing", score=None)
    edited = tmp_path / "edited.jsonl"
    edited.write_text("\n".join([lines[0], json.dumps(row), *lines[2:]]) + "\n", encoding="utf-8")
    refused = export(edited, "--otel", tmp_path / "events.jsonl")  # its footer still counts those two as scored
    assert refused.exit_code == 2 and "the footer disagrees with the record's own results" in refused.output
    assert export(refoot_file(edited, judged), "--otel", tmp_path / "events.jsonl").exit_code == 0
    first = {e["attrs"]["gen_ai.evaluation.name"]: e["attrs"] for e in file_events(tmp_path / "events.jsonl")[:3]}
    for axis, kind in (("faithfulness", "timeout"), ("tool_correctness", "input_error")):
        assert first[axis]["error.type"] == kind
        assert "gen_ai.evaluation.score.value" not in first[axis] and "gen_ai.evaluation.score.label" not in first[axis]
    assert first["tool_correctness"]["gen_ai.evaluation.explanation"] == "error: snapshot missing"


def test_a_format_1_record_exports_the_same_scores(judged, tmp_path):
    from judgekit.suite.model import GATE_V1_MINIMUMS

    record = read_run(judged)
    # The suite's gate as format 1 spelled it (one field per axis): the example names two minimums.
    gate = {old: record.gate.min[axis] for old, axis in GATE_V1_MINIMUMS.items() if axis in record.gate.min}
    v1 = {"format_version": 1, "suite": record.suite, "suite_path": str(record.suite_path()), "gate": gate,
          "judgekit_version": record.judgekit_version, "started_at": record.started_at.isoformat(),
          "finished_at": record.finished_at.isoformat(), "calibration_dir": record.calibration_dir,
          "rubrics": {k: v.model_dump() for k, v in record.rubrics.items()},
          "summary": {k: v.model_dump() for k, v in record.summary.items()},
          "results": [r.model_dump(mode="json") for r in record.results]}
    (tmp_path / "v1.json").write_text(json.dumps(v1, indent=2), encoding="utf-8")
    assert export(tmp_path / "v1.json", "--otel", tmp_path / "v1.jsonl").exit_code == 0
    assert export(judged, "--otel", tmp_path / "v2.jsonl").exit_code == 0
    scores = lambda path, *keys: sorted(tuple(e["attrs"].get(k) for k in keys) for e in file_events(path))
    keys = ("judgekit.trajectory.id", "gen_ai.evaluation.name", "gen_ai.evaluation.score.value")
    assert scores(tmp_path / "v1.jsonl", *keys) == scores(tmp_path / "v2.jsonl", *keys)
    v1_judged = [e for e in file_events(tmp_path / "v1.jsonl") if e["attrs"]["judgekit.axis.source"] == "judge"]
    # v1 kept no judges; the run measured again names them, and no approval is filed for this one
    assert v1_judged and {e["attrs"]["judgekit.approval"] for e in v1_judged} == {"advisory"}


def test_the_same_record_exports_to_the_same_bytes(judged, tmp_path):
    for name in ("a.jsonl", "b.jsonl"):
        assert export(judged, "--otel", tmp_path / name).exit_code == 0
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()


# --- the endpoint -------------------------------------------------------------------------------


class Receiver:
    """An OTLP/HTTP logs receiver on 127.0.0.1: decodes each protobuf body, answers ``status``."""

    def __init__(self, status: int = 200):
        self.requests: list[ExportLogsServiceRequest] = []
        self.paths: list[str] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - stdlib naming
                body = self.rfile.read(int(self.headers["Content-Length"]))
                owner.paths.append(self.path)
                assert self.headers["Content-Type"] == "application/x-protobuf"
                owner.requests.append(ExportLogsServiceRequest.FromString(body))
                reply = ExportLogsServiceResponse().SerializeToString()
                self.send_response(status)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"


def _comparable(found: list[dict]) -> list[str]:
    return sorted(json.dumps({k: e[k] for k in ("trace", "span", "name", "severity", "time", "attrs", "scope")},
                             sort_keys=True) for e in found)


@pytest.mark.parametrize("record_fixture", ["judged", "from_otel"])
def test_the_endpoint_receives_the_same_events_as_the_file(record_fixture, request, tmp_path):
    record = request.getfixturevalue(record_fixture)
    with Receiver() as receiver:
        done = export(record, "--otel", tmp_path / "events.jsonl", "--otlp-endpoint", receiver.url)
    assert done.exit_code == 0, done.output
    assert done.output.splitlines()[-1].startswith("sent ") and receiver.paths and set(receiver.paths) == {"/v1/logs"}
    received = [event for req in receiver.requests for event in events(req)]
    assert _comparable(received) == _comparable(file_events(tmp_path / "events.jsonl"))
    assert len(received) == sum(len(r.axes) for r in read_run(record).results)


def test_a_receiver_that_refuses_fails_the_export_and_nothing_is_written(judged, tmp_path):
    with Receiver(status=400) as receiver:
        done = export(judged, "--otel", tmp_path / "events.jsonl", "--otlp-endpoint", receiver.url + "/v1/logs")
    assert done.exit_code == 2 and "did not accept every event: 0 of 27 delivered" in done.output
    assert not (tmp_path / "events.jsonl").exists()
    with Receiver() as closed:
        url = closed.url
    unreachable = export(judged, "--otlp-endpoint", url, "--timeout", "0.5")
    assert unreachable.exit_code == 2 and "did not accept every event" in unreachable.output


# --- the command ----------------------------------------------------------------------------------


def test_the_command_is_registered_documented_and_guarded(judged, tmp_path):
    assert "export" in CliRunner().invoke(cli_main, ["--help"]).output
    shown = CliRunner().invoke(cli_main, ["export", "--help"]).output
    assert "gen_ai.evaluation.result" in shown and "--otlp-endpoint" in shown and "--otel" in shown
    nowhere = export(judged)
    assert nowhere.exit_code == 2 and "--otel FILE, --otlp-endpoint URL" in nowhere.output
    over_input = export(judged, "--otel", judged)
    assert over_input.exit_code == 2 and "would overwrite the run record" in over_input.output
    other = tmp_path / "notes.txt"
    other.write_text("mine\n", encoding="utf-8")
    refused = export(judged, "--otel", other)
    assert refused.exit_code == 2 and "refusing to overwrite" in refused.output and other.read_text() == "mine\n"
    assert export(tmp_path / "missing.jsonl", "--otel", tmp_path / "x.jsonl").exit_code == 2


def test_bad_otel_metadata_is_refused(judged, tmp_path):
    lines = judged.read_text(encoding="utf-8").splitlines()
    row = json.loads(lines[1])
    row["result"]["metadata"]["otel"] = {"trace_id": "nothex", "span_id": "00"}
    edited = tmp_path / "edited.jsonl"
    edited.write_text("\n".join([lines[0], json.dumps(row), *lines[2:]]) + "\n", encoding="utf-8")
    done = export(edited, "--otel", tmp_path / "events.jsonl")
    assert done.exit_code == 2 and "metadata.otel must be {trace_id: 32 hex digits, span_id: 16 hex digits}" in done.output
    assert not (tmp_path / "events.jsonl").exists()


def test_the_cli_does_not_load_the_sdk():
    code = "import sys, judgekit.cli; print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stderr
