"""Text from a record as the dashboard shows it: masked, its control and bidirectional
characters escaped, HTML-escaped and cut; numbers and percentages; table cells a test can read;
anchors for trajectory ids. Every piece of a record's text reaches the page through these."""

from __future__ import annotations

import html

from judgekit._util.text import change_text, printable, redact

MAX_TEXT = 2000
"""Characters of one text from a record (a claim, a quote, a reason) shown before it is cut."""


def _plain(value) -> str:
    """Text from a record as the page shows it, before HTML escaping (matplotlib escapes a
    plot's labels itself): secrets masked, control and bidirectional characters escaped."""
    return printable(redact(str(value)))


def _e(value) -> str:
    """Escaped text from a record, cut at ``MAX_TEXT`` characters."""
    text = _plain(value)  # masked before the cut: half a key no longer looks like one
    if len(text) > MAX_TEXT:
        text = text[:MAX_TEXT] + f"… ({len(text) - MAX_TEXT} more characters)"
    return html.escape(text, quote=True)


def _num(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def _change(relative_drop: float | None) -> str:
    """A change against the baseline as the page shows it (``change_text``: a drop is negative,
    marked ▼), or a dash."""
    return "—" if relative_drop is None else change_text(relative_drop)


def _td(axis: str, name: str, text: str, value=None, cls: str = "") -> str:
    """A table cell a test (or a script) can read: ``data-axis``, ``data-field`` and the raw value."""
    raw = "" if value is None else f' data-value="{_e(value)}"'
    klass = f' class="{cls}"' if cls else ""
    return f'<td data-axis="{_e(axis)}" data-field="{name}"{raw}{klass}>{text}</td>'


def _anchor(trajectory_id: str) -> str:
    """A stable, safe anchor for a trajectory id (ids are hostile text)."""
    import hashlib

    return hashlib.sha256(trajectory_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]
