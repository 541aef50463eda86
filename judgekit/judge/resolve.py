"""Judge specs (suite, rubric, command line) into planned targets, and targets into connections.

Resolving is pure (no server started, no key read) so a plan holds no secret; connecting
happens in the executor, just before the first call.
"""

from __future__ import annotations

import os
from contextlib import ExitStack
from urllib.parse import urlsplit, urlunsplit
from dataclasses import dataclass

from judgekit._util.text import register_secret
from judgekit.errors import ConfigError
from judgekit.judge.spec import LOCAL_MODEL, JudgeSpec, RateLimit, check_pinned
from judgekit.judge.target import Connection, JudgeTarget


@dataclass(frozen=True)
class JudgeOverride:
    """``--judge-model``, ``--judge-api-base``, ``--judge-api-key-env``: part of provenance and the
    cache key; and ``--rpm``/``--tpm`` (``rate``), which are neither: each figure set replaces
    that of every judge's own ``rate``."""

    model: str | None = None
    api_base: str | None = None
    api_key_env: str | None = None
    rate: RateLimit | None = None

    @property
    def active(self) -> bool:
        return any((self.model, self.api_base, self.api_key_env))


def endpoint_of(api_base: str | None) -> str:
    """The identity of the server a judge answers from: its api_base with scheme and host in
    lower case, no trailing slash and no credentials (``user:password@`` names who calls, not
    who answers, and is never written), or "provider default" when litellm picks the provider's."""
    if not api_base:
        return "provider default"
    parts = urlsplit(api_base.strip())
    host = parts.netloc.rpartition("@")[2].lower()
    return urlunsplit((parts.scheme.lower(), host, parts.path.rstrip("/"), parts.query, ""))


class JudgeResolver:
    """Resolves specs once per plan, applying the command-line override."""

    def __init__(self, *, override: JudgeOverride, allow_floating: bool, environ=os.environ):
        self._override = override
        self._allow_floating = allow_floating
        self._environ = environ
        self._resolved: dict[str, JudgeTarget] = {}
        self._rates: dict[str, tuple[RateLimit | None, str]] = {}  # rate key -> its rate, and the model that set it

    def resolve(self, spec: JudgeSpec) -> JudgeTarget:
        if self._override.rate is not None:
            spec = spec.model_copy(update={"rate": self._override.rate.over(spec.rate)})
        if self._override.active:
            spec = spec.model_copy(
                update={
                    k: v
                    for k, v in {"model": self._override.model, "api_base": self._override.api_base,
                                 "api_key_env": self._override.api_key_env}.items()
                    if v is not None
                }
            )
        cache_key = spec.model_dump_json()
        if cache_key not in self._resolved:
            target = self._resolve(spec)
            self._check_rate(target)
            self._resolved[cache_key] = target
        return self._resolved[cache_key]

    def _check_rate(self, target: JudgeTarget) -> None:
        """One rate per endpoint: two judges that call the same one under different limits are refused."""
        rate, model = self._rates.setdefault(target.rate_key, (target.spec.rate, target.model_pin))
        if rate != target.spec.rate:
            def text(limit: RateLimit | None) -> str:
                return "no limit" if limit is None else limit.model_dump_json(exclude_none=True)

            raise ConfigError(
                f"two judges call {target.rate_key} under different rate limits ({model}: {text(rate)}; "
                f"{target.model_pin}: {text(target.spec.rate)}): set the same `rate:` in both judge settings, "
                "or pass --rpm/--tpm")

    def _resolve(self, spec: JudgeSpec) -> JudgeTarget:
        if spec.model == LOCAL_MODEL:
            from judgekit.judge.local import LITELLM_MODEL, embedded_endpoint, local_model_pin

            # The weights are pinned by their sha256 and served in-process on a fresh port each
            # run: the endpoint is the embedded server, whatever its port.
            return JudgeTarget(spec=spec, litellm_model=LITELLM_MODEL, model_pin=local_model_pin(),
                               endpoint=embedded_endpoint(), embedded=True, override=self._override.active,
                               max_concurrency=1)
        floating = check_pinned(spec.model, allow_floating=self._allow_floating)
        if spec.api_base:
            parts = urlsplit(spec.api_base.strip())
            if parts.username or parts.password:
                register_secret(parts.password)  # masked, should anything quote the URL
                raise ConfigError("the judge's api_base carries credentials (user:password@): they are never sent "
                                  "that way and never stored; put the key in an environment variable and name it "
                                  "in api_key_env (or --judge-api-key-env)")
        if spec.api_key_env and not self._environ.get(spec.api_key_env):
            raise ConfigError(f"the judge's API key variable {spec.api_key_env} is not set")
        litellm_model = spec.model.split("@sha256:")[0]
        if spec.api_base and "/" not in litellm_model:
            litellm_model = "openai/" + litellm_model  # an OpenAI-compatible server
        return JudgeTarget(spec=spec, litellm_model=litellm_model, model_pin=spec.model, api_base=spec.api_base,
                           api_key_env=spec.api_key_env, endpoint=endpoint_of(spec.api_base), floating=floating,
                           override=self._override.active)


class Connector:
    """Turns targets into connections for one execution: reads API keys from the environment
    (masked from then on in everything judgekit writes) and starts the embedded judge at most
    once, stopping it when the ``ExitStack`` closes."""

    def __init__(self, stack: ExitStack, *, environ=os.environ):
        self._stack = stack
        self._environ = environ
        self._local = None
        self._made: dict[tuple, Connection] = {}

    def __call__(self, target: JudgeTarget) -> Connection:
        key = (target.embedded, target.api_base, target.api_key_env)
        if key not in self._made:
            self._made[key] = self._connect(target)
        return self._made[key]

    def _connect(self, target: JudgeTarget) -> Connection:
        if target.embedded:
            server = self._local_server()
            register_secret(server.api_key)
            return Connection(server.api_base, server.api_key)
        if target.api_key_env:
            api_key = self._environ.get(target.api_key_env)
            if not api_key:
                raise ConfigError(f"the judge's API key variable {target.api_key_env} is not set")
            register_secret(api_key)  # masked in everything judgekit writes, should a server echo it
            return Connection(target.api_base, api_key)
        if target.api_base:
            # Never let a provider key from the environment travel to a third-party server.
            return Connection(target.api_base, "not-needed")
        return Connection()

    def _local_server(self):
        if self._local is None:
            from judgekit.judge.local import LocalJudgeServer

            self._local = self._stack.enter_context(LocalJudgeServer())
        return self._local
