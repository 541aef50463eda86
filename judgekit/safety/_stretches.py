"""Stretches of one text copied from others: where a query holds text from a tool result.

``shared_stretches(text, sources)`` finds the maximal stretches of ``text`` (case aside) that
also appear in one of ``sources``, longest first. The work is linear: a suffix automaton of
``text`` (built once) is walked over each source, and only over the regions of a source where
every window of ``min_chars`` is also a window of ``text`` (a set lookup per position: most of a
tool result shares nothing with a query and is passed over at that cost).
"""

from __future__ import annotations

from collections.abc import Iterable


def fold(text: str) -> str:
    """``text`` lower-cased character by character: the same length, so positions still hold
    (``str.lower`` turns a few characters into two, ``İ`` among them; those stay as they are)."""
    low = text.lower()
    if len(low) == len(text):  # lower() never shortens: the same length means no character grew
        return low
    return "".join(c if len(c.lower()) != 1 else c.lower() for c in text)


class _Automaton:
    """The suffix automaton of one text: every substring of it is a path from state 0.

    ``end[v]``: where the first occurrence of the strings of state ``v`` ends in the text."""

    def __init__(self, text: str):
        nxt: list[dict[str, int]] = [{}]
        link, length, end = [-1], [0], [-1]
        last = 0
        for i, ch in enumerate(text):
            cur = len(length)
            nxt.append({})
            length.append(length[last] + 1)
            link.append(0)
            end.append(i)
            p = last
            while p != -1 and ch not in nxt[p]:
                nxt[p][ch] = cur
                p = link[p]
            if p != -1:
                q = nxt[p][ch]
                if length[p] + 1 == length[q]:
                    link[cur] = q
                else:
                    clone = len(length)
                    nxt.append(dict(nxt[q]))
                    length.append(length[p] + 1)
                    link.append(link[q])
                    end.append(end[q])
                    while p != -1 and nxt[p].get(ch) == q:
                        nxt[p][ch] = clone
                        p = link[p]
                    link[q] = clone
                    link[cur] = clone
            last = cur
        self.nxt, self.link, self.length, self.end = nxt, link, length, end

    def matches(self, region: str, min_chars: int) -> Iterable[tuple[int, int]]:
        """(start, end) in the automaton's text of each maximal match of ``region`` of at
        least ``min_chars`` (its first occurrence there)."""
        nxt, link, length, end = self.nxt, self.link, self.length, self.end
        v = size = 0
        for ch in region:
            step = nxt[v].get(ch)
            if step is None:
                if size >= min_chars:
                    yield end[v] - size + 1, end[v] + 1
                while v and ch not in nxt[v]:
                    v = link[v]
                    size = length[v]
                step = nxt[v].get(ch)
                if step is None:
                    v = size = 0
                    continue
            v, size = step, size + 1
        if size >= min_chars:
            yield end[v] - size + 1, end[v] + 1


def shared_stretches(text: str, sources: Iterable[str], *, min_chars: int = 6, limit: int = 8,
                     excluded: Iterable[str] = ()) -> list[tuple[int, int]]:
    """The longest stretches of ``text`` (start, end), at least ``min_chars`` long, that one of
    ``sources`` holds, case aside: longest first, none overlapping another, ``limit`` at most.

    A stretch that one of ``excluded`` also holds is left out (text the agent itself wrote, which
    a tool may have echoed); at most ``4 * limit`` stretches are looked up there. Linear in the
    lengths of ``text``, of the sources and of ``excluded``."""
    if len(text) < min_chars:
        return []
    folded = fold(text)
    windows = {folded[i:i + min_chars] for i in range(len(folded) - min_chars + 1)}
    automaton: _Automaton | None = None
    found: set[tuple[int, int]] = set()
    for source in sources:
        source = fold(source)
        runs = _runs(source, windows, min_chars)
        if runs and automaton is None:
            automaton = _Automaton(folded)
        for start, stop in runs:
            found.update(automaton.matches(source[start:stop], min_chars))
    if not found:
        return []
    excluded = [fold(e) for e in excluded]
    kept: list[tuple[int, int]] = []
    searched = 0  # each search reads the excluded texts: a few, not one per stretch found
    for start, end in sorted(found, key=lambda s: (s[0] - s[1], s[0])):
        if len(kept) >= limit or searched > 4 * limit:
            break
        if any(start < e and s < end for s, e in kept):
            continue
        if excluded:
            searched += 1
            if any(folded[start:end] in e for e in excluded):
                continue
        kept.append((start, end))
    return kept


def _runs(source: str, windows: set[str], size: int) -> list[tuple[int, int]]:
    """The regions of ``source`` made of windows that are all in ``windows`` (a match of at
    least ``size`` lies in one of them)."""
    runs: list[tuple[int, int]] = []
    start = -1
    for i in range(len(source) - size + 1):
        if source[i:i + size] in windows:
            if start < 0:
                start = i
        elif start >= 0:
            runs.append((start, i - 1 + size))
            start = -1
    if start >= 0:
        runs.append((start, len(source)))
    return runs
