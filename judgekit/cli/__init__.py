"""The ``judgekit`` command. Thin click commands over the library API (``judgekit.run``).

Heavy modules (pydantic models, litellm, numpy) are imported inside the commands so that
``judgekit --help`` starts fast. Every command is registered here, by name, in one list.
"""

from __future__ import annotations

import click

from judgekit.cli import batch_cmd, calibration_cmd, commands, export_cmd, init_cmd, label_cmd, loop_cmd, safety_cmd
from judgekit.cli._exit import EXIT_GATE_FAILED, EXIT_INPUT, EXIT_INTERNAL, EXIT_OK, ExitCodesGroup, handle_errors

__all__ = ["EXIT_GATE_FAILED", "EXIT_INPUT", "EXIT_INTERNAL", "EXIT_OK", "handle_errors", "main"]


@click.group(cls=ExitCodesGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="judgekit-agents", prog_name="judgekit")
@click.pass_context
@handle_errors
def main(ctx: click.Context) -> None:
    """Score AI-agent trajectories against pre-registered rubrics.

    Three independent axes: task success (from the world's end state), tool correctness
    (pre-registered points) and faithfulness (claims traced to evidence).

    Defaults for SUITE, --history and --cache-dir may be set in a [tool.judgekit] table, in the
    nearest pyproject.toml holding one (paths relative to it); the command line wins.
    """
    _terminate_as_interrupt()
    if ctx.default_map is None:  # one given by a host program calling ``main`` stands
        from pathlib import Path

        from judgekit.cli._project import project_defaults

        ctx.default_map = project_defaults(main, Path.cwd())


def _terminate_as_interrupt() -> None:
    """SIGTERM (a CI timeout, ``docker stop``) ends a command the way Ctrl-C does: unwinding,
    so a half-written output file is removed, never left beside its target."""
    import signal

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    try:
        signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread (a host application): its own handlers stand
        pass


COMMANDS = (
    init_cmd.init, commands.run, commands.diff, commands.schema, commands.import_, commands.rubric, commands.prompt,
    commands.cache,
    calibration_cmd.calibrate, calibration_cmd.agreement, calibration_cmd.gate_cmd, label_cmd.label,
    loop_cmd.compare_cmd, loop_cmd.report_cmd, loop_cmd.history_group, safety_cmd.safety, export_cmd.export,
    batch_cmd.batch,
)
for _command in COMMANDS:
    main.add_command(_command)
