"""The judge prompts of the example, pinned byte for byte: a prompt change is a visible diff.

Rewrite the snapshots after an intended change with::

    JUDGEKIT_UPDATE_SNAPSHOTS=1 pytest tests/test_prompt_snapshot.py

and review the diff of tests/snapshots/ like any other change (bump RENDER_VERSION or the
template name when the prompt changes: cached verdicts depend on it).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from judgekit.axes.table import axis_named
from judgekit.trajectory import WorldState
from judgekit.cli import main as cli_main
from judgekit.prompt import template_sha256
from judgekit.run.plan import iter_trajectories_of
from judgekit.suite import load_suite

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "email-update"
SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"
TRAJECTORY = "ok"
UPDATE = os.environ.get("JUDGEKIT_UPDATE_SNAPSHOTS") == "1"

CASES = [
    pytest.param("faithfulness", False, [], id="faithfulness"),
    pytest.param("task_success", False, [], id="task_success"),
    pytest.param("task_success", True, ["--show-output"], id="task_success_show_output"),
]


def snapshot_path(axis: str, show_output: bool) -> Path:
    suffix = "_show_output" if show_output else ""
    return SNAPSHOTS / f"email-update_{TRAJECTORY}_{axis}{suffix}.txt"


def rendered(axis: str, show_output: bool) -> str:
    loaded = load_suite(EXAMPLE)
    for rubric, item in iter_trajectories_of(loaded):
        if item.trajectory.id == TRAJECTORY:
            return axis_named(axis).prompt(rubric, item, WorldState(item), show_output).render()
    raise AssertionError(f"no trajectory {TRAJECTORY!r} in the example")


def check_snapshot(path: Path, text: str) -> None:
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode("utf-8"))
        return
    assert path.exists(), f"{path} is missing: run with JUDGEKIT_UPDATE_SNAPSHOTS=1 to write it"
    expected = path.read_bytes().decode("utf-8")
    assert text == expected, (
        f"the rendered prompt differs from {path.name}; if the change is intended, rerun with "
        "JUDGEKIT_UPDATE_SNAPSHOTS=1 and review the diff"
    )


@pytest.mark.parametrize(("axis", "show_output", "flags"), CASES)
def test_prompt_matches_its_snapshot(axis, show_output, flags):
    check_snapshot(snapshot_path(axis, show_output), rendered(axis, show_output))


FULL_JUDGE = "openai/gpt-4o-2024-08-06"
"""A judge that answers in the full form: the snapshots are its prompts (the example's own,
embedded, judge gets the compact ones)."""


def suite_judging(axis: str, root: Path) -> Path:
    """The example, or (task success, which the example scores without a judge) a copy whose
    rubric asks a judge about it: the same guide and trajectories, so the same prompt."""
    if axis != "task_success":
        return EXAMPLE
    from test_judge_runner import example_suite

    return example_suite(root, rubric_update={"task_success.judge": True})


@pytest.mark.parametrize(("axis", "show_output", "flags"), CASES)
def test_prompt_show_prints_exactly_the_snapshot(axis, show_output, flags, tmp_path):
    suite = suite_judging(axis, tmp_path)
    result = CliRunner().invoke(cli_main, ["prompt", "show", str(suite), TRAJECTORY, "--axis", axis,
                                           "--judge-model", FULL_JUDGE, *flags])
    assert result.exit_code == 0, result.output
    assert result.stdout == snapshot_path(axis, show_output).read_text(encoding="utf-8") + "\n"
    assert f"full template, template sha256 {template_sha256('full')}" in result.stderr


def test_prompt_show_prints_the_compact_prompt_the_embedded_judge_gets():
    """The example as it is: its judge is the embedded one, which is sent the compact prompt."""
    result = CliRunner().invoke(cli_main, ["prompt", "show", str(EXAMPLE), TRAJECTORY, "--axis", "faithfulness"])
    assert result.exit_code == 0, result.output
    check_snapshot(SNAPSHOTS / f"email-update_{TRAJECTORY}_faithfulness_compact.txt", result.stdout)
    assert f"compact template, template sha256 {template_sha256('compact')}" in result.stderr


def test_prompt_show_refuses_an_axis_no_judge_is_asked_about():
    result = CliRunner().invoke(cli_main, ["prompt", "show", str(EXAMPLE), TRAJECTORY, "--axis", "task_success"])
    assert result.exit_code == 2
    assert "asks no judge about task_success" in result.stderr and not result.stdout


def test_console_script_prints_exactly_the_snapshot():
    """The installed `judgekit` command, in a real process."""
    proc = subprocess.run(
        ["judgekit", "prompt", "show", str(EXAMPLE), TRAJECTORY, "--axis", "faithfulness", "--judge-model", FULL_JUDGE],
        capture_output=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == snapshot_path("faithfulness", False).read_bytes() + b"\n"


def test_output_is_shown_to_task_success_only_on_request():
    hidden, shown = rendered("task_success", False), rendered("task_success", True)
    blocks = lambda text: [line.split()[1] for line in text.splitlines() if line.startswith("<<<DATA ")]  # noqa: E731
    assert blocks(hidden) == ["task", "diff"]
    assert blocks(shown) == ["task", "diff", "output"]


def test_template_hash_is_pinned_with_the_snapshots():
    """A template edit must come with new snapshots (and so a visible diff)."""
    check_snapshot(SNAPSHOTS / "template_sha256.txt", template_sha256() + "\n")
