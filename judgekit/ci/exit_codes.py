"""judgekit's exit codes, one set for the CLI and ``judgekit.finish`` (imports nothing, so the
CLI's start-up pays nothing for it).

What each means: ``judgekit.cli._exit``.
"""

EXIT_OK, EXIT_GATE_FAILED, EXIT_INPUT, EXIT_INTERNAL = 0, 1, 2, 3
EXIT_STOP_SHIP = 4
EXIT_INTERRUPTED = 130  # Ctrl-C or SIGTERM: the command did not finish (128 + SIGINT, as shells report it)
