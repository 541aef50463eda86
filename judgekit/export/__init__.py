"""Exports of a run record for other tools: OpenTelemetry GenAI evaluation events (``otel``)."""

from judgekit.export.otel import EVENT_NAME, EvaluationEvent, ExportSummary, export_otel, log_record, logs_request

__all__ = ["EVENT_NAME", "EvaluationEvent", "ExportSummary", "export_otel", "log_record", "logs_request"]
