"""Exit codes, and the wrapper that turns every error into one line and its code.

The codes and what each means: ``judgekit.ci.exit_codes`` (``MEANINGS``).
"""

from __future__ import annotations

import os
import sys
import traceback
from functools import wraps

import click

from judgekit.ci.exit_codes import (  # noqa: F401 - the CLI's commands import them from here
    EXIT_GATE_FAILED, EXIT_INPUT, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK, EXIT_STOP_SHIP,
)


def handle_errors(func):
    """JudgekitError -> one line and exit 2; anything else -> exit 3 (traceback with JUDGEKIT_DEBUG=1)."""

    @wraps(func)
    def wrapper(*args, **kwargs):
        from judgekit.cli._out import one_line, say
        from judgekit.errors import JudgekitError

        try:
            return func(*args, **kwargs)
        except JudgekitError as exc:
            say(f"judgekit: error: {one_line(str(exc))}", err=True)
            sys.exit(EXIT_INPUT)
        except KeyboardInterrupt:
            say("judgekit: interrupted: nothing was finished or written", err=True)
            sys.exit(EXIT_INTERRUPTED)
        except (click.exceptions.Exit, click.ClickException, SystemExit):
            raise
        except BrokenPipeError:
            # The reader went away (``| head``): the command did not finish, so it is no success.
            try:
                sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - nothing more reaches the closed pipe
            finally:
                sys.exit(EXIT_INPUT)
        except Exception as exc:  # noqa: BLE001 - the last line of defence
            if os.environ.get("JUDGEKIT_DEBUG"):
                traceback.print_exc()
            say(f"judgekit: internal error: {type(exc).__name__}: {one_line(str(exc))} (set JUDGEKIT_DEBUG=1 for a traceback)", err=True)
            sys.exit(EXIT_INTERNAL)

    return wrapper


class AxisChoice(click.Choice):
    """An axis name, checked against the axis table (read only when a value or the help needs
    it, so the CLI starts without importing it). ``judged``: only axes a judge answers."""

    def __init__(self, *, judged: bool = False):
        self.judged = judged
        super().__init__([], case_sensitive=True)

    @property
    def choices(self):
        from judgekit.axes.table import AXES

        return [name for name, axis in AXES.items() if axis.answer is not None or not self.judged]

    @choices.setter
    def choices(self, value) -> None:
        pass  # always the table's
