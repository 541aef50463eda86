"""Importers turn other tools' trajectories into judgekit files.

One module per foreign format. An importer is a function ``(src: Path, out: Path) -> list[Path]``
returning the files it wrote. Third parties register theirs under the entry-point group
``judgekit.importers``; built-ins are listed here the same way, as "module:function".
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from importlib.metadata import entry_points
from pathlib import Path

from judgekit.errors import InputError

Importer = Callable[[Path, Path], list[Path]]

BUILTIN = {
    "openai-chat": "judgekit.importers.openai_chat:import_openai_chat",
    "tau-bench": "judgekit.importers.tau_bench:import_tau_bench",
    "llmbar": "judgekit.importers.llmbar:import_llmbar",
}
ENTRY_POINT_GROUP = "judgekit.importers"


def _registry() -> dict[str, str]:
    found = {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}
    return {**found, **BUILTIN}  # built-ins cannot be shadowed


def importer_names() -> list[str]:
    return sorted(_registry())


def get_importer(name: str) -> Importer:
    target = _registry().get(name)
    if target is None:
        raise InputError(f"unknown import format {name!r}; known: {', '.join(importer_names())}")
    module, _, attr = target.partition(":")
    return getattr(import_module(module), attr)
