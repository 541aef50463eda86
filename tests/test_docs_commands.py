"""The commands that README.md and docs/getting-started.md tell a new user to type, run as typed.

Every ```bash block in those two pages carries a mark in the HTML comment lines just above it
(other comments, such as `.ci/run`'s `<!-- example-command -->`, may stand beside it):

    <!-- run -->                   run it; it must exit 0
    <!-- run: exit N -->           run it; it must exit N (the page says why)
    <!-- no-run: REASON -->        never run here (an install, a step as root), and why

The blocks marked to run are run in page order, each page in its own temporary folder holding a
copy of the example files (so a page may build on its earlier commands, as a reader does), with
`judgekit` resolving to `python -m judgekit` of this checkout. A block is one bash script run
with `set -e`: its status is its first failing command's, or its last command's.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = ["README.md", "docs/getting-started.md"]
# What the pages' commands read, copied into each page's working folder.
COPIED = ["examples", "rubrics", "calibration", "schemas"]
MARK = re.compile(r"<!--\s*(run(?::\s*exit\s+(?P<code>\d+))?|no-run:\s*(?P<reason>\S.*?))\s*-->")
COMMENT = re.compile(r"<!--.*-->")


@dataclass(frozen=True)
class Block:
    page: str
    line: int  # of the opening fence, 1-based
    script: str
    run: bool
    expected: int | None  # the exit status it must have, when run
    marks: tuple[str, ...]  # every mark found above it (exactly one is right)


def bash_blocks(page: str) -> list[Block]:
    """The page's ```bash blocks with the marks in the comment lines just above each."""
    lines = (ROOT / page).read_text(encoding="utf-8").splitlines()
    blocks, i = [], 0
    while i < len(lines):
        if lines[i].strip() != "```bash":
            i += 1
            continue
        above, j = [], i - 1
        while j >= 0 and COMMENT.fullmatch(lines[j].strip()):
            above.append(lines[j].strip())
            j -= 1
        end = next(k for k in range(i + 1, len(lines)) if lines[k].strip() == "```")
        marks = [m for m in (MARK.fullmatch(c) for c in above) if m]
        first = marks[0] if marks else None
        blocks.append(Block(page=page, line=i + 1, script="\n".join(lines[i + 1:end]),
                            run=bool(first) and first["reason"] is None,
                            expected=int(first["code"] or 0) if first and first["reason"] is None else None,
                            marks=tuple(m[0] for m in marks)))
        i = end + 1
    return blocks


@pytest.mark.parametrize("page", PAGES)
def test_every_bash_block_says_whether_it_runs(page):
    blocks = bash_blocks(page)
    assert blocks, f"{page}: no ```bash block found"
    unmarked = [f"{page}:{b.line}: {b.marks or 'no mark'}" for b in blocks if len(b.marks) != 1]
    assert unmarked == [], "each block needs exactly one <!-- run --> or <!-- no-run: reason -->"


def test_the_ci_marks_stand_just_above_their_commands():
    """`.ci/run` takes the first line of the ```bash block after each mark: it must be the command."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    for mark in ("example-command", "test-command", "browser-command"):
        at = lines.index(f"<!-- {mark} -->")
        assert lines[at + 1] == "```bash" and lines[at + 2].strip(), mark


def test_the_readme_stays_a_ramp():
    """Issue 29: one screen to a few, the reference living in docs/."""
    assert len((ROOT / "README.md").read_bytes()) <= 10_240


def test_the_readme_links_into_docs_resolve():
    links = re.findall(r"\]\((docs/[^)#\s]+)", (ROOT / "README.md").read_text(encoding="utf-8"))
    assert links and [link for link in links if not (ROOT / link).is_file()] == []


def judgekit_on_path(folder: Path) -> dict[str, str]:
    """An environment where `judgekit` is `python -m judgekit` of this checkout."""
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "judgekit"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m judgekit "$@"\n', encoding="utf-8")
    shim.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
            "LITELLM_LOCAL_MODEL_COST_MAP": "True", "COLUMNS": "100", "NO_COLOR": "1"}


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES)
def test_the_commands_a_page_gives_run_as_it_says(page, tmp_path):
    to_run = [b for b in bash_blocks(page) if b.run]
    assert to_run, f"{page}: no block is marked <!-- run -->"
    work = tmp_path / "work"
    work.mkdir()
    for part in COPIED:
        shutil.copytree(ROOT / part, work / part)
    env = judgekit_on_path(tmp_path)
    for block in to_run:
        done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", block.script], cwd=work, env=env,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == block.expected, (
            f"{page}:{block.line} exited {done.returncode}, the page says {block.expected}\n"
            f"$ {block.script}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
