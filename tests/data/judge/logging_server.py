"""A scripted judge in its own process that logs when each request arrived and was answered.

Used by tests/test_judge_kill.py: the server must outlive the judgekit runs it kills, and its
log tells which requests were in flight at each kill. Usage::

    python logging_server.py LOG_PATH DELAY_S

prints the base URL on the first stdout line and stops when its stdin closes. Each log line is
JSON: {"event": "recv" | "sent", "digest": sha256 of the request's messages, "t": monotonic}.
``time.monotonic`` is CLOCK_MONOTONIC on Linux, the same clock in every process.
"""

from __future__ import annotations

import hashlib
import json
import sys
import threading
import time

from judgekit._util.io import canonical_json
from judgekit.testing import Reply, ScriptedOpenAIServer

_local = threading.local()
_lock = threading.Lock()


def digest(messages) -> str:
    return hashlib.sha256(canonical_json(messages).encode()).hexdigest()


class LoggingServer(ScriptedOpenAIServer):
    def __init__(self, log, **kwargs):
        self.log = log
        super().__init__(self.answer, **kwargs)

    def write(self, event: str, key: str) -> None:
        with _lock:
            self.log.write(json.dumps({"event": event, "digest": key, "t": time.monotonic()}) + "\n")
            self.log.flush()

    def answer(self, request, n):
        _local.digest = digest(request["messages"])
        self.write("recv", _local.digest)
        output = ""
        for line in request["messages"][1]["content"].splitlines():
            if line.startswith("O = "):
                output = json.loads(line[4:])
        return Reply.ok({"claims": [{"claim": output[:40], "supported": False, "evidence": []}]})

    def _done(self) -> None:  # called by the handler once the answer was written (or dropped)
        super()._done()
        self.write("sent", getattr(_local, "digest", "?"))


def main() -> None:
    log_path, delay = sys.argv[1], float(sys.argv[2])
    with open(log_path, "a", encoding="utf-8") as log, LoggingServer(log, default_delay_s=delay) as server:
        print(server.base_url, flush=True)
        sys.stdin.read()  # until the parent closes our stdin


if __name__ == "__main__":
    main()
