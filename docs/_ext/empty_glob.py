"""Make ``suppress_warnings = ["toc.empty_glob"]`` work.

Sphinx (8.2 to at least 9.0.4) logs "toctree glob pattern ... didn't match any documents" with
the subtype ``empty_glob`` but no type, so ``suppress_warnings`` cannot name it
(sphinx-doc/sphinx#14625). This filter drops exactly that warning when the configuration asks
for it, ahead of Sphinx's own filters (which count every warning they let through as an error
under ``-W``). Once Sphinx sets the type, its own suppression does the same and this is inert.
"""

from __future__ import annotations

import logging
from typing import Any

from sphinx.application import Sphinx

NAME = "toc.empty_glob"


class _EmptyGlobFilter(logging.Filter):
    def __init__(self, app: Sphinx):
        super().__init__()
        self.app = app

    def filter(self, record: logging.LogRecord) -> bool:
        return not (getattr(record, "subtype", None) == "empty_glob" and not getattr(record, "type", None)
                    and NAME in self.app.config.suppress_warnings)


def setup(app: Sphinx) -> dict[str, Any]:
    for handler in logging.getLogger("sphinx").handlers:
        handler.filters.insert(0, _EmptyGlobFilter(app))
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
