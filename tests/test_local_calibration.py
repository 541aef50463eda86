"""The embedded local judge, measured for real against the example's human labels, is refused.

SmolLM2-135M answers in the compact schema, so nearly every verdict is valid, but it agrees
with people at about chance: calibration must measure that on all 24 items (once) and refuse
it, and a run judged by it must leave faithfulness advisory. This runs the real llama.cpp
server through litellm; the run of three afterwards is answered by the cache.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from judgekit.cache.store import DEFAULT_CACHE_DIR
from judgekit.cli import main as cli_main
from judgekit.run.record import read_run

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


def judgekit(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.pop("JUDGEKIT_LOCAL_THREADS", None)  # the default thread counts: the verdicts anyone gets
    return subprocess.run(
        [sys.executable, "-m", "judgekit", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=900
    )


def test_local_judge_is_refused_and_its_axis_stays_advisory(tmp_path):
    for part in ("examples", "rubrics", "calibration"):
        shutil.copytree(ROOT / part, tmp_path / part)
    calibrated = judgekit(
        "calibrate", "examples/email-update/calibration.yaml",
        "--labels", "calibration/update-email/labels.jsonl", "--compare", cwd=tmp_path,
    )
    print(calibrated.stdout, calibrated.stderr[-2000:])
    assert calibrated.returncode == 1, calibrated.stderr  # refused, not crashed
    [path] = (tmp_path / "calibration/update-email/approvals").glob("*.json")
    record = json.loads(path.read_text())
    decision = record["axes"]["faithfulness"]
    assert decision["decision"] == "refused"
    assert record["judge"]["model_pin"].startswith("local/smollm2-135m-instruct@sha256:")
    # Measured facts, not hopes: at least 90% of the 24 verdicts are valid (an unscored
    # verdict would leave its item out of n), and kappa, with its interval, is far from 0.6.
    labelled = len((tmp_path / "calibration/update-email/labels.jsonl").read_text().splitlines())
    assert labelled == 24
    assert decision["n"] >= 0.9 * labelled, decision
    kappa = decision["kappa"]
    assert kappa["value"] is not None and kappa["low"] <= kappa["value"] <= kappa["high"], kappa
    assert kappa["high"] < 0.6, kappa
    print(f"local judge: {decision['n']}/{labelled} valid, kappa {kappa['value']:.3f} "
          f"[{kappa['low']:.3f}, {kappa['high']:.3f}], {decision['decision']}")

    # A run of three of those trajectories with the same judge: faithfulness is shown but
    # advisory, and the gate names the refusal and the command that would approve a judge.
    suite = tmp_path / "examples/email-update/three.yaml"
    sample = tmp_path / "examples/email-update/calibration-sample.jsonl"
    (suite.parent / "three.jsonl").write_text("\n".join(sample.read_text().splitlines()[:3]) + "\n")
    suite.write_text(
        (tmp_path / "examples/email-update/calibration.yaml").read_text().replace("calibration-sample.jsonl", "three.jsonl")
    )
    # In process (the verdicts come from the cache calibration filled: no judge call, so no
    # second interpreter and litellm import is needed to show it).
    run = CliRunner().invoke(cli_main, ["run", str(suite), "--gate", "--out", str(tmp_path / "run.json"),
                                        "--cache-dir", str(tmp_path / DEFAULT_CACHE_DIR)])
    print(run.output[-3000:])
    assert run.exit_code in (0, 1), run.output
    assert "the judge is refused: re-derived from its labels and verdicts" in run.output
    assert "judgekit calibrate SUITE --labels" in run.output
    written = read_run(tmp_path / "run.json")
    assert written.ledger.calls == 0 and written.ledger.cache_hits == 3  # calibration's verdicts, reused
    results = written.model_dump(mode="json")["results"]
    assert {r["axes"]["faithfulness"]["judge"]["model_pin"] for r in results} == {record["judge"]["model_pin"]}
