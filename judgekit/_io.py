"""Reading the files judgekit takes: JSON Lines streams and YAML/JSON documents.

Everything read is hostile until checked. Every failure becomes an ``InputError`` naming the
file and the 1-based line, never a traceback or a hang:

- only regular files are read (a FIFO, ``/dev/zero`` or a folder is refused before any read),
  and documents are bounded in bytes;
- JSON is parsed strictly: duplicate keys, NaN/Infinity, numbers that overflow to infinity
  (``1e999``), lone surrogates (``"\\ud800"``, which no UTF-8 file can hold) and nesting deeper
  than ``MAX_DEPTH`` are refused;
- YAML is read as JSON values only: strings, finite numbers, booleans, null, lists and mappings
  with string keys. Dates stay the text they were written as, tags such as ``!!binary`` and
  ``!!set`` are refused, and aliases may not expand a document past ``MAX_YAML_NODES`` values
  (a 1 KB alias bomb would otherwise expand to billions), nest it deeper than ``MAX_DEPTH``,
  nor refer to themselves.
- A ``.json`` document is read as JSON (strictly, as above), not as YAML: YAML 1.1 reads
  JSON's ``1e3`` or ``1e-05`` as strings. YAML only gives it line numbers.

JSON Lines files are read one line at a time, never whole.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from judgekit.errors import InputError

M = TypeVar("M", bound=BaseModel)

MAX_DEPTH = 200
"""Deepest nesting of lists and objects accepted in any JSON or YAML input."""
MAX_DOCUMENT_BYTES = 8 * 2**20
"""Largest YAML/JSON document (rubric, suite, lock, approval...) read whole."""
MAX_FILE_BYTES = 1024 * 2**20
"""Largest file read whole (importer sources)."""
MAX_LINE_BYTES = 256 * 2**20
"""Longest line of a JSON Lines file."""
MAX_YAML_NODES = 500_000
"""Most values a YAML document may expand to, each alias counted as everything it repeats."""

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


def finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e999: JSON allows the digits, a double cannot hold them
        raise ValueError(f"the number {text[:40]} is too large to represent (it would become infinity)")
    return value


# A JSON \u escape of a UTF-16 surrogate: text read from a file can only hold a lone surrogate
# through one. Text handed over as ``str`` (a judge's reply, decoded by the HTTP client) may
# also hold the code point itself.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_SURROGATE = re.compile("[\ud800-\udfff]")


def has_lone_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def check_tree(value: Any, *, max_depth: int = MAX_DEPTH, surrogates: bool = True) -> None:
    """ValueError when ``value`` nests deeper than ``max_depth`` or, with ``surrogates``, holds a
    string (or key) with a lone surrogate. Iterative: a deep value cannot exhaust the stack."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            if depth >= max_depth:
                raise ValueError(f"nested more than {max_depth} levels deep")
            for key, item in node.items():
                if surrogates and isinstance(key, str) and has_lone_surrogate(key):
                    raise ValueError(f"the key {key!r} holds a lone surrogate (a cut character), which is not text")
                stack.append((item, depth + 1))
        elif isinstance(node, list):
            if depth >= max_depth:
                raise ValueError(f"nested more than {max_depth} levels deep")
            stack.extend((item, depth + 1) for item in node)
        elif surrogates and isinstance(node, str) and has_lone_surrogate(node):
            raise ValueError(f"the string {node[:60]!r} holds a lone surrogate (a cut character), which is not text")


def _plain(exc: ValueError) -> str:
    """Python's message for an integer past its digit limit advises a Python setting: say what
    is wrong with the input instead."""
    if "integer string conversion" in str(exc):
        return f"an integer with more than {sys.get_int_max_str_digits()} digits is too large to read"
    return str(exc)


def strict_json_loads(text: str | bytes, *, max_depth: int = MAX_DEPTH) -> Any:
    """json.loads that refuses (ValueError) what it would otherwise accept silently: duplicate
    keys (it keeps the last), NaN/Infinity and numbers that overflow to infinity, lone
    surrogates, and nesting deeper than ``max_depth`` (or deep enough to exhaust the stack)."""
    try:
        data = json.loads(
            text, object_pairs_hook=no_duplicate_keys, parse_constant=reject_constant, parse_float=finite_float
        )
    except RecursionError:
        raise ValueError(f"nested more than {max_depth} levels deep") from None
    except ValueError as exc:
        if isinstance(exc, json.JSONDecodeError):
            raise
        raise ValueError(_plain(exc)) from None
    raw_surrogate = False
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    elif not text.isascii():  # isascii is O(1): most text never needs the scan
        raw_surrogate = _SURROGATE.search(text) is not None
    # Cheap filters first: fewer brackets than the limit cannot nest past it, and only an
    # escape (or, in a str, the code point itself) can make a lone surrogate.
    deep = text.count("[") + text.count("{") > max_depth
    surrogates = raw_surrogate or ("\\u" in text and _SURROGATE_ESCAPE.search(text) is not None)
    if deep or surrogates:
        check_tree(data, max_depth=max_depth, surrogates=surrogates)
    return data


def open_regular_file(path: str | Path, *, max_bytes: int | None = None, expected: str = "a file") -> BinaryIO:
    """Open a regular file for reading, or raise InputError naming it.

    Opened without blocking, then checked on the open descriptor (no window between check and
    read): a FIFO, a device such as ``/dev/zero``, a socket or a folder is refused, and so is
    a file larger than ``max_bytes``.
    """
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise unreadable(exc, path, expected) from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise InputError(f"is a folder, expected {expected}", path)
        if not stat.S_ISREG(info.st_mode):
            raise InputError(f"not a regular file (a device, FIFO or socket), expected {expected}", path)
        if max_bytes is not None and info.st_size > max_bytes:
            raise InputError(f"is {info.st_size} bytes, more than the {max_bytes} allowed for {expected}", path)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def iter_jsonl(path: str | Path, model: type[M]) -> Iterator[tuple[int, M]]:
    """Yield ``(line_number, record)`` for each non-blank line of a JSON Lines file."""
    path = Path(path)
    with open_regular_file(path, expected="a JSON Lines file") as handle:
        # Bytes line by line, decoded one line at a time, so an error names its own line.
        line_no = 0
        while raw := handle.readline(MAX_LINE_BYTES + 1):
            line_no += 1
            if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                raise InputError(f"line longer than {MAX_LINE_BYTES} bytes", path, line_no)
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
            except ValueError as exc:
                raise InputError(f"invalid JSON: {exc}", path, line_no) from None
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


def read_bytes(path: str | Path, *, max_bytes: int = MAX_FILE_BYTES, expected: str = "a file") -> bytes:
    """The whole of a regular file of at most ``max_bytes``."""
    path = Path(path)
    with open_regular_file(path, max_bytes=max_bytes, expected=expected) as handle:
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:  # grew while being read
        raise InputError(f"is more than the {max_bytes} bytes allowed for {expected}", path)
    return data


def read_text(path: str | Path, *, max_bytes: int = MAX_FILE_BYTES, expected: str = "a file") -> str:
    path = Path(path)
    try:
        return read_bytes(path, max_bytes=max_bytes, expected=expected).decode("utf-8")
    except UnicodeDecodeError:
        raise InputError("not UTF-8 text", path) from None


def read_json(path: str | Path, *, max_bytes: int = MAX_DOCUMENT_BYTES, expected: str = "a JSON document") -> Any:
    """A JSON document, parsed strictly; errors name the file and the line."""
    path = Path(path)
    text = read_text(path, max_bytes=max_bytes, expected=expected)
    try:
        return strict_json_loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON: {exc.msg} (column {exc.colno})", path, exc.lineno) from None
    except ValueError as exc:  # from the strict hooks; the decoder does not say where
        raise InputError(f"invalid JSON: {exc}", path) from None


def load_json_model(path: str | Path, model: type[M], *, max_bytes: int = MAX_DOCUMENT_BYTES, expected: str | None = None) -> M:
    """A JSON file judgekit wrote (run record, approval, lock) as ``model``, or InputError."""
    path = Path(path)
    expected = expected or f"a {model.__name__} JSON file"
    data = read_json(path, max_bytes=max_bytes, expected=expected)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise InputError(f"not {expected}: {describe_validation_error(exc)}", path) from None


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


def _refuse(message: str, node: yaml.Node) -> yaml.constructor.ConstructorError:
    return yaml.constructor.ConstructorError(None, None, message, node.start_mark)


class _JsonValuesLoader(yaml.SafeLoader):
    """A SafeLoader that builds JSON values only, within bounds (see the module docstring)."""

    def __init__(self, stream: str):
        super().__init__(stream)
        self._depth = 0
        self._keys_checked: set[int] = set()

    def compose_node(self, parent, index):
        # Composing recurses once per level: bound the depth before the stack runs out.
        event = self.peek_event()
        if self._depth >= MAX_DEPTH and not isinstance(event, yaml.AliasEvent):
            raise yaml.composer.ComposerError(None, None, f"nested more than {MAX_DEPTH} levels deep", event.start_mark)
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_object(self, node, deep=False):
        try:
            return super().construct_object(node, deep=deep)
        except (ValueError, TypeError, OverflowError) as exc:  # e.g. an integer of 5,000 digits
            raise _refuse(f"cannot read this value: {_plain(exc) if isinstance(exc, ValueError) else exc}", node) from None

    def construct_mapping(self, node, deep=False):
        self._check_keys(node)
        self.flatten_mapping(node)  # merge keys (<<): a key written here overrides a merged one
        return super().construct_mapping(node, deep=deep)

    def _check_keys(self, node: yaml.MappingNode) -> None:
        """Every key written in this mapping, and in the mappings it merges (<<), is a string
        written once. Checked before merging, once per node: merging copies keys in, and a key
        written beside ``<<`` legitimately overrides the merged one (as YAML says)."""
        if id(node) in self._keys_checked:
            return
        self._keys_checked.add(id(node))
        seen: dict[str, yaml.Node] = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                sources = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
                for source in sources:
                    if isinstance(source, yaml.MappingNode):
                        self._check_keys(source)
                continue  # flatten_mapping refuses anything else to merge
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, str):
                shown = key_node.value if isinstance(key_node, yaml.ScalarNode) else type(key).__name__
                raise _refuse(
                    f"the key {shown!r} is not a string (YAML reads yes/no/on/off, numbers and null as "
                    "other types): quote it", key_node,
                )
            if key in seen:
                raise _refuse(f"key {key!r} is given twice (first on line {seen[key].start_mark.line + 1})", key_node)
            seen[key] = key_node

    def construct_yaml_str(self, node):
        value = super().construct_yaml_str(node)
        if has_lone_surrogate(value):
            # YAML decodes each \uXXXX on its own: a JSON-style pair ("\ud83d\ude00", how
            # json.dumps writes an emoji) arrives as two halves. Join pairs; refuse what is left.
            try:
                value = value.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
            except UnicodeDecodeError:
                raise _refuse("this string holds a lone surrogate (a cut character), which is not text", node) from None
        return value

    def construct_yaml_float(self, node):
        value = super().construct_yaml_float(node)
        if not math.isfinite(value):
            raise _refuse(f"{node.value!r} is not a finite number (NaN and infinities are not JSON values)", node)
        return value

    def construct_yaml_timestamp(self, node):
        # A date stays the text it was written as: `2024-05-01` and "2024-05-01" are one value.
        return self.construct_scalar(node)

    def construct_not_json(self, node):
        raise _refuse(f"the YAML tag {node.tag!r} is not allowed: these files hold JSON values only", node)


for _tag in ("binary", "set", "omap", "pairs"):
    _JsonValuesLoader.add_constructor(f"tag:yaml.org,2002:{_tag}", _JsonValuesLoader.construct_not_json)
_JsonValuesLoader.add_constructor("tag:yaml.org,2002:str", _JsonValuesLoader.construct_yaml_str)
_JsonValuesLoader.add_constructor("tag:yaml.org,2002:float", _JsonValuesLoader.construct_yaml_float)
_JsonValuesLoader.add_constructor("tag:yaml.org,2002:timestamp", _JsonValuesLoader.construct_yaml_timestamp)


def _check_expansion(root: yaml.Node) -> None:
    """Refuse a node graph that aliases expand past MAX_YAML_NODES values or nest deeper than
    MAX_DEPTH (an alias inside an alias inside...: composing bounds only the text's own
    nesting), or that refers to itself. Each distinct node is measured once (memoised), so a
    bomb costs its own size."""
    sizes: dict[int, int] = {}
    depths: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            open_nodes.discard(key)
            children = _children(node)
            sizes[key] = 1 + sum(sizes[id(child)] for child in children)
            if sizes[key] > MAX_YAML_NODES:
                raise _refuse(f"this document expands to more than {MAX_YAML_NODES} values (YAML aliases "
                              "repeat what they name): write it out or simplify it", node)
            depths[key] = 1 + max((depths[id(child)] for child in children), default=0)
            if depths[key] > MAX_DEPTH:
                raise _refuse(f"this value nests more than {MAX_DEPTH} levels deep once its aliases are "
                              "expanded", node)
            continue
        if key in sizes:
            continue
        if key in open_nodes:
            raise _refuse("an alias refers to a node that contains it (a recursive structure)", node)
        open_nodes.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in sizes)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def parse_yaml(text: str, path: str | Path) -> tuple[yaml.Node | None, Any]:
    """The node tree (for line numbers) and the JSON value of one YAML document."""
    try:
        # The reader checks the whole text when it is made: a control character such as DEL,
        # valid in JSON, is a ReaderError here, never a crash.
        loader = _JsonValuesLoader(text)
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1
        shown = f"U+{exc.character:04X}" if isinstance(exc.character, int) else repr(exc.character)
        raise InputError(f"YAML error: the character {shown} is not allowed in YAML (write it as an escape in a "
                         "double-quoted string)", path, line) from None
    try:
        node = loader.get_single_node()
        if node is None:
            return None, None
        _check_expansion(node)
        return node, loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        raise InputError(f"YAML syntax error: {exc.problem or exc.context}", path, line) from None
    except yaml.YAMLError as exc:
        raise InputError(f"YAML error: {exc}", path) from None
    except RecursionError:  # bounded above; a safety net all the same
        raise InputError(f"YAML error: nested more than {MAX_DEPTH} levels deep", path) from None
    finally:
        loader.dispose()


def compose(path: str | Path) -> yaml.Node | None:
    """The YAML node tree of a file (for line numbers); None when it does not parse."""
    try:
        return parse_yaml(read_text(path, max_bytes=MAX_DOCUMENT_BYTES, expected="a YAML document"), path)[0]
    except InputError:
        return None


def _json_document(text: str, path: Path) -> tuple[yaml.Node | None, Any]:
    """A ``.json`` document's JSON value, parsed strictly, and its YAML node tree when YAML can
    read it too (for the line numbers of validation errors)."""
    try:
        data = strict_json_loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON: {exc.msg} (column {exc.colno})", path, exc.lineno) from None
    except ValueError as exc:  # the strict hooks do not say where; YAML, reading it too, often does
        try:
            parse_yaml(text, path)
            line = None
        except InputError as yaml_error:
            line = yaml_error.line
        raise InputError(f"invalid JSON: {exc}", path, line) from None
    return _nodes_only(text), data


def _nodes_only(text: str) -> yaml.Node | None:
    """The YAML node tree of a text, composed only (no values built), or None when YAML will
    not read it (valid JSON may hold a tab between tokens, or a control character)."""
    try:
        loader = _JsonValuesLoader(text)
    except yaml.YAMLError:
        return None
    try:
        return loader.get_single_node()
    except (yaml.YAMLError, RecursionError):
        return None
    finally:
        loader.dispose()


def load_document(path: str | Path, model: type[M]) -> M:
    """Load a YAML or JSON document into ``model``; errors carry file:line."""
    path = Path(path)
    text = read_text(path, max_bytes=MAX_DOCUMENT_BYTES, expected="a YAML or JSON document")
    node, data = _json_document(text, path) if path.suffix.lower() == ".json" else parse_yaml(text, path)
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
