"""The scripted server's OpenAI files and batches endpoints: a batch judged by the same script.

``POST /v1/files`` (multipart upload, purpose ``batch``), ``GET /v1/files/{id}``,
``GET /v1/files/{id}/content``, ``POST /v1/batches``, ``GET /v1/batches/{id}`` and
``POST /v1/batches/{id}/cancel``, as the OpenAI API and so litellm's batch functions speak
them. Each request line of a batch is answered by the server's own script (the replies an
online call would get), counted in ``batch_request_count``, never in ``request_count``: a test
can tell a batch from online calls. Scripting, on ``server.batches``::

    server.batches.state = "in_progress"       # what a new batch reports (default "completed")
    server.batches.finish(batch_id, "expired", answered=2)   # first 2 answered, the rest expired
    server.batches.error_for = lambda line: {"code": "invalid_request", "message": "..."} or None
    server.batches.rewrite_output = lambda lines: lines + [b"not json"]   # hostile output files

A finished batch writes its output file (one line per answered request: ``custom_id``,
``response.status_code``, ``response.body``) and, when any request failed, its error file
(``custom_id``, ``error`` or a non-200 ``response``), with ``request_counts`` to match.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from email.parser import BytesParser
from email.policy import HTTP
from typing import Any

from judgekit._util.clock import utc_now
from judgekit.testing.replies import error_body, render


def _epoch() -> int:
    """Now, in whole seconds since the epoch, as OpenAI's files and batches stamp their objects."""
    return int(utc_now().timestamp())

TERMINAL = ("completed", "expired", "cancelled", "failed")
STATES = ("validating", "in_progress", "finalizing", *TERMINAL)
_ENDED_BY = {"expired": "batch_expired", "cancelled": "batch_cancelled", "failed": "batch_failed"}

Answer = tuple[int, bytes]


class ScriptedBatches:
    """The files and batches a scripted server holds, and how it plays them.

    ``choose(request_body, n) -> Reply`` is the server's script; ``state`` is what a new batch
    reports (a terminal state finishes it at once); ``error_for(line)`` sends a request line to
    the error file with that error instead of answering it; ``rewrite_output(lines)`` replaces
    the output file's lines (bytes, no newline) before it is stored."""

    def __init__(self, choose: Callable[[dict[str, Any], int], Any]):
        self._choose = choose
        self._lock = threading.Lock()
        self.files: dict[str, dict[str, Any]] = {}
        self.contents: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.state = "completed"
        self.error_for: Callable[[dict[str, Any]], dict[str, str] | None] | None = None
        self.rewrite_output: Callable[[list[bytes]], list[bytes]] | None = None
        self.batch_request_count = 0
        """Request lines answered by the script inside batches (never counted as online calls)."""

    # --- routing --------------------------------------------------------------------------------

    @staticmethod
    def handles(path: str) -> bool:
        return path.startswith(("/v1/files", "/v1/batches"))

    def answer(self, method: str, path: str, content_type: str, body: bytes) -> Answer:
        """(HTTP status, JSON or file body) for one request to a files or batches path."""
        parts = path.strip("/").split("/")[1:]  # after "v1"
        with self._lock:
            if method == "POST" and parts == ["files"]:
                return self._upload(content_type, body)
            if method == "GET" and len(parts) == 2 and parts[0] == "files":
                return self._found(self.files.get(parts[1]), "file", parts[1])
            if method == "GET" and len(parts) == 3 and parts[0] == "files" and parts[2] == "content":
                content = self.contents.get(parts[1])
                return (200, content) if content is not None else self._found(None, "file", parts[1])
            if method == "POST" and parts == ["batches"]:
                return self._create(body)
            if method == "GET" and len(parts) == 2 and parts[0] == "batches":
                return self._found(self.batches.get(parts[1]), "batch", parts[1])
            if method == "POST" and len(parts) == 3 and parts[0] == "batches" and parts[2] == "cancel":
                if parts[1] in self.batches and self.batches[parts[1]]["status"] not in TERMINAL:
                    self._finish(parts[1], "cancelled", 0)
                return self._found(self.batches.get(parts[1]), "batch", parts[1])
        return 404, error_body(f"unknown path {path}", "invalid_request_error", None)

    def finish(self, batch_id: str | None = None, state: str = "completed", *, answered: int | None = None) -> None:
        """End a batch (the last one created when ``batch_id`` is None) in ``state``: its first
        ``answered`` requests (all by default for completed, none otherwise) are answered, the
        rest go to the error file as expired, cancelled or failed."""
        if state not in TERMINAL:
            raise ValueError(f"a batch ends in one of {', '.join(TERMINAL)}")
        with self._lock:
            self._finish(batch_id or list(self.batches)[-1], state, answered)

    # --- the endpoints --------------------------------------------------------------------------

    def _found(self, item: dict[str, Any] | None, what: str, name: str) -> Answer:
        if item is None:
            return 404, error_body(f"no such {what}: {name}", "invalid_request_error", None)
        return 200, json.dumps(item).encode()

    def _upload(self, content_type: str, body: bytes) -> Answer:
        message = BytesParser(policy=HTTP).parsebytes(f"Content-Type: {content_type}\r\n\r\n".encode() + body)
        fields = {part.get_param("name", header="content-disposition"): part for part in message.iter_parts()} \
            if message.is_multipart() else {}
        if "file" not in fields or "purpose" not in fields:
            return 400, error_body("a file upload is multipart/form-data with 'file' and 'purpose'",
                                   "invalid_request_error", None)
        content = fields["file"].get_payload(decode=True) or b""
        file_id = f"file-{len(self.files) + 1}"
        self.files[file_id] = {"id": file_id, "object": "file", "bytes": len(content), "created_at": _epoch(),
                               "filename": fields["file"].get_filename() or "upload.jsonl",
                               "purpose": fields["purpose"].get_content().strip(), "status": "processed"}
        self.contents[file_id] = content
        return 200, json.dumps(self.files[file_id]).encode()

    def _create(self, body: bytes) -> Answer:
        try:
            request = json.loads(body)
            input_file_id = request["input_file_id"]
        except (ValueError, KeyError, TypeError):
            return 400, error_body("a batch needs a JSON body with input_file_id", "invalid_request_error", None)
        if input_file_id not in self.contents:
            return 400, error_body(f"no such file: {input_file_id}", "invalid_request_error", None)
        batch_id = f"batch_{len(self.batches) + 1}"
        lines = [line for line in self.contents[input_file_id].splitlines() if line.strip()]
        self.batches[batch_id] = {
            "id": batch_id, "object": "batch", "endpoint": request.get("endpoint"), "errors": None,
            "input_file_id": input_file_id, "completion_window": request.get("completion_window", "24h"),
            "status": "in_progress", "output_file_id": None, "error_file_id": None,
            "created_at": _epoch(), "in_progress_at": _epoch(), "expires_at": None,
            "completed_at": None, "failed_at": None, "expired_at": None, "cancelled_at": None,
            "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
            "metadata": request.get("metadata"),
        }
        if self.state in TERMINAL:
            self._finish(batch_id, self.state, None)
        else:
            self.batches[batch_id]["status"] = self.state
        return 200, json.dumps(self.batches[batch_id]).encode()

    def _finish(self, batch_id: str, state: str, answered: int | None) -> None:
        batch = self.batches[batch_id]
        lines = [json.loads(line) for line in self.contents[batch["input_file_id"]].splitlines() if line.strip()]
        if answered is None:
            answered = len(lines) if state == "completed" else 0
        output: list[bytes] = []
        errors: list[bytes] = []
        for n, line in enumerate(lines):
            custom_id = line.get("custom_id")
            error = _ENDED_BY.get(state) if n >= answered else None
            scripted = self.error_for(line) if self.error_for is not None and error is None else None
            if error is not None or scripted is not None:
                found = scripted or {"code": error, "message": f"this request was not run: the batch {state}"}
                errors.append(_line(n, custom_id, None, found))
                continue
            self.batch_request_count += 1
            rendered = render(self._choose(line["body"], n), line["body"], created=_epoch())
            try:
                reply = json.loads(rendered.body) if rendered.body is not None else None
            except ValueError:
                reply = rendered.body.decode("utf-8", "replace")  # a 'raw' reply kept as text
            response = {"status_code": rendered.status, "request_id": f"req_{n}", "body": reply}
            (output if rendered.status == 200 else errors).append(_line(n, custom_id, response, None))
        if self.rewrite_output is not None:
            output = self.rewrite_output(output)
        batch["status"] = state
        batch[f"{state}_at"] = _epoch()
        batch["request_counts"] = {"total": len(lines), "completed": len(output), "failed": len(errors)}
        for kind, content in (("output_file_id", output), ("error_file_id", errors)):
            if content:
                file_id = f"file-{len(self.files) + 1}"
                data = b"\n".join(content) + b"\n"
                self.files[file_id] = {"id": file_id, "object": "file", "bytes": len(data), "purpose": "batch_output",
                                       "created_at": _epoch(), "filename": f"{batch_id}_{kind}.jsonl",
                                       "status": "processed"}
                self.contents[file_id] = data
                batch[kind] = file_id


def _line(n: int, custom_id: Any, response: dict[str, Any] | None, error: dict[str, str] | None) -> bytes:
    return json.dumps({"id": f"batch_req_{n}", "custom_id": custom_id, "response": response, "error": error}).encode()
