"""The HTML dashboard: one self-contained file, hostile text escaped, deterministic; and the
tau-bench import run into a dashboard that headless Chromium loads with no console error and no
network request, whose per-axis numbers read off the page match the run record.

The browser test needs Debian's ``chromium`` and ``chromium-driver`` (``/usr/bin/chromium``,
``/usr/bin/chromedriver``); without them it skips, unless ``JUDGEKIT_REQUIRE_BROWSER=1`` (CI)
turns the skip into a failure. It saves ``test-artifacts/dashboard.png`` (git-ignored).
"""

from __future__ import annotations

import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # before anything imports litellm

import html
import json
import re
import time
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_judge_runner import MODEL, scripted_judge

from judgekit.cli import main as cli_main
from judgekit.ci.compare import compare
from _records import refooted, rows_as_claimed
from judgekit.run.remeasure import run_rows
from judgekit.ci.history import History
from judgekit.judge.resolve import JudgeOverride
from judgekit.report import report_input
from judgekit.report.html import cost_text, render_html, write_html
from judgekit.run import RunOptions, run_suite
from judgekit.run.ledger import Ledger
from judgekit.testing import ScriptedOpenAIServer

ROOT = Path(__file__).resolve().parent.parent
HOSTILE = "<script>alert(1)</script>"
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")


# --- reading a rendered page -------------------------------------------------------------------


class Page(HTMLParser):
    """What the tests read of a page: the per-axis cells, the trajectory rows, every src/href,
    the script elements."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.cells: dict[tuple[str, str], str] = {}
        self.rows: list[dict[str, str]] = []
        self.links: list[str] = []
        self.scripts = 0
        self.csp: str | None = None
        self._cell: tuple[str, str] | None = None
        self._text: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.links += [value for name, value in attrs.items() if name in ("src", "href", "xlink:href") and value]
        if tag == "script":
            self.scripts += 1
        if tag == "meta" and attrs.get("http-equiv") == "Content-Security-Policy":
            self.csp = attrs.get("content")
        if tag == "details" and "traj" in attrs.get("class", ""):
            self.rows.append(attrs)
        if tag == "td" and "data-axis" in attrs and "data-field" in attrs:
            self._cell, self._text = (attrs["data-axis"], attrs["data-field"]), []

    def handle_data(self, data):
        if self._cell is not None:
            self._text.append(data)

    def handle_endtag(self, tag):
        if tag == "td" and self._cell is not None:
            self.cells[self._cell] = "".join(self._text).strip()
            self._cell = None


def number(text: str) -> float:
    return float(text.rstrip("%")) / (100 if text.endswith("%") else 1)


# --- runs of the example suite -----------------------------------------------------------------


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    """The example suite run with the scripted judge, and a second run with a deliberate
    tool-correctness regression (an extra call on every trajectory that had full marks)."""
    tmp = tmp_path_factory.mktemp("dashboard")
    with ScriptedOpenAIServer(scripted_judge) as srv:
        first = run_suite(ROOT / "examples" / "email-update",
                          options=RunOptions(override=JudgeOverride(model=MODEL, api_base=srv.base_url),
                                             cache_dir=tmp / "cache"))
    second = first.model_copy(deep=True)
    second.run_id = first.run_id + "-regressed"
    second.started_at = first.finished_at
    regressed = []
    for result in second.results:
        tool = result.axes["tool_correctness"]
        if tool.score == 1.0:
            point = next(item for item in tool.items if item.point == "call count")
            point.earned, point.reason = False, "2 successful in-scope call(s), 1 expected (an extra call)"
            tool.points -= 1
            tool.score = tool.points / tool.max_points
            regressed.append(result.trajectory_id)
    refooted(second)  # the footer a run with these results would have written
    comparison = compare(run_rows(second), run_rows(first), baseline_source="file")
    history = History(tmp / "h.sqlite")
    history.record(first)
    history.record(second, compare_passed=comparison.passed)
    return first, second, comparison, history, regressed


def test_renders_the_example_run_on_its_own(example):
    first, *_ = example
    text = render_html(report_input(first))
    page = Page(text)
    for axis, summary in first.summary.items():
        assert number(page.cells[(axis, "mean")]) == pytest.approx(summary.mean_score, abs=5e-4)
        assert page.cells[(axis, "scored")] == str(summary.scored)
        assert page.cells[(axis, "unscored")] == str(summary.unscored)
        assert page.cells[(axis, "errors")] == str(summary.errors)
        assert page.cells[(axis, "baseline_mean")] == "—"  # nothing compared
    passed = first.summary["task_success"].passed / first.summary["task_success"].scored
    assert number(page.cells[("task_success", "pass_rate")]) == pytest.approx(passed, abs=5e-4)
    assert page.cells[("faithfulness", "advisory")] == "advisory"  # the scripted judge is not approved
    assert page.cells[("tool_correctness", "advisory")] == "gating"
    # An advisory axis's gate cell says advisory, never pass (nothing of it gates, whatever its value).
    faithfulness = next(a for a in first.gate_report.axes if a.axis == "faithfulness")
    assert faithfulness.passed and faithfulness.gating_n == 0 and faithfulness.advisory
    assert page.cells[("faithfulness", "gate")] == "advisory (not gating)"
    assert re.search(r'data-axis="faithfulness" data-field="gate" data-value="advisory"', text)
    assert page.cells[("tool_correctness", "gate")] == "pass"  # 0.778 meets the example's minimum, 0.77
    assert 'data-verdict="pass"' in text  # the example's gate passes (its minimums fit its planned failures)
    assert "Not compared with a baseline." in text and "No history for this suite" in text
    passing = {r.trajectory_id: all(a.status == "scored" and a.score == 1.0 for a in r.axes.values())
               for r in first.results}
    order = [passing[row["data-tid"]] for row in page.rows]
    assert order == sorted(order)  # failures first
    assert sorted(row["data-tid"] for row in page.rows) == sorted(r.trajectory_id for r in first.results)
    # The scripted judge's price is not in litellm's map: its cost is unknown, never $0.
    assert first.ledger.calls_without_cost == first.ledger.calls > 0
    assert 'data-cost="unknown"' in text and "$0" not in text
    # Claims with their citations are on the page (escaped, as everything from a record).
    claim = next(c for r in first.results for c in r.axes["faithfulness"].claims if c.evidence)
    assert html.escape(claim.evidence[0]["quote"], quote=True) in text


def test_renders_a_comparison_and_the_trend(example):
    first, second, comparison, history, regressed = example
    assert comparison.flagged == ["tool_correctness"]
    data = report_input(second, comparison=comparison, history=history)
    assert [run.run_id for run in data.trend] == [second.run_id, first.run_id]
    text = render_html(data)
    page = Page(text)
    assert page.cells[("tool_correctness", "flagged")].startswith("flagged: mean")
    assert page.cells[("task_success", "flagged")] == "no" and page.cells[("faithfulness", "flagged")] == "no"
    base = comparison.axes[[a.axis for a in comparison.axes].index("tool_correctness")]
    assert number(page.cells[("tool_correctness", "baseline_mean")]) == pytest.approx(base.baseline_mean, abs=5e-4)
    # One sign convention on the whole page: a drop is negative, marked ▼ (cell, card, plots alike).
    shown = f"▼ {-100 * base.relative_drop:+.1f}%"
    assert base.relative_drop > 0 and shown.startswith("▼ -")
    assert page.cells[("tool_correctness", "change_pct")] == shown
    assert f'<div class="change">{shown} vs baseline' in text
    assert f"{100 * base.relative_drop:+.1f}%" not in text  # never the drop as a positive figure
    for plot in ("plot-trend", "plot-drops"):
        assert shown in text.split(f'id="{plot}"')[1].split("</figure>")[0], plot
    # The regressed trajectories come first, each marked, and the flagged drop shows in the plots.
    assert sorted(row["data-tid"] for row in page.rows[:len(regressed)]) == sorted(regressed)
    assert all("tool_correctness:regressed" in row["data-states"].split() for row in page.rows[:len(regressed)])
    assert text.count("▼ regressed") == len(regressed)
    for plot in ("plot-trend", "plot-drops", "plot-distribution"):
        assert re.search(f'<figure class="plot" id="{plot}"><figcaption>[^<]*</figcaption><svg ', text), plot
    assert "FLAGGED" in text.split('id="plot-trend"')[1].split("</figure>")[0]
    assert "Comparison: tool_correctness: mean" in text  # the reason the comparison fails, in the banner


def test_the_trend_marks_green_builds(example, tmp_path):
    first, second, comparison, _, _ = example
    green = first.model_copy(deep=True)
    green.gate_report.passed = True  # as if its suite's minimums had been met
    green._rows = rows_as_claimed(green)  # recorded as it claims, as a run's own rows are: this draws a trend
    history = History(tmp_path / "h.sqlite")
    history.record(green)
    history.record(second, compare_passed=comparison.passed)
    data = report_input(second, comparison=comparison, history=history)
    assert [run.green for run in data.trend] == [False, True]
    trend = render_html(data).split('id="plot-trend"')[1].split("</figure>")[0]
    assert "<svg " in trend and ">green build<" in trend and ">not green<" in trend
    assert "tool_correctness — FLAGGED: ▼ -11.4%" in trend


def test_the_trend_legend_is_below_the_panels_never_over_the_data(example, tmp_path):
    from judgekit.report._dashboard_axes import _axis_views
    from judgekit.report._dashboard_plots import _trend_figure

    first, second, comparison, _, _ = example
    history = History(tmp_path / "h.sqlite")
    history.record(first)
    history.record(second, compare_passed=comparison.passed)
    data = report_input(second, comparison=comparison, history=history)
    figure = _trend_figure(data, _axis_views(data))
    figure.draw_without_rendering()  # lays the figure out, as saving it does
    (legend,) = figure.legends  # one legend for the figure, none inside a panel
    assert all(ax.get_legend() is None for ax in figure.axes)
    # Each kind of point shown once: the first run is green (the example's gate fits its planned
    # failures), the second, with a flagged drop, is not.
    assert [text.get_text() for text in legend.get_texts()] == ["green build", "not green"]
    box = legend.get_window_extent()
    for ax in figure.axes:
        panel = ax.get_tightbbox()  # the panel with its ticks, labels and title
        assert not box.overlaps(panel), (box, panel)
        assert box.y1 <= panel.y0  # below every panel


def test_judges_show_their_calibration(example):
    first, *_ = example
    data = report_input(first)
    assert [(j.axis, j.status, j.kappa) for j in data.judges] == [("faithfulness", "advisory", None)]
    assert "no calibration" in render_html(data) and 'id="plot-calibration"' not in render_html(data)
    judge = data.judges[0]
    data.judges = [replace(judge, status="approved", kappa=0.71, kappa_low=0.52, kappa_high=0.86, labelled=40,
                           reason="approved by calibration"),
                   replace(judge, axis="task_success", kappa=0.31, kappa_low=0.05, kappa_high=0.55, labelled=40)]
    text = render_html(data)
    assert "0.71 [0.52, 0.86] on 40 labels" in text and "0.31 [0.05, 0.55] on 40 labels" in text
    assert re.search(r'id="plot-calibration"><figcaption>[^<]*</figcaption><svg ', text)
    statuses = re.findall(r'data-field="judge-status">(\w+)<', text)
    assert statuses == ["approved", "advisory"]


def test_the_render_is_deterministic(example):
    _, second, comparison, history, _ = example
    data = report_input(second, comparison=comparison, history=history)
    assert render_html(data) == render_html(data)


def test_nothing_on_the_page_reaches_the_network(example):
    _, second, comparison, history, _ = example
    text = render_html(report_input(second, comparison=comparison, history=history))
    page = Page(text)
    assert page.csp is not None and "default-src 'none'" in page.csp
    assert page.links and all(link.startswith("#") for link in page.links), [
        link for link in page.links if not link.startswith("#")]
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", text, re.IGNORECASE)
    assert "@import" not in text and not re.search(r"url\(\s*['\"]?(?:https?:)?//", text)
    assert "<!DOCTYPE svg" not in text  # matplotlib's DTD line names a URL
    assert page.scripts == 1  # ours, inline


def test_hostile_text_is_escaped(example):
    first, *_ = example
    hostile = first.model_copy(deep=True)
    hostile.suite = HOSTILE
    result = next(r for r in hostile.results if r.axes["faithfulness"].claims)
    result.trajectory_id = HOSTILE
    result.rubric = '" onmouseover="alert(1)'
    result.metadata = {"note": HOSTILE}
    result.axes["faithfulness"].claims[0].claim = HOSTILE
    result.axes["faithfulness"].claims[0].evidence = [{"id": HOSTILE, "quote": "</blockquote>" + HOSTILE}]
    result.axes["task_success"].checks[0].reason = HOSTILE
    result.axes["tool_correctness"].items[0].point = "<img src=x onerror=alert(1)>"
    text = render_html(report_input(hostile))
    assert HOSTILE not in text
    assert "<img" not in text and 'onmouseover="' not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    page = Page(text)
    assert page.scripts == 1
    assert HOSTILE in [row["data-tid"] for row in page.rows]  # the id is kept, as text


def test_a_long_run_is_cut_with_the_count_said(example):
    _, second, comparison, _, regressed = example
    text = render_html(report_input(second, comparison=comparison), max_trajectories=3)
    page = Page(text)
    assert len(page.rows) == 3
    assert all(row["data-tid"] in regressed for row in page.rows)  # regressions first
    left = len(second.results) - 3
    assert f'data-left-out="{left}"' in text and f"{left} left out" in text


def test_write_html_replaces_the_file(example, tmp_path):
    first, *_ = example
    data = report_input(first)
    target = tmp_path / "report" / "dashboard.html"
    write_html(data, target)
    write_html(data, target)
    assert target.read_text(encoding="utf-8") == render_html(data)
    assert [p.name for p in target.parent.iterdir()] == ["dashboard.html"]  # no temporary file left


@pytest.mark.parametrize(("ledger", "said"), [
    pytest.param(Ledger(calls=4, cost_usd=0.0, calls_without_cost=4), "unknown", id="no_price_is_unknown_not_0"),
    pytest.param(Ledger(calls=4, cost_usd=0.012, calls_without_cost=1), "at least $0.0120 (1 call(s) of unknown cost)",
                 id="some_unknown_is_a_lower_bound"),
    pytest.param(Ledger(calls=4, cost_usd=0.012), "$0.0120", id="all_priced"),
    pytest.param(Ledger(calls=0, cache_hits=9), "$0.0000", id="all_from_the_cache"),
])
def test_cost_in_words(ledger, said):
    assert cost_text(ledger) == said


# --- the acceptance test: tau-bench in headless Chromium ---------------------------------------


def browser_or_skip() -> None:
    missing = [str(path) for path in (CHROMIUM, CHROMEDRIVER) if not path.exists()]
    if missing:
        reason = (f"headless browser not installed ({', '.join(missing)} missing): "
                  "apt-get install -y --no-install-recommends chromium chromium-driver")
        if os.environ.get("JUDGEKIT_REQUIRE_BROWSER") == "1":
            pytest.fail(reason + "; JUDGEKIT_REQUIRE_BROWSER=1 forbids skipping", pytrace=False)
        pytest.skip(reason)


def chromium(profile: Path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run", "--window-size=1400,1000",
                f"--user-data-dir={profile}"):
        options.add_argument(arg)
    options.binary_location = str(CHROMIUM)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    return webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)


@pytest.mark.shared_data
def test_tau_bench_dashboard_in_headless_chromium(shared_data, tmp_path):
    browser_or_skip()
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select

    data = shared_data("tau-bench-airline")
    imported = CliRunner().invoke(cli_main, ["import", "tau-bench", str(data / "gpt-4o-airline.even-tasks.json"),
                                             "--out", str(tmp_path / "suite")])
    assert imported.exit_code == 0, imported.output
    record = run_suite(tmp_path / "suite", options=RunOptions(cache_dir=tmp_path / "cache"))
    assert record.judges == []  # the imported suite is scored deterministically: no judge to script
    history = History(tmp_path / "h.sqlite")
    history.record(record)
    page_file = tmp_path / "dashboard.html"
    started = time.perf_counter()
    write_html(report_input(record, history=history), page_file)
    took = time.perf_counter() - started
    print(f"\ndashboard of {len(record.results)} trajectories: rendered in {took:.2f} s, "
          f"{page_file.stat().st_size / 1024:.0f} KiB")

    url = page_file.as_uri()
    driver = chromium(tmp_path / "profile")
    try:
        driver.get(url)
        errors = [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
        assert errors == []
        sent = [message["params"] for message in (json.loads(entry["message"])["message"]
                                                   for entry in driver.get_log("performance"))
                if message["method"] == "Network.requestWillBeSent"]
        ours = [p["request"]["url"] for p in sent if url in (p.get("documentURL"), p["request"]["url"])]
        assert url in ours  # the log did see the page itself
        assert [u for u in ours if u != url and not u.startswith("data:")] == []
        # Nothing at all went out (the browser's own start page asks for chrome:// resources only).
        assert [p["request"]["url"] for p in sent if re.match(r"(?i)(https?|wss?|ftp):", p["request"]["url"])] == []

        # The per-axis numbers on the rendered page are the run record's.
        shown = {cell.get_attribute("data-axis"): cell.text
                 for cell in driver.find_elements(By.CSS_SELECTOR, 'td[data-field="mean"]')}
        assert set(shown) == set(record.summary)
        for axis, summary in record.summary.items():
            assert float(shown[axis]) == pytest.approx(summary.mean_score, abs=5e-4), axis
        scored = {cell.get_attribute("data-axis"): cell.text
                  for cell in driver.find_elements(By.CSS_SELECTOR, 'td[data-field="scored"]')}
        assert scored == {axis: str(summary.scored) for axis, summary in record.summary.items()}
        task = record.summary["task_success"]
        rate = driver.find_element(By.CSS_SELECTOR, 'td[data-axis="task_success"][data-field="pass_rate"]').text
        assert number(rate) == pytest.approx(task.passed / task.scored, abs=5e-4)
        verdict = driver.find_element(By.ID, "verdict")
        gate_passed = record.gate_report.passed
        assert verdict.get_attribute("data-verdict") == ("pass" if gate_passed else "fail")
        assert verdict.is_displayed() and ("PASS" if gate_passed else "FAIL") in verdict.text

        # The filter: a trajectory id narrows the table to that row; a status picks the failures.
        rows = driver.find_elements(By.CSS_SELECTOR, "details.traj")
        assert len(rows) == len(record.results)

        def visible() -> list[str]:
            return [row.get_attribute("data-tid") for row in rows if row.is_displayed()]

        assert len(visible()) == len(record.results)
        wanted = record.results[-1].trajectory_id
        box = driver.find_element(By.ID, "f-text")
        box.send_keys(wanted)
        assert wanted in visible() and len(visible()) < len(record.results)
        assert all(wanted in tid for tid in visible())
        box.send_keys(Keys.CONTROL, "a", Keys.DELETE)
        assert len(visible()) == len(record.results)
        Select(driver.find_element(By.ID, "f-axis")).select_by_value("task_success")
        Select(driver.find_element(By.ID, "f-status")).select_by_value("fail")
        failing = {r.trajectory_id for r in record.results
                   if "task_success" in r.axes and r.axes["task_success"].passed is False}
        assert set(visible()) == failing and len(failing) == task.scored - task.passed
        assert driver.find_element(By.ID, "f-count").text == f"{len(failing)} of {len(rows)} shown"
        Select(driver.find_element(By.ID, "f-status")).select_by_value("")
        Select(driver.find_element(By.ID, "f-axis")).select_by_value("*")

        # A row opens to its lost points.
        first_row = rows[0]
        first_row.find_element(By.TAG_NAME, "summary").click()
        assert first_row.get_attribute("open") is not None
        assert first_row.find_element(By.CSS_SELECTOR, ".tbody").is_displayed()

        artifacts = ROOT / "test-artifacts"
        artifacts.mkdir(exist_ok=True)
        shot = artifacts / "dashboard.png"
        driver.execute_script("window.scrollTo(0, 0)")
        assert driver.save_screenshot(str(shot))
        assert shot.stat().st_size > 10_000
        print(f"screenshot: {shot}")
    finally:
        driver.quit()
