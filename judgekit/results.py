"""Result records: one per trajectory and axis. Axes never share a record or a score."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
    model_validator,
)
from pydantic_core import core_schema

from judgekit._util.io import Version1, RECORD_CONFIG
from judgekit.verdict import Provenance, UnscoredReason

RESULT_FORMAT_VERSION = 1


class _Strict(BaseModel):
    model_config = RECORD_CONFIG


def _record(cls):
    """A leaf of a result (one check, point, note, claim, the counts): a slotted dataclass, made
    in a tenth of a pydantic model's time on the scoring path (a run makes a dozen per
    trajectory). judgekit's scorers fill them with the right types; pydantic validates them,
    extra keys refused, wherever a result is read back, and writes them in the same JSON.
    Each field says ``strict=True`` itself: a strict config would also refuse the leaf as a JSON
    object (it asks for an instance of the dataclass)."""
    cls.__pydantic_config__ = ConfigDict(extra="forbid", allow_inf_nan=False)
    return dataclass(slots=True)(cls)


@_record
class CheckOutcome:
    """One task-success check and why it passed or failed."""

    check: Annotated[str, Field(strict=True, description="Which check: precondition[i], postcondition[i], side_effects, latency, output[i].")]
    passed: Annotated[bool, Field(strict=True, description="Whether the check passed.")]
    reason: Annotated[str, Field(strict=True, description="Why, in one sentence a person can verify.")]
    source: Annotated[Literal["deterministic", "judge"], Field(description="Who decided it.")] = "deterministic"


class _AxisResultBase(_Strict):
    status: Literal["scored", "unscored", "error"] = Field(
        "scored",
        description="'unscored': the judge gave no valid verdict (see unscored_reason); 'error': bad "
        "input. Neither is ever pass or fail.",
    )
    source: Literal["deterministic", "judge"] = Field("deterministic", description="Who scored it.")
    error: str | None = Field(None, description="Why the axis could not be scored.")
    unscored_reason: UnscoredReason | None = Field(None, description="Why the judge's verdict is missing.")
    judge: Provenance | None = Field(None, description="Provenance of the judge verdict, when a judge took part.")

    @model_validator(mode="after")
    def _scored_has_its_value(self):
        # A record read back (gate, label --verdicts) may be hand-made: "scored" without a value
        # would be no measurement at all.
        if self.status == "scored":
            missing = [name for name in _value_fields(type(self)) if getattr(self, name) is None]
            if missing:
                raise ValueError(f"a scored result needs its {' and '.join(missing)}")
        return self


@cache
def _value_fields(cls: type[BaseModel]) -> tuple[str, ...]:
    """The fields of an axis result a scored one must fill (looked up once per class)."""
    return tuple(name for name in ("score", "passed") if name in cls.model_fields)


class TaskSuccessResult(_AxisResultBase):
    """Binary: did the world end up as asked?"""

    axis: Literal["task_success"] = "task_success"
    passed: bool | None = Field(None, description="Pass only if every check passed; None when not scored.")
    score: float | None = Field(None, ge=0, le=1, description="1.0 for pass, 0.0 for fail.")
    checks: list[CheckOutcome] = Field(default_factory=list, description="Each check with its reason.")


@_record
class ToolPoint:
    """One pre-registered point and whether it was earned."""

    point: Annotated[str, Field(strict=True, description="Which point, e.g. 'call[0] update_user: tool' or 'call[0] update_user: arg email'.")]
    earned: Annotated[bool, Field(strict=True, description="Whether it was earned.")]
    reason: Annotated[str, Field(strict=True, description="Why, in one sentence.")]


@_record
class ToolNote:
    """Something a matched call did that no point covers: reported, never scored."""

    call: Annotated[int, Field(strict=True, description="Index of the call in the trajectory.")]
    tool: Annotated[str, Field(strict=True, description="The tool it called.")]
    arg: Annotated[str, Field(strict=True, description="The argument: its name, or a path below it for a nested key ('flights/0/seat').")]
    reason: Annotated[str, Field(strict=True, description="What was seen: a key the tool does not declare, or a value off its declared schema.")]


@_record
class ToolCounts:
    """Raw counts behind the tool-correctness score."""

    calls_total: Annotated[int, Field(strict=True, description="Every call in the trajectory.")]
    calls_failed: Annotated[int, Field(strict=True, description="Calls that returned an error (they changed nothing).")]
    calls_in_scope: Annotated[int, Field(strict=True, description="Successful calls to tools in scope.")]
    calls_expected: Annotated[int, Field(strict=True, description="Calls the rubric expects.")]
    calls_matched: Annotated[int, Field(strict=True, description="Expected calls matched by a successful call to the right tool.")]
    args_expected: Annotated[int, Field(strict=True, description="Argument points available.")]
    args_valid: Annotated[int, Field(strict=True, description="Argument points earned.")]
    forbidden_hits: Annotated[int, Field(strict=True, description="Forbidden tool calls plus forbidden effects in the diff.")]


class ToolCorrectnessResult(_AxisResultBase):
    """Points earned over points available, exactly as pre-registered."""

    axis: Literal["tool_correctness"] = "tool_correctness"
    score: float | None = Field(None, ge=0, le=1, description="points / max_points; None when not scored.")
    points: int = Field(0, description="Points earned.")
    max_points: int = Field(0, description="Points available.")
    counts: ToolCounts | None = Field(None, description="Raw counts.")
    items: list[ToolPoint] = Field(default_factory=list, description="Every point, earned or lost, with why.")
    notes: list[ToolNote] = Field(
        default_factory=list,
        description="What matched calls did that no point covers (keys their tool does not declare, "
        "unscored arguments off their declared schema): reported, never scored. Left out when empty.",
    )

    @model_serializer(mode="wrap")
    def _notes_only_when_any(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Results without notes are written exactly as before notes existed.
        data = handler(self)
        if not self.notes:
            data.pop("notes", None)
        return data

    @property
    def lost(self) -> list[ToolPoint]:
        return [item for item in self.items if not item.earned]


@_record
class ClaimResult:
    """One atomic claim, after judgekit verified the judge's citations."""

    claim: Annotated[str, Field(strict=True, description="The claim, as the judge extracted it.")]
    supported: Annotated[bool, Field(strict=True, description="Supported after verification.")]
    evidence: Annotated[list[dict[str, str]], Field(strict=True, description="Citations: {id, quote}.")] = field(default_factory=list)
    citation_error: Annotated[str | None, Field(strict=True, 
        description="The judge said supported but a citation failed verification.")] = None


class FaithfulnessResult(_AxisResultBase):
    """Supported claims over all claims; raw counts kept so one big slip and many small ones differ."""

    axis: Literal["faithfulness"] = "faithfulness"
    source: Literal["deterministic", "judge"] = "judge"
    score: float | None = Field(None, ge=0, le=1, description="supported / claims; 1.0 when there is no claim.")
    claims_total: int = 0
    supported: int = 0
    unsupported: int = 0
    citation_errors: int = Field(0, description="Claims the judge supported with a citation that failed.")
    claims: list[ClaimResult] = Field(default_factory=list)


AxisResult = Annotated[
    TaskSuccessResult | ToolCorrectnessResult | FaithfulnessResult, Field(discriminator="axis")
]
"""The built-in axes' results (the exported schema shows these)."""

AxisResultBase = _AxisResultBase

_RESULT_MODELS: dict[str, type[_AxisResultBase]] = {}
"""Axis -> its result model; filled by the axis table (``judgekit.axes.table``)."""


def register_result(axis: str, model: type[_AxisResultBase]) -> None:
    _RESULT_MODELS[axis] = model


class _AxisResults:
    """``TrajectoryResult.axes``: axis name -> result, each read with the model the axis table
    names for it (a result filed under another axis's name is refused: it would gate under the
    wrong rule)."""

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        shown = handler.generate_schema(dict[str, AxisResult])
        return core_schema.no_info_plain_validator_function(
            _read_axes, json_schema_input_schema=shown
        )  # serialised as each result's own model


def _read_axes(value: Any) -> dict[str, _AxisResultBase]:
    if not isinstance(value, dict):
        raise ValueError("axes must be an object: axis name -> result")
    axes: dict[str, _AxisResultBase] = {}
    for name, item in value.items():
        model = _RESULT_MODELS.get(name)
        if model is None:
            raise ValueError(f"axes: {str(name)[:60]!r} is not an axis judgekit knows")
        if isinstance(item, dict) and "axis" in item and item["axis"] != name:
            raise ValueError(f"axes: {name!r} holds a {str(item['axis'])[:60]} result")
        if isinstance(item, _AxisResultBase):
            result = item
        else:
            try:
                result = model.model_validate(item)
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(part) for part in first["loc"])
                raise ValueError(f"axes.{name}{'.' + where if where else ''}: {first['msg']}") from None
        if getattr(result, "axis", None) != name:
            raise ValueError(f"axes: {name!r} holds a {getattr(result, 'axis', type(result).__name__)} result")
        axes[name] = result
    return axes


class TrajectoryResult(_Strict):
    """All axes of one trajectory under one rubric."""

    format_version: Version1 = RESULT_FORMAT_VERSION
    trajectory_id: str = Field(description="The trajectory's id.")
    rubric: str = Field(description="id@version of the rubric applied.")
    rubric_sha256: str = Field(description="Canonical hash of that rubric.")
    source: str = Field(description="file:line the trajectory was read from.")
    axes: _AxisResults = Field(default_factory=dict, description="Axis name -> its result.")
    metadata: dict[str, Any] = Field(default_factory=dict, description="The trajectory's metadata, as given.")
