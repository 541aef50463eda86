"""One root error and its children.

The CLI turns every ``JudgekitError`` into one line and exit code 2; anything else is an
internal error (exit 1).
"""

from __future__ import annotations

from pathlib import Path


class JudgekitError(Exception):
    """Root of every error judgekit raises on purpose."""


class InputError(JudgekitError):
    """Bad user input: a file that does not parse, a value out of range, a missing file.

    ``path`` and ``line`` (1-based) locate the problem when known, and the message starts
    with ``path:line:`` so a person can jump straight to it.
    """

    def __init__(self, message: str, path: str | Path | None = None, line: int | None = None):
        self.path = str(path) if path is not None else None
        self.line = line
        self.detail = message
        where = ""
        if self.path is not None:
            where = f"{self.path}:{line}: " if line is not None else f"{self.path}: "
        super().__init__(f"{where}{message}")


class ConfigError(JudgekitError):
    """A setting that cannot work (an unpinned judge model, a missing API key variable...)."""
