"""Diff path patterns: '/'-separated segments; '*' matches within one segment, '**' any rest.

Everything else matches itself.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache


def path_matches(pattern: str, path: Sequence[str | int]) -> bool:
    parts = [part for part in pattern.strip("/").split("/") if part != ""]
    segments = [str(segment) for segment in path]
    return _match(parts, segments)


def _match(parts: list[str], segments: list[str]) -> bool:
    if not parts:
        return not segments
    head, rest = parts[0], parts[1:]
    if head == "**":
        return any(_match(rest, segments[i:]) for i in range(len(segments) + 1))
    if not segments:
        return False
    return _segment_regex(head).fullmatch(segments[0]) is not None and _match(rest, segments[1:])


@lru_cache(maxsize=1024)
def _segment_regex(part: str) -> re.Pattern[str]:
    # Only '*' is a wildcard: segments are data (a composite key is '[1,"pen"]'), so '[' and
    # '?' must match themselves.
    return re.compile(".*".join(re.escape(piece) for piece in part.split("*")), re.S)


def render_path(path: Sequence[str | int]) -> str:
    return "/".join(str(segment) for segment in path)
