"""Rubric regular expressions, matched against agent data within a time bound.

A pattern comes from a rubric (a pull request may bring it) and is matched against what an
agent wrote; a pattern that backtracks catastrophically (``(a|aa)+$``) would hang the run.
Patterns are compiled and matched with the ``regex`` package, whose matcher takes a timeout,
in its re-compatible mode: a match that runs past ``TIMEOUT_S`` raises ``RegexTimeout``, which
makes that check an error of its axis (never a pass or a fail).

One check may match many values (a predicate over every record, a schema over every item or
key of an argument), and how many is up to the agent's data: 0.4 s per value under the bound
would still be minutes over a thousand values. So a check runs inside ``check_budget()``, and
all its matches together may take at most ``CHECK_BUDGET_S``. Work that is not a match but
grows with the data the same way (a recursive schema with ``anyOf`` validates a nested value
in time exponential in its depth) calls ``spend()`` to stop at the same deadline with
``CheckTimeout``.
"""

from __future__ import annotations

import re
import time
from contextvars import ContextVar
from functools import lru_cache

import regex

from judgekit.errors import InputError

try:  # Python's own regular-expression parser, to measure a pattern before regex compiles it
    from re import _constants as _sre_constants, _parser as _sre_parser
except ImportError:  # Python < 3.11
    import sre_constants as _sre_constants  # type: ignore[no-redef]
    import sre_parse as _sre_parser  # type: ignore[no-redef]

TIMEOUT_S = 0.5
"""Longest one match may take. Patterns that fit their data answer in microseconds."""
CHECK_BUDGET_S = 2.0
"""Longest all the matches of one check may take together (a simple pattern over 100,000
records takes about 0.1 s)."""

_budget: ContextVar[tuple[float, float] | None] = ContextVar("judgekit_regex_budget", default=None)
"""(monotonic end, seconds granted) of the check running in this context, if any."""


class check_budget:  # used as a function, like contextlib.suppress
    """Bound the total time of the matches made inside (a nested budget keeps the outer one).

    A class rather than a generator: every trajectory's argument checks enter one, and this
    enters and leaves in a third of the time."""

    __slots__ = ("_seconds", "_token")

    def __init__(self, seconds: float = CHECK_BUDGET_S):
        self._seconds = seconds

    def __enter__(self) -> None:
        self._token = _budget.set(_budget.get() or (time.monotonic() + self._seconds, self._seconds))

    def __exit__(self, *exc_info: object) -> None:
        _budget.reset(self._token)


class CheckTimeout(InputError):
    """A check ran past its time budget on the data it was applied to: that check's axis is an
    error, never a pass or a fail."""


class RegexTimeout(CheckTimeout):
    """A rubric pattern took longer than ``TIMEOUT_S`` on a value, or the check's matches took
    longer than its budget together."""


def spend(what: str) -> None:
    """CheckTimeout when the budget of the check running in this context is spent."""
    budget = _budget.get()
    if budget is not None and time.monotonic() > budget[0]:
        # Where the deadline is noticed (here, or in a match) is up to the clock: one condition, one wording.
        raise CheckTimeout(f"{what}: took more than {budget[1]:g} s in all over this check's values (a pattern "
                           "that backtracks, or a schema whose work grows with the data, such as anyOf over a "
                           "recursive $ref?): simplify it")


MAX_REPEAT_PRODUCT = 100_000
"""Most times nested counted repeats may multiply out (``(a{1000}){1000}`` is 1,000,000)."""


def check_pattern(pattern: str) -> None:
    """ValueError when ``pattern`` is not a valid regular expression (for Python's ``re`` and
    for the matcher alike), or one that the matcher could not compile in bounded time.

    ``regex`` unrolls counted repeats when it compiles: ``(((a{50}){50}){50}){50}`` takes
    seconds and one more level minutes, before any time bound applies. The product of nested
    repeat counts is measured on Python's own parse first and bounded by MAX_REPEAT_PRODUCT.
    """
    try:
        re.compile(pattern)
        weight = _repeat_product(_sre_parser.parse(pattern))
    except re.error as exc:
        raise ValueError(f"invalid regular expression: {exc}") from None
    except OverflowError as exc:  # x{4294967295}
        raise ValueError(f"invalid regular expression: {exc}") from None
    except RecursionError:
        raise ValueError("invalid regular expression: groups nested too deeply") from None
    if weight > MAX_REPEAT_PRODUCT:
        raise ValueError(f"regular expression repeats multiply out to {weight} (nested counted repeats such as "
                         f"(a{{1000}}){{1000}}); at most {MAX_REPEAT_PRODUCT} are allowed: use + or * instead")
    try:
        _compiled(pattern)
    except (regex.error, RecursionError, OverflowError, KeyError) as exc:  # regex raises KeyError for (?V1)
        raise ValueError(f"invalid regular expression: {exc}") from None


_REPEATS = (_sre_constants.MAX_REPEAT, _sre_constants.MIN_REPEAT, getattr(_sre_constants, "POSSESSIVE_REPEAT", None))


def _repeat_product(sub) -> int:
    """The largest product of counted-repeat bounds along any nesting of ``sub``'s parse."""
    best = 1
    for op, av in sub.data:
        if op in _REPEATS:
            low, high, inner = av
            count = high if high != _sre_constants.MAXREPEAT else low
            best = max(best, max(count, 1) * _repeat_product(inner))
        else:
            best = max(best, max((_repeat_product(child) for child in _subpatterns(av)), default=1))
    return best


def _subpatterns(av):
    if isinstance(av, _sre_parser.SubPattern):
        yield av
    elif isinstance(av, (list, tuple)):
        for item in av:
            yield from _subpatterns(item)


@lru_cache(maxsize=4096)
def _compiled(pattern: str) -> regex.Pattern:
    return regex.compile(pattern, regex.VERSION0)


def _run(method: str, pattern: str, text: str, what: str) -> bool:
    timeout, budget = TIMEOUT_S, _budget.get()
    if budget is not None:
        timeout = min(timeout, budget[0] - time.monotonic())
    try:
        if timeout <= 0:
            raise TimeoutError
        return getattr(_compiled(pattern), method)(text, timeout=timeout) is not None
    except TimeoutError:
        if budget is not None and timeout < TIMEOUT_S:
            raise RegexTimeout(
                f"{what}: matching the pattern /{pattern[:80]}/ took more than {budget[1]:g} s in all over "
                "this check's values (catastrophic backtracking?): simplify the pattern"
            ) from None
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
