"""Rubric regular expressions, matched against agent data within a time bound.

A pattern comes from a rubric (a pull request may bring it) and is matched against what an
agent wrote; a pattern that backtracks catastrophically (``(a|aa)+$``) would hang the run.
Patterns are compiled and matched with the ``regex`` package, whose matcher takes a timeout,
in its re-compatible mode: a match that runs past ``TIMEOUT_S`` raises ``RegexTimeout``, which
makes that check an error of its axis (never a pass or a fail).
"""

from __future__ import annotations

import re
from functools import lru_cache

import regex

from judgekit.errors import InputError

TIMEOUT_S = 0.5
"""Longest one match may take. Patterns that fit their data answer in microseconds."""


class RegexTimeout(InputError):
    """A rubric pattern took longer than ``TIMEOUT_S`` on the data it was matched against."""


def check_pattern(pattern: str) -> None:
    """ValueError when ``pattern`` is not a valid regular expression (for Python's ``re`` and
    for the matcher alike)."""
    try:
        re.compile(pattern)
        _compiled(pattern)
    except (re.error, regex.error) as exc:
        raise ValueError(f"invalid regular expression: {exc}") from None


@lru_cache(maxsize=4096)
def _compiled(pattern: str) -> regex.Pattern:
    return regex.compile(pattern, regex.VERSION0)


def _run(method: str, pattern: str, text: str, what: str) -> bool:
    try:
        return getattr(_compiled(pattern), method)(text, timeout=TIMEOUT_S) is not None
    except TimeoutError:
        raise RegexTimeout(
            f"{what}: the pattern /{pattern[:80]}/ took more than {TIMEOUT_S:g} s on a {len(text)}-character "
            "value (catastrophic backtracking?): simplify the pattern"
        ) from None


def fullmatch(pattern: str, text: str, *, what: str = "pattern") -> bool:
    """Whether ``pattern`` matches the whole of ``text``; RegexTimeout past the time bound."""
    return _run("fullmatch", pattern, text, what)


def search(pattern: str, text: str, *, what: str = "pattern") -> bool:
    """Whether ``pattern`` matches somewhere in ``text`` (JSON Schema's ``pattern``)."""
    return _run("search", pattern, text, what)
