"""What the code before the run package wrote still works with the code after it.

The code of main before the run package (``BASE``) is taken from git history and run in a
subprocess: its verdict cache must answer every question of a rerun with today's code (zero
calls: cache keys did not change), and its run record (format 1) must be read and gated.
"""

from __future__ import annotations

import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"

import io
import json
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from judgekit.cli import main as cli_main
from judgekit.run.record import read_run
from judgekit.testing import ScriptedOpenAIServer
from test_judge_runner import MODEL, scripted_judge

ROOT = Path(__file__).resolve().parent.parent
BASE = "f74947b5cd183eacfc28c9407fdcab8d1c2f9b7c"  # main before the run package and run record format 2
EXAMPLE = ROOT / "examples" / "email-update"


def old_code(folder: Path) -> Path:
    """judgekit as it was at BASE, unpacked under ``folder`` (skips, or fails in CI, without git history)."""
    try:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", BASE, "judgekit"], capture_output=True, check=True,
                                 timeout=60).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        reason = f"needs the git history of judgekit (commit {BASE[:12]}): {exc}"
        if os.environ.get("JUDGEKIT_REQUIRE_SHARED_DATA") == "1":
            pytest.fail(reason + "; CI runs on a clone, which has it", pytrace=False)
        pytest.skip(reason)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(folder, filter="data")
    return folder


def example_for_old_code(folder: Path) -> Path:
    """The example (and its rubrics) under ``folder``, its suite without the gate: BASE predates
    ``gate.min`` (suite format 2). The gate enters no cache key and no result."""
    for part in ("examples/email-update", "rubrics", "calibration"):
        shutil.copytree(ROOT / part, folder / part)
    suite = folder / "examples/email-update/suite.yaml"
    suite.write_text(re.sub(r"\ngate:\n(  .*\n)+", "\n", suite.read_text()))
    assert "gate" not in suite.read_text().split("#")[0]
    return suite.parent


def run_old(code: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(code)}
    return subprocess.run([sys.executable, "-c", "import sys; from judgekit.cli import main; sys.exit(main())", *args],
                          capture_output=True, text=True, env=env, timeout=300, cwd=code)


def test_a_cache_filled_before_the_run_package_answers_every_question_after_it(tmp_path):
    code = old_code(tmp_path / "old")
    cache = tmp_path / "cache"
    with ScriptedOpenAIServer(scripted_judge) as server:
        old = run_old(code, "run", str(example_for_old_code(tmp_path / "copy")), "--judge-model", MODEL, "--judge-api-base", server.base_url,
                      "--cache-dir", str(cache), "--out", str(tmp_path / "old.json"), "--format", "jsonl")
        assert old.returncode == 0, old.stderr
        assert "judgekit/run" not in old.stderr and (code / "judgekit" / "scoring.py").exists()  # really the old code
        asked_before = server.request_count
        assert asked_before > 0
        new = CliRunner().invoke(cli_main, ["run", str(EXAMPLE), "--judge-model", MODEL, "--judge-api-base",
                                            server.base_url, "--cache-dir", str(cache), "--out",
                                            str(tmp_path / "new.jsonl"), "--format", "jsonl"])
        assert new.exit_code == 0, new.output
        assert server.request_count == asked_before  # zero calls: every key is as it was
    old_rows = {r["trajectory_id"]: r for r in map(json.loads, old.stdout.splitlines())}
    new_record = read_run(tmp_path / "new.jsonl")
    assert new_record.ledger.calls == 0 and new_record.ledger.cache_hits == 9
    for result in new_record.results:
        before = old_rows[result.trajectory_id]["axes"]
        for name, axis in result.axes.items():
            assert axis.score == before[name]["score"], (result.trajectory_id, name)
        assert result.axes["faithfulness"].judge.cache_key == before["faithfulness"]["judge"]["cache_key"]


def test_a_format_1_run_record_is_read_and_gated(tmp_path):
    code = old_code(tmp_path / "old")
    out = tmp_path / "old.json"
    old = run_old(code, "run", str(example_for_old_code(tmp_path / "copy")), "--no-cache", "--judge-model", MODEL, "--judge-api-base",
                  "http://127.0.0.1:9/v1", "--out", str(out))
    # No server listens on port 9: every faithfulness verdict is unscored, the deterministic axes are scored.
    assert out.exists(), old.stderr
    assert json.loads(out.read_text())["format_version"] == 1
    record = read_run(out)
    assert record.format_version == 3 and record.run_id.startswith("v1-") and len(record.results) == 9
    assert record.summary["task_success"].scored == 9
    gated = CliRunner().invoke(cli_main, ["gate", str(out)])
    assert gated.exit_code in (0, 1) and gated.output.rstrip().endswith(("gate: PASSED", "gate: FAILED")), gated.output
    assert "task_success" in gated.output and "tool_correctness" in gated.output
