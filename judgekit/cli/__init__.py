"""The ``judgekit`` command. Thin click commands over the public API.

Heavy modules (pydantic models, litellm, numpy) are imported inside the commands so that
``judgekit --help`` starts fast.
"""

from __future__ import annotations

import os
import sys
import traceback
from functools import wraps

import click

EXIT_OK, EXIT_INTERNAL, EXIT_INPUT = 0, 1, 2
EXIT_GATE_FAILED = 1  # also 1: CI treats "the gate failed" like any other failure


def handle_errors(func):
    """JudgekitError -> one line and exit 2; anything else -> exit 1 (traceback with JUDGEKIT_DEBUG=1)."""

    @wraps(func)
    def wrapper(*args, **kwargs):
        from judgekit.cli._out import one_line, say
        from judgekit.errors import JudgekitError

        try:
            return func(*args, **kwargs)
        except JudgekitError as exc:
            say(f"judgekit: error: {one_line(str(exc))}", err=True)
            sys.exit(EXIT_INPUT)
        except (click.exceptions.Exit, click.ClickException, SystemExit, KeyboardInterrupt):
            raise
        except BrokenPipeError:
            sys.exit(EXIT_OK)
        except Exception as exc:  # noqa: BLE001 - the last line of defence
            if os.environ.get("JUDGEKIT_DEBUG"):
                traceback.print_exc()
            say(f"judgekit: internal error: {type(exc).__name__}: {one_line(str(exc))} (set JUDGEKIT_DEBUG=1 for a traceback)", err=True)
            sys.exit(EXIT_INTERNAL)

    return wrapper


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="judgekit-agents", prog_name="judgekit")
def main() -> None:
    """Score AI-agent trajectories against pre-registered rubrics.

    Three independent axes: task success (from the world's end state), tool correctness
    (pre-registered points) and faithfulness (claims traced to evidence).
    Exit codes: 0 ok, 1 internal error or failed gate, 2 bad input.
    """


from judgekit.cli import commands as _commands  # noqa: E402,F401  (registers the commands)
from judgekit.cli import label_cmd as _label_cmd  # noqa: E402,F401
