"""Commands: calibrate, agreement, gate."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from judgekit.cli._exit import EXIT_GATE_FAILED, handle_errors
from judgekit.cli._out import one_line, say, say_json
from judgekit.cli._render import format_metric, print_agreement, print_gate


def _safety_labels(path: Path) -> bool:
    """Whether the labels file labels a safety judge's question (every label); a file mixing
    safety questions and axes is refused: they calibrate two different judges."""
    from judgekit.calibration.labels import SAFETY_QUESTIONS, load_labels
    from judgekit.errors import InputError

    axes = {label.axis for label in load_labels(path)}
    safety = axes & set(SAFETY_QUESTIONS)
    if safety and axes - safety:
        raise InputError("the labels mix a safety question and axes: they calibrate two different judges, so keep "
                         "them in two files", path)
    return bool(safety)


def _is_report(data) -> bool:
    """A previous ``calibrate --out`` file: rubric id@version -> agreement report."""
    return isinstance(data, dict) and bool(data) and all(isinstance(v, dict) and "axes" in v for v in data.values())


@click.command()
@click.argument("suite", type=click.Path(path_type=Path))
@click.option("--labels", "labels_path", type=click.Path(dir_okay=False, path_type=Path), help="labels.jsonl (required unless --plan).")
@click.option("--plan", "plan_only", is_flag=True,
              help="Judge nothing: say how many pass and fail items to label for the bounds to clear the suite's thresholds.")
@click.option("--expect-tpr", type=click.FloatRange(0, 1), default=0.9, show_default=True, help="With --plan: the judge's expected TPR.")
@click.option("--expect-tnr", type=click.FloatRange(0, 1), default=0.9, show_default=True, help="With --plan: the judge's expected TNR.")
@click.option("--prevalence", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=None,
              help="With --plan: the share of human pass among the items to label (default 0.5, or the pilot's).")
@click.option("--power", type=click.FloatRange(0.5, 1, max_open=True), default=0.8, show_default=True,
              help="With --plan: the chance that every bound clears with the planned sample.")
@click.option("--pilot", nargs=2, type=click.Path(dir_okay=False, path_type=Path), metavar="LABELS VERDICTS",
              help="With --plan: estimate the agreement from a pilot labels file and a verdicts file instead.")
@click.option("--repeats", type=click.IntRange(1, 20), default=1, show_default=True, help="Ask each question K times (flip rate).")
@click.option("--compare", is_flag=True, help="Also print mean human vs mean judge score on the sample.")
@click.option("--seed", type=int, default=0, show_default=True, help="Bootstrap seed.")
@click.option("--threshold", type=click.FloatRange(0, 1), default=None,
              help="Graded scores >= this count as pass (default: the suite's approval.graded_pass, 0.5 unless set; "
              "the gate re-derives approvals with the suite's, so another value is refused).")
@click.option("--spot-check", "spot_check_n", type=click.IntRange(1), metavar="N",
              help="Judge nothing new and write nothing: re-ask N of the recorded calibration questions of each "
              "rubric's approval (past the cache) and report answers that differ, labelled items without a recorded "
              "verdict and recorded verdicts the suite no longer asks or filed under another item (drift or "
              "tampering). Exit 1 when any. The sample is drawn with a random seed, printed, unless --seed is given.")
@click.option("--judge-model", help="Calibrate this judge instead of the suite's.")
@click.option("--judge-api-base")
@click.option("--judge-api-key-env")
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path), show_default=True,
              help="Verdict cache (default: [tool.judgekit] cache-dir, else the suite's cache_dir, else .judgekit/cache).")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="Write the agreement report(s) as JSON.")
@handle_errors
def calibrate(suite, labels_path, plan_only, expect_tpr, expect_tnr, prevalence, power, pilot, repeats, compare, seed,
              threshold, spot_check_n, judge_model, judge_api_base, judge_api_key_env, cache_dir, out) -> None:
    """Measure the suite's judge against human labels and record whether it may gate.

    Writes calibration/<rubric-id>/approvals/<fingerprint>.json and, beside it, the judge's
    verdicts on the labelled items (<fingerprint>.verdicts.jsonl); the labels file must lie in
    the calibration folder. Commit all three: the gate re-derives the approval from the labels
    and the verdicts, never from what the record says. A judge is approved on an axis when the
    95% one-sided bounds clear the suite's thresholds: kappa's lower bound, and TPR's and TNR's
    (binary axes) or Spearman's lower bound and the MAE's upper bound (graded axes), with no
    more than approval.max_abstention_rate of the labelled items left without a verdict.
    Exit 0 when every judged axis is approved, 1 when one is refused or drifted.

    With --plan: how many pass and fail items to label so that the bounds clear with
    probability --power, from --expect-tpr/--expect-tnr/--prevalence or a --pilot.
    """
    if plan_only:
        _plan(suite, expect_tpr, expect_tnr, prevalence, power, pilot, seed, threshold)
        return
    if labels_path is None:
        raise click.UsageError("--labels is required (or --plan to plan a label set)")
    if spot_check_n is not None:
        if click.get_current_context().get_parameter_source("seed") is click.core.ParameterSource.DEFAULT:
            import secrets

            seed = secrets.randbelow(2**31)  # a sample nobody can know in advance and leave alone
            say(f"spot check seed {seed} (pass --seed {seed} to draw the same sample again)")
        _spot_check(suite, labels_path, spot_check_n, seed, repeats, judge_model, judge_api_base, judge_api_key_env)
        return
    from judgekit.run.calibrate import calibrate_suite
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
    if _safety_labels(labels_path):
        from judgekit.safety.calibrate import calibrate_safety

        found = calibrate_safety(loaded, labels_path, calibration_dir=loaded.resolve(loaded.suite.calibration_dir),
                                 thresholds=loaded.suite.approval, options=options, seed=seed)
        from judgekit.calibration.calibrate import RubricCalibration

        outcomes = [RubricCalibration(found.record.judge.rubric, found.report, found.record, found.path)]
    else:
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
            say(f"  {axis}: {one_line(decision.statement)}")
            if compare:
                say(f"  {axis}: mean human {decision.mean_human}, mean judge {decision.mean_judge} on {decision.n} items")
        for drift in record.drift:
            ok &= not drift.alarm
            flag = "DRIFT ALARM" if drift.alarm else "drift check"
            say(f"  {flag} {one_line(drift.axis)} vs {one_line(drift.previous_fingerprint[:12])} ({drift.previous_decided_at:%Y-%m-%d}): "
                       f"kappa {format_metric(drift.kappa_before)} -> {format_metric(drift.kappa_after)}, accuracy {format_metric(drift.accuracy_before)} -> "
                       f"{format_metric(drift.accuracy_after)}: {one_line(drift.reason)}")
        say(f"  approval record: {one_line(str(outcome.path))} (and its verdicts file beside it: commit both)")
    if out is not None:
        import json

        from judgekit._util.files import write_text_atomically

        reports = {o.rubric: o.report.model_dump(mode="json") for o in outcomes}
        write_text_atomically(out, json.dumps(reports, indent=2) + "\n")
    if not ok:
        sys.exit(EXIT_GATE_FAILED)


def _spot_check(suite, labels_path, sample, seed, repeats, judge_model, judge_api_base, judge_api_key_env) -> None:
    """calibrate --spot-check: the recorded calibration questions re-asked, differences reported."""
    from judgekit.run.calibrate import spot_check
    from judgekit.judge.resolve import JudgeOverride
    from judgekit.run import RunOptions
    from judgekit.suite import load_suite

    loaded = load_suite(suite)
    options = RunOptions(override=JudgeOverride(judge_model, judge_api_base, judge_api_key_env))
    checks = spot_check(loaded, labels_path, calibration_dir=loaded.resolve(loaded.suite.calibration_dir),
                        sample=sample, seed=seed, options=options, repeats=repeats)
    clean = True
    for check in checks:
        head = f"== {one_line(check.rubric)}: judge {check.fingerprint[:12]}"
        if check.problem is not None:
            say(f"{head}: not checked: {one_line(check.problem)}")
            clean = False
            continue
        say(f"{head}: {check.asked} of {check.recorded} recorded question(s) re-asked: {check.same} the same, "
            f"{len(check.differences)} different")
        for diff in check.differences:
            say(f"  DIFFERS {one_line(diff.trajectory_id)} {diff.axis} (repeat {diff.repeat}): recorded "
                f"{one_line(diff.recorded)}, now {one_line(diff.now)}")
        for what, ids in (("labelled question(s) with no recorded verdict", check.missing),
                          ("recorded verdict(s) the suite no longer asks", check.unknown),
                          ("recorded verdict(s) filed under another item than their question", check.misplaced)):
            if ids:
                say(f"  {len(ids)} {what} (first: {one_line(ids[0])})")
        clean &= check.clean
    say("spot check: " + ("the recorded verdicts hold" if clean else
                          "DRIFT OR TAMPERING: the recorded verdicts do not hold (recalibrate, and review the calibration "
                          "files' history)"))
    if not clean:
        sys.exit(EXIT_GATE_FAILED)


def _plan(suite, tpr, tnr, prevalence, power, pilot, seed, threshold) -> None:
    """calibrate --plan: the sample each kind of axis needs under the suite's thresholds."""
    from judgekit.calibration.approval_record import Thresholds
    from judgekit.calibration.planning import DEFAULT_PREVALENCE, plan_binary, plan_pilot
    from judgekit.suite import load_suite

    thresholds = Thresholds.of(load_suite(suite).suite.approval)
    threshold = thresholds.graded_pass if threshold is None else threshold
    say(f"thresholds: kappa >= {thresholds.min_kappa}, TPR >= {thresholds.min_tpr}, TNR >= {thresholds.min_tnr} "
        f"(binary), Spearman >= {thresholds.min_spearman}, MAE <= {thresholds.max_mae} (graded), as "
        f"{round(100 * thresholds.confidence)}% one-sided bounds, on at least {thresholds.min_items} items")
    if pilot:
        from judgekit.calibration import load_labels, load_verdicts

        plans = plan_pilot(thresholds, load_labels(pilot[0]), load_verdicts(pilot[1]), threshold=threshold,
                           prevalence=prevalence, power=power, seed=seed)
        if not plans:
            raise click.UsageError("the pilot has no labelled item with a scored verdict")
        for axis, plan in plans.items():
            say(f"{one_line(axis)}: {one_line(plan.describe())}")
            for note in plan.notes:
                say(f"  note: {one_line(note)}")
        return
    plan = plan_binary(thresholds, tpr=tpr, tnr=tnr, prevalence=DEFAULT_PREVALENCE if prevalence is None else prevalence,
                       power=power, seed=seed)
    say(plan.describe())
    say("graded axes: the same kappa part, plus Spearman and MAE, which need a pilot: --pilot LABELS VERDICTS")


@click.command()
@click.option("--labels", "labels_path", type=click.Path(dir_okay=False, path_type=Path), required=True)
@click.option("--verdicts", "verdicts_path", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="Judge verdicts, JSON Lines (`judgekit schema verdicts`); may hold several judges.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--n-boot", type=click.IntRange(0, 100_000), default=2000, show_default=True,
              help="Bootstrap resamples for the 95% intervals, 0 to 100000 (0: no intervals).")
@click.option("--threshold", type=click.FloatRange(0, 1), default=0.5, show_default=True,
              help="Graded scores, and the scores of verdicts without pass/fail (score-only detectors), "
              "count as pass when >= this.")
@click.option("--positive", "positive", multiple=True, metavar="CLASS",
              help="Multiclass labels: a class that counts as pass (repeatable); every other class counts as fail.")
@click.option("--pool", type=click.Choice(["majority", "any", "all"]), default="majority", show_default=True,
              help="Several labelers per item: the reference is the majority (ties left out and listed), "
              "pass when any labeler says pass, or pass only when all do.")
@click.option("--unscored", "unscored", type=click.Choice(["exclude", "wrong"]), default="exclude", show_default=True,
              help="Unscored verdicts: left out of the maths, or counted as wrong answers (counted either way).")
@click.option("--judge", "judges", multiple=True, metavar="NAME",
              help="Only this judge of the verdicts file (repeatable; default: every judge).")
@click.option("--json", "as_json", is_flag=True, help="The full report as JSON: one report per judge, one per line.")
@handle_errors
def agreement(labels_path, verdicts_path, seed, n_boot, threshold, positive, pool, unscored, judges, as_json) -> None:
    """Agreement of judge verdicts produced elsewhere with human labels.

    Each judge of the verdicts file is reported; several judges appear side by side in one
    table per axis (the details of each: --json, or --judge NAME)."""
    from judgekit.calibration import load_labels, load_verdicts
    from judgekit.calibration.agreement import agreement_by_judge

    from judgekit.errors import InputError

    labels, verdicts = load_labels(labels_path), load_verdicts(verdicts_path)
    for found, path, what in ((labels, labels_path, "labels"), (verdicts, verdicts_path, "verdicts")):
        if not found:
            raise InputError(f"no {what} in the file: nothing to measure agreement on", path)
    reports = agreement_by_judge(
        labels, verdicts, judges=judges or None, seed=seed, n_boot=n_boot,
        threshold=threshold, positive=positive or None, pool=pool, unscored=unscored,
    )
    if as_json:
        for report in reports:
            say_json(report.model_dump_json())
    elif len(reports) == 1:
        report = reports[0]
        say(f"judge: {one_line(report.judge) if report.judge else '(unnamed)'}")
        say(f"unscored verdicts: {'left out of the maths (counted)' if unscored == 'exclude' else 'counted as wrong answers'}")
        print_agreement(report)
    else:
        from judgekit.cli._render_agreement import print_agreement_table

        print_agreement_table(reports)


@click.command("gate")
@click.argument("run_path", metavar="RUN", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--calibration-dir", type=click.Path(file_okay=False, path_type=Path), help="Default: the suite's.")
@click.option("--suite", "suite_path", type=click.Path(path_type=Path), metavar="SUITE",
              help="Gate under this suite instead of the one the record names (pin it for a record from elsewhere).")
@handle_errors
def gate_cmd(run_path: Path, calibration_dir: Path | None, suite_path: Path | None) -> None:
    """Gate a run record (format 2 JSON Lines, or format 1 JSON): exit 0 pass, 1 gate failed,
    2 usage or input error, 3 internal error. The record is read as a stream; the gate is
    decided again from its results and today's approvals, under the gate policy, approval
    thresholds and calibration folder of its suite (never the record's word for them)."""
    from judgekit.gate import gate
    from judgekit.run.record import open_run
    from judgekit.suite import load_suite

    report = gate(open_run(run_path), calibration_dir=calibration_dir,
                  loaded=load_suite(suite_path) if suite_path is not None else None)
    print_gate(report)
    if not report.passed:
        sys.exit(EXIT_GATE_FAILED)
