"""Hostile tests of issue 13's reports and tools (sections 3 and 4): the JUnit XML, Markdown
and HTML reports, `judgekit report` / `run --junit/--markdown/--html`, the pytest plugin and
`judgekit run --dry-run`.

Runs are real: a copy of the example suite judged by the scripted judge (its judge has no
approval record: faithfulness is advisory), and once against a port nothing listens on (the
judge is down). Hostile records are the real record edited in memory, as `run --markdown`
would hold it, or its file edited. Each failing test names the behaviour that should hold.
"""

from __future__ import annotations

import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # before anything imports litellm

import hashlib
import json
import re
import shutil
import socket
import time
from html.parser import HTMLParser
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
from click.testing import CliRunner
from junitparser import Error, Failure, JUnitXml, Skipped
from test_judge_runner import MODEL, example_suite, scripted_judge

from judgekit.cli import main as cli_main
from judgekit.ci.compare import compare
from judgekit.run.rows import judge_fingerprint
from _records import rows_as_claimed
from judgekit.judge.resolve import JudgeOverride
from judgekit.report import ReportInput, report_input, write_reports
from judgekit.report.html import render_html, write_html
from judgekit.report.junit import outcome_map, render_junit, write_junit, xml_safe
from judgekit.report.markdown import render_markdown, write_markdown
from judgekit.run import RunOptions, run_suite
from judgekit.run.record import summarise
from judgekit.testing import ScriptedOpenAIServer

pytest_plugins = ["pytester"]

ALARM_S = 240  # a case may run the suite (seconds), a pytest subprocess or a browser

ROOT = Path(__file__).resolve().parents[2]
KEY = "sk-proj-A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6"
"""An OpenAI-shaped key without an underscore: the masking regex knows its shape."""


def cli(*args) -> tuple[int, str]:
    result = CliRunner().invoke(cli_main, [str(a) for a in args], catch_exceptions=False)
    return result.exit_code, result.output


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def server():
    with ScriptedOpenAIServer(scripted_judge) as srv:
        yield srv


@pytest.fixture(scope="module")
def world(server, tmp_path_factory):
    """The example suite copied, run once with the scripted judge into ``r1.jsonl``."""
    tmp = tmp_path_factory.mktemp("reports-tools")
    suite = example_suite(tmp / "suite")
    options = RunOptions(override=JudgeOverride(model=MODEL, api_base=server.base_url), cache_dir=tmp / "cache")
    record = run_suite(suite, options=options, out=tmp / "r1.jsonl")
    return {"tmp": tmp, "suite": suite, "record": record, "file": tmp / "r1.jsonl", "options": options}


def fresh(world):
    return world["record"].model_copy(deep=True)


def approved(record):
    """The record as if its faithfulness judge were approved by calibration: its verdicts gate."""
    for seen in record.judges:
        seen.axes = {axis: "approved" for axis in seen.axes}
    return record


def resummarise(record, run_id_suffix: str = ""):
    record.summary = summarise(record.results)
    record.trajectories = len(record.results)
    record.run_id += run_id_suffix
    return record


def with_unsupported_claims(record, text: str):
    """Every claim of the first trajectory's faithfulness verdict says ``text``, unsupported."""
    faith = record.results[0].axes["faithfulness"]
    for claim in faith.claims:
        claim.claim, claim.supported = text, False
    faith.supported, faith.score = 0, 0.0
    return resummarise(record, "-claims")


def junit_counts(xml: JUnitXml) -> dict[str, dict[str, int]]:
    found = {}
    for suite in xml:
        cases = list(suite)
        counts = {"tests": len(cases),
                  "failures": sum(isinstance(r, Failure) for c in cases for r in c.result),
                  "errors": sum(isinstance(r, Error) for c in cases for r in c.result),
                  "skipped": sum(isinstance(r, Skipped) for c in cases for r in c.result)}
        assert (suite.tests, suite.failures, suite.errors, suite.skipped) == tuple(counts.values())
        found[suite.name.rsplit(".", 1)[1]] = counts
    return found


class Page(HTMLParser):
    """Scripts, textareas, the title, every src/href and the trajectory rows of a page."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.scripts = 0
        self.tags: list[str] = []
        self.attr_names: set[str] = set()
        self.links: list[str] = []
        self.rows: list[dict] = []
        self.title = ""
        self._in_title = False
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append(tag)
        self.attr_names.update(attrs)
        self.scripts += tag == "script"
        self.links += [v for k, v in attrs.items() if k in ("src", "href", "xlink:href", "action", "data") and v]
        if tag == "details" and "traj" in (attrs.get("class") or ""):
            self.rows.append(attrs)
        self._in_title = tag == "title" and not self.title

    def handle_data(self, data):
        if self._in_title:
            self.title += data

    def handle_endtag(self, tag):
        if tag == "title":
            self._in_title = False


# =====================================================================================================
# JUnit: counts against the record
# =====================================================================================================


def test_junit_counts_match_the_record_with_approved_advisory_unscored_error_and_missing_axes(world):
    """Worked out from the results alone: approved verdicts gate, an advisory task-success judge
    leaves the deterministic checks gating, unscored skips, an error errs, a missing axis is no case."""
    record = approved(fresh(world))
    judge = record.results[0].axes["faithfulness"].judge
    record.results[1].axes["faithfulness"] = record.results[1].axes["faithfulness"].model_copy(
        update={"status": "unscored", "score": None, "unscored_reason": "parse_failure"})
    record.results[2].axes["tool_correctness"] = record.results[2].axes["tool_correctness"].model_copy(
        update={"status": "error", "score": None, "error": "bad snapshot"})
    for result in record.results[4:6]:
        del result.axes["faithfulness"]  # an axis missing for some trajectories
    # task success in judge mode, by a judge approved for faithfulness only: advisory there
    for result in (record.results[0], record.results[7]):
        result.axes["task_success"] = result.axes["task_success"].model_copy(update={"judge": judge})
    resummarise(record)
    ok = {(seen.fingerprint, axis) for seen in record.judges for axis, s in seen.axes.items() if s == "approved"}
    expected: dict[str, dict[str, int]] = {}
    for result in record.results:
        for axis, res in result.axes.items():
            c = expected.setdefault(axis, {"tests": 0, "failures": 0, "errors": 0, "skipped": 0})
            c["tests"] += 1
            if res.status == "error":
                c["errors"] += 1
            elif res.judge is not None and (judge_fingerprint(res.judge), axis) not in ok:
                assert axis == "task_success"
                c["failures"] += not all(ch.passed for ch in res.checks if ch.source == "deterministic")
            elif res.status == "unscored":
                c["skipped"] += 1
            elif res.score < 1.0:
                c["failures"] += 1
    xml = JUnitXml.fromstring(render_junit(ReportInput(record=record)).encode())
    assert junit_counts(xml) == expected
    assert expected["faithfulness"]["tests"] == 7 and expected["faithfulness"]["skipped"] == 1
    root = ET.fromstring(render_junit(ReportInput(record=record)).encode())
    assert int(root.get("tests")) == sum(c["tests"] for c in expected.values())
    assert int(root.get("failures")) == sum(c["failures"] for c in expected.values())


def test_junit_hostile_ids_inject_no_element_and_stay_one_case_each(world):
    """An id that closes the testcase, opens CDATA or holds NUL parses as text, one case per id."""
    record = fresh(world)
    ids = ['"]]></testcase><testcase name="injected"/><![CDATA[', "a'b\"c&d<e>f", "nul\x00and\x1bescape",
           "\ufffe\U0001f600", "x" * 5000]
    for result, tid in zip(record.results, ids):
        result.trajectory_id = tid
    text = render_junit(ReportInput(record=record))
    ET.fromstring(text.encode("utf-8"))
    xml = JUnitXml.fromstring(text.encode("utf-8"))
    names = [case.name for suite in xml for case in suite]
    assert "injected" not in names
    assert len(names) == 3 * len(record.results)
    for tid in ids:
        assert names.count(xml_safe(tid)) == 3


def test_junit_of_an_empty_run_is_not_an_all_green_report(world):
    """A run with no trajectory fails closed (the comparison says so): its JUnit, what a CI's
    test report reads, must carry a failure or an error, not 0 tests and 0 failures."""
    record = fresh(world)
    record.results = []
    resummarise(record, "-empty")
    comparison = compare(rows_as_claimed(record), rows_as_claimed(world["record"]), baseline_source="file")
    assert not comparison.passed
    xml = JUnitXml.fromstring(render_junit(report_input(record, comparison=comparison)).encode())
    root = ET.fromstring(render_junit(report_input(record, comparison=comparison)).encode())
    assert int(root.get("failures")) + int(root.get("errors")) > 0, (
        f"JUnit of an empty, failed run says tests={root.get('tests')} failures={root.get('failures')} "
        f"errors={root.get('errors')}: a CI test report shows it green ({len(list(xml))} testsuites)")


# =====================================================================================================
# A judge that is down
# =====================================================================================================


@pytest.fixture(scope="module")
def down(tmp_path_factory):
    """The example suite run against a judge nobody answers for (connection refused)."""
    tmp = tmp_path_factory.mktemp("judge-down")
    suite = example_suite(tmp / "suite")
    options = RunOptions(override=JudgeOverride(model=MODEL, api_base=f"http://127.0.0.1:{free_port()}/v1"),
                         cache_dir=tmp / "cache")
    return run_suite(suite, options=options)


def test_an_unreachable_judges_verdicts_are_errors_that_say_the_judge_did_not_answer(down):
    """The judge never answered: the report must say so (the provider error), not that an answer
    it never gave is advisory; and a judge that is down is an error, never a skip that stays green."""
    assert down.summary["faithfulness"].unscored == len(down.results)
    found = outcome_map(down)
    messages = {found[(r.trajectory_id, "faithfulness")].message for r in down.results}
    reasons = {r.axes["faithfulness"].unscored_reason for r in down.results}
    assert reasons == {"provider_error"}
    assert all(m.startswith("error: the judge did not answer (provider_error)") for m in messages), messages
    assert {found[(r.trajectory_id, "faithfulness")].kind for r in down.results} == {"error"}


def test_pytest_items_of_a_judge_that_is_down_are_errors_and_the_session_fails(pytester):
    """`-k ok` selects a trajectory whose deterministic axes pass: with the judge down, its
    faithfulness item must be an error (nothing was judged), never a skip that leaves pytest green."""
    suite = example_suite(pytester.path / "suite")
    result = pytester.runpytest_subprocess(
        "--judgekit-suite", suite, "--judgekit-judge-model", MODEL,
        "--judgekit-judge-api-base", f"http://127.0.0.1:{free_port()}/v1", "--judgekit-cache-dir", "cache",
        "-p", "no:cacheprovider", "-rA", "-k", "ok and not field",
    )
    out = result.stdout.str()
    assert "PASSED suite/suite.yaml::ok::task_success" in out  # the run itself happened
    assert re.search(r"ERROR suite/suite.yaml::ok::faithfulness", out), out[-1500:]
    assert result.ret != 0


# =====================================================================================================
# Secrets
# =====================================================================================================


def test_every_report_masks_a_key_in_a_claim_a_quote_and_a_check_reason(world, tmp_path):
    record = approved(fresh(world))
    first = record.results[0]
    first.axes["faithfulness"].claims[0].evidence = [{"id": "R0", "quote": f"token={KEY}"}]
    first.axes["task_success"].checks[0].reason = f"saw {KEY} in the output"
    first.axes["task_success"].checks[0].passed = False
    with_unsupported_claims(record, f"the key is {KEY}")
    comparison = compare(rows_as_claimed(record), rows_as_claimed(world["record"]), baseline_source="file")
    paths = write_reports(report_input(record, comparison=comparison), junit=tmp_path / "j.xml",
                          markdown=tmp_path / "s.md", html=tmp_path / "d.html")
    body = KEY[len("sk-proj-"):]
    for path in paths:
        text = path.read_text(encoding="utf-8")
        assert body[:12] not in text, path.name
        shown = "\\[SECRET OpenAI Token sha256:" if path.suffix == ".md" else "[SECRET OpenAI Token sha256:"
        assert shown in text, path.name  # Markdown escapes the brackets


def test_markdown_masks_keys_that_hold_an_underscore(world, tmp_path):
    """OpenAI project keys and GitHub tokens (GITHUB_TOKEN is ghs_...) hold underscores;
    Markdown escapes them as \\_ before the mask runs, so the key shape no longer matches."""
    keys = ["sk-proj-ab_cdefghijklmnopqrstuvwxyz0123456789", "ghs_" + "Q7fz" * 9]
    record = with_unsupported_claims(fresh(world), f"keys {keys[0]} and {keys[1]}")
    comparison = compare(rows_as_claimed(record), rows_as_claimed(world["record"]), baseline_source="file")
    assert any("ab_cdef" in lost for r in comparison.regressions for lost in r.lost)
    write_markdown(report_input(record, comparison=comparison), tmp_path / "s.md")
    text = tmp_path / "s.md"
    shown = text.read_text(encoding="utf-8")
    assert "cdefghijklmnop" not in shown and "Q7fzQ7fzQ7fz" not in shown, [
        line for line in shown.splitlines() if "cdefghij" in line or "Q7fz" in line][:2]


def _leaks(text: str) -> list[str]:
    return re.findall(r"sk-proj-[A-Za-z0-9]+", text)


@pytest.mark.parametrize("fmt", ["junit", "markdown", "html"])
def test_a_text_cut_to_length_never_leaves_part_of_a_key_unmasked(world, tmp_path, fmt):
    """Long texts are cut (JUnit's message at 1000, Markdown's cells at 200-300, the page's at
    2000) before the mask runs: a key across the cut keeps its prefix and too few characters to
    match the key shape, and is written as it is."""
    leaked: dict[int, list[str]] = {}
    pads = {"junit": range(900, 1000), "markdown": range(120, 300), "html": range(1975, 1990, 2)}[fmt]
    for pad in pads:
        record = approved(with_unsupported_claims(fresh(world), "x" * pad + " " + KEY))
        data = report_input(record, comparison=compare(rows_as_claimed(record), rows_as_claimed(world["record"]),
                                                       baseline_source="file") if fmt == "markdown" else None)
        path = tmp_path / f"report.{fmt}"
        {"junit": write_junit, "markdown": write_markdown, "html": write_html}[fmt](data, path)
        found = _leaks(path.read_text(encoding="utf-8"))
        if found:
            leaked[pad] = found
    assert not leaked, f"{len(leaked)} cut position(s) leave part of the key, e.g. {next(iter(leaked.values()))}"


# =====================================================================================================
# Markdown
# =====================================================================================================


def test_markdown_hostile_text_breaks_no_table_code_span_html_or_mention(world):
    record = fresh(world)
    hostile = ["a|b` ``code`` <script>x</script> @octocat", "line\nbreak\r\n| --- |\u2028x\x1b[31m",
               "<!-- c --> [l](http://e.example) ![i](http://e.example/i.png) **b** ~~s~~ \\|", "@" * 400]
    for result, tid in zip(record.results, hostile):
        result.trajectory_id = tid
    with_unsupported_claims(record, "claim | with `tick` and <b>html</b> and\nnewline @team")
    comparison = compare(rows_as_claimed(record), rows_as_claimed(world["record"]), baseline_source="file")
    text = render_markdown(report_input(record, comparison=comparison))
    assert "<script" not in text and "<!--" not in text and "<b>" not in text and "\x1b" not in text
    assert "\u2028" not in text and "\r" not in text
    assert not re.search(r"(?<![\w&#;])@(?!&#8203;)\w", text), "a record's text mentions someone"
    assert "](http" not in text.replace("\\]", "")
    for block in text.split("\n\n"):
        rows = [line for line in block.splitlines() if line.startswith("|")]
        if rows:
            assert len({len(re.split(r"(?<!\\)\|", row)) for row in rows}) == 1, rows
    for line in text.splitlines():
        assert "`" not in line.replace("\\`", "")


# =====================================================================================================
# HTML
# =====================================================================================================


def test_dashboard_text_cannot_break_out_of_attributes_scripts_textareas_or_the_title(world):
    record = fresh(world)
    evil = '</textarea></title></script><script>alert(1)</script>" onload="x\' onerror=\'y'
    record.suite = evil
    record.run_id = evil
    record.results[0].trajectory_id = evil
    record.results[0].rubric = evil
    record.results[0].source = evil
    record.results[0].metadata = {"k": evil}
    record.results[0].axes["faithfulness"].claims[0].claim = evil
    record.results[0].axes["faithfulness"].claims[0].evidence = [{"id": evil, "quote": evil}]
    text = render_html(report_input(record))
    page = Page(text)
    assert page.scripts == 1 and "textarea" not in page.tags
    assert page.title == f"FAIL · {evil} · judgekit"
    assert not [name for name in page.attr_names if name.startswith("on")]  # no event handler injected
    assert [row["data-tid"] for row in page.rows].count(evil) == 1
    assert all(link.startswith("#") for link in page.links)


def test_dashboard_plot_text_with_math_and_controls_renders_and_stays_inside_its_svg(world):
    from judgekit.report import JudgeStatus

    record = fresh(world)
    judges = [JudgeStatus(axis="faithfulness", rubric=r, model_pin="m", endpoint="e", fingerprint=str(i),
                          status="approved", verdicts=1, kappa=0.7, kappa_low=0.5, kappa_high=0.9, labelled=40)
              for i, r in enumerate(["$\\frac{1}{0}$ $x^$", "</svg><script>alert(1)</script>", "a\x01b\x1bc"])]
    text = render_html(ReportInput(record=record, judges=judges))
    page = Page(text)
    assert page.scripts == 1
    figure = text.split('id="plot-calibration"', 1)[1].split("</figure>", 1)[0]
    assert figure.count("<svg") == 1 and figure.count("</svg>") == 1


def test_dashboard_fetches_nothing_whatever_the_texts_say(world):
    record = fresh(world)
    record.results[0].trajectory_id = "http://evil.example/x.js"
    record.results[0].axes["faithfulness"].claims[0].claim = (
        '<img src="http://evil.example/a.png"> url(http://evil.example/b) @import "http://evil.example/c.css"')
    record.results[0].metadata = {"src": "//evil.example/d"}
    text = render_html(report_input(record))
    page = Page(text)
    assert all(link.startswith("#") for link in page.links), page.links
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", text, re.IGNORECASE)
    assert "@import" not in text.replace("@import &quot;", "")
    assert "default-src 'none'" in text


def test_dashboard_of_an_empty_run_renders_beside_its_history(tmp_path):
    """A suite whose trajectories file is empty, run twice with --record --html: the second
    run has a trend (two runs) and no axis; the page must still be written."""
    suite = example_suite(tmp_path / "suite")
    (suite.parent / "trajectories.jsonl").write_text("", encoding="utf-8")
    args = ("run", suite, "--record", "--history", tmp_path / "h.sqlite", "--html", tmp_path / "d.html")
    first, _ = cli(*args)
    assert first == 0 and (tmp_path / "d.html").is_file()
    before = (tmp_path / "d.html").read_text(encoding="utf-8")
    code, out = cli(*args)
    assert code != 3, [line for line in out.splitlines() if "error" in line]  # an internal error
    assert (tmp_path / "d.html").read_text(encoding="utf-8") != before  # this run's page, not the last one's


def test_a_comparison_whose_baseline_lacks_an_axis_renders_in_every_format(world, tmp_path):
    baseline = fresh(world)
    for result in baseline.results:
        del result.axes["faithfulness"]
    resummarise(baseline, "-base")
    record = fresh(world)
    comparison = compare(rows_as_claimed(record), rows_as_claimed(baseline), baseline_source="file")
    faith = next(a for a in comparison.axes if a.axis == "faithfulness")
    assert faith.baseline_mean is None
    paths = write_reports(report_input(record, comparison=comparison), junit=tmp_path / "j.xml",
                          markdown=tmp_path / "s.md", html=tmp_path / "d.html")
    assert len(paths) == 3
    md = (tmp_path / "s.md").read_text(encoding="utf-8")
    row = next(line for line in md.splitlines() if line.startswith("| faithfulness"))
    assert "0.500" in row and "\u2013" in row  # its own mean, no baseline
    JUnitXml.fromfile(str(tmp_path / "j.xml"))


def test_a_20000_trajectory_run_renders_capped_and_in_seconds(world):
    base = world["record"]
    big = fresh(world)
    results = []
    for i in range(20_000):
        result = base.results[i % len(base.results)].model_copy(deep=True)
        result.trajectory_id = f"t{i:05d}-{result.trajectory_id}"
        results.append(result)
    big.results = results
    resummarise(big, "-big")
    data = report_input(big)
    timings, sizes = {}, {}
    for name, render in (("junit", render_junit), ("markdown", render_markdown), ("html", render_html)):
        started = time.perf_counter()
        text = render(data)
        timings[name], sizes[name] = time.perf_counter() - started, len(text.encode())
    print(f"\n20,000 trajectories: {timings} s, {sizes} bytes")
    page = Page(text)
    assert len(page.rows) == 2000 and 'data-left-out="18000"' in text
    assert sizes["html"] < 20_000_000 and sizes["markdown"] < 65_536
    assert all(t < 30 for t in timings.values())


def test_a_failing_report_write_keeps_the_good_file_and_leaves_no_temporary(world, tmp_path):
    target = tmp_path / "d.html"
    write_html(report_input(world["record"]), target)
    good = target.read_bytes()
    record = fresh(world)
    record.results[0].axes["faithfulness"].claims[0].claim = "cut \ud800 character"  # cannot be encoded
    with pytest.raises(UnicodeEncodeError):
        write_html(report_input(record), target)
    assert target.read_bytes() == good
    assert [p.name for p in tmp_path.iterdir()] == ["d.html"]


@pytest.mark.skipif(not (Path("/usr/bin/chromium").exists() and Path("/usr/bin/chromedriver").exists()),
                    reason="headless Chromium not installed")
def test_the_dashboard_filter_finds_ids_with_quotes_and_regex_characters(world, tmp_path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    record = fresh(world)
    odd = ['quote"d', "apos'trophe", "(.*)+[x]", "back\\slash", "</script>", "Ünïcode-İd", "a b  c"]
    for result, tid in zip(record.results, odd):
        result.trajectory_id = tid
    page_file = tmp_path / "d.html"
    write_html(report_input(record), page_file)
    options = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                f"--user-data-dir={tmp_path / 'profile'}"):
        options.add_argument(arg)
    options.binary_location = "/usr/bin/chromium"
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path="/usr/bin/chromedriver"), options=options)
    try:
        driver.get(page_file.as_uri())
        assert [e for e in driver.get_log("browser") if e["level"] == "SEVERE"] == []
        box = driver.find_element(By.ID, "f-text")
        for tid in odd:
            box.clear()
            box.send_keys(tid)
            shown = [row.get_attribute("data-tid") for row in driver.find_elements(By.CSS_SELECTOR, "details.traj")
                     if row.is_displayed()]
            assert tid in shown, (tid, shown)
        box.clear()
        box.send_keys("no such trajectory anywhere")
        assert not [r for r in driver.find_elements(By.CSS_SELECTOR, "details.traj") if r.is_displayed()]
        assert [e for e in driver.get_log("browser") if e["level"] == "SEVERE"] == []
    finally:
        driver.quit()


# =====================================================================================================
# judgekit report
# =====================================================================================================


def test_report_of_a_format_1_record_writes_every_report(world, tmp_path):
    lines = [json.loads(line) for line in world["file"].read_text().splitlines()]
    header, footer = lines[0]["header"], lines[-1]["footer"]
    v1 = {"format_version": 1, "suite": header["suite"], "suite_path": str(world["suite"]),
          "judgekit_version": "0.0.9", "started_at": header["started_at"], "finished_at": footer["finished_at"],
          "rubrics": header["rubrics"], "summary": footer["summary"], "ledger": None, "gate": header["gate"],
          "calibration_dir": str(world["record"].calibration_path().resolve()),
          "results": [line["result"] for line in lines[1:-1]]}
    path = tmp_path / "v1.json"
    path.write_text(json.dumps(v1, indent=2))
    code, out = cli("report", path, "--junit", tmp_path / "j.xml", "--markdown", tmp_path / "s.md",
                    "--html", tmp_path / "d.html", "--history", tmp_path / "h.sqlite")
    assert code == 0, out
    xml = JUnitXml.fromfile(str(tmp_path / "j.xml"))
    assert sum(c["tests"] for c in junit_counts(xml).values()) == 27
    # Changed on purpose (issue 26): a report shows the run measured again, and format 1's results make a gate.
    assert "gate: **failed**" in (tmp_path / "s.md").read_text()
    # The format 1 record itself is never a report's target.
    before = path.read_bytes()
    code, out = cli("report", world["file"], "--html", path, "--history", tmp_path / "h.sqlite")
    assert code == 2 and path.read_bytes() == before


def test_report_when_the_suite_folder_is_gone_or_its_calibration_is_unreadable(world, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(world["suite"].parent, copy / "suite")
    shutil.copy(world["file"], copy / "r1.jsonl")
    calibration = copy / "suite" / "calibration" / "update-email"
    calibration.mkdir(parents=True)
    fingerprint = world["record"].judges[0].fingerprint
    (calibration / f"{fingerprint}.json").write_text("{not json")  # a corrupt approval record
    out = tmp_path / "out"
    code, text = cli("report", copy / "r1.jsonl", "--markdown", out / "a.md", "--history", out / "h.sqlite")
    assert code == 0, text
    shutil.rmtree(copy / "suite")
    code, text = cli("report", copy / "r1.jsonl", "--junit", out / "j.xml", "--markdown", out / "s.md",
                     "--html", out / "d.html", "--history", out / "h.sqlite")
    assert code == 0 and "is not there: its count and summary are measured again" in text, text
    assert "no calibration" in (out / "s.md").read_text() and "gate: not decided" in (out / "s.md").read_text()
    assert sorted(p.name for p in out.iterdir()) == ["a.md", "d.html", "j.xml", "s.md"]


# =====================================================================================================
# pytest plugin
# =====================================================================================================


def test_pytest_a_suite_path_that_does_not_exist_is_a_collection_error(pytester):
    result = pytester.runpytest_subprocess("--judgekit-suite", "no/such/suite.yaml", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*judgekit could not read the suite*no/such/suite.yaml*"])


def test_pytest_a_suite_with_duplicate_trajectory_ids_is_a_collection_error(pytester):
    suite = example_suite(pytester.path / "suite")
    path = suite.parent / "trajectories.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    twin = dict(next(r for r in rows if r["id"] == "wrong-tool"), id="ok")
    path.write_text("".join(json.dumps(r) + "\n" for r in [twin, *rows]))
    result = pytester.runpytest_subprocess("--judgekit-suite", suite, "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*already used*"])
    assert "passed" not in result.stdout.str().splitlines()[-1]


def test_pytest_collect_only_never_runs_the_suite(pytester, server):
    suite = example_suite(pytester.path / "suite")
    before = server.request_count
    result = pytester.runpytest_subprocess(
        "--judgekit-suite", suite, "--judgekit-judge-model", MODEL, "--judgekit-judge-api-base", server.base_url,
        "--judgekit-cache-dir", "cache", "--collect-only", "-q", "-p", "no:cacheprovider")
    assert result.ret == 0
    assert len([line for line in result.stdout.lines if "::" in line]) == 27 + 1  # and the gate item
    assert server.request_count == before and not (pytester.path / "cache").exists()


def test_pytest_item_names_never_put_raw_control_characters_on_the_terminal(pytester, server):
    """Trajectory ids are hostile text; the CLI escapes them everywhere, pytest's item names
    reach the terminal as given: an escape sequence or a line break in an id forges output."""
    suite = example_suite(pytester.path / "suite")
    path = suite.parent / "trajectories.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    rows[0]["id"] = "ok\x1b[2J\x1b]0;pwned\x07"
    rows[4]["id"] = "wrong\nPASSED suite/suite.yaml::everything"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = pytester.runpytest_subprocess(
        "--judgekit-suite", suite, "--judgekit-judge-model", MODEL, "--judgekit-judge-api-base", server.base_url,
        "--judgekit-cache-dir", "cache", "-p", "no:cacheprovider", "-rA")
    out = result.stdout.str()
    assert "passed" in out.splitlines()[-1]  # it ran
    assert "\x1b" not in out and "\x07" not in out, "raw escape sequences on the terminal"
    assert not any(line.startswith("PASSED suite/suite.yaml::everything") for line in result.stdout.lines)


# =====================================================================================================
# judgekit run --dry-run
# =====================================================================================================


def folder_state(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): "index" if p.name.endswith("-shm") else hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_dry_run_of_a_partly_cached_suite_counts_the_cached_and_writes_nothing(server, tmp_path):
    from judgekit.run.estimate import estimate_run, render_estimate

    suite = example_suite(tmp_path / "suite")
    options = RunOptions(override=JudgeOverride(model=MODEL, api_base=server.base_url), cache_dir=tmp_path / "cache")
    whole = estimate_run(suite, options)
    part = estimate_run(suite, options, select=["ok", "wrong-tool", "too-slow"])
    run_suite(suite, options=options, select=["ok", "wrong-tool", "too-slow"])
    stored = folder_state(tmp_path / "cache")
    after = estimate_run(suite, options)
    assert part.questions > 0 and after.questions == whole.questions
    assert (after.cached, after.to_ask) == (part.questions, whole.questions - part.questions)
    assert folder_state(tmp_path / "cache") == stored
    text = render_estimate(after)
    assert f"cached {part.questions}, to ask {whole.questions - part.questions}" in text
    assert "unknown" in text and "$0" not in text  # MODEL has no price


def test_a_dry_run_with_a_cost_budget_and_an_unpriced_judge_says_the_budget_cannot_be_checked(tmp_path):
    """An unpriced judge's cost is unknown, and a run cannot stop at a cost budget it cannot
    count (its ledger adds $0 a call): the dry run must warn, not stay silent about the budget."""
    from judgekit.run.estimate import estimate_run, render_estimate
    from judgekit.suite import Budget

    est = estimate_run(ROOT / "examples" / "email-update",
                       RunOptions(override=JudgeOverride(model=MODEL), cache_dir=tmp_path / "cache",
                                  budget=Budget(max_cost_usd=0.0001)))
    assert est.to_ask > 0 and est.unpriced == [MODEL] and est.cost_usd_max is None
    text = render_estimate(est)
    assert "budget" in text, text
