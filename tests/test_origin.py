"""Labels and judges whose origin is known (issue 31, section 3).

- Labels say who made them (``labeler_kind``): approval refuses model-made labels unless the
  suite allows them, and then says so; a record edited to claim a person's labels is not believed.
- A judge of the agent's own model family is reported (run footer, gate report, dashboard) and
  refused when the suite says so.
- ``judgekit agreement`` reads several classes from one labeller on one item (span annotation)
  and pools them, on a synthetic FaithBench-shaped fixture (``tests/data/faithbench_shaped``).
"""

from __future__ import annotations

import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from _approvals import approve, binary_evidence, edit_json
from judgekit.calibration import Label
from judgekit.calibration.approval_record import JudgeIdentity, Thresholds
from judgekit.calibration.calibrate import calibrate
from judgekit.calibration.evidence import derive_approval
from judgekit.calibration.labels import load_labels
from judgekit.cli import main as cli_main
from judgekit.errors import InputError
from judgekit.judge.family import agent_model, model_family, same_family

ROOT = Path(__file__).resolve().parent.parent
FAITHBENCH = ROOT / "tests" / "data" / "faithbench_shaped"
JUDGE = JudgeIdentity(model_pin="openai/judge-a-2024-08-06", parameters={"temperature": 0.0}, rubric="ship@1.0.0",
                      rubric_sha256="0" * 64, template_sha256="1" * 64)
AGREEING = [(i % 2 == 1, i % 2 == 1) for i in range(60)]


def invoke(args: list[str], **kwargs):
    return CliRunner().invoke(cli_main, args, **kwargs)


def made_by(labels: list[Label], kind: str | None) -> list[Label]:
    return [label.model_copy(update={"labeler_kind": kind}) for label in labels]


# --- labels that say who made them -------------------------------------------------------------


def test_model_made_labels_are_refused_for_approval():
    labels, verdicts = binary_evidence(AGREEING, judge=JUDGE.model_pin)
    as_person = calibrate(made_by(labels, "person"), verdicts, JUDGE, Thresholds(), n_boot=50).axes["task_success"]
    assert as_person.decision == "approved"
    refused = calibrate(made_by(labels, "model"), verdicts, JUDGE, Thresholds(), n_boot=50).axes["task_success"]
    assert refused.decision == "refused" and refused.sample.n_model == 60
    assert any("60 of its 60 label(s) were made by a model" in reason for reason in refused.reasons)
    assert "allow_model_labels" in refused.statement
    # one model-made label among people's is enough
    mixed = made_by(labels[:1], "model") + made_by(labels[1:], "person")
    assert calibrate(mixed, verdicts, JUDGE, Thresholds(), n_boot=50).axes["task_success"].decision == "refused"


def test_model_made_labels_approve_when_the_suite_allows_them_and_the_statement_says_so(tmp_path):
    labels, verdicts = binary_evidence(AGREEING, judge=JUDGE.model_pin)
    allowing = Thresholds(allow_model_labels=True)
    approve(tmp_path, JUDGE, made_by(labels, "model"), verdicts, allowing)
    derived = derive_approval(tmp_path, JUDGE, allowing)
    assert derived.gates("task_success") == (True, None)
    certificate = derived.certified("task_success")
    assert "by 1 labeller; of its 60 label(s), 60 made by a model" in certificate
    assert "on labels partly made by a model, as the suite allows (approval.allow_model_labels)" in certificate
    assert "allow_model_labels true (default false)" in certificate  # named among the lenient settings
    # the same record under a suite that does not allow them: re-derived, refused
    gates, why = derive_approval(tmp_path, JUDGE, Thresholds()).gates("task_success")
    assert not gates and "were made by a model" in why


def test_a_record_edited_to_claim_a_persons_labels_is_not_believed(tmp_path):
    labels, verdicts = binary_evidence(AGREEING, judge=JUDGE.model_pin)
    record = approve(tmp_path, JUDGE, made_by(labels, "model"), verdicts, Thresholds(allow_model_labels=True))

    def claim_people(data):
        axis = data["axes"]["task_success"]
        axis["sample"]["n_model"] = 0
        axis["statement"] = axis["statement"].split("; on labels partly")[0]
        data["thresholds"]["allow_model_labels"] = False

    edit_json(record, claim_people)
    for thresholds in (Thresholds(), Thresholds(allow_model_labels=True)):
        gates, why = derive_approval(tmp_path, JUDGE, thresholds).gates("task_success")
        assert not gates, thresholds
    _, why = derive_approval(tmp_path, JUDGE, Thresholds(allow_model_labels=True)).gates("task_success")
    assert "sample" in why and "the record was edited" in why


def test_labels_of_unknown_origin_approve_but_are_counted_in_the_statement():
    labels, verdicts = binary_evidence(AGREEING, judge=JUDGE.model_pin)
    axis = calibrate(made_by(labels, None), verdicts, JUDGE, Thresholds(), n_boot=50).axes["task_success"]
    assert axis.decision == "approved" and axis.sample.n_unknown == 60 and axis.sample.n_model == 0
    assert "by 1 labeller; of its 60 label(s), 60 of unknown origin" in axis.statement


def test_the_repository_label_files_are_a_persons():
    for path in [ROOT / "calibration/update-email/labels.jsonl",
                 *sorted((ROOT / "examples/safety/calibration").glob("*/labels.jsonl"))]:
        assert {label.labeler_kind for label in load_labels(path)} == {"person"}, path


def test_the_labelling_session_and_the_llmbar_importer_write_person(tmp_path):
    import judgekit.importers.llmbar as llmbar

    dataset = [{"input": "q", "output_1": "a", "output_2": "b", "label": 1}]
    [label] = llmbar._labels(dataset, ["llmbar-x-0001"], tmp_path / "d.json", None)
    assert label.labeler_kind == "person"
    shutil.copytree(ROOT / "examples" / "email-update", tmp_path / "examples" / "email-update")
    shutil.copytree(ROOT / "rubrics", tmp_path / "rubrics")
    labels = tmp_path / "labels.jsonl"
    result = invoke(["label", str(tmp_path / "examples" / "email-update"), "--sample", "2", "--seed", "1",
                     "--labeler", "alice", "--labels", str(labels)], input="1\n\n0\n\n")
    assert result.exit_code == 0, result.output
    assert [label.labeler_kind for label in load_labels(labels)] == ["person", "person"]


# --- model families ----------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "family"), [
    ("openai/gpt-4o-2024-08-06", "openai"), ("gpt-4o-mini", "openai"), ("azure/gpt-4o", "openai"),
    ("o1-mini", "openai"), ("openai/o3", "openai"), ("chatgpt-4o-latest", "openai"),
    ("bedrock/anthropic.claude-3-5-sonnet-20240620-v1:0", "anthropic"), ("claude-3-haiku-20240307", "anthropic"),
    ("gemini/gemini-1.5-pro", "google"), ("vertex_ai/gemma-2-9b-it", "google"),
    ("openrouter/meta-llama/llama-3.1-70b-instruct", "meta"), ("ollama/llama3:8b", "meta"),
    ("mistral/mistral-large-latest", "mistral"), ("together_ai/Qwen/Qwen2.5-72B-Instruct", "alibaba"),
    ("deepseek/deepseek-chat", "deepseek"), ("cohere/command-r-plus", "cohere"), ("xai/grok-2", "xai"),
    # served by a provider that is no maker, or by no maker judgekit knows: the model alone, any date
    ("openai/judge-2024-08-06", "model:judge"), ("hosted_vllm/judge-20240101", "model:judge"),
    ("writer/palmyra-x", "model:palmyra-x"), ("openai/my-agent", "model:my-agent"),
])
def test_model_family(name, family):
    assert model_family(name) == family


def test_the_agent_model_is_read_from_the_metadata_and_compared_by_family():
    assert agent_model({"agent_model": "claude-3-opus", "model": "x"}) == "claude-3-opus"
    assert agent_model({"model": "gpt-4o"}) == "gpt-4o" and agent_model({"model": 3}) is None
    assert same_family("openai/gpt-4o-mini-2024-07-18", {"model": "gpt-4o"}) == "openai"
    assert same_family("openai/gpt-4o-mini-2024-07-18", {"model": "anthropic/claude-3-opus"}) is None
    assert same_family("openai/gpt-4o-mini-2024-07-18", {}) is None


def _suite_with_agents(tmp_path: Path, agents: list[str | None], **gate) -> Path:
    from test_judge_runner import example_suite

    suite = example_suite(tmp_path / "project", suite_update={"gate": gate} if gate else None)
    path = suite.parent / "trajectories.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    for row, agent in zip(rows, agents * len(rows)):
        if agent is not None:
            row["metadata"] = {**row.get("metadata", {}), "model": agent}
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return suite


PIN = "openai/gpt-4o-2024-08-06"


@pytest.fixture(scope="module")
def server():
    from judgekit.testing import ScriptedOpenAIServer
    from test_judge_runner import scripted_judge

    with ScriptedOpenAIServer(scripted_judge) as srv:
        yield srv


def _run(suite: Path, server, out: Path):
    return invoke(["run", str(suite), "--judge-model", PIN, "--judge-api-base", server.base_url, "--no-cache",
                   "--out", str(out)])


def test_a_same_family_judge_is_reported_in_the_run_and_on_the_dashboard(tmp_path, server):
    from judgekit.report import report_input
    from judgekit.report.html import render_html
    from judgekit.run.record import read_run

    # every other trajectory by a gpt-4o agent (the judge's family), the rest by a Claude agent
    suite = _suite_with_agents(tmp_path, ["gpt-4o-mini", "anthropic/claude-3-5-sonnet"])
    out = tmp_path / "run.jsonl"
    result = _run(suite, server, out)
    record = read_run(out)
    own = [r for r in record.results if r.metadata.get("model") == "gpt-4o-mini"]
    judged_own = sum(1 for r in own for axis in r.axes.values() if axis.judge is not None)
    [judge] = record.judges
    assert judged_own > 0 and judge.same_family == judged_own and judge.verdicts > judged_own
    notes = [note for axis in record.gate_report.axes for note in axis.same_family]
    assert notes and all(f"judge {PIN} is of the agent's model family (openai)" in note for note in notes)
    assert "faithfulness: same family: judge openai/gpt-4o-2024-08-06 is of the agent's model family (openai)" \
        in " ".join(result.output.split())
    page = render_html(report_input(record, calibration_dir=suite.parent / "calibration"))
    assert 'data-field="same-family"' in page
    assert f"same model family as the agent (openai) on {judged_own} of its {judge.verdicts} verdict(s)" in page
    gated = invoke(["gate", str(out)])  # the footer re-derives as written, and the gate says it too
    assert gated.exit_code in (0, 1) and "disagrees" not in gated.output
    assert f"same family: judge {PIN} is of the agent's model family (openai)" in gated.output


def test_a_judge_of_another_family_is_not_flagged(tmp_path, server):
    from judgekit.run.record import read_run

    out = tmp_path / "run.jsonl"
    _run(_suite_with_agents(tmp_path, ["anthropic/claude-3-5-sonnet"]), server, out)
    record = read_run(out)
    assert record.judges[0].same_family == 0 and not any(a.same_family for a in record.gate_report.axes)


def test_the_suite_can_refuse_a_same_family_judge(tmp_path, server):
    from judgekit.run.record import read_run

    out = tmp_path / "run.jsonl"
    result = _run(_suite_with_agents(tmp_path, ["gpt-4o"], refuse_same_family=True), server, out)
    assert result.exit_code == 0, result.output
    gated = invoke(["gate", str(out)])
    assert gated.exit_code == 1 and "FAIL faithfulness" in gated.output
    judged = [a for a in read_run(out).gate_report.axes if a.same_family]
    assert judged and all(not a.passed and a.gating_n == 0 for a in judged)
    assert all("the suite refuses a judge of the agent's own family (gate.refuse_same_family)" in a.reasons[-1]
               for a in judged)


# --- several classes per labeller: a FaithBench-shaped set --------------------------------------

POSITIVE = ("consistent", "benign")
TABLE = {  # the README's table: item -> (best-pooling, worst-pooling)
    "fb-01": ("pass", "pass"), "fb-02": ("pass", "fail"), "fb-03": ("fail", "fail"), "fb-04": ("pass", "fail"),
    "fb-05": ("pass", "fail"), "fb-06": ("pass", "pass"), "fb-07": ("fail", "fail"), "fb-08": ("pass", "fail"),
}


def _fixture() -> tuple[dict[str, dict[str, set[str]]], dict[str, str]]:
    classes: dict[str, dict[str, set[str]]] = {}
    for line in (FAITHBENCH / "labels.jsonl").read_text().splitlines():
        row = json.loads(line)
        classes.setdefault(row["trajectory_id"], {}).setdefault(row["labeler"], set()).add(row["category"])
    verdicts = {row["trajectory_id"]: row["verdict"]
                for row in map(json.loads, (FAITHBENCH / "verdicts.jsonl").read_text().splitlines())}
    return classes, verdicts


def _agreement(pool: str) -> dict:
    result = invoke(["agreement", "--labels", str(FAITHBENCH / "labels.jsonl"), "--verdicts",
                     str(FAITHBENCH / "verdicts.jsonl"), "--positive", "consistent", "--positive", "benign",
                     "--pool", pool, "--n-boot", "0", "--json"])
    assert result.exit_code == 0, result.output
    [report] = [json.loads(line) for line in result.output.splitlines()]
    [section] = report["axes"]
    return section


def _fleiss(rows: list[list[str]]) -> float:
    """Fleiss' kappa, written out (each row: one rating per rater)."""
    categories = sorted({c for row in rows for c in row})
    counts = np.array([[row.count(c) for c in categories] for row in rows], dtype=float)
    n = counts.sum(axis=1)[0]
    p = counts.sum(axis=0) / counts.sum()
    agreement = ((counts * (counts - 1)).sum(axis=1) / (n * (n - 1))).mean()
    chance = (p ** 2).sum()
    return (agreement - chance) / (1 - chance)


@pytest.mark.parametrize(("pool", "column"), [("any", 0), ("all", 1)])
def test_best_and_worst_pooling_of_several_classes_per_annotator(pool, column):
    classes, verdicts = _fixture()
    # the references, worked out here from each annotator's set of classes
    says = {tid: {who: all(c in POSITIVE for c in mine) for who, mine in by.items()} for tid, by in classes.items()}
    best = {tid: "pass" if any(v.values()) else "fail" for tid, v in says.items()}
    worst = {tid: "pass" if set().union(*classes[tid].values()) <= set(POSITIVE) else "fail" for tid in classes}
    assert {tid: (best[tid], worst[tid]) for tid in classes} == TABLE
    reference = best if pool == "any" else worst
    section = _agreement(pool)
    expected = {"tp": 0, "fp": 0, "fn": 0, "tn": 0}
    for tid, human in reference.items():
        expected[{("pass", "pass"): "tp", ("fail", "pass"): "fp", ("pass", "fail"): "fn",
                  ("fail", "fail"): "tn"}[(human, verdicts[tid])]] += 1
    assert section["kind"] == "multiclass" and section["n"] == len(classes) and section["tied_ids"] == []
    assert section["confusion"] == expected
    # the class table counts labels (one per annotator, item and class): 30 lines, 8 verdicts each scored
    assert sum(r["judge_pass"] + r["judge_fail"] for r in section["class_confusion"]) == 30


def test_inter_annotator_agreement_is_over_the_annotators_never_annotator_class_pairs():
    classes, _ = _fixture()
    section = _agreement("majority")
    annotators = sorted({who for by in classes.values() for who in by})
    for ia in (section["inter_annotator"], section["inter_annotator_pass_fail"]):
        assert ia["labelers"] == annotators == ["annotator-1", "annotator-2", "annotator-3"]
    complete = [tid for tid, by in sorted(classes.items()) if len(by) == 3]
    pass_fail = [["pass" if classes[tid][who] <= set(POSITIVE) else "fail" for who in annotators] for tid in complete]
    ia = section["inter_annotator_pass_fail"]
    assert ia["n_items"] == len(complete) == 7 and ia["kappa"] == pytest.approx(_fleiss(pass_fail))
    as_sets = [["+".join(sorted(classes[tid][who])) for who in annotators] for tid in complete]
    assert section["inter_annotator"]["kappa"] == pytest.approx(_fleiss(as_sets))
    # majority over three annotators, a tie on the item two annotators labelled
    assert section["tied_ids"] == ["fb-04"]


def test_one_annotator_giving_one_class_twice_is_an_error_naming_both_lines(tmp_path):
    rows = [{"trajectory_id": "t0", "axis": "faithfulness", "category": c, "labeler": "a"}
            for c in ("benign", "unwanted", "benign")]
    path = tmp_path / "labels.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    with pytest.raises(InputError, match=r"'a' labels 't0' on faithfulness as 'benign' twice \(lines 1 and 3\)"):
        load_labels(path)
