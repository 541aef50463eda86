"""Sending evaluation events to an OTLP/HTTP receiver with the OpenTelemetry SDK.

The SDK (opentelemetry-sdk, opentelemetry-exporter-otlp-proto-http) is imported here only, when
``--otlp-endpoint`` is given, so ``judgekit --help`` never loads it. Events go out through the
SDK's own pipeline (a ``LoggerProvider``, a batch processor, the OTLP/HTTP protobuf exporter, and
its retries); the exporter is wrapped to count what the receiver accepted, because the SDK only
logs a failed export. The queue is flushed every ``BATCH`` events, so none is ever dropped for a
full queue. The exporter's own environment settings apply (``OTEL_EXPORTER_OTLP_HEADERS`` for an
auth header, ``OTEL_EXPORTER_OTLP_CERTIFICATE``...).
"""

from __future__ import annotations

from collections.abc import Sequence

from judgekit.errors import ConfigError, InputError
from judgekit.export.otel import EVENT_NAME, SCOPE, EvaluationEvent

BATCH = 512
LOGS_PATH = "/v1/logs"


def logs_url(endpoint: str) -> str:
    """The receiver's logs URL: ``/v1/logs`` added to a base URL (``http://host:4318``)."""
    if not endpoint.startswith(("http://", "https://")):
        raise InputError(f"--otlp-endpoint must be an http:// or https:// URL, not {endpoint[:80]!r}")
    base = endpoint.rstrip("/")
    return base if base.endswith(LOGS_PATH) else base + LOGS_PATH


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

        self.url = logs_url(endpoint)
        self._exporter = _Counting(OTLPLogExporter(endpoint=self.url, timeout=timeout_s))
        self._provider = LoggerProvider(resource=Resource({"service.name": SCOPE, "service.version": version}),
                                        shutdown_on_exit=False)
        self._provider.add_log_record_processor(BatchLogRecordProcessor(
            self._exporter, max_export_batch_size=BATCH, max_queue_size=2 * BATCH))
        self._logger = self._provider.get_logger(SCOPE, version)
        self._timeout_ms = int(timeout_s * 1000) * 4  # the exporter retries within its own timeout
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
    """The OTLP exporter, counting the records the receiver accepted."""

    def __init__(self, inner):
        self.inner = inner
        self.delivered = 0
        self.problem: str | None = None

    def export(self, batch):
        from opentelemetry.sdk._logs.export import LogRecordExportResult

        try:
            result = self.inner.export(batch)
        except Exception as exc:  # noqa: BLE001 - the processor would swallow it; say what went wrong
            self.problem = f"{type(exc).__name__}: {exc}"
            return LogRecordExportResult.FAILURE
        if result == LogRecordExportResult.SUCCESS:
            self.delivered += len(batch)
        else:
            self.problem = self.problem or "the receiver refused or could not be reached"
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)
