"""Defaults from ``[tool.judgekit]`` in a project's pyproject.toml, through the command line:
SUITE, --history and --cache-dir found from a subfolder, paths relative to the file, the
command line and the environment winning, and a malformed table named with its key."""

from __future__ import annotations

import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # before anything imports litellm

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from judgekit.cli import main as cli_main
from judgekit.testing import ScriptedOpenAIServer
from test_judge_runner import MODEL, example_suite, scripted_judge


def cli(*args, env=None):
    result = CliRunner().invoke(cli_main, [str(a) for a in args], catch_exceptions=False, env=env)
    return result.exit_code, result.output


def project(root: Path, table: str) -> Path:
    """``root`` holding a pyproject.toml with ``table`` and an empty subfolder to work in."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text('[project]\nname = "agent"\n\n' + table)
    (root / "src" / "deep").mkdir(parents=True, exist_ok=True)
    return root / "src" / "deep"


def cache_dir_shown(*args) -> Path:
    code, out = cli("cache", "stats", *args)
    assert code == 0, out
    return Path(json.loads(out)["directory"])


def test_run_takes_suite_history_and_cache_from_pyproject(tmp_path, monkeypatch):
    example_suite(tmp_path / "evals" / "email")
    work = project(tmp_path, '[tool.judgekit]\nsuite = "evals/email"\nhistory = "state/runs.sqlite"\n'
                             'cache-dir = "state/verdicts"\n')
    monkeypatch.chdir(work)
    with ScriptedOpenAIServer(scripted_judge) as server:
        code, out = cli("run", "--record", "--judge-model", MODEL, "--judge-api-base", server.base_url)
    assert code in (0, 1), out
    assert "task_success: 9 scored" in out
    history = tmp_path / "state" / "runs.sqlite"
    assert f"in {history}" in out
    assert (tmp_path / "state" / "verdicts").is_dir()
    assert not (work / ".judgekit").exists()  # nothing under the working directory
    code, listed = cli("history", "list", "--json")  # the same history, found the same way
    assert code == 0, listed
    assert [json.loads(line)["suite"] for line in listed.splitlines()] == ["email-update copy"]

    code, help_text = cli("run", "--help")
    assert code == 0
    assert str(history) in "".join(help_text.split())  # the default shown, however wrapped


def test_the_command_line_and_environment_win(tmp_path, monkeypatch):
    work = project(tmp_path, '[tool.judgekit]\ncache-dir = "from-pyproject"\nhistory = "h.sqlite"\n')
    monkeypatch.chdir(work)
    assert cache_dir_shown() == tmp_path / "from-pyproject"
    assert cache_dir_shown("--cache-dir", "mine") == Path("mine")
    code, out = cli("history", "list", env={"JUDGEKIT_HISTORY": str(tmp_path / "env.sqlite")})
    assert code == 2 and "env.sqlite" in out, out
    code, out = cli("history", "list", "--history", tmp_path / "flag.sqlite")
    assert code == 2 and "flag.sqlite" in out, out


def test_the_nearest_pyproject_with_the_table_counts(tmp_path, monkeypatch):
    inner = project(tmp_path / "repo" / "pkg", "[tool.ruff]\nline-length = 120\n")  # no table: passed over
    project(tmp_path / "repo", '[tool.judgekit]\ncache-dir = "outer"\n')
    monkeypatch.chdir(inner)
    assert cache_dir_shown() == tmp_path / "repo" / "outer"
    (tmp_path / "repo" / "pkg" / "pyproject.toml").write_text('[tool.judgekit]\ncache-dir = "inner"\n')
    assert cache_dir_shown() == tmp_path / "repo" / "pkg" / "inner"
    monkeypatch.chdir(tmp_path)  # above both: the built-in default
    assert cache_dir_shown() == Path(".judgekit/cache")


def test_suite_fills_only_a_lone_suite_argument(tmp_path, monkeypatch):
    monkeypatch.chdir(project(tmp_path, '[tool.judgekit]\nsuite = "nowhere"\n'))
    code, out = cli("run")
    assert code == 2 and str(tmp_path / "nowhere") in out, out  # the default was used, and named
    code, out = cli("prompt", "show", "some-id")  # SUITE TRAJECTORY_ID: a default would shift them
    assert code == 2 and "Missing argument 'TRAJECTORY_ID'" in out, out


@pytest.mark.parametrize(("table", "says"), [
    ('[tool.judgekit]\nhistory = 3\n', "[tool.judgekit] history: must be a path (a non-empty string), not 3"),
    ('[tool.judgekit]\ncache-dir = ""\n', "[tool.judgekit] cache-dir: must be a path"),
    ('[tool.judgekit]\ncache_dir = "x"\n', "[tool.judgekit] cache_dir: not a judgekit setting (known: suite, "
                                            "history, cache-dir)"),
    ('[tool]\njudgekit = "evals"\n', "[tool.judgekit] must be a table"),
    ('[tool.judgekit\nsuite = "x"\n', "not valid TOML"),
])
def test_a_malformed_table_is_an_error_naming_the_file_and_key(tmp_path, monkeypatch, table, says):
    monkeypatch.chdir(project(tmp_path, table))
    code, out = cli("cache", "stats")
    assert code == 2, out
    assert out.startswith(f"judgekit: error: {tmp_path / 'pyproject.toml'}: ")
    assert says in out
