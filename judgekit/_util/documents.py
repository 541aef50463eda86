"""YAML and JSON documents (rubrics, suites, scripts): read as JSON values, within bounds, with
the line of every problem.

YAML is read as JSON values only: strings, finite numbers, booleans, null, lists and mappings
with string keys. Dates stay the text they were written as, tags such as ``!!binary`` and
``!!set`` are refused, and aliases may not expand a document past ``MAX_YAML_NODES`` values (a
1 KB alias bomb would otherwise expand to billions), nest it deeper than ``MAX_DEPTH``, nor
refer to themselves. A ``.json`` document is parsed as strict JSON (YAML 1.1 would read its
``1e3`` as a string); YAML then only tells the lines.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from judgekit._util.io import (
    MAX_DOCUMENT_BYTES,
    describe_validation_error,
    error_loc,
    read_text,
)
from judgekit._util.strict_json import MAX_DEPTH, has_lone_surrogate, plain_error, strict_json_loads
from judgekit.errors import InputError

M = TypeVar("M", bound=BaseModel)

MAX_YAML_NODES = 500_000
"""Most values a YAML document may expand to, each alias counted as everything it repeats."""


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
            raise _refuse(f"cannot read this value: {plain_error(exc) if isinstance(exc, ValueError) else exc}", node) from None

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


def _json_document(text: str, path: Path) -> Any:
    """A ``.json`` document's JSON value, parsed strictly."""
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
    return data


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
    as_json = path.suffix.lower() == ".json"
    node, data = (None, _json_document(text, path)) if as_json else parse_yaml(text, path)
    if data is None:
        raise InputError("empty document", path, 1)
    if not isinstance(data, dict):
        raise InputError(f"expected a mapping at the top level, got {type(data).__name__}", path, 1)
    data.pop("$schema", None)  # editors use it for completion; it carries no meaning here
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        loc = error_loc(exc.errors()[0])
        if as_json:  # composed only now: YAML gives a JSON document its line numbers
            node = _nodes_only(text)
        raise InputError(describe_validation_error(exc), path, _node_line(node, loc)) from None
