"""Hostile rubrics and suites (issue 11, class 3): YAML that bombs, nests, aliases or hides
types; argument schemas that reach out or never finish; patterns that backtrack or explode when
compiled; files that are not files.

Every refusal goes through the real CLI on real files: `judgekit run SUITE`, `judgekit rubric
lock` and `judgekit rubric check` all exit 2 with one line naming `rubric.yaml:LINE`, write no
lock, and finish within a few seconds. Patterns and schemas that are valid but slow on the
agent's data make that trajectory's axis an `error` naming the check, never a pass, a fail or
a hang. A loopback listener proves that no `$ref` is ever fetched.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from judgekit.cli import main

ALARM_S = 15
FAST_S = 5.0  # "within a few seconds", on a loaded 2-core machine


class Listener:
    """A TCP listener on 127.0.0.1 that records every connection made to it."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            conn.close()

    def close(self):
        self.sock.close()


@pytest.fixture
def listener():
    server = Listener()
    yield server
    server.close()


# --- rubric texts ----------------------------------------------------------------------------------

HEAD = "id: r\nversion: 1.0.0\nregistered: 2026-01-01\n"
TASK = HEAD + "task_success:\n  guide: The user's email must change.\n  postconditions:\n    - {check: exists, collection: /users}\n"


def task_with(line: str) -> str:
    """TASK with one more line under task_success (indented two spaces)."""
    return TASK.replace("  postconditions:\n", f"  {line}\n  postconditions:\n")


def predicate(body: str) -> str:
    return TASK.replace("{check: exists, collection: /users}", body)


def args_schema(schema: Any) -> str:
    """A rubric whose one expected call's argument `email` has this JSON Schema."""
    return HEAD + ("tool_correctness:\n  guide: The email update call, once.\n  expected_calls:\n"
                   f"    - tool: update_user\n      args:\n        email: {json.dumps(schema)}\n")


def alias_bomb() -> str:
    lines = ['  x0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"  x{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 9)]
    return HEAD + "description: {}\nx:\n" + "\n".join(lines) + "\n" + TASK[len(HEAD):]


def deep_through_aliases() -> str:
    """Each anchor nests 150 levels and holds the one before it: 600 levels once expanded,
    while the text itself never nests past 150."""
    body = TASK
    for i in range(4):
        inner = f"*d{i - 1}" if i else "1"
        body += (f"    - {{check: equals, collection: /users, field: id, value: &d{i} "
                 + "[" * 150 + inner + "]" * 150 + "}\n")
    return body


REFUSED = [
    pytest.param(lambda: alias_bomb(), "expands to more than 500000 values", "x5:", id="alias_bomb_1kb"),
    pytest.param(lambda: HEAD + "description: &a [*a]\n" + TASK[len(HEAD):], "recursive structure", "description:",
                 id="recursive_alias"),
    pytest.param(lambda: HEAD + "description: " + "[" * 20_000 + "]" * 20_000 + "\n" + TASK[len(HEAD):],
                 "nested more than 200 levels deep", "description:", id="nested_flow_sequences_20k"),
    pytest.param(lambda: TASK + "".join("  " * i + f"k{i}:\n" for i in range(300)) + "  " * 300 + "v: 1\n",
                 "nested more than 200 levels deep", "k199:", id="nested_block_mappings_300"),
    pytest.param(deep_through_aliases, "nests more than 200 levels deep once its aliases are expanded", "&d1 ",
                 id="nested_600_deep_through_aliases"),
    pytest.param(lambda: TASK + "? [a, b]\n: 1\n", "the key 'list' is not a string", "? [a, b]", id="sequence_as_key"),
    pytest.param(lambda: task_with("1: x"), "the key '1' is not a string", "  1: x", id="integer_key"),
    pytest.param(lambda: task_with("on: x"), "the key 'on' is not a string", "  on: x", id="on_is_a_boolean_key"),
    pytest.param(lambda: task_with("~: x"), "the key '~' is not a string", "  ~: x", id="null_key"),
    pytest.param(lambda: task_with("max_latency_s: .inf"), "'.inf' is not a finite number", "max_latency_s", id="inf"),
    pytest.param(lambda: task_with("max_latency_s: -.inf"), "'-.inf' is not a finite number", "max_latency_s",
                 id="minus_inf"),
    pytest.param(lambda: task_with("max_latency_s: .nan"), "'.nan' is not a finite number", "max_latency_s", id="nan"),
    pytest.param(lambda: task_with('max_latency_s: "inf"'), "max_latency_s: Input should be a finite number",
                 "max_latency_s", id="quoted_inf_for_a_number"),
    pytest.param(lambda: task_with("max_latency_s: Infinity"), "max_latency_s: Input should be a finite number",
                 "max_latency_s", id="json_infinity_is_a_yaml_string"),
    pytest.param(lambda: TASK + 'judge:\n  model: openai/gpt-4o-2024-08-06\n  timeout_s: "1e999"\n',
                 "judge.timeout_s: Input should be a finite number", "timeout_s", id="infinite_judge_timeout"),
    pytest.param(lambda: predicate("{check: equals, collection: /users, field: id, value: !!binary aGVsbG8=}"),
                 "the YAML tag 'tag:yaml.org,2002:binary' is not allowed", "!!binary", id="binary_tag"),
    pytest.param(lambda: predicate("{check: equals, collection: /users, field: id, value: !!set {a, b}}"),
                 "the YAML tag 'tag:yaml.org,2002:set' is not allowed", "!!set", id="set_tag"),
    pytest.param(lambda: predicate("{check: equals, collection: /users, field: id, value: !!omap [a: 1]}"),
                 "the YAML tag 'tag:yaml.org,2002:omap' is not allowed", "!!omap", id="omap_tag"),
    pytest.param(lambda: TASK + "x: !!python/object/apply:os.system [touch SENTINEL]\n",
                 "could not determine a constructor", "!!python", id="python_object_tag"),
    pytest.param(lambda: predicate("{check: equals, collection: /users, field: id, value: " + "9" * 5000 + "}"),
                 "an integer with more than 4300 digits is too large to read", "99999", id="integer_of_5000_digits"),
    pytest.param(lambda: TASK.replace("The user's email must change.", '"cut \\ud800 emoji"'),
                 "lone surrogate", "guide:", id="lone_surrogate_escape"),
    pytest.param(lambda: TASK.replace("The user's email must change.", "The email \x7f must change."),
                 "the character U+007F is not allowed in YAML", "guide:", id="raw_control_character"),
    pytest.param(lambda: task_with("guide: twice"), "key 'guide' is given twice", "guide: twice", id="duplicate_key"),
    pytest.param(lambda: TASK + "---\nid: other\n", "found another document", "---", id="two_documents"),
    pytest.param(lambda: predicate("{check: matches, collection: /users, field: id, pattern: "
                                   "'(?:(?:(?:(?:a{9999}){9999}){9999}){9999})'}"),
                 "repeats multiply out to 9996000599960001", "check: matches", id="pattern_that_explodes_when_compiled"),
    pytest.param(lambda: predicate("{check: matches, collection: /users, field: id, pattern: 'x{4294967295}'}"),
                 "invalid regular expression: the repetition number is too large", "check: matches",
                 id="pattern_repeat_past_the_limit"),
    pytest.param(lambda: predicate("{check: matches, collection: /users, field: id, pattern: '"
                                   + "(" * 600 + "a" + ")" * 600 + "'}"),
                 "invalid regular expression: groups nested too deeply", "check: matches", id="pattern_nested_600_groups"),
    # argument schemas: nothing fetched, nothing that never finishes
    pytest.param(lambda: args_schema({"$ref": "file:///etc/passwd"}), "would read another document", "args:",
                 id="file_ref"),
    pytest.param(lambda: args_schema({"$ref": "other.json"}), "would read another document", "args:",
                 id="relative_ref"),
    pytest.param(lambda: args_schema({"$ref": "#/$defs/nope"}), "$ref '#/$defs/nope' names nothing", "args:",
                 id="dangling_ref"),
    pytest.param(lambda: args_schema({"$ref": "#/$defs/n", "$defs": {"n": 5}}), "5 is not of type", "args:",
                 id="ref_to_a_number"),
    pytest.param(lambda: args_schema({"$ref": "#"}), "refers back to itself without descending", "args:",
                 id="ref_to_the_root_at_the_root"),
    pytest.param(lambda: args_schema({"allOf": [{"$ref": "#/$defs/a"}], "$defs": {"a": {"anyOf": [{"$ref": "#"}]}}}),
                 "refers back to itself without descending", "args:", id="loop_through_allof_and_anyof"),
    pytest.param(lambda: args_schema({"$id": "https://example.com/s", "type": "string"}), "$id is not supported",
                 "args:", id="id_keyword"),
    pytest.param(lambda: args_schema({"$dynamicRef": "#meta"}), "$dynamicRef is not supported", "args:",
                 id="dynamic_ref"),
    pytest.param(lambda: args_schema({"$schema": "http://json-schema.org/draft-07/schema#", "type": "string"}),
                 "argument schemas are JSON Schema 2020-12", "args:", id="draft_07_dialect"),
    pytest.param(lambda: args_schema({"type": "object", "unevaluatedProperties": False}),
                 "unevaluatedProperties is not supported", "args:", id="unevaluated_properties_quadratic"),
    pytest.param(lambda: args_schema({"type": "string", "pattern": "(((a{50}){50}){50}){50}"}),
                 "repeats multiply out to 6250000", "args:", id="schema_pattern_that_explodes_when_compiled"),
    pytest.param(lambda: args_schema({"type": "string", "pattern": "x{4294967295}"}),
                 "the repetition number is too large", "args:", id="schema_pattern_repeat_past_the_limit"),
]


def write_suite(folder: Path, rubric: str | bytes, trajectories: list[dict[str, Any]] | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "rubric.yaml"
    path.write_bytes(rubric if isinstance(rubric, bytes) else rubric.encode("utf-8"))
    rows = trajectories or [{"id": "t1", "prompt": "Update my email.", "output": "Done."}]
    (folder / "t.jsonl").write_text("".join(json.dumps(t) + "\n" for t in rows))
    (folder / "suite.yaml").write_text("name: s\nrubrics: [rubric.yaml]\ntrajectories:\n  - {file: t.jsonl, rubric: r}\n")
    return folder / "suite.yaml"


def invoke(*args: str | Path):
    started = time.monotonic()
    result = CliRunner().invoke(main, [str(a) for a in args])
    elapsed = time.monotonic() - started
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output and "internal error" not in result.output, result.output
    assert elapsed < FAST_S, f"took {elapsed:.1f} s"
    return result


def line_of(text: str, marker: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if marker in line)


def assert_refused_everywhere(folder: Path, text: str, fragment: str, line: int | None) -> None:
    rubric = folder / "rubric.yaml"
    where = f"{rubric}:{line}: " if line is not None else f"{rubric}: "
    lock = folder / "rubrics.lock"
    for args in (["run", folder / "suite.yaml", "--no-cache"], ["rubric", "lock", rubric, "--lock", lock],
                 ["rubric", "check", rubric, "--lock", lock]):
        result = invoke(*args)
        assert result.exit_code == 2, (args, result.output)
        errors = [ln for ln in result.output.splitlines() if ln.startswith("judgekit: error: ")]
        assert errors and errors[0].startswith(f"judgekit: error: {where}"), (args, result.output)
        assert fragment in errors[0], (args, errors[0])
        if "tool_correctness" in text:  # an argument schema: the error names the argument
            assert "args: Value error, argument 'email': " in errors[0], errors[0]
    assert not lock.exists()


@pytest.mark.parametrize(("build", "fragment", "marker"), REFUSED)
def test_refused_at_load_with_file_and_line(tmp_path, build: Callable[[], str], fragment, marker):
    text = build()
    write_suite(tmp_path, text)
    assert_refused_everywhere(tmp_path, text, fragment, line_of(text, marker))
    assert not (tmp_path / "SENTINEL").exists() and not Path("SENTINEL").exists()


def test_the_alias_bomb_is_small():
    assert len(alias_bomb().encode()) <= 1100  # the 1 KB of the issue, plus the rubric around it


def test_a_rubric_past_the_size_bound(tmp_path):
    text = TASK + "#" + "x" * (9 * 2**20) + "\n"
    write_suite(tmp_path, text)
    assert_refused_everywhere(tmp_path, text, f"is {len(text)} bytes, more than the 8388608 allowed", None)


@pytest.mark.parametrize("url", ["http://127.0.0.1:{port}/x.json", "http://127.0.0.1:{port}/x.json#/$defs/a"])
@pytest.mark.parametrize("keyword", ["$ref", "$schema", "$id"])
def test_no_schema_url_is_ever_fetched(tmp_path, listener, keyword, url):
    url = url.format(port=listener.port)
    schema = {keyword: url, "type": "string"}
    text = args_schema(schema)
    write_suite(tmp_path, text)
    fragment = {"$ref": "would read another document", "$schema": "argument schemas are JSON Schema 2020-12",
                "$id": "$id is not supported" if "#" not in url else "invalid JSON Schema"}[keyword]
    assert_refused_everywhere(tmp_path, text, fragment, line_of(text, "args:"))
    assert listener.connections == 0


@pytest.mark.parametrize("rubric_path", [
    pytest.param("/dev/zero", id="dev_zero"),
    pytest.param("fifo.yaml", id="fifo"),
    pytest.param("link.yaml", id="link_to_a_fifo"),
])
def test_a_rubric_that_is_not_a_file_is_refused_without_blocking(tmp_path, rubric_path):
    os.mkfifo(tmp_path / "fifo.yaml")
    (tmp_path / "link.yaml").symlink_to(tmp_path / "fifo.yaml")
    (tmp_path / "t.jsonl").write_text(json.dumps({"id": "t1", "prompt": "p"}) + "\n")
    (tmp_path / "suite.yaml").write_text(
        f"name: s\nrubrics: [{rubric_path}]\ntrajectories:\n  - {{file: t.jsonl, rubric: r}}\n")
    named = Path(rubric_path) if rubric_path.startswith("/") else tmp_path / rubric_path
    for args, shown in ((["run", tmp_path / "suite.yaml", "--no-cache"], named.resolve()),  # the suite resolves links
                        (["rubric", "lock", named, "--lock", tmp_path / "l"], named)):
        result = invoke(*args)
        assert result.exit_code == 2
        assert result.output.startswith(f"judgekit: error: {shown}: not a regular file (a device, FIFO or socket)")


def test_nan_swapped_for_null_is_refused_not_matched_to_the_lock(tmp_path):
    """Once `.nan` and `null` hashed alike, so `rubric check` passed after the swap."""
    text = predicate("{check: equals, collection: /users, field: id, value: null}")
    write_suite(tmp_path, text)
    rubric, lock = tmp_path / "rubric.yaml", tmp_path / "rubrics.lock"
    assert invoke("rubric", "lock", rubric, "--lock", lock).exit_code == 0
    assert invoke("rubric", "check", rubric, "--lock", lock).exit_code == 0
    swapped = text.replace("value: null", "value: .nan")
    rubric.write_text(swapped)
    checked = invoke("rubric", "check", rubric, "--lock", lock)
    assert checked.exit_code == 2
    assert checked.output.startswith(f"judgekit: error: {rubric}:{line_of(swapped, '.nan')}: YAML syntax error: "
                                     "'.nan' is not a finite number")


# --- accepted: what hardening must not refuse ------------------------------------------------------


def run_jsonl(suite: Path) -> tuple[int, dict[str, dict[str, Any]], str]:
    result = invoke("run", suite, "--no-cache", "--format", "jsonl")
    rows = [json.loads(line) for line in result.output.splitlines() if line.startswith("{")]
    return result.exit_code, {row["trajectory_id"]: row["axes"] for row in rows}, result.output


def update(tid: str, email: Any) -> dict[str, Any]:
    return {"id": tid, "prompt": "Update my email.", "output": "Done.",
            "calls": [{"tool": "update_user", "args": {"email": email}, "result": "ok"}]}


def test_a_recursive_schema_loads_and_validates(tmp_path):
    schema = {"$defs": {"tree": {"type": ["string", "array"], "items": {"$ref": "#/$defs/tree"}}},
              "$ref": "#/$defs/tree"}
    suite = write_suite(tmp_path, args_schema(schema), [update("ok", ["a", ["b", ["c"]]]), update("bad", ["a", [1]])])
    code, axes, _ = run_jsonl(suite)
    assert code == 0
    assert axes["ok"]["tool_correctness"]["score"] == 1.0
    assert axes["bad"]["tool_correctness"]["score"] == 0.75
    lost = [i for i in axes["bad"]["tool_correctness"]["items"] if not i["earned"]]
    assert [i["point"] for i in lost] == ["call[0] update_user: arg email"]


def test_items_ref_to_the_root_is_a_legit_recursion(tmp_path):
    suite = write_suite(tmp_path, args_schema({"type": "array", "items": {"$ref": "#"}}),
                        [update("ok", [[], [[]]]), update("bad", [[], "x"])])
    code, axes, _ = run_jsonl(suite)
    assert code == 0
    assert axes["ok"]["tool_correctness"]["score"] == 1.0 and axes["bad"]["tool_correctness"]["score"] == 0.75


def test_merge_keys_override_and_escaped_emoji_load(tmp_path):
    """YAML merge keys with an override, and a JSON-style surrogate pair escape (how json.dumps
    writes an emoji), are valid input: refusing them was a false alarm."""
    text = TASK.replace("    - {check: exists, collection: /users}\n",
                        "    - &base {check: exists, collection: /users}\n    - {<<: *base, check: absent}\n")
    text = text.replace("The user's email must change.", '"The email must change \\ud83d\\udce7"')
    write_suite(tmp_path, text, [{"id": "t1", "prompt": "p", "world": {"before": {"json": {"users": []}},
                                                                      "after": {"json": {"users": [{"id": 1}]}}}}])
    code, axes, output = run_jsonl(tmp_path / "suite.yaml")
    assert code == 0, output
    assert [c["check"] for c in axes["t1"]["task_success"]["checks"]] == ["postcondition[0] exists",
                                                                          "postcondition[1] absent"]
    assert invoke("rubric", "lock", tmp_path / "rubric.yaml", "--lock", tmp_path / "l").exit_code == 0


def test_a_json_rubric_reads_numbers_as_json_does(tmp_path):
    """YAML 1.1 reads JSON's 1e3 as the string '1e3': a .json rubric is read as JSON."""
    rubric = {"id": "r", "version": "1.0.0", "registered": "2026-01-01",
              "task_success": {"guide": "g", "postconditions": [
                  {"check": "equals", "collection": "/users", "field": "quota", "value": 1000.0}]}}
    text = json.dumps(rubric, indent=1).replace("1000.0", "1e3")
    folder = tmp_path
    (folder / "rubric.json").write_text(text)
    (folder / "t.jsonl").write_text(json.dumps({"id": "t1", "prompt": "p", "world": {
        "before": {"json": {"users": []}}, "after": {"json": {"users": [{"quota": 1000}]}}}}) + "\n")
    (folder / "suite.yaml").write_text("name: s\nrubrics: [rubric.json]\ntrajectories:\n  - {file: t.jsonl, rubric: r}\n")
    code, axes, output = run_jsonl(folder / "suite.yaml")
    assert code == 0, output
    assert axes["t1"]["task_success"]["passed"] is True


# --- valid patterns and schemas that are slow on the agent's data ----------------------------------


def world(after: dict[str, Any]) -> dict[str, Any]:
    return {"before": {"json": {"users": []}}, "after": {"json": after}}


SLOW = [
    pytest.param(predicate("{check: matches, collection: /users, field: name, pattern: '(a|aa)+$'}"),
                 {"world": world({"users": [{"name": "a" * 60 + "b"}]})}, "task_success",
                 "matches on name of /users where any record: the pattern /(a|aa)+$/ took more than 0.5 s",
                 id="matches_backtracks_on_one_value"),
    pytest.param(predicate("{check: matches, collection: /users, field: name, pattern: '((a|aa)+$)|a+b'}"),
                 {"world": world({"users": [{"name": "a" * 26 + "b"}] * 200})}, "task_success",
                 "took more than 2 s in all over this check's values",
                 id="matches_under_the_bound_per_value_but_on_200_records"),
    pytest.param(args_schema({"type": "string", "pattern": "^(a|aa)+$"}),
                 {"calls": [{"tool": "update_user", "args": {"email": "a" * 60 + "b"}, "result": "ok"}]},
                 "tool_correctness", "argument 'email': schema pattern: the pattern /^(a|aa)+$/ took more than 0.5 s",
                 id="schema_pattern_on_an_argument"),
    pytest.param(args_schema({"type": "object", "patternProperties": {"^(a|aa)+$": {}}}),
                 {"calls": [{"tool": "update_user", "args": {"email": {"a" * 60 + "b": 1}}, "result": "ok"}]},
                 "tool_correctness", "argument 'email': schema patternProperties: the pattern /^(a|aa)+$/",
                 id="pattern_properties_on_a_key"),
    pytest.param(args_schema({"type": "object", "patternProperties": {"^(a|aa)+$": {}}, "additionalProperties": False}),
                 {"calls": [{"tool": "update_user", "args": {"email": {"a" * 26 + "b" + str(i): 1 for i in range(200)}},
                             "result": "ok"}]},
                 "tool_correctness", "took more than 2 s in all over this check's values",
                 id="additional_properties_over_200_keys"),
    pytest.param(args_schema({"anyOf": [{"type": "array", "items": {"$ref": "#"}},
                                        {"type": "array", "items": {"$ref": "#"}, "minItems": 1}]}),
                 {"calls": [{"tool": "update_user", "args": {"email": json.loads("[" * 40 + '"x"' + "]" * 40)},
                             "result": "ok"}]},
                 "tool_correctness", "argument 'email': argument schema: took more than 2 s",
                 id="any_of_over_a_recursive_ref_is_exponential_in_depth"),
    pytest.param(args_schema({"type": "array", "items": {"pattern": "^(a|aa)+$|b$"}}),
                 {"calls": [{"tool": "update_user", "args": {"email": ["a" * 24 + "b"] * 8}, "result": "ok"}] * 40},
                 "tool_correctness", "took more than 2 s in all over this check's values",
                 id="twenty_calls_share_one_budget"),
]


@pytest.mark.parametrize(("rubric", "fields", "axis", "fragment"), SLOW)
def test_slow_on_the_data_is_that_axis_error_and_the_run_goes_on(tmp_path, rubric, fields, axis, fragment):
    victim = {"id": "slow", "prompt": "Update my email.", "output": "Done.", **fields}
    fine = {"id": "fine", "prompt": "Update my email.", "output": "Done.",
            "world": world({"users": [{"name": "aaaa"}]}),
            "calls": [{"tool": "update_user", "args": {"email": "aaaa"}, "result": "ok"}]}
    suite = write_suite(tmp_path, rubric, [victim, fine])
    started = time.monotonic()
    code, axes, output = run_jsonl(suite)
    assert time.monotonic() - started < FAST_S
    assert code == 2
    record = axes["slow"][axis]
    assert record["status"] == "error" and record["score"] is None, record
    assert fragment in record["error"], record["error"]
    assert f"judgekit: error: slow {axis}: " in output
    assert axes["fine"][axis]["status"] == "scored"


def test_unique_items_is_linear_and_exact(tmp_path):
    """jsonschema compares items pairwise when they do not sort (objects): 20,000 took minutes."""
    items = [{"i": i} for i in range(20_000)]
    suite = write_suite(tmp_path, args_schema({"type": "array", "uniqueItems": True}), [
        update("distinct", items), update("repeated", [*items, {"i": 7.0}]), update("bool_is_not_one", [1, True]),
    ])
    code, axes, _ = run_jsonl(suite)
    assert code == 0
    assert axes["distinct"]["tool_correctness"]["score"] == 1.0
    assert axes["bool_is_not_one"]["tool_correctness"]["score"] == 1.0
    lost = [i for i in axes["repeated"]["tool_correctness"]["items"] if not i["earned"]]
    assert len(lost) == 1 and "item 20000 repeats an earlier item" in lost[0]["reason"]


def test_glob_on_a_long_key_is_fast(tmp_path):
    rubric = TASK.replace("  postconditions:\n", "  side_effects:\n    allow: ['users/*/*a*a*a*a*a*a*a*a*b']\n"
                                                 "  postconditions:\n")
    key = "a" * 20_000
    suite = write_suite(tmp_path, rubric, [{"id": "t1", "prompt": "p", "world": {
        "before": {"json": {"users": [{"id": 1, key: "old"}]}}, "after": {"json": {"users": [{"id": 1, key: "new"}]}},
        "keys": {"/users": "id"}}}])
    started = time.monotonic()
    code, axes, _ = run_jsonl(suite)
    assert time.monotonic() - started < FAST_S
    assert code == 0
    side = next(c for c in axes["t1"]["task_success"]["checks"] if c["check"] == "side_effects")
    assert side["passed"] is False and "1 change(s) not allowed" in side["reason"]


def test_there_are_enough_cases():
    assert len(REFUSED) + len(SLOW) >= 20
    print(f"\n{len(REFUSED)} refused rubrics, {len(SLOW)} slow checks, 6 fetch attempts, 3 non-files, 6 accepted")
