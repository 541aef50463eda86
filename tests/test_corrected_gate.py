"""Task success in judge mode: an approved judge gates, and the gate corrects its pass rate.

The world is a JSON document whose ``/orders`` list gains a shipped order or not; humans label
pass exactly when it did. The scripted judge reads the end-state diff in its prompt and gets a
few items wrong on purpose, so TPR and TNR are below 1 and the Rogan-Gladen correction moves.
(Changed on purpose for issue 14: approval rests on 95% lower bounds, so the calibration set
is 120 labelled items, not 30: 30 items with 3 errors no longer certify kappa >= 0.6.)
"""

from __future__ import annotations

import json
import re

from click.testing import CliRunner

from judgekit.cli import main
from judgekit.run.record import read_run
from judgekit.testing import Reply, ScriptedOpenAIServer

RUBRIC = """\
id: ship-order
version: 1.0.0
registered: 2026-11-30
task_success:
  guide: |
    Pass when the order the task names ends with status shipped in the end state, and fail
    otherwise. Judge from the diff only.
  judge: true
"""
WRONG_ON = {"t07", "t13", "t21", "t33", "t52"}  # where the scripted judge errs


def trajectory(i: int) -> dict:
    shipped = i % 3 != 0
    after = {"orders": [{"id": i, "status": "shipped" if shipped else "pending"}]}
    return {
        "id": f"t{i:02d}", "prompt": f"Ship order {i}.", "output": "Done.",
        "world": {"before": {"json": {"orders": [{"id": i, "status": "pending"}]}}, "after": {"json": after}},
    }


def scripted_judge(request: dict, n: int) -> Reply:
    user = request["messages"][1]["content"]
    shipped = "shipped" in "".join(re.findall(r"^D\d+ = (.*)$", user, re.M))
    tid = re.search(r"Ship order (\d+)", user).group(1)
    verdict = shipped != (f"t{int(tid):02d}" in WRONG_ON)
    return Reply.ok(json.dumps({"reasons": ["read the diff"], "verdict": "pass" if verdict else "fail"}))


def test_approved_judge_gates_and_its_pass_rate_is_corrected(tmp_path):
    (tmp_path / "rubric.yaml").write_text(RUBRIC)
    (tmp_path / "runs.jsonl").write_text("".join(json.dumps(trajectory(i)) + "\n" for i in range(150)))
    (tmp_path / "suite.yaml").write_text(
        "name: ship\nrubrics: [rubric.yaml]\ntrajectories: [{file: runs.jsonl, rubric: ship-order}]\n"
        "gate: {min_task_success_rate: 0.5}\n"
    )
    labels = tmp_path / "calibration/ship-order/labels.jsonl"
    labels.parent.mkdir(parents=True)
    labels.write_text("".join(
        json.dumps({"trajectory_id": f"t{i:02d}", "axis": "task_success", "label": "pass" if i % 3 else "fail",
                    "labeler": "ops", "labeled_at": "2026-11-30T00:00:00Z"}) + "\n"
        for i in range(120)
    ))
    runner = CliRunner()
    with ScriptedOpenAIServer(scripted_judge) as server:
        judge = ["--judge-model", "openai/ship-judge-2024-08-06", "--judge-api-base", server.base_url,
                 "--cache-dir", str(tmp_path / "cache")]
        calibrated = runner.invoke(main, ["calibrate", str(tmp_path / "suite.yaml"), "--labels", str(labels), *judge])
        assert calibrated.exit_code == 0, calibrated.output
        assert "task_success: APPROVED" in calibrated.output
        gated = runner.invoke(main, ["run", str(tmp_path / "suite.yaml"), "--gate", "--out", str(tmp_path / "run.json"), *judge])
    assert "over 150 gating verdict" in gated.output
    match = re.search(r"corrected pass rate ([\d.]+) \[([\d.]+), ([\d.]+)\] \(observed ([\d.]+)\)", gated.output)
    assert match, gated.output
    corrected, low, high, observed = map(float, match.groups())
    judge_passes = sum(
        next(c for c in r["axes"]["task_success"]["checks"] if c["source"] == "judge")["passed"]
        for r in read_run(tmp_path / "run.json").model_dump(mode="json")["results"]
    )
    assert observed == round(judge_passes / 150, 3)
    assert 0 <= low <= corrected <= high <= 1
    assert corrected != observed  # the judge's known errors move the estimate
    assert gated.exit_code == 0 and "\ngate: PASSED\n" in gated.output
    assert gated.output.rstrip().splitlines()[-1] == "GREEN: the gate passed"  # the run's last line
