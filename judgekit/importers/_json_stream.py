"""A JSON document read piece by piece, for logs too big to parse whole (the Inspect importer's
``.json`` form).

``JsonCursor`` does no parsing itself: it finds where the next value ends (brackets counted
outside strings) and hands back its bytes, which the caller parses strictly on its own, so
memory holds one value at a time. What lies before the cursor is dropped as it goes (white space
included), and no value may grow past ``max_value`` bytes: the buffer never holds the file.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import IO

from judgekit.errors import InputError

_WS = re.compile(rb"[ \t\r\n]*+")
_STRING = re.compile(rb'"[^"\\]*+(?:\\.[^"\\]*+)*+"', re.DOTALL)
_SCALAR = re.compile(rb"[^\s,\]}]*+")
# Everything up to the next bracket, whole strings included (their brackets do not count).
_RUN = re.compile(rb'(?:[^"\[\]{}]++|"[^"\\]*+(?:\\.[^"\\]*+)*+")*+', re.DOTALL)


class JsonCursor:
    """A JSON document read piece by piece from ``handle`` (``src`` names it in errors):
    ``chunk`` bytes at least per read, no value longer than ``max_value`` bytes."""

    def __init__(self, handle: IO[bytes], src: Path, *, chunk: int, max_value: int):
        self.handle, self.src = handle, src
        self.chunk, self.max_value = chunk, max_value
        self.buf = bytearray()
        self.pos = 0
        self.lines_dropped = 0
        self.eof = False

    def _grow(self, start: int) -> bool:
        """Read on into the value that begins at ``start``, unless it is already too long."""
        if len(self.buf) - start > self.max_value:
            raise self.error(f"a value longer than {self.max_value} bytes")
        return self._more()

    def _more(self) -> bool:
        # As much again as is held, so that a value much longer than a chunk (a logged image)
        # is rescanned a few times, not once per chunk.
        chunk = b"" if self.eof else self.handle.read(max(self.chunk, len(self.buf)))
        self.eof = not chunk
        self.buf += chunk
        return bool(chunk)

    def line(self, at: int | None = None) -> int:
        return self.lines_dropped + self.buf.count(b"\n", 0, self.pos if at is None else at) + 1

    def error(self, message: str) -> InputError:
        return InputError(f"invalid JSON: {message}", self.src, self.line())

    def drop(self) -> None:
        """Forget the bytes before the cursor (their lines are still counted)."""
        self.lines_dropped += self.buf.count(b"\n", 0, self.pos)
        del self.buf[: self.pos]
        self.pos = 0

    def peek(self) -> int | None:
        """The next byte after white space (None at the end of the file)."""
        while True:
            self.pos = _WS.match(self.buf, self.pos).end()
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            self.drop()  # all white space: none of it is needed again
            if not self._more():
                return None

    def expect(self, allowed: bytes) -> int:
        byte = self.peek()
        if byte is None or byte not in allowed:
            found = "the end of the file" if byte is None else repr(chr(byte))
            raise self.error(f"expected {' or '.join(repr(chr(b)) for b in allowed)}, found {found}")
        self.pos += 1
        return byte

    def value(self) -> tuple[bytes, int]:
        """The next value's bytes and the line it starts on."""
        if self.peek() is None:
            raise self.error("the file ends where a value should be")
        start, line = self.pos, self.line()
        first = self.buf[start]
        if first in b"{[":
            end = self._container_end(start)
        else:
            end = self._token_end(start, _STRING if first == ord('"') else _SCALAR)
        if end - start > self.max_value:
            raise self.error(f"a value longer than {self.max_value} bytes")
        self.pos = end
        return bytes(self.buf[start:end]), line

    def _token_end(self, start: int, pattern: re.Pattern[bytes]) -> int:
        while True:
            match = pattern.match(self.buf, start)
            if match and (match.end() < len(self.buf) or self.eof):
                return match.end()
            if not self._grow(start) and not match:
                raise self.error("the file ends inside a string")

    def _container_end(self, start: int) -> int:
        depth, at = 0, start
        while True:
            at = _RUN.match(self.buf, at).end()
            if at == len(self.buf) or self.buf[at] == ord('"'):  # cut short: a string or run goes on
                if not self._grow(start):
                    raise self.error("the file ends inside a value")
                continue
            depth += 1 if self.buf[at] in b"{[" else -1
            at += 1
            if depth == 0:
                return at
