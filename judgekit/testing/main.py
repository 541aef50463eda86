"""The command line of ``python -m judgekit.testing`` (run by its ``__main__``)."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Sequence

from pydantic import ValidationError

from judgekit._util.documents import load_document
from judgekit._util.io import describe_validation_error
from judgekit.testing.replies import Reply, ScriptSpec
from judgekit.testing.server import ScriptedOpenAIServer
from judgekit.errors import InputError, JudgekitError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m judgekit.testing",
        description="Scripted OpenAI-compatible server on 127.0.0.1 for testing judges.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="serve until SIGINT/SIGTERM; prints the base URL first")
    serve.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: a free one)")
    serve.add_argument("--delay", type=float, default=0.0, help="default reply latency in seconds")
    source = serve.add_mutually_exclusive_group(required=True)
    source.add_argument("--reply-file", help="a ScriptSpec document (JSON or YAML)")
    source.add_argument("--reply", help="one Reply as JSON, answered to every request")
    serve.add_argument("--exit-on-stdin-eof", action="store_true", help="stop when stdin closes")
    return parser


def _load_spec(args: argparse.Namespace) -> ScriptSpec:
    if args.reply_file:
        return load_document(args.reply_file, ScriptSpec)
    try:
        return ScriptSpec.constant(Reply.model_validate_json(args.reply))
    except ValidationError as exc:
        raise InputError(f"--reply: {describe_validation_error(exc)}") from None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m judgekit.testing``."""
    args = _parser().parse_args(argv)
    try:
        spec = _load_spec(args)
        if args.delay < 0:
            raise InputError("--delay must be >= 0")
    except JudgekitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    done = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: done.set())
    if args.exit_on_stdin_eof:
        threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
    with ScriptedOpenAIServer(spec, default_delay_s=args.delay, port=args.port) as server:
        print(server.base_url, flush=True)
        while not done.wait(0.5):
            pass
    return 0
