"""Fork server for tests/test_judge_kill.py: `judgekit` command lines without the import cost.

Importing litellm costs about 6 s of CPU; the kill test starts `judgekit run` six times. This
process imports judgekit's CLI and litellm once, then for each JSON line on stdin
({"args": [...], "log": path}) forks a child that runs the same entry point as the console
script (``judgekit.cli:main``) with stdout and stderr going to ``log``. Before serving it
also imports what litellm imports lazily on its first call (found by a throwaway child that
makes one call to a local scripted server), so a child judges at steady speed from its first
request and a kill lands in steady-state judging, not in a first call's imports. It prints
{"pid": n} when the child starts and {"pid": n, "status": wait_status} when it ends, so the
test can SIGKILL the child by its pid. Set JUDGEKIT_KILL_TEST_EXEC=1 in the test to exec the
real console script instead.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import sys

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"

import diskcache  # noqa: E402,F401 - VerdictCache imports it lazily
import litellm  # noqa: E402,F401 - the slow import, paid once here

import judgekit.cache.store  # noqa: E402,F401
import judgekit.cli._render  # noqa: E402,F401
import judgekit.run  # noqa: E402,F401
from judgekit.cli import main  # noqa: E402


def child(args: list[str], log: str) -> None:
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    code = 1
    try:
        main(args=args, prog_name="judgekit")
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def first_call_imports() -> list[str]:
    """Modules litellm imports during its first call, found in a throwaway child."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        before = set(sys.modules)
        try:
            from judgekit.testing import Reply, ScriptedOpenAIServer

            with ScriptedOpenAIServer(Reply.ok({"claims": []})) as server:
                asyncio.run(litellm.acompletion(
                    model="openai/warm-up-2024-01-01", messages=[{"role": "user", "content": "warm up"}],
                    api_base=server.base_url, api_key="x", num_retries=0, timeout=60,
                ))
        finally:
            os.write(write_end, json.dumps(sorted(set(sys.modules) - before)).encode())
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        names = json.loads(pipe.read() or b"[]")
    os.waitpid(pid, 0)
    return names


def serve() -> None:
    warmed = 0
    for name in first_call_imports():
        try:
            importlib.import_module(name)
            warmed += 1
        except Exception:  # noqa: BLE001 - a module that needs its parent's state: skip it
            pass
    print(json.dumps({"ready": True, "warmed_modules": warmed}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            child(request["args"], request["log"])
        print(json.dumps({"pid": pid}), flush=True)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"pid": pid, "status": status}), flush=True)


if __name__ == "__main__":
    serve()
