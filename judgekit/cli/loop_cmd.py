"""The CI loop's commands: history, compare, report (and the options ``run`` shares with them)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from judgekit.cli._exit import EXIT_GATE_FAILED, handle_errors
from judgekit.cli._out import one_line, say, say_json

DEFAULT_HISTORY = ".judgekit/history.sqlite"


def history_option(func):
    return click.option(
        "--history", "history_path", type=click.Path(dir_okay=False, path_type=Path), default=Path(DEFAULT_HISTORY),
        show_default=True, envvar="JUDGEKIT_HISTORY", help="The run history (SQLite; env JUDGEKIT_HISTORY).",
    )(func)


def _finite(ctx, param, value):
    if value is not None and value != value:  # NaN passes click's range check
        raise click.BadParameter("must be a number between 0 and 1")
    return value


def check_outputs(outputs: dict[str, Path | None], protected: list[Path]) -> None:
    """Before any work: no output may name an input (``protected``: the suite's files, the
    history and its side files, the run and baseline records) or another output, and an
    existing file may be replaced only when it is not a run record or an SQLite file."""
    from judgekit._util.files import ensure_writable
    from judgekit.errors import InputError
    from judgekit.run.record import is_run_record

    named: dict[Path, str] = {}
    guarded = {path.resolve(): path for path in protected}
    for flag, path in outputs.items():
        if path is None:
            continue
        target = path.resolve()
        if target in guarded:
            raise InputError(f"{flag} would overwrite {guarded[target]}, an input of this command: choose another file", path)
        if target in named:
            raise InputError(f"{flag} and {named[target]} name the same file", path)
        named[target] = flag
        if flag != "--out" and path.is_file():
            with path.open("rb") as handle:
                head = handle.read(16)
            if head.startswith(b"SQLite format 3") or is_run_record(path):
                raise InputError(f"{flag} names an existing SQLite database or run record, not a report: refusing to "
                                 "overwrite it", path)
        ensure_writable(path)


def suite_option(func):
    return click.option(
        "--suite", "suite_path", type=click.Path(path_type=Path), metavar="SUITE",
        help="Measure run record files under this suite (a suite file, or a folder holding suite.yaml) instead of "
             "the one each record names: pin it when the records come from elsewhere, or a record could name a "
             "lenient suite of its own.")(func)


def pinned_suite(path: Path | None):
    """The suite ``--suite`` names, loaded (None without it)."""
    if path is None:
        return None
    from judgekit.suite import load_suite

    return load_suite(path)


def compare_options(func):
    """--baseline, --max-drop, --max-drop-axis, --axis, --require-baseline."""
    from judgekit.cli._exit import AxisChoice

    options = [
        click.option("--baseline", default="last-green", show_default=True, metavar="last-green|RUN_ID|FILE",
                     help="What to compare with: the suite's newest green run in the history, a run id there, "
                          "or a run record file."),
        click.option("--max-drop", type=click.FloatRange(0, 1), default=0.05, show_default=True,
                     callback=_finite, help="Flag an axis whose mean dropped by more than this, relative."),
        click.option("--max-drop-axis", "max_drop_axis", multiple=True, metavar="AXIS=DROP",
                     help="The same for one axis (repeatable), e.g. faithfulness=0.1."),
        click.option("--axis", "axes", multiple=True, type=AxisChoice(),
                     help="Compare only these axes (repeatable; default: every axis the runs scored)."),
        click.option("--require-baseline", is_flag=True,
                     help="Fail when there is no baseline (default: a first run is measured on its own)."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def report_options(func):
    options = [
        click.option("--junit", type=click.Path(dir_okay=False, path_type=Path),
                     help="Write JUnit XML: a testcase per trajectory and axis."),
        click.option("--markdown", type=click.Path(dir_okay=False, path_type=Path),
                     help="Write a Markdown summary (a CI job summary, a pull-request comment)."),
        click.option("--html", type=click.Path(dir_okay=False, path_type=Path),
                     help="Write the HTML dashboard (one self-contained file)."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def compare_policy(max_drop: float, max_drop_axis: tuple[str, ...], axes: tuple[str, ...], require_baseline: bool):
    from judgekit.axes.table import axis_named
    from judgekit.ci.compare import ComparePolicy
    from judgekit.errors import InputError

    per_axis = {}
    for item in max_drop_axis:
        name, sep, value = item.partition("=")
        try:
            axis_named(name)
            drop = float(value)
        except ValueError:
            raise InputError(f"--max-drop-axis {item!r}: expected AXIS=DROP with a known axis and a number") from None
        if not sep or not 0 <= drop <= 1:
            raise InputError(f"--max-drop-axis {item!r}: expected AXIS=DROP, DROP between 0 and 1")
        per_axis[name] = drop
    return ComparePolicy(max_drop=max_drop, per_axis=per_axis, axes=tuple(axes) or None,
                         require_baseline=require_baseline)


def open_history(path: Path, *, create: bool):
    from judgekit.ci.history import History

    return History(path, create=create)


def _existing_history(path: Path):
    return open_history(path, create=False) if path.exists() else None


# --- compare -----------------------------------------------------------------------------------


@click.command("compare")
@click.argument("run_ref", metavar="RUN")
@compare_options
@history_option
@suite_option
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
@report_options
@handle_errors
def compare_cmd(run_ref: str, baseline, max_drop, max_drop_axis, axes, require_baseline, history_path, suite_path,
                as_json, junit, markdown, html) -> None:
    """Compare RUN (a run record file, or a run id in the history) with its baseline.

    Per axis, on the trajectory ids both runs scored: mean score and pass rate, the drop, a
    paired test (McNemar for pass/fail axes, paired bootstrap for graded ones) and a flag when
    the mean dropped more than --max-drop relative (and beyond the run-to-run noise the history
    shows). Then the trajectories that got worse, each with what it lost.

    Fails closed: an empty run, fewer trajectories than the baseline, a gating axis with nothing
    scored, or a missing baseline with --require-baseline. Exit 0 passed, 1 flagged or failed,
    2 input error.
    """
    from judgekit.ci.history import history_files
    from judgekit.ci.loop import compare_with_baseline
    from judgekit.cli._render import print_comparison
    from judgekit.errors import InputError
    from judgekit.run.remeasure import read_remeasured, remeasured_file

    protected = history_files(history_path) + [Path(run_ref)] + ([Path(baseline)] if Path(baseline).exists() else [])
    check_outputs({"--junit": junit, "--markdown": markdown, "--html": html}, protected)
    history = _existing_history(history_path)
    policy = compare_policy(max_drop, max_drop_axis, axes, require_baseline)
    record = None
    suite = pinned_suite(suite_path)
    if Path(run_ref).is_file():  # measured again from its results: its footer is only its claim
        if junit or markdown or html:
            record = read_remeasured(run_ref, loaded=suite)
            rows = record.rows()
        else:
            rows = remeasured_file(run_ref, loaded=suite).rows
    elif history is not None and history.find(run_ref) is not None:
        if junit or markdown or html:
            raise InputError("reports need the run record file (the history keeps rows, not whole results): "
                             "pass the record file as RUN")
        rows = history.rows(run_ref)
    else:
        raise InputError(f"RUN {run_ref!r}: no such run record file, and no run with that id in {history_path}")
    comparison = compare_with_baseline(rows, history, baseline, policy, suite=suite)
    if as_json:
        say_json(comparison.model_dump_json(indent=2))
    else:
        print_comparison(comparison)
    if record is not None:
        _write_reports(record, comparison, history, junit, markdown, html, suite)
    if not comparison.passed:
        sys.exit(EXIT_GATE_FAILED)


def _write_reports(record, comparison, history, junit, markdown, html, suite=None) -> None:
    from judgekit.ci.loop import Reports, write_run_reports

    calibration_dir = suite.resolve(suite.suite.calibration_dir) if suite is not None else None
    for path in write_run_reports(record, Reports(junit=junit, markdown=markdown, html=html), comparison=comparison,
                                  history=history, calibration_dir=calibration_dir):
        say(f"wrote {one_line(str(path))}", err=True)


# --- report ------------------------------------------------------------------------------------


@click.command("report")
@click.argument("run_file", metavar="RUN", type=click.Path(dir_okay=False, path_type=Path))
@report_options
@compare_options
@history_option
@suite_option
@click.option("--no-compare", is_flag=True, help="Report the run alone, with no baseline.")
@handle_errors
def report_cmd(run_file: Path, junit, markdown, html, baseline, max_drop, max_drop_axis, axes, require_baseline,
               history_path, suite_path, no_compare) -> None:
    """Write reports of the run record RUN: --junit, --markdown, --html (any of them).

    The reports hold the run's comparison with its baseline (as `judgekit compare` makes it,
    unless --no-compare) and the suite's trend from the history when there is one. Writing
    them never fails on the run's figures: `compare` and `gate` decide pass or fail.
    """
    from judgekit.ci.loop import compare_with_baseline
    from judgekit.errors import InputError
    from judgekit.run.remeasure import read_remeasured, run_rows

    if not (junit or markdown or html):
        raise InputError("nothing to write: pass --junit, --markdown and/or --html")
    from judgekit.ci.history import history_files

    protected = history_files(history_path) + [run_file] + ([Path(baseline)] if Path(baseline).exists() else [])
    check_outputs({"--junit": junit, "--markdown": markdown, "--html": html}, protected)
    suite = pinned_suite(suite_path)
    record = read_remeasured(run_file, suite_optional=suite is None, loaded=suite)  # reports show the run measured again
    if record._suite_missing:
        say(f"note: the suite file the record names ({one_line(str(record.suite_path()))}) is not there: its count "
            "and summary are measured again, its judges and gate cannot be, and the reports show no gate", err=True)
    history = _existing_history(history_path)
    comparison = None
    if not no_compare:
        policy = compare_policy(max_drop, max_drop_axis, axes, require_baseline)
        comparison = compare_with_baseline(run_rows(record), history, baseline, policy, suite=suite)
    _write_reports(record, comparison, history, junit, markdown, html, suite)


# --- history -----------------------------------------------------------------------------------


@click.group("history")
def history_group() -> None:
    """The run history: list, show, import and prune recorded runs; list safety scans."""


def _info_line(info) -> str:
    axes = ", ".join(f"{name} {a['mean_score']:.3f}" if a["mean_score"] is not None else f"{name} -"
                     for name, a in info.axes.items())
    state = "green" if info.green else ("gate failed" if info.gate_passed is False else
                                        "compare failed" if info.compare_passed is False else "not gated")
    commit = (info.git_commit or "no commit")[:12] + ("+dirty" if info.git_dirty else "")
    if info.came_in == "import":
        state += " (imported)"
    return (f"{info.run_id}  {info.started_at:%Y-%m-%d %H:%M}  {commit}  {info.trajectories} traj  "
            f"{state}  {axes}")


@history_group.command("list")
@history_option
@click.option("--suite", help="Only this suite's runs.")
@click.option("--limit", type=click.IntRange(1), default=20, show_default=True)
@click.option("--green", "green_only", is_flag=True, help="Only green runs (gate passed, comparison not failed).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per run.")
@handle_errors
def history_list(history_path: Path, suite, limit, green_only, as_json) -> None:
    """Recorded runs, newest first."""
    history = open_history(history_path, create=False)
    with history:
        runs = history.runs(suite=suite, limit=limit, green_only=green_only)
    for info in runs:
        if as_json:
            say_json(json.dumps(info.as_dict()))
        else:
            say(one_line(_info_line(info)))
    if not runs and not as_json:
        say("no run recorded" + (f" for suite {one_line(suite)}" if suite else ""), err=True)


@history_group.command("safety")
@history_option
@click.option("--suite", help="Only this suite's scans.")
@click.option("--limit", type=click.IntRange(1), default=20, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per scan.")
@handle_errors
def history_safety(history_path: Path, suite, limit, as_json) -> None:
    """Recorded safety scans (`judgekit safety --record`), newest first."""
    with open_history(history_path, create=False) as history:
        scans = history.safety_scans(suite=suite, limit=limit)
    for scan in scans:
        if as_json:
            say_json(json.dumps({**scan, "started_at": scan["started_at"].isoformat()}))
        else:
            commit = (scan["git_commit"] or "no commit")[:12] + ("+dirty" if scan["git_dirty"] else "")
            say(one_line(f"{scan['scan_id']}  {scan['started_at']:%Y-%m-%d %H:%M}  {commit}  {scan['suite']}  "
                         f"{scan['trajectories']} traj  {scan['open_findings']} open of {scan['findings']} finding(s)  "
                         f"{'STOP SHIP' if scan['stop_ship'] else 'clean'}  ran as {scan['ran_as']}"))
    if not scans and not as_json:
        say("no safety scan recorded" + (f" for suite {one_line(suite)}" if suite else ""), err=True)


@history_group.command("show")
@click.argument("run_id")
@history_option
@handle_errors
def history_show(run_id: str, history_path: Path) -> None:
    """One recorded run as JSON: what identifies it, its axes, its header and footer."""
    from judgekit.errors import InputError

    with open_history(history_path, create=False) as history:
        info = history.find(run_id)
        if info is None:
            raise InputError(f"no run {run_id!r} in the history", history_path)
        header, footer = history.documents(run_id)
    say_json(json.dumps({**info.as_dict(), "header": header, "footer": footer}, indent=2))


@history_group.command("import")
@click.argument("records", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@history_option
@suite_option
@handle_errors
def history_import(records: tuple[Path, ...], history_path: Path, suite_path: Path | None) -> None:
    """Record run record files (RUN.jsonl, either format) in the history; one already there is left as it is.

    Each record is measured again from its results under the suite file it names (its gate
    policy and approval thresholds, its judges' approvals re-derived) and refused (exit 2, naming
    what disagrees) when its footer, summary, count or gate disagree with its results, its
    thresholds are not the suite's, or it claims to have run in the future. It is then compared
    with the suite's last green run (5% relative drop per axis, as `compare`): a run that
    regressed is recorded, never green, so it never becomes the baseline. Records that come
    from elsewhere (another job's artifacts): pin their suite with --suite."""
    suite = pinned_suite(suite_path)
    with open_history(history_path, create=True) as history:
        for path in records:
            info, new, comparison = history.import_file(path, suite=suite)
            state = "green" if info.green else "not green"
            if comparison is not None and not comparison.passed:
                state += f" (its comparison with {one_line(comparison.baseline.run_id)} failed: " \
                         f"{one_line('; '.join(comparison.reasons)[:500])})"
            elif info.gate_passed is False:
                state += " (its gate failed)"
            say(f"{'recorded' if new else 'already recorded'} {one_line(info.run_id)} ({one_line(str(path))}): {state}")


@history_group.command("prune")
@history_option
@click.option("--keep", type=click.IntRange(1), help="Keep the newest N runs of each suite.")
@click.option("--older-than-days", type=click.FloatRange(0), help="Remove runs started longer ago than this.")
@click.option("--suite", help="Only this suite's runs.")
@handle_errors
def history_prune(history_path: Path, keep, older_than_days, suite) -> None:
    """Remove old runs. The newest green run of each suite is always kept: it is the baseline."""
    from judgekit.errors import InputError

    if keep is None and older_than_days is None:
        raise InputError("say what to remove: --keep N and/or --older-than-days D")
    with open_history(history_path, create=False) as history:
        removed = history.prune(keep=keep, older_than_days=older_than_days, suite=suite)
    say(f"removed {removed} run(s)")
