"""examples/ci: the GitHub Actions workflows validate against SchemaStore's github-workflow
schema (vendored in tests/data/schemas), use judgekit's action (``action.yml``, tested in
test_github_action.py) pinned to this release, and give it inputs that make a command line the
real CLI accepts."""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import tomllib
from pathlib import Path
from typing import Any

import click
import pytest
import yaml
from click.testing import CliRunner
from jsonschema import Draft7Validator

from judgekit.cli import github_action
from judgekit.cli import main as cli_main

ROOT = Path(__file__).resolve().parent.parent
CI = ROOT / "examples" / "ci"
SCHEMA = ROOT / "tests" / "data" / "schemas" / "github-workflow.json"
WORKFLOWS = {"push": CI / "judgekit.yml", "nightly": CI / "judgekit-nightly.yml"}
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
JUDGEKIT_ACTION = f"judgekit/judgekit@v{VERSION}"
"""This repository's action at this release: it installs judgekit at its own version."""
ALLOWED_ACTIONS = {"actions/checkout@v4", JUDGEKIT_ACTION}
HISTORY = ".judgekit/history.sqlite"
# The flags every CI run passes (the action sets them); the nightly adds --no-cache.
CI_FLAGS = ["--gate", "--compare", "--history", "--junit", "--markdown", "--html", "--out"]


# --- reading a workflow as GitHub does ------------------------------------------------------------


class WorkflowLoader(yaml.SafeLoader):
    """YAML as GitHub Actions reads it: only true/false are booleans (YAML 1.1 would read the
    key ``on`` as True), and a repeated key is an error, not silently the last one."""

    def construct_mapping(self, node, deep=False):
        keys = [self.construct_object(key, deep=deep) for key, _ in node.value]
        repeated = sorted({str(k) for k in keys if keys.count(k) > 1})
        if repeated:
            raise yaml.constructor.ConstructorError(None, None, f"repeated key(s) {repeated}", node.start_mark)
        return super().construct_mapping(node, deep=deep)


WorkflowLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
WorkflowLoader.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
                                     list("tTfF"))


def load_workflow(path: Path) -> dict[str, Any]:
    return yaml.load(path.read_text(encoding="utf-8"), Loader=WorkflowLoader)  # noqa: S506 - a SafeLoader


@pytest.fixture(scope="module")
def validator() -> Draft7Validator:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    assert schema["$schema"].startswith("http://json-schema.org/draft-07/schema")
    Draft7Validator.check_schema(schema)
    return Draft7Validator(schema)


def steps_of(workflow: dict[str, Any]) -> list[dict[str, Any]]:
    [job] = workflow["jobs"].values()
    return job["steps"]


def step_using(workflow: dict[str, Any], action: str) -> tuple[int, dict[str, Any]]:
    [found] = [(i, s) for i, s in enumerate(steps_of(workflow)) if s.get("uses", "").split("@")[0] == action]
    return found


def judgekit_command(workflow: dict[str, Any], command: str) -> tuple[int, list[str]]:
    """The step that runs ``judgekit COMMAND`` (once in the workflow), and its command line split
    as the shell would, with the workflow's ``env`` put in for its variables."""
    found = [(i, line) for i, s in enumerate(steps_of(workflow)) for line in s.get("run", "").splitlines()
             if line.strip().startswith(f"judgekit {command} ")]
    [(index, line)] = found
    for name, value in workflow.get("env", {}).items():
        line = line.replace(f'"${name}"', shlex.quote(str(value)))
    return index, shlex.split(line)


def action_step(workflow: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    return step_using(workflow, JUDGEKIT_ACTION.split("@")[0])


def action_inputs(workflow: dict[str, Any]) -> github_action.Inputs:
    """The judgekit action's inputs in ``workflow`` as the action's run step reads them: its
    ``with:`` (``${{ env.NAME }}`` from the workflow's env), else action.yml's defaults."""
    declared = load_workflow(ROOT / "action.yml")["inputs"]
    given = {name: spec.get("default", "") for name, spec in declared.items()}
    for name, value in action_step(workflow)[1].get("with", {}).items():
        assert name in declared, f"the action has no input {name!r}"
        given[name] = re.sub(r"\$\{\{\s*env\.([A-Za-z_]+)\s*\}\}", lambda m: workflow["env"][m.group(1)], str(value))
    return github_action.Inputs.read({variable: given[name] for name, variable in github_action.INPUTS.items()})


def run_command_line(workflow: dict[str, Any]) -> list[str]:
    """``judgekit run ...`` as the action runs it for ``workflow``."""
    return ["judgekit", "run", *github_action.run_command(action_inputs(workflow))]


# --- the schema -----------------------------------------------------------------------------------


def test_the_vendored_schema_is_whole_and_self_contained():
    digest = hashlib.sha256(SCHEMA.read_bytes()).hexdigest()
    assert f"`{digest}`" in (SCHEMA.parent / "README.md").read_text(encoding="utf-8")  # the copy its README names
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    refs = re.findall(r'"\$ref":\s*"([^"]*)"', SCHEMA.read_text(encoding="utf-8"))
    assert refs and all(ref.startswith("#/") for ref in refs)  # nothing to fetch
    for ref in set(refs):  # every internal ref lands somewhere
        node = schema
        for part in ref[2:].split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]
    assert {"on", "jobs"} <= set(schema["properties"]) and schema["required"] == ["on", "jobs"]


def test_yaml_11_would_lose_the_on_key():
    text = WORKFLOWS["push"].read_text(encoding="utf-8")
    assert True in yaml.safe_load(text) and "on" not in yaml.safe_load(text)
    assert "on" in load_workflow(WORKFLOWS["push"])
    with pytest.raises(yaml.YAMLError, match="repeated key"):
        yaml.load("a: 1\na: 2\n", Loader=WorkflowLoader)  # noqa: S506


@pytest.mark.parametrize("name", list(WORKFLOWS))
def test_workflow_validates_against_schemastores_schema(validator, name):
    workflow = load_workflow(WORKFLOWS[name])
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(workflow)]
    assert errors == []


@pytest.mark.parametrize("break_it", [
    pytest.param(lambda w: w["jobs"]["judge"].pop("runs-on"), id="job_without_runs_on"),
    pytest.param(lambda w: w.update({"on": {"push": 5}}), id="push_filter_not_a_mapping"),
    pytest.param(lambda w: steps_of(w)[0].update({"uses": "actions/checkout@v4", "run": "true"}), id="uses_and_run"),
    pytest.param(lambda w: w.update({"True": w.pop("on")}), id="on_read_as_yaml_11_boolean"),
])
def test_the_schema_catches_a_broken_workflow(validator, break_it):
    workflow = load_workflow(WORKFLOWS["push"])
    break_it(workflow)
    assert list(validator.iter_errors(workflow))


# --- what the workflows do ------------------------------------------------------------------------


def test_triggers():
    assert set(load_workflow(WORKFLOWS["push"])["on"]) == {"push", "pull_request"}
    nightly = load_workflow(WORKFLOWS["nightly"])["on"]
    assert set(nightly) == {"schedule", "workflow_dispatch"}
    [cron] = [entry["cron"] for entry in nightly["schedule"]]
    assert len(cron.split()) == 5 and cron.split()[2:] == ["*", "*", "*"]  # every day


@pytest.mark.parametrize("name", list(WORKFLOWS))
def test_only_pinned_well_known_actions_and_judgekits_at_this_release(name):
    workflow = load_workflow(WORKFLOWS[name])
    used = {s["uses"] for s in steps_of(workflow) if "uses" in s}
    assert used == ALLOWED_ACTIONS  # setting up Python, the history cache and the uploads are the action's
    checkout_at, _ = step_using(workflow, "actions/checkout")
    assert checkout_at < action_step(workflow)[0]
    wanted = {"contents": "read", "pull-requests": "write"} if name == "push" else {"contents": "read"}
    assert workflow["permissions"] == wanted  # the push workflow comments on pull requests; the nightly never does


def test_both_workflows_share_one_history_in_the_actions_cache():
    inputs = [action_inputs(load_workflow(path)) for path in WORKFLOWS.values()]
    assert {i.history for i in inputs} == {HISTORY} and all(i.history_cache for i in inputs)
    assert inputs[0].pr_comment  # on pull requests, the summary comment
    names = {action_step(load_workflow(path))[1].get("with", {}).get("artifact-name") for path in WORKFLOWS.values()}
    assert len(names) == 2  # two artifacts, told apart


@pytest.mark.parametrize("name", list(WORKFLOWS))
def test_secrets_only_through_env(name):
    workflow = load_workflow(WORKFLOWS[name])
    text = WORKFLOWS[name].read_text(encoding="utf-8")
    uses_of_secrets = re.findall(r"\$\{\{\s*secrets\.([A-Z_]+)\s*\}\}", text)
    assert uses_of_secrets  # the judge's key
    assert "OPENAI_API_KEY" in action_step(workflow)[1]["env"]  # the action's steps see it through env
    for step in steps_of(workflow):
        assert "secrets." not in step.get("run", "") and "secrets." not in json.dumps(step.get("with", {}))
        for variable, value in step.get("env", {}).items():
            if "secrets." in str(value):
                assert value == f"${{{{ secrets.{variable} }}}}"
                assert variable not in "".join(s.get("run", "") for s in steps_of(workflow))  # never echoed


# --- the judgekit command line against the real CLI -----------------------------------------------
# These read the flags off `judgekit run` itself, for the command line the action builds from each
# workflow's inputs.


@pytest.mark.parametrize("name", list(WORKFLOWS))
def test_run_help_lists_every_flag_the_workflow_uses(name):
    args = run_command_line(load_workflow(WORKFLOWS[name]))
    flags = [a for a in args if a.startswith("--")]
    assert set(CI_FLAGS) <= set(flags) and ("--no-cache" in flags) == (name == "nightly")
    result = CliRunner().invoke(cli_main, ["run", "--help"])
    assert result.exit_code == 0
    missing = [f for f in flags if not re.search(rf"(^|[\s,]){re.escape(f)}([\s,=]|$)", result.output, re.M)]
    assert missing == [], f"`judgekit run --help` does not list {missing}"


@pytest.mark.parametrize("name", list(WORKFLOWS))
def test_the_workflow_command_line_parses_with_the_real_cli(name):
    workflow = load_workflow(WORKFLOWS[name])
    try:
        _, params = github_action.checked_command(action_inputs(workflow))  # parsed and type-checked, not run
    except github_action.InputError as exc:
        pytest.fail(f"judgekit run rejects the workflow's command line: {exc}")
    assert params["suite"] == Path(workflow["env"]["JUDGEKIT_SUITE"])
    assert params["do_compare"] is True and params["apply_gate"] is True
    assert params["baseline"] == "last-green"  # the default baseline
    assert params["history_path"] == Path(HISTORY)
    assert params["no_cache"] is (name == "nightly")


def test_the_nightly_spot_checks_the_judges_calibration_after_the_run():
    """The trust root (docs/explanation/approval-statistics.md): the nightly job re-asks a random sample of the recorded calibration
    questions (``calibrate --spot-check``), with the run's suite and judge key, even after a red run."""
    workflow = load_workflow(WORKFLOWS["nightly"])
    run_at, action = action_step(workflow)
    check_at, args = judgekit_command(workflow, "calibrate")
    step = steps_of(workflow)[check_at]
    assert check_at > run_at and step["if"] == "always()"
    assert step["env"] == action["env"]  # the judge's key, through env as every secret
    try:
        ctx = cli_main.commands["calibrate"].make_context("calibrate", args[2:])  # parsed and type-checked, not run
    except click.UsageError as exc:
        pytest.fail(f"judgekit calibrate rejects the workflow's command line: {exc}")
    suite = Path(workflow["env"]["JUDGEKIT_SUITE"])
    assert ctx.params["suite"] == suite == Path(action_inputs(workflow).suite)
    assert ctx.params["spot_check_n"] >= 1 and "--seed" not in args  # a sample nobody can know in advance
    assert suite.parent / "calibration" in ctx.params["labels_path"].parents  # where calibrate keeps labels


def test_the_readmes_command_line_is_the_one_the_action_runs():
    """examples/ci/README.md shows what the action runs, for a workflow that does it by hand."""
    text = (CI / "README.md").read_text(encoding="utf-8")
    [block] = re.findall(r"```sh\n(judgekit run .*?)\n```", text, re.S)
    shown = shlex.split(block.replace("\\\n", " "))
    defaults = {name: spec.get("default", "") for name, spec in load_workflow(ROOT / "action.yml")["inputs"].items()}
    inputs = github_action.Inputs.read({variable: "$SUITE" if name == "suite" else defaults[name]
                                        for name, variable in github_action.INPUTS.items()})
    assert shown == ["judgekit", "run", *github_action.run_command(inputs)]
