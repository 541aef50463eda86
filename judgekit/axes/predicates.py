"""Declarative predicates over a world snapshot: exists, absent, equals, matches, count.

``where`` and ``equals`` compare with ``json_equal``, the one JSON equality (1 == 1.0, true != 1).
"""

from __future__ import annotations

import json
import operator

from judgekit.world.json_equality import json_equal
from judgekit.rubric.regex import check_budget, fullmatch
from judgekit.rubric.model import (
    AbsentPredicate,
    CountPredicate,
    EqualsPredicate,
    ExistsPredicate,
    MatchesPredicate,
    Predicate,
)
from judgekit.world.snapshot import Snapshot

_OPS = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


def _describe(predicate: Predicate) -> str:
    where = json.dumps(predicate.where, sort_keys=True) if predicate.where else "any record"
    return f"{predicate.collection} where {where}"


def evaluate(predicate: Predicate, snapshot: Snapshot) -> tuple[bool, str]:
    """Return (passed, reason). A ``matches`` whose pattern runs past its time bound on a
    value, or past the check's budget over all the records, raises RegexTimeout (an InputError:
    the axis is an error, never a pass or a fail)."""
    with check_budget():
        return _evaluate(predicate, snapshot)


def _evaluate(predicate: Predicate, snapshot: Snapshot) -> tuple[bool, str]:
    records = [
        record
        for record in snapshot.records(predicate.collection)
        if all(field in record and json_equal(record[field], value) for field, value in predicate.where.items())
    ]
    target = _describe(predicate)
    if isinstance(predicate, ExistsPredicate):
        return bool(records), f"{len(records)} record(s) in {target}"
    if isinstance(predicate, AbsentPredicate):
        return not records, f"{len(records)} record(s) in {target}"
    if isinstance(predicate, CountPredicate):
        ok = _OPS[predicate.op](len(records), predicate.value)
        return ok, f"{len(records)} record(s) in {target}; expected {predicate.op} {predicate.value}"
    if not records:
        return False, f"no record in {target}"
    field = predicate.field
    for record in records:
        actual = record.get(field)
        if field not in record:
            return False, f"{target} has no field {field!r}"
        if isinstance(predicate, EqualsPredicate) and not json_equal(actual, predicate.value):
            return False, f"{field} is {json.dumps(actual)}, expected {json.dumps(predicate.value)} in {target}"
        if isinstance(predicate, MatchesPredicate) and not (
            isinstance(actual, str) and fullmatch(predicate.pattern, actual, what=f"matches on {field} of {target}")
        ):
            return False, f"{field} is {json.dumps(actual)}, which does not match /{predicate.pattern}/ in {target}"
    how = "equals " + json.dumps(predicate.value) if isinstance(predicate, EqualsPredicate) else f"matches /{predicate.pattern}/"
    return True, f"{field} {how} in {len(records)} record(s) of {target}"
