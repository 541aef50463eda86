"""The untrusted texts a trajectory holds, as every detector reads them.

A ``Source`` is a context item not listed as trusted, or a call's result (its error), with the
first call that could read it; its text is rendered once and kept in each form a detector
compares (``judgekit.safety.normal``). ``json_strings`` and ``leaves`` walk a JSON value's strings.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from pydantic_core import to_json

from judgekit.prompt import RESULT_MAX_CHARS, sent_text
from judgekit.safety.normal import normal, plain, skeleton
from judgekit.trajectory import Call


def json_strings(value: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """Every string in a JSON value, with its path (``to``, ``items[0].name``)."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from json_strings(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from json_strings(item, f"{path}[{i}]")


INDEX = re.compile(r"\[\d+\]")


def leaves(value: Any) -> Iterator[str]:
    """Every string in a JSON value (a schema's const and enum values, an argument's values)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from leaves(item)
    elif isinstance(value, list):
        for item in value:
            yield from leaves(item)


@dataclass
class Source:
    """A piece of untrusted text: where it was, what it said, and the first call that could read it.

    A call's result is rendered as text when first read (``could_instruct``, which most results
    fail: structured data no pattern can match)."""

    where: str
    given: str | None
    readable_from: int
    call: Call | None = None
    """The call this is the result of, if any."""
    boundary: int | None = None
    """Two texts read as one (``_joins``): where the second starts."""

    @cached_property
    def text(self) -> str:
        return self.given if self.given is not None else _result_text(self.call)

    @cached_property
    def normal(self) -> str:
        """The text in the form every detector compares (``judgekit.safety.normal``), made once
        (two texts read as one are joined from their normal forms already)."""
        return self.text if self.boundary is not None else normal(self.text)

    @cached_property
    def plain(self) -> str:
        """The text in the case-keeping form secrets are looked for in (``judgekit.safety.normal.plain``)."""
        return plain(self.text)

    @cached_property
    def skeleton(self) -> str:
        return skeleton(self.text)

    @property
    def is_text(self) -> bool:
        """Whether the source is text (a context item, a result or error in words), not data."""
        return self.given is not None or self.call is None or self.call.error is not None \
            or isinstance(self.call.result, str)

    @cached_property
    def prose(self) -> bool:
        """Whether the text could hold an instruction a built-in pattern matches (``_may_hold_prose``)."""
        return _may_hold_prose(self.normal)

    def could_instruct(self, canaries: list[str]) -> bool:
        """Whether the text could hold a canary or an instruction a built-in pattern matches."""
        return self.prose or any(skeleton(c) in self.skeleton for c in canaries)

    @cached_property
    def strings(self) -> list[str]:
        """The text's strings as the tool gave them (a structured result's values, decoded, not
        its JSON rendering): what an agent copies into a query."""
        if self.is_text:
            return [self.text]
        return [text for text in leaves(self.call.result) if text]

    @property
    def echoes(self) -> str:
        """What the agent sent to the call this is the result of (a tool that repeats its input);
        rendered only when asked (only the SQL detector asks)."""
        return sent_text(self.call) if self.call is not None else ""

    @property
    def shown(self) -> str:
        """The text as a judge is shown it: cut like a tool result in the judge prompt."""
        if len(self.text) <= RESULT_MAX_CHARS:
            return self.text
        return self.text[:RESULT_MAX_CHARS] + f" [cut: {len(self.text) - RESULT_MAX_CHARS} more chars]"


def _may_hold_prose(text: str) -> bool:
    """Whether ``text`` could hold an instruction a built-in pattern matches: every one needs
    two words apart, or a role token (``<|``, ``[INST]``). A structured result is rendered as
    compact JSON (``_result_text``), where a space can only be inside a string, so data with
    no spaced value is passed over at once (most tool results: 80% of tau-bench's)."""
    return " " in text or "\t" in text or "\n" in text or "<|" in text or "[INST]" in text or "[inst]" in text


def _result_text(call: Call) -> str:
    """A call's whole result (or error); a structured one as compact JSON (no space but inside
    its strings: see ``_may_hold_prose``)."""
    if call.error is not None:
        return f"error: {call.error}"
    if isinstance(call.result, str):
        return call.result
    # Keys as the tool gave them; pydantic-core writes what json.dumps(ensure_ascii=False,
    # separators=(",", ":")) writes, five times faster (every result of a suite is rendered).
    return to_json(call.result).decode()
