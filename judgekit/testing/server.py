"""The scripted OpenAI-compatible HTTP server of ``judgekit.testing``.

A ``socketserver`` thread per connection (HTTP/1.1, keep-alive, Content-Length), bound to
127.0.0.1 only. Stopping closes every open connection, wakes delayed and held replies and joins
every thread, so nothing lingers.
"""

from __future__ import annotations

import json
import socket
import socketserver
import sys
import threading
import time
from collections import Counter
from collections.abc import Sequence
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import TYPE_CHECKING, Any, Self
from urllib.parse import urlsplit

from judgekit.testing.batches import ScriptedBatches
from judgekit.testing.replies import (
    Chooser,
    Rendered,
    Reply,
    Script,
    ScriptFunction,
    ScriptSpec,
    error_body,
    render,
)

if TYPE_CHECKING:
    from judgekit.testing.ratelimit import RequestsPerMinute
    from judgekit.testing.spawn import SpawnedScriptedServer

HOST = "127.0.0.1"
CHAT_PATHS = ("/v1/chat/completions", "/chat/completions")
MODELS_PATHS = ("/v1/models", "/models")
STATS_PATH = "/_judgekit/stats"

class _HTTPServer(socketserver.ThreadingMixIn, HTTPServer):
    """Threads per connection, tracked by us so ``stop`` can close and join every one."""

    daemon_threads = True  # a forgotten server must not hang interpreter exit
    block_on_close = False  # we join our own threads in ``ScriptedOpenAIServer.stop``
    allow_reuse_address = True
    request_queue_size = 128  # 32+ clients connect at once; the default 5 drops SYNs

    def __init__(self, owner: ScriptedOpenAIServer, port: int):
        self.owner = owner
        super().__init__((HOST, port), _Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind looks up the FQDN, which can stall without DNS.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = HOST, self.server_address[1]

    def process_request(self, request: Any, client_address: Any) -> None:
        thread = threading.Thread(
            target=self._serve_connection,
            args=(request, client_address),
            name=f"judgekit-scripted-{client_address[1]}",
            daemon=True,
        )
        self.owner._track(request, thread)
        thread.start()

    def _serve_connection(self, request: Any, client_address: Any) -> None:
        try:
            self.process_request_thread(request, client_address)
        finally:
            self.owner._untrack(request, threading.current_thread())

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients that time out or vanish are part of the fault scripts, not errors.
        exc = sys.exc_info()[1]
        if isinstance(exc, OSError):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server_version = "judgekit-scripted/1"
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass  # keep test output clean

    def _send(self, status: int, body: bytes, headers: Sequence[tuple[str, str]] = ()) -> None:
        # One write for head and body: avoids Nagle/delayed-ACK stalls on keep-alive.
        try:
            phrase = HTTPStatus(status).phrase
        except ValueError:
            phrase = ""
        lines = [f"HTTP/1.1 {status} {phrase}", "Content-Type: application/json"]
        lines += [f"{name}: {value}" for name, value in headers]
        lines.append(f"Content-Length: {len(body)}")
        if self.close_connection or self.server.owner._stopping.is_set():
            self.close_connection = True
            lines.append("Connection: close")
        else:
            lines.append("Connection: keep-alive")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        try:
            self.wfile.write(head + body)
            self.wfile.flush()
        except OSError:
            self.close_connection = True

    def _send_json(self, status: int, payload: Any) -> None:
        self._send(status, json.dumps(payload).encode())

    def _read_body(self) -> bytes | None:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = self.headers.get("Content-Length")
        if length is None:
            return None
        return self.rfile.read(int(length))

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        path = urlsplit(self.path).path.rstrip("/")
        owner = self.server.owner
        if path in MODELS_PATHS:
            models = [
                {"id": name, "object": "model", "created": 0, "owned_by": "judgekit-testing"}
                for name in owner.models
            ]
            self._send_json(200, {"object": "list", "data": models})
        elif path == STATS_PATH:
            self._send_json(200, owner.stats())
        elif path in ("", "/health"):
            self._send_json(200, {"status": "ok"})
        elif owner.batches.handles(path):
            self._send(*owner.batches.answer("GET", path, "", b""))
        else:
            self._send(404, error_body(f"unknown path {path}", "invalid_request_error", None))

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        path = urlsplit(self.path).path.rstrip("/")
        body = self._read_body()
        owner = self.server.owner
        if body is None:
            self._send(411, error_body("Content-Length required", "invalid_request_error", None))
            return
        if owner.batches.handles(path):
            self._send(*owner.batches.answer("POST", path, self.headers.get("Content-Type") or "", body))
            return
        if path not in CHAT_PATHS:
            self._send(404, error_body(f"unknown path {path}", "invalid_request_error", None))
            return
        try:
            request = json.loads(body)
            if not isinstance(request, dict):
                raise ValueError("not an object")
        except ValueError as exc:
            owner._count("bad_request")
            self._send(400, error_body(f"invalid JSON body: {exc}", "invalid_request_error", None))
            return
        if request.get("stream"):
            owner._count("bad_request")
            message = "the scripted server does not stream; send stream=false"
            self._send(400, error_body(message, "invalid_request_error", None))
            return
        scheme, _, key = (self.headers.get("Authorization") or "").partition(" ")
        rendered, delay, hold = owner._answer(request, api_key=key if scheme.lower() == "bearer" else None)
        try:
            # A request that arrived held waits for release() (answered) or stop() (dropped);
            # whether it was held is decided on arrival, under the lock, never read afterwards.
            released = hold is None or owner._wait_for_release(hold)
            if not released or (delay > 0 and owner._stopping.wait(delay)):
                rendered = Rendered(status=0, body=None)  # stopping: drop what still waits
            if rendered.body is None:
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                return
            self._send(rendered.status, rendered.body, rendered.headers)
        finally:
            owner._done()


class ScriptedOpenAIServer:
    """An OpenAI chat-completions server on 127.0.0.1 that plays a script.

    ``script``: a ``Reply`` (every request gets it), a list of ``Reply`` (played once, in
    arrival order), a ``ScriptSpec``, or a function ``(request_json, n) -> Reply`` where ``n``
    is the 0-based arrival number (decide on the request content to stay independent of
    concurrency order). ``default_delay_s`` applies to replies whose ``delay_s`` is None.
    ``models`` are listed by ``GET /v1/models``. ``port=0`` picks a free port. ``rate_limit``
    (``judgekit.testing.ratelimit.RequestsPerMinute``): a provider's limit, 429 with Retry-After above it.
    """

    def __init__(
        self,
        script: Script,
        *,
        default_delay_s: float = 0.0,
        models: Sequence[str] = ("test-model",),
        port: int = 0,
        rate_limit: RequestsPerMinute | None = None,
    ):
        self.rate_limit = rate_limit
        if default_delay_s < 0:
            raise ValueError("default_delay_s must be >= 0")
        self._chooser = Chooser(script)
        self.default_delay_s = float(default_delay_s)
        self.models = tuple(models)
        self._port = port
        self._lock = threading.Lock()
        self._in_flight_changed = threading.Condition(self._lock)
        self._hold_changed = threading.Condition(self._lock)
        self._stopping = threading.Event()
        self._holding = False  # hold() until release() or stop(); read on arrival, under the lock
        self._releases = 0  # release() calls that ended a hold: a held request waits for the next
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._connections: set[Any] = set()
        self._threads: set[threading.Thread] = set()
        self._requests: list[dict[str, Any]] = []
        self._counts: Counter[str] = Counter()
        self._script_errors: list[str] = []
        self._in_flight = 0
        self._max_in_flight = 0
        self.batches = ScriptedBatches(self._chooser.choose)  # /v1/files, /v1/batches: judgekit.testing.batches

    # --- lifecycle ----------------------------------------------------------------------------

    def start(self) -> Self:
        """Bind 127.0.0.1 and serve in a background thread; returns ``self``."""
        if self._httpd is not None:
            raise RuntimeError("server already started")
        self._stopping.clear()
        self._httpd = _HTTPServer(self, self._port)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="judgekit-scripted-server",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop serving, drop delayed replies, close all connections, join all threads."""
        httpd, thread = self._httpd, self._thread
        if httpd is None or thread is None:
            return
        with self._lock:
            # One step under the lock: a request either arrived before it (held, so dropped,
            # as release() never came) or sees the server stopping. None is answered after.
            self._stopping.set()
            self._holding = False
            self._hold_changed.notify_all()  # wakes held replies, which are then dropped
        httpd.shutdown()  # returns once serve_forever has stopped accepting
        thread.join(timeout_s)
        with self._lock:
            connections, threads = list(self._connections), list(self._threads)
        for conn in connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)  # wakes handlers idling on keep-alive
            except OSError:
                pass
        deadline = time.monotonic() + timeout_s
        for worker in threads:
            worker.join(max(0.0, deadline - time.monotonic()))
        httpd.server_close()
        self._httpd = self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- addresses ----------------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("server not started: use `with ScriptedOpenAIServer(...)` or .start()")
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (no path)."""
        return f"http://{HOST}:{self.port}"

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``: pass as ``api_base`` / ``base_url`` to clients."""
        return self.url + "/v1"

    # --- what was received --------------------------------------------------------------------

    @property
    def request_count(self) -> int:
        """Chat-completions requests received (answered or not, bad ones included)."""
        with self._lock:
            return sum(self._counts.values())

    @property
    def request_count_by_kind(self) -> dict[str, int]:
        """Requests per reply kind, plus ``bad_request`` and ``script_error`` when they occur."""
        with self._lock:
            return dict(self._counts)

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Copies of the parsed JSON bodies of valid chat-completions requests, in arrival order."""
        with self._lock:
            return json.loads(json.dumps(self._requests))

    @property
    def script_errors(self) -> list[str]:
        """Why the script could not answer (exhausted, function raised); each got an HTTP 500."""
        with self._lock:
            return list(self._script_errors)

    @property
    def max_in_flight(self) -> int:
        """Most chat-completions requests held at once (shows whether clients were queued)."""
        with self._lock:
            return self._max_in_flight

    @property
    def in_flight(self) -> int:
        """Chat-completions requests received and not yet answered (held ones included)."""
        with self._lock:
            return self._in_flight

    def wait_for_in_flight(self, n: int, timeout_s: float) -> bool:
        """Block until ``n`` requests are in flight at once; False if ``timeout_s`` passes first.

        With ``hold()``, this proves concurrency without timing: ``n`` clients that the server
        (or the client library) queued never get there."""
        with self._in_flight_changed:
            return self._in_flight_changed.wait_for(lambda: self._in_flight >= n, timeout_s)

    # --- holding replies ----------------------------------------------------------------------

    def hold(self) -> None:
        """Keep every chat-completions request in flight, unanswered, until ``release()``
        (``stop()`` releases them too, dropping their replies). Requests are still recorded
        and counted on arrival."""
        with self._lock:
            self._holding = True

    def release(self) -> None:
        """Answer the held requests (each still waits out its delay) and stop holding.

        Every request held when this is called is answered, even if ``stop()`` follows at once
        (the reply may then still be cut by the closing connection)."""
        with self._lock:
            if self._holding:
                self._holding = False
                self._releases += 1
                self._hold_changed.notify_all()

    def stats(self) -> dict[str, Any]:
        """What ``GET /_judgekit/stats`` answers."""
        with self._lock:
            return {
                "request_count": sum(self._counts.values()),
                "by_kind": dict(self._counts),
                "script_errors": list(self._script_errors),
                "max_in_flight": self._max_in_flight,
            }

    def reset(self) -> None:
        """Forget received requests, counts and ``max_in_flight``; a list script is not rewound."""
        with self._lock:
            self._requests.clear()
            self._counts.clear()
            self._script_errors.clear()
            self._max_in_flight = self._in_flight

    # --- used by the handler ------------------------------------------------------------------

    def _track(self, conn: Any, thread: threading.Thread) -> None:
        with self._lock:
            self._connections.add(conn)
            self._threads.add(thread)

    def _untrack(self, conn: Any, thread: threading.Thread) -> None:
        with self._lock:
            self._connections.discard(conn)
            self._threads.discard(thread)

    def _count(self, kind: str) -> None:
        with self._lock:
            self._counts[kind] += 1

    def _wait_for_release(self, hold: int) -> bool:
        """Block a request that arrived held (``hold``: the ``release()`` count then) until
        ``release()`` (True: answer it) or ``stop()`` (False: drop it), whichever came first."""
        with self._hold_changed:
            self._hold_changed.wait_for(lambda: self._releases != hold or self._stopping.is_set())
            return self._releases != hold

    def _done(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _answer(
        self, request: dict[str, Any], *, api_key: str | None = None
    ) -> tuple[Rendered, float, int | None]:
        """Record the request and pick its answer; the caller must call ``_done`` after.
        ``api_key``: the request's bearer token, which an ``auth_error`` reply echoes.
        Returns the answer, its delay, and, when the server holds replies, the ``release()``
        count on arrival (for ``_wait_for_release``; None: not held)."""
        with self._lock:
            # Whether it is held is taken with the arrival that wait_for_in_flight sees: a
            # stop() woken by that arrival always finds this request held.
            hold = self._releases if self._holding else None
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)
            self._in_flight_changed.notify_all()
            n = len(self._requests)
            self._requests.append(request)
            try:
                # Under the lock so a list is consumed in exactly arrival order.
                limited = self.rate_limit.check() if self.rate_limit is not None else None
                reply = limited or self._chooser.choose(request, n)
            except Exception as exc:  # the scripter's bug: report it, answer 500
                message = f"request #{n + 1}: {type(exc).__name__}: {exc}"
                self._script_errors.append(message)
                self._counts["script_error"] += 1
                return Rendered(500, error_body(message, "script_error", "script_error")), 0.0, hold
            self._counts[reply.kind] += 1
        delay = reply.delay_s if reply.delay_s is not None else self.default_delay_s
        return render(reply, request, created=int(time.time()), api_key=api_key), delay, hold

    # --- out of process -----------------------------------------------------------------------

    @staticmethod
    def spawn(
        script: Reply | Sequence[Reply] | ScriptSpec,
        *,
        default_delay_s: float = 0.0,
        startup_timeout_s: float = 15.0,
    ) -> SpawnedScriptedServer:
        """The same server in a child process (for benchmarks: no GIL shared with the client).

        Returns an unstarted handle; use it as a context manager or call ``start()``.
        """
        from judgekit.testing.spawn import SpawnedScriptedServer, to_spec

        return SpawnedScriptedServer(
            to_spec(script), default_delay_s=default_delay_s, startup_timeout_s=startup_timeout_s
        )
