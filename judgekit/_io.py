"""Reading the files judgekit takes: JSON Lines streams and YAML/JSON documents.

Every failure becomes an ``InputError`` naming the file and the 1-based line, never a
traceback. JSON Lines files are read one line at a time, never whole.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from judgekit.errors import InputError

M = TypeVar("M", bound=BaseModel)


def describe_validation_error(err: ValidationError) -> str:
    """One readable sentence for the first problem pydantic found (plus a count of others)."""
    errors = err.errors()
    first = errors[0]
    loc = ".".join(str(part) for part in first["loc"]) or "(top level)"
    message = first["msg"]
    if first["type"] == "extra_forbidden":
        message = "unknown key"
    more = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
    return f"{loc}: {message}{more}"


def no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # json.loads would keep the last of two equal keys without a word, silently losing data.
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r} in an object")
        result[key] = value
    return result


def reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def strict_json_loads(text: str) -> Any:
    """json.loads that refuses duplicate keys and NaN/Infinity (ValueError) instead of
    silently keeping the last key or writing the constant out as null later."""
    return json.loads(text, object_pairs_hook=no_duplicate_keys, parse_constant=reject_constant)


def iter_jsonl(path: str | Path, model: type[M]) -> Iterator[tuple[int, M]]:
    """Yield ``(line_number, record)`` for each non-blank line of a JSON Lines file."""
    path = Path(path)
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise unreadable(exc, path) from None
    with handle:
        # Bytes line by line, decoded one line at a time, so an error names its own line.
        for line_no, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise InputError("not UTF-8 text", path, line_no) from None
            if not line.strip():
                continue
            try:
                data = strict_json_loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"invalid JSON: {exc.msg} (column {exc.colno})", path, line_no) from None
            except (ValueError, RecursionError) as exc:
                raise InputError(f"invalid JSON: {exc or 'nested too deeply'}", path, line_no) from None
            try:
                yield line_no, model.model_validate(data)
            except ValidationError as exc:
                raise InputError(describe_validation_error(exc), path, line_no) from None


def unreadable(exc: OSError, path: Path, expected: str = "a file") -> InputError:
    """The one-line error for a file that cannot be opened."""
    if isinstance(exc, FileNotFoundError):
        return InputError("file not found", path)
    if isinstance(exc, IsADirectoryError):
        return InputError(f"is a folder, expected {expected}", path)
    return InputError(f"cannot read: {exc.strerror}", path)


def read_text(path: str | Path) -> str:
    path = Path(path)
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InputError("not UTF-8 text", path) from None
    except OSError as exc:
        raise unreadable(exc, path) from None


def find_node(node: yaml.Node | None, loc: tuple[Any, ...]) -> yaml.Node | None:
    """The YAML node at ``loc`` (mapping keys and sequence indexes), or None."""
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            node = next((v for k, v in node.value if k.value == str(part)), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
        else:
            return None
    return node


def compose(path: str | Path) -> yaml.Node | None:
    """The YAML node tree of a file (for line numbers); None when it does not parse."""
    try:
        return yaml.compose(read_text(path), Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return None


def _node_line(node: yaml.Node | None, loc: tuple[Any, ...]) -> int | None:
    """Follow a pydantic error location through the YAML node tree; return the deepest line.

    Parts that name no key are skipped rather than ending the walk: pydantic puts the
    discriminator's tag (``...postconditions.0.exists.field``) in locations of tagged unions.
    """
    if node is None:
        return None
    line = node.start_mark.line + 1
    for part in loc:
        child = None
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                if key_node.value == str(part):
                    child = value_node
                    line = key_node.start_mark.line + 1
                    break
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            child = node.value[part]
            line = child.start_mark.line + 1
        if child is not None:
            node = child
    return line


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice in one mapping (it would keep the last)."""

    def construct_mapping(self, node, deep=False):
        seen: dict[Any, yaml.Node] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} is given twice (first on line {seen[key].start_mark.line + 1})",
                    key_node.start_mark,
                )
            seen[key] = key_node
        return super().construct_mapping(node, deep=deep)


def load_document(path: str | Path, model: type[M]) -> M:
    """Load a YAML (or JSON, which is YAML) document into ``model``; errors carry file:line."""
    path = Path(path)
    text = read_text(path)
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        raise InputError(f"YAML syntax error: {exc.problem or exc.context}", path, line) from None
    except yaml.YAMLError as exc:
        raise InputError(f"YAML error: {exc}", path) from None
    if data is None:
        raise InputError("empty document", path, 1)
    if not isinstance(data, dict):
        raise InputError(f"expected a mapping at the top level, got {type(data).__name__}", path, 1)
    data.pop("$schema", None)  # editors use it for completion; it carries no meaning here
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        loc = exc.errors()[0]["loc"]
        raise InputError(describe_validation_error(exc), path, _node_line(node, loc)) from None


def canonical_json(value: Any) -> str:
    """The one canonical JSON form used for hashes and byte-identical output."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def sha256_json(value: Any) -> str:
    """sha256 of the canonical JSON of ``value``: the one way judgekit hashes content.

    surrogatepass: a lone surrogate (a cut emoji) is valid JSON and must hash, not crash.
    """
    import hashlib

    return hashlib.sha256(canonical_json(value).encode("utf-8", "surrogatepass")).hexdigest()
