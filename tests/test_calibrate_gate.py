"""Calibration decides which judges may gate: approval records, advisory axes, drift, the gate.

A scripted judge that agrees with the example's human labels is approved and gates; a judge
that disagrees (or has no approval) is advisory and the gate says which command would approve
it. The embedded local judge is measured for real, and refused, in test_local_calibration.py.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from judgekit.cli import main
from judgekit.run.record import read_run
from judgekit.testing import Reply, ScriptedOpenAIServer

ROOT = Path(__file__).resolve().parent.parent
LABELS = {json.loads(line)["trajectory_id"]: json.loads(line)["score"]
          for line in (ROOT / "calibration/update-email/labels.jsonl").read_text().splitlines()}
OUTPUTS = {json.loads(line)["output"]: json.loads(line)["id"]
           for line in (ROOT / "examples/email-update/calibration-sample.jsonl").read_text().splitlines()}
SUPPORTED = {"claim": "the email is alice@example.com", "supported": True,
             "evidence": [{"id": "R1", "quote": "alice@example.com"}]}
UNSUPPORTED = {"claim": "something the tools never said", "supported": False, "evidence": []}


def _output(request: dict) -> str:
    user = request["messages"][1]["content"]
    return json.loads(re.search(r'^O = (".*")$', user, re.M).group(1))


def answer_like_the_labels(request: dict, n: int) -> Reply:
    """A judge whose faithfulness score equals the human label (1.0 for unlabelled outputs)."""
    score = LABELS.get(OUTPUTS.get(_output(request)), 1.0)
    claims = {1.0: [SUPPORTED], 0.5: [SUPPORTED, UNSUPPORTED], 0.0: [UNSUPPORTED]}[score]
    return Reply.ok(json.dumps({"claims": claims}))


def answer_the_opposite(request: dict, n: int) -> Reply:
    score = LABELS.get(OUTPUTS.get(_output(request)), 1.0)
    return Reply.ok(json.dumps({"claims": [UNSUPPORTED] if score >= 0.5 else [SUPPORTED]}))


@pytest.fixture
def project(tmp_path):
    """A copy of the example project (suites, rubric, lock, labels) to write approvals into."""
    for part in ("examples", "rubrics", "calibration"):
        shutil.copytree(ROOT / part, tmp_path / part)
    return tmp_path


def cli(project: Path, *args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def judge_args(server, model="openai/scripted-judge-2024-08-06") -> list[str]:
    return ["--judge-model", model, "--judge-api-base", server.base_url]


def calibrate(project: Path, server, *extra: str):
    return cli(
        project, "calibrate", str(project / "examples/email-update/calibration.yaml"),
        "--labels", str(project / "calibration/update-email/labels.jsonl"),
        "--cache-dir", str(project / "cache"), *judge_args(server), *extra,
    )


def approvals(project: Path) -> list[dict]:
    folder = project / "calibration/update-email/approvals"
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))] if folder.exists() else []


def gate_of(output: str) -> str:
    """A run's output up to its gate: without the status line `judgekit run` ends with (GREEN or
    RED and why), which `judgekit gate` does not print."""
    head, _, last = output.rstrip("\n").rpartition("\n")
    return head + "\n" if last.startswith(("GREEN", "RED")) else output


def run_and_gate(project: Path, server) -> tuple[object, dict]:
    out = project / "run.json"
    result = cli(project, "run", str(project / "examples/email-update"), "--out", str(out), "--gate",
                 "--cache-dir", str(project / "cache"), *judge_args(server))
    return result, read_run(out).model_dump(mode="json")


def test_an_agreeing_judge_is_approved_and_gates(project):
    with ScriptedOpenAIServer(answer_like_the_labels) as server:
        calibrated = calibrate(project, server)
        assert calibrated.exit_code == 0, calibrated.output
        [record] = approvals(project)
        decision = record["axes"]["faithfulness"]
        assert decision["decision"] == "approved"
        assert decision["n"] == 24 and decision["kappa"]["value"] == pytest.approx(1.0)
        # Changed on purpose (issue 14): the rule is on 95% one-sided bounds, with thresholds
        # for each bound; the record says in words what it certifies and on which labels.
        # Changed on purpose (issue 26): format 3 names its evidence, the labels file and the
        # judge's verdicts beside it, with their hashes, and lists its items by trajectory id.
        assert record["format_version"] == 3 and record["labels_file"] == "update-email/labels.jsonl"
        assert record["verdicts_file"] == f"update-email/approvals/{record['fingerprint']}.verdicts.jsonl"
        verdicts = project / "calibration" / record["verdicts_file"]
        assert record["verdicts_sha256"] == hashlib.sha256(verdicts.read_bytes()).hexdigest()
        assert sorted(item["trajectory_id"] for item in decision["items"]) == sorted(LABELS)
        assert all(json.loads(line)["judge_fingerprint"] == record["fingerprint"]
                   for line in verdicts.read_text().splitlines())
        assert record["thresholds"] == {"min_kappa": 0.6, "min_items": 20, "min_tpr": 0.8, "min_tnr": 0.8,
                                        "min_spearman": 0.6, "max_mae": 0.2, "confidence": 0.95,
                                        "max_abstention_rate": 0.1, "graded_pass": 0.5,
                                        "allow_model_labels": False}  # issue 31: approval refuses model-made labels
        assert 0.6 <= decision["kappa_lower"] < 1.0 and decision["spearman_lower"] >= 0.6
        assert decision["mae_upper"] <= 0.2 and decision["n_pass"] == 19 and decision["n_fail"] == 5
        assert decision["statement"].startswith("faithfulness judge approved: kappa >= ")
        assert decision["statement"].endswith("(95% one-sided bounds) on 24 item(s) (19 pass, 5 fail) "
                                              "labelled 2026-11-30 by 1 labeller")
        assert "APPROVED" in calibrated.output and "kappa >= " in calibrated.output

        gated, run = run_and_gate(project, server)
    # The run's judge has the calibrated fingerprint, so faithfulness gates: all 9 verdicts
    # count and none is advisory. (Its citations to R1 fail verification where R1 is not the
    # update, so its mean is below 1, and the gate fails on it.) Task success meets the minimum the
    # example declares for its planned failures.
    fingerprints = {r["axes"]["faithfulness"]["judge"]["model_pin"] for r in run["results"]}
    assert fingerprints == {"openai/scripted-judge-2024-08-06"}
    assert gated.exit_code == 1
    assert gated.output.rstrip().splitlines()[-1].startswith("RED: gate: ")
    section = gate_of(gated.output).split("faithfulness: ")[-1].split("task_success")[0]
    assert re.match(r"[\d.]+ \(min 1\.0\) over 9 gating verdict", section)
    assert "advisory" not in section
    # the gate says what the approval certifies, and on which labels
    assert re.search(r"^  certified: faithfulness judge approved: kappa >= 0\.\d\d, Spearman >= \d\.\d\d, MAE <= "
                     r"0\.\d\d \(95% one-sided bounds\) on 24 item\(s\) \(19 pass, 5 fail\) labelled 2026-11-30 "
                     r"by 1 labeller; evidence: labels update-email/labels\.jsonl \(sha256 [0-9a-f]{12}\), verdicts "
                     r"update-email/approvals/[0-9a-f]{64}\.verdicts\.jsonl \(sha256 [0-9a-f]{12}\)$",
                     gated.output, re.M), gated.output
    assert re.search(r"^FAIL faithfulness: [\d.]+ \(min 1\.0\)", gated.output, re.M)
    assert re.search(r"^PASS task_success: 0\.333 \(min 0\.33\)", gated.output, re.M)
    assert gate_of(gated.output).rstrip().endswith("gate: FAILED")


def test_a_disagreeing_judge_is_refused_and_only_advises(project):
    with ScriptedOpenAIServer(answer_the_opposite) as server:
        calibrated = calibrate(project, server)
        assert calibrated.exit_code == 1  # refused
        [record] = approvals(project)
        assert record["axes"]["faithfulness"]["decision"] == "refused"
        assert "below 0.6" in " ".join(record["axes"]["faithfulness"]["reasons"])
        gated, _ = run_and_gate(project, server)
    assert re.search(r"^ADVISORY faithfulness: n/a \(min 1\.0\) over 0 gating verdict", gated.output, re.M)
    section = gated.output.split("ADVISORY faithfulness: ")[-1].split("task_success")[0]
    assert "advisory" in section and "it does not clear the rule" in section and "below 0.6" in section
    assert "judgekit calibrate SUITE --labels" in section


def test_a_judge_without_approval_is_advisory_and_says_how_to_approve(project):
    with ScriptedOpenAIServer(answer_like_the_labels) as server:
        gated, _ = run_and_gate(project, server)
    assert "no approval record matches this judge's fingerprint" in gated.output
    assert "judgekit calibrate SUITE --labels" in gated.output


def test_a_changed_rubric_voids_the_approval(project):
    with ScriptedOpenAIServer(answer_like_the_labels) as server:
        assert calibrate(project, server).exit_code == 0
        rubric = project / "rubrics/update-email.yaml"
        rubric.write_text(rubric.read_text().replace("version: 1.0.0", "version: 1.1.0").replace(
            "Claims about the new address", "Claims about the new email address"))
        assert cli(project, "rubric", "lock", str(rubric), "--lock", str(project / "rubrics/rubrics.lock")).exit_code == 0
        gated, _ = run_and_gate(project, server)
    assert "no approval record matches" in gated.output


def test_recalibration_compares_with_the_previous_approval(project):
    with ScriptedOpenAIServer(answer_like_the_labels) as server:
        assert calibrate(project, server).exit_code == 0
        port = server.port
    with ScriptedOpenAIServer(answer_the_opposite, port=port) as server:
        # Same fingerprint (same model, same endpoint), another behaviour: what a silent
        # provider-side change looks like.
        again = calibrate(project, server, "--compare", "--cache-dir", str(project / "cache-2"))
    assert again.exit_code == 1
    assert "DRIFT ALARM faithfulness" in again.output
    assert "fell below the previous interval" in again.output
    assert re.search(r"faithfulness: mean human 0\.\d+, mean judge 0\.\d+ on 24 items", again.output)
    [record] = approvals(project)
    [drift] = record["drift"]
    assert drift["alarm"] and drift["kappa_change"] < -1.0


def test_gate_refuses_what_is_not_a_run_record(project):
    bad = project / "run.json"
    bad.write_text("{}")
    result = CliRunner().invoke(main, ["gate", str(bad)])
    assert result.exit_code == 2 and "not a run record" in result.output


def test_input_errors_fail_the_gate(project, tmp_path):
    broken = project / "examples/email-update/trajectories.jsonl"
    broken.write_text(broken.read_text().replace("snapshots/after-ok.db", "snapshots/missing.db", 1))
    out = project / "run.json"
    ran = CliRunner().invoke(main, ["run", str(project / "examples/email-update"), "--out", str(out), "--no-cache",
                                    "--judge-model", "openai/x-2024-01-01", "--judge-api-base", "http://127.0.0.1:9/v1"])
    assert ran.exit_code == 2
    gated = CliRunner().invoke(main, ["gate", str(out)])
    assert gated.exit_code == 1
    assert "1 trajectories could not be scored" in gated.output


def test_the_spot_check_finds_a_changed_and_a_dropped_recorded_verdict(project):
    """calibrate --spot-check re-asks the recorded questions past the cache: an untouched
    calibration holds (exit 0); a recorded answer edited, or one dropped, is drift or tampering
    (exit 1, naming the item)."""
    labels = project / "calibration/update-email/labels.jsonl"
    sample = project / "examples/email-update/calibration.yaml"
    with ScriptedOpenAIServer(answer_like_the_labels) as server:
        assert calibrate(project, server).exit_code == 0
        check = ["calibrate", str(sample), "--labels", str(labels), "--spot-check", "24", *judge_args(server)]
        clean = cli(project, *check)
        assert clean.exit_code == 0, clean.output
        assert "24 of 24 recorded question(s) re-asked: 24 the same, 0 different" in clean.output
        assert clean.output.rstrip().endswith("spot check: the recorded verdicts hold")
        [verdicts] = (project / "calibration/update-email/approvals").glob("*.verdicts.jsonl")
        lines = [json.loads(line) for line in verdicts.read_text().splitlines()]
        changed = next(line for line in lines if line["score"] == 1.0)
        changed["score"] = 0.0
        dropped = lines.pop(1)
        moved = lines[2]
        lines[2], lines[3] = {**moved, "trajectory_id": lines[3]["trajectory_id"]}, \
            {**lines[3], "trajectory_id": moved["trajectory_id"]}
        padded = {**lines[0], "repeat": 7}
        padded.pop("cache_key")
        verdicts.write_text("".join(json.dumps(line) + "\n" for line in [*lines, padded]))
        tampered = cli(project, *check)
    assert tampered.exit_code == 1, tampered.output
    assert (f"DIFFERS {changed['trajectory_id']} faithfulness (repeat 0): recorded score 0.000, now score 1.000"
            in tampered.output)
    assert f"1 labelled question(s) with no recorded verdict (first: {dropped['trajectory_id']} faithfulness)" \
        in tampered.output
    assert f"1 recorded verdict(s) the suite no longer asks (first: {padded['trajectory_id']} faithfulness (no " \
           "question))" in tampered.output
    assert "2 recorded verdict(s) filed under another item than their question (first: " in tampered.output
    assert "DRIFT OR TAMPERING" in tampered.output


def test_labels_dated_in_the_future_are_refused_before_any_judge_is_asked(project):
    labels = project / "calibration/update-email/labels.jsonl"
    lines = labels.read_text().splitlines()
    lines[3] = lines[3].replace('"labeled_at": "2026-11-30T09:00:00Z"', '"labeled_at": "2999-01-01T00:00:00Z"')
    labels.write_text("\n".join(lines) + "\n")
    with ScriptedOpenAIServer(answer_like_the_labels) as server:
        result = calibrate(project, server)
        assert server.requests == []
    assert result.exit_code == 2 and "labels.jsonl: 'cal-04' on faithfulness is labelled 2999-01-01" in result.output


def test_labels_outside_the_calibration_folder_are_refused_before_any_judge_is_asked(project):
    outside = project / "labels.jsonl"
    outside.write_text((project / "calibration/update-email/labels.jsonl").read_text())
    with ScriptedOpenAIServer(answer_like_the_labels) as server:
        result = cli(project, "calibrate", str(project / "examples/email-update/calibration.yaml"), "--labels",
                     str(outside), "--cache-dir", str(project / "cache"), *judge_args(server))
        assert server.requests == []
    assert result.exit_code == 2 and "must lie in the calibration folder" in result.output


@pytest.mark.parametrize("claimed", ["../../nowhere", "/tmp", ""])
def test_gate_reads_the_suites_calibration_folder_never_the_records(project, tmp_path, claimed):
    """A record naming another calibration folder (found by a hostile review: an empty one made
    the approved judge that fails faithfulness advisory, and the gate passed)."""
    with ScriptedOpenAIServer(answer_like_the_labels) as server:
        assert calibrate(project, server).exit_code == 0
        gated, _ = run_and_gate(project, server)
    assert gated.exit_code == 1 and re.search(r"^FAIL faithfulness: [\d.]+ \(min 1\.0\) over 9 gating", gated.output,
                                              re.M)
    lines = (project / "run.json").read_text().splitlines()
    header = json.loads(lines[0])
    header["header"]["calibration_dir"] = claimed
    (project / "run.json").write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    again = cli(project, "gate", str(project / "run.json"))
    assert again.exit_code == 1 and gate_of(gated.stdout).endswith(again.stdout), (gated.stdout, again.stdout)  # the same gate
    assert re.search(r"^FAIL faithfulness: [\d.]+ \(min 1\.0\) over 9 gating", again.stdout, re.M), again.output
    imported = cli(project, "history", "import", str(project / "run.json"), "--history", str(tmp_path / "h.sqlite"))
    assert imported.exit_code == 2 and "calibration folder" in imported.output


@pytest.mark.parametrize("change", [
    pytest.param(lambda d: d.update(format_version=3.0), id="a_version_as_a_float"),
    pytest.param(lambda d: d["axes"]["faithfulness"].update(n="24"), id="a_count_as_text"),
    pytest.param(lambda d: d.update(reviewed_by="me"), id="an_unknown_field"),
    pytest.param(lambda d: d["axes"]["faithfulness"].update(bounds_seed=19), id="the_record_names_its_bounds_seed"),
    pytest.param(lambda d: d.clear(), id="an_empty_object"),
])
def test_a_malformed_approval_record_leaves_its_judge_advisory_with_the_reason_and_the_gate_goes_on(project, change):
    """Issue 26: a record that cannot be re-derived is advisory with the reason, never approved,
    and never stops the gate: the other axes are gated as ever (at the example's minimums, which pass)."""
    with ScriptedOpenAIServer(answer_like_the_labels) as server:
        assert calibrate(project, server).exit_code == 0
        [path] = sorted((project / "calibration/update-email/approvals").glob("*.json"))
        data = json.loads(path.read_text())
        change(data)
        path.write_text(json.dumps(data))
        gated, _ = run_and_gate(project, server)
    out = project / "run.json"
    for result in (gated, cli(project, "gate", str(out))):
        assert result.exit_code == 0, result.output  # the gate passed, not refused (2)
        assert re.search(r"^ADVISORY faithfulness: n/a \(min 1\.0\) over 0 gating verdict", result.output, re.M)
        section = result.output.split("ADVISORY faithfulness: ")[-1].split("task_success")[0]
        assert "not an approval record" in section and path.name in section, result.output
        assert re.search(r"^PASS task_success: 0\.333 \(min 0\.33\)", result.output, re.M)
        assert gate_of(result.output).rstrip().endswith("gate: PASSED")
