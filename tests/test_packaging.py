"""The wheel a user installs (``pipx install judgekit-agents``, ``uvx --from judgekit-agents``):
built offline from the declared sources, it holds every file of the package (prompts, report
assets, ``py.typed``) and the licence text, and once installed into a fresh environment its
``judgekit`` command runs the example, reading its prompts and report assets from the wheel.

The build uses the environment's setuptools (no build isolation, no index: no network); the
fresh venv sees the system's packages and gets the wheel alone (``--no-deps``), so nothing is
downloaded.
"""

from __future__ import annotations

import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # before anything imports litellm

import shutil
import subprocess
import sys
import tomllib
import zipfile
from importlib.metadata import version
from pathlib import Path

import pytest

from judgekit.testing import ScriptedOpenAIServer
from test_judge_runner import MODEL, scripted_judge

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
DIST = PYPROJECT["project"]["name"].replace("-", "_")
VERSION = PYPROJECT["project"]["version"]


def package_files() -> set[str]:
    """Every file of the ``judgekit`` package in the source tree, as wheel paths."""
    return {path.relative_to(ROOT).as_posix() for path in (ROOT / "judgekit").rglob("*")
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    if int(version("setuptools").split(".")[0]) < 77:
        pytest.fail(f"setuptools {version('setuptools')} cannot build the wheel offline (PEP 639 needs 77): "
                    "install the test extras, pip install -e '.[test]'", pytrace=False)
    src = tmp_path_factory.mktemp("src")  # only what the build reads: no stale build/ or egg-info
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "judgekit", src / "judgekit", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                    "--quiet", "--wheel-dir", str(out), str(src)], check=True, env=_child_env())
    (built,) = out.glob("*.whl")
    return built


def _child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL")}
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def test_the_wheel_holds_every_package_file_and_the_licence(wheel):
    assert wheel.name == f"{DIST}-{VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        shipped = {name for name in names if name.startswith("judgekit/")}
        missing = package_files() - shipped
        assert not missing, f"files of the package the wheel leaves out: {sorted(missing)}"
        for needed in ("judgekit/py.typed", "judgekit/prompts/judge_v2.txt", "judgekit/prompts/judge_compact_v1.txt",
                       "judgekit/report/assets/dashboard.css", "judgekit/report/assets/dashboard.js"):
            assert needed in shipped
        info = f"{DIST}-{VERSION}.dist-info"
        assert archive.read(f"{info}/licenses/LICENSE") == (ROOT / "LICENSE").read_bytes()
        metadata = archive.read(f"{info}/METADATA").decode()
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
    assert "License-Expression: MIT" in metadata.splitlines()
    assert "License-File: LICENSE" in metadata.splitlines()


def test_the_installed_wheel_runs_the_example(wheel, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], check=True)
    python, judgekit = venv / "bin" / "python", venv / "bin" / "judgekit"
    # --ignore-installed: the system's editable judgekit-agents must not count as "already satisfied".
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps",
                    "--no-index", "--ignore-installed", str(wheel)], check=True, env=_child_env())

    def installed(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(args, cwd=tmp_path, env=_child_env(), capture_output=True, text=True, timeout=300)

    where = installed(str(python), "-c", "import judgekit; print(judgekit.__file__)")
    assert Path(where.stdout.strip()).is_relative_to(venv), where  # the wheel's copy, not the checkout's
    shown = installed(str(judgekit), "--version")
    assert shown.returncode == 0 and shown.stdout.strip() == f"judgekit, version {VERSION}", shown
    assert "Score AI-agent trajectories" in installed(str(judgekit), "--help").stdout

    # The example, its faithfulness judged by the scripted server: the prompts come from the wheel,
    # and the dashboard's CSS and script too.
    with ScriptedOpenAIServer(scripted_judge) as server:
        ran = installed(str(judgekit), "run", str(ROOT / "examples" / "email-update"), "--judge-model", MODEL,
                        "--judge-api-base", server.base_url, "--html", "dashboard.html")
        asked = server.request_count
    assert ran.returncode == 0, ran.stderr
    assert "task_success: 9 scored, 3 passed" in ran.stdout
    assert asked > 0 and "faithfulness: 9 scored" in ran.stdout
    page = (tmp_path / "dashboard.html").read_text()
    css = (ROOT / "judgekit" / "report" / "assets" / "dashboard.css").read_text()
    assert css.strip().splitlines()[0] in page
