"""jiter reads first, the Python json reference decides: the two must never disagree.

``judgekit._util.strict_json.fast_json_loads`` keeps jiter's value only where it cannot differ from
``_reference_loads`` (the strict ``json`` module parse that defines what judgekit accepts). These
tests put both on generated documents, on documents with hostile parts spliced in, on random
byte-level damage and on the number edges where a double overflows, and require the same
outcome: the same value (same types, same repr) or a refusal from both.
"""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from judgekit._util import strict_json as _strict
from judgekit._util.strict_json import MAX_DEPTH, UNDECIDED, fast_json_loads, json_line_loads, strict_json_loads


def reference(raw: bytes, max_depth: int = MAX_DEPTH) -> tuple[str, str]:
    """What the reference alone says of UTF-8 ``raw``: ('ok', repr) or ('refused', '')."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return "refused", ""
    try:
        return "ok", repr(_strict._reference_loads(text, max_depth, decoded_utf8=True))
    except ValueError:
        return "refused", ""


def fast(raw: bytes, max_depth: int = MAX_DEPTH) -> tuple[str, str] | None:
    """What the fast path says: ('ok', repr), or None where it leaves the text to the reference."""
    value = fast_json_loads(raw, max_depth)
    return None if value is UNDECIDED else ("ok", repr(value))


def assert_agrees(raw: bytes, max_depth: int = MAX_DEPTH) -> None:
    expected = reference(raw, max_depth)
    said = fast(raw, max_depth)
    if said is not None:  # jiter decided: the reference must accept the same value
        assert said == expected, raw[:200]
    # And the public entry points give the reference's outcome either way.
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return
    try:
        got = "ok", repr(strict_json_loads(text, max_depth=max_depth))
    except ValueError:
        got = "refused", ""
    assert got == expected, raw[:200]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.integers(-10**60, 10**60)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=4), inner, max_size=5),
    max_leaves=60,
)

HOSTILE = st.sampled_from([
    '"\\ud800"', '"\\udc00x"', '"\\ud800\\ud800"', '"\\ud83d\\ude00"', "1e999", "-1E+309", "1e308",
    "1.7976931348623157e308", "1.7976931348623159e308", "2e308", "1e-400", "NaN", "Infinity", "-Infinity",
    '{"a": 1, "a": 2}', '{"\\u0061": 1, "a": 2}', "[" * 201 + "]" * 201, "{}", "[]", "1" * 4300,
    "1" * 4301, "9" * 250 + "e99", "9" * 199 + "e99", "9" * 310 + ".5", "0." + "0" * 400 + "1e400",
    "-0", "-0.0", "01", "1.", ".5", "+1", "\u2028", '"\x01"', '"\x7f"', "\ufeff1", "tru", "nul",
])


@settings(max_examples=400, deadline=None)
@given(json_values, st.lists(HOSTILE, max_size=3), st.booleans(), st.sampled_from([8, 50, MAX_DEPTH]))
def test_fast_and_reference_agree_on_documents_with_hostile_parts(value, pieces, ascii_only, max_depth):
    text = json.dumps(value, ensure_ascii=ascii_only)
    for n, piece in enumerate(pieces):
        text = f"[{text}, {piece}]" if n % 2 else f'{{"p": {piece}, "v": {text}}}'
    assert_agrees(text.encode("utf-8", "surrogatepass"), max_depth)


@settings(max_examples=400, deadline=None)
@given(json_values, st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=4),
       st.booleans())
def test_fast_and_reference_agree_on_damaged_bytes(value, damage, insert):
    raw = bytearray(json.dumps(value, ensure_ascii=False).encode("utf-8"))
    for at, byte in damage:
        at %= len(raw) + 1
        if insert or at == len(raw):
            raw[at:at] = bytes([byte])
        else:
            raw[at] = byte
    assert_agrees(bytes(raw))


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 320), st.integers(0, 30), st.sampled_from(["", "e", "E", "e+", "E-", "e-"]), st.integers(0, 400))
def test_numbers_agree_at_the_edge_of_a_double(int_digits, frac_digits, marker, exponent):
    number = "9" * int_digits + ("." + "7" * frac_digits if frac_digits else "")
    if marker:
        number += f"{marker}{exponent}"
    assert_agrees(f'{{"n": {number}}}'.encode())


def test_every_overflow_is_left_to_the_reference_and_refused():
    for number in ["1e999", "-1e999", "2e308", "1e+309", "9" * 250 + "e99", "1" + "0" * 309 + ".0",
                   "1" + "0" * 400 + "e-50", "1e0000309"]:
        raw = f"[{number}]".encode()
        assert fast(raw) is None, number
        with pytest.raises(ValueError, match="too large to represent"):
            strict_json_loads(raw.decode())


@pytest.mark.parametrize("text", [
    '{"k": 1e999}', '{"héllo wörld": -2e308}', '["abc", 1E+400]', '{"ключ":[1e309]}', '["x"," 9e999 ",1e999]',
    '{"a": "' + "ab4e123f" * 50 + '", "n": 1' + "0" * 320 + '.5}', '{"emoji 😀":1e0400}',
])
def test_an_overflow_beside_letters_and_non_ascii_text_is_still_found(text):
    # The marks delete letters and non-ASCII bytes; a number never holds one, nor follows one.
    raw = text.encode()
    assert fast(raw) is None, text
    with pytest.raises(ValueError, match="too large to represent"):
        strict_json_loads(raw)


def test_a_large_finite_double_is_read_as_the_reference_reads_it():
    raw = b"[1.7976931348623157e308, 9e99, 123456789012345678901234567890.5]"
    assert strict_json_loads(raw.decode()) == json.loads(raw)
    assert all(math.isfinite(x) for x in strict_json_loads(raw))


@pytest.mark.parametrize("depth", [199, 200, 201, 202])
@pytest.mark.parametrize("inner", ["", "0"])
def test_an_empty_container_201_levels_down_is_refused_as_before(depth, inner):
    # jiter accepts "[" * 201 + "]" * 201; the reference, and so judgekit, does not.
    raw = ("[" * depth + inner + "]" * depth).encode()
    assert_agrees(raw)
    assert (reference(raw)[0] == "ok") == (depth <= MAX_DEPTH)


def test_a_line_of_unicode_spaces_is_blank_and_a_bom_line_is_refused_by_the_reference():
    assert json_line_loads(" \t\r\n".encode()) is _strict.BLANK
    assert json_line_loads("\u3000\u2028\n".encode()) is _strict.BLANK
    with pytest.raises(json.JSONDecodeError, match="BOM"):
        json_line_loads("\ufeff{}\n".encode())
    with pytest.raises(UnicodeDecodeError):
        json_line_loads(b'{"a": "\xff"}\n')


@pytest.mark.parametrize(("text", "exponent"), [
    ('{"h": "ab4e123f"}', False), ('{"h": "4e123"}', False), ('["x", 4e123]', True), ("4e123", True),
    ('{"n":-1.5E+0400}', True), ('{"n": 1e99}', False), ('{"t": "see 1e500"}', True), ('[1e-500]', False),
])
def test_an_exponent_is_told_from_hex_digits_by_what_stands_before_it(text, exponent):
    assert _strict._big_exponent(_strict._marks(text.encode())) is exponent
    assert_agrees(text.encode())


def test_hex_text_that_looks_like_exponents_costs_one_pass():
    # A hash-like run of digits and e's throughout: found, walked once, not taken for a number.
    raw = ('{"h": "a' + "0e000" * 100_000 + '"}').encode()
    assert not _strict._big_exponent(_strict._marks(raw))
    assert fast(raw) == reference(raw)


@pytest.mark.parametrize(("raw", "why"), [
    pytest.param(b'"\xed\xa0\x80"', "not UTF-8 text", id="a_surrogate_encoded_in_utf8"),
    pytest.param('{"a": 1}'.encode("utf-16-le"), None, id="utf16"),
    pytest.param(b"\xef\xbb\xbf[1]", "BOM", id="byte_order_mark"),
])
def test_bytes_are_read_as_utf8_text_like_a_file(raw, why):
    with pytest.raises(ValueError, match=why):
        strict_json_loads(raw)


def test_a_document_with_many_brackets_is_read_by_jiter_and_measured_as_the_reference_measures_it(monkeypatch):
    # A long list of small records holds more brackets than the depth limit without nesting
    # deep: jiter's value is kept, its depth measured. Deeper than the limit: the reference says.
    many = b"[" + b",".join([b"[[]]"] * 100) + b"]"
    assert many.count(b"[") > MAX_DEPTH
    assert fast_json_loads(many) == [[[]]] * 100
    assert fast_json_loads(many, max_depth=3) == [[[]]] * 100
    assert fast_json_loads(many, max_depth=2) is UNDECIDED
    with pytest.raises(ValueError, match="nested more than 2 levels deep"):
        strict_json_loads(many, max_depth=2)
    assert_agrees(many, 2)
    assert_agrees(many, 3)
