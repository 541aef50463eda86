"""judgekit's exit codes, one set for the CLI and ``judgekit.finish`` (imports nothing, so the
CLI's start-up pays nothing for it), and what each means: ``EXIT_CODES``, which ``--help``
lists (``judgekit.cli._exit``)."""

EXIT_OK, EXIT_GATE_FAILED, EXIT_INPUT, EXIT_INTERNAL = 0, 1, 2, 3
EXIT_STOP_SHIP = 4
EXIT_INTERRUPTED = 130  # Ctrl-C or SIGTERM: the command did not finish (128 + SIGINT, as shells report it)

EXIT_CODES: dict[int, str] = {
    EXIT_OK: "ok (and the gate passed, when one was asked for)",
    EXIT_GATE_FAILED: "the measurement says no: the gate failed, the comparison flagged or failed, or "
                      "calibration refused a judge",
    EXIT_INPUT: "usage or input error: a bad file, flag or setting (named with its place), or a "
                "trajectory that could not be scored",
    EXIT_INTERNAL: "internal error: a bug in judgekit (a traceback with JUDGEKIT_DEBUG=1)",
    EXIT_STOP_SHIP: "stop shipping: `judgekit safety` found an open stop-ship signal",
    EXIT_INTERRUPTED: "interrupted (Ctrl-C, SIGTERM): nothing half-written is left",
}
"""Every exit code judgekit ends with, and what it means. CI can tell "the agent got worse" (1)
from "the inputs are broken" (2) from "judgekit broke" (3)."""
