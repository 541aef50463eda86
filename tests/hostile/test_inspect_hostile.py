"""Hostile inputs to the Inspect AI importer (``judgekit import inspect``).

Each bug found has one test here (it failed before its fix); the rest are attacks that already
held, kept as regression checks. Logs are built with tests/data/inspect/make_logs.py; zstd
members (Inspect's default compression, which Python's zipfile cannot write) are written as
stored members and relabelled, so that a test can also make the central directory lie.
"""

from __future__ import annotations

import importlib.util
import io
import json
import random
import struct
import tracemalloc
import warnings
import zipfile
import zlib
from pathlib import Path

import pytest
import zstandard

from judgekit.errors import InputError
from judgekit.importers import inspect_ai as importer
from judgekit.importers.inspect_ai import import_inspect
from judgekit.trajectory import iter_trajectories

ALARM_S = 30
DATA = Path(__file__).parent.parent / "data" / "inspect"
T0, T1, T2, T3 = (f"2025-03-04T10:00:0{n}+00:00" for n in range(4))

_spec = importlib.util.spec_from_file_location("inspect_make_logs_hostile", DATA / "make_logs.py")
make_logs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_logs)
event, call, tool, assistant = make_logs.event, make_logs.call, make_logs.tool, make_logs.assistant


# --- helpers ---------------------------------------------------------------------------------------


def sample(**fields) -> dict:
    base = make_logs.inspect_sample_from_chat([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}])
    return {**base, **fields}


def store_sample(changes: list, init: dict | None = None, **fields) -> dict:
    events = [event("sample_init", T0, sample={"input": ""}, state={"store": init or {}}), event("store", T1, changes=changes)]
    return sample(events=events, **fields)


def json_log(tmp_path: Path, *samples: dict, name: str = "log") -> Path:
    return make_logs.write_json_log(make_logs.eval_log(list(samples)), tmp_path / f"{name}.json")


def eval_log(tmp_path: Path, *samples: dict, name: str = "log") -> Path:
    return make_logs.write_eval_log(make_logs.eval_log(list(samples)), tmp_path / f"{name}.eval")


def trajectories(out: Path) -> list[dict]:
    [path] = (out / "trajectories").glob("*.jsonl")
    return [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line]  # not splitlines: U+2028


def world_after(out: Path, trajectory: dict):
    return json.loads((out / "trajectories" / trajectory["world"]["after"]["json_file"]).read_text(encoding="utf-8"))


def files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def refused(src: Path, out: Path) -> str:
    """The InputError's text (it names ``src``); nothing is written."""
    with pytest.raises(InputError) as raised:
        import_inspect(src, out)
    assert str(raised.value).startswith(str(src))
    assert not out.exists()
    return str(raised.value)


HEADER = json.dumps({"version": 2, "eval": make_logs.eval_spec("t", "m")}).encode()


def zstd_zip(path: Path, members: list[tuple[str, bytes]], *, claimed: dict[str, int] | None = None,
             zip64: bool = False) -> Path:
    """A zip of zstd members (frames without a content size, as Inspect writes them);
    ``claimed``: a file size the central directory states instead of the true one."""
    claimed = claimed or {}
    sizes = {name: (zlib.crc32(raw), claimed.get(name, len(raw))) for name, raw in members}
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, raw in members:
            with archive.open(zipfile.ZipInfo(name, date_time=make_logs.ZIP_TIME), "w", force_zip64=zip64) as member:
                member.write(zstandard.ZstdCompressor(write_content_size=False).compress(raw))
    data = bytearray(buffer.getvalue())
    with zipfile.ZipFile(io.BytesIO(bytes(data))) as archive:
        for info in archive.infolist():  # local headers: method and CRC (sizes come from the directory)
            struct.pack_into("<HHHL", data, info.header_offset + 8, 93, 0, 0, sizes[info.filename][0])
    at = 0
    while (at := data.find(b"PK\x01\x02", at)) != -1:  # central directory: method, CRC, size
        name_length = struct.unpack_from("<H", data, at + 28)[0]
        crc, size = sizes[bytes(data[at + 46:at + 46 + name_length]).decode()]
        struct.pack_into("<H", data, at + 10, 93)
        struct.pack_into("<L", data, at + 16, crc)
        struct.pack_into("<L", data, at + 24, size)
        at += 46
    path.write_bytes(bytes(data))
    return path


# --- bugs found, each fixed ------------------------------------------------------------------------


def test_sample_ids_with_slashes_read_in_the_eval_form(tmp_path):
    # Inspect names a sample's member samples/{id}_epoch_{n}.json without escaping its id and
    # reads every samples/*.json: an id like a MATH problem's "test/algebra/1" is a real log,
    # not the chunked layout (which has samples/{id}_epoch_{n}/sample.json).
    src = eval_log(tmp_path, sample(id="test/algebra/1"), sample(id=2))
    assert "samples/test/algebra/1_epoch_1.json" in zipfile.ZipFile(src).namelist()
    import_inspect(src, tmp_path / "out")
    assert {t["id"] for t in trajectories(tmp_path / "out")} == {"test/algebra/1_epoch_1", "2_epoch_1"}


def _reused_id_sample() -> dict:
    """One call id used for two calls in turn (older Inspect Gemini logs named calls by function)."""
    messages = [
        {"role": "user", "content": "go"},
        assistant("", call("f", "get", {"n": 1})),
        tool("f", "get", "", error={"type": "timeout", "message": "first failed"}),
        assistant("", call("f", "get", {"n": 2})),
        tool("f", "get", "two"),
        assistant("done"),
    ]
    events = [make_logs.tool_event("f", "get", {"n": 1}, "", T0, T1, None, error={"type": "timeout", "message": "first failed"}),
              make_logs.tool_event("f", "get", {"n": 2}, "two", T2, T3, None)]
    return sample(id=1, messages=messages, events=events)


def test_a_reused_call_id_joins_each_call_to_its_own_event_and_error(tmp_path):
    import_inspect(json_log(tmp_path, _reused_id_sample()), tmp_path / "out")
    [first, second] = trajectories(tmp_path / "out")[0]["calls"]
    zulu = {T0: T0.replace("+00:00", "Z"), T2: T2.replace("+00:00", "Z")}
    assert (first["args"], first.get("result"), first["error"], first["started_at"]) == ({"n": 1}, "", "timeout: first failed", zulu[T0])
    assert (second["args"], second["result"], second.get("error"), second["started_at"]) == ({"n": 2}, "two", None, zulu[T2])


_CALL = [{"role": "user", "content": "x"}, assistant("", call("c", "f", {}))]


@pytest.mark.parametrize("bad", [
    pytest.param(sample(events=[event("store", T0, changes=5)]), id="store_changes_a_number"),
    pytest.param(sample(events=[event("state", T0, changes=[{"op": "add", "path": 5}])]), id="state_path_a_number"),
    pytest.param(sample(messages=[{"role": "user", "content": "x"}, {"role": "assistant", "content": "", "tool_calls": 5}]),
                 id="tool_calls_a_number"),
    pytest.param(sample(events=[event("store", T0, span_id=["x"], changes=[])]), id="span_id_a_list"),
    pytest.param(sample(events=[event("span_begin", T0, id={"x": 1})]), id="span_begin_id_an_object"),
    pytest.param(sample(input=[{"role": "user", "content": [{"type": "text", "text": None}]}]), id="prompt_text_null"),
    pytest.param(sample(messages=_CALL, events=[make_logs.tool_event("c", "f", {}, [{"type": "text", "text": 7}], T0, T1, None)]),
                 id="tool_result_text_a_number"),
    pytest.param(sample(input="attachment://k", attachments={"k": 5}), id="attachment_not_a_string"),
])
def test_wrong_shaped_fields_are_input_errors_naming_the_sample(tmp_path, bad):
    message = refused(json_log(tmp_path, {**bad, "id": "odd"}), tmp_path / "out")
    assert "sample 'odd', epoch 1: " in message


@pytest.mark.parametrize("body", [
    pytest.param(b'"junk": "' + b"a" * 300_000 + b'", ', id="top_level_string"),
    pytest.param(b'"junk": 1' + b"0" * 300_000 + b", ", id="top_level_number"),
    pytest.param(b'"samples": ["' + b"a" * 300_000 + b'"], ', id="sample_a_string"),
    pytest.param(b'"samples": [{"id": 1, "epoch": 1, "x": "' + b"a" * 300_000 + b'"}], ', id="string_in_a_sample"),
])
def test_a_value_longer_than_allowed_is_refused_before_it_is_held(tmp_path, monkeypatch, body):
    # Only containers were bounded, and only once a run of bytes outside strings was cut: a
    # long string (or number) anywhere grew the buffer to the whole file first.
    monkeypatch.setattr(importer, "MAX_LINE_BYTES", 50_000)
    monkeypatch.setattr(importer, "_CHUNK", 1024)
    src = tmp_path / "log.json"
    src.write_bytes(b'{"version": 2, "eval": {"task": "t"}, ' + body + b'"end": 1}')
    held = []
    more = importer._JsonCursor._more

    def measured(self, *args):
        held.append(len(self.buf))
        return more(self, *args)

    monkeypatch.setattr(importer._JsonCursor, "_more", measured)
    assert "a value longer than 50000 bytes" in refused(src, tmp_path / "out")
    assert max(held) < 3 * 50_000


def test_white_space_between_samples_is_not_held(tmp_path, monkeypatch):
    monkeypatch.setattr(importer, "_CHUNK", 4096)
    head = json.dumps(make_logs.eval_log([sample(id=1)]))[:-3]  # up to the end of sample 1: ...}]}
    src = tmp_path / "log.json"
    src.write_bytes(head.encode() + b"}," + b" \n" * 1_000_000 + json.dumps(sample(id=2)).encode() + b"]}")
    held = []
    more = importer._JsonCursor._more

    def measured(self, *args):
        held.append(len(self.buf))
        return more(self, *args)

    monkeypatch.setattr(importer._JsonCursor, "_more", measured)
    import_inspect(src, tmp_path / "out")
    assert [t["id"] for t in trajectories(tmp_path / "out")] == ["1_epoch_1", "2_epoch_1"]
    assert max(held) < 64_000  # not the 2 MB of white space


def test_an_attachment_used_over_and_over_is_bounded(tmp_path, monkeypatch):
    # 500 user turns naming one 20 kB attachment: a 40 kB sample became a 20 MB trajectory
    # line (and a line past judgekit's limit is one no suite can read back).
    monkeypatch.setattr(importer, "_MAX_RESOLVED", 1_000_000, raising=False)
    messages = [{"role": "user", "content": "hi"}] + [{"role": "user", "content": "attachment://big"}] * 500
    src = json_log(tmp_path, sample(id=1, messages=messages, attachments={"big": "y" * 20_000}))
    assert "attachments" in refused(src, tmp_path / "out")


def test_a_copy_bomb_in_the_store_is_refused(tmp_path, monkeypatch):
    # Each "copy the whole store into itself" doubles it: 40 such changes (2 kB of log) made
    # a world of 2**40 values.
    monkeypatch.setattr(importer, "_MAX_WORLD_BYTES", 1_000_000, raising=False)
    bomb = [{"op": "add", "path": "/a", "value": "x" * 100}] + [{"op": "copy", "from": "", "path": f"/k{n}"} for n in range(17)]
    message = refused(json_log(tmp_path, store_sample(bomb, id=1)), tmp_path / "out")
    assert "cannot replay the store: store change" in message and "more than" in message


def test_a_list_index_is_ascii_digits(tmp_path):
    # "١" (ARABIC-INDIC DIGIT ONE) passed str.isdigit and int() read it as 1.
    changes = [{"op": "add", "path": "/l", "value": [1, 2]}, {"op": "replace", "path": "/l/\u0661", "value": "X"}]
    assert "no list index '\u0661'" in refused(json_log(tmp_path, store_sample(changes, id=1)), tmp_path / "out")


def test_a_zstd_member_longer_than_its_directory_says_is_refused(tmp_path):
    # The DEFLATE path stops at the stated size (zipfile); zstd read on to the global limit.
    big = json.dumps(sample(id=1)).encode()[:-1] + b" " * 200_000 + b"}"
    src = zstd_zip(tmp_path / "lying.eval", [("header.json", HEADER), ("samples/1_epoch_1.json", big)],
                   claimed={"samples/1_epoch_1.json": 100})
    assert "samples/1_epoch_1.json: cannot be read from the zip" in refused(src, tmp_path / "out")


def test_samples_null_is_a_log_without_samples(tmp_path):
    src = tmp_path / "log.json"
    src.write_text(json.dumps({"version": 2, "eval": make_logs.eval_spec("t", "m"), "samples": None}), encoding="utf-8")
    assert "the log holds no samples" in refused(src, tmp_path / "out")


def test_a_state_change_moving_a_value_out_of_the_store_removes_it(tmp_path):
    # Older logs' StateEvents come from jsonpatch.make_patch, which pairs a removed value with an
    # equal added one into a move, across the whole state: out of the store is a removal there.
    events = [event("sample_init", T0, sample={"input": ""}, state={"store": {"draft": "hi", "keep": 1}}),
              event("state", T1, changes=[{"op": "move", "from": "/store/draft", "path": "/messages/1/content"}])]
    import_inspect(json_log(tmp_path, sample(id=1, events=events)), tmp_path / "out")
    [trajectory] = trajectories(tmp_path / "out")
    assert world_after(tmp_path / "out", trajectory) == {"keep": 1}


def test_store_changes_nesting_one_inside_another_are_refused(tmp_path):
    # Each change parses within the depth limit, but each adds under the last: the world grew
    # past it and json.dumps raised RecursionError, not an InputError.
    def nested(depth):
        value = 1
        for _ in range(depth):
            value = {"a": value}
        return value

    changes = [{"op": "add", "path": "/a" * (150 * k + 1), "value": nested(150)} for k in range(8)]
    message = refused(json_log(tmp_path, store_sample(changes, id=1)), tmp_path / "out")
    assert "cannot replay the store: the store the changes make is nested more than 200 levels deep" in message


@pytest.mark.parametrize("where", ["tool_message", "tool_event", "metadata"])
def test_nothing_is_written_that_judgekit_cannot_read_back(tmp_path, where):
    # A tool's result that is JSON text was decoded with the depth limit of a document of its own,
    # then put three levels down in a trajectory line: the import passed and the file was
    # unreadable. Now such a result is kept as its text (as every importer keeps a result that is
    # not JSON), and a sample's own value too deep for the line is refused.
    deep_text = "[" * 199 + "]" * 199
    messages = [{"role": "user", "content": "x"}, assistant("", call("c", "f", {})), tool("c", "f", "ok"), assistant("done")]
    if where == "metadata":  # as deep as a sample may hold: one level deeper among the trajectory's labels
        message = refused(json_log(tmp_path, sample(id=1, metadata=json.loads(deep_text))), tmp_path / "out")
        assert "too deeply nested to be written in a trajectory line" in message
    else:
        if where == "tool_message":
            bad = sample(id=1, messages=[*messages[:2], tool("c", "f", deep_text), messages[3]])
        else:
            bad = sample(id=1, messages=messages, events=[make_logs.tool_event("c", "f", {}, deep_text, T0, T1, None)])
        import_inspect(json_log(tmp_path, bad), tmp_path / "out")
        [kept] = iter_trajectories(tmp_path / "out" / "trajectories" / "agent.jsonl")
        assert kept.trajectory.calls[0].result == deep_text
    import_inspect(json_log(tmp_path, sample(id=1, messages=[*messages[:2], tool("c", "f", deep_text[3:-3]), messages[3]])),
                   tmp_path / "fine")
    [read_back] = iter_trajectories(tmp_path / "fine" / "trajectories" / "agent.jsonl")
    assert read_back.trajectory.calls[0].result is not None


def _top_level(tmp_path: Path, extra: list[str]) -> Path:
    parts = ['"version": 2', '"eval": {"task": "t"}', *extra, f'"samples": [{json.dumps(sample(id=1))}]']
    src = tmp_path / "log.json"
    src.write_text("{" + ", ".join(parts) + "}", encoding="utf-8")
    return src


def test_top_level_values_a_sample_does_not_need_are_not_held(tmp_path):
    # Every top-level value was kept in the header, so 20 values of 1 MB before the samples (or
    # after them) were all held at once.
    src = _top_level(tmp_path, [f'"junk{n}": "{"x" * 1_000_000}"' for n in range(20)])
    tracemalloc.start()
    try:
        import_inspect(src, tmp_path / "out")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(trajectories(tmp_path / "out")) == 1
    assert peak < 8_000_000, peak


def test_a_log_with_thousands_of_top_level_keys_is_refused(tmp_path):
    src = _top_level(tmp_path, [f'"k{n}": 0' for n in range(5000)])
    assert "more than 1000 top-level keys: not an Inspect log" in refused(src, tmp_path / "out")


# --- attacks that held (regression checks) ---------------------------------------------------------


def test_zstd_members_with_zip64_local_headers_and_no_content_size(tmp_path):
    src = zstd_zip(tmp_path / "z.eval", [("header.json", HEADER), ("samples/1_epoch_1.json", json.dumps(sample(id=1)).encode())],
                   zip64=True)
    with zipfile.ZipFile(src) as archive:
        assert archive.getinfo("samples/1_epoch_1.json").compress_type == 93
    import_inspect(src, tmp_path / "out")
    assert [t["prompt"] for t in trajectories(tmp_path / "out")] == ["Hi"]


def test_a_member_claiming_to_be_huge_is_refused_unread(tmp_path):
    src = zstd_zip(tmp_path / "huge.eval", [("header.json", HEADER), ("samples/1_epoch_1.json", b"{}")],
                   claimed={"samples/1_epoch_1.json": 2**31})
    assert "samples/1_epoch_1.json: is 2147483648 bytes, more than the" in refused(src, tmp_path / "out")


def test_a_deflate_member_longer_than_its_directory_says_fails_its_crc(tmp_path):
    src = tmp_path / "lying.eval"
    with zipfile.ZipFile(src, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("header.json", HEADER)
        archive.writestr("samples/1_epoch_1.json", json.dumps(sample(id=1)) + " " * 100_000)
    data = bytearray(src.read_bytes())
    struct.pack_into("<L", data, data.rfind(b"PK\x01\x02") + 24, 100)  # the last directory entry: the sample
    src.write_bytes(bytes(data))
    assert "cannot be read from the zip: Bad CRC-32" in refused(src, tmp_path / "out")


def test_member_names_decide_nothing_written_and_a_repeated_name_is_its_last(tmp_path):
    src = tmp_path / "names.eval"
    with warnings.catch_warnings(), zipfile.ZipFile(src, "w") as archive:
        warnings.simplefilter("ignore")  # "Duplicate name"
        archive.writestr("header.json", HEADER)
        archive.writestr("samples/1_epoch_1.json", json.dumps(sample(id=1, input="first")))
        archive.writestr("samples/1_epoch_1.json", json.dumps(sample(id=1, input="requeued")))  # Inspect: the last
        archive.writestr("../../evil_epoch_1.json", json.dumps(sample(id=5)))
        archive.writestr("/abs/samples/6_epoch_1.json", json.dumps(sample(id=6)))
        archive.writestr("samples/..\\..\\evil_epoch_1.json", json.dumps(sample(id="x")))
    out = tmp_path / "deep" / "out"
    import_inspect(src, out)
    assert {t["id"]: t["prompt"] for t in trajectories(out)} == {"1_epoch_1": "requeued", "x_epoch_1": "Hi"}
    assert sorted(files(tmp_path)) == ["deep/out/suite.yaml", "deep/out/trajectories/t.jsonl", "names.eval"]


def test_many_tiny_members_are_skipped_quickly(tmp_path):
    src = tmp_path / "many.eval"
    with zipfile.ZipFile(src, "w") as archive:
        archive.writestr("header.json", HEADER)
        for n in range(20_000):
            archive.writestr(f"_journal/summaries/{n}.json", "[]")
        archive.writestr("samples/1_epoch_1.json", json.dumps(sample(id=1)))
    import_inspect(src, tmp_path / "out")
    assert len(trajectories(tmp_path / "out")) == 1


TRICKY = ['a{b}[c]"d\\', "\\", '"}]', "é😀\u2028", "{[", "]}", "\\u0041"]


def test_the_json_cutter_on_strings_keys_and_white_space_at_every_read_size(tmp_path, monkeypatch):
    samples = [sample(id=text, input=text, metadata={text: [text, {"samples": [text]}]}) for text in TRICKY]
    log = {**make_logs.eval_log(samples), "reductions": [{"samples": ["]}"]}], "location": "}"}
    log["eval"]["samples"] = [{"id": "not a sample"}]  # a "samples" key inside another object
    src = tmp_path / "log.json"
    src.write_text("\r\n\t " + json.dumps(log, indent="\t", ensure_ascii=False) + " \n\n", encoding="utf-8")
    import_inspect(src, tmp_path / "reference")
    expected = files(tmp_path / "reference")
    assert [t["prompt"] for t in trajectories(tmp_path / "reference")] == TRICKY
    for chunk in (1, 2, 3, 5, 64):
        monkeypatch.setattr(importer, "_CHUNK", chunk)
        import_inspect(src, tmp_path / f"chunk-{chunk}")
        assert files(tmp_path / f"chunk-{chunk}") == expected


def test_every_truncation_of_a_log_is_an_input_error(tmp_path, monkeypatch):
    monkeypatch.setattr(importer, "_CHUNK", 16)
    whole = json.dumps(make_logs.eval_log([sample(id=1, input='a"}]{['), sample(id=2)]), indent=1).encode()
    src = tmp_path / "cut.json"
    for end in range(0, len(whole) - 1, 3):
        src.write_bytes(whole[:end])
        with pytest.raises(InputError):
            import_inspect(src, tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("text", "message"), [
    pytest.param(b'{"version": 2, "eval": {"task": "t"}, "samples": [' + b"[" * 100_000 + b"]" * 100_000 + b"]}",
                 "nested more than 200 levels deep", id="deep"),
    pytest.param(b'{"version": 2, "eval": {"task": "t"}, "samples": [{"id": 1, "epoch": 1, "n": 1' + b"0" * 5000 + b"}]}",
                 "more than 4300 digits", id="huge_integer"),
    pytest.param(b'{"version": 2, "eval": {"task": "t"}, "samples": [{"id": 1, "epoch": 1, "total_time": 1e999}]}',
                 "too large to represent", id="infinite_number"),
    pytest.param(b'\xef\xbb\xbf{"version": 2}', "expected '{'", id="byte_order_mark"),
    pytest.param(b'{[1]: 2}', "invalid JSON: an invalid key [1]", id="a_list_as_key"),
    pytest.param(b'{"version": 2, "eval": {"task": "t"}, "samples": [{"id": 1, "epoch": 1}],}', "invalid JSON", id="trailing_comma"),
    pytest.param(b'{"version": 2, "eval": {"task": "\xff"}, "samples": []}', "eval: not UTF-8 text", id="not_utf8"),
    pytest.param(b'{"version": 2, "eval": {"task": "t"}, "samples": [{"id": "\\ud83d", "epoch": 1}]}', "lone surrogate", id="lone_surrogate"),
])
def test_malformed_json_logs_are_input_errors(tmp_path, text, message):
    src = tmp_path / "bad.json"
    src.write_bytes(text)
    assert message in refused(src, tmp_path / "out")


@pytest.mark.parametrize(("changes", "after"), [
    pytest.param([{"op": "add", "path": "/a~1b", "value": 1}, {"op": "add", "path": "/c~0d", "value": 2},
                  {"op": "add", "path": "/~01", "value": 3}, {"op": "add", "path": "/", "value": 4}],
                 {"a/b": 1, "c~d": 2, "~1": 3, "": 4}, id="escapes_and_the_empty_key"),
    pytest.param([{"op": "add", "path": "/__proto__", "value": {"x": 1}}, {"op": "add", "path": "/__proto__/y", "value": 2}],
                 {"__proto__": {"x": 1, "y": 2}}, id="proto_is_a_key"),
    pytest.param([{"op": "add", "path": "/l", "value": []}, {"op": "add", "path": "/l/-", "value": 1},
                  {"op": "add", "path": "/l/0", "value": 0}], {"l": [0, 1]}, id="append_and_insert"),
    pytest.param([{"op": "add", "path": "/l", "value": [0, 1, 2]}, {"op": "move", "from": "/l/0", "path": "/l/2"}],
                 {"l": [1, 2, 0]}, id="move_within_a_list"),
    pytest.param([{"op": "add", "path": "/a", "value": {"b": 1}}, {"op": "copy", "from": "/a", "path": "/a/c"}],
                 {"a": {"b": 1, "c": {"b": 1}}}, id="copy_into_itself"),
    pytest.param([{"op": "add", "path": "/a", "value": 1}, {"op": "move", "from_": "/a", "path": "/a"}], {"a": 1}, id="move_onto_itself"),
    pytest.param([{"op": "replace", "path": "", "value": {"new": 1}}, {"op": "test", "path": "/new", "value": 1.0}],
                 {"new": 1}, id="replace_the_root_then_test"),
])
def test_json_patch_edge_cases_replay(tmp_path, changes, after):
    import_inspect(json_log(tmp_path, store_sample(changes, id=1)), tmp_path / "out")
    [trajectory] = trajectories(tmp_path / "out")
    assert world_after(tmp_path / "out", trajectory) == after


@pytest.mark.parametrize(("changes", "message"), [
    pytest.param([{"op": "add", "path": "/a", "value": {}}, {"op": "move", "from": "/a", "path": "/a/b"}], "nothing at 'a'",
                 id="move_into_itself"),
    pytest.param([{"op": "add", "path": "/a", "value": 1}, {"op": "test", "path": "/a", "value": True}], "test failed",
                 id="test_true_is_not_1"),
    pytest.param([{"op": "remove", "path": "/gone"}], "nothing at 'gone'", id="remove_missing"),
    pytest.param([{"op": "add", "path": "/l", "value": []}, {"op": "add", "path": "/l/1", "value": 1}], "no list index '1'",
                 id="index_past_the_end"),
    pytest.param([{"op": "add", "path": "/l", "value": [1]}, {"op": "replace", "path": "/l/-", "value": 2}], "no list index '-'",
                 id="dash_names_nothing"),
    pytest.param([{"op": "add", "path": "/l", "value": [1, 2]}, {"op": "remove", "path": "/l/01"}], "no list index '01'",
                 id="leading_zero"),
    pytest.param([{"op": "remove", "path": ""}], "cannot remove the whole document", id="remove_the_root"),
    pytest.param([{"op": "add", "path": "a", "value": 1}], "must be empty or start with '/'", id="relative_pointer"),
])
def test_json_patch_errors_name_the_change(tmp_path, changes, message):
    text = refused(json_log(tmp_path, store_sample(changes, id=1)), tmp_path / "out")
    assert f"cannot replay the store: store change {len(changes)}" in text and message in text


def test_ids_1_and_quoted_1_collide_and_are_refused(tmp_path):
    assert "a second sample with trajectory id '1_epoch_1'" in refused(json_log(tmp_path, sample(id=1), sample(id="1")), tmp_path / "out")


def test_the_zip_member_order_and_other_samples_change_nothing(tmp_path):
    samples = [store_sample([{"op": "add", "path": "/n", "value": 1}], id=n, epoch=e) for n in (2, 10, "b", "a") for e in (2, 1)]
    src = eval_log(tmp_path, *samples)
    (tmp_path / "shuffled").mkdir()
    shuffled = tmp_path / "shuffled" / src.name
    with zipfile.ZipFile(src) as original, zipfile.ZipFile(shuffled, "w") as copy:
        infos = original.infolist()
        random.Random(7).shuffle(infos)
        for info in infos:
            copy.writestr(info, original.read(info))
    import_inspect(src, tmp_path / "a")
    import_inspect(shuffled, tmp_path / "b")
    assert files(tmp_path / "a") == files(tmp_path / "b")
    got = trajectories(tmp_path / "a")
    assert [t["id"] for t in got] == ["2_epoch_1", "10_epoch_1", "a_epoch_1", "b_epoch_1",
                                      "2_epoch_2", "10_epoch_2", "a_epoch_2", "b_epoch_2"]  # Inspect's order
    assert len({t["world"]["after"]["json_file"] for t in got}) == 1  # one world, one file
    assert len(list((tmp_path / "a" / "trajectories" / "worlds").iterdir())) == 2  # before and after


def test_tool_messages_and_events_without_their_call(tmp_path):
    early = sample(id=1, messages=[{"role": "user", "content": "x"}, tool("c", "f", "r"), assistant("", call("c", "f", {}))])
    assert "message 1: tool result for unknown tool_call_id 'c'" in refused(json_log(tmp_path, early), tmp_path / "out")
    lone = sample(id=2, events=[make_logs.tool_event("z", "f", {}, "ran by a solver", T0, T1, None)])
    import_inspect(json_log(tmp_path, lone), tmp_path / "out")
    assert trajectories(tmp_path / "out")[0].get("calls", []) == []


@pytest.mark.parametrize("kind", [RuntimeError, MemoryError, KeyboardInterrupt])
def test_any_exception_mid_import_leaves_nothing(tmp_path, monkeypatch, kind):
    kept = tmp_path / "kept"
    import_inspect(json_log(tmp_path, sample(id=1), name="first"), kept)
    before = files(kept)
    trajectory = importer._trajectory
    seen = []

    def failing(*args, **kwargs):
        seen.append(1)
        if len(seen) == 2:
            raise kind("boom")
        return trajectory(*args, **kwargs)

    monkeypatch.setattr(importer, "_trajectory", failing)
    for form in (json_log, eval_log):
        seen.clear()
        with pytest.raises(kind):
            import_inspect(form(tmp_path, sample(id=1), sample(id=2), sample(id=3)), kept)
        assert files(kept) == before
    assert list(tmp_path.glob(".*importing*")) == []


@pytest.mark.parametrize("form", [json_log, eval_log], ids=["json", "eval"])
def test_memory_holds_one_sample_whatever_the_number_of_samples(tmp_path, form):
    def peak(n: int) -> tuple[int, int]:
        blob = "x" * 40_000
        src = form(tmp_path, *(store_sample([{"op": "add", "path": "/n", "value": i}], id=i, metadata={"blob": blob})
                               for i in range(n)), name=f"n{n}")
        tracemalloc.start()
        try:
            import_inspect(src, tmp_path / f"out{n}")
            return tracemalloc.get_traced_memory()[1], n * len(blob)
        finally:
            tracemalloc.stop()

    # Past the first samples (buffers reach their working size), more samples add nothing that
    # grows with them: 200 more samples (8 MB of data) may add at most a tenth of their size.
    (some, _), (more, samples_bytes) = peak(100), peak(300)
    assert more - some < 200 * 40_000 / 10, (some, more)
    assert more < samples_bytes / 2
