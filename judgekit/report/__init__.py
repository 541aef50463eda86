"""Reports of a run: JUnit XML, a Markdown summary and a self-contained HTML dashboard.

Each renderer reads one ``ReportInput``: the run record (whole), its comparison with the
baseline (if any), the suite's trend from the history (if any), and each judge's calibration
status. ``report_input`` gathers them; the renderers return text (``render_report``), and one
writer, ``write_report``, masks secrets and writes it atomically.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from judgekit.judge.family import model_family
from judgekit.report.writer import write_report

if TYPE_CHECKING:
    from judgekit.ci.compare import Comparison

__all__ = ["KINDS", "JudgeStatus", "ReportInput", "judge_statuses", "render_report", "render_reports", "report_input",
           "write_report", "write_reports"]


@dataclass(frozen=True)
class JudgeStatus:
    """One judge on one axis, as the run's gate saw it, with what its calibration measured."""

    axis: str
    rubric: str
    model_pin: str
    endpoint: str
    fingerprint: str
    status: Literal["approved", "advisory"]
    verdicts: int
    kappa: float | None = None
    kappa_low: float | None = None
    """The low end of its interval; with no ``kappa_high``, its one-sided 95% lower bound."""
    kappa_high: float | None = None
    labelled: int | None = None
    """Labelled items the approval record rests on (None: no approval record)."""
    decided_at: str | None = None
    reason: str = ""
    """Why it gates or why it is advisory, in words."""
    family: str = ""
    """The judge's model family (``judgekit.judge.family``)."""
    same_family: int = 0
    """Its verdicts on trajectories whose agent is of its own family."""

    @property
    def family_note(self) -> str:
        """In words, when it judged agents of its own family; empty otherwise."""
        if not self.same_family:
            return ""
        return (f"same model family as the agent ({self.family}) on {self.same_family} of its {self.verdicts} "
                "verdict(s): a judge may favour its own family's answers")


@dataclass
class ReportInput:
    record: object
    """The run record (``judgekit.run.RunRecord``, results included)."""
    comparison: Comparison | None = None
    trend: list = field(default_factory=list)
    """``judgekit.ci.history.RunInfo`` of the suite's runs, newest first (this run included when recorded)."""
    judges: list[JudgeStatus] = field(default_factory=list)


def judge_statuses(record, calibration_dir: Path | None) -> list[JudgeStatus]:
    """Each judge of the run on each axis, with the kappa of its approval re-derived from its
    evidence (the record's own figures are never shown: a forged one would be): the estimate and
    its one-sided lower bound, under the run's approval thresholds."""
    from judgekit.calibration.approval_record import Thresholds
    from judgekit.calibration.evidence import derive_filed

    advisory_reasons = {}
    if record.gate_report is not None:
        for axis in record.gate_report.axes:
            for item in axis.advisory:
                advisory_reasons[(axis.axis, item.rubric)] = item.reason
    thresholds = Thresholds.of(record.approval)
    found = []
    for seen in record.judges:
        derived = None
        if calibration_dir is not None:
            try:
                derived = derive_filed(calibration_dir, seen.rubric.split("@", 1)[0], seen.fingerprint, thresholds)
            except Exception:  # noqa: BLE001 - a report shows what it can; the gate already decided
                derived = None
        for axis, status in sorted(seen.axes.items()):
            decision = derived.axes.get(axis) if derived is not None and derived.problem is None else None
            if status == "approved":
                reason = "approved by calibration"
            else:
                reason = advisory_reasons.get((axis, seen.rubric), "not approved by calibration")
            found.append(JudgeStatus(
                axis=axis, rubric=seen.rubric, model_pin=seen.model_pin, endpoint=seen.endpoint,
                fingerprint=seen.fingerprint, status=status, verdicts=seen.verdicts,
                kappa=decision.kappa.value if decision else None,
                kappa_low=decision.kappa_lower if decision else None,
                kappa_high=None,
                labelled=decision.n if decision else None,
                decided_at=derived.record.decided_at.isoformat() if decision else None,
                reason=reason, family=model_family(seen.model_pin), same_family=seen.same_family,
            ))
    return found


def report_input(record, *, comparison: Comparison | None = None, history=None,
                 calibration_dir: Path | None = None, trend_limit: int = 100) -> ReportInput:
    """Everything a report shows of ``record``: its comparison, the suite's trend from
    ``history`` (a ``judgekit.ci.history.History``) and its judges' calibration status."""
    trend = history.runs(suite=record.suite, limit=trend_limit) if history is not None else []
    if calibration_dir is None:
        try:
            calibration_dir = record.calibration_path()
        except Exception:  # noqa: BLE001 - the suite may not be beside the record: no calibration shown
            calibration_dir = None
    return ReportInput(record=record, comparison=comparison, trend=trend,
                       judges=judge_statuses(record, calibration_dir))


KINDS = ("junit", "markdown", "html")
"""The report kinds, in the order they are written."""


def render_report(kind: str, data: ReportInput) -> str:
    """The text of one report of ``data``: ``kind`` is one of ``KINDS``."""
    if kind == "junit":
        from judgekit.report.junit import render_junit

        return render_junit(data)
    if kind == "markdown":
        from judgekit.report.markdown import render_markdown

        return render_markdown(data)
    if kind == "html":
        from judgekit.report.html import render_html

        return render_html(data)
    raise ValueError(f"no report kind {kind!r}: one of {', '.join(KINDS)}")


def render_reports(data: ReportInput, kinds: Iterable[str]) -> Iterator[tuple[str, str]]:
    """(kind, text) of each report of ``kinds``, in ``KINDS`` order, each rendered when it is
    asked for (the one before it is written by then)."""
    wanted = set(kinds)
    for kind in KINDS:
        if kind in wanted:
            yield kind, render_report(kind, data)


def write_reports(data: ReportInput, *, junit: Path | None = None, markdown: Path | None = None,
                  html: Path | None = None) -> list[Path]:
    """Write each report asked for (each atomically, secrets masked); the paths written."""
    targets = {kind: Path(path) for kind, path in (("junit", junit), ("markdown", markdown), ("html", html))
               if path is not None}
    written = []
    for kind, text in render_reports(data, targets):
        write_report(targets[kind], text)
        written.append(targets[kind])
    return written
