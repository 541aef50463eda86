"""Text as the safety detectors compare it: one normal form, made once per text.

An agent's run is hostile: an address written ``exfil%40attacker.test``, ``ｅｘｆｉｌ@…`` in
full-width letters, a zero-width space inside ``ig\u200bnore``, a canary echoed with spaces
(``JK - CANARY - 7F3A``), a URL sent over another scheme than the one asked for. Every detector
compares texts in the form ``normal`` makes, never as they were written:

- percent-escapes decoded once (``%40`` is ``@``; an escape that is not one stays as it is);
- Unicode NFKC (full-width and other compatibility forms become their plain letters);
- zero-width characters, soft hyphens and bidirectional controls removed;
- case folded, and every run of white space one space.

Secrets are looked for in ``plain``, the same form before its last step: a key's case is part
of it, and a private key spans lines.

``skeleton`` keeps only the letters and digits of that form, for tokens an agent may repeat
with other separators (canaries); ``target_key`` names an address or URL whatever its scheme.
Evidence is quoted from the normal form (what the detector read).
"""

from __future__ import annotations

import re
import unicodedata
from urllib.parse import unquote

_INVISIBLE = re.compile("[\u00ad\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff]")
_SPACES = re.compile(r"\s+")
_NOT_ALNUM = re.compile(r"[\W_]+")
_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]{0,20}://")


def plain(text: str) -> str:
    """``text`` decoded, in NFKC and without invisible characters, its case and lines kept: the
    form secrets are looked for in (a key's case is part of it; a private key spans lines)."""
    if "%" in text:
        text = unquote(text, errors="replace")
    if not text.isascii():
        text = _INVISIBLE.sub("", unicodedata.normalize("NFKC", text))
    return text


def normal(text: str) -> str:
    """``text`` in the one form every detector compares (see the module docstring)."""
    return _SPACES.sub(" ", plain(text).casefold()).strip()


def skeleton(text: str) -> str:
    """The letters and digits of ``normal(text)``, nothing between them."""
    return _NOT_ALNUM.sub("", normal(text))


def target_key(target: str) -> str:
    """An address or URL as it is compared: normal form, no scheme, no trailing slash or dot."""
    return _SCHEME.sub("", normal(target)).rstrip("/.,;:")
