"""Bidirectional controls in a record's text never reach a report raw.

U+202E and the other bidirectional marks, embeddings, overrides and isolates (U+061C, U+200E,
U+200F, U+202A-U+202E, U+2066-U+2069) reorder what a person reads: a trajectory id can show as
another. Each report shows them as the terminal does, through ``judgekit._util.text.printable``: the
visible escape ``\\u202e`` in the HTML dashboard (text, attributes, embedded metadata JSON and
the plots), the Markdown summary and the JUnit XML, as it already showed C0 controls.
"""

from __future__ import annotations

import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # before anything imports litellm

import json
from html.parser import HTMLParser
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
from test_judge_runner import MODEL, scripted_judge

from judgekit._util.text import json_text, one_line, printable
from judgekit.judge.resolve import JudgeOverride
from judgekit.report import JudgeStatus, ReportInput
from judgekit.report.html import write_html
from judgekit.report.junit import render_junit
from judgekit.report.markdown import render_markdown
from judgekit.run import RunOptions, run_suite
from judgekit.testing import ScriptedOpenAIServer

ALARM_S = 120  # the module's first case runs the example suite
ROOT = Path(__file__).resolve().parents[2]

BIDI = [pytest.param(chr(code), id=f"U+{code:04X}") for code in
        (0x061C, 0x200E, 0x200F, 0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2066, 0x2067, 0x2068, 0x2069)]
CONTROLS = [*BIDI, pytest.param("\x1b", id="C0_escape"), pytest.param("\x85", id="C1_next_line")]


@pytest.fixture(scope="module")
def record(tmp_path_factory):
    """The example suite, run once with the scripted judge."""
    tmp = tmp_path_factory.mktemp("report-bidi")
    with ScriptedOpenAIServer(scripted_judge) as srv:
        options = RunOptions(override=JudgeOverride(model=MODEL, api_base=srv.base_url), cache_dir=tmp / "cache")
        return run_suite(ROOT / "examples" / "email-update", options=options)


def hostile(record, char: str) -> ReportInput:
    """Every kind of text from a record holding ``char``: the trajectory id, rubric, source,
    metadata, a claim and its citation, a check's reason, a lost point, the suite, and a judge
    whose calibration is plotted."""
    record = record.model_copy(deep=True)
    record.suite = f"suite{char}name"
    result = next(r for r in record.results if r.axes["faithfulness"].claims)
    result.trajectory_id = f"safe{char}evil"
    result.rubric = f"rubric{char}name"
    result.source = f"source{char}file"
    result.metadata = {f"key{char}": f"value{char}"}
    result.axes["faithfulness"].claims[0].claim = f"claim{char}text"
    result.axes["faithfulness"].claims[0].evidence = [{"id": f"cite{char}id", "quote": f"quote{char}text"}]
    result.axes["task_success"].checks[0].reason = f"reason{char}text"
    result.axes["tool_correctness"].items[0].reason = f"lost{char}point"
    judge = JudgeStatus(axis="faithfulness", rubric=f"judged{char}rubric", model_pin="m", endpoint="e",
                        fingerprint="f", status="approved", verdicts=1, kappa=0.7, kappa_low=0.5, kappa_high=0.9,
                        labelled=40, reason=f"why{char}so")
    return ReportInput(record=record, judges=[judge])


def shown(char: str) -> str:
    """The visible escape of ``char``, as the terminal shows it."""
    return f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}"


class Rows(HTMLParser):
    """The trajectory rows' ``data-tid`` attributes and the page's text, decoded."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.tids: list[str] = []
        self.text: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "details" and "data-tid" in attrs:
            self.tids.append(attrs["data-tid"])

    def handle_data(self, data):
        self.text.append(data)


@pytest.mark.parametrize("char", CONTROLS)
def test_the_dashboard_writes_no_raw_control_and_shows_its_escape(record, tmp_path, char):
    path = tmp_path / "dashboard.html"
    write_html(hostile(record, char), path)
    text = path.read_text(encoding="utf-8")
    assert char not in text
    escape = shown(char)
    page = Rows(text)
    assert f"safe{escape}evil" in page.tids  # the attribute
    seen = "".join(page.text)
    for field in ("safe", "suite", "rubric", "source", "claim", "cite", "quote", "reason", "lost", "why", "judged"):
        assert f"{field}{escape}" in seen, field  # each text, and the plot's tick label
    in_json = f"\\u{ord(char):04x}" if char < " " else escape  # JSON escapes a C0 control itself
    assert f"key{in_json}" in seen and f"value{in_json}" in seen  # inside the metadata's JSON


@pytest.mark.parametrize("char", CONTROLS)
def test_markdown_writes_no_raw_control_and_shows_its_escape(record, char):
    text = render_markdown(hostile(record, char))
    assert char not in text
    assert f"suite\\{shown(char)}name" in text  # the backslash itself escaped: Markdown shows \u202e


@pytest.mark.parametrize("char", CONTROLS)
def test_junit_writes_no_raw_control_and_shows_its_escape(record, char):
    text = render_junit(hostile(record, char))
    assert char not in text
    names = {case.get("name") for case in ET.fromstring(text.encode("utf-8")).iter("testcase")}
    assert f"safe{shown(char)}evil" in names


@pytest.mark.parametrize("char", BIDI)
def test_the_terminal_escapes_the_same_characters(char):
    assert printable(f"a{char}b") == one_line(f"a{char}b") == f"a{shown(char)}b"
    assert json_text(json.dumps(char, ensure_ascii=False)) == json.dumps(char)  # still JSON, and the same
