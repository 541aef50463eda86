"""A real fourth axis (``tests/_fourth_axis.py``: concision), in one module, registered, scored
deterministically and through the scripted judge, its verdicts cached, read back and gated.

Nothing of judgekit changes for it: the axis is its module plus one criteria field of the rubric
model (``ConcisionRubric``), and ``register`` puts it in the table."""

from __future__ import annotations

import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"

import json
from pathlib import Path

import pytest
import yaml

from _fourth_axis import AXIS, NAME, ConcisionAnswer, ConcisionResult, ConcisionRubric
from judgekit._util.documents import load_document
from judgekit.axes import table as axis_table
from judgekit.errors import InputError
from judgekit.gate import gate, gate_results
from judgekit.judge.resolve import JudgeOverride
from judgekit.results import _RESULT_MODELS
from judgekit.rubric.model import AXES, Rubric
from judgekit.run import RunOptions, read_run, run_suite
from judgekit.suite import GatePolicy, LoadedSuite, Suite
from judgekit.testing import Reply, ScriptedOpenAIServer
from judgekit.verdict import answer_model
from test_judge_runner import MODEL, data_items, judge_answer

OUTPUTS = {
    "short": "Paris.",
    "long": "The capital of France is Paris, a city on the Seine in the north of the country.",
    "padded": "Basically, the answer is Paris.",
}
"""Trajectory id -> the agent's output: 1, 17 and 5 words."""


@pytest.fixture
def concision():
    """The fourth axis in the table for one test, then out again."""
    axis_table.register(AXIS)
    try:
        yield AXIS
    finally:
        axis_table.unregister(NAME)
        _RESULT_MODELS.pop(NAME, None)


def concision_judge(request: dict, n: int) -> Reply:
    """Padding is the word 'Basically'; every other axis is answered as the other tests answer it."""
    if "Axis: concision." not in request["messages"][0]["content"]:
        return Reply.ok(judge_answer(request))
    output = data_items(request["messages"][1]["content"])["O"]
    padding = ["Basically,"] if "Basically" in output else []
    return Reply.ok({"padding": padding, "verdict": "padded" if padding else "concise"})


@pytest.fixture(scope="module")
def server():
    with ScriptedOpenAIServer(concision_judge) as srv:
        yield srv


def suite_of(root: Path, *, judge: bool = False, gate: dict | None = None) -> LoadedSuite:
    """A suite of three trajectories under a rubric that scores concision only (words <= 5)."""
    root.mkdir(parents=True, exist_ok=True)
    rubric = {"id": "answers", "version": "1.0.0", "registered": "2026-12-04",
              "concision": {"guide": "Full marks for at most five words; padding costs a quarter each.",
                            "max_words": 5, "judge": judge}}
    (root / "rubric.yaml").write_text(yaml.safe_dump(rubric))
    (root / "t.jsonl").write_text("".join(json.dumps({"id": tid, "prompt": "Capital of France?", "output": output})
                                          + "\n" for tid, output in OUTPUTS.items()))
    suite = {"format_version": 2, "name": "answers", "rubrics": ["rubric.yaml"],
             "trajectories": [{"file": "t.jsonl", "rubric": "answers"}], **({"gate": gate} if gate else {})}
    (root / "suite.yaml").write_text(yaml.safe_dump(suite))
    # The rubric model with the fourth axis's field reads the rubric (judgekit's own Rubric would
    # refuse the unknown section: a new axis is one field there).
    loaded = LoadedSuite(suite=load_document(root / "suite.yaml", Suite), path=(root / "suite.yaml").resolve())
    read = load_document(root / "rubric.yaml", ConcisionRubric)
    loaded.rubrics, loaded.rubric_files = {read.ref: read}, {read.ref: root / "rubric.yaml"}
    return loaded


def options(server, tmp_path: Path) -> RunOptions:
    return RunOptions(override=JudgeOverride(model=MODEL, api_base=server.base_url), cache_dir=tmp_path / "cache")


def test_the_axis_is_its_module_plus_one_rubric_field():
    assert ConcisionRubric.axis_names() == (*AXES, NAME)
    assert NAME not in Rubric.axis_names()
    with pytest.raises(ValueError, match="concision"):
        Rubric.model_validate({"id": "x", "version": "1.0.0", "registered": "2026-12-04",
                               "concision": {"guide": "g", "max_words": 5}})
    assert AXIS.deterministic and not AXIS.binary and AXIS.figure == "mean score" and AXIS.has_fallback


def test_registered_it_is_in_the_table_and_its_models_read(concision):
    assert axis_table.axis_named(NAME) is concision
    assert answer_model(NAME) is ConcisionAnswer
    rubric = ConcisionRubric.model_validate({"id": "x", "version": "1.0.0", "registered": "2026-12-04",
                                             "concision": {"guide": "g", "max_words": 5, "judge": True}})
    assert [axis.name for axis in axis_table.axes_of(rubric)] == [NAME]
    assert [axis.name for axis in axis_table.judged_axes(rubric)] == [NAME]


def test_scored_deterministically_and_gated_on_its_minimum(concision, server, tmp_path):
    loaded = suite_of(tmp_path / "suite", gate={"min": {NAME: 0.7}})
    out = tmp_path / "run.jsonl"
    record = run_suite(loaded, options=options(server, tmp_path), out=out)
    scores = {r.trajectory_id: r.axes[NAME] for r in record.results}
    assert {tid: (res.words, res.score, res.source) for tid, res in scores.items()} == {
        "short": (1, 1.0, "deterministic"), "long": (17, 5 / 17, "deterministic"), "padded": (5, 1.0, "deterministic")}
    assert record.ledger is None or record.ledger.calls == 0  # nothing judged
    [gated] = record.gate_report.axes
    assert (gated.axis, gated.gating_n, gated.minimum) == (NAME, 3, 0.7)
    assert gated.value == pytest.approx((2 + 5 / 17) / 3) and gated.passed  # 0.765 >= 0.7
    # Read back from the file, each result with the axis's own model; gated again under a stricter suite.
    again = read_run(out)
    assert isinstance(again.results[1].axes[NAME], ConcisionResult) and again.results[1].axes[NAME].words == 17
    strict = suite_of(tmp_path / "suite", gate={"min": {NAME: 0.8}})
    report = gate(again, loaded=strict, calibration_dir=tmp_path / "calibration")
    assert not report.passed and report.axes[0].reasons == ["mean score 0.765 is below 0.8"]


def test_its_default_minimum_applies_when_the_suite_names_none(concision, server, tmp_path):
    record = run_suite(suite_of(tmp_path / "suite"), options=options(server, tmp_path))
    [gated] = record.gate_report.axes
    assert gated.minimum == AXIS.default_minimum == 0.5 and gated.passed


def test_judged_through_the_scripted_server_cached_and_advisory_until_approved(concision, server, tmp_path):
    loaded = suite_of(tmp_path / "suite", judge=True, gate={"min": {NAME: 0.7}})
    before = server.request_count
    record = run_suite(loaded, options=options(server, tmp_path))
    assert server.request_count - before == 3  # one question per trajectory
    results = {r.trajectory_id: r.axes[NAME] for r in record.results}
    assert {tid: (res.source, res.score, res.padding) for tid, res in results.items()} == {
        "short": ("judge", 1.0, []), "long": ("judge", 5 / 17, []), "padded": ("judge", 0.75, ["Basically,"])}
    assert all(res.judge is not None and res.judge.model_pin == MODEL for res in results.values())
    assert AXIS.lost(results["padded"]) == [("padding: Basically,", "the judge found it adds nothing")]
    # No approval: the judge advises; the word count (the fallback) still gates.
    [gated] = record.gate_report.axes
    assert gated.advisory and gated.advisory[0].trajectories == 3
    assert gated.gating_n == 3 and gated.value == pytest.approx((2 + 5 / 17) / 3) and gated.passed
    assert gated.advisory_value == pytest.approx((1.0 + 5 / 17 + 0.75) / 3)
    # The same questions again: every one answered by the cache.
    before = server.request_count
    rerun = run_suite(suite_of(tmp_path / "suite", judge=True, gate={"min": {NAME: 0.7}}),
                      options=options(server, tmp_path))
    assert server.request_count == before
    assert [r.axes[NAME].score for r in rerun.results] == [r.axes[NAME].score for r in record.results]


def test_the_prompt_carries_its_own_instructions_and_they_key_the_cache(concision, tmp_path):
    loaded = suite_of(tmp_path / "suite", judge=True)
    rubric = next(iter(loaded.rubrics.values()))
    from judgekit.prompt import template_sha256
    from judgekit.trajectory import LoadedTrajectory, Trajectory, WorldState

    item = LoadedTrajectory(Trajectory.model_validate({"id": "t", "prompt": "p", "output": "Basically, Paris."}),
                            tmp_path / "t.jsonl", 1)
    prompt = AXIS.prompt(rubric, item, WorldState(item), show_output=True)
    system, user = (m["content"] for m in prompt.messages)
    assert AXIS.instructions in system and "Basically, Paris." in user
    assert prompt.template_sha256 != template_sha256()  # its instructions are part of the template hash


def test_a_gate_minimum_for_an_unregistered_axis_is_refused(tmp_path):
    with pytest.raises(InputError, match="gate.min names 'concision', which is not an axis"):
        gate_results([], GatePolicy(min={NAME: 0.5}), tmp_path)
