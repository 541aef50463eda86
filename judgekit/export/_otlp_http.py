"""Sending evaluation events to an OTLP/HTTP receiver with the OpenTelemetry SDK.

The SDK (opentelemetry-sdk, opentelemetry-exporter-otlp-proto-http) is imported here only, when
``--otlp-endpoint`` is given, so ``judgekit --help`` never loads it. Events go out through the
SDK's own pipeline (a ``LoggerProvider``, a batch processor, the OTLP/HTTP protobuf exporter, and
its retries); the exporter is wrapped to count what the receiver accepted, because the SDK only
logs a failed export. The queue is flushed every ``BATCH`` events, so none is ever dropped for a
full queue. The exporter's own environment settings apply (``OTEL_EXPORTER_OTLP_HEADERS`` for an
auth header, ``OTEL_EXPORTER_OTLP_CERTIFICATE``...).

What the SDK counts as delivered is checked again, on the receiver's answer (read through a
response hook on the exporter's requests session): a redirect (the SDK follows none and counts
any 2xx or 3xx status a success) and records an OTLP ``partial_success`` rejected are not
delivered. Each export request has a hard deadline (``DEADLINE_FACTOR`` times ``--timeout``): the
requests timeout bounds each socket read, not the answer, so a receiver that trickles its body
would otherwise hold the export for ever. (With an SDK credential-provider session configured,
``OTEL_PYTHON_EXPORTER_OTLP_HTTP_CREDENTIAL_PROVIDER``, that session is used and its answers are
not checked again.)
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from urllib.parse import urlsplit, urlunsplit

from judgekit.errors import ConfigError, InputError
from judgekit.export._events import EVENT_NAME, SCOPE, EvaluationEvent

BATCH = 512
LOGS_PATH = "/v1/logs"
DEADLINE_FACTOR = 4
"""One export request may take this many times ``--timeout`` in all, the SDK's retries included."""
MAX_TIMEOUT_S = 3600.0
CREDENTIAL_PROVIDERS = ("OTEL_PYTHON_EXPORTER_OTLP_HTTP_CREDENTIAL_PROVIDER",
                        "OTEL_PYTHON_EXPORTER_OTLP_HTTP_LOGS_CREDENTIAL_PROVIDER")


def logs_url(endpoint: str) -> str:
    """The receiver's logs URL: ``/v1/logs`` added to a base URL (``http://host:4318``)."""
    if not endpoint.startswith(("http://", "https://")):
        raise InputError(f"--otlp-endpoint must be an http:// or https:// URL, not {endpoint[:80]!r}")
    parts = urlsplit(endpoint)  # the path gets /v1/logs, not a query or fragment after it
    path = parts.path.rstrip("/")
    return urlunsplit(parts._replace(path=path if path.endswith(LOGS_PATH) else path + LOGS_PATH))


class OtlpSender:
    """``with OtlpSender(url, version=...) as sender: sender.add(events); sender.finish()``."""

    def __init__(self, endpoint: str, *, version: str, timeout_s: float = 10.0):
        try:
            from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
            from opentelemetry.sdk._logs import LoggerProvider
            from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
            from opentelemetry.sdk.resources import Resource
        except ImportError as exc:
            raise ConfigError(f"--otlp-endpoint needs the OpenTelemetry SDK ({exc.name} is missing): pip install "
                              "opentelemetry-sdk opentelemetry-exporter-otlp-proto-http") from None

        if not 0 < timeout_s <= MAX_TIMEOUT_S:  # also refuses NaN
            raise InputError(f"--timeout must be more than 0 and at most {MAX_TIMEOUT_S:g} seconds, not {timeout_s}")
        self.url = logs_url(endpoint)
        deadline_s = DEADLINE_FACTOR * timeout_s
        self._exporter = _Counting(deadline_s)
        session = None if any(os.environ.get(name) for name in CREDENTIAL_PROVIDERS) else self._exporter.session()
        self._exporter.inner = OTLPLogExporter(endpoint=self.url, timeout=timeout_s, session=session)
        self._provider = LoggerProvider(resource=Resource({"service.name": SCOPE, "service.version": version}),
                                        shutdown_on_exit=False)
        self._provider.add_log_record_processor(BatchLogRecordProcessor(
            self._exporter, max_export_batch_size=BATCH, max_queue_size=2 * BATCH))
        self._logger = self._provider.get_logger(SCOPE, version)
        self._timeout_ms = int(deadline_s * 1000)  # the exporter retries within its own timeout
        self.emitted = 0

    def __enter__(self) -> OtlpSender:
        return self

    def __exit__(self, *exc: object) -> None:
        self._provider.shutdown()

    def add(self, events: Sequence[EvaluationEvent]) -> None:
        from opentelemetry._logs import LogRecord, SeverityNumber

        for event in events:
            self._logger.emit(LogRecord(
                timestamp=event.time_ns, observed_timestamp=event.observed_ns, context=_context(event),
                severity_number=SeverityNumber.INFO, severity_text="INFO", event_name=EVENT_NAME,
                attributes=dict(event.attributes)))
            self.emitted += 1
            if self.emitted % BATCH == 0:
                self._flush()

    def finish(self) -> None:
        """Wait until every event was exported; raise InputError unless the receiver took them all."""
        self._flush()
        if self._exporter.delivered != self.emitted:
            raise InputError(f"the OTLP receiver did not accept every event: {self._exporter.delivered} of "
                             f"{self.emitted} delivered ({self._exporter.problem or 'export failed'}); "
                             "nothing was written", self.url)

    def _flush(self) -> None:
        self._provider.force_flush(self._timeout_ms)


def _context(event: EvaluationEvent):
    """A context whose current span is the (remote) span the event is parented to."""
    from opentelemetry import trace

    span = trace.SpanContext(trace_id=int(event.trace_id, 16), span_id=int(event.span_id or "0", 16),
                             is_remote=True, trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED))
    return trace.set_span_in_context(trace.NonRecordingSpan(span))


class _Counting:
    """The OTLP exporter, counting the records the receiver accepted, each export request held to
    ``deadline_s``."""

    def __init__(self, deadline_s: float):
        self.inner = None
        self.deadline_s = deadline_s
        self.delivered = 0
        self.problem: str | None = None
        self._answer = threading.local()  # the last response seen by the thread sending

    def session(self):
        """A requests session whose every response is kept for ``_attempt`` to check."""
        import requests

        session = requests.Session()
        session.hooks["response"].append(self._seen)
        return session

    def _seen(self, response, *args, **kwargs):
        self._answer.response = response
        return response

    def export(self, batch):
        from opentelemetry.sdk._logs.export import LogRecordExportResult

        outcome: list[tuple[int, str | None]] = []
        sending = threading.Thread(target=lambda: outcome.append(self._attempt(batch)), daemon=True,
                                   name="judgekit-otlp-export")
        sending.start()
        sending.join(self.deadline_s)
        accepted, problem = outcome[0] if outcome else (0, f"no answer within {self.deadline_s:g} s")
        self.delivered += accepted
        self.problem = self.problem or problem
        ok = accepted == len(batch) and problem is None
        return LogRecordExportResult.SUCCESS if ok else LogRecordExportResult.FAILURE

    def _attempt(self, batch) -> tuple[int, str | None]:
        """(records the receiver accepted, what went wrong) for one export request."""
        from opentelemetry.sdk._logs.export import LogRecordExportResult

        try:
            result = self.inner.export(batch)
        except Exception as exc:  # noqa: BLE001 - the processor would swallow it; say what went wrong
            return 0, f"{type(exc).__name__}: {exc}"
        if result != LogRecordExportResult.SUCCESS:
            return 0, "the receiver refused or could not be reached"
        response = getattr(self._answer, "response", None)
        if response is None:  # a session of the SDK's own: its answer is not seen
            return len(batch), None
        if not 200 <= response.status_code < 300:
            where = response.headers.get("Location")
            return 0, f"the receiver answered {response.status_code}" + (
                f", a redirect to {where[:200]} (give that URL)" if where else "")
        rejected, message = _rejected(response.content)
        if rejected:
            return max(len(batch) - rejected, 0), f"the receiver rejected {rejected} record(s): {message or 'no reason'}"
        return len(batch), None

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


def _rejected(body: bytes) -> tuple[int, str]:
    """(records rejected, why) from an ``ExportLogsServiceResponse`` body; (0, "") if none."""
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse

    try:
        answer = ExportLogsServiceResponse.FromString(body or b"")
    except DecodeError:  # not the protobuf answer (an empty or JSON body): nothing said about rejections
        return 0, ""
    partial = answer.partial_success
    return partial.rejected_log_records, partial.error_message[:200]
