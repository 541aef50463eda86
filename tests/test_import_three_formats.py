"""One run written in three formats -- an OpenAI-chat transcript, an OpenTelemetry GenAI export
and an Inspect AI log -- imports to the same trajectory and scores the same on every axis.

The transcript is the source; the OTel trace and the Inspect log are produced from it by the
fixture generators in tests/data (each built on its format's published schema). Ids differ by
format (each importer names a run the way its format does), metadata says where a run came
from, and only the OTel and Inspect forms carry times (of each call, of the run): everything
else must be equal.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest
import yaml

from judgekit.rubric import lock as locking
from judgekit import run_suite
from judgekit.importers.inspect_ai import import_inspect
from judgekit.importers.openai_chat import import_openai_chat
from judgekit.importers.otel_genai import import_otel_genai
from judgekit.rubric.model import Rubric
from judgekit.trajectory import iter_trajectories

DATA = Path(__file__).parent / "data"


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


make_traces = _load("three_formats_make_traces", DATA / "otel" / "make_traces.py")
make_logs = _load("three_formats_make_logs", DATA / "inspect" / "make_logs.py")


def _call(call_id: str, name: str, args: dict | str) -> dict:
    arguments = args if isinstance(args, str) else json.dumps(args)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


# A run with what makes an import hard: a system message, several calls in one turn answered out
# of order, a result that is not JSON, a second user turn (a confirmation placed among the calls),
# a write after it, and an answer spread over content parts.
CHAT = [
    {"role": "system", "content": "You book meeting rooms. Confirm before booking."},
    {"role": "user", "content": "Book room 4 for Friday, I am user 12."},
    {"role": "assistant", "content": "Checking.", "tool_calls": [
        _call("c1", "find_room", {"room": 4}), _call("c2", "get_user", {"user_id": 12})]},
    {"role": "tool", "tool_call_id": "c2", "content": '{"id": 12, "name": "Ada"}'},
    {"role": "tool", "tool_call_id": "c1", "content": '{"room": 4, "free": ["Friday"]}'},
    {"role": "assistant", "content": "Room 4 is free on Friday. Shall I book it?"},
    {"role": "user", "content": "Yes, book it."},
    {"role": "assistant", "content": None, "tool_calls": [_call("c3", "book_room", {"room": 4, "day": "Friday", "user_id": 12})]},
    {"role": "tool", "tool_call_id": "c3", "content": '{"booking": "B-17"}'},
    {"role": "assistant", "content": [{"type": "text", "text": "Booked: "}, {"type": "text", "text": "B-17."}]},
]

RUBRIC = Rubric.model_validate({
    "id": "booking", "version": "1.0.0", "registered": "2026-01-01",
    "task_success": {"guide": "The answer states the booking.", "required_outputs": ["B-17"]},
    "tool_correctness": {
        "guide": "Book room 4 on Friday for user 12, after looking the room up.",
        "expected_calls": [
            {"tool": "find_room", "values": {"room": {"equals": 4}}},
            {"tool": "book_room", "args": {"room": {"type": "integer"}},
             "values": {"room": {"equals": 4}, "day": {"equals": "friday", "normalize": ["casefold"]},
                        "user_id": {"equals": 12}}},
        ],
        "in_scope": ["find_room", "book_room"],
        "ordered": True,
    },
})


def _imports(tmp_path: Path, messages: list[dict] = CHAT) -> dict[str, Path]:
    """``messages`` written in each format and imported; the trajectory file of each import."""
    name = "three-formats"
    chat = tmp_path / "chat" / "runs.jsonl"
    chat.parent.mkdir()
    chat.write_text(json.dumps({"id": "booking-run", "messages": messages}) + "\n", encoding="utf-8")
    import_openai_chat(chat, tmp_path / "chat" / "out")

    otel = tmp_path / "otel" / "traces.jsonl"
    otel.parent.mkdir()
    otel.write_text(json.dumps(make_traces.otel_trace_from_chat(messages, name=name)) + "\n", encoding="utf-8")
    import_otel_genai(otel, tmp_path / "otel" / "out")

    (tmp_path / "inspect").mkdir()
    log = make_logs.write_eval_log(make_logs.inspect_log_from_chat(messages, task="booking", sample_id="booking-run"),
                                   tmp_path / "inspect" / "booking.eval")
    import_inspect(log, tmp_path / "inspect" / "out")
    return {
        "openai-chat": tmp_path / "chat" / "out" / "trajectories.jsonl",
        "otel-genai": tmp_path / "otel" / "out" / "trajectories.jsonl",
        "inspect": tmp_path / "inspect" / "out" / "trajectories" / "booking.jsonl",
    }


def _comparable(path: Path) -> dict:
    """The one trajectory of ``path``, without what legitimately differs by format."""
    [item] = list(iter_trajectories(path))
    dumped = item.trajectory.model_dump(mode="json", exclude={"id", "metadata", "latency_s"})
    for call in dumped["calls"]:
        call.pop("started_at"), call.pop("ended_at")
    return dumped


def _suite(folder: Path, trajectories: Path) -> Path:
    rubrics = folder / "rubrics"
    rubrics.mkdir(parents=True)
    (rubrics / "booking.yaml").write_text(RUBRIC.to_yaml(), encoding="utf-8")
    _, problems = locking.lock([rubrics], rubrics / locking.LOCK_NAME)
    assert not problems
    suite = {"name": "three formats", "rubrics": ["rubrics"], "lock": "rubrics/rubrics.lock",
             "trajectories": [{"file": os.path.relpath(trajectories, folder), "rubric": RUBRIC.ref}]}
    (folder / "suite.yaml").write_text(yaml.safe_dump(suite), encoding="utf-8")
    return folder / "suite.yaml"


def test_the_same_run_in_three_formats_imports_to_the_same_trajectory(tmp_path):
    files = _imports(tmp_path)
    chat, otel, inspect = (_comparable(files[name]) for name in ("openai-chat", "otel-genai", "inspect"))
    assert chat == otel == inspect
    # ...and that trajectory is the run, not an empty one all three agree on.
    assert [c["tool"] for c in chat["calls"]] == ["find_room", "get_user", "book_room"]
    assert chat["calls"][0]["result"] == {"room": 4, "free": ["Friday"]}
    assert chat["prompt"] == "Book room 4 for Friday, I am user 12."
    assert chat["turns"] == [{"text": "Yes, book it.", "before_call": 2}]
    assert chat["output"] == "Booked: B-17."
    assert set(chat["context"].values()) >= {"You book meeting rooms. Confirm before booking.", "Yes, book it."}


def test_the_same_run_in_three_formats_scores_the_same(tmp_path):
    files = _imports(tmp_path)
    scored = {}
    for name, trajectories in files.items():
        record = run_suite(_suite(tmp_path / f"suite-{name}", trajectories))
        [result] = record.results
        scored[name] = {axis: value.model_dump(mode="json") for axis, value in result.axes.items()}
    assert scored["openai-chat"] == scored["otel-genai"] == scored["inspect"]
    axes = scored["openai-chat"]
    assert axes["task_success"]["passed"] is True
    assert (axes["tool_correctness"]["points"], axes["tool_correctness"]["max_points"]) == (8, 8)


@pytest.mark.parametrize("slip", ["wrong_day", "no_lookup"])
def test_a_slip_costs_the_same_point_in_every_format(tmp_path, slip):
    """Identity that holds only for perfect runs would prove little: one flawed run, three formats."""
    flawed = json.loads(json.dumps(CHAT))
    if slip == "wrong_day":
        flawed[7]["tool_calls"][0]["function"]["arguments"] = json.dumps({"room": 4, "day": "Monday", "user_id": 12})
    else:
        flawed[2]["tool_calls"] = flawed[2]["tool_calls"][1:]
        del flawed[4]
    files = _imports(tmp_path, flawed)
    results = []
    for name, trajectories in files.items():
        [result] = run_suite(_suite(tmp_path / f"suite-{name}", trajectories)).results
        results.append(result.axes["tool_correctness"].model_dump(mode="json"))
    assert results[0] == results[1] == results[2]
    assert results[0]["points"] == (7 if slip == "wrong_day" else 5) and results[0]["max_points"] == 8
