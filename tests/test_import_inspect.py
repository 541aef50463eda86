"""Inspect AI logs (``judgekit import inspect``): samples become trajectories, the store a world.

Fixtures in tests/data/inspect/: ``agent.eval`` and ``agent.json`` are one hand-written log in
both forms (``make_logs.py`` writes them, after Inspect's published schema; both load in
inspect_ai 0.3.285); ``emails-inspect-0.3.285.eval`` is a real log that inspect_ai 0.3.285 wrote
(``make_real_log.py``: mockllm, no provider), with zstd-compressed members.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import time
import zipfile
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from judgekit._util.io import canonical_json
from judgekit.cli import main
from judgekit.errors import InputError
from judgekit.importers import accepted_options, describe, get_importer
from judgekit.importers import inspect_ai as importer
from judgekit.importers.inspect_ai import import_inspect
from judgekit.importers.openai_chat import import_openai_chat
from judgekit.rubric.lock import lock

DATA = Path(__file__).parent / "data" / "inspect"
REAL = DATA / "emails-inspect-0.3.285.eval"
TRAJECTORIES = "trajectories/agent-support.jsonl"

_spec = importlib.util.spec_from_file_location("inspect_make_logs", DATA / "make_logs.py")
make_logs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_logs)


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def by_id(out: Path, name: str = TRAJECTORIES) -> dict[str, dict]:
    return {t["id"]: t for t in lines(out / name)}


def world(out: Path, trajectory: dict, side: str):
    """The JSON of one side of a trajectory's world, read from its file."""
    return json.loads((out / "trajectories" / trajectory["world"][side]["json_file"]).read_text(encoding="utf-8"))


def files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def write_log(tmp_path: Path, log: dict, form: str, name: str = "log") -> Path:
    path = tmp_path / f"{name}.{form}"
    return (make_logs.write_eval_log if form == "eval" else make_logs.write_json_log)(log, path)


def sample(**fields) -> dict:
    base = make_logs.inspect_sample_from_chat([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}])
    return {**base, **fields}


FORMS = pytest.mark.parametrize("form", ["eval", "json"])


# --- registration and the fixture -----------------------------------------------------------------


def test_registered_with_its_description_and_no_rubric_options():
    assert get_importer("inspect") is import_inspect
    assert describe("inspect") == "Inspect AI eval logs (.eval or .json), one trajectory per sample and epoch."
    assert accepted_options(import_inspect) == set()  # no rubric is written, so no --registered
    refused = cli("import", "inspect", DATA / "agent.eval", "--out", "x", "--registered", "2025-01-01")
    assert refused.exit_code == 2 and "does not take --registered" in refused.output


def _members(path: Path) -> list[tuple[str, bytes]]:
    with zipfile.ZipFile(path) as archive:  # contents, not bytes: another zlib may compress differently
        return [(name, archive.read(name)) for name in archive.namelist()]


def test_checked_in_fixtures_are_what_the_generator_writes(tmp_path):
    log = make_logs.agent_log()
    assert write_log(tmp_path, log, "json").read_bytes() == (DATA / "agent.json").read_bytes()
    assert _members(write_log(tmp_path, log, "eval")) == _members(DATA / "agent.eval")


# --- mapping --------------------------------------------------------------------------------------


def test_every_field_of_a_tool_run(tmp_path):
    out = tmp_path / "out"
    written = import_inspect(DATA / "agent.eval", out)
    run = by_id(out)["1_epoch_1"]
    note = "Prefers email over phone. " * 5
    assert {k: v for k, v in run.items() if k != "world"} == {
        "id": "1_epoch_1",
        "prompt": "Change my email to new@x.com. I am user 1.",
        "calls": [
            # The ToolEvent gives the untruncated result (the tool message was cut) and the times.
            {"id": "c1", "tool": "get_user", "args": {"user_id": 1},
             "result": {"id": 1, "email": "a@x.com", "note": "truncated in the message"},
             "started_at": "2025-03-04T10:00:02Z", "ended_at": "2025-03-04T10:00:03Z"},
            # Arguments are the agent's (the event's are condensed to an attachment); a content
            # part result is read as its text, then as JSON.
            {"id": "c2", "tool": "update_user", "args": {"user_id": 1, "email": "new@x.com"}, "result": {"ok": True},
             "started_at": "2025-03-04T10:00:03Z", "ended_at": "2025-03-04T10:00:04Z"},
        ],  # c9, a tool event with no call in the conversation, is left out
        "output": "Your email is now new@x.com.",
        "context": {"system-1": "You are a support agent.", "user-6": "No, thanks."},
        "turns": [{"text": "No, thanks.", "before_call": 2}],
        "metadata": {
            "source": "agent.eval", "task": "agent/support", "model": "openai/gpt-4o-mini",
            "eval_id": "eval-agent/support", "run_id": "run-1", "created": "2025-03-04T10:00:00+00:00",
            "inspect_ai": "0.3.85", "sample_id": 1, "epoch": 1, "target": "new@x.com",
            "scores": {"includes": "C"}, "sample_metadata": {"difficulty": "easy"},
        },
        "latency_s": 4.5,
    }
    assert world(out, run, "before") == {}
    # Only the root span's changes are replayed (the inner spans repeat them), attachments resolved.
    assert world(out, run, "after") == {"users": {"1": {"email": "new@x.com", "name": "Alice", "note": note}},
                                        "audit": ["email changed"]}
    names = {run["world"][side]["json_file"] for side in ("before", "after")}
    assert {out / "trajectories" / name for name in names} <= set(written)
    assert written[0] == out / TRAJECTORIES


def test_failed_calls_input_messages_and_an_early_stop(tmp_path):
    import_inspect(DATA / "agent.json", tmp_path / "out")
    run = by_id(tmp_path / "out")["refund-2_epoch_1"]
    assert [(c["id"], c.get("error")) for c in run["calls"]] == [
        ("r1", "approval: the approver refused"),  # the event's error wins over the tool message's
        ("r2", "parsing: Expecting value: line 1"),  # the call's parse_error
        ("r3", "the tool call failed"),  # the event says failed, with no error
        ("r4", "escalations are closed"),  # an older log's tool_error
    ]
    assert run["calls"][3]["result"] == "queued"
    assert run["prompt"] == "Refund order 7."  # the first user message of an input list
    assert run["context"] == {"system-1": "Be careful with refunds."}
    assert "turns" not in run  # the user message carrying r3's image is part of r3's result
    assert run["output"] == "I could not refund it."  # no completion: the last assistant text
    labels = run["metadata"]
    assert (labels["error"], labels["limit"], labels["scores"], labels["target"]) == (
        "RuntimeError('boom')", "message", {"match": 0}, ["refused", "approval"])
    assert world(tmp_path / "out", run, "before") == world(tmp_path / "out", run, "after") == {}


def test_older_logs_store_comes_from_the_outermost_state_events(tmp_path):
    import_inspect(DATA / "agent.json", tmp_path / "out")
    run = by_id(tmp_path / "out")["3_epoch_1"]
    # The nested step's StateEvent repeats its parent's insert: replayed twice it would say one, one, two.
    assert world(tmp_path / "out", run, "after") == {"steps": ["one", "two"], "done": True}


def test_a_sample_without_events_has_no_world(tmp_path):
    import_inspect(DATA / "agent.json", tmp_path / "out")
    run = by_id(tmp_path / "out")["1_epoch_2"]
    assert "world" not in run and "calls" not in run
    assert run["output"] == "I cannot do that."


@FORMS
def test_a_log_still_being_written_reads_its_journal_and_either_form_alike(tmp_path, form):
    log = make_logs.agent_log()
    if form == "eval":
        make_logs.write_eval_log(log, tmp_path / "log.eval", header=False)
        src = tmp_path / "log.eval"
    else:
        src = write_log(tmp_path, log, form)
    import_inspect(src, tmp_path / "out")
    import_inspect(DATA / "agent.eval", tmp_path / "reference")
    ours, reference = files(tmp_path / "out"), files(tmp_path / "reference")
    assert ours.keys() == reference.keys()
    for name in ours:
        if name.endswith(".jsonl"):  # the same but for the file named in metadata.source
            assert ours[name].replace(src.name.encode(), b"agent.eval") == reference[name]
        else:
            assert ours[name] == reference[name]


def test_a_real_inspect_log(tmp_path):
    """inspect_ai 0.3.285 wrote it: zstd members, the store change logged three times (tool span,
    solver span, root span), a ToolError, Python-repr tool results."""
    out = tmp_path / "out"
    result = cli("import", "inspect", REAL, "--out", out)
    assert result.exit_code == 0, result.output
    runs = by_id(out, "trajectories/emails.jsonl")
    assert list(runs) == ["2_epoch_1", "s1_epoch_1"]  # Inspect's order: epoch, then id
    ok, failed = runs["s1_epoch_1"], runs["2_epoch_1"]
    assert [(c["tool"], c["args"]) for c in ok["calls"]] == [("lookup", {"user_id": 1}), ("update_email", {"user_id": 1, "email": "a@x.com"})]
    assert ok["calls"][0]["result"].startswith("user 1: alice@old.com xxx") and len(ok["calls"][0]["result"]) == 172
    assert ok["calls"][1]["result"] == "{'ok': True, 'user_id': 1}"
    assert all(c["started_at"] < c["ended_at"] for c in ok["calls"])
    assert (ok["prompt"], ok["output"], ok["context"]) == ("Set user 1's email to a@x.com", "Done: a@x.com", {"system-1": "You are a support agent."})
    assert world(out, ok, "before") == {} and world(out, ok, "after") == {"email": "a@x.com", "users": [1]}
    assert failed["calls"][0]["error"] == "not an email address"
    assert world(out, failed, "after") == {}
    assert ok["metadata"]["scores"] == {"includes": "C"} and ok["metadata"]["inspect_ai"] == "0.3.285"
    assert result.output.splitlines()[0] == str(out / "trajectories" / "emails.jsonl")


# --- the store: JSON Patch ----------------------------------------------------------------------------


@pytest.mark.parametrize(("before", "changes", "after"), [
    pytest.param({}, [{"op": "add", "path": "/a", "value": {"b": [1]}}], {"a": {"b": [1]}}, id="add_key"),
    pytest.param({"l": [1, 3]}, [{"op": "add", "path": "/l/1", "value": 2}, {"op": "add", "path": "/l/-", "value": 4}],
                 {"l": [1, 2, 3, 4]}, id="insert_and_append"),
    pytest.param({"a": 1}, [{"op": "add", "path": "/b"}], {"a": 1, "b": None}, id="missing_value_is_null"),
    pytest.param({"a": 1, "b": 2}, [{"op": "remove", "path": "/a"}], {"b": 2}, id="remove"),
    pytest.param({"l": ["x", "y"]}, [{"op": "replace", "path": "/l/0", "value": "z", "replaced": "x"}], {"l": ["z", "y"]}, id="replace_in_list"),
    pytest.param({"a": {"k": 1}}, [{"op": "move", "from": "/a/k", "path": "/b"}], {"a": {}, "b": 1}, id="move"),
    pytest.param({"a": [1]}, [{"op": "copy", "from_": "/a", "path": "/b"}, {"op": "add", "path": "/b/-", "value": 2}],
                 {"a": [1], "b": [1, 2]}, id="copy_deep_with_from__spelling"),
    pytest.param({"a": 1}, [{"op": "test", "path": "/a", "value": 1}], {"a": 1}, id="test"),
    pytest.param({"a~b": {"c/d": 1}}, [{"op": "replace", "path": "/a~0b/c~1d", "value": 2}], {"a~b": {"c/d": 2}}, id="escaped_pointer"),
    pytest.param({"a": 1}, [{"op": "replace", "path": "", "value": {"new": True}}], {"new": True}, id="replace_whole_store"),
])
def test_store_changes_replay_as_json_patch(tmp_path, before, changes, after):
    events = [make_logs.event("sample_init", "2025-01-01T00:00:00Z", sample={"input": ""}, state={"store": before}),
              make_logs.event("store", "2025-01-01T00:00:01Z", changes=changes)]
    src = write_log(tmp_path, make_logs.eval_log([sample(events=events)]), "json")
    import_inspect(src, tmp_path / "out")
    [run] = lines(tmp_path / "out" / "trajectories/agent.jsonl")
    assert world(tmp_path / "out", run, "before") == before
    assert world(tmp_path / "out", run, "after") == after


def test_identical_worlds_share_one_file_named_by_content(tmp_path):
    store = {"inventory": {"apples": 3}}
    samples = [sample(id=n, events=[make_logs.event("sample_init", "2025-01-01T00:00:00Z", sample={"input": ""}, state={"store": store})])
               for n in (1, 2, 3)]
    import_inspect(write_log(tmp_path, make_logs.eval_log(samples), "eval"), tmp_path / "out")
    worlds = sorted((tmp_path / "out" / "trajectories" / "worlds").iterdir())
    assert [p.name for p in worlds] == [hashlib.sha256(canonical_json(store).encode()).hexdigest() + ".json"]
    assert {t["world"]["after"]["json_file"] for t in lines(tmp_path / "out" / "trajectories/agent.jsonl")} == {f"worlds/{worlds[0].name}"}


# --- scoring the import ----------------------------------------------------------------------------


RUBRIC = {
    "id": "support-email",
    "version": "1.0.0",
    "registered": "2025-03-04",
    "task_success": {
        "guide": "Pass when user 1's email is new@x.com in the store after the run.",
        "postconditions": [{"check": "equals", "collection": "/users", "where": {"name": "Alice"}, "field": "email", "value": "new@x.com"}],
        "side_effects": {"allow": ["users/**", "audit/**"]},
    },
    "tool_correctness": {
        "guide": "One update_user call for user 1 with the new address.",
        "expected_calls": [{"tool": "update_user", "args": {"user_id": {"const": 1}, "email": {"const": "new@x.com"}}}],
        "in_scope": ["update_user"],
    },
}


def test_the_imported_world_scores_in_a_suite(tmp_path):
    out = tmp_path / "out"
    assert cli("import", "inspect", DATA / "agent.eval", "--out", out).exit_code == 0
    (out / "rubrics").mkdir()
    (out / "rubrics" / "support-email.yaml").write_text(yaml.safe_dump(RUBRIC), encoding="utf-8")
    _, problems = lock([out / "rubrics"], out / "rubrics" / "rubrics.lock")
    assert not problems
    (out / "suite.yaml").write_text(yaml.safe_dump({
        "name": "inspect import", "rubrics": ["rubrics"], "lock": "rubrics/rubrics.lock",
        "trajectories": [{"file": TRAJECTORIES, "rubric": "support-email"}],
    }), encoding="utf-8")
    result = cli("run", out / "suite.yaml", "--format", "jsonl", "--no-cache")
    rows = {row["trajectory_id"]: row["axes"] for row in map(json.loads, result.stdout.splitlines())}
    assert rows["1_epoch_1"]["task_success"]["passed"] is True
    assert rows["1_epoch_1"]["tool_correctness"]["score"] == 1.0
    # The refund's store never held users: the check cannot run there (an error, never a pass).
    refund = rows["refund-2_epoch_1"]["task_success"]
    assert refund["status"] == "error" and "nothing at '/users'" in refund["error"]
    no_world = rows["1_epoch_2"]["task_success"]
    assert no_world["status"] == "error" and "has no `world` snapshots" in no_world["error"]


# --- identity with the openai-chat importer ----------------------------------------------------------


def _openai_call(call_id: str, name: str, args: dict) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


CHAT = [
    {"role": "system", "content": "You are a support agent."},
    {"role": "user", "content": "Change my email to new@x.com. I am user 1."},
    {"role": "assistant", "content": None, "tool_calls": [_openai_call("c1", "get_user", {"user_id": 1}),
                                                         _openai_call("c2", "update_user", {"user_id": 1, "email": "new@x.com"})]},
    {"role": "tool", "tool_call_id": "c2", "name": "update_user", "content": '{"ok": true}'},
    {"role": "tool", "tool_call_id": "c1", "name": "get_user", "content": '{"id": 1, "email": "a@x.com"}'},
    {"role": "assistant", "content": [{"type": "text", "text": "Updated. "}, {"type": "text", "text": "Anything else?"}]},
    {"role": "user", "content": "Yes: is it saved?"},
    {"role": "assistant", "content": None, "tool_calls": [_openai_call("c3", "get_user", {"user_id": 1})]},
    {"role": "tool", "tool_call_id": "c3", "name": "get_user", "content": "plain text, not JSON"},
    {"role": "assistant", "content": "Your email is now new@x.com."},
]


@FORMS
def test_the_same_run_as_openai_chat_and_as_inspect_imports_identically(tmp_path, form):
    chat = tmp_path / "chat.jsonl"
    chat.write_text(json.dumps({"id": "7_epoch_1", "messages": CHAT}) + "\n", encoding="utf-8")
    import_openai_chat(chat, tmp_path / "from-chat")
    log = make_logs.inspect_log_from_chat(CHAT, sample_id=7)
    import_inspect(write_log(tmp_path, log, form), tmp_path / "from-inspect")
    [ours] = lines(tmp_path / "from-inspect" / "trajectories" / "chat.jsonl")
    [theirs] = lines(tmp_path / "from-chat" / "trajectories.jsonl")
    keys = ("id", "prompt", "calls", "output", "context", "turns")
    assert {k: ours.get(k) for k in keys} == {k: theirs.get(k) for k in keys}
    assert len(ours["calls"]) == 3 and ours["turns"] == [{"text": "Yes: is it saved?", "before_call": 2}]


def test_inspect_log_from_chat_with_tool_events_adds_times_only(tmp_path):
    log = make_logs.inspect_log_from_chat(CHAT, sample_id=7, tool_events=True)
    import_inspect(write_log(tmp_path, log, "eval"), tmp_path / "out")
    [run] = lines(tmp_path / "out" / "trajectories" / "chat.jsonl")
    assert [c["started_at"] for c in run["calls"]] == ["2025-03-04T10:00:01Z", "2025-03-04T10:00:02Z", "2025-03-04T10:00:03Z"]
    assert [c["result"] for c in run["calls"]] == [{"id": 1, "email": "a@x.com"}, {"ok": True}, "plain text, not JSON"]


# --- determinism ------------------------------------------------------------------------------------


def test_import_is_byte_identical_whenever_it_runs(tmp_path, monkeypatch):
    first = tmp_path / "first"
    import_inspect(DATA / "agent.eval", first)
    monkeypatch.setenv("TZ", "Pacific/Kiritimati")  # another day, another zone: nothing changes
    time.tzset()
    try:
        second = tmp_path / "second"
        import_inspect(DATA / "agent.eval", second)
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
    assert files(first) == files(second)


def test_a_trajectory_does_not_depend_on_the_other_samples(tmp_path):
    log = make_logs.agent_log()
    alone = {**log, "samples": [log["samples"][0]]}
    import_inspect(write_log(tmp_path, log, "eval", "all"), tmp_path / "all")
    import_inspect(write_log(tmp_path, alone, "eval", "alone"), tmp_path / "alone")
    together = by_id(tmp_path / "all")["1_epoch_1"]
    [single] = lines(tmp_path / "alone" / TRAJECTORIES)
    assert {**single, "metadata": {}} == {**together, "metadata": {}}


# --- streaming --------------------------------------------------------------------------------------


def test_the_json_form_is_cut_correctly_whatever_the_read_size(tmp_path, monkeypatch):
    import_inspect(DATA / "agent.json", tmp_path / "reference")
    monkeypatch.setattr(importer, "_CHUNK", 7)  # strings, escapes and brackets split across reads
    import_inspect(DATA / "agent.json", tmp_path / "small-reads")
    assert files(tmp_path / "small-reads") == files(tmp_path / "reference")


def test_the_json_form_holds_one_sample_at_a_time(tmp_path, monkeypatch):
    big = "x" * 50_000
    samples = [sample(id=n, metadata={"blob": big}) for n in range(80)]  # ~4 MB in all
    src = write_log(tmp_path, make_logs.eval_log(samples), "json")
    monkeypatch.setattr(importer, "_CHUNK", 4096)
    peak = [0]
    more = importer._JsonCursor._more

    def measured(self):
        got = more(self)
        peak[0] = max(peak[0], len(self.buf))
        return got

    monkeypatch.setattr(importer._JsonCursor, "_more", measured)
    import_inspect(src, tmp_path / "out")
    assert len(lines(tmp_path / "out" / "trajectories/agent.jsonl")) == 80
    one_sample = len(json.dumps(samples[0], indent=2))
    # Reads grow with what is held (a long value is not rescanned per chunk): at most about
    # twice one sample, never the file.
    assert peak[0] < 2 * (one_sample + 4096) < src.stat().st_size / 20


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.text(alphabet='ab"\\{}[],:/ \n\té😀', max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(alphabet='k"\\{[', max_size=3), inner, max_size=3),
    max_leaves=10,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.lists(_json, min_size=1, max_size=4), chunk=st.integers(1, 40), indent=st.sampled_from([None, 0, 2]))
def test_property_the_cursor_cuts_out_each_sample_exactly(tmp_path_factory, monkeypatch, values, chunk, indent):
    samples = [{"id": n, "epoch": 1, "value": v} for n, v in enumerate(values)]
    log = {"version": 2, "eval": {"task": "t", "model": "m", "note": values[0]}, "samples": samples, "after": values[-1]}
    src = tmp_path_factory.mktemp("prop") / "log.json"
    src.write_text(json.dumps(log, indent=indent, ensure_ascii=indent is None), encoding="utf-8")
    monkeypatch.setattr(importer, "_CHUNK", chunk)
    got = list(importer._read_log(src))
    assert [s for _, s, _ in got] == samples
    assert got[0][0]["eval"] == log["eval"]


# --- bad input ---------------------------------------------------------------------------------------


def _corrupt_member(tmp_path: Path) -> Path:
    """agent.eval with its second sample's JSON cut short."""
    src = tmp_path / "corrupt.eval"
    with zipfile.ZipFile(DATA / "agent.eval") as original, zipfile.ZipFile(src, "w") as copy:
        for info in original.infolist():
            data = original.read(info)
            copy.writestr(info, data[:100] if info.filename == "samples/3_epoch_1.json" else data)
    return src


def _corrupt_json(tmp_path: Path) -> Path:
    text = (DATA / "agent.json").read_text(encoding="utf-8")
    src = tmp_path / "corrupt.json"
    src.write_text(text.replace('"input": "Count to two."', '"input": "Count to two.",,'), encoding="utf-8")
    return src


@pytest.mark.parametrize("make", [_corrupt_member, _corrupt_json], ids=["eval", "json"])
def test_a_corrupt_sample_in_the_middle_leaves_nothing(tmp_path, make):
    src = make(tmp_path)
    with pytest.raises(InputError) as raised:
        import_inspect(src, tmp_path / "fresh")
    assert not (tmp_path / "fresh").exists()
    assert str(src) in str(raised.value) and "invalid JSON" in str(raised.value)
    kept = tmp_path / "kept"
    import_inspect(DATA / "agent.eval", kept)
    before = files(kept)
    result = cli("import", "inspect", src, "--out", kept)
    assert result.exit_code == 2 and files(kept) == before
    assert list(tmp_path.glob(".*importing*")) == []  # no staging folder left behind


def test_a_json_error_names_the_line_of_the_sample(tmp_path):
    src = _corrupt_json(tmp_path)
    line = next(n for n, text in enumerate(src.read_text().splitlines(), 1) if ",," in text)
    with pytest.raises(InputError) as raised:
        import_inspect(src, tmp_path / "out")
    assert raised.value.line == line
    assert str(raised.value).startswith(f"{src}:{line}: sample 2: invalid JSON: Expecting property name")


def _scrambled(tmp_path: Path, log: Path, member: str) -> Path:
    """``log`` with bytes of ``member``'s compressed data flipped."""
    data = bytearray(log.read_bytes())
    with zipfile.ZipFile(log) as archive:
        info = archive.getinfo(member)
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    for at in range(start + 40, start + 56):
        data[at] ^= 0x5A
    path = tmp_path / "scrambled.eval"
    path.write_bytes(bytes(data))
    return path


def _zip(tmp_path: Path, members: dict[str, str]) -> Path:
    path = tmp_path / "log.eval"
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in members.items():
            archive.writestr(name, text)
    return path


def _log_with(tmp_path: Path, *samples: dict, form: str = "json", **top) -> Path:
    return write_log(tmp_path, {**make_logs.eval_log(list(samples)), **top}, form)


HEADER = json.dumps({"version": 2, "eval": make_logs.eval_spec("t", "m")})
STORE_INIT = make_logs.event("sample_init", "2025-01-01T00:00:00Z", sample={"input": ""}, state={"store": {}})


@pytest.mark.parametrize(("make", "message"), [
    pytest.param(lambda p: (p / "x.eval").write_bytes(b"PK\x03\x04 not really a zip") and p / "x.eval",
                 "not a readable zip, expected an Inspect .eval log", id="bad_zip"),
    pytest.param(lambda p: _zip(p, {"samples/1_epoch_1.json": "{}"}), "neither header.json nor _journal/start.json", id="no_header"),
    pytest.param(lambda p: _scrambled(p, DATA / "agent.eval", "samples/3_epoch_1.json"),
                 "samples/3_epoch_1.json: cannot be read from the zip: Error -3 while decompressing", id="corrupt_deflate"),
    pytest.param(lambda p: _scrambled(p, REAL, "samples/2_epoch_1.json"),
                 "samples/2_epoch_1.json: cannot be read from the zip: zstd:", id="corrupt_zstd"),
    pytest.param(lambda p: _zip(p, {"header.json": HEADER, "samples/1_epoch_1/sample.json": "{}"}), "experimental .eval2 layout", id="eval2"),
    pytest.param(lambda p: _zip(p, {"header.json": json.dumps({"version": 3, "eval": make_logs.eval_spec("t", "m")}),
                                    "samples/1_epoch_1.json": json.dumps(sample())}),
                 "log format version 3: this importer reads versions up to 2", id="future_version"),
    pytest.param(lambda p: _zip(p, {"header.json": HEADER}), "the log holds no samples", id="no_samples"),
    pytest.param(lambda p: _zip(p, {"header.json": json.dumps({"version": 2, "eval": {"model": "m"}}),
                                    "samples/1_epoch_1.json": json.dumps(sample())}), "no task name ('eval.task')", id="no_task"),
    pytest.param(lambda p: _zip(p, {"header.json": HEADER, "samples/1_epoch_1.json": '{"id": 1, "id": 2}'}),
                 "samples/1_epoch_1.json: invalid JSON: duplicate key 'id'", id="duplicate_key"),
    pytest.param(lambda p: (p / "log.json").write_text('{"samples": [], "eval": {}}') and p / "log.json",
                 "'samples' comes before 'eval': cannot stream this log", id="samples_first"),
    pytest.param(lambda p: (p / "log.json").write_text('{"version": 2, "eval": {"task": "t"}, "samples": [{"id": 1') and p / "log.json",
                 "invalid JSON: the file ends inside a value", id="truncated"),
    pytest.param(lambda p: (p / "log.json").write_text('[1, 2]') and p / "log.json", "expected '{', found '['", id="not_an_object"),
    pytest.param(lambda p: _log_with(p, sample(id=None)), "sample 1: the sample has no id", id="no_id"),
    pytest.param(lambda p: _log_with(p, sample(id=4, epoch="1")), "sample 1: the sample has no epoch", id="no_epoch"),
    pytest.param(lambda p: _log_with(p, sample(id=4), sample(id=4)), "sample 2: sample 4, epoch 1: a second sample with trajectory id '4_epoch_1'",
                 id="duplicate_sample"),
    pytest.param(lambda p: _log_with(p, sample(id=4, messages=[{"role": "tool", "tool_call_id": "zz", "content": "x"}])),
                 "sample 1: sample 4, epoch 1: message 0: tool result for unknown tool_call_id 'zz'", id="unknown_call_id"),
    pytest.param(lambda p: _log_with(p, sample(id=4, events=[STORE_INIT, make_logs.event("store", "2025-01-01T00:00:01Z",
                                                                                             changes=[{"op": "remove", "path": "/gone"}])])),
                 "sample 1: sample 4, epoch 1: cannot replay the store: store change 1 (remove '/gone'): nothing at 'gone'", id="bad_patch"),
    pytest.param(lambda p: _log_with(p, sample(id=4, events=[make_logs.event("store", "t", changes=[{"op": "test", "path": "", "value": 1}])])),
                 "store change 1 (test ''): test failed: the value differs", id="failed_test_op"),
    pytest.param(lambda p: _log_with(p, sample(id=4, total_time=-1)), "sample 1: sample 4, epoch 1: latency_s", id="bad_latency"),
    pytest.param(lambda p: _log_with(p, sample(id=4, messages=[{"role": "assistant", "content": "", "tool_calls": [{"id": "c", "function": "f", "arguments": {}}]}],
                                             events=[make_logs.tool_event("c", "f", {}, "", "not a time", "x", None)])),
                 "sample 1: sample 4, epoch 1: a tool event: started_at: Input should be a valid datetime", id="bad_timestamp"),
])
def test_bad_input_names_the_file_and_the_sample(tmp_path, make, message):
    src = make(tmp_path)
    with pytest.raises(InputError) as raised:
        import_inspect(src, tmp_path / "out")
    assert str(raised.value).startswith(str(src)) and message in str(raised.value)
    assert not (tmp_path / "out").exists()


def test_the_cli_says_what_is_wrong_in_one_line(tmp_path):
    result = cli("import", "inspect", tmp_path / "missing.eval", "--out", tmp_path / "out")
    assert result.exit_code == 2
    assert result.output.strip().endswith(f"{tmp_path / 'missing.eval'}: file not found")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "log.eval"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="not a regular file"):
        import_inspect(fifo, tmp_path / "out")
