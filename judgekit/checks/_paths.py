"""Diff path patterns: '/'-separated segments, '*' matches one segment, '**' any rest."""

from __future__ import annotations

from collections.abc import Sequence
from fnmatch import fnmatchcase


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
    return fnmatchcase(segments[0], head) and _match(rest, segments[1:])


def render_path(path: Sequence[str | int]) -> str:
    return "/".join(str(segment) for segment in path)
