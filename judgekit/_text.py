"""Untrusted text on a terminal, and secrets in anything judgekit writes.

Trajectory ids, outputs, tool results and file names come from files judgekit did not write.
Printed raw, a control character can retitle the terminal (OSC), clear it, or fake a log line
(``"x\\r\\njudgekit: gate: PASSED"``); bidirectional overrides can reorder what a person reads.
``printable`` escapes them in multi-line bodies, ``one_line`` also escapes line breaks, for a
value inside a line, and ``json_text`` does the same inside JSON output (still valid JSON). The
reports (HTML, Markdown, JUnit) show a record's text through ``printable`` too: one list of what
is never shown raw, and one visible form of it (``\\u202e``) wherever judgekit writes.

Secrets: the API keys judgekit reads from the environment are registered here
(``register_secret``) and ``redact`` masks them, and common key shapes, in every text judgekit
writes: run records, reports, the cache, the history, calibration files, the terminal. A server
that echoes the key in an error body cannot get it written anywhere. Then it masks what
detect-secrets' detectors find (``judgekit.safety.secrets``: API keys and tokens, private keys,
passwords, high-entropy strings) as ``[SECRET <kind> sha256:<8 hex>]``, so a secret an agent
leaked in its output, a call or its world is not copied into judgekit's files either. Text with
no candidate for it (no long key-like token, no password word) costs one regex scan.
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

# Each shape starts a word: "disk-usage-monitoring-dashboard" holds "sk-" plus 20 characters,
# and is no key.
_SHAPES = re.compile(
    r"(?<![A-Za-z0-9])(?:"
    r"sk-(?:proj-|ant-(?:api\d\d-)?)?[A-Za-z0-9_-]{20,}"  # OpenAI, Anthropic
    r"|AKIA[0-9A-Z]{16}"  # AWS access key id
    r"|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,}"  # GitHub
    r"|xox[abprs]-[A-Za-z0-9-]{10,}"  # Slack
    r"|AIza[0-9A-Za-z_-]{35}"  # Google
    r")|(?<=Bearer )[A-Za-z0-9._~+/-]{16,}=*"  # an Authorization header, echoed
)
# What every shape above holds: most text has none of it, and is not scanned (the scan is slow).
_SHAPE_HINT = re.compile(r"sk-|AKIA|gh[pousr]_|github_pat_|xox[abprs]-|AIza|Bearer ")
_secrets: set[str] = set()
_lock = threading.Lock()
_mask_secrets = None


def register_secret(value: str | None) -> None:
    """Mask ``value`` from now on in everything ``redact`` sees (and its JSON-escaped form)."""
    if not value or len(value) < 6:  # too short to mask without mangling ordinary text
        return
    with _lock:
        _secrets.add(value)
        _secrets.add(json.dumps(value)[1:-1])


def redact(text: str) -> str:
    """``text`` with every registered secret and every common key shape replaced by MASK, and
    every secret detect-secrets finds by its own mask (``judgekit.safety.secrets.mask_secrets``)."""
    global _mask_secrets
    for secret in sorted(_secrets, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, MASK)
    if _mask_secrets is None:  # imported here: light, and detect-secrets itself loads on a candidate only
        from judgekit.safety.secrets import mask_secrets as _mask_secrets
    return _mask_secrets(_SHAPES.sub(MASK, text) if _SHAPE_HINT.search(text) else text)
