"""A judge as a run plans it: who answers and how to reach them, without any secret.

``JudgeTarget`` is what planning resolves a judge spec to: the pinned model, the endpoint
(the server's identity), the variable that holds the API key (never the key), and whether it
is the embedded judge. It travels inside a run plan (pickled to another process or machine);
the executor turns it into a ``Connection`` (address and key) just before calling.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from judgekit.judge.spec import JudgeSpec


@dataclass(frozen=True)
class JudgeTarget:
    """A judge ready to plan with: the spec plus where the model answers."""

    spec: JudgeSpec
    litellm_model: str
    model_pin: str
    api_base: str | None = None
    """The server to call (None: the provider's default; the embedded judge's comes at connect time)."""
    api_key_env: str | None = None
    """The environment variable that holds the API key; read by the executor, never stored."""
    endpoint: str = "provider default"
    """Who answers: part of provenance, the cache key and the fingerprint."""
    embedded: bool = False
    """The embedded judge: the executor starts its server."""
    floating: bool = False
    override: bool = False
    max_concurrency: int | None = None
    """A server with few slots (the embedded judge has one)."""

    @property
    def rate_key(self) -> str:
        """What a rate limit counts calls against: the server (``endpoint``), or for a provider's
        own API, which limits each model separately, the model; with the key's variable when one
        is named, since a provider limits each key. Names no secret."""
        scope = self.litellm_model if self.endpoint == "provider default" else self.endpoint
        return f"{scope} (key {self.api_key_env})" if self.api_key_env else scope


@dataclass(frozen=True)
class Connection:
    """Where and with which key to call a target: made by the executor, never planned or stored."""

    api_base: str | None = None
    api_key: str | None = field(default=None, repr=False)
