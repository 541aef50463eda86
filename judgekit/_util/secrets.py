"""Secrets in text, found by Yelp's detect-secrets detectors and judgekit's catalogue of key
shapes, and masked with a short hash.

``find_secrets`` runs detect-secrets' own detectors (``detect_secrets.plugins``, 26 of its 27:
patterns for AWS, GitHub, GitLab, Slack, Stripe, SendGrid, Twilio, OpenAI, JWT, private keys,
basic-auth URLs, npm, PyPI, Discord, Telegram, Mailchimp, Azure, IBM, Cloudant, SoftLayer,
Square and Artifactory; the keyword detector for ``password = "..."`` assignments; the Base64
and Hex entropy detectors at their default limits, 4.5 and 3.0) and the library's heuristic
filters that read text (sequential strings, UUIDs, ``{templated}`` and ``$VARIABLE`` values,
indirect references such as ``get_password()``, ``..._id`` fields, values without a letter; not
its allowlist comment: the text is hostile). Its "Public IP" detector is left out: an address is
no secret, and endpoints are in every record. Then every match of a shape in
``judgekit._util.secret_shapes`` (Anthropic, OpenAI project and admin keys, other ``sk-`` keys, Google
API keys, Hugging Face, GitHub fine-grained tokens, Slack app tokens, npm tokens, an AWS secret
access key by its key id or its name, a Bearer header and the rest of that list), the one
catalogue ``judgekit._util.text.redact`` masks by too: whatever judgekit masks, this reports. Where a
detector and a shape name the same stretch, the detector's kind stays (detect-secrets' ``OpenAI
Token`` for a key both find); over an entropy finding, the shape's kind wins (``Google API Key``,
not ``Base64 High Entropy String``).

Why not ``scan_line``: it runs the entropy detectors on unquoted words too (every word fires) and
costs ~390 µs a line. How it is used instead:

- a cheap prefilter finds candidates (a run of 16+ key-like characters holding a letter and a
  digit, a word of the keyword detector's list, a ``BEGIN``/``END ... PRIVATE KEY`` line,
  ``://user:pass@``, a shape's prefix near a run of 16+ key-like characters); text without one
  never reaches detect-secrets, which is imported on the first candidate. The detectors run on
  a window around each candidate, not on the whole text; the shapes on the whole text;
- the detectors' patterns and ``analyze_string`` are called, never ``analyze_line``: that one
  reads the process-wide settings (which ``transient_settings`` swaps, unlocked) and may call a
  detector's ``verify``, a network request. The entropy limit is checked with the detector's own
  ``calculate_shannon_entropy``, as ``analyze_line`` does. So it is thread-safe and offline. A
  pattern's match is taken whole where the detector yields only a prefix group (GitHub's
  ``(ghp|gho|...)_...`` yields "ghp"), and runs to the end of its token (a JWT's signature);
- the keyword detector reads one assignment per pattern and line: it is run from each keyword,
  quotes required (its rule for text of unknown type), and also on ``PASSWORD=x`` and
  ``password: x`` unquoted, where the value must be one word holding a letter and a digit
  ("password: required" is prose, ``api_key=api_key`` code);
- JSON escapes are read as what they stand for, two levels deep (JSON in a JSON string), so
  ``password = \\"x\\"`` in a record reads like ``password = "x"``; a mask never cuts an escape
  or crosses a JSON quote: masked JSON stays valid JSON;
- a value found once is masked wherever else it is in the same text;
- judgekit's own digests stay: a 40- or 64-character hex string (a sha1 commit, a sha256 cache
  key, rubric hash or model pin) is a digest, not a "Hex High Entropy String", unless a secret
  word names it just before (token, secret, password, api_key; not "key", ``cache_key``, ``sha256``);
- a private key is masked from ``-----BEGIN`` to its ``END`` line, or over its base64 lines when
  it was cut before either, not only its header line, which is all the detector reports.

``excerpt`` cuts a stretch around a finding after masking, never through a secret: cut first,
the tail of a key is no longer a key, and nothing finds it.

This module joins the steps: the prefilter and the windows are ``judgekit._util.secret_candidates``,
the detectors ``judgekit._util.secret_detectors``, where a finding lies and how JSON escapes are
read ``judgekit._util.secret_spans``.

Measured misses (``tests/test_safety_secrets.py::test_known_misses``): a short secret with no
keyword ("my pin is 4411"); an unquoted password of letters only (``password: Sunshine``); a
keyword value under 6 characters; a quoted passphrase with spaces; a secret split across lines,
reversed or encoded (base64 of a key); a 40/64-hex secret no secret word names; a random string
without a digit; a key format neither detect-secrets nor the catalogue knows, unquoted (xAI's
``xai-``, Perplexity's ``pplx-``, Stripe's test keys by design), unless quoted and random enough
for the entropy detector; a Hugging Face token with digits in it or fewer than 8 capitals (the
shape is secretlint's: 34 letters); an AWS secret access key neither named nor within two lines
after its key id; a quoted random string under ~25 characters (its entropy stays under 4.5);
JSON nested three strings deep; a key percent-encoded in a URL (``%3D`` before it is a word's
end); a secret cut by someone else before judgekit saw it (a judge quoting half a key).

The mask, ``[SECRET AWS Access Key sha256:1a2b3c4d]``, names the detector and the first 8 hex
digits of the value's sha256, so two findings can be told apart without showing either. For a
weak password the hash confirms a guess: it hides the value, not its guessability.
"""

from __future__ import annotations
import hashlib
import re
from dataclasses import dataclass

from judgekit._util import secret_detectors
from judgekit._util.secret_candidates import (CANDIDATE_APART, find_candidates, may_hold_secrets, names_a_secret,
                                              windows, word_windows)
from judgekit._util.secret_detectors import ENTROPY_KINDS, KEYWORD, MIN_KEYWORD_VALUE, SPECIFIC, detector_kinds
from judgekit._util.secret_shapes import find_shapes
from judgekit._util.secret_spans import (escape_shifts, merge_spans, pem_tails, raw_quote, to_text, unescaped,
                                         value_spans)

__all__ = ["CANDIDATE_APART", "ENTROPY_KINDS", "SecretHit", "detector_kinds", "excerpt", "find_secrets", "mask_secret",
           "mask_secrets", "may_hold_secrets", "names_a_secret"]

_MASKED = re.compile(r"\[SECRET [A-Za-z0-9 ()._-]{1,60} sha256:[0-9a-f]{8}\]")


@dataclass(frozen=True)
class SecretHit:
    """One secret in a text: detect-secrets' type name, the value, and where it is.

    ``value`` is the secret as it reads (JSON escapes read: a key's ``\\n`` is a line break);
    ``text[start:end]`` is where it is written, escapes and all."""

    kind: str
    value: str
    start: int
    end: int


def mask_secret(value: str, kind: str) -> str:
    """The mask for ``value``: ``[SECRET AWS Access Key sha256:1a2b3c4d]`` (never the value)."""
    return f"[SECRET {kind} sha256:{hashlib.sha256(value.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}]"


def mask_secrets(text: str) -> str:
    """``text`` with every secret ``find_secrets`` finds replaced by its mask."""
    hits = find_secrets(text)
    if not hits:
        return text
    parts, at = [], 0
    for hit in hits:
        parts += [text[at:hit.start], mask_secret(hit.value, hit.kind)]
        at = hit.end
    parts.append(text[at:])
    return "".join(parts)


def excerpt(text: str, start: int, end: int, margin: int = 120) -> str:
    """``text`` around ``text[start:end]`` with every secret in it masked *before* the cut, and
    the cut widened to whole secrets, so that no part of one is left (cut first and masked
    after, the tail of a key is no longer a key): the evidence of a finding."""
    hits = find_secrets(text)
    lo, hi = max(0, start - margin), min(len(text), end + margin)
    for hit in hits:
        if hit.start < lo < hit.end:
            lo = hit.start
        if hit.start < hi < hit.end:
            hi = hit.end
    parts, at = ["..." if lo else ""], lo
    for hit in hits:
        if lo <= hit.start and hit.end <= hi:
            parts += [text[at:hit.start], mask_secret(hit.value, hit.kind)]
            at = hit.end
    parts += [text[at:hi], "..." if hi < len(text) else ""]
    return "".join(parts)


def find_secrets(text: str) -> list[SecretHit]:
    """The secrets in ``text``, in order and not overlapping; ``start``/``end`` index ``text``."""
    if not may_hold_secrets(text):
        return []
    view, readings = unescaped(text)
    view = _MASKED.sub(lambda m: " " * len(m.group()), view)  # a mask already there is no candidate
    detectors = secret_detectors.load()
    candidates = find_candidates(view)
    spans: list[tuple[int, int, int, str]] = []  # (start, end, priority, kind), in the view
    values: dict[str, tuple[int, str]] = {}  # each value found -> its best (priority, kind)
    found = [(start, end, detectors.scan(view[start:end])) for start, end in windows(view, candidates)]
    # The keyword detector reads the first assignment of a text only: one window per keyword.
    for start, end, before in word_windows(view, candidates):
        found.append((start, end, ((KEYWORD, detectors.keyword.secret_type, value, None)
                                   for value in detectors.keyword_values(view[start:end], before=before))))
    for start, end, findings in found:
        for priority, kind, value, at in findings:
            for span in value_spans(view, kind, value, start, end, at):
                spans.append((*span, priority, kind))
                value_found = view[span[0]:span[1]]
                if values.get(value_found, (99,))[0] > priority:
                    values[value_found] = (priority, kind)
    for value, (priority, kind) in values.items():  # the same value anywhere else in the text
        if len(value) >= MIN_KEYWORD_VALUE:
            at = view.find(value)
            while at >= 0:
                spans.append((at, at + len(value), priority, kind))
                at = view.find(value, at + len(value))
    if "-----END" in view:
        spans += [(start, end, SPECIFIC, "Private Key") for start, end in pem_tails(view)]
    # The catalogue's shapes last: where a detector named the same stretch, its kind stays.
    for shape, start, end in find_shapes(view):
        spans.append((start, end, SPECIFIC, shape.kind))
        value = view[start:end]
        at = view.find(value)
        while at >= 0:  # the same key anywhere else in the text (inside a longer word too)
            spans.append((at, at + len(value), SPECIFIC, shape.kind))
            at = view.find(value, at + len(value))
    merged = merge_spans(spans)
    return _hits(text, view, merged, escape_shifts(readings) if merged else [])



def _hits(text: str, view: str, spans: list[tuple[int, int, str]], levels: list[list[int]]) -> list[SecretHit]:
    hits = []
    for first, last, kind in spans:
        start, end = to_text(first, levels), to_text(last, levels)
        quote = raw_quote(text, start, end)
        if quote is not None:  # a JSON string ends there: the span was read across two
            end = quote
        if end > start:
            value = view[first:last] if quote is None else unescaped(text[start:end])[0]
            hits.append(SecretHit(kind, value, start, end))
    return hits

