"""A run's verdicts as OpenTelemetry GenAI evaluation events (``judgekit export RUN --otel FILE``).

The form. The GenAI semantic conventions define ``gen_ai.evaluation.result`` as an *event*
("SHOULD be parented to GenAI operation span being evaluated when possible"), and an event in
OpenTelemetry is a log record that carries an event name (the logs data model; span events are
the older, now discouraged way). So each axis result of each trajectory becomes one OTLP log
record: ``eventName: gen_ai.evaluation.result``, severity INFO, and these attributes:

- ``gen_ai.evaluation.name``: the axis (``task_success``, ``tool_correctness``, ``faithfulness``);
- ``gen_ai.evaluation.score.value``: its score (scored results only);
- ``gen_ai.evaluation.score.label``: ``pass`` / ``fail`` (a graded axis passes at full marks);
- ``gen_ai.evaluation.explanation``: what was lost, in short (the failed checks, lost points,
  unsupported claims), secrets masked;
- ``error.type``: for a result that is not scored, the unscored reason (``parse_failure``,
  ``timeout``...) or ``input_error``: no score, no label, never a pass or a fail;
- judgekit's own: ``judgekit.run.id``, ``judgekit.suite``, ``judgekit.trajectory.id``,
  ``judgekit.trajectory.source``, ``judgekit.rubric.model`` (id@version), ``judgekit.rubric.model.sha256``,
  ``judgekit.axis.status`` (scored/unscored/error), ``judgekit.axis.source``
  (deterministic/judge), ``judgekit.approval`` (``approved`` or ``advisory`` for a judged axis,
  as the run measured again says, its judge's approval re-derived: a record whose footer
  disagrees with its results is refused; ``advisory`` when the suite file it names is gone;
  ``not_judged``), and when a
  judge took part ``judgekit.judge.model_pin``, ``judgekit.judge.fingerprint``,
  ``judgekit.judge.endpoint``, ``judgekit.judge.reported_model``, ``judgekit.judge.model_mismatch``.

Parenting. A trajectory imported by ``judgekit import otel-genai`` carries ``metadata.otel:
{trace_id, span_id}`` of its run's root span, and the run record keeps each trajectory's
metadata as given on its result line: the events are parented (``traceId``/``spanId``) to that
span, read from the record itself, no trajectory file opened. Other trajectories' events share one
new trace per run (its id derived from the run id) and no span id: no span is written for it, the
trace id only groups the run's events.

Times: a judged axis's event is timed when its verdict was made, the others when the run finished;
nothing depends on today, so the same record exports to the same bytes.

The file is JSON Lines, one OTLP/JSON ``ExportLogsServiceRequest`` per trajectory (the collector's
file exporter format: its ``otlpjsonfile`` receiver reads it back), ids in hex as OTLP/JSON says.
A format 2 run record is read twice as a stream (measured again, then the results), never whole;
a format 1 record is read whole through its migration.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from judgekit.errors import InputError
from judgekit.export._events import EVENT_NAME, SCOPE, SEVERITY_INFO, Attribute, EvaluationEvent

EXPLANATION_CHARS = 500
_HEX = {16: re.compile(r"[0-9a-f]{32}"), 8: re.compile(r"[0-9a-f]{16}")}


@dataclass(frozen=True)
class RunContext:
    """What every event of a run shares: from the record's header and footer."""

    run_id: str
    suite: str
    version: str
    finished_ns: int
    approvals: dict[str, dict[str, str]]  # judge fingerprint -> axis -> approved/advisory

    @property
    def trace_id(self) -> str:
        """The run's own trace, for trajectories that came from no trace."""
        return hashlib.sha256(f"judgekit-run:{self.run_id}".encode()).hexdigest()[:32]


def nanos(moment: datetime) -> int:
    """A datetime as Unix nanoseconds (exact: no float on the way); a naive one is UTC."""
    aware = moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)
    delta = aware - datetime(1970, 1, 1, tzinfo=timezone.utc)
    return (delta.days * 86_400 + delta.seconds) * 10**9 + delta.microseconds * 1000


# --- reading the record --------------------------------------------------------------------------


def _run_context(header, footer_time: datetime, judges) -> RunContext:
    return RunContext(run_id=header.run_id, suite=header.suite, version=header.judgekit_version,
                      finished_ns=nanos(footer_time), approvals={seen.fingerprint: dict(seen.axes) for seen in judges})


def open_events(path: Path, *, suite=None) -> tuple[RunContext, Iterator[tuple[str, list[EvaluationEvent]]]]:
    """The run's shared context, and (trajectory id, its events) for each result, in order;
    ``suite``: the ``LoadedSuite`` to measure it under (default: the one it names)."""
    from judgekit.run.record import RunRecord, open_run
    from judgekit.run.remeasure import remeasure

    opened = open_run(path)
    kept = isinstance(opened, RunRecord)  # format 1, migrated, in memory
    # First pass: the run measured again (its judges' approvals re-derived), never the footer's word.
    measured = remeasure(opened, keep_rows=False, keep_results=kept, suite_optional=suite is None, loaded=suite)
    context = _run_context(measured.header, measured.footer.finished_at, measured.footer.judges)
    results = iter(measured.results) if kept else open_run(path).iter_results()
    return context, ((result.trajectory_id, events_of(result, context, path)) for result in results)


def _parent(result, context: RunContext, path: Path) -> tuple[str, str | None]:
    otel = result.metadata.get("otel")
    if otel is None:
        return context.trace_id, None
    trace_id = otel.get("trace_id") if isinstance(otel, dict) else None
    span_id = otel.get("span_id") if isinstance(otel, dict) else None
    if not (isinstance(trace_id, str) and _HEX[16].fullmatch(trace_id) and trace_id.strip("0")
            and isinstance(span_id, str) and _HEX[8].fullmatch(span_id) and span_id.strip("0")):
        raise InputError(f"trajectory {result.trajectory_id!r}: metadata.otel must be {{trace_id: 32 hex digits, "
                         "span_id: 16 hex digits} (as `judgekit import otel-genai` writes it)", path)
    return trace_id, span_id


# --- one result -> its events --------------------------------------------------------------------


def events_of(result, context: RunContext, path: Path) -> list[EvaluationEvent]:
    """The events of one ``TrajectoryResult``: one per axis, in the record's order."""
    trace_id, span_id = _parent(result, context, path)
    events = []
    for name, res in result.axes.items():
        time_ns = nanos(res.judge.created_at) if res.judge is not None else context.finished_ns
        events.append(EvaluationEvent(time_ns=time_ns, observed_ns=context.finished_ns, trace_id=trace_id,
                                      span_id=span_id, attributes=_attributes(result, name, res, context)))
    return events


def _attributes(result, name: str, res, context: RunContext) -> dict[str, Attribute]:
    from judgekit.axes.table import axis_named

    attrs: dict[str, Attribute] = {"gen_ai.evaluation.name": name}
    if res.status == "scored":
        axis = axis_named(name)
        passed = res.passed if axis.binary else res.score >= 1.0 - 1e-9
        attrs["gen_ai.evaluation.score.value"] = float(res.score)
        attrs["gen_ai.evaluation.score.label"] = "pass" if passed else "fail"
        lost = axis.lost(res)
        head = ("PASS" if passed else "FAIL") if axis.binary else axis.describe(res).split(" lost: ", 1)[0]
        attrs["gen_ai.evaluation.explanation"] = _explanation(head, lost)
    else:
        attrs["error.type"] = res.unscored_reason or "input_error"
        attrs["gen_ai.evaluation.explanation"] = _explanation(f"{res.status}: {res.error or res.unscored_reason}", [])
    attrs.update({
        "judgekit.run.id": context.run_id, "judgekit.suite": context.suite,
        "judgekit.trajectory.id": result.trajectory_id, "judgekit.trajectory.source": result.source,
        "judgekit.rubric.model": result.rubric, "judgekit.rubric.model.sha256": result.rubric_sha256,
        "judgekit.axis.status": res.status, "judgekit.axis.source": res.source,
        "judgekit.approval": _approval(name, res.judge, context),
    })
    if res.judge is not None:
        attrs.update(_judge_attributes(res.judge))
    return attrs


def _approval(axis: str, provenance, context: RunContext) -> str:
    if provenance is None:
        return "not_judged"
    from judgekit.run.rows import judge_fingerprint

    return context.approvals.get(judge_fingerprint(provenance), {}).get(axis, "unknown")


def _judge_attributes(provenance) -> dict[str, Attribute]:
    from judgekit.run.rows import judge_fingerprint

    attrs: dict[str, Attribute] = {
        "judgekit.judge.model_pin": provenance.model_pin, "judgekit.judge.fingerprint": judge_fingerprint(provenance),
        "judgekit.judge.endpoint": provenance.endpoint, "judgekit.judge.model_mismatch": provenance.model_mismatch,
    }
    if provenance.reported_model:
        attrs["judgekit.judge.reported_model"] = provenance.reported_model
    return attrs


def _explanation(head: str, lost: list[tuple[str, str]]) -> str:
    from judgekit._util.text import redact

    text = head + "".join(f"; {what}: {why}" if why else f"; {what}" for what, why in lost[:5])
    if len(lost) > 5:
        text += f"; and {len(lost) - 5} more"
    text = redact(text)
    return text if len(text) <= EXPLANATION_CHARS else text[: EXPLANATION_CHARS - 3] + "..."


# --- OTLP/JSON -------------------------------------------------------------------------------------


def _value(value: Attribute) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}  # int64 is a decimal string in OTLP/JSON
    if isinstance(value, float):
        return {"doubleValue": value}
    return {"stringValue": value}


def log_record(event: EvaluationEvent) -> dict[str, Any]:
    """One OTLP/JSON ``LogRecord``."""
    record: dict[str, Any] = {
        "timeUnixNano": str(event.time_ns), "observedTimeUnixNano": str(event.observed_ns),
        "severityNumber": SEVERITY_INFO, "severityText": "INFO", "eventName": EVENT_NAME,
        "attributes": [{"key": key, "value": _value(value)} for key, value in event.attributes.items()],
        "traceId": event.trace_id,
    }
    if event.span_id is not None:
        record["spanId"] = event.span_id
    return record


def logs_request(events: list[EvaluationEvent], version: str) -> dict[str, Any]:
    """An OTLP/JSON ``ExportLogsServiceRequest`` holding ``events``."""
    return {"resourceLogs": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": SCOPE}},
                                    {"key": "service.version", "value": {"stringValue": version}}]},
        "scopeLogs": [{"scope": {"name": SCOPE, "version": version}, "logRecords": [log_record(e) for e in events]}],
    }]}


@dataclass
class ExportSummary:
    trajectories: int = 0
    events: int = 0


def export_otel(run_path: str | Path, otel_file: str | Path | None = None, *, endpoint: str | None = None,
                timeout_s: float = 10.0, suite=None) -> ExportSummary:
    """Write the run record's verdicts to ``otel_file`` (OTLP/JSON, see the module docstring)
    and/or send them to the OTLP/HTTP ``endpoint`` with the OpenTelemetry SDK. All or nothing:
    when sending fails, no file is written. ``suite``: the ``LoadedSuite`` the record is
    measured under (default: the suite file it names)."""
    import json
    from contextlib import ExitStack

    from judgekit._util.files import AtomicFile, protect

    run_path = Path(run_path)
    context, items = open_events(run_path, suite=suite)
    summary = ExportSummary()
    with ExitStack() as stack:
        stack.enter_context(protect([run_path]))  # the events never replace the record they come from
        # Not masked as a whole: hex trace ids look like secrets to a scanner; the free text is masked.
        handle = stack.enter_context(AtomicFile(otel_file, mask_secrets=False)) if otel_file is not None else None
        sender = None
        if endpoint is not None:
            from judgekit.export._otlp_http import OtlpSender

            sender = stack.enter_context(OtlpSender(endpoint, version=context.version, timeout_s=timeout_s))
        for _, events in items:
            summary.trajectories += 1
            summary.events += len(events)
            if handle is not None and events:
                handle.write(json.dumps(logs_request(events, context.version), ensure_ascii=False,
                                        separators=(",", ":")) + "\n")
            if sender is not None:
                sender.add(events)
        if sender is not None:
            sender.finish()  # raises when the receiver did not take every event
    return summary
