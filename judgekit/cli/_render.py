"""What commands print: run results (JSON Lines for machines; the table for people is
``_render_table``), the ledger, agreement reports, the gate, the comparison. Imports nothing
heavy at module level: the CLI starts fast."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from judgekit._util.text import change_text
from judgekit.cli._out import one_line, say, say_json

if TYPE_CHECKING:
    from judgekit.results import TrajectoryResult


def print_jsonl(result: TrajectoryResult) -> None:
    say_json(result.model_dump_json(exclude={"format_version"}))
    sys.stdout.flush()


def print_ledger(ledger) -> None:
    data = ledger.as_dict()
    unpriced = data["calls_without_cost"]
    cost = f"${data['cost_usd']:.4f}"
    if unpriced:
        cost = "unknown" if not data["cost_usd"] else f"{cost} + unknown for {unpriced} call(s)"
    failed = ", ".join(f"{reason} {n}" for reason, n in data["failed_attempts"].items())
    # What the judge did and cost; its unscored results are counted once, on their axis's line.
    say(
        f"judge: {data['calls']} call(s), {data['cache_hits']} cache hit(s), "
        f"{data['prompt_tokens'] + data['completion_tokens']} tokens, cost {cost}"
        + (f", failed attempts: {failed}" if failed else ""),
        err=True,
    )
    if data["cache_refused"]:
        count = sum(data["cache_refused"].values())
        why = "; ".join(f"{reason}: {n}" for reason, n in data["cache_refused"].items())
        say(f"judgekit: warning: verdict cache {one_line(data['cache_dir'] or '')}: {count} entr"
            f"{'y' if count == 1 else 'ies'} refused and judged again ({why})", err=True)
    if data["cache_withheld"]:
        say(f"judgekit: note: {data['cache_withheld']} verdict(s) were not stored in the verdict cache: they "
            "hold what looks like a secret (an API key the judge echoed?) and are judged again next run", err=True)
    if data["cache_read_only"]:
        say(f"judgekit: note: verdict cache {one_line(data['cache_dir'] or '')} is read-only: its verdicts "
            "were used, new ones were not stored", err=True)


def progress_factory():
    """A rich progress bar on a terminal; None elsewhere (CI logs stay clean)."""
    if not sys.stderr.isatty():
        return None

    def start(total: int):
        from rich.progress import Progress

        progress = Progress(transient=True)
        progress.start()
        task = progress.add_task("judging", total=total)
        done = {"n": 0}

        def tick() -> None:
            done["n"] += 1
            progress.update(task, advance=1)
            if done["n"] >= total:
                progress.stop()

        return tick

    return start


def format_metric(metric, interval_digits: int = 3) -> str:
    """A metric with its interval, for people: ``0.812 [0.702, 0.903]`` (n/a when undefined)."""
    if metric is None or metric.value is None:
        return "n/a"
    if metric.low is None:
        return f"{metric.value:.3f}"
    return f"{metric.value:.3f} [{metric.low:.{interval_digits}f}, {metric.high:.{interval_digits}f}]"



def print_agreement(report) -> None:
    for section in report.axes:
        head = f"{section.axis} ({section.kind}): n={section.n}"
        extras = []
        if section.n_unscored:
            extras.append(f"{section.n_unscored} unscored")
        if section.n_missing:
            extras.append(f"{section.n_missing} without verdict")
        if section.n_tied:
            extras.append(f"{section.n_tied} tied labels left out")
        say(head + (f" ({', '.join(extras)})" if extras else ""))
        if section.kind == "pairwise":
            for order, stats in section.orders.items():
                say(f"  order {order}: accuracy {format_metric(stats.accuracy)} ({_pairwise_fraction(report, stats)}), "
                    f"kappa vs human {format_metric(stats.kappa_vs_human)}")
            say(f"  accuracy (average of orders) {format_metric(section.accuracy_average)}")
            say(f"  right in both orders {format_metric(section.correct_both)} ({section.n_correct_both}/{section.n_both})")
            say(f"  order consistency {format_metric(section.order_consistency)} ({section.n_consistent}/{section.n_both_scored})")
            say(f"  kappa between orders {format_metric(section.kappa_between_orders)}")
        else:
            stats = section.binarised if section.kind == "graded" else section
            if section.kind == "graded":
                say(f"  spearman {format_metric(section.spearman)}, mean absolute error {format_metric(section.mae)}; binarised at {section.threshold}:")
            if section.kind == "multiclass":
                say(f"  pass = {one_line(', '.join(section.positive_classes))}; "
                    f"fail = {one_line(', '.join(section.negative_classes))}")
            c = stats.confusion
            say(f"  base rate {format_metric(stats.base_rate)}, accuracy {format_metric(stats.accuracy)}, kappa {format_metric(stats.kappa)}")
            say(f"  TPR {format_metric(stats.tpr)}, TNR {format_metric(stats.tnr)}, precision {format_metric(stats.precision)}")
            say(f"  balanced accuracy {format_metric(stats.balanced_accuracy)}, macro F1 {format_metric(stats.f1_macro)}")
            say(f"  confusion (human x judge): tp={c.tp} fn={c.fn} fp={c.fp} tn={c.tn}")
            if section.kind == "multiclass":
                for row in section.class_confusion:
                    say(f"    human {one_line(row.category)} ({'pass' if row.positive else 'fail'}): judge pass "
                        f"{row.judge_pass}, fail {row.judge_fail}" + (f", unscored {row.unscored}" if row.unscored else ""))
            if getattr(section, "n_from_score", 0):
                say(f"  {section.n_from_score} verdict(s) gave only a score: pass when score >= {report.threshold}")
        if getattr(section, "reference_rule", "") and section.inter_annotator is not None:
            say(f"  reference: {one_line(section.reference_rule)}")
        for ia in (section.inter_annotator, getattr(section, "inter_annotator_pass_fail", None)):
            if ia is not None:
                say(f"  {inter_annotator_line(ia)}")
        if section.repeats is not None:
            r = section.repeats
            say(f"  repeats: flip rate {r.flip_rate} ({r.n_unstable}/{r.n_repeated}); unstable: {one_line(', '.join(r.unstable_ids)) or 'none'}")


def _pairwise_fraction(report, stats) -> str:
    """The counts behind one order's accuracy: over scored verdicts unless unscored count as wrong."""
    if getattr(report, "unscored", "exclude") == "wrong" or not stats.n_unscored:
        shown = f"{stats.n_correct}/{stats.n}"
        return shown + (f", {stats.n_unscored} unscored counted wrong" if stats.n_unscored else "")
    return f"{stats.n_correct}/{stats.n - stats.n_unscored} scored; {stats.n_unscored} unscored left out"


def _f(value) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def inter_annotator_line(ia) -> str:
    """Agreement among labelers, in one line."""
    on = {"labels": "", "pass/fail": " on pass/fail", "classes": " on the classes"}[getattr(ia, "on", "labels")]
    line = f"inter-annotator{on} ({ia.method}, {len(ia.labelers)} labelers, {ia.n_items} items): kappa {_f(ia.kappa)}"
    if getattr(ia, "n_items_alpha", 0):
        line += f"; Krippendorff's alpha {_f(ia.alpha)} on {ia.n_items_alpha} items with 2+ labels"
    return line


def print_gate(report, *, err: bool = False) -> None:
    """The gate for people (``err``: on stderr, when stdout carries JSON Lines)."""
    for reason in report.reasons:
        say(f"FAIL run: {one_line(reason)}", err=err)
    for axis in report.axes:
        value = "n/a" if axis.value is None else f"{axis.value:.3f}"
        status = "PASS" if axis.passed else "FAIL"
        if axis.gating_n == 0 and axis.advisory:
            status = "ADVISORY"  # shown, never gating
        say(f"{status} {one_line(axis.axis)}: {value} (min {axis.minimum}) over {axis.gating_n} gating verdict(s)"
            + (f", {axis.unscored} unscored" if axis.unscored else ""), err=err)
        for reason in axis.reasons:
            say(f"  - {one_line(reason)}", err=err)
        for statement in getattr(axis, "approvals", []):
            say(f"  certified: {one_line(statement)}", err=err)
        for note in getattr(axis, "same_family", []):
            say(f"  same family: {one_line(note)}", err=err)
        for adv in axis.advisory:
            shown = "" if axis.advisory_value is None else f" (advisory value {axis.advisory_value:.3f})"
            say(f"  advisory{shown}: {one_line(adv.rubric)}, {adv.trajectories} trajectories: {one_line(adv.reason)}. What to do: {one_line(adv.command)}", err=err)
        for correction in axis.corrected:
            c = correction.rate
            judge = f" ({one_line(correction.rubric)})" if len(axis.corrected) > 1 else ""
            if c.refused_reason:
                say(f"  corrected pass rate{judge}: refused: {c.refused_reason}", err=err)
            else:
                say(f"  corrected pass rate {c.corrected:.3f} [{c.low:.3f}, {c.high:.3f}] (observed {c.observed:.3f}){judge}", err=err)
    say("gate: " + ("PASSED" if report.passed else "FAILED"), err=err)


def print_comparison(comparison, *, err: bool = False) -> None:
    """The comparison for people: one line per axis, the regressions, the verdict and why."""
    base = comparison.baseline
    say(f"compare {one_line(comparison.run.run_id)} against {one_line(comparison.against)}", err=err)
    for axis in comparison.axes:
        parts = []
        if axis.mean is not None:
            parts.append(f"mean {axis.mean:.3f}")
        if axis.baseline_mean is not None:
            change = change_text(axis.relative_drop)
            parts.append(f"baseline {axis.baseline_mean:.3f} ({change})")
        if axis.test is not None:
            parts.append(f"p={axis.test.p_value:.3g} [{axis.test.ci_low:+.3f}, {axis.test.ci_high:+.3f}]")
        parts.append(f"{axis.shared} shared" if base else f"{axis.scored} scored")
        mark = "FLAGGED" if axis.flagged else "ok"
        if axis.advisory:
            mark += " (advisory)"
        say(f"  {axis.axis}: {mark}: " + ", ".join(parts), err=err)
    if comparison.regressions_total:
        say(f"regressions ({comparison.regressions_total}; flipped pass -> fail first):", err=err)
        for reg in comparison.regressions[:20]:
            before = "-" if reg.baseline_score is None else f"{reg.baseline_score:.2f}"
            after = reg.status if reg.score is None else f"{reg.score:.2f}"
            lost = "; ".join(item[:200] for item in reg.lost[:3]) or (reg.note or "")
            say(f"  {one_line(reg.trajectory_id[:200])} {reg.axis}: {before} -> {after}"
                + (" FLIPPED" if reg.flipped else "") + (f": {one_line(lost[:600])}" if lost else ""), err=err)
        if comparison.regressions_total > 20:
            say(f"  ... and {comparison.regressions_total - 20} more", err=err)
    for note in comparison.notes:
        say(f"note: {one_line(note[:1000])}", err=err)
    if comparison.passed:
        say("compare: PASSED", err=err)
    else:
        say("compare: FAILED", err=err)
        for reason in comparison.reasons:
            say(f"  - {one_line(reason[:1000])}", err=err)
