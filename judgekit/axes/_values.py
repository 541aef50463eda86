"""Argument values as tool correctness compares them: JSON equality with an expectation's rules
(``tolerance``, ``normalize``, ``unordered``), as ``judgekit.axes.arguments`` states them, and
``ValueMatcher``, one compiled ``values.NAME`` expectation.

A value matcher without tolerance compares hashable keys (``value_key``): one set lookup among
the acceptable values. With a tolerance, arrays taken as multisets are paired by a perfect
bipartite matching (``_all_paired``). Long work looks at the check's time budget
(``judgekit.rubric.regex.spend``)."""

from __future__ import annotations

import json
import re
import string
import unicodedata
from collections import Counter
from collections.abc import Callable
from fractions import Fraction
from typing import Any

from judgekit.rubric.model import ArgumentValue
from judgekit.rubric.regex import spend

# --- strings -------------------------------------------------------------------------------------

_ASCII_PUNCTUATION = {ord(c): None for c in string.punctuation if unicodedata.category(c).startswith("P")}
_WHITESPACE = re.compile(r"\s+")


_CHUNK = 1 << 20
"""Characters looked up between two looks at the check's time budget (about a quarter second)."""


def _remove_punctuation(text: str) -> str:
    if text.isascii():
        return text.translate(_ASCII_PUNCTUATION)
    kept = []
    for start in range(0, len(text), _CHUNK):  # a category lookup per character: slow, so bounded
        spend("argument value")
        kept.append("".join(c for c in text[start:start + _CHUNK] if not unicodedata.category(c).startswith("P")))
    return "".join(kept)


STEPS: dict[str, Callable[[str], str]] = {  # in the order they apply: judgekit.rubric.model.NORMALIZATIONS
    "casefold": str.casefold,
    "remove_punctuation": _remove_punctuation,
    "remove_whitespace": lambda text: "".join(text.split()),
    "collapse_whitespace": lambda text: _WHITESPACE.sub(" ", text),
    "strip": str.strip,
}


def _same(text: str) -> str:
    return text


def text_rule(names: list[str]) -> Callable[[str], str]:
    """The normalisation of strings that ``names`` ask for, applied in the fixed order."""
    steps = [step for name, step in STEPS.items() if name in names]
    if not steps:
        return _same

    def normalise(text: str) -> str:
        for step in steps:
            text = step(text)
        return text

    return normalise


# --- values --------------------------------------------------------------------------------------


def value_key(value: Any, text: Callable[[str], str] = _same, unordered: bool = False) -> Any:
    """A hashable stand-in for ``value``: two values have equal keys exactly when they are equal
    under JSON equality with ``text`` applied to strings and, if ``unordered``, arrays taken as
    multisets. (An integral float keys as the int it equals, so 1 and 1.0 key alike.)"""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, str):
        return ("str", text(value))
    if isinstance(value, float):
        return ("num", int(value) if value.is_integer() else value)
    if isinstance(value, int):
        return ("num", value)
    if isinstance(value, list):
        items = [value_key(item, text, unordered) for item in value]
        return ("bag", frozenset(Counter(items).items())) if unordered else ("list", tuple(items))
    if isinstance(value, dict):
        return ("object", frozenset((name, value_key(item, text, unordered)) for name, item in value.items()))
    return ("null",) if value is None else ("other", value)


def _normalised(value: Any, text: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return text(value)
    if isinstance(value, list):
        return [_normalised(item, text) for item in value]
    if isinstance(value, dict):
        return {name: _normalised(item, text) for name, item in value.items()}
    return value


def _numbers_close(a: int | float, b: int | float, tolerance: float) -> bool:
    if a == b:  # exactly, as JSON equality: an int minus a float is rounded to a float
        return True
    try:
        return tolerance > 0 and abs(a - b) <= tolerance
    except OverflowError:  # an int past float range against a float: exactly, in fractions
        return abs(Fraction(a) - Fraction(b)) <= tolerance


def close(a: Any, b: Any, tolerance: float, text: Callable[[str], str], unordered: bool) -> bool:
    """Whether ``a`` equals ``b`` (already normalised) with numbers within ``tolerance``."""
    spend("argument value")
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return _numbers_close(a, b, tolerance)
    if isinstance(a, str) and isinstance(b, str):
        return text(a) == b
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return False
        if unordered:
            return _all_paired(a, b, lambda x, y: close(x, y, tolerance, text, unordered), text)
        return all(close(x, y, tolerance, text, unordered) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(close(a[k], b[k], tolerance, text, unordered) for k in a)
    return a is None and b is None


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _all_paired(a: list[Any], b: list[Any], equal: Callable[[Any, Any], bool], text: Callable[[str], str]) -> bool:
    """Whether every item of ``a`` can be paired with its own equal item of ``b`` (a perfect
    bipartite matching: "equal within a tolerance" is not transitive, so pairing greedily could
    miss one). Cheap cases first: equal in the order given, or the same items exactly; numbers
    pair in sorted order (if any pairing works, the sorted one does: swap two crossed pairs);
    then augmenting paths, with the copies of an item of ``b`` one node."""
    if all(map(equal, a, b)):
        return True
    if len(a) < 2:
        return False
    keys_a = [value_key(x, text, True) for x in a]
    keys_b = [value_key(y, text, True) for y in b]
    if Counter(keys_a) == Counter(keys_b):
        return True
    if all(map(_is_number, a)) and all(map(_is_number, b)):
        return all(map(equal, sorted(a), sorted(b)))
    return _matched(a, keys_a, b, keys_b, equal)


def _matched(a: list[Any], keys_a: list[Any], b: list[Any], keys_b: list[Any],
             equal: Callable[[Any, Any], bool]) -> bool:
    """Kuhn's augmenting paths from each item of ``a`` to the distinct items of ``b``: items with
    equal keys are interchangeable, so the copies of one are a group with room for each, and a
    pair of distinct items is compared once, when first needed. Time grows with the distinct
    items, not with their copies."""
    group_of: dict[Any, int] = {}
    items: list[Any] = []
    room: list[int] = []
    for item, key in zip(b, keys_b):
        if key not in group_of:
            group_of[key] = len(items)
            items.append(item)
            room.append(0)
        room[group_of[key]] += 1
    kind_of: dict[Any, int] = {}
    kinds = [kind_of.setdefault(key, len(kind_of)) for key in keys_a]
    known: dict[tuple[int, int], bool] = {}  # (kind of an item of a, group of b) -> equal
    owners: list[list[int]] = [[] for _ in items]
    free = dict.fromkeys(range(len(items)))  # the groups with room left, in order

    def pairs(i: int, g: int) -> bool:
        if (kinds[i], g) not in known:
            known[kinds[i], g] = equal(a[i], items[g])
        return known[kinds[i], g]

    def place(i: int, seen: set[int]) -> bool:
        spend("argument value")
        for g in free:  # a copy left first: no path to follow (a group in ``seen`` is full)
            if pairs(i, g):
                owners[g].append(i)
                if len(owners[g]) == room[g]:
                    del free[g]
                return True
        for g in range(len(items)):
            if g in seen or g in free or not pairs(i, g):
                continue
            seen.add(g)
            for slot, held in enumerate(owners[g]):
                if place(held, seen):
                    owners[g][slot] = i
                    return True
        return False

    return all(place(i, set()) for i in range(len(a)))


def _shown(value: Any, limit: int = 80) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class ValueMatcher:
    """One compiled ``ArgumentValue``: ``check(value) -> (acceptable, pinned exactly)``."""

    def __init__(self, expectation: ArgumentValue):
        acceptable = expectation.acceptable()
        self.optional = expectation.optional
        self._tolerance = expectation.tolerance
        self._text = text_rule(expectation.normalize)
        self._unordered = expectation.unordered
        self.accepts_any = not acceptable  # optional only: any value given is fine
        self._plain = self._text is _same and not self._unordered and self._tolerance is None
        self._exact = {value_key(value) for value in acceptable}
        if self._tolerance is None:
            self._keys = {value_key(value, self._text, self._unordered) for value in acceptable}
        else:
            self._values = [_normalised(value, self._text) for value in acceptable]
        self._expected = self._describe(acceptable, expectation)

    @staticmethod
    def _describe(acceptable: list[Any], expectation: ArgumentValue) -> str:
        if len(acceptable) == 1:
            text = _shown(acceptable[0])
        else:
            shown = ", ".join(_shown(value, 40) for value in acceptable[:5])
            text = f"one of {shown}" + (f" (and {len(acceptable) - 5} more)" if len(acceptable) > 5 else "")
        rules = list(expectation.normalize)
        if expectation.tolerance is not None:
            rules.append(f"numbers within {expectation.tolerance:g}")
        if expectation.unordered:
            rules.append("lists in any order")
        return text + (f" (compared with {', '.join(rules)})" if rules else "")

    def check(self, value: Any) -> tuple[bool, bool]:
        if self.accepts_any:
            return True, False
        if self._tolerance is None:
            spend("argument value")
            ok = value_key(value, self._text, self._unordered) in self._keys
        else:
            ok = any(close(value, b, self._tolerance, self._text, self._unordered) for b in self._values)
        if not ok:
            return False, False
        return True, self._plain or value_key(value) in self._exact

    def mismatch(self, value: Any) -> str:
        return f"value {_shown(value)} is not {self._expected}"
