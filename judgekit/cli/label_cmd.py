"""Command: label (people label a sample of a suite, blind to the judge)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from judgekit.cli._exit import AxisChoice, handle_errors
from judgekit.cli._out import one_line

@click.command()
@click.argument("suite", type=click.Path(path_type=Path))
@click.option("--sample", "n", type=click.IntRange(1), default=None,
              help="How many trajectories to label. Default: the plan of `judgekit calibrate --plan` for the "
              "suite's thresholds (a judge with TPR and TNR 0.9, half pass, power 0.8).")
@click.option("--seed", type=int, required=True, help="Seed of the sample: same suite, seed and N, same sample.")
@click.option("--labeler", required=True, help="Your name, recorded in every label.")
@click.option(
    "--labels", "labels_file", type=click.Path(dir_okay=False, path_type=Path),
    help="Labels file to append to (default: <suite's calibration_dir>/<rubric-id>/labels.jsonl).",
)
@click.option("--axis", "axes", multiple=True, type=AxisChoice(), help="Axis to label (repeat; default: the rubric's judged axes).")
@click.option(
    "--verdicts", type=click.Path(dir_okay=False, path_type=Path),
    help="Run record (judgekit run --out): stratify the sample by the judge's verdict, half pass, half fail.",
)
@click.option(
    "--threshold", type=click.FloatRange(0, 1), default=0.5, show_default=True,
    help="With --verdicts: a faithfulness score at or above it counts as a judge pass.",
)
@handle_errors
def label(suite: Path, n: int | None, seed: int, labeler: str, labels_file: Path | None, axes: tuple[str, ...],
          verdicts: Path | None, threshold: float) -> None:
    """Label a reproducible sample of SUITE's trajectories, one axis at a time.

    Shows the task, the end-state diff, the calls and the output with the rubric's guide, never
    the judge's verdict. Answers: p/f for task success, a score in [0, 1] otherwise, s to skip,
    q to quit. Each label is appended to the labels file at once; run the same command again to
    resume where you stopped. A session locks its labels file: a second session on it is refused.
    A last line cut off by a crash is set aside into LABELS.torn on resume, and said.

    Without --sample, N is the plan of `judgekit calibrate SUITE --plan` for the suite's
    thresholds at its default expectations (said in a note).

    The sample ranks trajectories by sha256 of "SEED:id". With --verdicts it takes N // 2 from
    judge-pass and the rest from judge-fail, filling a short class from the other, then from
    trajectories without a verdict.
    """
    from judgekit.calibration.labels_file import LabelFiles
    from judgekit.calibration.labelling import PlainTerminal, RichTerminal, run_session
    from judgekit.calibration.sampling import default_labels_path, plan
    from judgekit.suite.inputs import check_registration, iter_trajectories_of
    from judgekit.run.record import read_run
    from judgekit.suite import load_suite

    loaded = load_suite(suite)
    check_registration(loaded)
    planned = None
    if n is None:
        from judgekit.calibration.approval_record import Thresholds
        from judgekit.calibration.planning import default_sample_size

        planned = default_sample_size(Thresholds.of(loaded.suite.approval))
        if not planned.reachable:
            raise click.UsageError("no sample size reaches the suite's thresholds at the default expectations: give --sample")
        n = planned.n
    record = read_run(verdicts) if verdicts else None
    calibration_dir = loaded.resolve(loaded.suite.calibration_dir)
    if sys.stdout.isatty():
        term = RichTerminal()
    else:
        term = PlainTerminal(lambda text: click.echo(text, nl=False), sys.stdin.readline)
    # Each labels file is locked before it is read and until the session ends, however it ends.
    with LabelFiles(say=lambda text: term.say(f"note: {text}")) as files:
        work = plan(
            list(iter_trajectories_of(loaded)), n=n, seed=seed, labeler=labeler, axes=axes, record=record,
            threshold=threshold, read=files.read,
            labels_path=(lambda _: labels_file) if labels_file else (lambda r: default_labels_path(r, calibration_dir)),
        )
        if planned is not None:
            term.say(f"note: --sample not given: {n} trajectories, the plan for the suite's thresholds "
                     f"({planned.n_pass} pass and {planned.n_fail} fail items for a judge with TPR and TNR 0.9; "
                     "`judgekit calibrate SUITE --plan` plans for other expectations). The planned chance holds "
                     "for that split of classes; the labels decide the split, so check `calibrate --plan` "
                     "against the counts you get, and label more of the short class if one falls short")
        for note in work.notes:
            term.say(f"note: {note}")
        files_of = sorted({str(task.labels_path) for task in work.tasks})
        if not work.tasks:
            term.say(f"nothing left to label: {labeler} has labelled all {work.total} item(s) of this sample")
            return
        term.say(f"{work.total - work.done} item(s) to label as {labeler} ({work.done} already done); "
                 f"labels go to {one_line(', '.join(files_of))}")
        outcome = run_session(work, labeler, term, append=files.append)
        term.say(outcome.summary())
