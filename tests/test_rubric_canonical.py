"""The canonical rubric hash is injective on what the loader accepts (issue 11, class 3).

`Rubric.sha256()` is what `rubric lock` freezes, what cache keys and approval fingerprints
carry. Two rubric documents with one hash must therefore hold the same criteria, compared
type-aware (1, 1.0 and true are three values; so are 0.0 and -0.0). Documents are generated as
YAML text, so that the spellings YAML reads alike or apart (null and ~, yes and true, dates
quoted or not, numbers and strings that look like them, optional fields given their default or
left out) all meet. Each document's canonical form, written out and loaded again, has the same
hash and the same criteria. The loader reads back exactly the JSON values judgekit writes, as
JSON or through yaml.safe_dump. Diff path globs agree with a plain regular-expression reference.
"""

from __future__ import annotations

import re
import tempfile
from datetime import date
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, assume, event, given, note, settings
from hypothesis import strategies as st

from judgekit._util.io import canonical_json
from judgekit.axes._paths import path_matches
from judgekit.errors import InputError
from judgekit.rubric.model import Rubric, load_rubric

PROPS = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FOLDER = Path(tempfile.mkdtemp(prefix="judgekit-canonical-"))


def typed(value: Any) -> Any:
    """A JSON-able tree that keeps every value's type: 1, 1.0, True, '1' and -0.0 all differ."""
    if isinstance(value, bool):
        return ["bool", value]
    if isinstance(value, int):
        return ["int", str(value)]
    if isinstance(value, float):
        return ["float", repr(value)]
    if isinstance(value, str):
        return ["str", value]
    if value is None:
        return ["null"]
    if isinstance(value, date):
        return ["date", value.isoformat()]
    if isinstance(value, (list, tuple)):
        return ["list", [typed(v) for v in value]]
    if isinstance(value, dict):
        return ["dict", {str(k): typed(v) for k, v in value.items()}]
    raise TypeError(type(value))


def criteria(rubric: Rubric) -> str:
    return canonical_json(typed(rubric.model_dump(mode="python")))


_counter = iter(range(10**9))


def load_text(text: str, suffix: str = ".yaml") -> Rubric | None:
    path = FOLDER / f"r{next(_counter)}{suffix}"
    path.write_text(text, encoding="utf-8")
    try:
        return load_rubric(path)
    except InputError:
        return None
    finally:
        path.unlink()


# --- rubric documents as YAML text --------------------------------------------------------------

SCALARS = [
    "null", "~", "1", "1.0", "+1", "-0.0", "0.0", "0", "-0", "1e3", "1.0e+3", "'1e3'", "1000", "1000.0",
    "2026-01-01", "'2026-01-01'", '"2026-01-01"', "2026-01-01T10:00:00", "'1'", '"1.0"', "yes", "no", "true",
    "True", "false", "'yes'", "'true'", "x", "'x'", '"x"', "''", "0x1f", "017", "1_000", "10:30", "'null'",
]
scalar = st.sampled_from(SCALARS)
value = st.recursive(scalar, lambda inner: st.one_of(
    st.lists(inner, max_size=2).map(lambda items: "[" + ", ".join(items) + "]"),
    st.dictionaries(st.sampled_from(["a", "b"]), inner, max_size=2).map(
        lambda d: "{" + ", ".join(f"{k}: {v}" for k, v in d.items()) + "}"),
), max_leaves=4)


def optional(key: str, spellings: list[str]) -> st.SearchStrategy[str]:
    """The line ``key: spelling`` or nothing."""
    return st.one_of(st.just(""), st.sampled_from(spellings).map(lambda s: f"{key}: {s}"))


@st.composite
def predicate(draw) -> str:
    kind = draw(st.sampled_from(["equals", "count", "exists"]))
    parts = [f"check: {kind}", "collection: /users"]
    where = draw(st.one_of(st.just(""), st.just("where: {}"), value.map(lambda v: f"where: {{k: {v}}}")))
    if where:
        parts.append(where)
    if kind == "equals":
        parts += ["field: f", f"value: {draw(value)}"]
    if kind == "count":
        parts.append(f"value: {draw(st.sampled_from(['1', '1.0', '2', 'yes', '0']))}")
        if op := draw(optional("op", ["'=='", "'>='", '"=="'])):
            parts.append(op)
    return "{" + ", ".join(parts) + "}"


@st.composite
def rubric_text(draw) -> str:
    lines = ["id: r", "version: 1.0.0", f"registered: {draw(st.sampled_from(['2026-01-01', chr(39) + '2026-01-01' + chr(39)]))}"]
    if description := draw(optional("description", ["''", "x", "'1'", "null"])):
        lines.append(description)
    lines += ["task_success:", "  guide: g"]
    for field in (optional("max_latency_s", ["null", "1", "1.0", "'1'", "2", "1e3", "1.0e+3"]),
                  optional("judge", ["false", "no", "False", "0"]),
                  optional("required_outputs", ["[]", "['1']", "[x]", "['2026-01-01']"])):
        if line := draw(field):
            lines.append("  " + line)
    lines.append("  postconditions:")
    lines += [f"    - {draw(predicate())}" for _ in range(draw(st.integers(1, 2)))]
    if draw(st.booleans()):
        lines += ["faithfulness:", "  guide: g"]
        for field in (optional("min_quote_chars", ["8", "8.0", "9", "'8'"]),
                      optional("allow_no_claims", ["false", "no", "true", "yes", "off"])):
            if line := draw(field):
                lines.append("  " + line)
    if draw(st.booleans()):
        lines += ["tool_correctness:", "  guide: g"]
        for field in (optional("ordered", ["false", "no", "true"]), optional("in_scope", ["null", "[]", "[update]"])):
            if line := draw(field):
                lines.append("  " + line)
        schema = draw(st.one_of(value.map(lambda v: f"{{const: {v}}}"), st.sampled_from(
            ["{}", "true", "{type: integer}", "{type: number}", "{minimum: 1}", "{minimum: 1.0}"])))
        lines.append(f"  expected_calls: [{{tool: update, args: {{x: {schema}}}}}]")
    return "\n".join(lines) + "\n"


@PROPS
@given(rubric_text(), rubric_text())
def test_equal_hashes_mean_equal_criteria(text_a, text_b):
    a, b = load_text(text_a), load_text(text_b)
    assume(a is not None and b is not None)
    note(f"A:\n{text_a}\nB:\n{text_b}")
    event("same hash" if a.sha256() == b.sha256() else "different hashes")
    if a.sha256() == b.sha256():
        assert criteria(a) == criteria(b)
    if criteria(a) == criteria(b):  # and the converse: the hash sees everything that is scored
        assert a.sha256() == b.sha256()


@PROPS
@given(rubric_text())
def test_a_small_change_changes_the_hash_or_nothing(text):
    """Pairs that differ in one spelling: the common case for an edited rubric."""
    a = load_text(text)
    assume(a is not None)
    for old, new in (("1.0", "1"), ("~", "null"), ("yes", "true"), ("-0.0", "0.0"), ("'1'", "1"), ("no", "false"),
                     ("2026-01-01", "'2026-01-01'"), ("1e3", "1000.0"), ("false", "0")):
        if old not in text:
            continue
        b = load_text(text.replace(old, new, 1))
        if b is not None:
            assert (a.sha256() == b.sha256()) == (criteria(a) == criteria(b)), (old, new)


@PROPS
@given(rubric_text(), st.sampled_from([".json", ".yaml"]))
def test_the_canonical_form_reloads_to_the_same_hash(text, suffix):
    rubric = load_text(text)
    assume(rubric is not None)
    canonical = rubric.canonical()
    written = canonical_json(canonical) if suffix == ".json" else yaml.safe_dump(canonical, allow_unicode=True)
    again = load_text(written, suffix)
    assert again is not None, written
    assert again.sha256() == rubric.sha256()
    assert criteria(again) == criteria(rubric)


COLLIDE = [
    pytest.param("value: null", "value: ~", True, id="null_and_tilde"),
    pytest.param("value: 1", "value: 1.0", False, id="int_and_float"),
    pytest.param("value: 1", "value: true", False, id="one_and_true"),
    pytest.param("value: 0.0", "value: -0.0", False, id="zero_and_minus_zero"),
    pytest.param("value: 2026-01-01", "value: '2026-01-01'", True, id="date_and_its_text"),
    pytest.param("value: 1", "value: '1'", False, id="number_and_its_text"),
    pytest.param("value: yes", "value: true", True, id="yes_is_true"),
]


@pytest.mark.parametrize(("a", "b", "same"), COLLIDE)
def test_known_spellings(a, b, same):
    base = HEAD + "  postconditions:\n    - {check: equals, collection: /users, field: f, %s}\n"
    ra, rb = load_text(base % a), load_text(base % b)
    assert ra is not None and rb is not None
    assert (ra.sha256() == rb.sha256()) is same
    assert (criteria(ra) == criteria(rb)) is same


HEAD = "id: r\nversion: 1.0.0\nregistered: 2026-01-01\ntask_success:\n  guide: g\n"


@pytest.mark.parametrize(("spelling", "as_text"), [
    pytest.param(".nan", None, id="nan"), pytest.param(".inf", None, id="inf"),
    pytest.param("-.inf", None, id="minus_inf"), pytest.param("1.0e+999", None, id="overflow"),
    pytest.param("'inf'", "inf", id="quoted_inf"), pytest.param("'nan'", "nan", id="quoted_nan"),
    pytest.param("Infinity", "Infinity", id="json_infinity"), pytest.param("'1e999'", "1e999", id="quoted_overflow"),
])
def test_non_finite_numbers_never_load(spelling, as_text):
    """Never as a number: a float field refuses every spelling, and as an `equals` value a
    quoted one is its text (compared as text), never infinity or NaN."""
    assert load_text(HEAD + f"  max_latency_s: {spelling}\n  postconditions:\n    - {{check: exists, collection: /u}}\n") is None
    for part in (f"value: {spelling}", f"value: 1, where: {{k: {spelling}}}"):
        loaded = load_text(HEAD + f"  postconditions:\n    - {{check: equals, collection: /u, field: f, {part}}}\n")
        if as_text is None:
            assert loaded is None
        else:
            predicate_ = loaded.task_success.postconditions[0]
            assert as_text in (predicate_.value, predicate_.where.get("k"))


# --- the loader reads back the JSON values judgekit writes ------------------------------------------

json_value = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(10**30), 10**30),
              st.floats(allow_nan=False, allow_infinity=False), st.text(st.characters(exclude_categories=["Cs"]), max_size=8)),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.text(st.characters(exclude_categories=["Cs"]), max_size=4), inner, max_size=3)),
    max_leaves=8,
)


@PROPS
@given(json_value, st.sampled_from(["json", "yaml"]))
def test_values_read_back_exactly(value_, how):
    document = {"id": "r", "version": "1.0.0", "registered": "2026-01-01", "task_success": {"guide": "g", "postconditions": [
        {"check": "equals", "collection": "/u", "field": "f", "value": value_}]}}
    text = canonical_json(document) if how == "json" else yaml.safe_dump(document)
    loaded = load_text(text, "." + how)
    assert loaded is not None, text
    assert typed(loaded.task_success.postconditions[0].value) == typed(value_)


@pytest.mark.parametrize("text", ["line\x85break", "line\u2028break", "caf\u00e9 \U0001f600", "tab\there"])
def test_a_rubric_written_as_importers_write_it_reads_back_exactly(text):
    """Rubric.to_yaml (what the tau-bench importer writes): YAML reads a raw NEL or LINE
    SEPARATOR inside a quoted string as a line break, so only ASCII is written."""
    rubric = Rubric.model_validate({"id": "r", "version": "1.0.0", "registered": "2026-01-01",
                                    "task_success": {"guide": "g", "required_outputs": [text]}})
    loaded = load_text(rubric.to_yaml())
    assert loaded.task_success.required_outputs == [text]
    assert loaded.sha256() == rubric.sha256()


# --- diff path globs --------------------------------------------------------------------------------


def reference(pattern: str, path: list[str | int]) -> bool:
    """The glob as a regular expression over the segments, each prefixed by a NUL separator."""
    regex = ""
    for part in (p for p in pattern.strip("/").split("/") if p):
        if part == "**":
            regex += "(?:\x00[^\x00]*)*"
        else:
            regex += "\x00" + "".join("[^\x00]*" if ch == "*" else re.escape(ch) for ch in part)
    return re.fullmatch(regex, "".join("\x00" + str(s) for s in path)) is not None


glob = st.one_of(
    st.lists(st.sampled_from(["a", "b", "*", "**", "a*", "*b", "a*b", "*a*", "**a", "ab", "a**", "", "[1]", "?"]),
             max_size=5).map("/".join),
    st.text(st.sampled_from("ab*/?["), max_size=10),
)
segments = st.lists(st.one_of(st.text(st.sampled_from("ab?[1]"), max_size=4), st.integers(0, 3)), max_size=5)


@settings(max_examples=2000, deadline=None)
@given(glob, segments)
def test_path_globs_agree_with_a_regex_reference(pattern, path):
    assert path_matches(pattern, path) == reference(pattern, path)

