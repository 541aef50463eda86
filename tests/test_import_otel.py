"""``judgekit import otel-genai``: OTLP/JSON GenAI traces -> trajectories.

The anchor: a chat transcript played back as an instrumented agent's trace (current semconv form
and the older event form) imports to the trajectory ``judgekit import openai-chat`` makes of the
transcript itself, and scores the same. Then the mapping's details (tool spans, sub-agents,
interleaved traces, remote parents), bounded memory on a large file, determinism, drafts, and
every malformed input refused with its file and line, leaving nothing behind.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import base64
import json
import sys
import time
import tracemalloc
from datetime import date
from pathlib import Path

import jiter
import pytest
import yaml
from click.testing import CliRunner

from judgekit.rubric import lock as locking
from judgekit.cli import main as cli_main
from judgekit.errors import InputError
from judgekit.importers.openai_chat import import_openai_chat
from judgekit.importers.otel_genai import import_otel_genai
from judgekit.rubric.model import Rubric, load_rubric
from judgekit.run import run_suite
from judgekit.trajectory import Trajectory

DATA = Path(__file__).parent / "data" / "otel"
sys.path.insert(0, str(DATA))
import make_traces as mt  # noqa: E402

MULTI_TURN = [
    {"role": "system", "content": "You book rooms."},
    {"role": "user", "content": [{"type": "text", "text": "Book room 4 "}, {"type": "text", "text": "for Friday."}]},
    {"role": "assistant", "content": "Checking.", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "find_room", "arguments": "{\"room\": 4}"}},
        {"id": "c2", "type": "function", "function": {"name": "calendar", "arguments": "not json"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "{\"room\": 4, \"free\": [\"Friday\"]}"},
    {"role": "tool", "tool_call_id": "c2", "content": "plain text result"},
    {"role": "assistant", "content": "Room 4 is free on Friday. Shall I book it?"},
    {"role": "user", "content": "Yes, book it."},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c3", "type": "function", "function": {"name": "book_room", "arguments": "{\"room\": 4, \"day\": \"Friday\"}"}}]},
    {"role": "tool", "tool_call_id": "c3", "content": "{\"booking\": \"B-17\"}"},
    {"role": "assistant", "content": "Booked: B-17."},
]


def write_lines(path: Path, documents: list[dict]) -> Path:
    path.write_text("".join(json.dumps(d) + "\n" for d in documents), encoding="utf-8")
    return path


def trajectories(out: Path) -> list[Trajectory]:
    lines = (out / "trajectories.jsonl").read_text(encoding="utf-8").splitlines()
    return [Trajectory.model_validate_json(line) for line in lines]


def import_one(tmp_path: Path, documents: list[dict], **options) -> list[Trajectory]:
    out = tmp_path / "out"
    import_otel_genai(write_lines(tmp_path / "traces.jsonl", documents), out, **options)
    return trajectories(out)


def same_calls(calls) -> list[dict]:
    """Calls without their times (openai-chat transcripts have none)."""
    return [call.model_dump(exclude={"started_at", "ended_at"}) for call in calls]


def scored_suite(folder: Path, trajectory_file: Path, rubric: Rubric) -> Path:
    """A suite beside ``trajectory_file`` scoring it with ``rubric`` (pre-registered)."""
    rubrics = folder / "rubrics"
    rubrics.mkdir(parents=True, exist_ok=True)
    (rubrics / f"{rubric.id}.yaml").write_text(rubric.to_yaml(), encoding="utf-8")
    _, problems = locking.lock([rubrics], rubrics / locking.LOCK_NAME)
    assert not problems
    suite = {"name": "otel", "rubrics": ["rubrics"], "lock": "rubrics/rubrics.lock",
             "trajectories": [{"file": os.path.relpath(trajectory_file, folder), "rubric": rubric.id}]}
    (folder / "suite.yaml").write_text(yaml.safe_dump(suite), encoding="utf-8")
    return folder / "suite.yaml"


BOOKING_RUBRIC = Rubric.model_validate({
    "id": "booking", "version": "1.0.0", "registered": "2026-01-01",
    "task_success": {"guide": "The answer states the booking.", "required_outputs": ["B-17"]},
    "tool_correctness": {"guide": "Book room 4 on Friday.", "expected_calls": [
        {"tool": "book_room", "args": {"room": {"const": 4}, "day": {"const": "Friday"}}}], "in_scope": ["book_room"]},
})


# --- the anchor: the same trajectory as openai-chat ---------------------------------------------


@pytest.mark.parametrize("form", [pytest.param("current", id="current_semconv"),
                                  pytest.param("events", id="older_event_form")])
@pytest.mark.parametrize("chat", [pytest.param(mt.EMAIL_CHAT, id="email"), pytest.param(MULTI_TURN, id="multi_turn")])
def test_a_replayed_chat_imports_as_openai_chat_does_and_scores_the_same(tmp_path, form, chat):
    name = f"run-{form}"
    (tmp_path / "otel").mkdir()
    otel_file = write_lines(tmp_path / "otel" / "traces.jsonl", [mt.otel_trace_from_chat(chat, name=name, form=form)])
    chat_file = tmp_path / "chat" / "chat.jsonl"
    chat_file.parent.mkdir()
    chat_file.write_text(json.dumps({"id": mt.trajectory_id(name), "messages": chat}) + "\n", encoding="utf-8")
    import_otel_genai(otel_file, tmp_path / "otel" / "out")
    import_openai_chat(chat_file, tmp_path / "chat" / "out")
    [from_otel], [from_chat] = trajectories(tmp_path / "otel" / "out"), trajectories(tmp_path / "chat" / "out")

    assert from_otel.id == from_chat.id == mt.trajectory_id(name)
    for name_ in ("prompt", "output", "context", "turns"):
        assert getattr(from_otel, name_) == getattr(from_chat, name_), name_
    assert same_calls(from_otel.calls) == same_calls(from_chat.calls)
    assert all(call.started_at and call.ended_at and call.started_at < call.ended_at for call in from_otel.calls)
    assert from_otel.metadata["otel"] == {"trace_id": mt.trace_id(name), "span_id": mt.root_span_id(name)}
    assert from_otel.metadata["system"] == "openai" and from_otel.metadata["agent"] == "support-agent"

    records = [run_suite(scored_suite(tmp_path / kind, tmp_path / kind / "out" / "trajectories.jsonl",
                                      BOOKING_RUBRIC)) for kind in ("otel", "chat")]
    axes = [{n: r.model_dump() for n, r in record.results[0].axes.items()} for record in records]
    assert axes[0] == axes[1] and set(axes[0]) == {"task_success", "tool_correctness"}
    if chat is MULTI_TURN:
        assert records[0].results[0].axes["tool_correctness"].score == 1.0
        assert from_otel.turns[0].text == "Yes, book it." and from_otel.turns[0].before_call == 2
        assert from_otel.calls[1].args == {"$unparsed": "not json"}


def test_the_checked_in_fixture_is_what_the_helper_makes():
    assert (DATA / "mixed.jsonl").read_text(encoding="utf-8").splitlines() == mt.mixed_fixture()


# --- the mapping ---------------------------------------------------------------------------------


def test_interleaved_traces_over_many_lines_make_one_run_each_and_other_traces_are_skipped(tmp_path):
    out = tmp_path / "out"
    written = import_otel_genai(DATA / "mixed.jsonl", out)
    runs = trajectories(out)
    assert written == [out / "trajectories.jsonl", out / "suite.yaml"]
    assert [t.id for t in runs] == [mt.trajectory_id("email-current"), mt.trajectory_id("email-events")]
    lines = (DATA / "mixed.jsonl").read_text().splitlines()
    for run in runs:  # imported_from names the line holding the run's root span
        line = int(run.metadata["imported_from"].split(":")[1])
        assert run.metadata["otel"]["span_id"] in lines[line - 1]
        assert [c.tool for c in run.calls] == ["get_user", "update_user"]
        assert run.output == "Done: your email is now alice@example.com."
        assert run.latency_s == pytest.approx(1.1)
    assert {t.metadata["conversation_id"] for t in runs} == {"email-current", "email-events"}


def _agent(name: str, agent: str, spans: list[dict]) -> list[dict]:
    """``spans`` under an invoke_agent root, in the trace named ``name``."""
    root = mt.span(mt.trace_id(name), mt.root_span_id(name), None, f"invoke_agent {agent}", mt.T0,
                   mt.T0 + 100 * mt.STEP, {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent})
    return [*spans, root]


def _tool(name: str, sid: str, parent: str, tool: str, at: int, *, error=None, **attrs) -> dict:
    return mt.span(mt.trace_id(name), mt._hex(sid, 8), parent, f"execute_tool {tool}", mt.T0 + at * mt.STEP,
                   mt.T0 + (at + 1) * mt.STEP, {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
                                                **attrs}, error=error)


def test_tool_spans_time_fail_and_add_calls(tmp_path):
    root = mt.root_span_id("tools")
    chat = mt.span(mt.trace_id("tools"), mt._hex("chat", 8), root, "chat m", mt.T0 + mt.STEP, mt.T0 + 2 * mt.STEP, {
        "gen_ai.operation.name": "chat",
        "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": "Go."}]}]),
        "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [
            {"type": "tool_call", "id": "t1", "name": "charge", "arguments": {"amount": 5}},
            {"type": "tool_call", "name": "notify", "arguments": {"to": "ops"}}]}])})
    spans = [
        chat,
        _tool("tools", "t1", root, "charge", 3, error="card declined", **{"gen_ai.tool.call.id": "t1",
                                                                      "error.type": "PaymentError"}),
        _tool("tools", "n", root, "notify", 5, **{"gen_ai.tool.call.result": '{"sent": true}'}),
        _tool("tools", "x", root, "audit_log", 7, **{"gen_ai.tool.call.id": "fw-1",
                                                  "gen_ai.tool.call.arguments": '{"entry": "charged"}'}),
    ]
    [run] = import_one(tmp_path, [mt.document(_agent("tools", "pay", spans))])
    charge, notify, audit = run.calls
    assert (charge.tool, charge.error, charge.result) == ("charge", "PaymentError: card declined", None)
    assert (notify.tool, notify.id, notify.result, notify.error) == ("notify", None, {"sent": True}, None)
    assert notify.started_at.isoformat() == "2026-01-01T00:00:00.500000+00:00"
    assert (audit.tool, audit.id, audit.args) == ("audit_log", "fw-1", {"entry": "charged"})  # no call in messages


def test_without_captured_content_the_calls_come_from_the_tool_spans(tmp_path):
    root = mt.root_span_id("bare")
    spans = [_tool("bare", "a", root, "lookup", 1, **{"gen_ai.tool.call.arguments": '{"q": 1}'}),
             _tool("bare", "b", root, "lookup", 3, **{"gen_ai.tool.call.arguments": "[1]"})]
    [run] = import_one(tmp_path, [mt.document(_agent("bare", "a", spans))])
    assert (run.prompt, run.output) == ("", "")
    assert [c.args for c in run.calls] == [{"q": 1}, {"$unparsed": "[1]"}]
    assert run.calls[1].error == "the arguments were not a JSON object"


def test_a_sub_agent_is_left_out_of_the_run_that_called_it(tmp_path):
    outer = mt.otel_trace_from_chat(mt.EMAIL_CHAT, name="outer", agent="front-desk")
    spans = outer["resourceSpans"][0]["scopeSpans"][0]["spans"]
    trace, root = mt.trace_id("outer"), mt.root_span_id("outer")
    sub = mt.span(trace, mt._hex("sub", 8), spans[1]["spanId"], "invoke_agent researcher", mt.T0 + 3, mt.T0 + 9,
                  {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "researcher"})
    sub_chat = mt.otel_trace_from_chat([{"role": "user", "content": "Secret sub-task"},
                                        {"role": "assistant", "content": "sub answer"}], name="inner")
    inner = [dict(s, traceId=trace, parentSpanId=sub["spanId"]) for s in sub_chat["resourceSpans"][0]["scopeSpans"][0]["spans"][:-1]]
    inner.append(_tool("outer", "subtool", sub["spanId"], "web_search", 4))
    spans[:0] = [*inner, sub]
    [run] = import_one(tmp_path, [outer])
    assert run.id == f"{trace}-{root}" and run.metadata["agent"] == "front-desk"
    assert [c.tool for c in run.calls] == ["get_user", "update_user"]
    assert "Secret sub-task" not in json.dumps(run.model_dump(mode="json"))


def test_a_trace_without_agent_span_is_one_run_from_its_root_and_a_remote_parent_waits_for_the_end(tmp_path):
    chat_only = mt.document([mt.span(mt.trace_id("llm"), mt.root_span_id("llm"), None, "chat gpt", mt.T0, mt.T0 + 5, {
        "gen_ai.operation.name": "chat", "gen_ai.system": "openai", "gen_ai.request.model": "gpt",
        "gen_ai.input.messages": [{"role": "user", "parts": [{"type": "text", "content": "Hi"}]}],
        "gen_ai.output.messages": [{"role": "assistant", "parts": [{"type": "text", "content": "Hello"}]}]})])
    remote = mt.otel_trace_from_chat(mt.EMAIL_CHAT, name="remote")
    remote["resourceSpans"][0]["scopeSpans"][0]["spans"][-1]["parentSpanId"] = "00f067aa0ba902b7"  # in another export
    runs = import_one(tmp_path, [remote, chat_only])
    assert [r.id for r in runs] == [mt.trajectory_id("llm"), mt.trajectory_id("remote")]  # the open trace last
    assert (runs[0].prompt, runs[0].output, runs[0].metadata["model"]) == ("Hi", "Hello", "gpt")


def test_one_pretty_printed_document_and_base64_ids_are_read(tmp_path):
    doc = mt.otel_trace_from_chat(mt.EMAIL_CHAT, name="pretty")
    for span in doc["resourceSpans"][0]["scopeSpans"][0]["spans"]:
        span["traceId"] = base64.b64encode(bytes.fromhex(span["traceId"])).decode()
    src = tmp_path / "one.json"
    src.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    import_otel_genai(src, tmp_path / "out")
    [run] = trajectories(tmp_path / "out")
    assert run.id == mt.trajectory_id("pretty") and run.metadata["imported_from"] == "one.json"


# --- streaming, determinism -----------------------------------------------------------------------


def test_a_large_file_of_interleaved_traces_is_streamed_in_bounded_memory(tmp_path):
    src = tmp_path / "big.jsonl"
    count = 900
    with src.open("w", encoding="utf-8") as handle:
        for k in range(0, count, 3):  # three traces interleaved, two spans a line
            docs = [mt.otel_trace_from_chat(MULTI_TURN, name=f"run-{n}") for n in range(k, min(k + 3, count))]
            for line in mt.split_lines(mt.interleave(*docs)):
                handle.write(line + "\n")
    size = src.stat().st_size
    # jiter keeps a process-wide cache of up to 16,384 parsed strings. Left empty, its filling
    # counts here (8,879 strings, 0.6 MiB: a lone run peaked at 1.83 MiB, a run after other tests
    # below the limit); a full one only replaces entries. Filled first, the peak is the import's own.
    jiter.from_json(json.dumps([f"filler-{i}" for i in range(20_000)]).encode())
    tracemalloc.start()
    started = time.perf_counter()
    import_otel_genai(src, tmp_path / "out")
    elapsed = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    lines = (tmp_path / "out" / "trajectories.jsonl").read_text().splitlines()
    assert len(lines) == count
    assert size > 8 * 10**6 and peak < size / 5, (peak, size)  # a few open traces, never the file
    print(f"\n{count} runs, {size / 2**20:.1f} MiB in {elapsed:.2f} s (tracemalloc on), peak {peak / 2**20:.2f} MiB")


def test_the_same_input_gives_the_same_bytes_and_a_run_does_not_depend_on_its_neighbours(tmp_path):
    import_otel_genai(DATA / "mixed.jsonl", tmp_path / "a", draft_rubric=True)
    import_otel_genai(DATA / "mixed.jsonl", tmp_path / "b", draft_rubric=True)
    for name in ("trajectories.jsonl", "drafts/draft-support-agent.yaml"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    alone = tmp_path / "alone.jsonl"
    write_lines(alone, [mt.otel_trace_from_chat(mt.EMAIL_CHAT, name="email-current", tools=mt.EMAIL_TOOLS)])
    import_otel_genai(alone, tmp_path / "c")
    strip = lambda t: t.model_copy(update={"metadata": {k: v for k, v in t.metadata.items() if k != "imported_from"}})
    assert strip(trajectories(tmp_path / "c")[0]) == strip(trajectories(tmp_path / "a")[0])


# --- drafts ----------------------------------------------------------------------------------------


def test_tool_definitions_draft_an_unlocked_rubric(tmp_path):
    out = tmp_path / "out"
    written = import_otel_genai(DATA / "mixed.jsonl", out, draft_rubric=True)
    draft_path = out / "drafts" / "draft-support-agent.yaml"
    assert written == [out / "trajectories.jsonl", draft_path, out / "suite.yaml"] and not (out / "rubrics").exists()
    assert draft_path.read_text().startswith("# DRAFT: not pre-registered")
    draft = load_rubric(draft_path)
    assert (draft.version, draft.registered) == ("0.1.0-draft", date(2026, 1, 1))  # the earliest run's day
    declared = {t["function"]["name"]: t["function"]["parameters"]["properties"] for t in mt.EMAIL_TOOLS}
    assert {c.tool: c.args for c in draft.tool_correctness.expected_calls} == declared
    assert draft.tool_correctness.in_scope == ["get_user", "update_user"]
    import_otel_genai(DATA / "mixed.jsonl", tmp_path / "dated", draft_rubric=True, registered=date(2025, 5, 5))
    assert load_rubric(tmp_path / "dated" / "drafts" / "draft-support-agent.yaml").registered == date(2025, 5, 5)


# --- bad input ---------------------------------------------------------------------------------------


def _email(name="bad") -> dict:
    return mt.otel_trace_from_chat(mt.EMAIL_CHAT, name=name)


def _spans(doc: dict) -> list[dict]:
    return doc["resourceSpans"][0]["scopeSpans"][0]["spans"]


def _edit(edit):
    doc = _email()
    edit(_spans(doc))
    return [doc]


def _late_span():
    doc = _email()
    late = dict(_spans(doc)[0], spanId="1111111111111111")
    return [doc, mt.document([late])]


BAD = [
    pytest.param(lambda: "{\"resourceSpans\": []}\n{not json\n", 2, "invalid JSON", id="invalid_json_line"),
    pytest.param(lambda: [[1, 2]], 1, "not an OTLP JSON traces document", id="not_an_object"),
    pytest.param(lambda: _edit(lambda s: s[0].update(traceId="xyz")), 1, "traceId 'xyz' is not a valid id",
                 id="bad_trace_id"),
    pytest.param(lambda: _edit(lambda s: s[0].update(traceId="0" * 32)), 1, "not all zero", id="zero_trace_id"),
    pytest.param(lambda: _edit(lambda s: s[0]["attributes"].append({"key": "k", "value": {"intValue": "x"}})), 1,
                 "intValue must be an integer", id="bad_int_value"),
    pytest.param(lambda: _edit(lambda s: s[0].update(events=["not an event"])), 1, "a span event must be an object",
                 id="event_not_an_object"),
    pytest.param(_late_span, 2, "comes after the trace's root span (line 1)", id="span_after_its_root"),
    pytest.param(lambda: _edit(lambda s: s.insert(0, dict(s[0]))), 1, "appears twice", id="duplicate_span_id"),
    pytest.param(lambda: _edit(lambda s: s[0]["attributes"].__setitem__(-1, {
        "key": "gen_ai.output.messages", "value": {"stringValue": "[{"}})), 1, "gen_ai.output.messages is not valid JSON",
        id="messages_not_json"),
    pytest.param(lambda: _edit(lambda s: [a.update(value={"stringValue": json.dumps([{"role": "tool", "parts": [
        {"type": "tool_call_response", "id": "nope", "response": "x"}]}])}) for a in s[2]["attributes"]
        if a["key"] == "gen_ai.input.messages"]), 1, "unknown tool_call_id 'nope'", id="result_of_no_call"),
    pytest.param(lambda: [mt.document([mt.span(mt.trace_id("h"), mt.root_span_id("h"), None, "GET /", 1, 2, {})])],
                 None, "no GenAI run found", id="no_genai_span"),
]


@pytest.mark.parametrize("make, line, message", BAD)
def test_bad_input_is_refused_with_its_place_and_leaves_nothing(tmp_path, make, line, message):
    src = tmp_path / "bad.jsonl"
    made = make()
    if isinstance(made, str):
        src.write_text(made, encoding="utf-8")
    else:
        write_lines(src, made)
    with pytest.raises(InputError) as caught:
        import_otel_genai(src, tmp_path / "out")
    assert message in str(caught.value) and caught.value.path == str(src) and caught.value.line == line
    assert not (tmp_path / "out").exists() and [p.name for p in tmp_path.iterdir()] == ["bad.jsonl"]


def test_draft_rubric_without_tool_definitions_is_refused(tmp_path):
    with pytest.raises(InputError, match="no gen_ai.tool.definitions"):
        import_one(tmp_path, [_email()], draft_rubric=True)
    assert not (tmp_path / "out").exists()


# --- the command ----------------------------------------------------------------------------------------


def test_the_command_imports_and_its_help_describes_the_format(tmp_path):
    out = tmp_path / "out"
    done = CliRunner().invoke(cli_main, ["import", "otel-genai", str(DATA / "mixed.jsonl"), "--out", str(out),
                                         "--draft-rubric", "--registered", "2026-02-03"])
    assert done.exit_code == 0, done.output
    assert done.stdout.split() == [str(out / "trajectories.jsonl"), str(out / "drafts" / "draft-support-agent.yaml"),
                                   str(out / "suite.yaml")]
    assert load_rubric(out / "drafts" / "draft-support-agent.yaml").registered == date(2026, 2, 3)
    shown = CliRunner().invoke(cli_main, ["import", "--help"])
    assert "otel-genai" in shown.output and "OpenTelemetry GenAI traces" in shown.output
    bad = CliRunner().invoke(cli_main, ["import", "otel-genai", str(tmp_path / "missing.jsonl"), "--out", str(out)])
    assert bad.exit_code == 2 and "missing.jsonl: file not found" in bad.output
