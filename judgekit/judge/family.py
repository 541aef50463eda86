"""Model families: whether a judge and the agent it judges come from the same maker.

A judge tends to prefer answers written the way it writes them, and that reaches past its own
model to the models of its maker (trained on much the same data, often distilled from one
another): gpt-4o-mini judging gpt-4o, or claude-3-haiku judging claude-3-5-sonnet. So a family
is the model's maker, not its exact name: ``openai``, ``anthropic``, ``google``, ``meta``, ...

The rule (``model_family``), on the name in lower case:

1. split it at ``/``, ``.`` and ``:`` (``openrouter/meta-llama/llama-3-70b``,
   ``bedrock/anthropic.claude-3-5-sonnet-20240620-v1:0``, ``ollama/llama3:8b``);
2. from the last piece back, the first piece that starts with a prefix in ``MAKERS``, followed
   by no letter (``o1-mini`` and ``llama3`` match, ``palmyra`` does not), gives the family.
   Where a model is served (``azure/``, ``bedrock/``, ``openrouter/``, an ``openai/`` route to
   a local server) is no maker: those prefixes are never read as one;
3. a name no maker's prefix matches is its own family: ``model:`` and its last ``/`` piece with a
   trailing date (``-2024-08-06``, ``-20240620``) or ``-latest`` cut off, so only the same model
   (any date) matches it.

The agent's model is read from the trajectory's metadata (``agent_model``, else ``model``: the
importers of BFCL, Inspect and OpenTelemetry fill ``model``); without it, no family is claimed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

MAKERS: tuple[tuple[str, str], ...] = (
    ("gpt-", "openai"), ("gpt4", "openai"), ("chatgpt", "openai"), ("o1", "openai"), ("o3", "openai"),
    ("o4-", "openai"), ("text-davinci", "openai"), ("davinci", "openai"), ("babbage", "openai"),
    ("claude", "anthropic"),
    ("gemini", "google"), ("gemma", "google"), ("palm", "google"), ("chat-bison", "google"),
    ("text-bison", "google"),
    ("llama", "meta"), ("meta-llama", "meta"), ("codellama", "meta"),
    ("mistral", "mistral"), ("mixtral", "mistral"), ("codestral", "mistral"), ("ministral", "mistral"),
    ("magistral", "mistral"), ("pixtral", "mistral"), ("devstral", "mistral"),
    ("qwen", "alibaba"), ("qwq", "alibaba"),
    ("deepseek", "deepseek"),
    ("command", "cohere"), ("c4ai", "cohere"),
    ("grok", "xai"),
    ("phi-", "microsoft"), ("phi3", "microsoft"), ("phi4", "microsoft"),
    ("nova-", "amazon"), ("titan", "amazon"),
)
"""A piece of a model name that starts with the first element is a model of the second's making."""

AGENT_MODEL_FIELDS = ("agent_model", "model")
"""The trajectory metadata fields that name the agent's model, first found wins."""

_DATE = re.compile(r"(-|@)(\d{4}-\d{2}-\d{2}|\d{8}|latest)$")


@lru_cache(maxsize=1024)
def model_family(name: str) -> str:
    """The family of the model ``name`` (a judge pin or an agent's model), by the rule above."""
    lowered = name.strip().lower()
    for piece in reversed(re.split(r"[/.:]", lowered)):
        for prefix, maker in MAKERS:
            if piece.startswith(prefix) and not piece[len(prefix):len(prefix) + 1].isalpha():
                return maker
    return "model:" + _DATE.sub("", lowered.rsplit("/", 1)[-1])


def agent_model(metadata: Mapping[str, Any]) -> str | None:
    """The agent's model named in a trajectory's metadata (``AGENT_MODEL_FIELDS``), or None."""
    for name in AGENT_MODEL_FIELDS:
        value = metadata.get(name)
        if isinstance(value, str) and value.strip():
            return value
    return None


def same_family(judge_model: str, metadata: Mapping[str, Any]) -> str | None:
    """The family the judge ``judge_model`` shares with the agent of a trajectory (its
    ``metadata``), or None: another family, or no agent model named."""
    agent = agent_model(metadata)
    if agent is None:
        return None
    family = model_family(judge_model)
    return family if family == model_family(agent) else None
