"""The run as a table for people (``judgekit run``): a table that fits the terminal, why an
advisory axis is advisory, a line per axis with its unscored results. Imports rich only when it
prints."""

from __future__ import annotations

import io
import shutil
import sys
import textwrap
from typing import TYPE_CHECKING

from judgekit.cli._out import one_line, say, say_rendered

if TYPE_CHECKING:
    from judgekit.results import TrajectoryResult


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
    its hash), its rubric, how many trajectories, the reason and what would make it gate; and
    each judge that judged agents of its own model family (``judgekit.judge.family``)."""
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
        for note in axis.same_family:
            lines.append(f"* {axis.axis}: same family: {note}: a judge may favour its own family's answers"
                         + ("" if any("gate.refuse_same_family" in reason for reason in axis.reasons) else
                            " (gate.refuse_same_family: true in the suite refuses it)"))
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
