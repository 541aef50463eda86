"""The GitHub Action's steps (``action.yml`` at the repository root runs them)::

    python -m judgekit.cli.github_action run       judge the suite; write the outputs and the job summary
    python -m judgekit.cli.github_action comment   put the summary on the pull request (one comment, updated)

The action's inputs arrive as environment variables (``INPUTS``: never pasted into a shell line).
``run`` builds the ``judgekit run`` command line (``run_command``: gate, compare, history and
every report into the ``reports`` folder, then the ``args`` input), checks it with the CLI's own
parser before anything runs, and runs it in a child process whose output is the job's log (with
workflow commands turned off, so a trajectory's text cannot issue one). Then it writes the step's
outputs (``OUTPUTS``) and the job summary, and ends 0 whatever judgekit's exit code was: the
action's last step fails the job with that code once the reports, the history and the comment
are published.

The comparison behind ``flagged-axes`` is made again from the run record, the history and the
same policy: the baseline ('last-green' excludes the run itself, now recorded), the noise
estimate and the seeded paired test are the ones the run used, so it is the run's comparison.
"""

from __future__ import annotations

import os
import secrets
import shlex
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import click

from judgekit.ci.exit_codes import EXIT_INPUT, EXIT_OK, MEANINGS
from judgekit.ci.github import GitHub, append_summary, command_text, comment_body, pull_request_number, write_outputs
from judgekit.errors import InputError, JudgekitError
from judgekit.report.markdown import escape

INPUTS = {
    "suite": "INPUT_SUITE",
    "baseline": "INPUT_BASELINE",
    "history": "INPUT_HISTORY",
    "history-cache": "INPUT_HISTORY_CACHE",
    "pr-comment": "INPUT_PR_COMMENT",
    "args": "INPUT_ARGS",
    "reports": "INPUT_REPORTS",
}
"""Input of the action -> the variable the ``run`` step reads it from."""
TOKEN_VARIABLE = "INPUT_GITHUB_TOKEN"
"""The ``comment`` step's token (the ``github-token`` input)."""
SUMMARY_VARIABLE = "JUDGEKIT_SUMMARY"
"""The ``comment`` step's Markdown file (the ``run`` step's ``summary`` output)."""
DEFAULT_HISTORY = ".judgekit/history.sqlite"
"""judgekit's own default (``judgekit run --history``), and the action's."""
DEFAULT_REPORTS = "judgekit-reports"
OUTPUTS = ("exit-code", "gate", "flagged-axes", "record", "summary", "reports", "comment", "save-history")
REPORT_FILES = {"out": "run.jsonl", "junit": "junit.xml", "markdown": "summary.md", "html": "dashboard.html"}
"""The files ``judgekit run`` writes into the reports folder."""
RESERVED = {"out": "--out", "junit": "--junit", "markdown": "--markdown", "html": "--html",
            "history_path": "--history", "baseline": "--baseline", "do_compare": "--compare", "apply_gate": "--gate",
            "do_record": "--record", "dry_run": "--dry-run"}
"""``judgekit run`` parameters the action sets itself: the ``args`` input may not set them again."""


@dataclass(frozen=True)
class Inputs:
    """The action's inputs, checked."""

    suite: str
    baseline: str
    history: str
    history_cache: bool
    pr_comment: bool
    args: tuple[str, ...]
    reports: str

    @classmethod
    def read(cls, environ: Mapping[str, str]) -> Inputs:
        """From ``environ`` (``INPUTS``); InputError naming the input that is wrong."""
        value = {name: environ.get(variable, "").strip() for name, variable in INPUTS.items()}
        if not value["suite"]:
            raise InputError("the `suite` input is required: the suite file (or its folder) to run")
        for name in ("history-cache", "pr-comment"):
            if value[name] not in ("true", "false"):
                raise InputError(f"the `{name}` input is {value[name]!r}: expected true or false")
        try:
            args = tuple(shlex.split(value["args"]))
        except ValueError as exc:
            raise InputError(f"the `args` input does not split as a shell would: {exc}") from None
        if value["suite"].startswith("-"):
            raise InputError(f"the `suite` input is {value['suite']!r}: a path, not an option (put options in `args`)")
        return cls(suite=value["suite"], baseline=value["baseline"], history=value["history"] or DEFAULT_HISTORY,
                   history_cache=value["history-cache"] == "true", pr_comment=value["pr-comment"] == "true",
                   args=args, reports=value["reports"] or DEFAULT_REPORTS)

    def report(self, kind: str) -> Path:
        return Path(self.reports) / REPORT_FILES[kind]


def run_command(inputs: Inputs) -> list[str]:
    """The arguments of ``judgekit run`` (after ``run``) for ``inputs``: the action's own, then
    the ``args`` input."""
    argv = [inputs.suite, "--gate", "--compare", "--history", inputs.history]
    if inputs.baseline:
        argv += ["--baseline", inputs.baseline]
    for kind in REPORT_FILES:
        argv += [f"--{kind}", str(inputs.report(kind))]
    return argv + list(inputs.args)


def _parse(argv: list[str], what: str) -> click.Context:
    from judgekit.cli import main as cli_main

    try:
        return cli_main.commands["run"].make_context("judgekit run", list(argv))
    except click.UsageError as exc:
        raise InputError(f"{what}: {exc.format_message()}") from None
    except click.exceptions.Exit:  # --help (printed): nothing to run
        raise InputError(f"{what} asks for --help: nothing is run") from None


def checked_command(inputs: Inputs) -> tuple[list[str], dict]:
    """``run_command(inputs)`` and its parameters, as ``judgekit run``'s own parser reads them
    (nothing runs); InputError when it refuses them, when the ``args`` input sets what the action
    sets itself (``RESERVED``: click would silently take the last of two values), or when the
    reports folder already holds reports."""
    from click.core import ParameterSource

    own = _parse([inputs.suite, *inputs.args], "the `args` input")
    taken = [flag for name, flag in RESERVED.items() if own.get_parameter_source(name) is ParameterSource.COMMANDLINE]
    if taken:
        raise InputError(f"the `args` input sets {', '.join(taken)}, which the action sets itself "
                         "(see its `baseline`, `history` and `reports` inputs)")
    argv = run_command(inputs)
    params = _parse(argv, "the action's `judgekit run` command line").params
    there = [path.name for path in map(inputs.report, REPORT_FILES) if path.exists()]
    if there:  # an earlier step's: a run that stops early would leave them looking like its own
        raise InputError(f"the `reports` folder {inputs.reports} already holds {', '.join(there)} (an earlier "
                         "judgekit step's?): give each step its own `reports` folder and `artifact-name`")
    return argv, params


# --- the run step ---------------------------------------------------------------------------------


def say(environ: Mapping[str, str], level: str, message: str) -> None:
    """``message`` as a workflow annotation (``::error::``) on GitHub, else a plain line."""
    from judgekit._util.text import one_line, redact

    text = redact(one_line(message))
    if environ.get("GITHUB_ACTIONS") == "true":
        print(f"::{level} title=judgekit::{command_text(text)}", flush=True)
    else:
        print(f"judgekit: {level}: {text}", file=sys.stderr, flush=True)


def run_judgekit(argv: list[str], environ: Mapping[str, str]) -> int:
    """``judgekit run ARGV`` in a child process with ``environ``: its exit code. On GitHub,
    workflow commands are off while it runs: a line of its output that a trajectory wrote
    cannot set an output, add a mask or fake an annotation."""
    on_github = environ.get("GITHUB_ACTIONS") == "true"
    resume = secrets.token_hex(16)
    if on_github:
        print(f"::stop-commands::{resume}", flush=True)
    try:
        return subprocess.call([sys.executable, "-m", "judgekit", "run", *argv], env=dict(environ))
    finally:
        if on_github:
            print(f"::{resume}::", flush=True)


def measured_outcome(inputs: Inputs, params: Mapping) -> tuple[str, str]:
    """(gate: "pass" or "fail", the flagged axes joined by commas) of the run record, measured
    again, and its comparison made again with the run's own baseline and policy."""
    from judgekit.ci.history import History
    from judgekit.ci.loop import compare_with_baseline
    from judgekit.cli.loop_cmd import compare_policy
    from judgekit.run.remeasure import remeasured_file

    measured = remeasured_file(inputs.report("out"))
    report = measured.footer.gate_report
    gate = "" if report is None else "pass" if report.passed else "fail"
    policy = compare_policy(params["max_drop"], params["max_drop_axis"], params["axes"], params["require_baseline"])
    history_path = Path(inputs.history)
    history = History(history_path, create=False) if history_path.is_file() else None
    try:
        comparison = compare_with_baseline(measured.rows, history, params["baseline"], policy)
    finally:
        if history is not None:
            history.close()
    return gate, ",".join(comparison.flagged)


def event_of(environ: Mapping[str, str]) -> dict:
    """The event payload (``GITHUB_EVENT_PATH``; empty when there is none)."""
    from judgekit._util.io import read_json

    path = environ.get("GITHUB_EVENT_PATH")
    if not path:
        return {}
    data = read_json(path, expected="the GitHub event payload")
    return data if isinstance(data, dict) else {}


def saves_history(environ: Mapping[str, str], event: Mapping) -> bool:
    """Whether this run's history is saved to the actions cache: runs of the default branch only
    (pushes, schedules, manual runs), so the history every run restores holds the default
    branch's builds and its last green build is the baseline. A pull request compares with it and
    is not recorded there: its cache entry would be visible to that pull request alone."""
    name = environ.get("GITHUB_EVENT_NAME", "")
    if name.startswith("pull_request") or pull_request_number(event) is not None:
        return False
    if name == "schedule":  # scheduled workflows run on the default branch
        return True
    repository = event.get("repository")
    default = repository.get("default_branch") if isinstance(repository, dict) else None
    return isinstance(default, str) and bool(default) and environ.get("GITHUB_REF") == f"refs/heads/{default}"


def _no_summary(code: int, why: str) -> str:
    return (f"**judgekit** \u00b7 **RED** \u00b7 `judgekit run` exited {code}, {MEANINGS.get(code, 'an error')}, "
            f"without a summary: {why}. The job's log says more.\n")


def run_step(environ: Mapping[str, str], runner: Callable[[list[str], Mapping[str, str]], int] = run_judgekit) -> int:
    """The action's run step: judge (``runner``: ``judgekit run ARGV`` with ``environ`` -> its exit
    code), then write the outputs (``GITHUB_OUTPUT``) and the job summary (``GITHUB_STEP_SUMMARY``).
    0 once they are written, whatever judgekit's exit code (the ``exit-code`` output); the
    action's last step fails the job with it."""
    outputs = dict.fromkeys(OUTPUTS, "")
    try:
        inputs = Inputs.read(environ)
        argv, params = checked_command(inputs)
    except InputError as exc:
        say(environ, "error", str(exc))
        outputs["exit-code"] = str(EXIT_INPUT)
        _publish(environ, outputs, _no_summary(EXIT_INPUT, f"the action's inputs are wrong ({escape(str(exc), 1000)})"))
        return 0
    for folder in (Path(inputs.reports), Path(inputs.history).parent):
        folder.mkdir(parents=True, exist_ok=True)
    code = runner(argv, environ)
    record, summary = inputs.report("out"), inputs.report("markdown")
    outputs.update({"exit-code": str(code), "reports": inputs.reports, "summary": str(summary)})
    if record.is_file():
        outputs["record"] = str(record)
        try:
            outputs["gate"], outputs["flagged-axes"] = measured_outcome(inputs, params)
        except JudgekitError as exc:
            say(environ, "warning", f"the gate and flagged-axes outputs are left empty: {exc}")
    if not summary.is_file():
        summary.write_text(_no_summary(code, "it stopped before writing one"), encoding="utf-8")
    try:
        event = event_of(environ)
    except JudgekitError as exc:
        say(environ, "warning", f"no pull-request comment and no history saved: {exc}")
        event = {}
    outputs["comment"] = str(inputs.pr_comment and pull_request_number(event) is not None).lower()
    outputs["save-history"] = str(inputs.history_cache and bool(outputs["record"]) and Path(inputs.history).is_file()
                                  and saves_history(environ, event)).lower()
    print(f"judgekit: exit {code}: {MEANINGS.get(code, 'an error')}; gate: {outputs['gate'] or 'unknown'}; "
          f"flagged axes: {outputs['flagged-axes'] or 'none'}", flush=True)
    if code != EXIT_OK:
        say(environ, "error", f"judgekit run exited {code}: {MEANINGS.get(code, 'an error')}"
            + (f" (flagged: {outputs['flagged-axes']})" if outputs["flagged-axes"] else ""))
    _publish(environ, outputs, summary.read_text(encoding="utf-8"))
    return 0


def _publish(environ: Mapping[str, str], outputs: dict[str, str], markdown: str) -> None:
    if environ.get("GITHUB_STEP_SUMMARY"):
        append_summary(environ["GITHUB_STEP_SUMMARY"], markdown)
    if environ.get("GITHUB_OUTPUT"):
        write_outputs(environ["GITHUB_OUTPUT"], outputs)


# --- the comment step -----------------------------------------------------------------------------


def run_link(environ: Mapping[str, str]) -> str:
    """The footer of the comment: a link to the workflow run (empty outside GitHub)."""
    server, repository, run_id = (environ.get(name, "") for name in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY",
                                                                     "GITHUB_RUN_ID"))
    if not (server and repository and run_id):
        return ""
    return f"judgekit, [workflow run {run_id}]({server}/{repository}/actions/runs/{run_id})"


def comment_step(environ: Mapping[str, str]) -> int:
    """The action's comment step: the summary (``JUDGEKIT_SUMMARY``) as the pull request's one
    judgekit comment, updated or created. 1, with an error annotation, when it cannot be."""
    from judgekit._util.io import read_text

    try:
        number = pull_request_number(event_of(environ))
        if number is None:
            print("judgekit: not a pull request: no comment", flush=True)
            return 0
        if not environ.get(SUMMARY_VARIABLE):
            raise InputError(f"{SUMMARY_VARIABLE} is not set: the run step wrote no summary")
        markdown = read_text(environ[SUMMARY_VARIABLE], max_bytes=16 * 2**20, expected="the Markdown summary")
        github = GitHub(api_url=environ.get("GITHUB_API_URL") or "https://api.github.com",
                        repository=environ.get("GITHUB_REPOSITORY", ""), token=environ.get(TOKEN_VARIABLE, ""))
        done, url = github.upsert_comment(number, comment_body(markdown, footer=run_link(environ)))
    except JudgekitError as exc:  # GitHubError among them
        say(environ, "error", f"the pull-request comment was not written: {exc}")
        return 1
    print(f"judgekit: {done} the summary comment on #{number}: {url}", flush=True)
    return 0


# --- entry point ----------------------------------------------------------------------------------


@click.group()
def main() -> None:
    """The steps of judgekit's GitHub Action (action.yml): inputs come from the environment."""


@main.command("run")
def run_cmd() -> None:
    """Judge the suite; write the step's outputs and the job summary."""
    sys.exit(run_step(os.environ))


@main.command("comment")
def comment_cmd() -> None:
    """Put the summary on the pull request: one comment, updated on every run."""
    sys.exit(comment_step(os.environ))


if __name__ == "__main__":
    main()
