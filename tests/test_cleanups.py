"""One definition each: JSON equality, diff path pointers, the clock, the schema registry.

These began as pins of the code before the clean-up (each test says what changed and why).
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

from judgekit._util.io import canonical_json
from judgekit.world.json_equality import json_equal, normal_form
from judgekit._util.clock import utc_now, utc_now_whole_seconds
from judgekit.axes.predicates import evaluate
from judgekit.world.diff import diff_snapshots
from judgekit.rubric.model import Predicate
from judgekit.world.snapshot import JsonSnapshot, format_pointer, parse_pointer

PACKAGE = Path(__file__).resolve().parent.parent / "judgekit"
PREDICATE = TypeAdapter(Predicate)


def jdiff(a: Any, b: Any):
    return diff_snapshots(JsonSnapshot(a, "a.json"), JsonSnapshot(b, "b.json"))


def equals(actual: Any, expected: Any) -> bool:
    predicate = PREDICATE.validate_python({"check": "equals", "collection": "/r", "field": "v", "value": expected})
    return evaluate(predicate, JsonSnapshot({"r": [{"v": actual}]}))[0]


def selected(actual: Any, wanted: Any) -> bool:
    predicate = PREDICATE.validate_python({"check": "exists", "collection": "/r", "where": {"v": wanted}})
    return evaluate(predicate, JsonSnapshot({"r": [{"v": actual}]}))[0]


# --- 1. JSON equality: one definition, used by predicates and the diff --------------------------

EQUALITY = [
    pytest.param(1, 1.0, True, id="int_and_float_are_one_number"),
    pytest.param(0.0, -0.0, True, id="signed_zeros_are_one_number"),
    pytest.param(10**20, 1e20, True, id="big_int_and_its_exact_float"),
    pytest.param(2**53 + 1, 2.0**53, False, id="int_and_float_compared_exactly"),
    pytest.param(1, 1.5, False, id="different_numbers"),
    pytest.param(True, 1, False, id="true_is_not_1"),
    pytest.param(False, 0, False, id="false_is_not_0"),
    pytest.param(False, None, False, id="false_is_not_null"),
    pytest.param([True], [1], False, id="nested_true_is_not_1"),
    pytest.param({"a": [0]}, {"a": [False]}, False, id="deeply_nested_false_is_not_0"),
    pytest.param({"a": [1]}, {"a": [1.0]}, True, id="nested_int_and_float"),
    pytest.param({"a": 1, "b": 2}, {"b": 2, "a": 1}, True, id="key_order_irrelevant"),
    pytest.param({"a": None}, {}, False, id="null_member_is_not_a_missing_one"),
    pytest.param([1, 2], [2, 1], False, id="arrays_ordered"),
    pytest.param([1], [1, 1], False, id="array_lengths"),
    pytest.param("1", 1, False, id="string_is_not_number"),
    pytest.param("é", "e\u0301", False, id="strings_by_code_point"),
    pytest.param("A", "a", False, id="strings_case_sensitive"),
    pytest.param(None, None, True, id="null"),
    pytest.param({"x": []}, {"x": {}}, False, id="empty_array_is_not_empty_object"),
]


@pytest.mark.parametrize(("x", "y", "equal"), EQUALITY)
def test_json_equal(x, y, equal):
    assert json_equal(x, y) is equal
    assert json_equal(y, x) is equal
    assert (canonical_json(normal_form(x)) == canonical_json(normal_form(y))) is equal


@pytest.mark.parametrize(("x", "y", "equal"), EQUALITY)
def test_predicates_and_diff_use_the_same_equality(x, y, equal):
    # Changed on purpose. Before, the two disagreed: predicates said 1 == 1.0 and 0.0 == -0.0
    # where the diff saw a change, and predicates said [true] == [1] (Python's True == 1 one
    # level down) where the diff did not. Now both are json_equal, which JSON Schema defines.
    assert equals(x, y) is equal
    assert selected(x, y) is equal
    assert (not jdiff({"v": x}, {"v": y}).changes) is equal


confusable = st.sampled_from([0, 1, 0.0, -0.0, 1.0, 2.5, True, False, "1", "", None, 2**53 + 1, 2.0**53])
values = st.recursive(
    confusable | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=3),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.sampled_from(["a", "b"]), children, max_size=2),
    max_leaves=6,
)


@settings(max_examples=300, deadline=None)
@given(values, values)
def test_equality_agrees_everywhere(x, y):
    equal = json_equal(x, y)
    assert json_equal(y, x) is equal
    assert json_equal(x, x) and json_equal(y, y)
    assert (canonical_json(normal_form(x)) == canonical_json(normal_form(y))) is equal
    assert equals(x, y) is equal
    assert selected(x, y) is equal
    assert (not jdiff({"v": x}, {"v": y}).changes) is equal


def test_there_is_one_json_equality():
    # Both old definitions are gone: predicates._same (1 == 1.0) and diff.same_json_value (1 != 1.0).
    from judgekit.world import diff
    from judgekit.axes import predicates

    assert not hasattr(predicates, "_same")
    assert not hasattr(diff, "same_json_value")
    assert predicates.json_equal is json_equal is diff.json_equal


# --- 2. diff paths as text: JSON Pointer (RFC 6901) ---------------------------------------------


@pytest.mark.parametrize(
    ("path", "pointer"),
    [
        pytest.param(["users", 1, "email"], "/users/1/email", id="keys_and_an_index"),
        pytest.param(["users", "1", "email"], "/users/1/email", id="sqlite_row_key"),
        pytest.param(["a/b", "~x"], "/a~1b/~0x", id="slash_and_tilde_escaped"),
        pytest.param(["~1"], "/~01", id="tilde_escaped_first"),
        pytest.param(["members", '[1,"core"]'], '/members/[1,"core"]', id="composite_key"),
        pytest.param([""], "/", id="empty_key"),
        pytest.param([], "", id="root"),
    ],
)
def test_diff_paths_render_as_json_pointers(path, pointer):
    assert format_pointer(path) == pointer
    assert parse_pointer(pointer) == [str(segment) for segment in path]  # no two paths share a text


# --- 3. one clock ---------------------------------------------------------------------------------


def test_utc_now_is_aware_utc_to_the_microsecond():
    before = datetime.now(UTC)
    now = utc_now()
    assert now.tzinfo is UTC
    assert before <= now <= datetime.now(UTC)


def test_utc_now_whole_seconds_drops_the_microseconds():
    before = datetime.now(UTC).replace(microsecond=0)
    now = utc_now_whole_seconds()
    assert now.tzinfo is UTC and now.microsecond == 0
    assert before <= now <= datetime.now(UTC)


def test_approvals_have_no_clock_of_their_own():
    # Changed on purpose: approval.py had its own now(); calibrate.py stamps decided_at with utc_now.
    from judgekit.calibration import approval

    assert not hasattr(approval, "now")


def _modules_with(pattern: str) -> set[str]:
    """Names of the package's modules with a line matching ``pattern`` (names, not paths: a
    module being moved to another folder keeps its place in the lists below)."""
    return {
        path.name
        for path in PACKAGE.rglob("*.py")
        if any(re.search(pattern, line) for line in path.read_text(encoding="utf-8").splitlines())
    }


def test_no_new_clock_appears():
    # Only judgekit._util.clock reads the clock (runner.py, labelling.py, judge/jobs.py, cache.py and
    # calibration/approval.py did). A ratchet for the last copy of now(), in labelling.py, which is
    # being rewritten to use utc_now_whole_seconds: none may be added, and the set only shrinks.
    assert _modules_with(r"datetime\.now\(|datetime\.utcnow\(|\btime\.time\(") <= {"clock.py", "server.py"}
    # pace.py's _Clock.now is no wall clock: it is the method pyrate-limiter calls on the monotonic
    # clock a pacer is given (milliseconds), named by the library's interface.
    assert _modules_with(r"^\s*def (utc_)?now\(") <= {"clock.py", "labelling.py", "pace.py"}


def test_prune_cuts_at_the_shared_clock(tmp_path):
    import judgekit.axes.table  # noqa: F401 - the axis table registers the answer models verdicts are read with
    from judgekit.cache.store import VerdictCache
    from judgekit.verdict import JudgeVerdict, Provenance

    def stored_at(created_at: datetime, key: str) -> JudgeVerdict:
        provenance = Provenance(
            model_pin="openai/judge-2024-08-06", parameters={"temperature": 0}, rubric="r@1.0.0",
            rubric_sha256="a" * 64, template_sha256="b" * 64, judgekit_version="0", litellm_version="0",
            created_at=created_at, cache_key=key,
        )
        answer = {"claims": [{"claim": "the account has 3 seats", "supported": False, "evidence": []}]}
        return JudgeVerdict(axis="faithfulness", status="scored", answer=answer, provenance=provenance)

    with VerdictCache(tmp_path / "cache") as cache:
        cache.put("old", stored_at(utc_now() - timedelta(days=10), "old"))
        cache.put("new", stored_at(utc_now() - timedelta(days=1), "new"))
        assert cache.prune(older_than_days=20) == 0
        assert cache.prune(older_than_days=5) == 1
        assert (cache.get("old"), cache.get("new") is not None) == (None, True)


# --- 4. one schema registry -----------------------------------------------------------------------


def test_agreement_report_is_a_registered_format():
    # Changed on purpose: the agreement report (`agreement --json`, `calibrate --out`) had a schema
    # only in calibration/schemas.py; it is now in the one registry, schemas/ and `judgekit schema`.
    from judgekit.calibration import agreement
    from judgekit.calibration.labels import Label
    from judgekit.calibration.verdicts import JudgeVerdictRecord
    from judgekit.cli import main
    from judgekit.schemas import SCHEMA_NAMES, schema_for

    assert "agreement-report" in SCHEMA_NAMES
    when = "2025-03-02T10:00:00Z"
    labels = [Label.model_validate({"trajectory_id": f"t{i}", "axis": "task_success", "labeler": "alice",
                                    "labeled_at": when, "label": "pass" if i % 2 else "fail"}) for i in range(6)]
    verdicts = [JudgeVerdictRecord.model_validate({"trajectory_id": f"t{i}", "axis": "task_success",
                                                   "verdict": "pass" if i % 3 else "fail"}) for i in range(6)]
    report = json.loads(agreement(labels, verdicts, n_boot=0).model_dump_json())
    jsonschema.Draft202012Validator(schema_for("agreement-report")).validate(report)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(schema_for("agreement-report")).validate({**report, "surprise": 1})
    printed = CliRunner().invoke(main, ["schema", "agreement-report"])
    assert printed.exit_code == 0, printed.output
    assert json.loads(printed.stdout) == schema_for("agreement-report")


def test_calibration_schemas_come_from_the_registry():
    from judgekit.calibration import schemas
    from judgekit.calibration.corrected import CorrectedRate
    from judgekit.schemas import schema_for

    found = schemas()
    assert set(found) == {"label", "verdict", "agreement_report", "corrected_rate"}  # unchanged names
    assert found["label"] == schema_for("labels")
    assert found["verdict"] == schema_for("verdicts")
    assert found["agreement_report"] == schema_for("agreement-report")
    assert found["corrected_rate"] == CorrectedRate.model_json_schema()  # printed only: no registry name
