"""List keys: the field that matches the records of a JSON list across the two snapshots.

Without a key, a JSON list is diffed by position: a record inserted or reordered shows up as
changes at list indexes (``orders/1/status``). A key (``{"/orders": "id"}``) matches records by
that field instead, and the diff's path segment is the key value (``orders/o-17/status``).

Keys may be declared in three places; for one list the most specific wins: a trajectory's
``world.keys``, then its rubric's ``world.keys``, then the suite's ``world.keys``
(``merge_keys``). Keys apply to JSON worlds only (SQLite rows are matched by primary key).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic_core import PydanticCustomError

# RFC 6901: empty (the whole document) or '/'-separated tokens, '~' only as '~0' or '~1'.
_POINTER = re.compile(r"(/([^~]|~[01])*)*")


def check_pointer(pointer: str) -> str:
    """``pointer`` if it is an RFC 6901 JSON pointer; else a validation error that says how to write it."""
    if _POINTER.fullmatch(pointer):
        return pointer
    if not pointer.startswith("/"):
        raise PydanticCustomError(
            "json_pointer", "'{pointer}' is not a JSON pointer: it must be empty (the whole document) or start "
            "with '/' (write '{fixed}')", {"pointer": pointer, "fixed": "/" + pointer})
    raise PydanticCustomError(
        "json_pointer", "'{pointer}' is not a JSON pointer: '~' must be written '~0' and a '/' within a name '~1'",
        {"pointer": pointer})


JsonPointer = Annotated[str, AfterValidator(check_pointer)]
"""A JSON pointer (RFC 6901), checked when read."""

ListKeys = dict[JsonPointer, Annotated[str, Field(min_length=1)]]
"""JSON pointer of a list -> the field its records are matched by."""


class WorldKeys(BaseModel):
    """List keys declared once for many trajectories (a suite's or a rubric's ``world``)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    keys: ListKeys = Field(
        default_factory=dict,
        description="JSON worlds: JSON pointer of a list -> the field its records are matched by in the diff "
        "(e.g. {/orders: id}); a list without a key is diffed by position. A trajectory's world.keys wins over "
        "its rubric's, which wins over the suite's, list by list.",
    )


def merge_keys(*layers: Mapping[str, str] | None) -> dict[str, str]:
    """The keys in force: ``layers`` from the least to the most specific, a later one winning per list."""
    merged: dict[str, str] = {}
    for layer in layers:
        merged.update(layer or {})
    return merged
