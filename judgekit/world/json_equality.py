"""JSON value equality: the one definition that predicates, the end-state diff and key matching use.

Two values are equal as JSON Schema defines equality for ``const``, ``enum`` and ``uniqueItems``,
which is what a rubric's argument schemas already use:

- numbers by mathematical value: ``1 == 1.0`` and ``0.0 == -0.0``. An int and a float are
  compared exactly (Python does not round either), so ``2**53 + 1`` differs from ``2.0**53``;
- booleans are not numbers: ``true`` equals only ``true``, never ``1`` (Python's ``True == 1``
  is not used, at any depth);
- strings by their code points (no Unicode normalisation, no case folding); ``null`` only ``null``;
- arrays item by item, in order; objects by the same keys with equal values, in any key order;
- bytes (a SQLite BLOB, before the diff shows it as ``{"$blob": ...}``) only the same bytes.

Why numbers by value, in the diff too: JSON has one number type, and tools in other languages
rewrite ``1.0`` as ``1`` (JavaScript, Go, jq); SQLite's own ``=`` and ``IS`` say ``1`` is ``1.0``,
and its INTEGER/REAL storage class follows the column's declared type, whose change the diff
reports as a schema change. A rewrite that keeps every value is not a side effect.

NaN never reaches this: every JSON input refuses NaN, and SQLite stores NaN as NULL.
"""

from __future__ import annotations

from typing import Any


def json_equal(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` are the same JSON value (see the module docstring)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(map(json_equal, a, b))
    return type(a) is type(b) and a == b


def normal_form(value: Any) -> Any:
    """``value`` with every integral float replaced by the int it equals, at any depth.

    Its canonical JSON is the same text exactly when ``json_equal`` says the values are equal, so
    it gives records a key text to be matched by (a keyed list's key, a SQLite primary key).
    """
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: normal_form(v) for k, v in value.items()}
    if isinstance(value, list):
        return [normal_form(v) for v in value]
    return value
