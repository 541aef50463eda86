"""Command: export (a run record's verdicts for other tools)."""

from __future__ import annotations

from pathlib import Path

import click

from judgekit.cli._exit import handle_errors
from judgekit.cli._out import one_line, say
from judgekit.cli.loop_cmd import pinned_suite, suite_option


def _is_otlp_logs(path: Path) -> bool:
    """``--otel`` may replace a file only when it is a previous export: its first line an OTLP
    logs request whose every scope is judgekit's (a collector's file of other logs is not)."""
    from judgekit._util.io import iter_json_lines
    from judgekit.errors import InputError
    from judgekit.export._events import SCOPE

    try:
        for _, first in iter_json_lines(path):
            scopes = [scope.get("scope") for resource in first["resourceLogs"] for scope in resource["scopeLogs"]]
            return bool(scopes) and all(isinstance(s, dict) and s.get("name") == SCOPE for s in scopes)
    except InputError:
        return False
    except (KeyError, TypeError, AttributeError):  # not shaped as an OTLP logs request
        return False
    return True  # empty: nothing to lose


@click.command("export")
@click.argument("run_path", metavar="RUN", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--otel", "otel_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the events here: OTLP/JSON logs, one export request per trajectory per line "
              "(what the collector's file exporter writes and its otlpjsonfile receiver reads).")
@click.option("--otlp-endpoint", metavar="URL",
              help="Send the events to this OTLP/HTTP receiver with the OpenTelemetry SDK: a base URL such as "
              "http://localhost:4318 (/v1/logs is added) or the full logs URL. OTEL_EXPORTER_OTLP_HEADERS "
              "and the SDK's other exporter variables apply.")
@click.option("--timeout", "timeout_s", type=click.FloatRange(0, min_open=True), default=10.0, show_default=True,
              metavar="SECONDS",
              help="Seconds the SDK may take per export request to the endpoint, retries included.")
@suite_option
@handle_errors
def export(run_path: Path, otel_file: Path | None, otlp_endpoint: str | None, timeout_s: float,
           suite_path: Path | None) -> None:
    """Export the verdicts of RUN (a run record from `judgekit run --out`) as OpenTelemetry
    GenAI evaluation events.

    Every axis result of every trajectory becomes one `gen_ai.evaluation.result` event (an OTLP
    log record with that event name): gen_ai.evaluation.name is the axis, .score.value its
    score, .score.label pass or fail, .explanation what was lost; judgekit.* attributes carry the
    rubric and its hash, the judge's pin and fingerprint and its approval status, the trajectory
    and the run. A result that is not scored has error.type and no score.

    A trajectory imported with `judgekit import otel-genai` is evaluated on its own trace: its
    events are parented to the run's root span, read from the trajectory metadata the record
    keeps. The other trajectories' events share a new trace per run.

    Give --otel, --otlp-endpoint or both. All or nothing: when the receiver does not take every
    event, no file is written (exit 2).
    """
    from judgekit.cli._prepare import prepare_out
    from judgekit.errors import InputError
    from judgekit.export import export_otel

    if otel_file is None and otlp_endpoint is None:
        raise click.UsageError("say where the events go: --otel FILE, --otlp-endpoint URL, or both")
    if otel_file is not None:
        if otel_file.resolve() == run_path.resolve():
            raise InputError("--otel would overwrite the run record it exports: choose another file", otel_file)
        prepare_out(otel_file, [], what="an OTLP JSON logs file (a previous export)", is_ours=_is_otlp_logs)
    summary = export_otel(run_path, otel_file, endpoint=otlp_endpoint, timeout_s=timeout_s,
                          suite=pinned_suite(suite_path))
    counts = f"{summary.events} evaluation events of {summary.trajectories} trajectories"
    if otel_file is not None:
        say(one_line(f"wrote {counts} to {otel_file}"))
    if otlp_endpoint is not None:
        say(one_line(f"sent {counts} to {otlp_endpoint}"))
