"""The one catalogue of secret shapes: the key formats judgekit masks and its safety scan reports.

``judgekit._util.secrets.find_secrets`` reports every match of a shape here, beside what
detect-secrets' detectors find, and ``judgekit._util.text.redact`` masks what ``find_secrets`` finds:
so whatever judgekit masks by shape, its safety scan reports, under the same kind, and the mask
is the same, ``[SECRET <kind> sha256:<8 hex>]``.

A ``Shape`` is the kind a finding reports, its compiled pattern, the literal text a match starts
with (its prefixes), and where the shape came from. Where a pattern has a group named
``secret``, that group is the secret (an AWS secret access key found by the key id before it);
otherwise the whole match is. A shape starts where a word starts (``disk-usage-monitoring``
holds ``sk-`` and 20 more characters, and is no key; only the AWS secret access key named
``..._SECRET_ACCESS_KEY`` may start inside a word, ``mid_word``) and runs to the end of its
token. A match whose last 16 characters hold fewer than 6 different ones is a placeholder
(``AIzaXXXXXXXX...``), not a key. Every match holds a run of 16 or more key-like characters
with a prefix in it or in the 32 characters before it: text without such a run (most text) costs
one pass over its characters, and a pattern runs only on text that holds one of its prefixes.

Where the shapes come from:

- formats detect-secrets (Yelp, Apache-2.0) has a detector for are not repeated here: AWS access
  key ids, GitHub's classic tokens (``ghp_``...), GitLab, Slack's ``xoxb-``/``xoxp-`` tokens and
  webhooks, Stripe live keys, SendGrid, Twilio, OpenAI keys holding ``T3BlbkFJ``, npm's
  ``.npmrc`` line, PyPI, Telegram, Discord, Mailchimp, Square, Azure, IBM, JWT, private keys.
  ``find_secrets`` runs its detectors; a kind named here as detect-secrets names it (``OpenAI
  Token``, ``GitHub Token``, ``Slack Token``, ``AWS Access Key``, ``NPM tokens``) widens that
  detector, and a key both find is one finding;
- ``secretlint``: secretlint 13.1.0, the maintained rule set installable here (npm,
  ``@secretlint/secretlint-rule-preset-recommend``; MIT License, Copyright (c) azu; its patterns
  are copied with this attribution). Translated from JavaScript: ``(?<!\\p{L})`` becomes this
  module's word start. Where a shape differs from the rule, its source says how;
- ``documented``: written here from the provider's documented format, where neither
  detect-secrets nor secretlint has it (Google API keys; an AWS secret access key next to its key
  id). gitleaks' rule set is maintained too, but is on neither PyPI nor npm;
- ``judgekit``: shapes judgekit masked before this catalogue: the ``sk-`` convention of
  OpenAI-compatible servers (litellm's virtual keys, DeepSeek, OpenRouter) and an echoed
  ``Authorization: Bearer`` header.

Test-mode keys (Stripe's ``sk_test_``) are left out: the providers' documentation prints them,
and an agent that copies an example is not leaking a secret.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

_START = r"(?<![A-Za-z0-9_-])"  # a word starts: not inside "disk-usage-..." nor a longer token
_END = r"(?![A-Za-z0-9_-])"  # the token ends: a fixed-length shape inside a longer token is none
_SECRETLINT = "secretlint 13.1.0"


@dataclass(frozen=True)
class Shape:
    """One key format: what a finding calls it, its pattern, and where the pattern came from."""

    kind: str
    pattern: re.Pattern[str]
    prefixes: tuple[str, ...]
    source: str
    mid_word: bool = False  # whether a prefix may sit inside a word (MY_AWS_SECRET_ACCESS_KEY)


def _shape(kind: str, pattern: str, prefixes: tuple[str, ...], source: str, *, mid_word: bool = False) -> Shape:
    return Shape(kind, re.compile(pattern), prefixes, source, mid_word)


SHAPES: tuple[Shape, ...] = (
    # --- AI providers ---------------------------------------------------------------------------
    _shape("Anthropic API Key", _START + r"sk-ant-[a-z]{2,6}\d\d-[A-Za-z0-9_-]{20,}",
           ("sk-ant-",),
           f"{_SECRETLINT} rule-anthropic (sk-ant-api0N-, 90-128 characters and AA); widened to Anthropic's "
           "other key kinds (admin01, oat01, ...) and to 20 characters on, so that a key cut short is still one"),
    _shape("OpenAI Token", _START + r"sk-(?:proj|svcacct|admin)-(?=[A-Za-z0-9_-]*?[0-9])[A-Za-z0-9_-]{20,}",
           ("sk-proj-", "sk-svcacct-", "sk-admin-"),
           f"{_SECRETLINT} rule-openai (project, service-account and admin keys); without its fixed lengths "
           "around T3BlbkFJ, which detect-secrets' OpenAI detector needs too"),
    _shape("API Key (sk- prefix)",
           _START + r"sk-(?:(?=[A-Za-z0-9_-]*?[0-9])(?=[A-Za-z0-9_-]*?[A-Z])|(?=[A-Za-z0-9_-]*?[A-Za-z0-9]{32}))"
           r"[A-Za-z0-9_-]{20,}",
           ("sk-",),
           "judgekit: the sk- keys of OpenAI-compatible servers (litellm's virtual keys, DeepSeek, OpenRouter's "
           "sk-or-v1-), as redact masked them before; a body that looks random (a digit and a capital, or 32 "
           "letters and digits in a row), so that sk-learn-compatible-estimators is prose"),
    _shape("Google API Key", _START + r"AIza[0-9A-Za-z_-]{35}" + _END, ("AIza",),
           "documented: Google Cloud API keys start with AIza and are 39 characters"),
    _shape("Hugging Face Token", _START + r"hf_(?=(?:[a-z]*[A-Z]){8})[A-Za-z]{34}" + _END, ("hf_",),
           f"{_SECRETLINT} rule-huggingface; 8 capitals at least (a random token has 17 on average), so that "
           "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 is a name"),
    _shape("Groq API Key", _START + r"gsk_[A-Za-z0-9]{52}" + _END, ("gsk_",), f"{_SECRETLINT} rule-groq"),
    # --- code hosts and package registries --------------------------------------------------------
    _shape("GitHub Token", _START + r"github_pat_[A-Za-z0-9_]{40,}", ("github_pat_",),
           f"{_SECRETLINT} rule-github (fine-grained tokens, 82 characters after github_pat_); 40 on, as judgekit "
           "masked them before. detect-secrets has the classic ghp_/gho_/ghu_/ghs_/ghr_ tokens only"),
    _shape("NPM tokens", _START + r"npm_[A-Za-z0-9]{36}" + _END, ("npm_",),
           f"{_SECRETLINT} rule-npm (an access token anywhere; detect-secrets finds one in an .npmrc line only)"),
    _shape("Docker Personal Access Token", _START + r"dckr_pat_[A-Za-z0-9_-]{27}" + _END, ("dckr_pat_",),
           f"{_SECRETLINT} rule-docker"),
    # --- chat and productivity ----------------------------------------------------------------------
    _shape("Slack Token", _START + r"(?:xox[abeoprs]|xapp)-(?=[A-Za-z0-9-]*?[0-9])[A-Za-z0-9-]{11,}", ("xox", "xapp-"),
           f"{_SECRETLINT} rule-slack (xoxb, xoxp, xapp, xoxa, xoxo, xoxr) with xoxe (refresh tokens) and any "
           "letters and digits in the parts: detect-secrets needs its parts but the last to be digits"),
    _shape("Linear API Key", _START + r"lin_api_[A-Za-z0-9_]{32,128}" + _END, ("lin_api_",),
           f"{_SECRETLINT} rule-linear"),
    _shape("Notion Integration Token", _START + r"ntn_[0-9]{11}[A-Za-z0-9]{35}" + _END, ("ntn_",),
           f"{_SECRETLINT} rule-notion"),
    _shape("Figma Token", _START + r"figd_[A-Za-z0-9_-]{40,200}" + _END, ("figd_",), f"{_SECRETLINT} rule-figma"),
    _shape("Shopify Access Token", _START + r"(?:shppa|shpca|shpat|shpss)_[A-Za-z0-9]{32,64}" + _END,
           ("shppa_", "shpca_", "shpat_", "shpss_"), f"{_SECRETLINT} rule-shopify"),
    # --- clouds and infrastructure -------------------------------------------------------------------
    _shape("AWS Access Key",
           _START + r"(?:A3T[A-Z0-9]|ABIA|ACCA|AKIA|ASIA)[0-9A-Z]{16}" + _END
           + r"[^\n]{0,80}?(?:\n[^\n]{0,80}?)?(?<![A-Za-z0-9/+=])"
           r"(?P<secret>(?![0-9a-f]{40}(?![A-Za-z0-9/+=]))[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])",
           ("AKIA", "ASIA", "ABIA", "ACCA", "A3T"),
           "documented: an AWS secret access key (40 base64 characters) after its access key id, on its line "
           "or the next (a credentials file, a CSV row, an STS answer); 40 hex digits are a commit, not a key"),
    _shape("AWS Access Key",
           r"(?:AWS|aws|Aws)?_?(?:SECRET|secret|Secret)_?(?:ACCESS|access|Access)_?(?:KEY|key|Key)[\"']?"
           r"[ \t]{0,4}(?::|=>|=)[ \t]{0,4}[\"']?(?P<secret>[A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])",
           ("ccess", "CCESS"),
           f"{_SECRETLINT} rule-aws (an AWS secret access key named so, quoted or not; detect-secrets needs quotes)",
           mid_word=True),
    _shape("Cloudflare API Token", _START + r"(?:cfk|cfut|cfat)_[A-Za-z0-9]{40}[0-9a-f]{8}" + _END,
           ("cfk_", "cfut_", "cfat_"), f"{_SECRETLINT} rule-cloudflare"),
    _shape("Databricks Token", _START + r"dapi[A-Fa-f0-9]{32}(?:-[0-9])?" + _END, ("dapi",),
           f"{_SECRETLINT} rule-databricks"),
    _shape("Grafana Token", _START + r"glc_[A-Za-z0-9+/]{32,400}={0,2}(?![A-Za-z0-9+/=_-])", ("glc_",),
           f"{_SECRETLINT} rule-grafana (cloud API tokens)"),
    _shape("Grafana Token", _START + r"glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}" + _END, ("glsa_",),
           f"{_SECRETLINT} rule-grafana (service account tokens)"),
    _shape("HashiCorp Vault Token", _START + r"(?:hvs\.[A-Za-z0-9_-]{90,120}|hvb\.[A-Za-z0-9_-]{138,300}"
           r"|hvr\.[A-Za-z0-9_-]{90,120})" + _END, ("hvs.", "hvb.", "hvr."), f"{_SECRETLINT} rule-hashicorp-vault"),
    _shape("Tailscale Key", _START + r"tskey-[a-z]{2,20}-[0-9A-Za-z_]{8,40}-[0-9A-Za-z_]{16,60}" + _END,
           ("tskey-",), f"{_SECRETLINT} rule-tailscale"),
    _shape("Vercel Token", _START + r"(?:vcp|vci|vca|vcr|vck)_[A-Za-z0-9]{20,60}" + _END,
           ("vcp_", "vci_", "vca_", "vcr_", "vck_"), f"{_SECRETLINT} rule-vercel"),
    _shape("1Password Service Account Token", _START + r"ops_ey[A-Za-z0-9+/=]{100,1280}fQ={0,2}(?![A-Za-z0-9+/=])",
           ("ops_ey",), f"{_SECRETLINT} rule-1password"),
    # --- an Authorization header ----------------------------------------------------------------
    _shape("Bearer Token",
           r"(?:(?<=Bearer )|(?<=bearer ))(?=[A-Za-z0-9._~+/%-]*?[0-9])(?=[A-Za-z0-9._~+/%-]*?[A-Za-z])"
           r"[A-Za-z0-9._~+/%-]{16,}=*",
           ("Bearer ", "bearer "),
           "judgekit: an Authorization header (RFC 6750's token syntax, and % for a token pasted URL-encoded) a "
           "server echoed or an agent wrote, as redact masked it before; a letter and a digit required, so that "
           "'Bearer authentication' is prose"),
)

# A prefix where a word starts ("sk-" in "disk-usage" is none), or anywhere for a mid-word shape.
_WORD_PREFIXES = sorted({p for shape in SHAPES if not shape.mid_word for p in shape.prefixes}, key=len, reverse=True)
_MID_WORD_PREFIXES = sorted({p for shape in SHAPES if shape.mid_word for p in shape.prefixes}, key=len, reverse=True)
_PREFIX = re.compile(r"(?<![A-Za-z0-9_-])(?:" + "|".join(map(re.escape, _WORD_PREFIXES)) + ")|"
                     + "|".join(map(re.escape, _MID_WORD_PREFIXES)))
# Every shape's match holds a run of 16 or more of these characters, and one of its prefixes in
# that run or in the 32 characters before it (the module docstring): the prefixes are looked for
# near such runs only.
_KEY_LIKE = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=_-"
_KEY_LIKE_TO_A = bytes.maketrans(_KEY_LIKE.encode(), b"a" * len(_KEY_LIKE))
_RUN = "a" * 16
_NOT_A = re.compile(r"[^a]")
_RUN_PATTERN = re.compile(r"[A-Za-z0-9+/=_-]{16,}")
_MIXED = re.compile(r"[0-9A-Z]")
_BEFORE_RUN = 32
_PLACEHOLDER_BELOW = 6  # different characters among the last 16: AIzaXXXX..., sk-proj-xxxx...1


def kinds() -> list[str]:
    """Every kind a shape here reports, once each."""
    return sorted({shape.kind for shape in SHAPES})


def _near_runs(text: str) -> str:
    """Each run of 16+ key-like characters in ``text`` that holds a digit or a capital, with the
    32 characters before it, joined by a NUL; empty where there is none (the usual case, in a few
    microseconds). A run of small letters alone (``get_reservation_details``) is a name: every
    shape's key is random, and 16 random characters all small letters come once in 10^6."""
    if text.isascii():
        marked = text.encode("ascii").translate(_KEY_LIKE_TO_A).decode("ascii")
        at = marked.find(_RUN)
        if at < 0:
            return ""
        parts = []
        while at >= 0:
            stop = _NOT_A.search(marked, at + len(_RUN))
            end = stop.start() if stop else len(text)
            if _MIXED.search(text, at, end):
                parts.append(text[max(0, at - _BEFORE_RUN):end])
            at = marked.find(_RUN, end)
    else:
        parts = [text[max(0, m.start() - _BEFORE_RUN):m.end()] for m in _RUN_PATTERN.finditer(text)
                 if _MIXED.search(m.group())]
    return "\x00".join(parts)


def _placeholder(value: str) -> bool:
    """Whether ``value`` is an example rather than a key: fewer than 6 different characters
    among its last 16 (a random key's have 12 or more; its start may be a prefix, or the A's
    of a Twitter bearer token)."""
    return len(set(value[-16:])) < _PLACEHOLDER_BELOW


def may_hold_a_shape(text: str, runs: list[tuple[int, int]] | None = None) -> bool:
    """Whether a shape may match in ``text``: no shape matches where this says no. ``runs``: the
    (start, end) of its runs of 16+ key-like characters, when the caller found them."""
    near = _near_runs(text) if runs is None else "\x00".join(
        text[max(0, at - _BEFORE_RUN):end] for at, end in runs if _MIXED.search(text, at, end))
    return bool(near) and _PREFIX.search(near) is not None


def find_shapes(text: str) -> Iterator[tuple[Shape, int, int]]:
    """(shape, start, end) of each secret a shape matches in ``text``, in order and not
    overlapping (where two shapes match the same text, the one listed first names it)."""
    near = _near_runs(text)
    if not near or _PREFIX.search(near) is None:
        return
    found: list[tuple[int, int, int, Shape]] = []
    for index, shape in enumerate(SHAPES):
        if not any(prefix in near for prefix in shape.prefixes):
            continue
        secret = "secret" in shape.pattern.groupindex
        for match in shape.pattern.finditer(text):
            start, end = match.span("secret") if secret else match.span()
            if not _placeholder(text[start:end]):
                found.append((start, -end, index, shape))
    last = -1
    for start, negative_end, _, shape in sorted(found, key=lambda f: f[:3]):
        if start >= last:
            last = -negative_end
            yield shape, start, last

# The patterns marked secretlint above are adapted from secretlint
# (https://github.com/secretlint/secretlint), under this license:
#
# MIT License
#
# Copyright (c) 2020 azu
#
# Permission is hereby granted, free of charge, to any person obtaining a copy of this software
# and associated documentation files (the "Software"), to deal in the Software without
# restriction, including without limitation the rights to use, copy, modify, merge, publish,
# distribute, sublicense, and/or sell copies of the Software, and to permit persons to whom the
# Software is furnished to do so, subject to the following conditions:
#
# The above copyright notice and this permission notice shall be included in all copies or
# substantial portions of the Software.
#
# THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED, INCLUDING
# BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY, FITNESS FOR A PARTICULAR PURPOSE AND
# NONINFRINGEMENT. IN NO EVENT SHALL THE AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM,
# DAMAGES OR OTHER LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
# OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE SOFTWARE.
