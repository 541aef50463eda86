"""Sphinx configuration of judgekit's documentation site.

Build it strictly (every warning an error) from the repository root:

    python -m sphinx -W --keep-going -b html docs docs/_build/html

Pages are Markdown (MyST). The reference pages are generated from the code at build time:
the CLI by sphinx-click from the click objects, file formats, exit codes and the axis table by
``_ext/judgekit_reference.py``. Nothing is fetched from the network, at build or view time.
"""

from __future__ import annotations

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
# The judgekit being documented is the one in this checkout, whatever else is installed.
sys.path[:0] = [str(ROOT), str(DOCS / "_ext")]

from judgekit import __version__  # noqa: E402 - after the path is set

project = "judgekit"
author = "judgekit contributors"
copyright = "judgekit contributors, MIT licence"
release = version = __version__

extensions = [
    "myst_parser",
    "sphinx_click",
    "click_reference",
    "judgekit_reference",
]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]

# Curly quotes, but "--flag" stays two hyphens (the default would print an en dash).
smartquotes_action = "qe"

myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

html_theme = "furo"
html_title = "judgekit"
html_static_path = ["_static"]
html_css_files = ["judgekit.css"]
html_show_sourcelink = False
html_copy_source = False
html_last_updated_fmt = None
pygments_style = "friendly"
pygments_dark_style = "monokai"
