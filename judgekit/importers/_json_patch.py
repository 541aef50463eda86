"""RFC 6902 JSON Patch, replayed one change at a time (the Inspect importer's store changes).

Pointers are RFC 6901 (``judgekit.world.snapshot.parse_pointer``: ``~1`` is ``/``, ``~0`` is ``~``); a
list index is ASCII digits without a leading zero, and ``-`` (past the end) only where a value
is added. A missing ``value`` is null (Inspect writes without nulls), ``from_`` is read as
``from`` (Inspect's field name), ``test`` compares JSON values (``1`` is not ``true``).
``copy`` is the one operation that can grow a document faster than the log that holds it
(copying the root into itself doubles it): what copies add is bounded by ``max_growth``.
"""

from __future__ import annotations

import copy
from typing import Any

from judgekit.world.json_equality import json_equal
from judgekit.world.snapshot import parse_pointer


class PatchError(ValueError):
    pass


def json_size(value: Any, limit: int) -> int:
    """About how many bytes ``value`` takes as JSON, counted no further than past ``limit``."""
    total, stack = 0, [value]
    while stack and total <= limit:
        node = stack.pop()
        if isinstance(node, dict):
            total += 2 + sum(len(key) + 4 for key in node)
            stack.extend(node.values())
        elif isinstance(node, list):
            total += 2 + len(node)
            stack.extend(node)
        else:
            total += len(node) + 2 if isinstance(node, str) else 8
    return total


class Patch:
    """A document changed by one ``apply`` after another (``doc`` is the result so far)."""

    def __init__(self, doc: Any, *, max_growth: int):
        self.doc = doc
        self.growth_left = max_growth
        self.max_growth = max_growth

    def apply(self, change: dict[str, Any]) -> None:
        op, path = change.get("op"), parse_pointer(pointer(change, "path"))
        value = change.get("value")
        doc = self.doc
        if op == "add":
            doc = _add(doc, path, value)
        elif op == "remove":
            doc = _remove(doc, path)[0]
        elif op == "replace":
            _get(doc, path)
            doc = _add(_remove(doc, path)[0], path, value) if path else value
        elif op in ("move", "copy"):
            source = parse_pointer(pointer(change, "from"))
            if op == "move":
                doc, moved = _remove(doc, source)
            else:
                moved = self._copied(_get(doc, source))
            doc = _add(doc, path, moved)
        elif op == "test":
            if not json_equal(_get(doc, path), value):
                raise PatchError("test failed: the value differs")
        else:
            raise PatchError(f"unknown op {op!r}")
        self.doc = doc

    def _copied(self, value: Any) -> Any:
        self.growth_left -= json_size(value, self.growth_left)
        if self.growth_left < 0:
            raise PatchError(f"copies add more than {self.max_growth} bytes to the document")
        return copy.deepcopy(value)


def pointer(change: dict[str, Any], key: str) -> str:
    # Inspect's JsonChange names the field from_ (alias "from"); logs hold either spelling.
    pointer = change.get(key, change.get("from_")) if key == "from" else change.get(key)
    if not isinstance(pointer, str):
        raise PatchError(f"no {key!r} JSON pointer")
    return pointer


def _container(doc: Any, tokens: list[str]) -> tuple[Any, str]:
    """The object or list holding the last token's place, and that token."""
    for token in tokens[:-1]:
        doc = _child(doc, token)
    if not isinstance(doc, (dict, list)):
        raise PatchError("its parent is not an object or a list")
    return doc, tokens[-1]


def _index(items: list[Any], token: str, *, end_ok: bool) -> int:
    if token == "-" and end_ok:
        return len(items)
    valid = token.isascii() and token.isdigit() and (token == "0" or not token.startswith("0"))
    if not valid or int(token) > len(items) - (0 if end_ok else 1):
        raise PatchError(f"no list index {token!r}")
    return int(token)


def _child(doc: Any, token: str) -> Any:
    if isinstance(doc, dict) and token in doc:
        return doc[token]
    if isinstance(doc, list):
        return doc[_index(doc, token, end_ok=False)]
    raise PatchError(f"nothing at {token!r}")


def _get(doc: Any, tokens: list[str]) -> Any:
    for token in tokens:
        doc = _child(doc, token)
    return doc


def _add(doc: Any, tokens: list[str], value: Any) -> Any:
    if not tokens:
        return value
    parent, token = _container(doc, tokens)
    if isinstance(parent, list):
        parent.insert(_index(parent, token, end_ok=True), value)
    else:
        parent[token] = value
    return doc


def _remove(doc: Any, tokens: list[str]) -> tuple[Any, Any]:
    if not tokens:
        raise PatchError("cannot remove the whole document")
    parent, token = _container(doc, tokens)
    if isinstance(parent, list):
        return doc, parent.pop(_index(parent, token, end_ok=False))
    if token not in parent:
        raise PatchError(f"nothing at {token!r}")
    return doc, parent.pop(token)
