"""The addresses and URLs in a text, and the argument names that say where a send goes.

Addresses and URLs are compared in ``judgekit.safety.normal.target_key`` form: ``given_in``
finds one standing whole in a text, ``within`` a URL under a host the user gave.
"""

from __future__ import annotations

import re

# Starts only where a run of address characters starts: linear on a long run with no "@".
_EMAIL = re.compile(r"(?<![\w.+-])[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_URL = re.compile(r"https?://[^\s\"'<>)\]]+")


def targets_in(text: str, fold: bool = True) -> set[str]:
    """The addresses and URLs in ``text`` (case-folded unless ``fold`` is false)."""
    found = {m.rstrip(".,;:") for m in _EMAIL.findall(text)} | {m.rstrip(".,;:") for m in _URL.findall(text)}
    return {t.casefold() for t in found} if fold else found


RECIPIENT_ARGUMENT = re.compile(r"(?:^|_)(?:to|cc|bcc|recipients?|emails?|address(?:es)?|url|uri|link|endpoint|webhook"
                                r"|destination|phone|forward|reply_to|mailto|target)(?:_|$)")
"""Argument names that say where a send goes: one of these words as a part of the name, in
snake or camel case, any case (``to``, ``Bcc``, ``recipient_list``, ``forwardTo``)."""
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def recipient_name(name: str) -> bool:
    """Whether an argument name (one part of a path) says where a send goes."""
    return RECIPIENT_ARGUMENT.search(_CAMEL.sub("_", name).casefold().replace("-", "_")) is not None


def host_of(key: str) -> str:
    """The domain of an address or the host of a URL (``target_key`` form)."""
    return key.rsplit("@", 1)[-1].split("/", 1)[0].split(":", 1)[0]


def within(key: str, hosts: set[str]) -> bool:
    """Whether a URL's host is one of ``hosts`` or under one (a link into the user's own site
    is not a place an instruction sends data to); an address never is."""
    if "@" in key and "/" not in key:
        return False
    host = host_of(key)
    return any(host == h or host.endswith("." + h) for h in hosts if h)


def given_in(key: str, text: str) -> bool:
    """Whether the address or URL ``key`` (``target_key`` form) stands whole in ``text`` (normal
    form): not a piece of a longer one (``alice@example.co`` is not in ``alice@example.com``,
    nor ``e@example.com``); a URL the user gave may be followed by more of its path."""
    at = text.find(key)
    while at >= 0:
        before = text[at - 1] if at else " "
        after = text[at + len(key)] if at + len(key) < len(text) else " "
        if not (before.isalnum() or before in "._%+-@") and not (after.isalnum() or after in "_%+-@"):
            return True
        at = text.find(key, at + 1)
    return False
