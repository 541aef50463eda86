"""A project's defaults for the command line: the ``[tool.judgekit]`` table of ``pyproject.toml``.

    [tool.judgekit]
    suite = "evals/suite.yaml"            # SUITE of run, calibrate, label and safety
    history = ".judgekit/history.sqlite"  # --history, wherever a command has it
    cache-dir = ".judgekit/cache"         # --cache-dir, wherever a command has it

The table is the one in the nearest ``pyproject.toml`` that holds it, from the working
directory up (as ruff and pytest find theirs); its paths are relative to that file's folder.
The values become click's ``default_map``, so a value on the command line, or in an option's
environment variable (``JUDGEKIT_HISTORY``), wins. A table that is not one, a key judgekit does
not know and a value that is not a path are errors naming the file and the key; a
``pyproject.toml`` on the way up that is not valid TOML is an error naming it.
"""

from __future__ import annotations

from pathlib import Path

import click

from judgekit.errors import InputError

#: ``[tool.judgekit]`` key -> the parameter whose default it sets, as ``--help`` shows it: an
#: option's flag, or an argument's name (the ``--suite`` options, which pin or filter the suite
#: of records, are left alone).
KEYS = {"suite": "SUITE", "history": "--history", "cache-dir": "--cache-dir"}
MAX_BYTES = 1 << 20


def project_defaults(group: click.Group, start: Path) -> dict:
    """click's ``default_map`` for ``group`` from the ``[tool.judgekit]`` table found from
    ``start`` up ({} without one)."""
    found = find_settings(start)
    if found is None:
        return {}
    return _default_map(group, {KEYS[key]: str(path) for key, path in found[1].items()})


def find_settings(start: Path) -> tuple[Path, dict[str, Path]] | None:
    """The nearest ``pyproject.toml`` from ``start`` up holding ``[tool.judgekit]``, and its
    settings as absolute paths (None when no such file)."""
    for folder in (start, *start.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            table = _judgekit_table(candidate)
            if table is not None:
                return candidate, _settings(table, candidate)
    return None


def _judgekit_table(path: Path):
    import tomllib

    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_BYTES + 1)
    except OSError as exc:
        raise InputError(f"cannot read it: {exc.strerror}", path) from None
    if len(data) > MAX_BYTES:
        raise InputError(f"larger than {MAX_BYTES} bytes: not read", path)
    try:
        document = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise InputError(f"not valid TOML ({exc}); judgekit reads [tool.judgekit] from it", path) from None
    tool = document.get("tool")
    return tool.get("judgekit") if isinstance(tool, dict) else None


def _settings(table, path: Path) -> dict[str, Path]:
    if not isinstance(table, dict):
        raise InputError("[tool.judgekit] must be a table (suite, history, cache-dir)", path)
    settings: dict[str, Path] = {}
    for key, value in table.items():
        if key not in KEYS:
            raise InputError(f"[tool.judgekit] {key}: not a judgekit setting (known: {', '.join(KEYS)})", path)
        if not isinstance(value, str) or not value.strip() or "\0" in value:
            raise InputError(f"[tool.judgekit] {key}: must be a path (a non-empty string), not {value!r}", path)
        settings[key] = path.parent.absolute() / value
    return settings


def _default_map(command: click.Command, values: dict[str, str]) -> dict:
    """Each command's defaults among ``values`` (keyed as in ``KEYS``), nested by command as
    click's ``default_map`` is. An argument takes one only when it is its command's only
    argument: a default for one of several would shift the others."""
    if isinstance(command, click.Group):
        nested = {name: _default_map(sub, values) for name, sub in command.commands.items()}
        return {name: sub for name, sub in nested.items() if sub}
    arguments = [param for param in command.params if isinstance(param, click.Argument)]
    defaults = {}
    for param in command.params:
        if isinstance(param, click.Option):
            shown = [values[flag] for flag in param.opts if flag in values]
        else:
            shown = [values[param.human_readable_name]] if param.human_readable_name in values and arguments == [param] else []
        if shown:
            defaults[param.name] = shown[0]
    return defaults
