"""Argument schemas from rubrics: checked at load, applied with no network and bounded regexes.

A rubric's JSON Schemas (``tool_correctness.expected_calls[].args``) come from files a pull
request may bring, and they are applied to what the agent sent. Deterministic scoring must not
depend on anything outside the pre-registered rubric, so:

- ``$ref`` may only name a place in the same schema (``#`` or ``#/$defs/...``): a ref to a URL
  or a file would fetch a document the lock does not cover. Refs are resolved at load, so a
  dangling ref, a ref that names something other than a schema, or refs that loop without
  consuming data (``{"$ref": "#"}``) are load errors. Keywords that change how refs resolve
  (``$id``, ``$anchor``, ``$dynamicRef``...) are refused.
- Validators get a registry that refuses to retrieve anything, whatever slips past the check.
- ``pattern``, ``patternProperties`` and ``additionalProperties`` (which reads the patterns) run
  through ``judgekit.rubric.regex`` with its time bound.
- Time grows with the agent's data, never worse than the schema makes it: validating one
  argument runs within ``judgekit.rubric.regex.check_budget`` (every keyword checks the deadline, so
  a recursive ``anyOf`` over a deeply nested value stops), ``uniqueItems`` is checked in linear
  time (jsonschema compares unsortable items pairwise), and ``unevaluatedItems`` /
  ``unevaluatedProperties``, whose jsonschema implementation is quadratic in the size of the
  value, are refused at load.
"""

from __future__ import annotations

import json
import threading
from functools import lru_cache
from typing import Any
from urllib.parse import unquote

from jsonschema import Draft202012Validator, SchemaError, ValidationError, validators
from referencing import Registry
from referencing.exceptions import NoSuchResource

try:  # the comparison the const keyword makes (1 == 1.0, True != 1, lists and objects by content)
    from jsonschema._utils import equal as _json_equal
except ImportError:  # another jsonschema layout: const goes through iter_errors like any keyword
    _json_equal = None

import judgekit.rubric.regex as _regex
from judgekit._util.io import canonical_json
from judgekit.errors import InputError

DIALECT = "https://json-schema.org/draft/2020-12/schema"
_REFUSED = ("$id", "$anchor", "$dynamicRef", "$dynamicAnchor", "$recursiveRef", "$recursiveAnchor")
_QUADRATIC = ("unevaluatedItems", "unevaluatedProperties")
# Subschemas applied to the same value (a loop through these alone never ends)...
_IN_PLACE_ONE = ("not", "if", "then", "else")
_IN_PLACE_LIST = ("allOf", "anyOf", "oneOf")
_IN_PLACE_MAP = ("dependentSchemas",)
# ...and subschemas applied to a part of it (or only named for refs: $defs).
_PART_ONE = ("additionalProperties", "unevaluatedProperties", "items", "additionalItems", "unevaluatedItems",
             "contains", "propertyNames")
_PART_LIST = ("prefixItems", "items")
_PART_MAP = ("properties", "patternProperties", "$defs", "definitions")


class SchemaProblem(ValueError):
    """An argument schema judgekit will not apply."""


def _pointer_tokens(fragment: str) -> list[str]:
    if fragment == "":
        return []
    if not fragment.startswith("/"):
        raise SchemaProblem(f"$ref '#{fragment}' is an anchor; name a place as '#/$defs/NAME'")
    return [unquote(token).replace("~1", "/").replace("~0", "~") for token in fragment[1:].split("/")]


def _resolve(root: Any, ref: Any) -> tuple[str, Any]:
    """(canonical pointer, schema) that a local ``$ref`` names."""
    if not isinstance(ref, str):
        raise SchemaProblem(f"$ref must be a string, got {json.dumps(ref)[:60]}")
    if not ref.startswith("#"):
        raise SchemaProblem(f"$ref {ref!r} would read another document; only refs into the same schema "
                            "('#/$defs/NAME') are allowed, so the locked rubric is all that scores")
    node = root
    tokens = _pointer_tokens(ref[1:])
    for token in tokens:
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            raise SchemaProblem(f"$ref {ref!r} names nothing in this schema")
    if not isinstance(node, (dict, bool)):
        raise SchemaProblem(f"$ref {ref!r} names a {type(node).__name__}, not a schema")
    return "/" + "/".join(token.replace("~", "~0").replace("/", "~1") for token in tokens) if tokens else "", node


def _edges(pointer: str, node: dict[str, Any]) -> list[tuple[str, Any, bool]]:
    """(pointer, subschema, in place) for every subschema a schema object applies or names."""
    out: list[tuple[str, Any, bool]] = []

    def add(key: str, value: Any, in_place: bool, kind: str) -> None:
        where = f"{pointer}/{key}"
        if kind == "one":
            out.append((where, value, in_place))
        elif kind == "list" and isinstance(value, list):
            out.extend((f"{where}/{i}", item, in_place) for i, item in enumerate(value))
        elif kind == "map" and isinstance(value, dict):
            out.extend((f"{where}/{name.replace('~', '~0').replace('/', '~1')}", item, in_place)
                       for name, item in value.items())

    for key, value in node.items():
        if key in _IN_PLACE_ONE:
            add(key, value, True, "one")
        elif key in _IN_PLACE_LIST:
            add(key, value, True, "list")
        elif key in _IN_PLACE_MAP:
            add(key, value, True, "map")
        elif key in _PART_LIST and isinstance(value, list):
            add(key, value, False, "list")
        elif key in _PART_ONE:
            add(key, value, False, "one")
        elif key in _PART_MAP:
            add(key, value, False, "map")
    return out


def check_schema(schema: Any) -> None:
    """SchemaProblem (with the reason) unless ``schema`` is a valid 2020-12 schema that judgekit
    can apply offline and in bounded time."""
    if not isinstance(schema, (dict, bool)):
        raise SchemaProblem(f"a JSON Schema is an object or a boolean, not a {type(schema).__name__}")
    if isinstance(schema, dict) and schema.get("$schema", DIALECT) != DIALECT:
        raise SchemaProblem(f"$schema {schema['$schema']!r}: argument schemas are JSON Schema 2020-12 ({DIALECT})")
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        raise SchemaProblem(f"invalid JSON Schema: {exc.message}") from None
    except (OverflowError, RecursionError) as exc:  # re.compile of 'x{4294967295}' in the format check
        raise SchemaProblem(f"invalid JSON Schema: {type(exc).__name__}: {exc}") from None

    in_place: dict[str, list[str]] = {}  # pointer -> pointers applied to the same value
    stack: list[tuple[str, Any]] = [("", schema)]
    seen: set[str] = set()
    while stack:
        pointer, node = stack.pop()
        if pointer in seen or not isinstance(node, dict):
            continue
        seen.add(pointer)
        for key in _REFUSED:
            if key in node:
                raise SchemaProblem(f"{key} is not supported in argument schemas (at '#{pointer}'): "
                                    "name shared parts in $defs and refer to them as '#/$defs/NAME'")
        for key in _QUADRATIC:
            if key in node:
                raise SchemaProblem(f"{key} is not supported in argument schemas (at '#{pointer}'): checking it takes "
                                    "time quadratic in the argument's size; use additionalProperties or items")
        patterns = [node["pattern"]] if isinstance(node.get("pattern"), str) else []
        if isinstance(node.get("patternProperties"), dict):
            patterns += list(node["patternProperties"])
        for pattern in patterns:  # checked as rubric patterns are: compiled now, in bounded time
            try:
                _regex.check_pattern(pattern)
            except ValueError as exc:
                raise SchemaProblem(f"pattern {pattern[:80]!r} at '#{pointer}': {exc}") from None
        if "$schema" in node and pointer:
            raise SchemaProblem(f"$schema may only appear at the top of an argument schema (found at '#{pointer}')")
        successors = in_place.setdefault(pointer, [])
        if "$ref" in node:
            target, resolved = _resolve(schema, node["$ref"])
            successors.append(target)
            stack.append((target, resolved))
        for where, child, same_value in _edges(pointer, node):
            if same_value:
                successors.append(where)
            stack.append((where, child))
    _refuse_loops(in_place)


def _refuse_loops(in_place: dict[str, list[str]]) -> None:
    """A cycle of refs and in-place keywords would validate the same value forever."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for start in in_place:
        if start in state:
            continue
        stack: list[tuple[str, int]] = [(start, 0)]
        state[start] = 1
        while stack:
            pointer, index = stack.pop()
            successors = in_place.get(pointer, [])
            if index < len(successors):
                stack.append((pointer, index + 1))
                nxt = successors[index]
                if state.get(nxt) == 1:
                    raise SchemaProblem(f"'#{nxt}' refers back to itself without descending into the value "
                                        "(a $ref loop): it would never finish validating")
                if nxt not in state:
                    state[nxt] = 1
                    stack.append((nxt, 0))
            else:
                state[pointer] = 2


# --- applying ------------------------------------------------------------------------------------


def _pattern(validator, pattern, instance, schema):
    if validator.is_type(instance, "string") and not _regex.search(pattern, instance, what="schema pattern"):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator, pattern_properties, instance, schema):
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in pattern_properties.items():
        for name, value in instance.items():
            if _regex.search(pattern, name, what="schema patternProperties"):
                yield from validator.descend(value, subschema, path=name, schema_path=pattern)


def _additional_properties(validator, additional, instance, schema):
    if not validator.is_type(instance, "object"):
        return
    properties = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    extras = [name for name in instance if name not in properties
              and not any(_regex.search(p, name, what="schema patternProperties") for p in patterns)]
    if validator.is_type(additional, "object"):
        for name in extras:
            yield from validator.descend(instance[name], additional, path=name)
    elif not additional and extras:
        shown = ", ".join(repr(name) for name in sorted(extras))
        yield ValidationError(f"Additional properties are not allowed ({shown} {'was' if len(extras) == 1 else 'were'} unexpected)")


def _json_key(value: Any) -> Any:
    """A hashable stand-in equal exactly when jsonschema's ``equal`` says so: 1 == 1.0, but
    True is not 1, and objects and arrays compare by content."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, str):
        return ("str", value)
    if isinstance(value, list):
        return ("list", tuple(_json_key(item) for item in value))
    if isinstance(value, dict):
        return ("object", frozenset((name, _json_key(item)) for name, item in value.items()))
    return ("value", value)  # numbers (1 and 1.0 hash alike) and null


def _unique_items(validator, unique, instance, schema):
    if not unique or not validator.is_type(instance, "array"):
        return
    seen: set[Any] = set()
    for index, item in enumerate(instance):
        key = _json_key(item)
        if key in seen:
            yield ValidationError(f"item {index} repeats an earlier item ({json.dumps(item)[:80]}): items must be unique")
            return
        seen.add(key)


def _timed(keyword):
    """A keyword that first checks the argument's time budget (see the module docstring)."""

    def check(validator, value, instance, schema):
        _regex.spend("argument schema")
        # Returned, not re-yielded: no extra frame per level of a deep value while it iterates.
        return keyword(validator, value, instance, schema)

    return check


def _no_retrieval(uri: str):
    raise NoSuchResource(ref=uri)


_KEYWORDS = {
    **Draft202012Validator.VALIDATORS,
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "additionalProperties": _additional_properties,
    "uniqueItems": _unique_items,
}
_Validator = validators.extend(Draft202012Validator, {name: _timed(keyword) for name, keyword in _KEYWORDS.items()})
_OFFLINE = Registry(retrieve=_no_retrieval)


@lru_cache(maxsize=4096)
def _validator(schema_json: str) -> Any:
    # Built from the canonical JSON, keys sorted: which error comes first follows the keyword
    # order, so two schemas that differ only in key order report the same first error.
    return _Validator(json.loads(schema_json), registry=_OFFLINE)


MAX_CACHED_SCHEMAS = 4096
"""Most schema objects whose checker is kept (each entry holds its schema, so ids stay unique)."""
_checkers: dict[int, tuple[Any, Any]] = {}  # id(schema) -> (schema, checker)
_checkers_lock = threading.Lock()


def _checker(schema: Any) -> Any:
    """``instance -> first error message or None`` for a rubric's schema object.

    Cached by the identity of the schema object (rubrics are frozen once loaded, and each is
    applied to every trajectory of its suite), so the canonical JSON is built once per schema
    rather than once per argument checked. The entry keeps the schema alive, so its id cannot
    be reused by another object while the entry exists; at most MAX_CACHED_SCHEMAS are kept.
    """
    entry = _checkers.get(id(schema))
    if entry is not None and entry[0] is schema:
        return entry[1]
    validator = _validator(canonical_json(schema))
    checker = _const_checker(validator) or _general_checker(validator)
    with _checkers_lock:
        while len(_checkers) >= MAX_CACHED_SCHEMAS:
            del _checkers[next(iter(_checkers))]  # the oldest entry
        _checkers[id(schema)] = (schema, checker)
    return checker


def _general_checker(validator: Any) -> Any:
    def first(instance: Any) -> str | None:
        error = next(validator.iter_errors(instance), None)
        return None if error is None else error.message

    return first


def _const_checker(validator: Any) -> Any:
    """For ``{"const": VALUE}`` alone (how importers pin an argument to its ground truth): what
    ``iter_errors`` would do, without its generators. The keyword's time check first, then the
    comparison jsonschema's const keyword makes; its message names only the expected value, so
    it is jsonschema's own, taken once from the keyword."""
    schema = validator.schema
    if _json_equal is None or not isinstance(schema, dict) or len(schema) != 1 or "const" not in schema:
        return None
    value = schema["const"]
    message = next(iter(Draft202012Validator.VALIDATORS["const"](validator, value, _NEVER_EQUAL, schema))).message
    # Where VALUE holds no boolean and no number 0 or 1, Python's == says equal only where JSON
    # equality does (it says more only where a boolean meets a number equal to it: True == 1),
    # and it compares without a Python call per level: an equal argument is accepted by it. Any
    # other comparison is the validator's (a tuple built in code equals a list there, not here).
    plain = not _holds_bool_or_unit(value)

    def first(instance: Any) -> str | None:
        _regex.spend("argument schema")
        if plain and instance == value:
            return None
        return None if _json_equal(instance, value) else message

    return first


def _holds_bool_or_unit(value: Any) -> bool:
    """Whether ``value`` holds, at any depth, a boolean or a number equal to 0 or 1."""
    if isinstance(value, dict):
        return any(map(_holds_bool_or_unit, value.values()))
    if isinstance(value, list):
        return any(map(_holds_bool_or_unit, value))
    return isinstance(value, (bool, int, float)) and value in (0, 1)


class _NeverEqual:
    def __eq__(self, other: object) -> bool:
        return False

    __hash__ = None  # type: ignore[assignment]


_NEVER_EQUAL = _NeverEqual()


def first_error(schema: Any, instance: Any) -> str | None:
    """The first reason ``instance`` fails ``schema`` (None when it is valid). A pattern past its
    time bound (RegexTimeout) or a value too deep to validate is an InputError: the point can
    be neither earned nor lost."""
    with _regex.check_budget():
        return first_error_within_budget(schema, instance)


def first_error_within_budget(schema: Any, instance: Any) -> str | None:
    """``first_error`` for a caller already inside ``judgekit.rubric.regex.check_budget()`` (a nested
    budget keeps the outer one, so entering it again per argument would change nothing)."""
    try:
        return _checker(schema)(instance)
    except RecursionError:
        raise InputError("an argument is nested too deeply to validate against its schema") from None


# --- declarations, checked at load ---------------------------------------------------------------
#
# A suite may declare a thousand tools (BFCL does), and a metaschema validation costs a couple of
# milliseconds whatever the schema's size. So a declaration is checked in parts that repeat from
# tool to tool: its shell (everything but ``properties`` and ``required``), then each property
# schema without its annotations (``description``, ``title``, ``$comment``, ``default``,
# ``examples``, which are checked by hand here). Each part is checked once per process, cached by
# its canonical JSON; what the whole would refuse, a part refuses.

_ANNOTATIONS_TEXT = ("description", "title", "$comment")
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SCHEMA_ONE = ("items", "additionalProperties", "additionalItems", "not", "if", "then", "else", "contains",
               "propertyNames")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems", "items")


def _without_annotations(node: Any) -> Any:
    """``node`` (a schema) without annotations at any depth; ValueError for one of the wrong type."""
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _ANNOTATIONS_TEXT:
            if not isinstance(value, str):
                raise ValueError(f"invalid JSON Schema: {key} must be a string, not {json.dumps(value)[:40]}")
        elif key == "examples":
            if not isinstance(value, list):
                raise ValueError("invalid JSON Schema: examples must be an array")
        elif key == "default":
            continue
        elif key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {name: _without_annotations(item) for name, item in value.items()}
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            out[key] = [_without_annotations(item) for item in value]
        elif key in _SCHEMA_ONE:
            out[key] = _without_annotations(value)
        else:
            out[key] = value
    return out


@lru_cache(maxsize=8192)
def _schema_problem(schema_json: str) -> str | None:
    try:
        check_schema(json.loads(schema_json))
    except SchemaProblem as exc:
        return str(exc)
    return None


def _part_problem(schema: Any, annotations_too: bool = False) -> str | None:
    try:
        part = schema if annotations_too else _without_annotations(schema)
    except ValueError as exc:
        return str(exc)
    return _schema_problem(canonical_json(part))


def _refs(node: Any) -> list[Any]:
    if isinstance(node, dict):
        return ([node["$ref"]] if "$ref" in node else []) + [ref for item in node.values() for ref in _refs(item)]
    if isinstance(node, list):
        return [ref for item in node for ref in _refs(item)]
    return []


def check_declaration(schema: Any) -> str | None:
    """Why ``schema`` cannot be a tool's declared parameters, or None when it can."""
    if not isinstance(schema, dict):
        return f"a tool's declaration is a JSON Schema object, not a {type(schema).__name__}"
    properties, required = schema.get("properties", {}), schema.get("required", [])
    if not isinstance(properties, dict):
        return "properties must be an object: argument name -> JSON Schema"
    if not isinstance(required, list) or not all(isinstance(name, str) for name in required) \
            or len(set(required)) != len(required):
        return "required must be a list of distinct argument names"
    problem = _part_problem({key: value for key, value in schema.items() if key not in ("properties", "required")})
    if problem is not None:
        return problem
    defs = schema.get("$defs")
    for name, prop in properties.items():
        if isinstance(prop, dict) and "$schema" in prop:
            return f"property {name!r}: $schema may only appear at the top of the declaration"
        refs = _refs(prop)
        if not refs:
            problem = _part_problem(prop)
        elif bad := [ref for ref in refs if not (isinstance(ref, str) and ref.startswith("#/$defs/"))]:
            problem = (f"$ref {bad[0]!r} must name '#/$defs/NAME' of the declaration (each property "
                       "schema is applied alone, with the declaration's $defs)")
        elif isinstance(prop, dict) and "$defs" in prop:
            problem = "put its $defs in the declaration's $defs"
        else:
            problem = _part_problem({**prop, "$defs": defs} if isinstance(prop, dict) and defs is not None else prop,
                                    annotations_too=True)
        if problem is not None:
            return f"property {name!r}: {problem}"
    return None
