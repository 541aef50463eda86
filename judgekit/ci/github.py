"""Publishing a run on GitHub Actions: step outputs, the job summary, and one sticky comment on
the pull request, updated in place on every run.

The comment is the Markdown summary behind a hidden marker on its first line (``MARKER``). It is
found again among the pull request's comments (every page of them) by that marker and by its
author: the token's own account when the token can say who it is (``GET /user``: a personal
token), else a bot account, since an installation token (the workflow's ``GITHUB_TOKEN``, whose
comments are by ``github-actions[bot]``, or a GitHub App's) cannot read ``/user`` and comments
as a bot. So a person's comment that quotes the marker is never taken over. Found: updated
(PATCH); not found: created (POST).

The REST API is reached with the standard library only (``urllib``). The token goes in an
``Authorization`` header that is not repeated on a redirect, only over https (or plain http to
the loopback interface, for tests), and never into a message: errors name the method, the path,
the status and GitHub's own message.

The Markdown is hostile: it quotes trajectory ids and judges' reasons. ``comment_body`` shows
every HTML-comment delimiter in it as text, so it can neither hide what follows it nor carry a
second marker, and cuts it to GitHub's size limit.
"""

from __future__ import annotations

import json
import re
import secrets
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from judgekit.errors import JudgekitError

MARKER = "<!-- judgekit-summary -->"
"""The first line of judgekit's comment: how the next run finds it."""
COMMENT_LIMIT = 65_536
"""GitHub refuses a longer comment body (counted here in UTF-16 code units, never fewer than
characters however GitHub counts them)."""
SUMMARY_LIMIT = 2**20
"""GitHub drops a step's job summary larger than this (bytes)."""
PAGE_SIZE = 100
MAX_PAGES = 100
RESPONSE_BYTES = 16 * 2**20
LOOPBACK = ("127.0.0.1", "::1", "localhost")
API_VERSION = "2022-11-28"


class GitHubError(JudgekitError):
    """The GitHub API refused a request or could not be reached (``status``: the HTTP status, if
    one came back)."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


# --- the comment ----------------------------------------------------------------------------------


def _units(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def _cut(text: str, fits, note: str) -> str:
    """``text`` whole if ``fits(text)``, else its longest run of whole lines that fits with
    ``note`` after it."""
    if fits(text):
        return text
    lo, hi = 0, len(text)
    while lo < hi:  # the longest prefix that fits, by bisection (``fits`` grows with length)
        mid = (lo + hi + 1) // 2
        if fits(text[:mid] + note):
            lo = mid
        else:
            hi = mid - 1
    kept = text[:lo]
    if "\n" in kept:
        kept = kept[: kept.rindex("\n") + 1]
    return kept + note


def shown_as_text(markdown: str) -> str:
    """``markdown`` with every HTML-comment opener and closer written as text (``&lt;!--``,
    ``--&gt;``) and NUL characters removed: no part of it can open, close or fake a comment."""
    return markdown.replace("\x00", "").replace("<!--", "&lt;!--").replace("-->", "--&gt;")


def comment_body(markdown: str, *, footer: str = "", limit: int = COMMENT_LIMIT) -> str:
    """The pull-request comment: ``MARKER`` on the first line, then ``markdown`` (hostile: see
    ``shown_as_text``), then ``footer`` (judgekit's own line: where the run is), cut at whole
    lines to fit ``limit`` with a note saying so."""
    head = MARKER + "\n"
    tail = f"\n\n{shown_as_text(footer)}\n" if footer else "\n"
    note = "\n\u2026 (cut here: GitHub limits a comment's size; the whole summary is in the job summary)"

    def fits(text: str) -> bool:
        return _units(head + text + tail) <= limit

    return head + _cut(shown_as_text(markdown).rstrip("\n"), fits, note) + tail


def is_marked(body: object) -> bool:
    return isinstance(body, str) and body.startswith(MARKER)


def is_ours(comment: Mapping[str, Any], identity: str | None) -> bool:
    """``comment`` (as the API lists it) is judgekit's: marked, and by ``identity`` (a login), or,
    when the token has none (``identity`` None: an installation token), by a bot account."""
    user = comment.get("user")
    if not is_marked(comment.get("body")) or not isinstance(user, dict):
        return False
    if identity is not None:
        return user.get("login") == identity
    return user.get("type") == "Bot"


# --- the API --------------------------------------------------------------------------------------


def _next_link(header: str | None) -> str | None:
    """The ``rel="next"`` URL of a ``Link`` header (None: the last page)."""
    for part in (header or "").split(","):
        found = re.fullmatch(r'\s*<([^>]*)>\s*;(.*)', part)
        if found and re.search(r'\brel="?next"?', found.group(2)):
            return found.group(1)
    return None


def _one_line(text: object, limit: int = 300) -> str:
    text = re.sub(r"[\x00-\x1f\x7f]+", " ", str(text)).strip()
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


@dataclass
class GitHub:
    """The REST API of ``api_url`` (``GITHUB_API_URL``) for ``repository`` (``owner/name``),
    authenticated with ``token``."""

    api_url: str
    repository: str
    token: str = field(repr=False)
    timeout: float = 30.0

    def __post_init__(self) -> None:
        self.api_url = self.api_url.rstrip("/")
        parts = urllib.parse.urlsplit(self.api_url)
        if not (parts.scheme == "https" or (parts.scheme == "http" and parts.hostname in LOOPBACK)) or not parts.netloc:
            raise GitHubError(f"GITHUB_API_URL {_one_line(self.api_url)!r}: expected an https URL "
                              "(the token is never sent in clear text)")
        if not re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", self.repository):
            raise GitHubError(f"GITHUB_REPOSITORY {_one_line(self.repository)!r}: expected owner/name")
        if not self.token:
            raise GitHubError("no GitHub token: set the action's github-token input (default: the workflow's token)")

    def _url(self, path_or_url: str) -> str:
        if not path_or_url.startswith(("http://", "https://")):
            return self.api_url + path_or_url
        base, url = urllib.parse.urlsplit(self.api_url), urllib.parse.urlsplit(path_or_url)
        if (url.scheme, url.netloc) != (base.scheme, base.netloc):  # a Link header pointing elsewhere
            raise GitHubError(f"the API pointed to {_one_line(url.netloc)}, not {base.netloc}: not followed")
        return path_or_url

    def request(self, method: str, path_or_url: str, body: Mapping[str, Any] | None = None) -> tuple[Any, Any]:
        """(the JSON answer, the response headers) of ``method`` on ``path_or_url``; GitHubError
        when GitHub refuses it or cannot be reached."""
        url = self._url(path_or_url)
        shown = f"{method} {urllib.parse.urlsplit(url).path}"
        data = None if body is None else json.dumps(body).encode("utf-8")
        req = urllib.request.Request(url, data=data, method=method, headers={
            "Accept": "application/vnd.github+json", "X-GitHub-Api-Version": API_VERSION,
            "User-Agent": "judgekit-action", **({"Content-Type": "application/json"} if data else {})})
        req.add_unredirected_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as response:  # noqa: S310 - scheme checked
                raw, headers = response.read(RESPONSE_BYTES + 1), response.headers
        except urllib.error.HTTPError as exc:
            raise GitHubError(self._refusal(shown, exc), exc.code) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise GitHubError(f"GitHub API: {shown}: could not reach {self.api_url}: {_one_line(reason)}") from None
        if len(raw) > RESPONSE_BYTES:
            raise GitHubError(f"GitHub API: {shown}: an answer over {RESPONSE_BYTES} bytes")
        try:
            return (json.loads(raw) if raw.strip() else None), headers
        except ValueError:
            raise GitHubError(f"GitHub API: {shown}: the answer is not JSON") from None

    @staticmethod
    def _refusal(shown: str, exc: urllib.error.HTTPError) -> str:
        try:
            message = json.loads(exc.read(64 * 1024)).get("message", "")
        except (ValueError, AttributeError, OSError):
            message = ""
        text = f"GitHub API: {shown} answered {exc.code} {_one_line(exc.reason, 80)}"
        text += f": {_one_line(message)}" if message else ""
        if exc.code in (401, 403, 404):
            text += (" (the token needs `pull-requests: write` in the workflow's `permissions:`; a pull request "
                     "from a fork gets a read-only token)")
        return text

    def identity(self) -> str | None:
        """The login the token comments as, or None when it cannot say (an installation token:
        ``GET /user`` answers 403, and it comments as a bot)."""
        try:
            user, _ = self.request("GET", "/user")
        except GitHubError as exc:
            if exc.status == 403:
                return None
            raise
        login = user.get("login") if isinstance(user, dict) else None
        if not isinstance(login, str) or not login:
            raise GitHubError("GitHub API: GET /user answered without a login")
        return login

    def comments(self, number: int) -> Iterator[dict[str, Any]]:
        """Every comment of issue or pull request ``number``, page after page (``Link: rel=next``)."""
        url = f"/repos/{self.repository}/issues/{number}/comments?per_page={PAGE_SIZE}"
        for _ in range(MAX_PAGES):
            page, headers = self.request("GET", url)
            if not isinstance(page, list):
                raise GitHubError(f"GitHub API: the comments of #{number} are not a list")
            yield from (comment for comment in page if isinstance(comment, dict))
            url = _next_link(headers.get("Link"))
            if url is None:
                return
        raise GitHubError(f"#{number} has more than {MAX_PAGES * PAGE_SIZE} comments: not all read")

    def upsert_comment(self, number: int, body: str) -> tuple[str, str]:
        """Update judgekit's comment on ``number`` to ``body`` (see ``is_ours``), or create it:
        ("updated" or "created", the comment's URL)."""
        identity = self.identity()
        for comment in self.comments(number):
            if is_ours(comment, identity) and isinstance(comment.get("id"), int):
                done, _ = self.request("PATCH", f"/repos/{self.repository}/issues/comments/{comment['id']}",
                                       {"body": body})
                return "updated", str((done or {}).get("html_url", ""))
        done, _ = self.request("POST", f"/repos/{self.repository}/issues/{number}/comments", {"body": body})
        return "created", str((done or {}).get("html_url", ""))


# --- the runner's files ---------------------------------------------------------------------------


def pull_request_number(event: Mapping[str, Any]) -> int | None:
    """The pull request an event payload (``GITHUB_EVENT_PATH``) is about: ``pull_request`` and
    ``pull_request_target`` events (None: any other)."""
    pull = event.get("pull_request")
    number = pull.get("number") if isinstance(pull, dict) else None
    return number if isinstance(number, int) and not isinstance(number, bool) and number > 0 else None


def write_outputs(path: str | Path, values: Mapping[str, str]) -> None:
    """Append ``values`` to the step's outputs file (``GITHUB_OUTPUT``), each in the multi-line
    form ``name<<DELIMITER``, its delimiter random and absent from its value."""
    parts = []
    for name, value in values.items():
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", name):
            raise ValueError(f"not an output name: {name!r}")
        delimiter = f"judgekit_{secrets.token_hex(16)}"
        while delimiter in value:  # never, short of a 128-bit collision; checked all the same
            delimiter = f"judgekit_{secrets.token_hex(16)}"
        parts.append(f"{name}<<{delimiter}\n{value}\n{delimiter}\n")
    with open(path, "a", encoding="utf-8") as out:
        out.write("".join(parts))


def append_summary(path: str | Path, markdown: str) -> None:
    """Append ``markdown`` to the job summary (``GITHUB_STEP_SUMMARY``), cut at whole lines to
    GitHub's limit with a note saying so."""
    note = "\n\u2026 (cut here: GitHub limits a job summary to 1 MiB; the whole summary is in the reports artifact)\n"
    text = _cut(markdown if markdown.endswith("\n") else markdown + "\n",
                lambda text: len(text.encode("utf-8")) <= SUMMARY_LIMIT, note)
    with open(path, "a", encoding="utf-8") as out:
        out.write(text)


def command_text(text: str) -> str:
    """``text`` as the message of a workflow command (``::error::...``): one line, ``%`` and line
    breaks escaped as the runner expects."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
