"""The one argument matcher of tool correctness: JSON Schema, value expectations, declarations.

Each argument an expected call names (in ``args``, in ``values`` or in both) is one point. For
the call matched to it, the checks run in this order and the first that fails is the reason the
point is lost:

1. presence: absent loses the point ("argument missing") unless ``values.NAME.optional``, which
   earns it ("absent, which the rubric allows");
2. the rubric's JSON Schema, ``args.NAME`` ("off-schema: ...");
3. the value expectation, ``values.NAME``: equal to ``equals`` or to one of ``any_of``, with
   the rules below ("value ... is not ...");
4. the tool's declared property schema, ``tools.TOOL.properties.NAME`` ("off the declared schema
   of TOOL: ..."), except for a value equal, exactly (JSON equality, no normalisation or
   tolerance), to one the rubric pins: an ``equals``/``any_of`` value, or the ``const`` of an
   ``args`` schema that is just ``{"const": V}``. The pre-registered rubric is the more specific
   of the two, and ground truths do pin values their tool does not declare (BFCL pins a
   variable name for an array argument, a lower-case word outside an enum).

Equality is JSON equality as ``judgekit.world.json_equality`` defines it, the one the end-state
diff, the predicates and a schema's ``const`` use: numbers by value (``1 == 1.0``), booleans
never numbers, strings by code points, arrays in order, objects by the same keys in any order.
An expectation's rules change it at every depth of the value:

- ``tolerance: t``: two numbers are equal when they are JSON-equal or ``|a - b| <= t``,
  computed in floating point (exactly for an int past float range), so a tolerance of 0 is
  JSON equality, as none is;
- ``normalize``: strings (not object keys) are compared after the normalisations named, applied
  in the fixed order ``judgekit.rubric.model.NORMALIZATIONS``: casefold (Unicode case folding),
  remove_punctuation (every character of Unicode category P: ``. , ; : ! ? ' " - _ / ( ) [ ]
  { } @ # % & * \\``; symbols such as ``$ + < = > ^ ` | ~`` stay), remove_whitespace,
  collapse_whitespace (each run becomes one space), strip;
- ``unordered``: arrays compare as multisets (the same items, each as often, in any order).

Reported, never scored (the result's ``notes``), for each matched call to a tool the rubric
declares: argument keys its declaration does not name and no point covers; keys below that
(inside an object whose schema lists ``properties``); declared arguments no point covers whose
value is off their schema. A key counts as declared where any schema that applies to its object
lists it: the keywords beside a ``$ref`` and those of its target alike; none is reported where
one may declare keys otherwise (``patternProperties``, ``additionalProperties`` or
``unevaluatedProperties`` other than false, ``allOf``/``anyOf``/``oneOf``, ``if``/``then``/
``else``, ``dependentSchemas``, a ``$ref`` not into ``$defs``). At most MAX_NOTES per call, the
last saying how many more.

Speed: the plan of each criteria (per expected call and argument: its schema, its compiled value
matcher, its declared schema) is built once and cached by the identity of the criteria object,
which is frozen with its rubric, as ``judgekit.rubric.json_schema`` caches its checkers. A value
matcher without tolerance compares hashable keys: one set lookup among the acceptable values.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from judgekit.axes._values import ValueMatcher
from judgekit.rubric.regex import spend
from judgekit.errors import InputError
from judgekit.results import ToolNote
from judgekit.rubric.model import ExpectedCall, ToolCorrectnessCriteria

FirstError = Callable[[Any, Any], "str | None"]
Verdict = tuple[str, bool, str, bool]
"""(argument, point earned, reason, the value is one the rubric pins exactly)."""
MAX_NOTES = 20
"""Most notes kept for one call (the last one counts the rest)."""

# --- plans ---------------------------------------------------------------------------------------


class Declaration:
    """A tool's declared parameters, ready to check arguments against."""

    def __init__(self, tool: str, schema: dict[str, Any]):
        self.tool = tool
        self.defs = schema.get("$defs") if isinstance(schema.get("$defs"), dict) else None
        properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        # A property schema is applied alone, with the root's $defs beside it for its refs. Built
        # once per criteria and kept: the checker cache of judgekit.rubric.json_schema is by identity.
        self.properties = {name: self._alone(prop) for name, prop in properties.items()}
        chain, lost = _chain(schema, self.defs)
        # Argument keys may be declared beyond ``properties`` (a $ref, allOf, patternProperties...):
        # then a key it does not list is not reported (a note must never be wrong).
        self.declares_others = lost or len(chain) > 1 or any(map(_declares_others, chain))

    def _alone(self, prop: Any) -> Any:
        if self.defs is None or not isinstance(prop, dict):
            return prop
        return {**prop, "$defs": self.defs}


class Argument:
    """One expected argument: its point's checks."""

    __slots__ = ("name", "schema", "const_pin", "value", "declared", "tool", "earned")

    def __init__(self, name: str, expected: ExpectedCall, declaration: Declaration | None):
        self.name = name
        self.tool = expected.tool
        self.schema = expected.args.get(name)
        self.const_pin = isinstance(self.schema, dict) and len(self.schema) == 1 and "const" in self.schema
        self.value = ValueMatcher(expected.values[name]) if name in expected.values else None
        self.declared = declaration.properties.get(name) if declaration is not None else None
        checked = (["valid against its schema"] if self.schema is not None else []) + (
            ["an acceptable value"] if self.value is not None and not self.value.accepts_any else [])
        self.earned = " and ".join(checked) or "given"

    def verdict(self, args: dict[str, Any], first_error: FirstError) -> Verdict:
        name = self.name
        if name not in args:
            if self.value is not None and self.value.optional:
                return name, True, "absent, which the rubric allows (optional)", False
            return name, False, "argument missing", False
        value = args[name]
        exact = False
        if self.schema is not None:
            problem = first_error(self.schema, value)
            if problem is not None:
                return name, False, f"off-schema: {problem}", False
            exact = self.const_pin
        if self.value is not None:
            ok, pinned = self.value.check(value)
            if not ok:
                return name, False, self.value.mismatch(value), False
            exact = exact or pinned
        if self.declared is not None and not exact:
            problem = first_error(self.declared, value)
            if problem is not None:
                return name, False, f"off the declared schema of {self.tool}: {problem}", False
            return name, True, f"{self.earned} and valid against the declared schema of {self.tool}", False
        return name, True, self.earned, exact


class CallPlan:
    """What one expected call checks in the call matched to it."""

    __slots__ = ("tool", "names", "arguments", "declaration", "tool_point", "arg_points")

    def __init__(self, expected: ExpectedCall, declaration: Declaration | None, position: int = 0):
        self.tool = expected.tool
        self.names = expected.argument_names()
        self.arguments = [Argument(name, expected, declaration) for name in self.names]
        self.declaration = declaration
        # The names of its points, the same in every result: "call[0] update_user: tool", ...
        self.tool_point = f"call[{position}] {self.tool}: tool"
        self.arg_points = [f"call[{position}] {self.tool}: arg {name}" for name in self.names]

    def verdicts(self, args: dict[str, Any], first_error: FirstError) -> list[Verdict]:
        """A Verdict for each expected argument, in the rubric's order."""
        verdicts: list[Verdict] = []
        try:
            for argument in self.arguments:
                verdicts.append(argument.verdict(args, first_error))
        except RecursionError:
            raise InputError(f"expected call to {self.tool}, argument {self.names[len(verdicts)]!r}: "
                             "the value is nested too deeply to compare") from None
        except InputError as exc:  # past its time bound: the point can be neither earned nor lost
            raise InputError(f"expected call to {self.tool}, argument {self.names[len(verdicts)]!r}: {exc}") from None
        return verdicts


MAX_CACHED_PLANS = 4096
_plans: dict[int, tuple[ToolCorrectnessCriteria, list[CallPlan]]] = {}  # id(criteria) -> (criteria, plans)
_plans_lock = threading.Lock()


def plans_for(criteria: ToolCorrectnessCriteria) -> list[CallPlan]:
    """The plans of ``criteria``'s expected calls, built on first use (see the module docstring)."""
    entry = _plans.get(id(criteria))
    if entry is not None and entry[0] is criteria:
        return entry[1]
    declarations = {tool: Declaration(tool, schema) for tool, schema in criteria.tools.items()}
    plans = [CallPlan(expected, declarations.get(expected.tool), position)
             for position, expected in enumerate(criteria.expected_calls)]
    with _plans_lock:
        while len(_plans) >= MAX_CACHED_PLANS:
            del _plans[next(iter(_plans))]
        _plans[id(criteria)] = (criteria, plans)
    return plans


# --- notes ---------------------------------------------------------------------------------------


def _pointer(path: list[str | int]) -> str:
    return "/".join(str(part).replace("~", "~0").replace("/", "~1") for part in path)


_DECLARE_OTHERS = ("patternProperties", "allOf", "anyOf", "oneOf", "if", "then", "else", "dependentSchemas")


def _declares_others(schema: dict[str, Any]) -> bool:
    """Whether ``schema`` may declare keys of an object that its ``properties`` do not list."""
    return any(key in schema for key in _DECLARE_OTHERS) or any(
        schema.get(key) not in (None, False) for key in ("additionalProperties", "unevaluatedProperties"))


def _chain(schema: Any, defs: dict[str, Any] | None) -> tuple[list[dict[str, Any]], bool]:
    """(``schema`` and the schemas its $ref leads to in the declaration's $defs, each of which
    applies, whether a $ref led somewhere not followed here)."""
    chain: list[dict[str, Any]] = []
    while isinstance(schema, dict) and len(chain) <= len(defs or ()):  # the declaration has no $ref loop
        chain.append(schema)
        ref = schema.get("$ref")
        if ref is None:
            return chain, False
        if not (isinstance(ref, str) and ref.startswith("#/$defs/") and defs is not None):
            return chain, True
        schema = defs.get(ref.removeprefix("#/$defs/").replace("~1", "/").replace("~0", "~"))
    return chain, True


def _undeclared_below(schemas: list[Any], value: Any, path: list[str | int], defs: dict[str, Any] | None,
                      found: list[str]) -> None:
    """Append the paths of keys below ``value`` that none of ``schemas`` (which all apply to it)
    declares."""
    spend("argument declaration")
    parts: list[dict[str, Any]] = []
    unknown = False
    for schema in schemas:
        chain, lost = _chain(schema, defs)
        parts += chain
        unknown = unknown or lost
    if isinstance(value, dict):
        listed = [part["properties"] for part in parts if isinstance(part.get("properties"), dict)]
        if not listed:
            return
        opened = unknown or any(map(_declares_others, parts))
        for key, item in value.items():
            below = [properties[key] for properties in listed if key in properties]
            if below:
                _undeclared_below(below, item, [*path, key], defs, found)
            elif not opened:
                found.append(_pointer([*path, key]))
    elif isinstance(value, list):
        below = [part["items"] for part in parts if isinstance(part.get("items"), dict)]
        if below:
            for index, item in enumerate(value):
                _undeclared_below(below, item, [*path, index], defs, found)


def call_notes(plan: CallPlan, index: int, args: dict[str, Any], verdicts: list[Verdict],
               first_error: FirstError) -> list[ToolNote]:
    """The notes on the call #``index`` matched to ``plan``'s expected call, whose ``verdicts``
    these are (see the module docstring); none when the rubric does not declare that tool.
    Nothing is reported below a value the rubric pins exactly: it named that very value."""
    declaration = plan.declaration
    if declaration is None:
        return []
    pinned_names = [verdict[0] for verdict in verdicts if verdict[3]]
    if len(pinned_names) == len(args):  # each argument given is one the rubric pins exactly
        return []
    tool = declaration.tool
    found: list[tuple[str, str]] = []
    covered = plan.names
    pinned = set(pinned_names)
    for name, value in args.items():
        if name in pinned:
            continue
        declared = declaration.properties.get(name)
        if declared is None:
            if name not in covered and not declaration.declares_others:
                found.append((_pointer([name]), f"not declared by {tool} (reported, not scored)"))
            continue
        if name not in covered:
            try:
                problem = first_error(declared, value)
            except InputError as exc:
                problem = f"could not be checked: {exc}"
            if problem is not None:
                found.append((_pointer([name]), f"off the declared schema of {tool}: {problem} (reported, not scored)"))
        below: list[str] = []
        _undeclared_below([declared], value, [name], declaration.defs, below)
        found.extend((path, f"not declared by {tool} (reported, not scored)") for path in below)
    notes = [ToolNote(call=index, tool=tool, arg=arg, reason=reason) for arg, reason in found[:MAX_NOTES]]
    if len(found) > MAX_NOTES:
        notes[-1] = ToolNote(call=index, tool=tool, arg=notes[-1].arg,
                             reason=f"{notes[-1].reason}; and {len(found) - MAX_NOTES + 1} more such note(s)")
    return notes
