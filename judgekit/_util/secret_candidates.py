"""The prefilter of ``judgekit._util.secrets.find_secrets``: where in a text a secret could be.

A candidate is a run of 16+ key-like characters holding a letter and a digit (not a UUID, a slug
of short parts, nor a digest no secret word names), a word of detect-secrets' keyword list, a
``BEGIN``/``END ... PRIVATE KEY`` line or ``://user:pass@``. ``may_hold_secrets`` says in a few
microseconds whether a text holds any candidate or a shape's prefix
(``judgekit._util.secret_shapes``); ``find_candidates`` lists them, and ``windows`` and
``word_windows`` the stretches around them that the detectors read (``judgekit._util.secrets``
says why).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from judgekit._util.secret_shapes import may_hold_a_shape

# The prefilter: a candidate is a run of 16+ key-like characters, a word of the keyword
# detector's list (api_key, password, secret, ...), a PEM header, or URL credentials.
_KEY_LIKE = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=_-"
_KEY_LIKE_TO_A = bytes.maketrans(_KEY_LIKE.encode(), b"a" * len(_KEY_LIKE))  # the rest stays: never "a"
_RUN = "a" * 16
_TOKEN = re.compile(r"[A-Za-z0-9+/=_-]{16,}")
_NOT_KEY_LIKE = re.compile(r"[^a]")
# detect-secrets' keyword DENYLIST (lower case: matched in the lowered text), found from its literals
_WORD = re.compile(r"(?:api|auth|service|account|db|database|priv|private|client)_?key|(?:db|database|key)_?pass"
                   r"|password|passwd|pwd|secret|contrase(?:ñ|n)a")
_KEY_WORDS = ("api", "auth", "service", "account", "db", "database", "priv", "private", "client")
_WORD_LITERALS = (  # (literal, what may come before it, what may start at it); None: anything
    ("key", _KEY_WORDS + tuple(w + "_" for w in _KEY_WORDS), ()),
    ("pass", ("db", "database", "key", "db_", "database_", "key_"), ("password", "passwd")),
    ("pwd", None, ()), ("secret", None, ()), ("contrase", None, ()),
)
_PEM = re.compile(r"(?:BEGIN|END)[A-Z0-9 ]{0,24} PRIVATE KEY|PuTTY-User-Key-File-2")
_URL = re.compile(r"://[^\s/:@]+:[^\s/@]+@")
_DIGIT = re.compile(r"[0-9]")
_LETTER = re.compile(r"[A-Za-z]")
DIGEST = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
# A slug of words and short parts ("judge-2024-08-06", "certificate_4856383") is a name, not a key.
_SLUG = re.compile(r"(?:[a-z]+|[a-z0-9]{1,8})(?:[-_./](?:[a-z]+|[a-z0-9]{1,8}))+")
# What names a secret just before a digest-shaped hex string ("key", cache_key, sha256 do not:
# judgekit's cache envelope, records and history hold those).
SECRET_WORD = re.compile(r"(?i)(?:api|access|secret|private|priv|auth|client|signing|master|encryption)[_-]?key"
                          r"|pass|pwd|token|secret|auth|credential|private|session")
_BEFORE, _AFTER, _AFTER_WORD, _AFTER_WORD_ASSIGNMENT = 80, 16, 200, 128


def find_candidates(text: str) -> list[tuple[int, int, str]]:
    """(start, end, what) of each candidate, in order: "token", "word", "pem" or "url"."""
    found = [(start, end, "token") for start, end in _tokens(text)]
    found += [(start, end, "word") for start, end in _words(text)]
    found += [(start, end, "pem") for start, end in _pems(text)]
    found += [(start, end, "url") for start, end in _urls(text)]
    return sorted(set(found))


_AWS_KEY_IDS = ("AKIA", "ASIA", "ABIA", "ACCA", "A3T")
# Literals every secret word (_WORD), and every private key header ("key"), holds: "pass" alone
# would stop at every "passenger".
_NAMING_LITERALS = ("key", "password", "passwd", "dbpass", "db_pass", "databasepass", "database_pass", "keypass",
                    "key_pass", "pwd", "secret", "contrase")


def names_a_secret(text: str) -> bool:
    """Whether ``text`` holds what only its context makes a secret: a secret word of the keyword
    detector (``password``, ``api_key``, ...), an AWS access key id (the secret access key after
    it), a private key's header or credentials in a URL. A secret found by its own form (a
    key's prefix, its randomness) is found wherever it is repeated; one of these only here."""
    low = text.lower()
    if not (any(literal in low for literal in _NAMING_LITERALS) or any(key_id in text for key_id in _AWS_KEY_IDS)
            or "://" in text or "PuTTY" in text):
        return False  # the usual case: none of the literals every such match holds
    return (next(_words(text), None) is not None or any(key_id in text for key_id in _AWS_KEY_IDS)
            or next(_pems(text), None) is not None or next(_urls(text), None) is not None)


CANDIDATE_APART = "\n" * 16
"""Texts joined by this are read by ``may_hold_secrets`` as they are read apart (no candidate
reaches across it: the keyword window is 10 characters)."""


def may_hold_secrets(text: str) -> bool:
    """Whether ``text`` holds any candidate or a shape's prefix (what most text costs, a few
    microseconds): False means ``find_secrets`` finds nothing. Several short texts joined by
    ``CANDIDATE_APART`` are read in one pass."""
    if any(next(found, None) is not None for found in (_words(text), _pems(text), _urls(text))):
        return True
    marked = text.encode("utf-8", "surrogatepass").translate(_KEY_LIKE_TO_A)
    # Every token candidate and every shape holds a run of 16+ key-like characters: none, no candidate.
    if _RUN.encode() not in marked:
        return False
    runs = _runs(text, marked)
    return next(_tokens(text, marked, runs), None) is not None or may_hold_a_shape(text, runs)


def _words(text: str) -> Iterator[tuple[int, int]]:
    low = text.lower()
    for literal, before, after in _WORD_LITERALS:
        at = low.find(literal)
        while at >= 0:
            # "passed", "cache_key": cheap checks first, the regex where they pass
            if (before is None or low.endswith(before, max(0, at - 9), at)) or (after and low.startswith(after, at)):
                match = _WORD.search(low, max(0, at - 9), at + 10)
                if match and match.start() <= at < match.end() and not _in_mask(text, match.start()):
                    yield match.span()
            at = low.find(literal, at + 1)


def _pems(text: str) -> Iterator[tuple[int, int]]:
    if "PRIVATE KEY" in text or "PuTTY" in text:
        yield from (m.span() for m in _PEM.finditer(text))


def _urls(text: str) -> Iterator[tuple[int, int]]:
    if "://" in text:
        yield from (m.span() for m in _URL.finditer(text))


def _runs(text: str, marked: bytes) -> list[tuple[int, int]]:
    """(start, end) of every run of 16+ key-like characters (``marked``: the text's bytes with
    every key-like character as ``a``)."""
    if not text.isascii():
        return [m.span() for m in _TOKEN.finditer(text)]
    runs = []  # positions in bytes are positions in text
    ascii_marked = marked.decode("ascii")
    at = ascii_marked.find(_RUN)
    while at >= 0:
        stop = _NOT_KEY_LIKE.search(ascii_marked, at + 16)
        end = stop.start() if stop else len(text)
        runs.append((at, end))
        at = ascii_marked.find(_RUN, end)
    return runs


def _tokens(text: str, marked: bytes | None = None,
            runs: list[tuple[int, int]] | None = None) -> Iterator[tuple[int, int]]:
    """Runs of 16+ key-like characters holding a letter and a digit, but UUIDs, slugs of short
    parts and digests no secret word names. ``marked``, ``runs``: the text's bytes with every
    key-like character as ``a``, and its runs (``_runs``), when the caller made them."""
    if marked is None:
        marked = text.encode("utf-8", "surrogatepass").translate(_KEY_LIKE_TO_A)
    if _RUN.encode() not in marked:  # the usual case, in a few microseconds
        return
    if runs is None:
        runs = _runs(text, marked)
    rejected: set[str] = set()  # tokens passed over by their own form (ids repeat: each is read once)
    for start, end in runs:
        token = text[start:end]
        if token in rejected:
            continue
        if DIGEST.fullmatch(token):
            if not SECRET_WORD.search(left_context(text, start)):
                continue  # a digest (see the module docstring)
        elif not letter_and_digit(token) or _UUID.fullmatch(token) or _SLUG.fullmatch(token):
            rejected.add(token)
            continue
        yield start, end


def letter_and_digit(text: str) -> bool:
    return bool(_DIGIT.search(text) and _LETTER.search(text))


def _in_mask(text: str, at: int) -> bool:
    """Whether the word at ``at`` is "SECRET" or "Secret Keyword" of a mask written earlier."""
    return (text.startswith("SECRET ", at) and text[at - 1:at] == "[") or text.startswith("Secret Keyword sha256:", at)


def line_of(view: str, first: int, last: int) -> tuple[int, int]:
    """Where the line (or lines) holding ``view[first:last]`` starts and ends."""
    line_end = view.find("\n", last)
    return view.rfind("\n", 0, first) + 1, len(view) if line_end < 0 else line_end


def windows(view: str, candidates: list[tuple[int, int, str]]) -> Iterator[tuple[int, int]]:
    """Merged windows around the candidates, within their lines."""
    current: list[int] | None = None
    for first, last, what in candidates:
        line_start, line_end = line_of(view, first, last)
        after = _AFTER_WORD_ASSIGNMENT if what == "word" else _AFTER
        start, end = max(line_start, first - _BEFORE), min(line_end, last + after)
        if current is not None and start <= current[1]:
            current[1] = max(current[1], end)
            continue
        if current is not None:
            yield current[0], current[1]
        current = [start, end]
    if current is not None:
        yield current[0], current[1]


def word_windows(view: str, candidates: list[tuple[int, int, str]]) -> Iterator[tuple[int, int, bool]]:
    """(start, end, before) of the windows the keyword detector reads around each keyword: one
    from the keyword on (``password = "..."``) and one that ends at it (``"..." == password``,
    ``before``)."""
    for first, last, what in candidates:
        if what == "word":
            line_start, line_end = line_of(view, first, last)
            for start, end, before in ((first, min(line_end, first + _AFTER_WORD), False),
                                       (max(line_start, first - _BEFORE), last, True)):
                yield start, end, before


def left_context(text: str, at: int) -> str:
    """The text just before ``at`` back to the field's start: ``"api_key": "`` in JSON."""
    start = max(0, at - 48)
    for sep in ",;{}&\n":
        start = max(start, text.rfind(sep, start, at) + 1)
    return text[start:at].lstrip(" \t\"'`")

