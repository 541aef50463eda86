"""Untrusted text on a terminal, and secrets in anything judgekit writes.

Trajectory ids, outputs, tool results and file names come from files judgekit did not write.
Printed raw, a control character can retitle the terminal (OSC), clear it, or fake a log line
(``"x\\r\\njudgekit: gate: PASSED"``); bidirectional overrides can reorder what a person reads.
``printable`` escapes them in multi-line bodies, ``one_line`` also escapes line breaks, for a
value inside a line, and ``json_text`` does the same inside JSON output (still valid JSON). The
reports (HTML, Markdown, JUnit) show a record's text through ``printable`` too: one list of what
is never shown raw, and one visible form of it (``\\u202e``) wherever judgekit writes.

Secrets: the API keys judgekit reads from the environment are registered here
(``register_secret``) and ``redact`` masks them as ``[REDACTED]`` in every text judgekit writes:
run records, reports, the cache, the history, calibration files, the terminal. A server that
echoes the key in an error body cannot get it written anywhere. Then it masks every secret
``judgekit._util.secrets.find_secrets`` finds, as ``[SECRET <kind> sha256:<8 hex>]``: what
detect-secrets' detectors find (API keys and tokens, private keys, passwords, high-entropy
strings) and every key shape of the catalogue (``judgekit._util.secret_shapes``: Anthropic, OpenAI,
Google, Hugging Face, an echoed Bearer header, ...). So a secret an agent leaked in its output,
a call or its world is not copied into judgekit's files either, and what is masked here is what
the safety scan reports, under the same name. Text with no candidate for it (no long key-like
token, no password word) costs one pass over its characters.
"""

from __future__ import annotations

import json
import re
import threading

MASK = "[REDACTED]"

# What can act on a reader rather than be read: DEL and the C1 controls, Unicode line and
# paragraph separators, the bidirectional marks (U+061C, U+200E, U+200F), embeddings and
# overrides (U+202A-U+202E) and isolates (U+2066-U+2069). Then the C0 controls but \t and \n,
# which JSON escapes itself.
_ACTING = "\x7f-\x9f\u2028\u2029\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_UNSAFE = f"\x00-\x08\x0b-\x1f{_ACTING}"
_UNSAFE_BODY = re.compile(f"[{_UNSAFE}]")
_UNSAFE_LINE = re.compile(f"[{_UNSAFE}\t\n]")
_UNSAFE_JSON = re.compile(f"[{_ACTING}]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with every control and bidirectional character escaped visibly (``\\x1b``,
    ``\\u202e``), but tabs and line breaks."""
    return _UNSAFE_BODY.sub(_escape, text)


def one_line(text: str) -> str:
    """``text`` escaped to stay on one line: line breaks and tabs escaped too."""
    return _UNSAFE_LINE.sub(lambda m: {"\n": "\\n", "\t": "\\t", "\r": "\\r"}.get(m.group()) or _escape(m), text)


def json_text(text: str) -> str:
    """JSON text with what could still act on a terminal escaped as ``\\uXXXX`` (valid JSON)."""
    return _UNSAFE_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


# --- secrets -----------------------------------------------------------------------------------

_secrets: set[str] = set()
_lock = threading.Lock()
_mask_secrets = None


def change_text(relative_drop: float | None) -> str:
    """A change against a baseline, one convention wherever judgekit shows one: a drop is
    negative and marked ▼ (``▼ -11.4%``), a rise positive and marked ▲ (``▲ +2.0%``), no change
    ``= 0.0%``; ``relative_drop`` is the drop over the baseline (positive: worse); None: "n/a"."""
    if relative_drop is None:
        return "n/a"
    change = -100 * relative_drop
    if abs(change) < 0.05:
        return "= 0.0%"
    return f"{'▼' if change < 0 else '▲'} {change:+.1f}%"


def register_secret(value: str | None) -> None:
    """Mask ``value`` from now on in everything ``redact`` sees (and its JSON-escaped form)."""
    if not value or len(value) < 6:  # too short to mask without mangling ordinary text
        return
    with _lock:
        _secrets.add(value)
        _secrets.add(json.dumps(value)[1:-1])


def redact(text: str) -> str:
    """``text`` with every registered secret replaced by MASK, then every secret ``find_secrets``
    finds (detect-secrets' detectors and the catalogue's shapes, ``judgekit._util.secret_shapes``) by
    its own mask, ``[SECRET <kind> sha256:<8 hex>]`` (``judgekit._util.secrets.mask_secrets``)."""
    global _mask_secrets
    for secret in sorted(_secrets, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, MASK)
    if _mask_secrets is None:  # imported here: light, and detect-secrets itself loads on a candidate only
        from judgekit._util.secrets import mask_secrets as _mask_secrets
    return _mask_secrets(text)
