"""``judgekit safety SUITE``: the nightly safety scan, one decision per signal."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import click

from judgekit.cli._exit import EXIT_STOP_SHIP, handle_errors
from judgekit.cli.loop_cmd import check_outputs, history_option, report_options


def _day(ctx, param, value):
    if value is None:
        return None
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise click.BadParameter("must be a date, YYYY-MM-DD") from None


@click.command("safety")
@click.argument("suite_path", metavar="SUITE", type=click.Path(path_type=Path))
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="Write the scan record (JSON).")
@report_options
@history_option
@click.option("--record", is_flag=True, help="Record the scan in the history.")
@click.option("--allow-dirty", is_flag=True, help="Scan a working tree with uncommitted changes (the record says so).")
@click.option("--owner", help="Who owns the residual risk (default: the suite's safety.owner, or JUDGEKIT_SAFETY_OWNER).")
@click.option("--today", callback=_day, help="Judge waivers as of this day (YYYY-MM-DD; default: today, UTC).")
@click.option("--no-judge", is_flag=True, help="Skip the policy's judge-based injection detector (advisory until calibrated).")
@handle_errors
def safety(suite_path: Path, out, junit, markdown, html, history_path, record, allow_dirty, owner, today,
           no_judge) -> None:
    """Scan SUITE's trajectories for stop-ship signals under its `safety:` policy.

    Signals: unclassified tools, unexpected writes or sends (calls and end-state changes the
    rubric and policy do not allow), destructive actions without confirmation, untrusted text
    followed as an instruction, secrets exposed, SQL built from untrusted text. A finding is
    waived only by a valid residual-risk record (safety/risks/*.yaml: owner, date, expiry,
    rollback). Prints the decision table; exits 4 when a stop-ship signal is open, 0 when none
    is. With `safety.judge` set, a judge also reads the untrusted text no pattern flagged (and,
    where safety.judge_questions names safety.exfiltration, the writes and sends no check
    flagged); what it finds on a question stops shipping only when the judge is approved by
    calibration on labelled items of that question (`judgekit calibrate SUITE --labels
    calibration/safety-injection/labels.jsonl`, or calibration/safety-exfiltration/), and is
    advisory otherwise. Automated checks catch known patterns; new chains and policy judgement
    still need review.
    """
    from judgekit.cli._out import say
    from judgekit.ci.history import History, history_files
    from judgekit.safety.report import render_text, write_reports
    from judgekit.safety.scan import scan_suite
    from judgekit.suite import load_suite

    loaded = load_suite(suite_path)
    # Every input of the scan: the suite's files, its residual-risk records, the history.
    risks = None
    if loaded.suite.safety is not None:
        from judgekit.safety.risks import confine_risks

        risks = confine_risks(loaded.base_dir / loaded.suite.safety.risks, loaded.path)  # refused before any read
    try:
        records = sorted(risks.iterdir()) if risks is not None and risks.is_dir() else []
    except OSError:
        records = []  # the scan reports the folder it cannot read
    protected = [*loaded.input_files(), *records, *history_files(history_path)]
    check_outputs({"--out": out, "--junit": junit, "--markdown": markdown, "--html": html}, protected)
    report = scan_suite(loaded, today=today, allow_dirty=allow_dirty, owner=owner, use_judge=not no_judge)
    if out is not None:
        from judgekit._util.files import write_text_atomically

        write_text_atomically(out, report.model_dump_json(indent=2) + "\n")
    write_reports(report, junit=junit, markdown=markdown, html_path=html)
    if record:
        with History(history_path) as history:
            history.record_safety(report)
    say(render_text(report))
    if report.stop_ship:
        raise SystemExit(EXIT_STOP_SHIP)
