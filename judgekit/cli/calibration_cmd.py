"""Commands: calibrate, agreement, gate."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from judgekit.cli._exit import EXIT_GATE_FAILED, handle_errors
from judgekit.cli._out import one_line, say, say_json
from judgekit.cli._render import _m, print_agreement, print_gate


def _is_report(data) -> bool:
    """A previous ``calibrate --out`` file: rubric id@version -> agreement report."""
    return isinstance(data, dict) and bool(data) and all(isinstance(v, dict) and "axes" in v for v in data.values())


@click.command()
@click.argument("suite", type=click.Path(path_type=Path))
@click.option("--labels", "labels_path", type=click.Path(dir_okay=False, path_type=Path), required=True, help="labels.jsonl")
@click.option("--repeats", type=click.IntRange(1, 20), default=1, show_default=True, help="Ask each question K times (flip rate).")
@click.option("--compare", is_flag=True, help="Also print mean human vs mean judge score on the sample.")
@click.option("--seed", type=int, default=0, show_default=True, help="Bootstrap seed.")
@click.option("--threshold", type=click.FloatRange(0, 1), default=0.5, show_default=True, help="Graded scores >= this count as pass.")
@click.option("--judge-model", help="Calibrate this judge instead of the suite's.")
@click.option("--judge-api-base")
@click.option("--judge-api-key-env")
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="Write the agreement report(s) as JSON.")
@handle_errors
def calibrate(suite, labels_path, repeats, compare, seed, threshold, judge_model, judge_api_base, judge_api_key_env, cache_dir, out) -> None:
    """Measure the suite's judge against human labels and record whether it may gate.

    Writes calibration/<rubric-id>/approvals/<fingerprint>.json. Exit 0 when every judged axis
    is approved, 1 when one is refused or drifted.
    """
    from judgekit.calibration.calibrate import calibrate_suite
    from judgekit.cli._render import progress_factory
    from judgekit.runtime import init
    from judgekit.judge.resolve import JudgeOverride
    from judgekit.run import RunOptions
    from judgekit.suite import load_suite

    init(tune_gc=True)
    loaded = load_suite(suite)
    if out is not None:
        from judgekit.cli._prepare import json_file_is, prepare_out, suite_inputs

        prepare_out(out, [*suite_inputs(loaded), labels_path], what="an agreement report", is_ours=json_file_is(_is_report))
    options = RunOptions(
        override=JudgeOverride(judge_model, judge_api_base, judge_api_key_env), cache_dir=cache_dir,
        progress=progress_factory(),
    )
    outcomes = calibrate_suite(
        loaded, labels_path, calibration_dir=loaded.resolve(loaded.suite.calibration_dir), options=options,
        thresholds=loaded.suite.approval, repeats=repeats, seed=seed, threshold=threshold,
    )
    ok = True
    for outcome in outcomes:
        record = outcome.record
        say(f"== {outcome.rubric}: judge {one_line(record.judge.model_pin)} (fingerprint {record.fingerprint[:12]})")
        print_agreement(outcome.report)
        for axis, decision in record.axes.items():
            ok &= decision.decision == "approved"
            say(f"  {axis}: {decision.decision.upper()}: {one_line('; '.join(decision.reasons))}")
            if compare:
                say(f"  {axis}: mean human {decision.mean_human}, mean judge {decision.mean_judge} on {decision.n} items")
        for drift in record.drift:
            ok &= not drift.alarm
            flag = "DRIFT ALARM" if drift.alarm else "drift check"
            say(f"  {flag} {one_line(drift.axis)} vs {one_line(drift.previous_fingerprint[:12])} ({drift.previous_decided_at:%Y-%m-%d}): "
                       f"kappa {_m(drift.kappa_before)} -> {_m(drift.kappa_after)}, accuracy {_m(drift.accuracy_before)} -> "
                       f"{_m(drift.accuracy_after)}: {one_line(drift.reason)}")
        say(f"  approval record: {one_line(str(outcome.path))}")
    if out is not None:
        import json

        from judgekit._files import write_text_atomically

        reports = {o.rubric: o.report.model_dump(mode="json") for o in outcomes}
        write_text_atomically(out, json.dumps(reports, indent=2) + "\n")
    if not ok:
        sys.exit(EXIT_GATE_FAILED)


@click.command()
@click.option("--labels", "labels_path", type=click.Path(dir_okay=False, path_type=Path), required=True)
@click.option("--verdicts", "verdicts_path", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="Judge verdicts, JSON Lines (`judgekit schema verdicts`).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--n-boot", type=click.IntRange(0, 100_000), default=2000, show_default=True,
              help="Bootstrap resamples for the 95% intervals, 0 to 100000 (0: no intervals).")
@click.option("--threshold", type=click.FloatRange(0, 1), default=0.5, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="The full report as JSON.")
@handle_errors
def agreement(labels_path, verdicts_path, seed, n_boot, threshold, as_json) -> None:
    """Agreement of judge verdicts produced elsewhere with human labels."""
    from judgekit.calibration import agreement as compute, load_labels, load_verdicts

    report = compute(load_labels(labels_path), load_verdicts(verdicts_path), seed=seed, n_boot=n_boot, threshold=threshold)
    if as_json:
        say_json(report.model_dump_json(indent=2))
    else:
        say(f"judge: {one_line(str(report.judge))}")
        print_agreement(report)


@click.command("gate")
@click.argument("run_path", metavar="RUN", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--calibration-dir", type=click.Path(file_okay=False, path_type=Path), help="Default: the suite's, from the run record.")
@handle_errors
def gate_cmd(run_path: Path, calibration_dir: Path | None) -> None:
    """Gate a run record (format 2 JSON Lines, or format 1 JSON): exit 0 pass, 1 gate failed,
    2 usage or input error, 3 internal error. The record is read as a stream; the gate is
    decided again from its results and today's approval records."""
    from judgekit.gate import gate

    from judgekit.run.record import open_run

    report = gate(open_run(run_path), calibration_dir=calibration_dir)
    print_gate(report)
    if not report.passed:
        sys.exit(EXIT_GATE_FAILED)
