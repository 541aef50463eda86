"""The one writer of reports: every renderer returns text, and only this writes it."""

from __future__ import annotations

from pathlib import Path


def write_report(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` with every secret masked (``judgekit._util.text.redact``), all
    at once: the old file stays until the new one is whole, and nothing half-written is left."""
    from judgekit._util.files import write_text_atomically

    write_text_atomically(path, text, mask_secrets=True)
