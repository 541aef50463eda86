"""Hostile inputs to `judgekit import otel-genai`, its shared writer, and `judgekit export --otel`.

Each bug found has one test here (it failed before its fix); the rest are attacks that already
held, kept as regression checks. Receivers are real HTTP servers on 127.0.0.1 (no mocks).
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import base64
import json
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from _records import refoot_file
import yaml
from click.testing import CliRunner
from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest, ExportLogsServiceResponse

from judgekit.rubric import lock as locking
from judgekit.cli import main as cli_main
from judgekit.errors import InputError
from judgekit.export import export_otel
from judgekit.export._otlp_http import logs_url
from judgekit.importers._writer import ImportWriter
from judgekit.importers import otel_genai
from judgekit.importers.otel_genai import import_otel_genai
from judgekit.rubric.model import Rubric, load_rubric
from judgekit.run import read_run, run_suite
from judgekit.trajectory import Call, Trajectory

ALARM_S = 15
DATA = Path(__file__).resolve().parents[1] / "data" / "otel"
sys.path.insert(0, str(DATA))
import make_traces as mt  # noqa: E402

RUBRIC = Rubric.model_validate({
    "id": "email", "version": "1.0.0", "registered": "2026-01-01",
    "task_success": {"guide": "The answer states the new email.", "required_outputs": ["alice@example.com"]},
    "tool_correctness": {"guide": "Update the email.", "expected_calls": [
        {"tool": "update_user", "args": {"user_id": {"const": 1}, "email": {"const": "alice@example.com"}}}],
        "in_scope": ["update_user"]},
})


# --- helpers ---------------------------------------------------------------------------------------


def write_lines(path: Path, documents: list) -> Path:
    path.write_text("".join(json.dumps(d) + "\n" for d in documents), encoding="utf-8")
    return path


def trajectories(out: Path) -> list[Trajectory]:
    lines = (out / "trajectories.jsonl").read_text(encoding="utf-8").splitlines()
    return [Trajectory.model_validate_json(line) for line in lines]


def spans_of(doc: dict) -> list[dict]:
    return doc["resourceSpans"][0]["scopeSpans"][0]["spans"]


def email(name: str, **options) -> dict:
    return mt.otel_trace_from_chat(mt.EMAIL_CHAT, name=name, **options)


def edit_messages(doc: dict, key: str, edit) -> dict:
    """``edit`` applied to the decoded JSON of every ``key`` attribute (a messages list)."""
    for span in spans_of(doc):
        for attribute in span["attributes"]:
            if attribute["key"] == key:
                messages = json.loads(attribute["value"]["stringValue"])
                edit(messages)
                attribute["value"]["stringValue"] = json.dumps(messages)
    return doc


def refused(tmp_path: Path, documents: list, **options) -> InputError:
    """The InputError importing ``documents`` raises; checks that nothing was left behind."""
    src = write_lines(tmp_path / "bad.jsonl", documents)
    with pytest.raises(InputError) as caught:
        import_otel_genai(src, tmp_path / "out", **options)
    assert caught.value.path == str(src)
    assert [p.name for p in tmp_path.iterdir()] == ["bad.jsonl"]
    return caught.value


@pytest.fixture(scope="module")
def record(tmp_path_factory) -> Path:
    """A run record of two imported OTel runs, scored deterministically."""
    base = tmp_path_factory.mktemp("record")
    import_otel_genai(DATA / "mixed.jsonl", base / "imported")
    (base / "rubrics").mkdir()
    (base / "rubrics" / "email.yaml").write_text(RUBRIC.to_yaml(), encoding="utf-8")
    assert not locking.lock([base / "rubrics"], base / "rubrics" / locking.LOCK_NAME)[1]
    (base / "suite.yaml").write_text(yaml.safe_dump({
        "name": "otel", "rubrics": ["rubrics"], "lock": "rubrics/rubrics.lock",
        "trajectories": [{"file": "imported/trajectories.jsonl", "rubric": "email"}]}), encoding="utf-8")
    run_suite(base / "suite.yaml").write(base / "run.jsonl")
    return base / "run.jsonl"


def export(*args) -> object:
    return CliRunner().invoke(cli_main, ["export", *map(str, args)])


class Receiver:
    """An OTLP/HTTP logs receiver on 127.0.0.1 answering ``status`` with ``headers`` and ``body``,
    or, with ``trickle``, a 200 whose promised body comes one byte every 0.2 s."""

    def __init__(self, status: int = 200, headers: dict | None = None, body: bytes = b"", trickle: bool = False):
        self.received = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - stdlib naming
                request = ExportLogsServiceRequest.FromString(self.rfile.read(int(self.headers["Content-Length"])))
                owner.received += sum(len(s.log_records) for r in request.resource_logs for s in r.scope_logs)
                self.send_response(status)
                for key, value in {"Content-Type": "application/x-protobuf", **(headers or {})}.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(10**6 if trickle else len(body)))
                self.end_headers()
                if not trickle:
                    self.wfile.write(body)
                    return
                try:
                    while not owner.closing.is_set():
                        self.wfile.write(b"\0")
                        self.wfile.flush()
                        owner.closing.wait(0.2)
                except OSError:
                    pass

            def log_message(self, *args):
                pass

        self.closing = threading.Event()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.closing.set()
        self.server.shutdown()
        self.server.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"


# --- import: span order, trees, shapes -----------------------------------------------------------


@pytest.mark.parametrize("placement", [pytest.param("first", id="root_first_in_its_scope"),
                                       pytest.param("scope", id="root_in_an_earlier_scope")])
def test_a_root_listed_before_its_children_in_the_same_document_is_read(tmp_path, placement):
    # Bug: a batch is grouped by instrumentation scope, so the agent's root span may come before
    # the model client's chat spans in one document; every child after it was refused as "after
    # the trace's root span".
    doc = email("scoped")
    spans = spans_of(doc)
    root = spans.pop()
    if placement == "first":
        spans.insert(0, root)
    else:
        doc["resourceSpans"][0]["scopeSpans"].insert(0, {"scope": {"name": "agent-framework"}, "spans": [root]})
    import_otel_genai(write_lines(tmp_path / "t.jsonl", [doc]), tmp_path / "out")
    import_otel_genai(write_lines(tmp_path / "in-order.jsonl", [email("scoped")]), tmp_path / "in-order")
    [run], [expected] = trajectories(tmp_path / "out"), trajectories(tmp_path / "in-order")
    assert run.id == mt.trajectory_id("scoped") and [c.tool for c in run.calls] == ["get_user", "update_user"]
    assert run.model_dump(exclude={"metadata"}) == expected.model_dump(exclude={"metadata"})


def test_a_span_after_its_root_in_a_later_document_is_still_refused(tmp_path):
    doc = email("late")
    late = dict(spans_of(doc)[0], spanId="1111111111111111")
    error = refused(tmp_path, [doc, mt.document([late])])
    assert error.line == 2 and "comes after the trace's root span (line 1)" in str(error)


def _loop(doc: dict) -> None:
    spans = spans_of(doc)
    spans[-1]["parentSpanId"] = spans[0]["spanId"]  # the root under one of its own children


def _own_parent(doc: dict) -> None:
    spans_of(doc)[-1]["parentSpanId"] = spans_of(doc)[-1]["spanId"]


@pytest.mark.parametrize("make_cycle", [pytest.param(_loop, id="loop_through_a_child"),
                                        pytest.param(_own_parent, id="own_parent")])
def test_a_parent_span_cycle_is_refused_not_dropped(tmp_path, make_cycle):
    # Bug: a trace whose parentSpanIds loop has no top span; its runs vanished without a word
    # beside the good trace, and the import succeeded.
    cyclic = email("cyclic")
    make_cycle(cyclic)
    error = refused(tmp_path, [cyclic, email("good")])
    assert "is its own ancestor" in str(error) and mt.trace_id("cyclic") in str(error) and error.line == 1


@pytest.mark.parametrize("bad_id", [pytest.param(5, id="int"), pytest.param({"x": 1}, id="object")])
def test_a_tool_call_id_that_is_not_a_string_is_refused_with_its_place(tmp_path, bad_id):
    # Bug: TypeError ("can only concatenate str", "unhashable type") -> an internal error.
    def edit(messages):
        for message in messages:
            for part in message["parts"]:
                if part.get("type") in ("tool_call", "tool_call_response"):
                    part["id"] = bad_id

    doc = edit_messages(email("ids"), "gen_ai.output.messages", edit)
    error = refused(tmp_path, [edit_messages(doc, "gen_ai.input.messages", edit)])
    assert error.line == 1 and mt.trace_id("ids") in str(error)


def test_an_older_event_tool_call_whose_function_is_not_an_object_is_refused(tmp_path):
    # Bug: TypeError ("'str' object is not a mapping") -> an internal error.
    content = json.dumps({"content": "", "tool_calls": [{"id": "c1", "type": "function", "function": "get_user"}]})
    span = mt.span(mt.trace_id("ev"), mt.root_span_id("ev"), None, "chat m", mt.T0, mt.T0 + 5,
                   {"gen_ai.operation.name": "chat"},
                   events=[{"name": "gen_ai.assistant.message",
                            "attributes": mt.attributes({"gen_ai.event.content": content})}])
    error = refused(tmp_path, [mt.document([span])])
    assert "a tool call's function must be an object" in str(error) and error.line == 1


@pytest.mark.parametrize("value", [
    pytest.param({"stringValue": "x", "intValue": "1"}, id="two_kinds_in_one_value"),
    pytest.param({"doubleValue": "NaN"}, id="nan_as_protobuf_json_string"),
    pytest.param({"arrayValue": {"values": {"stringValue": "x"}}}, id="array_values_not_a_list"),
    pytest.param({"kvlistValue": {"values": [{"value": {"intValue": "1"}}]}}, id="kvlist_without_key"),
])
def test_malformed_attribute_values_are_refused_with_their_line(tmp_path, value):
    doc = email("attrs")
    spans_of(doc)[0]["attributes"].append({"key": "k", "value": value})
    error = refused(tmp_path, [mt.document([]), doc])
    assert error.line == 2


def test_deep_nesting_and_base64_ids_are_handled(tmp_path):
    deep = {"intValue": "1"}
    for _ in range(60):  # 180 JSON levels: within the reader's bound
        deep = {"arrayValue": {"values": [deep]}}
    doc = email("deep")
    for span in spans_of(doc):
        for key in ("spanId", "parentSpanId"):
            if key in span:
                span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
    spans_of(doc)[0]["attributes"].append({"key": "deep", "value": deep})
    import_otel_genai(write_lines(tmp_path / "deep.jsonl", [doc]), tmp_path / "out")
    assert [t.id for t in trajectories(tmp_path / "out")] == [mt.trajectory_id("deep")]
    for _ in range(10):
        deep = {"arrayValue": {"values": [deep]}}
    spans_of(doc)[0]["attributes"].append({"key": "deeper", "value": deep})
    (tmp_path / "deeper").mkdir()
    assert "nested more than 200 levels" in str(refused(tmp_path / "deeper", [doc]))


def test_joining_many_tool_spans_by_name_is_linear():
    # Bug: each tool span without a call id scanned the run's calls from the first: quadratic,
    # 20,000 calls took about 10 s of joining alone (minutes for a large hostile run); now one
    # queue per tool name. Timed on the join itself, so that parsing does not hide it.
    count = 20_000
    calls = [Call(id=f"c{n}", tool="lookup", args={"n": n}) for n in range(count)]
    spans = [otel_genai._Span(trace_id="1" * 32, span_id=f"{n + 1:016x}", parent_id="f" * 16,
                              name="execute_tool lookup", start_ns=mt.T0 + 1000 * n, end_ns=mt.T0 + 1000 * n + 1,
                              attrs={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup"},
                              events=[], error=None, line=1) for n in range(count)]
    started = time.perf_counter()
    joined = otel_genai._join_tool_spans(calls, spans)
    elapsed = time.perf_counter() - started
    assert [c.args["n"] for c in joined] == list(range(count))  # each span joined the first call left
    assert joined[-1].started_at.isoformat() == "2026-01-01T00:00:00.019999+00:00"
    assert elapsed < 3, f"{elapsed:.1f} s"


# --- import: drafts --------------------------------------------------------------------------------


def _set_agent(doc: dict, value: dict) -> dict:
    for span in spans_of(doc):
        for attribute in span["attributes"]:
            if attribute["key"] == "gen_ai.agent.name":
                attribute["value"] = value
    return doc


@pytest.mark.parametrize("value, slug", [
    pytest.param({"intValue": "5"}, "5", id="int"),
    pytest.param({"arrayValue": {"values": [{"stringValue": "Ops"}]}}, "ops", id="array"),
])
def test_an_agent_name_that_is_not_a_string_still_drafts(tmp_path, value, slug):
    # Bug: AttributeError ('int' object has no attribute 'lower') / TypeError (unhashable list).
    doc = _set_agent(email("agent", tools=mt.EMAIL_TOOLS), value)
    written = import_otel_genai(write_lines(tmp_path / "t.jsonl", [doc]), tmp_path / "out", draft_rubric=True)
    assert written[-2:] == [tmp_path / "out" / "drafts" / f"draft-{slug}.yaml", tmp_path / "out" / "suite.yaml"]
    assert [c.tool for c in load_rubric(written[-2]).tool_correctness.expected_calls] == ["get_user", "update_user"]


def test_tool_parameters_whose_properties_are_not_an_object_are_refused(tmp_path):
    # Bug: AttributeError ('list' object has no attribute 'items') -> an internal error.
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"properties": ["a"]}}}]
    error = refused(tmp_path, [email("props", tools=tools)], draft_rubric=True)
    assert "tool 'f': the properties of its parameters must be an object" in str(error) and error.line == 1


def test_a_draft_that_makes_no_rubric_names_the_file(tmp_path):
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"properties": {"a": {"type": 5}}}}}]
    error = refused(tmp_path, [email("schema", tools=tools)], draft_rubric=True)
    assert "do not make a rubric" in str(error)  # refused() checked that the error names the file


def test_two_agents_whose_names_make_the_same_slug_get_two_drafts(tmp_path):
    # Bug: "Support Agent" and "support-agent" both wrote drafts/draft-support-agent.yaml: the
    # second replaced the first without a word (so did any two names without ASCII letters).
    other = [{"type": "function", "function": {"name": "refund", "parameters": {}}}]
    docs = [email("a", agent="Support Agent", tools=mt.EMAIL_TOOLS), email("b", agent="support-agent", tools=other),
            email("c", agent="日本語", tools=other), email("d", agent="Ελληνικά", tools=mt.EMAIL_TOOLS)]
    src = write_lines(tmp_path / "t.jsonl", docs)
    written = import_otel_genai(src, tmp_path / "out", draft_rubric=True)
    assert written[-1] == tmp_path / "out" / "suite.yaml"  # to fill in
    drafts = [load_rubric(path) for path in written[1:-1]]
    assert len(drafts) == 4 and len({d.id for d in drafts}) == 4
    declared = {d.description.split("'")[1]: [c.tool for c in d.tool_correctness.expected_calls] for d in drafts}
    assert declared == {"Support Agent": ["get_user", "update_user"], "support-agent": ["refund"],
                        "日本語": ["refund"], "Ελληνικά": ["get_user", "update_user"]}
    import_otel_genai(src, tmp_path / "again", draft_rubric=True)  # the names do not depend on the run
    assert sorted(p.name for p in (tmp_path / "again" / "drafts").iterdir()) == sorted(p.name for p in written[1:-1])


# --- import: copied as is --------------------------------------------------------------------------


def test_a_secret_in_a_trace_is_copied_as_it_is(tmp_path):
    key = "AKIAIOSFODNN7EXAMPLE"
    chat = [*mt.EMAIL_CHAT[:-1], {"role": "assistant", "content": f"Done. Your key is {key}."}]
    src = write_lines(tmp_path / "t.jsonl", [mt.otel_trace_from_chat(chat, name="leak")])
    import_otel_genai(src, tmp_path / "out")
    assert trajectories(tmp_path / "out")[0].output == f"Done. Your key is {key}."


# --- the writer --------------------------------------------------------------------------------------


def test_a_failed_import_removes_the_folders_it_made_above_out(tmp_path):
    # Bug: the parent folders of a new --out were made and stayed after a failed import.
    with pytest.raises(InputError):
        with ImportWriter(tmp_path / "new" / "deeper" / "out") as writer:
            writer.text("a.txt", "x")
            raise InputError("record 2 is broken")
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "kept").mkdir()
    with pytest.raises(InputError):
        with ImportWriter(tmp_path / "kept" / "made" / "out") as writer:
            raise InputError("broken")
    assert [p.name for p in tmp_path.rglob("*")] == ["kept"]  # only what this import made goes
    with ImportWriter(tmp_path / "new" / "deeper" / "out") as writer:
        writer.text("a.txt", "x")
    assert (tmp_path / "new" / "deeper" / "out" / "a.txt").read_text() == "x"


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, RuntimeError, MemoryError])
def test_any_exception_mid_import_leaves_nothing(tmp_path, interrupt):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "trajectories.jsonl").write_text("old\n")
    with pytest.raises(interrupt):
        with ImportWriter(tmp_path / "out") as writer:
            writer.lines("trajectories.jsonl").add({"id": "new"})
            raise interrupt()
    assert [p.name for p in tmp_path.rglob("*")] == ["out", "trajectories.jsonl"]
    assert (tmp_path / "out" / "trajectories.jsonl").read_text() == "old\n"


def test_a_value_that_is_not_json_is_refused_not_written(tmp_path):
    # Bug: json.dumps wrote NaN and Infinity, which no strict JSON reader (judgekit's own) reads back.
    for write in (lambda w: w.lines("t.jsonl").add({"score": float("nan")}), lambda w: w.json("w.json", [float("inf")])):
        with pytest.raises(ValueError, match="not JSON compliant"):
            with ImportWriter(tmp_path / "out") as writer:
                write(writer)
        assert list(tmp_path.iterdir()) == []


def test_out_links_and_the_source_itself_are_never_written_through(tmp_path):
    src = write_lines(tmp_path / "traces.jsonl", [email("links")])
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    out = tmp_path / "out"
    out.mkdir()
    (out / "trajectories.jsonl").symlink_to(outside)
    import_otel_genai(src, out)  # the link is replaced, its target untouched
    assert outside.read_text() == "keep" and not (out / "trajectories.jsonl").is_symlink()
    (out / "trajectories.jsonl").unlink()
    (out / "trajectories.jsonl").symlink_to(src)
    done = CliRunner().invoke(cli_main, ["import", "otel-genai", str(src), "--out", str(out)])
    assert done.exit_code == 2 and "would overwrite an input" in done.output
    as_out = CliRunner().invoke(cli_main, ["import", "otel-genai", str(src), "--out", str(src)])
    assert as_out.exit_code == 2 and json.loads(src.read_text().splitlines()[0]) == email("links")


# --- export: the file ----------------------------------------------------------------------------------


def parse(line: str) -> ExportLogsServiceRequest:
    """An exported line as the protobuf message (hex ids back to the protobuf JSON's base64)."""
    document = json.loads(line)
    for resource in document["resourceLogs"]:
        for scope in resource["scopeLogs"]:
            for log in scope["logRecords"]:
                for key in ("traceId", "spanId"):
                    if key in log:
                        log[key] = base64.b64encode(bytes.fromhex(log[key])).decode()
    return json_format.Parse(json.dumps(document), ExportLogsServiceRequest())


def _with_axes(record: Path, target: Path, edit) -> Path:
    lines = []
    for line in record.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if "result" in row:
            for axis in row["result"]["axes"].values():
                edit(axis)
        lines.append(json.dumps(row))
    target.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return refoot_file(target, record)  # the footer its edited results make: a record, not a forgery


def test_every_score_round_trips_exactly_through_protobuf(record, tmp_path):
    scores = iter([5e-324, 1 / 3, 0.1 + 0.2, 1 - 2**-53])

    def edit(axis):
        axis["score"] = next(scores)
        if axis["axis"] == "task_success":
            axis["passed"] = False

    weird = _with_axes(record, tmp_path / "weird.jsonl", edit)
    assert export(weird, "--otel", tmp_path / "events.jsonl").exit_code == 0
    found = [{a.key: getattr(a.value, a.value.WhichOneof("value")) for a in log.attributes}
             for line in (tmp_path / "events.jsonl").read_text().splitlines()
             for log in parse(line).resource_logs[0].scope_logs[0].log_records]
    expected = [(r.trajectory_id, name, res.score) for r in read_run(weird).results for name, res in r.axes.items()]
    assert [(f["judgekit.trajectory.id"], f["gen_ai.evaluation.name"], f["gen_ai.evaluation.score.value"])
            for f in found] == expected and len(expected) == 4


def test_a_key_in_an_axis_error_is_masked_in_the_explanation(record, tmp_path):
    key = "sk-proj-" + "A1b2C3d4" * 4

    def edit(axis):
        axis.update(status="error", score=None, error=f"401 from the judge: bad key {key}")

    errored = _with_axes(record, tmp_path / "errored.jsonl", edit)
    assert export(errored, "--otel", tmp_path / "events.jsonl").exit_code == 0
    text = (tmp_path / "events.jsonl").read_text()
    assert key not in text and "401 from the judge" in text and '"error.type"' in text


@pytest.mark.parametrize("cut", [pytest.param(lambda t: t[: len(t) // 2], id="cut_mid_line"),
                                 pytest.param(lambda t: "".join(t.splitlines(True)[:-1]), id="no_footer"),
                                 pytest.param(lambda t: "", id="empty"),
                                 pytest.param(lambda t: '{"resourceSpans": []}\n', id="not_a_run_record")])
def test_a_cut_or_foreign_record_exports_nothing(record, tmp_path, cut):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(cut(record.read_text(encoding="utf-8")), encoding="utf-8")
    done = export(bad, "--otel", tmp_path / "events.jsonl")
    assert done.exit_code == 2 and "bad.jsonl" in done.output and not (tmp_path / "events.jsonl").exists()


def test_otel_never_replaces_a_collectors_file_of_other_logs(record, tmp_path):
    # Bug: any file whose first line held "resourceLogs" counted as a previous export, so the
    # collector's own file of application logs was replaced by the events.
    theirs = tmp_path / "app-logs.jsonl"
    theirs.write_text(json.dumps({"resourceLogs": [{"scopeLogs": [{"scope": {"name": "my.app"}, "logRecords": [
        {"body": {"stringValue": "user logged in"}}]}]}]}) + "\n", encoding="utf-8")
    before = theirs.read_bytes()
    done = export(record, "--otel", theirs)
    assert done.exit_code == 2 and "refusing to overwrite" in done.output and theirs.read_bytes() == before
    ours = tmp_path / "events.jsonl"
    assert export(record, "--otel", ours).exit_code == 0 and export(record, "--otel", ours).exit_code == 0


def test_the_api_never_replaces_the_record_it_exports(record, tmp_path):
    # Bug: export_otel(run, run) replaced the run record with its own events (only the CLI checked).
    copy = tmp_path / "run.jsonl"
    copy.write_bytes(record.read_bytes())
    with pytest.raises(InputError, match="would overwrite an input"):
        export_otel(copy, copy)
    assert copy.read_bytes() == record.read_bytes()


# --- export: the endpoint -------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [301, 302, 307])
def test_a_receiver_that_redirects_has_not_taken_the_events(record, tmp_path, status):
    # Bug: the SDK follows no redirect and counts any 2xx or 3xx a success: "sent 4 events" to an
    # http:// endpoint that only redirects to https://, and the file written.
    with Receiver(status=status, headers={"Location": "https://127.0.0.1/v1/logs"}) as receiver:
        done = export(record, "--otel", tmp_path / "events.jsonl", "--otlp-endpoint", receiver.url)
    assert done.exit_code == 2 and f"0 of 4 delivered (the receiver answered {status}" in done.output
    assert "https://127.0.0.1/v1/logs" in done.output and not (tmp_path / "events.jsonl").exists()


def test_records_a_receiver_rejects_as_a_partial_success_are_not_delivered(record, tmp_path):
    # Bug: an OTLP partial_success answer (HTTP 200) was counted as every record delivered.
    answer = ExportLogsServiceResponse()
    answer.partial_success.rejected_log_records = 3
    answer.partial_success.error_message = "quota exceeded"
    with Receiver(body=answer.SerializeToString()) as receiver:
        done = export(record, "--otel", tmp_path / "events.jsonl", "--otlp-endpoint", receiver.url)
    assert receiver.received == 4
    assert done.exit_code == 2 and "1 of 4 delivered (the receiver rejected 3 record(s): quota exceeded)" in done.output
    assert not (tmp_path / "events.jsonl").exists()
    with Receiver(body=ExportLogsServiceResponse().SerializeToString()) as receiver:  # an empty partial_success
        assert export(record, "--otlp-endpoint", receiver.url).exit_code == 0 and receiver.received == 4


def test_a_receiver_that_trickles_its_answer_is_cut_off_by_the_timeout(record, tmp_path):
    # Bug: the requests timeout bounds each read, not the answer: a receiver sending one byte
    # every 0.2 s held the export (and its file) for ever, whatever --timeout said.
    started = time.monotonic()
    with Receiver(trickle=True) as receiver:
        done = export(record, "--otel", tmp_path / "events.jsonl", "--otlp-endpoint", receiver.url, "--timeout", "0.25")
    elapsed = time.monotonic() - started
    assert done.exit_code == 2 and "0 of 4 delivered (no answer within 1 s)" in done.output, done.output
    assert elapsed < 8 and not (tmp_path / "events.jsonl").exists()


def test_a_receiver_that_never_answers_is_cut_off_by_the_timeout(record):
    listener = socket.create_server(("127.0.0.1", 0))  # accepts (the backlog) and never answers
    try:
        started = time.monotonic()
        done = export(record, "--otlp-endpoint", f"http://127.0.0.1:{listener.getsockname()[1]}", "--timeout", "0.25")
        assert done.exit_code == 2 and "0 of 4 delivered" in done.output and time.monotonic() - started < 8
    finally:
        listener.close()


@pytest.mark.parametrize("timeout", ["inf", "nan", "1e300"])
def test_a_timeout_that_is_not_a_reasonable_number_is_refused(record, timeout):
    # Bug: inf and nan crashed with an internal error (int(inf * 1000)).
    done = export(record, "--otlp-endpoint", "http://127.0.0.1:9", "--timeout", timeout)
    assert done.exit_code == 2 and "--timeout must be more than 0 and at most 3600 seconds" in done.output


@pytest.mark.parametrize("endpoint, url", [
    ("http://h:4318", "http://h:4318/v1/logs"), ("http://h:4318/v1/logs/", "http://h:4318/v1/logs"),
    # Bug: /v1/logs was appended after the query: ...?tenant=a/v1/logs
    ("https://h/otlp?tenant=a", "https://h/otlp/v1/logs?tenant=a"),
])
def test_the_logs_path_goes_into_the_path(endpoint, url):
    assert logs_url(endpoint) == url
