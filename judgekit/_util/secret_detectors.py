"""detect-secrets' detectors and heuristic filters, loaded on the first candidate and called
without its process-wide settings or any network request (``judgekit._util.secrets`` says how).

``load`` gives the one ``Detectors`` (built once, read-only afterwards: thread-safe);
``Detectors.scan`` yields (priority, kind, value, where) for the pattern and entropy detectors
in a window, ``Detectors.keyword_values`` the keyword detector's values. Where two findings
overlap, the lower priority's kind wins: ``SPECIFIC`` (a pattern, a shape), ``KEYWORD``,
``ENTROPY``.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from typing import Any

from judgekit._util.secret_candidates import DIGEST, SECRET_WORD, left_context, letter_and_digit

_ASSIGNMENT_WORD = re.compile(r"(?i)key|pass|pw|token|secret|contrase|cloudant|softlayer")
MIN_KEYWORD_VALUE = 6
_DELIMITERS = " \t\r\n\"'=:"
SPACE = re.compile(r"\s")
ENTROPY_KINDS = frozenset({"Base64 High Entropy String", "Hex High Entropy String"})
"""Kinds found by randomness alone: an identifier can be as random as a key."""
_NOT_SECRETS = {"Public IP (ipv4)"}
# Detectors whose patterns are assignments (`ibm_cloud_iam_key = ...`): run where such a word is.
_NEEDS_WORD = {"Cloudant Credentials", "IBM Cloud IAM Key", "IBM COS HMAC Credentials", "SoftLayer Credentials"}
SPECIFIC, KEYWORD, ENTROPY = 0, 1, 2  # which kind wins where two findings overlap

_lock = threading.Lock()
_detectors: Any = None


class Detectors:
    """detect-secrets' detectors and filters, built once; read-only afterwards (thread-safe)."""

    def __init__(self) -> None:
        import importlib
        import inspect
        import pkgutil

        from detect_secrets import plugins
        from detect_secrets.filters import heuristic
        from detect_secrets.plugins import keyword
        from detect_secrets.plugins.base import BasePlugin, RegexBasedDetector
        from detect_secrets.plugins.high_entropy_strings import HighEntropyStringsPlugin

        classes: dict[str, type] = {}  # as detect-secrets' own registry finds them, settings aside
        for info in pkgutil.iter_modules(plugins.__path__):
            module = importlib.import_module(f"{plugins.__name__}.{info.name}")
            for _, cls in inspect.getmembers(module, inspect.isclass):
                if issubclass(cls, BasePlugin) and not inspect.isabstract(cls):
                    classes[cls.secret_type] = cls
        self.kinds = sorted(kind for kind in classes if kind not in _NOT_SECRETS)
        self.heuristic = heuristic
        self.regex_based = RegexBasedDetector
        self.keyword = keyword.KeywordDetector()
        # Quotes required (detect-secrets' rule for text of unknown type), and config-style
        # `PASSWORD=x` / `password: x` unquoted (a value then needs a digit or a symbol).
        self.keyword_quoted = keyword.QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP
        self.keyword_config = {keyword.FOLLOWED_BY_EQUAL_SIGNS_REGEX: 5, keyword.FOLLOWED_BY_COLON_REGEX: 4}
        self.keyword_preceded = keyword.PRECEDED_BY_EQUAL_COMPARISON_SIGNS_QUOTES_REQUIRED_REGEX
        self.entropy, self.patterns, self.assignments = [], [], []
        for kind in self.kinds:
            cls = classes[kind]
            if issubclass(cls, HighEntropyStringsPlugin):
                self.entropy.append(cls())  # default limits: Base64 4.5, Hex 3.0
            elif cls is not keyword.KeywordDetector:
                (self.assignments if kind in _NEEDS_WORD else self.patterns).append(cls())

    def scan(self, window: str) -> Iterator[tuple[int, str, str, int | None]]:
        """(priority, kind, value, where in ``window`` or None) for each finding of the pattern
        and entropy detectors, filtered (the keyword detector: ``keyword_values``)."""
        plugins = self.patterns + (self.assignments if _ASSIGNMENT_WORD.search(window) else [])
        for plugin in plugins:
            for value, at in self._pattern_values(plugin, window):
                if value and not self._filtered(value, window, plugin):
                    yield SPECIFIC, plugin.secret_type, value, at
        for plugin in self.entropy:
            for value in plugin.analyze_string(window):
                # n characters hold at most log2(n) bits each: shorter ones cannot pass the limit
                if (len(value) > 2 ** plugin.entropy_limit
                        and plugin.calculate_shannon_entropy(value) > plugin.entropy_limit
                        and not self._filtered(value, window, plugin)
                        and not (DIGEST.fullmatch(value) and not _named_secret(window, value))):
                    yield ENTROPY, plugin.secret_type, value, None

    def _pattern_values(self, plugin: Any, window: str) -> Iterator[tuple[str, int | None]]:
        """A pattern detector's findings with where they are. Its own ``analyze_string`` yields a
        pattern's groups, which for some is the prefix only (GitHub's ``(ghp|gho|...)_...``
        yields "ghp"): a group that starts the match and ends before it stands for the match."""
        if type(plugin).analyze_string is not self.regex_based.analyze_string:
            for value in plugin.analyze_string(window):  # its own checks (the JWT's is decoded)
                yield value, None
            return
        for regex in plugin.denylist:
            for match in regex.finditer(window):
                groups = [g for g in range(1, (regex.groups or 0) + 1) if match.group(g)]
                if not groups or (match.start(groups[0]) == match.start() and match.end(groups[0]) < match.end()
                                  and len(groups) == 1):
                    value, at = match.group(), match.start()
                    stripped = value.strip(_DELIMITERS)  # Artifactory's pattern holds its delimiters
                    yield stripped, at + value.find(stripped)
                else:
                    for g in groups:
                        yield match.group(g), match.start(g)

    def keyword_values(self, window: str, *, before: bool) -> Iterator[str]:
        """The keyword detector's values in a window that starts at its keyword (its patterns,
        matched there rather than searched for: the same findings, ten times faster), or, with
        ``before``, that ends at it (``"value" == password``), filtered."""
        for regexes, quoted in ((self.keyword_quoted, True), (self.keyword_config, False)):
            for regex, group in regexes.items():
                if (regex is self.keyword_preceded) != before:
                    continue
                match = regex.search(window) if before else regex.match(window)
                if match is None:
                    continue
                value = match.group(group).strip()
                if not quoted:  # one word, a letter and a digit: "password: required" is prose
                    value = value.split(None, 1)[0].rstrip(".,;:!?)]}>") if value else ""
                    if not letter_and_digit(value):
                        continue
                    at = window.find(value)  # password = get_password(user): its assignment only
                    if self.heuristic.is_indirect_reference(left_context(window, at) + window[at:at + len(value) + 2]):
                        continue
                elif SPACE.search(value):  # "secret_question": "what is your pet's name"
                    continue
                if len(value) >= MIN_KEYWORD_VALUE and not self._filtered(value, window, self.keyword):
                    yield value

    def _filtered(self, value: str, window: str, plugin: Any) -> bool:
        """detect-secrets' heuristic filters that read text (those on file names do not apply;
        its allowlist comment is not honoured: the text is hostile)."""
        h = self.heuristic
        if (h.is_sequential_string(value) or h.is_potential_uuid(value) or h.is_templated_secret(value)
                or h.is_prefixed_with_dollar_sign(value) or h.is_not_alphanumeric_string(value)):
            return True
        if isinstance(plugin, self.regex_based):
            return False
        at = window.find(value)  # "user_id": "..." and the like: its field, not the whole line
        return at >= 0 and h.is_likely_id_string(value, left_context(window, at) + value, plugin)


def _named_secret(window: str, value: str) -> bool:
    at = window.find(value)
    return at >= 0 and bool(SECRET_WORD.search(left_context(window, max(0, at - 1))))


def load() -> Detectors:
    """The detectors, built by the first call (under a lock: threads may ask at once)."""
    global _detectors
    if _detectors is None:
        with _lock:
            if _detectors is None:
                _detectors = Detectors()
    return _detectors


def detector_kinds() -> list[str]:
    """Every detect-secrets type name that ``find_secrets`` can report (the catalogue's kinds:
    ``judgekit._util.secret_shapes.kinds``)."""
    return list(load().kinds)

