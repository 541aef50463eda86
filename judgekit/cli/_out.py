"""Everything the CLI prints goes through here: control characters escaped, secrets masked.

Text from files judgekit did not write (trajectory ids, outputs, paths in error messages) never
reaches the terminal raw, and an API key a server echoed never reaches it at all. Values put
inside a line are escaped with ``one_line`` where the line is built; ``say`` then escapes what
is left (``printable``) and masks secrets (``redact``).
"""

from __future__ import annotations

import click

from judgekit._util.text import json_text, one_line, printable, redact

__all__ = ["one_line", "say", "say_json", "say_rendered"]


def say(text: str = "", *, err: bool = False, nl: bool = True) -> None:
    """Plain text: control characters escaped (line breaks and tabs kept), secrets masked."""
    click.echo(redact(printable(text)), err=err, nl=nl)


def say_json(text: str, *, err: bool = False) -> None:
    """JSON text: what JSON leaves raw but a terminal obeys escaped as \\uXXXX, secrets masked."""
    click.echo(redact(json_text(text)), err=err)


def say_rendered(text: str, *, err: bool = False) -> None:
    """Output rich rendered (its cells escaped at the source, its styling kept): secrets masked."""
    click.echo(redact(text), err=err, nl=False)
