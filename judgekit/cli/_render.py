"""What commands print: run results (JSON Lines for machines, a table for people), agreement
reports, the gate. Imports nothing heavy at module level: the CLI starts fast."""

from __future__ import annotations

import io
import shutil
import sys
import textwrap

from typing import TYPE_CHECKING

from judgekit._util.text import change_text
from judgekit.cli._out import one_line, say, say_json, say_rendered

if TYPE_CHECKING:
    from judgekit.results import TrajectoryResult


def print_jsonl(result: TrajectoryResult) -> None:
    say_json(result.model_dump_json(exclude={"format_version"}))
    sys.stdout.flush()


def _cell(result, compact: bool) -> str:
    """A result as a table cell: ``describe`` (what it lost too), or ``headline`` when compact."""
    if result is None:
        return "-"
    if result.status == "unscored":
        return "UNSCORED" if compact else f"UNSCORED ({result.unscored_reason})"
    if result.status != "scored":
        return result.status.upper()
    from judgekit.axes.table import axis_named

    axis = axis_named(result.axis)
    return axis.headline(result) if compact else axis.describe(result)


def advisory_axes(record) -> dict[str, str]:
    """Axis -> 'advisory' (none of its verdicts gate) or 'partly advisory' (some judge's do not),
    as the run's gate decided it (its approvals re-derived); axes that gate are left out."""
    report = record.gate_report
    if report is None:
        return {}
    return {axis.axis: "advisory" if axis.gating_n == 0 else "partly advisory" for axis in report.axes
            if axis.advisory}


def advisory_legend(record) -> list[str]:
    """Why each advisory axis is advisory, in the gate's words: its judge (the model, without
    its hash), its rubric, how many trajectories, the reason and what would make it gate."""
    judges = {}
    for seen in record.judges:
        for axis, status in seen.axes.items():
            if status == "advisory":
                judges.setdefault((axis, seen.rubric), seen.model_pin.split("@sha256:")[0])
    lines = []
    for axis in record.gate_report.axes if record.gate_report is not None else []:
        for adv in axis.advisory:
            judge = judges.get((axis.axis, adv.rubric))
            lines.append(f"* {axis.axis} is advisory (shown, never gating): "
                         + (f"judge {judge} on " if judge else "") + f"{adv.rubric}, {adv.trajectories} "
                         f"trajectories: {adv.reason}. To let it gate: {adv.command}")
    return [one_line(line) for line in lines]


class TablePrinter:
    """The run for people, told one result at a time (``add``), printed at the end (``print``):
    a table of the first ``max_rows`` trajectories (a screenful; the rest are counted, and are
    all in ``--format jsonl`` or the ``--out`` record), why an advisory axis is advisory, then a
    line per axis from the record's summary with the reasons of its unscored results.

    The table fits ``width`` columns (None: the terminal's, else rich's default, 80, or
    ``COLUMNS``): a rubric shared by every row is said once above it, ids are never cut, and
    each cell is the axis's ``describe`` when the table fits with them, else its ``headline``."""

    def __init__(self, max_rows: int = 40, width: int | None = None):
        self.max_rows = max_rows
        self.width = width
        self.rows: list = []
        self.seen = 0
        self.rubrics: set[str] = set()
        self.unscored: dict[str, dict[str, int]] = {}  # axis -> unscored reason -> results

    def add(self, result: TrajectoryResult) -> None:
        self.seen += 1
        self.rubrics.add(result.rubric)
        for name, res in result.axes.items():
            if res.status == "unscored":
                reasons = self.unscored.setdefault(name, {})
                reasons[res.unscored_reason] = reasons.get(res.unscored_reason, 0) + 1
        if len(self.rows) < self.max_rows:
            self.rows.append((result.trajectory_id, result.rubric, dict(result.axes)))

    def _table(self, record, width: int, compact: bool):
        """The table in ``width`` columns: ``describe`` cells left to wrap, or (``compact``)
        one-line ``headline`` cells, each column cut to its share of the width (widest first)."""
        from rich.table import Table
        from rich.text import Text

        # Every cell is escaped and taken as plain text (never rich markup): ids and check names
        # come from files judgekit did not write. Rendered to text first, so it is masked as well.
        title = f"{record.suite}: {self.seen} trajectories"
        if len(self.rubrics) == 1:
            title += f", rubric {next(iter(self.rubrics))}"
        table = Table(title=Text(one_line(title)))
        ids = [Text(one_line(trajectory_id)) for trajectory_id, _, _ in self.rows]
        id_width = min(max((text.cell_len for text in ids), default=0), width // 2)
        table.add_column("trajectory", min_width=max(id_width, len("trajectory")), overflow="fold")
        columns: list[tuple[Text, list[Text]]] = []
        if len(self.rubrics) > 1:
            columns.append((Text("rubric"), [Text(one_line(rubric)) for _, rubric, _ in self.rows]))
        advisory = advisory_axes(record)
        for axis in record.summary:
            header = one_line(axis) + (f"\n({advisory[axis]}*)" if axis in advisory else "")
            columns.append((Text(header), [Text(one_line(_cell(results.get(axis), compact)))
                                           for _, _, results in self.rows]))
        natural = [max(text.cell_len for text in [*header.split(), *cells]) for header, cells in columns]
        borders = 1 + 3 * (len(columns) + 1)  # a bar and two spaces of padding per column, one bar more
        fitted = _fit(natural, width - borders - max(id_width, len("trajectory"))) if compact else natural
        for (header, _), most in zip(columns, fitted):
            table.add_column(header, no_wrap=compact, overflow="ellipsis", max_width=most if compact else None)
        for n, text in enumerate(ids):
            table.add_row(text, *(cells[n] for _, cells in columns))
        return table

    def print(self, record, *, table: bool = True, err: bool = False) -> None:
        """The table (unless ``table`` is False), the advisory legend and the per-axis lines
        (``err``: on stderr, when stdout carries JSON Lines)."""
        from rich.console import Console

        terminal = sys.stdout.isatty()
        # rich's width: the terminal's, else COLUMNS, else 80 (a pipe, a CI log).
        width = self.width or Console(file=io.StringIO(), width=shutil.get_terminal_size().columns
                                      if terminal else None).width
        if table:
            self._print_table(record, width, terminal)
        for line in advisory_legend(record):
            say(textwrap.fill(line, width=max(width, 40), subsequent_indent="  ", break_on_hyphens=False,
                                break_long_words=False), err=err)
        for axis, summary in record.summary.items():
            parts = [f"{summary.scored} scored"]
            if summary.passed is not None:
                parts.append(f"{summary.passed} passed")
            if summary.mean_score is not None:
                parts.append(f"mean {summary.mean_score:.3f}")
            if summary.unscored:
                why = ", ".join(f"{reason} {n}" for reason, n in sorted(self.unscored.get(axis, {}).items()))
                parts.append(f"{summary.unscored} unscored" + (f" ({why})" if why else ""))
            if summary.errors:
                parts.append(f"{summary.errors} could not be scored")
            say(f"{one_line(axis)}: " + ", ".join(parts), err=err)

    def _print_table(self, record, width: int, terminal: bool) -> None:
        """The table with ``describe`` cells when its rows take at most two lines on average,
        else with one-line ``headline`` cells."""
        from rich.console import Console

        def rendered(compact: bool) -> str:
            buffer = io.StringIO()
            console = Console(file=buffer, soft_wrap=False, force_terminal=terminal, width=width)
            console.print(self._table(record, width, compact))
            return buffer.getvalue()

        compact = rendered(compact=True)
        full = rendered(compact=False)
        fits = full.count("\n") <= compact.count("\n") + len(self.rows)
        say_rendered(full if fits else compact)
        if self.seen > len(self.rows):
            say(f"... {self.seen - len(self.rows)} more trajectories not shown (all of them: --format jsonl, or --out)")


def _fit(widths: list[int], room: int, floor: int = 6) -> list[int]:
    """``widths`` cut, widest first, until they sum to ``room`` or each is down to ``floor``."""
    widths = list(widths)
    while sum(widths) > room:
        widest = max(range(len(widths)), key=lambda i: widths[i])
        if widths[widest] <= floor:
            break
        widths[widest] -= 1
    return widths


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
    against = f"{base.run_id} ({comparison.baseline_source})" if base else f"no baseline ({comparison.baseline_source})"
    say(f"compare {one_line(comparison.run.run_id)} against {one_line(against)}", err=err)
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
