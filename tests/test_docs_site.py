"""The documentation site (``docs/``): built once per session with the strict command the docs
give (``python -m sphinx -W --keep-going -b html docs OUT``, every warning an error); its
generated reference checked against the code (every option of every command, every schema,
every exit code, every axis); strictness proved by a copy of the docs with one broken link;
no script or stylesheet from another host; and the home page and the CLI reference opened in
headless Chromium with no console error and no network request.

The browser test follows the dashboard's (``test_dashboard``): Debian's ``chromium`` and
``chromium-driver``, a skip without them unless ``JUDGEKIT_REQUIRE_BROWSER=1``. It saves
``test-artifacts/docs-home.png`` and ``test-artifacts/docs-cli.png`` (git-ignored).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
import zlib
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import click
import pytest
from test_dashboard import browser_or_skip, chromium

from judgekit.axes import AXES
from judgekit.ci import exit_codes
from judgekit.cli import main as cli_main

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
SCHEMAS = ROOT / "schemas"
EXTERNAL = re.compile(r"(?i)^\s*(https?:|wss?:|ftp:|//)")


@dataclass
class Build:
    returncode: int
    stderr: str
    seconds: float
    out: Path


def strict_build(source: Path, out: Path) -> Build:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-b", "html", str(source), str(out)],
                          capture_output=True, text=True, timeout=600)
    return Build(done.returncode, done.stderr, time.perf_counter() - started, out)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Build:
    build = strict_build(DOCS, tmp_path_factory.mktemp("docs-site") / "html")
    print(f"\ndocs site: strict build in {build.seconds:.1f} s")
    return build


@pytest.fixture(scope="module")
def built(site) -> Path:
    """The built site's folder, once the strict build passed."""
    assert site.returncode == 0, (
        f"the strict docs build failed (pip install -e '.[docs]' installs its tools):\n{site.stderr}")
    return site.out


# --- reading the built pages ------------------------------------------------------------------


class Reading(HTMLParser):
    """What the tests read of a built page: element ids, each ``cmdoption-`` entry's option
    names under the command section it sits in, table rows as cell texts, script and
    stylesheet addresses."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.options: dict[str, set[str]] = {}
        self.rows: list[list[str]] = []
        self.loads: list[str] = []
        self._sections: list[str] = []
        self._tags: list[str] = []
        self._in_option = False
        self._in_name = 0
        self._row: list[str] | None = None
        self._cell: list[str] | None = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.add(attrs["id"])
        if tag == "section":
            self._sections.append(attrs.get("id", ""))
        elif tag == "dt" and attrs.get("id", "").startswith("cmdoption-"):
            self._in_option = True
        elif tag == "span" and self._in_option and "sig-name" in (attrs.get("class") or "").split():
            self._in_name = 1
        elif tag == "span" and self._in_name:
            self._in_name += 1
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []
        elif tag == "script" and attrs.get("src"):
            self.loads.append(attrs["src"])
        elif tag == "link" and attrs.get("href") and attrs.get("rel") in ("stylesheet", "preload", "modulepreload",
                                                                          "icon", "prefetch", "preconnect"):
            self.loads.append(attrs["href"])

    def handle_endtag(self, tag):
        if tag == "section" and self._sections:
            self._sections.pop()
        elif tag == "dt":
            self._in_option = False
        elif tag == "span" and self._in_name:
            self._in_name -= 1
        elif tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.rows.append(self._row)
            self._row = None

    def handle_data(self, data):
        if self._in_name and self._sections:
            self.options.setdefault(self._sections[-1], set()).add(data.strip())
        if self._cell is not None:
            self._cell.append(data)


def read(path: Path) -> Reading:
    return Reading(path.read_text(encoding="utf-8"))


def labels(built: Path) -> set[str]:
    """The ``std:label`` names in the site's ``objects.inv`` (four header lines, then zlib)."""
    data = (built / "objects.inv").read_bytes()
    body = zlib.decompress(data.split(b"\n", 4)[4]).decode()
    return {line.split(" ", 1)[0] for line in body.splitlines() if line.split(" ")[1:2] == ["std:label"]}


def commands(command: click.Command, path: tuple[str, ...] = ("judgekit",)):
    """(path, command) for the group and every command and subcommand under it."""
    yield path, command
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            yield from commands(sub, (*path, name))


# --- the strict build and the generated reference -----------------------------------------------


def test_the_docs_build_strictly_with_no_warning(site):
    assert site.returncode == 0, site.stderr
    assert "WARNING" not in site.stderr and "ERROR" not in site.stderr, site.stderr


def test_the_cli_reference_has_every_option_of_every_command(built):
    page = read(built / "reference" / "cli.html")
    linkable = labels(built)
    checked = 0
    for path, command in commands(cli_main):
        section = "-".join(path)
        assert section in page.ids, f"no section for `{' '.join(path)}`"
        assert section in linkable, f"`{' '.join(path)}` cannot be linked as {section}"
        # sphinx-click documents what --help shows: every option but the hidden ones and --help.
        wanted = {name for param in command.params if isinstance(param, click.Option) and not param.hidden
                  for name in (*param.opts, *param.secondary_opts)}
        assert wanted <= page.options.get(section, set()), f"`{' '.join(path)}` is missing options"
        checked += len(wanted)
    assert checked > 100  # the walk did reach the subcommands' options


def test_the_file_formats_page_has_a_section_per_schema(built):
    page_file = built / "reference" / "file-formats.html"
    page = read(page_file)
    text = page_file.read_text(encoding="utf-8")
    schemas = sorted(SCHEMAS.glob("*.schema.json"))
    assert len(schemas) >= 10
    for path in schemas:
        name = path.name.removesuffix(".schema.json")
        schema = json.loads(path.read_text(encoding="utf-8"))
        assert f"schema-{name}" in page.ids, name
        section = text[text.index(f'<section id="schema-{name}"'):]
        section = section[:section.find("<section", 1)] if "<section" in section[1:] else section
        for field in schema["properties"]:
            assert f'<span class="pre">{field}</span>' in section, f"{name}: field {field}"
        for definition in schema.get("$defs", {}):
            assert f"schema-{name}-{definition}".lower() in page.ids, f"{name}: $defs/{definition}"


def test_the_exit_code_table_is_the_code(built):
    rows = read(built / "reference" / "exit-codes.html").rows
    constants = sorted((value, name) for name, value in vars(exit_codes).items() if name.startswith("EXIT_"))
    assert len(constants) >= 6
    # A meaning's `code` is shown as a literal: compare the words.
    assert rows[1:] == [[str(value), name, exit_codes.MEANINGS[value].replace("`", "")] for value, name in constants]


def test_the_axis_table_is_the_registry(built):
    rows = read(built / "reference" / "axes.html").rows
    assert [row[:2] for row in rows[1:]] == [[axis.name, axis.kind] for axis in AXES.values()]
    for row, axis in zip(rows[1:], AXES.values(), strict=True):
        assert row[2].startswith(axis.figure) and axis.description.split()[0] in row[4]


def test_a_broken_internal_link_fails_the_strict_build(tmp_path):
    # The copy sits beside the schemas and the package it documents, as docs/ does.
    repo = tmp_path / "repo"
    shutil.copytree(DOCS, repo / "docs", ignore=shutil.ignore_patterns("_build"))
    for name in ("schemas", "judgekit"):
        (repo / name).symlink_to(ROOT / name, target_is_directory=True)
    about = repo / "docs" / "about.md"
    about.write_text(about.read_text(encoding="utf-8") + "\nSee [the missing page](no-such-page.md).\n",
                     encoding="utf-8")
    build = strict_build(repo / "docs", tmp_path / "html")
    print(f"\nbroken-link build: {build.seconds:.1f} s")
    assert build.returncode != 0
    warnings = [line for line in build.stderr.splitlines() if "WARNING" in line]
    assert len(warnings) == 1 and "about.md" in warnings[0] and "no-such-page" in warnings[0], build.stderr


def test_no_page_loads_a_script_or_stylesheet_from_another_host(built):
    pages = sorted(built.rglob("*.html"))
    assert len(pages) >= 5
    for page in pages:
        loads = read(page).loads
        assert loads, page  # the reader did see the theme's own files
        assert [address for address in loads if EXTERNAL.match(address)] == [], page
    for sheet in built.rglob("*.css"):
        assert not re.search(r"(?i)(@import\s+|url\(\s*['\"]?)(https?:|//)", sheet.read_text(encoding="utf-8")), sheet


# --- in headless Chromium -----------------------------------------------------------------------


def test_home_page_and_cli_reference_in_headless_chromium(built, tmp_path):
    browser_or_skip()
    from selenium.webdriver.common.by import By

    artifacts = ROOT / "test-artifacts"
    artifacts.mkdir(exist_ok=True)
    driver = chromium(tmp_path / "profile")
    try:
        for page, shot_name, heading in ((built / "index.html", "docs-home.png", "judgekit"),
                                        (built / "reference" / "cli.html", "docs-cli.png", "Command line")):
            url = page.as_uri()
            driver.get(url)
            assert driver.execute_script("return document.readyState") == "complete"
            errors = [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
            assert errors == [], url
            sent = [message["params"]
                    for message in (json.loads(entry["message"])["message"] for entry in driver.get_log("performance"))
                    if message["method"] == "Network.requestWillBeSent"]
            ours = [p["request"]["url"] for p in sent if url in (p.get("documentURL"), p["request"]["url"])]
            assert url in ours and len(ours) > 3  # the log did see the page and the theme's files
            assert [address for address in ours if not address.startswith(("file:", "data:"))] == [], url
            # Nothing at all went out (the browser's own start page asks for chrome:// resources only).
            assert [p["request"]["url"] for p in sent if EXTERNAL.match(p["request"]["url"])] == [], url

            # A docs site: the page's heading, the sidebar's navigation, the theme's stylesheet applied.
            assert driver.find_element(By.TAG_NAME, "h1").text.startswith(heading)
            sidebar = driver.find_element(By.CSS_SELECTOR, ".sidebar-tree")
            assert sidebar.is_displayed() and "Command line" in sidebar.text
            assert driver.execute_script(
                "return getComputedStyle(document.body).fontFamily") != "\"Times New Roman\""

            shot = artifacts / shot_name
            assert driver.save_screenshot(str(shot))
            assert shot.stat().st_size > 10_000
            print(f"screenshot: {shot}")
    finally:
        driver.quit()
