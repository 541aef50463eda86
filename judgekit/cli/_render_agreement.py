"""Several judges' agreement reports side by side: one table per (axis, item kind), a row per judge.

Plain fixed-width text (no terminal-width wrapping), so a CI log or a pasted table keeps its
columns. Imports nothing heavy: the CLI starts fast.
"""

from __future__ import annotations

from collections.abc import Sequence

from judgekit.cli._out import one_line, say
from judgekit.cli._render import format_metric, inter_annotator_line


def _cell(metric) -> str:
    """A metric and its interval, compactly: ``0.812 [0.70, 0.90]``."""
    return format_metric(metric, interval_digits=2)


def _judge_name(report) -> str:
    return one_line(report.judge) if report.judge else "(unnamed)"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        first, *rest = cells
        return "  " + "  ".join([first.ljust(widths[0]), *(c.rjust(w) for c, w in zip(rest, widths[1:], strict=True))])

    say(line(header))
    say("  " + "  ".join("-" * w for w in widths))
    for row in rows:
        say(line(row))


def _binary_rows(sections) -> tuple[list[str], list[list[str]]]:
    header = ["judge", "n", "unscored", "no verdict", "accuracy", "balanced acc.", "macro F1", "kappa", "TPR", "TNR"]
    graded = sections[0][1].kind == "graded"
    if graded:
        header += ["spearman", "MAE"]
    rows = []
    for report, section in sections:
        stats = section.binarised if graded else section
        row = [_judge_name(report), str(stats.n), str(section.n_unscored), str(section.n_missing),
               *(_cell(getattr(stats, name)) for name in ("accuracy", "balanced_accuracy", "f1_macro", "kappa", "tpr", "tnr"))]
        if graded:
            row += [_cell(section.spearman), _cell(section.mae)]
        rows.append(row)
    return header, rows


def _pairwise_rows(sections) -> tuple[list[str], list[list[str]]]:
    header = ["judge", "n", "unscored", "no verdict", "acc. original", "acc. swapped", "acc. average",
              "right in both", "consistency", "kappa vs human"]
    rows = []
    for report, section in sections:
        orders = section.orders
        rows.append([
            _judge_name(report), str(section.n), str(section.n_unscored), str(section.n_missing),
            _cell(orders["original"].accuracy) if "original" in orders else "-",
            _cell(orders["swapped"].accuracy) if "swapped" in orders else "-",
            _cell(section.accuracy_average), _cell(section.correct_both), _cell(section.order_consistency),
            _cell(section.kappa_vs_human_average),
        ])
    return header, rows


def _class_rows(sections) -> tuple[list[str], list[list[str]]]:
    classes = [row.category for row in sections[0][1].class_confusion]
    header = ["judge", *(f"{one_line(c)} ({'pass' if r.positive else 'fail'})"
                         for c, r in zip(classes, sections[0][1].class_confusion, strict=True))]
    rows = []
    for report, section in sections:
        cells = []
        for r in section.class_confusion:
            cell = f"{r.judge_pass}/{r.judge_fail}"
            cells.append(cell + (f" +{r.unscored}u" if r.unscored else ""))
        rows.append([_judge_name(report), *cells])
    return header, rows


def print_agreement_table(reports: Sequence) -> None:
    """The reports of several judges on the same labels, side by side."""
    first = reports[0]
    say(f"{len(reports)} judges on the same labels; unscored verdicts: "
        + ("left out of the maths (counted)" if first.unscored == "exclude" else "counted as wrong answers")
        + f"; scores binarised at {first.threshold}; intervals: {first.confidence:.0%} percentile bootstrap, "
        f"{first.n_boot} resamples, seed {first.seed}")
    for index, section in enumerate(first.axes):
        sections = [(report, report.axes[index]) for report in reports]
        extras = [f"{section.n_tied} tied labels left out"] if section.n_tied else []
        say("")
        say(f"{section.axis} ({section.kind}): {section.n_items} labelled items" + (f" ({', '.join(extras)})" if extras else ""))
        if section.reference_rule:
            say(f"  reference: {one_line(section.reference_rule)}")
        for ia in (section.inter_annotator, getattr(section, "inter_annotator_pass_fail", None)):
            if ia is not None:
                say(f"  {inter_annotator_line(ia)}")
        header, rows = _pairwise_rows(sections) if section.kind == "pairwise" else _binary_rows(sections)
        _table(header, rows)
        if section.kind == "multiclass":
            say("  judge pass/fail per human class (counted over labels; +Nu: unscored):")
            _table(*_class_rows(sections))
        for report, each in sections:
            if getattr(each, "n_from_score", 0):
                say(f"  {_judge_name(report)}: {each.n_from_score} verdict(s) gave only a score: pass when score >= "
                    f"{report.threshold}")
            if each.repeats is not None:
                r = each.repeats
                say(f"  {_judge_name(report)}: repeats: flip rate {r.flip_rate} ({r.n_unstable}/{r.n_repeated})")
