"""The scripted server in its own process: the ``serve`` command and the parent's handle.

A benchmark that runs the server in the client's process makes both share one GIL; in a
child process the server's parsing and JSON work no longer slows the client down.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Self


from judgekit.testing.replies import Reply, ScriptSpec

_PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])  # the folder holding judgekit/: the child runs this copy
# Talk to 127.0.0.1 directly even when http_proxy is set in the environment.
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def to_spec(script: Reply | Sequence[Reply] | ScriptSpec) -> ScriptSpec:
    """The declarative form of a script; functions cannot cross a process boundary."""
    if isinstance(script, ScriptSpec):
        return script
    if isinstance(script, Reply):
        return ScriptSpec.constant(script)
    if isinstance(script, Sequence) and not isinstance(script, str | bytes):
        return ScriptSpec(replies=list(script), mode="sequence")
    raise TypeError(
        "a spawned server needs a Reply, a list of Reply or a ScriptSpec "
        f"(a function cannot cross a process boundary); got {type(script).__name__}"
    )


class SpawnedScriptedServer:
    """Handle on a scripted server running in a child process (see ``ScriptedOpenAIServer.spawn``)."""

    def __init__(
        self, spec: ScriptSpec, *, default_delay_s: float = 0.0, startup_timeout_s: float = 15.0
    ):
        self.spec = spec
        self.default_delay_s = float(default_delay_s)
        self.startup_timeout_s = startup_timeout_s
        self._proc: subprocess.Popen[str] | None = None
        self._tmpdir: str | None = None
        self._url: str | None = None

    def start(self) -> Self:
        """Start the child and wait until it prints its address."""
        if self._proc is not None:
            raise RuntimeError("server already started")
        self._tmpdir = tempfile.mkdtemp(prefix="judgekit-scripted-")
        spec_path = Path(self._tmpdir, "script.json")
        spec_path.write_text(self.spec.model_dump_json(), encoding="utf-8")
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_PARENT, env.get("PYTHONPATH")) if p)
        command = [
            sys.executable, "-m", "judgekit.testing", "serve",
            "--port", "0",
            "--delay", repr(self.default_delay_s),
            "--reply-file", str(spec_path),
            "--exit-on-stdin-eof",
        ]  # fmt: skip
        self._proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True
        )
        lines: queue.Queue[str] = queue.Queue()
        stdout = self._proc.stdout
        assert stdout is not None
        threading.Thread(target=lambda: lines.put(stdout.readline()), daemon=True).start()
        try:
            first = lines.get(timeout=self.startup_timeout_s)
        except queue.Empty:
            self.stop()
            raise RuntimeError(
                f"scripted server process did not print its address within {self.startup_timeout_s:g}s"
            ) from None
        if not first.startswith("http://"):
            code = self._proc.wait(5) if first == "" else None
            self.stop()
            raise RuntimeError(f"scripted server process failed to start (exit code {code}); see stderr")
        self._url = first.strip().removesuffix("/v1")
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        """Ask the child to stop (closing its stdin), then terminate or kill it if it hangs."""
        proc, self._proc = self._proc, None
        if proc is not None:
            try:
                if proc.stdin:
                    proc.stdin.close()
                proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                proc.terminate()
                try:
                    proc.wait(timeout_s)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            if proc.stdout:
                proc.stdout.close()
        if self._tmpdir is not None:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None
        self._url = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def pid(self) -> int:
        if self._proc is None:
            raise RuntimeError("server not started")
        return self._proc.pid

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (no path)."""
        if self._url is None:
            raise RuntimeError("server not started: use `with ScriptedOpenAIServer.spawn(...)`")
        return self._url

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``."""
        return self.url + "/v1"

    def stats(self) -> dict[str, Any]:
        """``{"request_count", "by_kind", "script_errors"}`` fetched from the child."""
        with _NO_PROXY.open(self.url + "/_judgekit/stats", timeout=10) as response:
            return json.loads(response.read())

    @property
    def request_count(self) -> int:
        return int(self.stats()["request_count"])

    @property
    def request_count_by_kind(self) -> dict[str, int]:
        return dict(self.stats()["by_kind"])


# --- the `serve` command ---------------------------------------------------------------------
