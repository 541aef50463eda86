"""Where a detector's finding lies in a text, and the text's JSON escapes read and mapped
back, for ``judgekit._util.secrets.find_secrets``.

``value_spans`` places a value in its window (a private key from its ``BEGIN`` line to its
``END`` line, a pattern's match to the end of its token, never across a JSON quote);
``pem_tails`` finds keys cut before their ``BEGIN`` line; ``merge_spans`` joins overlapping
spans under the most specific kind. ``unescaped`` reads JSON escapes two levels deep;
``escape_shifts`` and ``to_text`` map a position in that reading back to the text, and
``raw_quote`` finds where a JSON string ends.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator
from typing import Any

from judgekit._util.secret_candidates import line_of
from judgekit._util.secret_detectors import ENTROPY_KINDS, SPACE

_ESCAPE = re.compile(r'\\(["\\/nrtbf])')
_UNESCAPED = {'"': '"', "/": "/", "n": "\n", "r": "\r", "t": "\t", "b": "\b", "f": "\f"}  # and \\\\ -> \\
_HOLE = "\x00"  # where an escaped backslash waits while the others are read
_PEM_BLOCK = re.compile(r"-----BEGIN[A-Z0-9 ]{0,24} PRIVATE KEY(?: BLOCK)?-----.{0,20000}?"
                        r"-----END[A-Z0-9 ]{0,24} PRIVATE KEY(?: BLOCK)?-----", re.DOTALL)
_PEM_FIELD = re.compile(r"[A-Za-z][A-Za-z0-9-]*: \S.*")
_PEM_END = re.compile(r"-----END[A-Z0-9 ]{0,24} PRIVATE KEY(?: BLOCK)?-----")
_BASE64_LINE = re.compile(r"[A-Za-z0-9+/=]+")
_BASE64_TAIL = re.compile(r"[A-Za-z0-9+/=]*$")
_ESCAPE_LEVELS = 2
_TOKEN_TAIL = re.compile(r"[A-Za-z0-9+/=_.-]*")


def value_spans(view: str, kind: str, value: str, start: int, end: int, at: int | None) -> Iterator[tuple[int, int]]:
    """Where ``value`` is in the window ``view[start:end]`` (at ``start + at`` when the detector
    said): standing alone where it can, inside a longer word only where it stands nowhere alone
    (``pass`` in ``password_url``)."""
    if at is not None:
        found = [at]
    else:
        found = [m.start() for m in re.finditer(rf"(?<![A-Za-z0-9]){re.escape(value)}(?![A-Za-z0-9])",
                                                view[start:end])]
        if not found:
            where = view.find(value, start, end)
            while where >= 0:
                found.append(where - start)
                where = view.find(value, where + len(value), end)
    for offset in found:
        first, last = start + offset, start + offset + len(value)
        if kind == "Private Key":  # the detector names the header only: mask the whole block
            dashes = view.rfind("-----", max(0, first - 5), first)
            first = first if dashes < 0 else dashes
            block = _PEM_BLOCK.match(view, first)
            last = block.end() if block else _pem_body_end(view, last)
        else:
            if kind not in ENTROPY_KINDS and kind != "Secret Keyword" and kind != "Basic Auth Credentials":
                space = SPACE.search(view, first, last)  # npm's pattern runs to the end of the line
                last = last if space is None else space.start()
                # to the end of the token it starts (the JWT's signature, a longer key)
                last += len(_TOKEN_TAIL.match(view, last).group().rstrip("."))
            quote = view.find('"', first, last)
            last = last if quote < 0 else quote  # never across a quote: in JSON it may end the string
        if last > first:
            yield first, last


def _pem_body_end(view: str, at: int) -> int:
    """Where a key cut before its ``END`` line ends: the rest of its header line, then header
    fields (``Proc-Type: 4,ENCRYPTED``, PuTTY's ``Private-Lines: 14``) and base64 lines, then
    the base64 a cut line starts with."""
    end = line_of(view, at, at)[1]
    while end < len(view):
        line_start = end + 1
        line_end = line_of(view, line_start, line_start)[1]
        line = view[line_start:line_end].rstrip("\r")
        if line and (_BASE64_LINE.fullmatch(line) or _PEM_FIELD.fullmatch(line)):
            end = line_end
            continue
        lead = _BASE64_LINE.match(line)
        if lead and (lead.end() == len(line) or not line[lead.end()].isspace()):
            end = line_start + lead.end()  # the rest of a cut line, not a word of prose after the key
        break
    return end


def pem_tails(view: str) -> Iterator[tuple[int, int]]:
    """Private keys cut before their ``BEGIN`` line (an excerpt, a quote): the base64 lines
    before an ``END ... PRIVATE KEY`` line, which detect-secrets does not look at."""
    for end in _PEM_END.finditer(view):
        begin = view.rfind("-----BEGIN", max(0, end.start() - 20000), end.start())
        if begin >= 0 and _PEM_BLOCK.match(view, begin):
            continue  # a whole block: masked from its BEGIN line
        start = end.start()
        while start > 0:
            line_start = view.rfind("\n", 0, start - 1) + 1
            line = view[line_start:start].rstrip("\r\n")
            if line and _BASE64_LINE.fullmatch(line):
                start = line_start
                continue
            tail = _BASE64_TAIL.search(line).group()
            if tail and len(tail) < len(line) and line[-len(tail) - 1].isspace():
                tail = ""  # a word of prose before the key, not the rest of a cut line
            if tail:
                start = line_start + len(line) - len(tail)
            break
        yield start, end.end()


def merge_spans(spans: list[tuple[int, int, int, str]]) -> list[tuple[int, int, str]]:
    """Overlapping spans joined, each named by its most specific detector."""
    out: list[list[Any]] = []
    for start, end, priority, kind in sorted(spans, key=lambda s: (s[0], -s[1], s[2])):
        if out and start < out[-1][1]:
            last = out[-1]
            last[1] = max(last[1], end)
            if priority < last[2]:
                last[2], last[3] = priority, kind
            continue
        out.append([start, end, priority, kind])
    return [(start, end, kind) for start, end, _, kind in out]


def unescaped(text: str) -> tuple[str, list[str]]:
    """``text`` with JSON escapes read (``\\"`` -> ``"``), twice for JSON inside a JSON string,
    and the texts each reading started from (``escape_shifts`` maps positions back through them)."""
    readings: list[str] = []
    for _ in range(_ESCAPE_LEVELS):
        if "\\" not in text or _HOLE in text:
            break
        read = text.replace("\\\\", _HOLE)  # escaped backslashes first: they pair left to right
        for escape, char in _UNESCAPED.items():
            read = read.replace("\\" + escape, char)
        read = read.replace(_HOLE, "\\")
        if read == text:
            break
        readings.append(text)
        text = read
    return text, readings


def escape_shifts(readings: list[str]) -> list[list[int]]:
    """For each reading, where its escapes went in what it read to (positions there)."""
    levels = []
    for text in readings:
        levels.append([match.start() - i for i, match in enumerate(_ESCAPE.finditer(text))])
    return levels


def to_text(at: int, levels: list[list[int]]) -> int:
    """A position in the reading back in the text: each escape before it adds its backslash."""
    for shifts in reversed(levels):
        at += bisect.bisect_left(shifts, at)
    return at




def raw_quote(text: str, start: int, end: int) -> int | None:
    """The first ``"`` in ``text[start:end]`` that no backslash escapes (it may end a JSON string)."""
    at = text.find('"', start, end)
    while at >= 0:
        backslashes = 0
        while at - backslashes - 1 >= start and text[at - backslashes - 1] == "\\":
            backslashes += 1
        if backslashes % 2 == 0:
            return at
        at = text.find('"', at + 1, end)
    return None
