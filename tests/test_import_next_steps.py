"""After an import, what next, through the CLI: an import that carries no criteria writes a
suite.yaml to fill in (its trajectories named, the rubric left as FILL-IN, which `judgekit run`
refuses and says what to write there); every import says its next step; a folder without a
suite.yaml says how to make one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from test_importers import CONVERSATION, TAU_RECORDS, write_jsonl, write_tau

from judgekit.cli import main
from judgekit.importers import BUILTIN
from judgekit.suite import RUBRIC_PLACEHOLDER

DATA = Path(__file__).parent / "data"
RUBRIC = """\
id: chat-email
version: 1.0.0
registered: 2026-01-01
description: The agent changes user 1's email.
tool_correctness:
  guide: The email is changed through update_user.
  expected_calls:
    - tool: update_user
      args: {user_id: 1}
"""


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def chat_source(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "chat.jsonl", [{"id": "c1", "messages": CONVERSATION}])


# Every built-in importer: how to make an input for it, and whether the format carries criteria
# (a rubric and so a suite that runs as it is), none (a suite to fill in), or is no trajectories at
# all (LLMBar: labels and judges' verdicts, from ../shared/data only).
IMPORTS = [
    pytest.param("openai-chat", chat_source, "to fill", id="openai-chat"),
    pytest.param("inspect", lambda tmp: DATA / "inspect" / "agent.eval", "to fill", id="inspect"),
    pytest.param("langsmith", lambda tmp: DATA / "langsmith" / "export", "to fill", id="langsmith"),
    pytest.param("otel-genai", lambda tmp: DATA / "otel" / "mixed.jsonl", "to fill", id="otel-genai"),
    pytest.param("tau-bench", lambda tmp: write_tau(tmp / "tau", TAU_RECORDS), "runs", id="tau-bench"),
]


def test_the_table_covers_every_builtin_importer():
    covered = {p.values[0] for p in IMPORTS} | {"tooltalk", "bfcl", "llmbar"}  # those three: ../shared/data
    assert covered == set(BUILTIN)


@pytest.mark.parametrize(("fmt", "source", "suite"), IMPORTS)
def test_every_import_ends_with_a_suite_and_says_what_next(fmt, source, suite, tmp_path):
    out = tmp_path / "out"
    result = cli("import", fmt, source(tmp_path), "--out", out)
    assert result.exit_code == 0, result.output
    written = [Path(line) for line in result.stdout.splitlines()]
    assert out / "suite.yaml" in written
    document = yaml.safe_load((out / "suite.yaml").read_text(encoding="utf-8"))
    trajectory_files = {entry["file"] for entry in document["trajectories"]}
    assert {out / name for name in trajectory_files} <= set(written)
    if suite == "runs":
        assert result.stderr == f"next: judgekit run {out}\n"
        return
    assert {entry["rubric"] for entry in document["trajectories"]} == {RUBRIC_PLACEHOLDER}
    assert f"put its id in {out / 'suite.yaml'} where it says {RUBRIC_PLACEHOLDER}" in result.stderr
    refused = cli("run", out)
    assert refused.exit_code == 2
    line = next(n for n, text in enumerate((out / "suite.yaml").read_text().splitlines(), 1) if RUBRIC_PLACEHOLDER
                in text and not text.startswith("#"))
    assert f"{out / 'suite.yaml'}:{line}: trajectories.0.rubric: {RUBRIC_PLACEHOLDER} is a placeholder: write a " \
           "rubric" in refused.stderr
    assert "file not found" not in refused.stderr


def test_the_suite_to_fill_in_runs_once_filled_in_and_a_reimport_keeps_it(tmp_path):
    source, out = chat_source(tmp_path), tmp_path / "out"
    assert cli("import", "openai-chat", source, "--out", out).exit_code == 0
    # What its comments say: write a rubric, lock it, put its id in place of the placeholder.
    (out / "rubrics").mkdir()
    (out / "rubrics" / "chat-email.yaml").write_text(RUBRIC, encoding="utf-8")
    locked = cli("rubric", "lock", out / "rubrics", "--lock", out / "rubrics" / "rubrics.lock")
    assert locked.exit_code == 0, locked.output
    suite = out / "suite.yaml"
    suite.write_text(suite.read_text(encoding="utf-8").replace(RUBRIC_PLACEHOLDER, "chat-email"), encoding="utf-8")
    run = cli("run", out, "--format", "jsonl", "--no-cache")
    assert run.exit_code == 0, run.output
    [row] = [json.loads(line) for line in run.stdout.splitlines()]
    assert (row["trajectory_id"], row["rubric"]) == ("c1", "chat-email@1.0.0")
    assert row["axes"]["tool_correctness"]["status"] == "scored"  # (get_user is a call the rubric did not expect)

    filled = suite.read_bytes()
    again = cli("import", "openai-chat", source, "--out", out)
    assert again.exit_code == 0 and suite.read_bytes() == filled  # kept: not the placeholder again
    assert again.stdout.splitlines() == [str(out / "trajectories.jsonl")]
    assert again.stderr == f"next: judgekit run {out}\n"


def test_run_on_a_folder_without_a_suite_says_how_to_make_one(tmp_path):
    result = cli("run", tmp_path)
    assert result.exit_code == 2
    assert f"{tmp_path}: this folder holds no suite.yaml: write one with `judgekit init`" in result.stderr
    assert "`judgekit import FORMAT SRC --out FOLDER`, which writes one to fill in" in result.stderr


def test_an_import_of_labels_and_verdicts_says_how_to_measure_the_judges(shared_data, tmp_path):
    out = tmp_path / "lb"
    result = cli("import", "llmbar", shared_data("llmbar") / "Natural", "--out", out)
    assert result.exit_code == 0, result.output
    assert not (out / "suite.yaml").exists()  # no trajectories: nothing for a suite to run
    assert result.stderr.startswith(f"next: measure each judge against the human labels: judgekit agreement "
                                    f"--labels {out}/labels.jsonl --verdicts {out}/verdicts-")
