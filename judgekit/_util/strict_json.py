"""Strict JSON: the parser every JSON text judgekit reads goes through (files, JSON Lines, cache
rows, judge replies).

JSON is parsed strictly: duplicate keys, NaN/Infinity, numbers that overflow to infinity
(``1e999``), lone surrogates (``"\\ud800"``, which no UTF-8 file can hold) and nesting deeper
than ``MAX_DEPTH`` are refused (ValueError; ``json.JSONDecodeError`` where the text is not JSON).

How: the Python ``json`` module with strict hooks is the reference, and what it accepts,
refuses and returns is the definition. ``jiter`` (a Rust parser) reads first (a tau-bench
trajectory line in about 40 µs instead of 62 µs, its checks included), and its value is kept
only where the two cannot differ: when it refuses, when its value nests past the limit, or when
the text holds what only the reference judges exactly (a number that may overflow, a long run
of digits), the reference parses again and decides, in its own words and positions.

Reading files (bounds, regular files only, errors naming the file and line) is
``judgekit._util.io``.
"""

from __future__ import annotations

import json
import math
import re
import sys
from typing import Any

import jiter

MAX_DEPTH = 200
"""Deepest nesting of lists and objects accepted in any JSON or YAML input."""


def no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # json.loads would keep the last of two equal keys without a word, silently losing data.
    # The dict is built in C (this hook runs once per object of every document read); only a
    # repeated key makes it shorter than the pairs, and only then are they walked for its name.
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"duplicate key {key!r} in an object")
            seen.add(key)
    return result


def reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e999: JSON allows the digits, a double cannot hold them
        raise ValueError(f"the number {text[:40]} is too large to represent (it would become infinity)")
    return value


_STRICT_DECODER = json.JSONDecoder(
    object_pairs_hook=no_duplicate_keys, parse_constant=reject_constant, parse_float=finite_float
)
"""Shared, as json.loads shares its default decoder: the scanner keeps no state between calls."""


# A JSON \u escape of a UTF-16 surrogate: text read from a file can only hold a lone surrogate
# through one. Text handed over as ``str`` (a judge's reply, decoded by the HTTP client) may
# also hold the code point itself.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_SURROGATE = re.compile("[\ud800-\udfff]")


def has_lone_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def check_tree(value: Any, *, max_depth: int = MAX_DEPTH, surrogates: bool = True) -> None:
    """ValueError when ``value`` nests deeper than ``max_depth`` or, with ``surrogates``, holds a
    string (or key) with a lone surrogate. Iterative: a deep value cannot exhaust the stack."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            if depth >= max_depth:
                raise ValueError(f"nested more than {max_depth} levels deep")
            for key, item in node.items():
                if surrogates and isinstance(key, str) and has_lone_surrogate(key):
                    raise ValueError(f"the key {key!r} holds a lone surrogate (a cut character), which is not text")
                stack.append((item, depth + 1))
        elif isinstance(node, list):
            if depth >= max_depth:
                raise ValueError(f"nested more than {max_depth} levels deep")
            stack.extend((item, depth + 1) for item in node)
        elif surrogates and isinstance(node, str) and has_lone_surrogate(node):
            raise ValueError(f"the string {node[:60]!r} holds a lone surrogate (a cut character), which is not text")


def _check_depth(value: Any, max_depth: int) -> None:
    """``check_tree(value, max_depth=max_depth, surrogates=False)`` for a value fresh from a
    parser (``json.loads`` or jiter: plain dicts and lists): the same refusal, one level at a
    time over the containers alone, so a long document whose scalars are most of it is walked
    quickly."""
    level = [value] if type(value) is dict or type(value) is list else []
    depth = 0
    while level:
        if depth >= max_depth:
            raise ValueError(f"nested more than {max_depth} levels deep")
        below = []
        for node in level:
            for item in node.values() if type(node) is dict else node:
                if type(item) is dict or type(item) is list:
                    below.append(item)
        level = below
        depth += 1


def plain_error(exc: ValueError) -> str:
    """Python's message for an integer past its digit limit advises a Python setting: say what
    is wrong with the input instead."""
    if "integer string conversion" in str(exc):
        return f"an integer with more than {sys.get_int_max_str_digits()} digits is too large to read"
    return str(exc)


def strict_json_loads(text: str | bytes, *, max_depth: int = MAX_DEPTH) -> Any:
    """json.loads that refuses (ValueError) what it would otherwise accept silently: duplicate
    keys (it keeps the last), NaN/Infinity and numbers that overflow to infinity, lone
    surrogates, and nesting deeper than ``max_depth`` (or deep enough to exhaust the stack).
    Bytes must be UTF-8 text without a byte-order mark, as a str read from a file is."""
    if isinstance(text, str):
        if len(text) > FAST_MAX_BYTES:  # its UTF-8 is no shorter: not worth a copy
            return _reference_loads(text, max_depth, decoded_utf8=False)
        try:
            raw = text.encode("utf-8")
        except UnicodeEncodeError:  # a str holding a surrogate code point: the reference says so
            return _reference_loads(text, max_depth, decoded_utf8=False)
        value = fast_json_loads(raw, max_depth)
        return _reference_loads(text, max_depth, decoded_utf8=False) if value is UNDECIDED else value
    # Bytes are UTF-8 text, as a JSON file must be (RFC 8259): json.loads would also take UTF-16
    # or a byte-order mark, and decode surrogates that no UTF-8 text can hold.
    value = fast_json_loads(text, max_depth)  # jiter accepts strict UTF-8 only
    if value is not UNDECIDED:
        return value
    try:
        decoded = text.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("not UTF-8 text") from None
    return _reference_loads(decoded, max_depth, decoded_utf8=True)


UNDECIDED: Any = object()
"""What ``fast_json_loads`` returns when only the reference parser can decide."""

# One pass of bytes.translate marks what the reference alone judges exactly. Digits and "." become
# "0", "-" stays; an exponent's "e" or "E" become "e"; both opening brackets "["; what may stand
# before a number (":", ",", whitespace) ","; anything else (quotes, punctuation) a space. The
# other letters, "+" and every non-ASCII byte are deleted in the same pass: they can be neither
# in a number nor right before one ("+" only after its exponent's "e": "1e+400" is marked
# "0e000", as "1e400" is), so the checks find every number they found before, in a text about a
# third as long. (What deleting them may join, digits and e's of a string such as a hex hash, is
# at worst taken for a number: the value is searched, or the reference reads the line.)
_SUSPECT = bytearray(b" " * 256)
_SUSPECT[ord("-")] = ord("-")
for _byte in b"0123456789.":
    _SUSPECT[_byte] = ord("0")
for _byte in b"eE":
    _SUSPECT[_byte] = ord("e")
for _byte in b":, \t\n\r":
    _SUSPECT[_byte] = ord(",")
_SUSPECT[ord("[")] = _SUSPECT[ord("{")] = ord("[")
_SUSPECT_TABLE = bytes(_SUSPECT)
_UNMARKED = bytes(byte for byte in range(256)
                  if byte >= 0x80 or byte == ord("+") or (chr(byte).isalpha() and byte not in b"eE"))
del _SUSPECT, _byte
_RUNS_TABLE = bytes(ord("r") if byte in b"0e-" else ord("x") for byte in range(256))
_LONG_DIGITS = b"0" * 200
FAST_MAX_BYTES = 2**19
"""Largest text read by jiter first (every trajectory line, verdict and record fits): beside a
larger one the checks' copy would weigh more than the time saved, so the reference reads it."""


def _marks(raw: bytes) -> bytes:
    """``raw`` marked for the checks of ``fast_json_loads`` (see ``_SUSPECT_TABLE``)."""
    return raw.translate(_SUSPECT_TABLE, _UNMARKED)


def fast_json_loads(raw: bytes, max_depth: int = MAX_DEPTH) -> Any:
    """The value ``strict_json_loads`` would give for UTF-8 ``raw``, read by jiter, or
    ``UNDECIDED`` where only the reference parser can decide.

    jiter refuses duplicate keys, NaN/Infinity, lone surrogates, invalid UTF-8, integers past
    4300 digits and nesting past 200 levels itself, and returns the same values as the reference
    (tests/test_strict_json.py compares them on generated documents). It differs in three
    places: an empty list or object 201 levels down (it accepts it), nesting limits other than
    its own (``max_depth``), and a number too large for a double (it gives infinity). One pass
    marks the text, and only a text with more brackets than ``max_depth`` can nest past it (its
    value is then measured, as the reference measures it), and only one with an exponent of
    three digits or more (``_big_exponent``) or 200 digits in a row can overflow (the first is
    searched for an infinity, the second left to the reference).
    """
    if len(raw) > FAST_MAX_BYTES:
        return UNDECIDED
    marks = _marks(raw)
    if _LONG_DIGITS in marks:
        return UNDECIDED  # before jiter parses: the reference would parse it again anyway
    try:
        value = jiter.from_json(raw, allow_inf_nan=False, catch_duplicate_keys=True)
    except ValueError:
        return UNDECIDED  # refused: the reference says why, in its own words and position
    if marks.count(b"[") > max_depth:  # a long list of small records: many brackets, rarely deep
        try:
            _check_depth(value, max_depth)
        except ValueError:
            return UNDECIDED
    if _big_exponent(marks) and not _all_finite(value):
        return UNDECIDED
    return value


def _big_exponent(marks: bytes) -> bool:
    """Whether the marked text has an exponent of three digits or more where a number can be: a
    digit, an exponent mark and three digits (an exponent always follows its mantissa's last
    digit), in a run of number marks right after ``[``, ``:``, ``,``, whitespace or the start.
    Hex text ("ab4e123" in a hash) looks like one but follows a quote (the letters before it are
    deleted); one inside a string after a space is taken for one, and the value searched."""
    at = marks.find(b"0e000")
    if at == -1:
        return False
    runs = marks.translate(_RUNS_TABLE)  # a number's marks ("0", "e", "-") become "r"
    while at != -1:
        start = runs.rfind(b"x", 0, at) + 1  # where this run of number marks begins
        if start == 0 or marks[start - 1] in b"[,":
            return True
        end = runs.find(b"x", at)  # the next search starts past this run
        if end == -1:
            return False
        at = marks.find(b"0e000", end)
    return False


def _all_finite(value: Any) -> bool:
    """Whether no float in ``value`` (fresh from a parser: dicts, lists, scalars) is infinite."""
    level = [value]
    while level:
        below = []
        for node in level:
            if type(node) is float:
                if math.isinf(node):
                    return False
            elif type(node) is dict:
                below.extend(node.values())
            elif type(node) is list:
                below.extend(node)
        level = below
    return True


def _reference_loads(text: str, max_depth: int, *, decoded_utf8: bool) -> Any:
    """``strict_json_loads`` of a str by the Python ``json`` module: the definition, and the
    parser of every text ``fast_json_loads`` leaves undecided (bytes are decoded first, as
    strict UTF-8). ``decoded_utf8``: ``text`` is a str that strict UTF-8 decoding produced,
    which cannot hold a surrogate code point (the codec refuses them), so only an escape can
    make one."""
    try:
        # What json.loads does with a str, minus building a decoder per call.
        if text.startswith("\ufeff"):
            raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
        data = _STRICT_DECODER.decode(text)
    except RecursionError:
        raise ValueError(f"nested more than {max_depth} levels deep") from None
    except ValueError as exc:
        if isinstance(exc, json.JSONDecodeError):
            raise
        raise ValueError(plain_error(exc)) from None
    raw_surrogate = False
    if not decoded_utf8 and not text.isascii():  # isascii is O(1): most text never needs the scan
        raw_surrogate = _SURROGATE.search(text) is not None
    # Cheap filters first: fewer brackets than the limit cannot nest past it, and only an
    # escape (or, in a str, the code point itself) can make a lone surrogate. (The regex finds
    # the escape faster than `"\\u" in text` would rule it out: it skips ahead by its prefix.)
    deep = text.count("[") + text.count("{") > max_depth
    surrogates = raw_surrogate or _SURROGATE_ESCAPE.search(text) is not None
    if surrogates:
        check_tree(data, max_depth=max_depth, surrogates=True)
    elif deep:  # only the depth can be wrong: the one message whichever container is found first
        _check_depth(data, max_depth)
    return data


BLANK: Any = object()
"""What ``json_line_loads`` returns for a blank line."""


def json_line_loads(raw: bytes) -> Any:
    """The strict JSON value of one line of a JSON Lines file, or ``BLANK`` for a line of
    whitespace (as ``str.isspace`` says, so Unicode spaces too). UnicodeDecodeError for a line
    that is not UTF-8, ValueError for one that is not strict JSON."""
    if raw.isspace():  # ASCII whitespace, without decoding; other blank lines are found below
        return BLANK
    value = fast_json_loads(raw)
    if value is not UNDECIDED:
        return value
    line = raw.decode("utf-8")
    if line.isspace():  # blank (as line.strip() would say, without a copy)
        return BLANK
    return _reference_loads(line, MAX_DEPTH, decoded_utf8=True)
