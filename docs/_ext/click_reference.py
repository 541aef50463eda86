"""The CLI reference: sphinx-click's ``click`` directive, with judgekit's help read as plain text
and every command's section a label.

Labels: each command's section (``judgekit-run``, ``judgekit-history-list``) can be linked from
any page, ``{ref}`judgekit-run``` or ``[run](reference/cli.md#judgekit-run)``, and a link to a
command that no longer exists fails the strict build.

Plain text: sphinx-click parses help text as reStructuredText, but judgekit writes its help for
a terminal: `code` in single backquotes, paths such as ``safety/risks/*.yaml``. ``_rewrite``
changes the lines sphinx-click generates before they are parsed: `code` becomes a literal, and
``*`` outside literals is escaped, so nothing reads as emphasis or a role. The ``.. option::``
lines sphinx-click writes itself pass through unchanged.
"""

from __future__ import annotations

import re
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.transforms import SphinxTransform
from sphinx.util import logging
from sphinx_click.ext import ClickDirective

logger = logging.getLogger(__name__)

_SPANS = re.compile(r"``.+?``|`[^`]+`", re.S)
_DIRECTIVE = re.compile(r"\s*\.\. ")


def plain(text: str) -> str:
    """``text`` with `code` as ``code`` and ``*`` outside literals escaped."""
    out, at = [], 0
    for match in _SPANS.finditer(text):
        out.append(text[at:match.start()].replace("*", r"\*"))
        span = match.group(0)
        out.append(span if span.startswith("``") else f"`{span}`")
        at = match.end()
    out.append(text[at:].replace("*", r"\*"))
    return "".join(out)


def _rewrite(app: Sphinx, ctx: Any, lines: list[str]) -> None:
    if not lines:
        return
    # A `span` may run over a line break, so the lines (each may hold several) are rewritten as
    # one text, joined by a character no help text holds.
    rewritten = plain("\0".join(lines)).split("\0")
    lines[:] = [line if _DIRECTIVE.match(line) else new for line, new in zip(lines, rewritten, strict=True)]


class LabelledClickDirective(ClickDirective):
    """sphinx-click's directive, its command sections marked for ``CommandLabels``."""

    def run(self) -> list[nodes.Node]:
        result = super().run()
        for top in result:
            for section in top.findall(nodes.section):
                section["judgekit_command"] = True
        return result


class CommandLabels(SphinxTransform):
    """Each command section's id becomes an explicit name too, which the standard domain
    (a transform at priority 850) records as a label. A transform, not the directive: under
    MyST's ``eval-rst`` the directive parses into a document of its own. (The id, not the title:
    ``show`` is both ``judgekit history show`` and ``judgekit prompt show``.)"""

    default_priority = 840

    def apply(self, **kwargs: Any) -> None:
        for section in self.document.findall(nodes.section):
            if not section.get("judgekit_command"):
                continue
            self.document.set_id(section)  # its ids, made in the directive's own document
            label = section["ids"][0]
            if self.document.nameids.get(label, label) != label:
                logger.warning("command label %r names another target too", label, location=section)
                continue
            if label not in section["names"]:
                section["names"].append(label)
            self.document.nameids[label] = label
            self.document.nametypes[label] = True


def setup(app: Sphinx) -> dict[str, Any]:
    app.setup_extension("sphinx_click")
    app.add_directive("click", LabelledClickDirective, override=True)
    app.add_transform(CommandLabels)
    for event in ("description", "options", "arguments", "epilog"):
        app.connect(f"sphinx-click-process-{event}", _rewrite)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
