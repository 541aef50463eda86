"""Rubric files: versioned, pre-registered criteria for each axis.

A rubric is YAML (or JSON) with ``id``, ``version`` (semver), ``registered`` (date) and one
section per axis it scores. Axes never mix: each section holds only its own criteria and its
own scoring guide, and each produces its own result record.
"""

from __future__ import annotations

import re
import types
import typing
from datetime import date
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator
from pydantic_core import PydanticCustomError

from judgekit._util.documents import load_document
from judgekit._util.io import Version1, sha256_json
from judgekit.rubric.regex import check_pattern
from judgekit.errors import InputError
from judgekit.judge.spec import JudgeSpec
from judgekit.world.keys import WorldKeys, check_pointer

RUBRIC_FORMAT_VERSION = 1

_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?$"
)
_RUBRIC_ID = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


class _Strict(BaseModel):
    # allow_inf_nan=False: YAML reads `"inf"` and `Infinity` as strings, which a float field would
    # otherwise turn into infinity; a rubric holds finite numbers only (its hash is JSON).
    model_config = ConfigDict(extra="forbid", populate_by_name=True, allow_inf_nan=False)


class Criteria(_Strict):
    """One axis's section of a rubric. A rubric field whose type is a ``Criteria`` (or None) is an
    axis, named after the field (``Rubric.axis_names``); every section has its scoring guide."""

    guide: str = Field(description="Scoring guide for people and judges; no version-bound language.")


# --- task success -----------------------------------------------------------------------------


class _PredicateBase(_Strict):
    collection: str = Field(
        description="SQLite: a table name. JSON: a JSON pointer to a list or object of records."
    )
    where: dict[str, Any] = Field(
        default_factory=dict, description="Field -> value every selected record must equal."
    )


class ExistsPredicate(_PredicateBase):
    """At least one record matches ``where``."""

    check: Literal["exists"]


class AbsentPredicate(_PredicateBase):
    """No record matches ``where``."""

    check: Literal["absent"]


class EqualsPredicate(_PredicateBase):
    """At least one record matches ``where`` and every one has ``field == value``."""

    check: Literal["equals"]
    field: str = Field(description="The field compared.")
    value: Any = Field(description="The value it must equal (JSON equality, 1 == 1.0).")


class MatchesPredicate(_PredicateBase):
    """At least one record matches ``where`` and every one's ``field`` matches ``pattern``."""

    check: Literal["matches"]
    field: str = Field(description="The field tested; it must be a string.")
    pattern: str = Field(
        description="A regular expression (Python syntax, matched by the regex package), matched in full; "
        "a match longer than 0.5 s, or all of a check's matches together longer than 2 s, makes the axis "
        "an error (never a pass or a fail). Nested counted repeats may multiply out to at most 100,000."
    )

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, pattern: str) -> str:
        check_pattern(pattern)
        return pattern


class CountPredicate(_PredicateBase):
    """The number of records matching ``where`` compares to ``value`` with ``op``."""

    check: Literal["count"]
    op: Literal["==", "!=", "<", "<=", ">", ">="] = Field("==", description="Comparison.")
    value: int = Field(ge=0, description="The count compared with.")


Predicate = Annotated[
    ExistsPredicate | AbsentPredicate | EqualsPredicate | MatchesPredicate | CountPredicate,
    Field(discriminator="check"),
]


class SideEffects(_Strict):
    allow: list[str] = Field(
        default_factory=list,
        description="Diff path patterns that may change ('users/*/email'; '*' is one segment, "
        "'**' any rest). Any other change in the end-state diff is an extra side effect.",
    )


class TaskSuccessCriteria(Criteria):
    """Did the world end up as asked? Pass only if every check passes."""

    guide: str = Field(description="Scoring guide for people and judges; no version-bound language.")
    preconditions: list[Predicate] = Field(
        default_factory=list, description="Predicates on the world before the run."
    )
    postconditions: list[Predicate] = Field(
        default_factory=list, description="Predicates on the world after the run."
    )
    side_effects: SideEffects | None = Field(
        None, description="When set, any change in the diff not allowed here fails the task."
    )
    max_latency_s: float | None = Field(None, gt=0, description="Fail when the run took longer.")
    required_outputs: list[str] = Field(
        default_factory=list,
        description="Values the answer must state (case-insensitive; thousands separators ignored).",
    )
    judge: bool = Field(
        False,
        description="Also ask the judge, from the task and the end-state diff, for criteria that "
        "predicates cannot express. The axis passes only if the checks and the judge pass.",
    )


# --- tool correctness -------------------------------------------------------------------------


NORMALIZATIONS = ("casefold", "remove_punctuation", "remove_whitespace", "collapse_whitespace", "strip")
"""The string normalisations an argument value may name, in the order they are applied."""
Normalization = Literal["casefold", "remove_punctuation", "remove_whitespace", "collapse_whitespace", "strip"]


class ArgumentValue(_Strict):
    """What one argument's value must be (judgekit.axes.arguments applies it)."""

    equals: Any = Field(
        None,
        description="The value it must equal (JSON equality: 1 == 1.0, true is not 1, objects in any key "
        "order). Not null: write any_of: [null] for that.",
    )
    any_of: list[Any] | None = Field(
        None, min_length=1, description="The acceptable values: it must equal one of them."
    )
    optional: bool = Field(
        False, description="Leaving the argument out is fine and earns the point; given, it must still hold."
    )
    tolerance: float | None = Field(
        None, ge=0,
        description="Numbers, at any depth, are equal when at most this far apart (absolute). Left out: "
        "numbers compare by value, exactly (the same as a tolerance of 0). Booleans are never numbers.",
    )
    normalize: list[Normalization] = Field(
        default_factory=list,
        description="Applied to every string, at any depth (object keys excepted), of both the value and "
        "the acceptable ones before comparing, always in this order whatever the order listed: casefold "
        "(Unicode case folding), remove_punctuation (every Unicode punctuation character, category P), "
        "remove_whitespace (every whitespace character), collapse_whitespace (each run of whitespace "
        "becomes one space), strip (leading and trailing whitespace).",
    )
    unordered: bool = Field(
        False, description="Lists, at any depth, compare as multisets: the same items, in any order."
    )

    @model_validator(mode="before")
    @classmethod
    def _equals_is_not_null(cls, data: Any) -> Any:
        # ``equals: null`` would dump (defaults left out) as no value at all: refused, not guessed.
        if isinstance(data, dict) and "equals" in data and data["equals"] is None:
            raise ValueError("equals: null cannot be told apart from no value; write any_of: [null]")
        return data

    @model_validator(mode="after")
    def _says_something(self) -> ArgumentValue:
        if self.equals is not None and self.any_of is not None:
            raise ValueError("give equals or any_of, not both")
        pinned = self.equals is not None or self.any_of is not None
        if not pinned and (self.tolerance is not None or self.normalize or self.unordered):
            raise ValueError("tolerance, normalize and unordered apply to equals or any_of: give one")
        if not pinned and not self.optional:
            raise ValueError("give equals, any_of or optional: true")
        if len(set(self.normalize)) != len(self.normalize):
            raise ValueError("normalize names a normalisation twice")
        return self

    def acceptable(self) -> list[Any]:
        """The acceptable values (``[equals]`` or ``any_of``); empty when only ``optional`` is set."""
        if self.any_of is not None:
            return self.any_of
        return [] if self.equals is None else [self.equals]


class ExpectedCall(_Strict):
    tool: str = Field(description="The tool that must be called.")
    args: dict[str, dict[str, Any] | bool] = Field(
        default_factory=dict,
        description="Argument name -> JSON Schema (2020-12) its value must satisfy; 1 point each. "
        "$ref may only name a place in the same schema ('#/$defs/NAME'): nothing is fetched.",
    )
    values: dict[str, ArgumentValue] = Field(
        default_factory=dict,
        description="Argument name -> the value it must have: equals or any_of, with optional, tolerance, "
        "normalize and unordered; 1 point each. An argument named here and in args is still one point, "
        "earned when both hold.",
    )

    @field_validator("args")
    @classmethod
    def _schemas_valid(cls, args: dict[str, Any]) -> dict[str, Any]:
        from judgekit.rubric.json_schema import SchemaProblem, check_schema

        for name, schema in args.items():
            try:
                check_schema(schema)
            except SchemaProblem as exc:
                raise ValueError(f"argument {name!r}: {exc}") from None
        return args

    def argument_names(self) -> list[str]:
        """Every argument that earns a point: those of ``args``, then those only in ``values``."""
        return [*self.args, *(name for name in self.values if name not in self.args)]


class Forbidden(_Strict):
    tools: list[str] = Field(default_factory=list, description="Tools that must not be called successfully.")
    effects: list[str] = Field(
        default_factory=list, description="Diff path patterns that must not change."
    )


class ToolCorrectnessCriteria(Criteria):
    """Right tools, valid arguments, the expected number of calls, no forbidden side effect."""

    guide: str = Field(description="Scoring guide; no version-bound language.")
    expected_calls: list[ExpectedCall] = Field(
        default_factory=list, description="The calls the task needs (1 point each for the right tool)."
    )
    in_scope: list[str] | None = Field(
        None,
        description="Tools whose calls are counted; calls to other tools are ignored. "
        "Default: every tool.",
    )
    ordered: bool = Field(False, description="Whether expected calls must happen in this order.")
    forbidden: Forbidden = Field(default_factory=Forbidden, description="Forbidden tools and effects.")
    tools: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="The tools' declared parameters: tool name -> a JSON Schema (2020-12) of its arguments "
        "object, as a function's `parameters` (`properties`, and `$defs` that they may refer to as "
        "'#/$defs/NAME'). An argument of a matched call is also checked against its property schema "
        "(unless it equals, exactly, a value the rubric pins); keys the declaration does not name, and "
        "declared arguments no point covers that are off their schema, are reported in the result's "
        "notes, never scored. `required` is not scored: expected arguments are.",
    )

    @field_validator("tools")
    @classmethod
    def _declarations_valid(cls, tools: dict[str, Any]) -> dict[str, Any]:
        from judgekit.rubric.json_schema import check_declaration

        for name, schema in tools.items():
            problem = check_declaration(schema)
            if problem is not None:
                raise ValueError(f"tool {name!r}: {problem}")
        return tools


# --- faithfulness -----------------------------------------------------------------------------


class FaithfulnessCriteria(Criteria):
    """Every claim in the output must be traced to a tool result or the given context."""

    guide: str = Field(description="Scoring guide for the judge; no version-bound language.")
    min_quote_chars: int = Field(
        8, ge=1, le=200,
        description="Shortest quote that counts as evidence (after whitespace and case normalisation). "
        "Shorter quotes count only when they are the whole evidence item or a value with a digit that "
        "the claim itself states.",
    )
    allow_no_claims: bool = Field(
        False,
        description="Outputs may make no claim: a judge listing none scores 1.0. Off: no claim for a "
        "non-empty output is unscored (no_claims).",
    )


# --- the world ----------------------------------------------------------------------------------


class RubricWorld(WorldKeys):
    """The world this rubric's trajectories act on: its kind, and how its JSON lists are diffed."""

    kind: Literal["json", "sqlite"] | None = Field(
        None,
        description="json: every collection is a JSON pointer ('/orders'), checked when the rubric loads; sqlite: "
        "every collection is a table name ('orders'). Left out: json when keys are given or a collection starts "
        "with '/', else not checked until the run reads the snapshots.",
    )

    @model_validator(mode="after")
    def _keys_are_json(self) -> RubricWorld:
        if self.kind == "sqlite" and self.keys:
            raise ValueError("keys apply to JSON worlds only; SQLite rows are matched by primary key (or rowid)")
        return self


def _collections_fit(rubric: Rubric) -> None:
    """Refuse a collection that cannot be right for the rubric's world: a malformed JSON pointer,
    a bare name in a JSON world, a pointer in a SQLite one, or both kinds mixed. The error says
    where (``at``, a location within the rubric, for the file's line)."""
    criteria = rubric.task_success
    if criteria is None:
        return
    found = [(("task_success", part, i, "collection"), p.collection)
             for part in ("preconditions", "postconditions") for i, p in enumerate(getattr(criteria, part))]
    declared = rubric.world.kind if rubric.world is not None else None
    kind = declared
    if kind is None and ((rubric.world is not None and rubric.world.keys)
                         or any(c == "" or c.startswith("/") for _, c in found)):
        kind = "json"
    why = "world.kind is json" if declared else "the rubric reads a JSON world: it has world.keys or a '/' collection"
    for at, collection in found:
        if kind == "json":
            try:
                check_pointer(collection)
            except PydanticCustomError as exc:
                raise PydanticCustomError("collection", "{problem} ({why})",
                                          {"problem": exc.message(), "why": why, "at": at}) from None
        elif kind == "sqlite" and (collection == "" or collection.startswith("/")):
            raise PydanticCustomError(
                "collection", "'{collection}' is a JSON pointer but world.kind is sqlite: name the table",
                {"collection": collection, "at": at})


# --- the rubric -------------------------------------------------------------------------------


class Rubric(_Strict):
    """A versioned rubric. Its canonical hash is what `judgekit rubric lock` freezes."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True, allow_inf_nan=False)
    _sha256: str | None = PrivateAttr(None)

    format_version: Version1 = Field(RUBRIC_FORMAT_VERSION, description="Rubric format version.")
    id: str = Field(description="Stable id: lowercase letters, digits, '.', '_', '-'.")
    version: str = Field(description="Semantic version; bump it whenever criteria change.")
    registered: date = Field(description="The day the criteria were written and frozen.")
    description: str = Field("", description="What the task is, for people.")
    task_success: TaskSuccessCriteria | None = Field(None, description="Task-success axis.")
    tool_correctness: ToolCorrectnessCriteria | None = Field(None, description="Tool-correctness axis.")
    faithfulness: FaithfulnessCriteria | None = Field(None, description="Faithfulness axis.")
    judge: JudgeSpec | None = Field(None, description="The judge for this rubric (overrides the suite's).")
    world: RubricWorld | None = Field(
        None, description="The world its trajectories act on: kind (json or sqlite) and the keys its JSON lists "
        "are matched by (they win over the suite's, a trajectory's own over both).")

    @field_validator("id")
    @classmethod
    def _id_shape(cls, value: str) -> str:
        if not _RUBRIC_ID.match(value):
            raise ValueError("must be lowercase letters, digits, '.', '_' or '-'")
        return value

    @field_validator("version")
    @classmethod
    def _semver(cls, value: str) -> str:
        if not _SEMVER.match(value):
            raise ValueError(f"{value!r} is not a semantic version (MAJOR.MINOR.PATCH)")
        return value

    @classmethod
    def axis_names(cls) -> tuple[str, ...]:
        """The axes a rubric of this model may score, in field order: its fields that hold a
        ``Criteria``. The one place the lower layers learn the axis names from; a new axis is
        one such field (and its module in ``judgekit.axes``)."""
        return _axis_fields(cls)

    @model_validator(mode="after")
    def _some_axis(self) -> Rubric:
        names = type(self).axis_names()
        if not any(getattr(self, axis) is not None for axis in names):
            raise ValueError("a rubric needs at least one axis section: " + ", ".join(names))
        _collections_fit(self)
        return self

    @property
    def ref(self) -> str:
        """``id@version``."""
        return f"{self.id}@{self.version}"

    def axes(self) -> list[str]:
        """The axes this rubric scores (those whose section it has)."""
        return [axis for axis in type(self).axis_names() if getattr(self, axis) is not None]

    def canonical(self) -> dict[str, Any]:
        """The canonical content: defaults left out, so adding an optional field to the format
        later does not change the hash of rubrics that do not use it. The judge's rate limit is
        left out too: it says how fast to ask, not what (a changed rate keeps every verdict)."""
        return self.model_dump(mode="json", by_alias=True, exclude_defaults=True, exclude={"judge": {"rate"}})

    def sha256(self) -> str:
        # Rubrics are frozen once loaded (pre-registered), so the hash is computed once. It is
        # read from pydantic's private store directly: it is read twice per verdict, and
        # ``self._sha256`` goes through BaseModel.__getattr__ (~8 us each time).
        private = self.__pydantic_private__
        if private["_sha256"] is None:
            private["_sha256"] = sha256_json(self.canonical())
        return private["_sha256"]

    def to_yaml(self) -> str:
        """The canonical content as YAML that reads back to this very rubric. Only ASCII is
        written (other characters as escapes): YAML reads a raw NEL or LINE SEPARATOR inside a
        quoted string as a line break, and the rubric read back would hash differently."""
        import yaml

        return yaml.safe_dump(self.canonical(), sort_keys=False, allow_unicode=False)

    def model_copy(self, *, update: dict[str, Any] | None = None, deep: bool = False) -> Rubric:
        copy = super().model_copy(update=update, deep=deep)
        copy._sha256 = None  # a copy with updates is other content
        return copy


@cache
def _axis_fields(cls: type[Rubric]) -> tuple[str, ...]:
    def holds_criteria(annotation: Any) -> bool:
        if isinstance(annotation, type):
            return issubclass(annotation, Criteria)
        if typing.get_origin(annotation) in (typing.Union, types.UnionType):
            return any(holds_criteria(arg) for arg in typing.get_args(annotation))
        return False

    return tuple(name for name, field in cls.model_fields.items() if holds_criteria(field.annotation))


AXES: tuple[str, ...] = Rubric.axis_names()
"""The built-in rubric's axes, in field order."""
Axis = Literal[AXES]  # type: ignore[valid-type]
"""An axis of the built-in rubric, as a type."""


def load_rubric(path: str | Path) -> Rubric:
    """Load one rubric file; errors name the file and line."""
    return load_document(path, Rubric)


RUBRIC_SUFFIXES = (".yaml", ".yml", ".json")


def rubric_files(paths: list[Path]) -> list[Path]:
    """Expand folders to the rubric files inside them (sorted, recursive). Anything there with a
    rubric's suffix but a folder is taken, so that a FIFO or a device named like a rubric is
    refused when read, never skipped without a word."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files.extend(sorted(p for p in path.rglob("*") if p.suffix in RUBRIC_SUFFIXES and not p.is_dir()))
        elif path.exists():
            files.append(path)
        else:
            raise InputError("rubric file or folder not found", path)
    return files


def load_rubrics(paths: list[Path]) -> tuple[dict[str, Rubric], dict[str, Path]]:
    """Load rubric files; two files claiming the same id@version is an error naming both."""
    rubrics: dict[str, Rubric] = {}
    files: dict[str, Path] = {}
    for path in rubric_files(paths):
        rubric = load_rubric(path)
        if rubric.ref in rubrics:
            raise InputError(f"{rubric.ref} is also claimed by {files[rubric.ref]}", path)
        rubrics[rubric.ref] = rubric
        files[rubric.ref] = path
    return rubrics, files
