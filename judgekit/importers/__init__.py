"""Importers turn other tools' trajectories into judgekit files.

One module per foreign format. An importer is a function ``(src: Path, out: Path, **options)
-> list[Path]`` returning the files it wrote, which writes through ``ImportWriter`` (staged,
streamed, all-or-nothing, deterministic). The options it may take, by keyword: ``registered``
(a ``datetime.date``: the day its rubrics are registered on) and ``draft_rubric`` (bool). The
first line of its module's docstring, after ``judgekit import NAME:``, is its one-line
description in ``judgekit import --help``. An import that writes no suite may say what to do
with its files in its module's ``NEXT_STEP`` (formatted with ``out``); ``next_step`` says it.

Importers are found under the entry-point group ``judgekit.importers`` ("name =
module:function"); judgekit's own are registered there too, and listed here so that they work
from a source checkout whose metadata is stale. A third party cannot shadow a built-in name.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from importlib import import_module
from importlib.metadata import entry_points
from pathlib import Path

from judgekit.errors import InputError

Importer = Callable[..., list[Path]]

BUILTIN = {
    "openai-chat": "judgekit.importers.openai_chat:import_openai_chat",
    "tau-bench": "judgekit.importers.tau_bench:import_tau_bench",
    "llmbar": "judgekit.importers.llmbar:import_llmbar",
    "inspect": "judgekit.importers.inspect_ai:import_inspect",
    "otel-genai": "judgekit.importers.otel_genai:import_otel_genai",
    "tooltalk": "judgekit.importers.tooltalk:import_tooltalk",
    "bfcl": "judgekit.importers.bfcl:import_bfcl",
    "langsmith": "judgekit.importers.langsmith:import_langsmith",
}
ENTRY_POINT_GROUP = "judgekit.importers"
OPTIONS = ("registered", "draft_rubric")


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


def describe(name: str) -> str:
    """One line: what the importer reads (from its module's docstring)."""
    try:
        importer = get_importer(name)
    except Exception as exc:  # a broken third-party plugin must not break --help
        return f"(cannot be loaded: {type(exc).__name__})"
    doc = inspect.getdoc(inspect.getmodule(importer)) or inspect.getdoc(importer) or ""
    first = doc.strip().split("\n\n")[0].replace("\n", " ")
    return re.sub(r"^``judgekit import [^`]+``:\s*", "", first).strip()


def accepted_options(importer: Importer) -> set[str]:
    """Which of ``OPTIONS`` the importer takes."""
    parameters = inspect.signature(importer).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return set(OPTIONS)
    return {name for name in OPTIONS if name in parameters}


def next_step(importer: Importer, out: Path) -> str | None:
    """What to do with an import's files, in one line for people: run the suite in ``out``, or
    first fill in the rubric its ``suite.yaml`` leaves open, or what the importer's module says
    (``NEXT_STEP``); None when there is nothing to say."""
    from judgekit.importers._writer import SUITE_NAME
    from judgekit.suite import RUBRIC_PLACEHOLDER

    suite = out / SUITE_NAME
    if suite.is_file():
        if RUBRIC_PLACEHOLDER in _rubric_refs(suite):
            return (f"next: write a rubric and put its id in {suite} where it says {RUBRIC_PLACEHOLDER} (the "
                    f"comments there say how), then `judgekit run {out}`")
        return f"next: judgekit run {out}"
    step = getattr(inspect.getmodule(importer), "NEXT_STEP", None)
    return step.format(out=out) if step else None


def _rubric_refs(suite: Path) -> set[str]:
    """The rubric each trajectory entry of a suite file names, read as strictly and within the
    same bounds as any document (nothing, for a file that is not a suite)."""
    from judgekit._util.documents import parse_yaml
    from judgekit._util.io import MAX_DOCUMENT_BYTES, read_text

    try:
        _, data = parse_yaml(read_text(suite, max_bytes=MAX_DOCUMENT_BYTES, expected="a YAML document"), suite)
    except InputError:
        return set()
    entries = data.get("trajectories") if isinstance(data, dict) else None
    return {str(entry.get("rubric")) for entry in entries if isinstance(entry, dict)} if isinstance(entries, list) else set()
