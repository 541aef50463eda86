"""Diff path patterns: '/'-separated segments; '*' matches within one segment, '**' any rest.

Everything else matches itself. Patterns come from rubrics and paths from agent data, so the
matcher is linear-time per attempt rather than a backtracking regex: a pattern such as
``*a*a*a*a*a*b`` on a long segment, or a chain of ``**``, stays cheap.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache


def path_matches(pattern: str, path: Sequence[str | int]) -> bool:
    parts = _parts(pattern)
    segments = [str(segment) for segment in path]
    # reachable[j]: the parts matched so far can end just before segment j.
    reachable = [True] + [False] * len(segments)
    for part in parts:
        if part == "**":  # any rest: from the first reachable position on, everything is
            first = next((j for j, ok in enumerate(reachable) if ok), None)
            if first is None:
                return False
            reachable = [j >= first for j in range(len(segments) + 1)]
            continue
        pieces = _pieces(part)
        reachable = [False] + [reachable[j] and _segment_matches(pieces, segments[j]) for j in range(len(segments))]
        if not any(reachable):
            return False
    return reachable[-1]


@lru_cache(maxsize=1024)
def _parts(pattern: str) -> tuple[str, ...]:
    return tuple(part for part in pattern.strip("/").split("/") if part != "")


@lru_cache(maxsize=1024)
def _pieces(part: str) -> tuple[str, ...]:
    return tuple(part.split("*"))


def _segment_matches(pieces: tuple[str, ...], segment: str) -> bool:
    """A glob with '*' only (``pieces`` = the pattern split on '*') against one segment.

    Segments are data (a composite key is '[1,"pen"]'), so '[' and '?' are plain characters.
    The first piece anchors the start, the last the end, and each middle piece is taken at its
    leftmost place after the previous one; for '*'-only globs that greedy choice is exact.
    """
    if len(pieces) == 1:
        return segment == pieces[0]
    head, *middle, tail = pieces
    if len(segment) < len(head) + len(tail) or not segment.startswith(head) or not segment.endswith(tail):
        return False
    position, end = len(head), len(segment) - len(tail)
    for piece in middle:
        found = segment.find(piece, position, end)
        if found < 0:
            return False
        position = found + len(piece)
    return True



