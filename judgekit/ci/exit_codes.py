"""judgekit's exit codes, one set for the CLI and ``judgekit.finish`` (imports nothing, so the
CLI's start-up pays nothing for it), and what each means (``MEANINGS``: the documentation's
exit-code table is generated from it).

CI can tell "the agent got worse" (1) from "the inputs are broken" (2) from "judgekit broke" (3).
"""

EXIT_OK = 0
EXIT_GATE_FAILED = 1
EXIT_INPUT = 2
EXIT_INTERNAL = 3
EXIT_STOP_SHIP = 4
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report it

MEANINGS: dict[int, str] = {
    EXIT_OK: "ok (and the gate passed, when one was asked for)",
    EXIT_GATE_FAILED: "the gate failed, the comparison flagged or failed, or calibration refused a judge: "
                      "the measurement says no",
    EXIT_INPUT: "usage or input error: a bad file, flag or setting, named with its place",
    EXIT_INTERNAL: "internal error: a bug in judgekit (a traceback with JUDGEKIT_DEBUG=1)",
    EXIT_STOP_SHIP: "stop shipping: `judgekit safety` found an open stop-ship signal",
    EXIT_INTERRUPTED: "interrupted (Ctrl-C or SIGTERM): the command did not finish, and nothing half-written is left",
}
"""Exit code -> what it means, in one line for people."""
