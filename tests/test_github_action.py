"""The GitHub Action (``action.yml``, its steps in ``judgekit/cli/github_action.py``): the metadata
against SchemaStore's github-action schema (vendored in tests/data/schemas), its inputs and
outputs wired through, its command line read by the real CLI, the sticky comment made and found
again against a fake GitHub API on 127.0.0.1, and two real runs of the example through the step."""

from __future__ import annotations

import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # before anything imports litellm

import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from click.testing import CliRunner
from jsonschema import Draft7Validator
from test_ci_loop import regressed_copy
from test_ci_loop_finish import passable
from test_ci_workflow import load_workflow
from test_judge_runner import MODEL, example_suite, scripted_judge

from judgekit.ci.github import (
    COMMENT_LIMIT, MARKER, GitHub, GitHubError, append_summary, comment_body, is_ours, write_outputs,
)
from judgekit.cli import github_action
from judgekit.cli import main as cli_main
from judgekit.testing import ScriptedOpenAIServer

ROOT = Path(__file__).resolve().parent.parent
ACTION = ROOT / "action.yml"
SCHEMA = ROOT / "tests" / "data" / "schemas" / "github-action.json"
TOKEN = "ghs_" + "fakeTokenForTheLoopbackApi0123456789"
REPO = "octo/agent"
PR = 7
PINNED = {"actions/setup-python@v5", "actions/cache/restore@v4", "actions/cache/save@v4", "actions/upload-artifact@v4"}


# --- the metadata ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def action() -> dict[str, Any]:
    return load_workflow(ACTION)  # the strict reader: true/false only as booleans, no repeated key


def steps(action) -> list[dict[str, Any]]:
    return action["runs"]["steps"]


def step(action, *, uses: str | None = None, step_id: str | None = None, runs: str | None = None) -> tuple[int, dict]:
    [found] = [(i, s) for i, s in enumerate(steps(action))
               if (uses and s.get("uses", "").split("@")[0] == uses) or (step_id and s.get("id") == step_id)
               or (runs and runs in s.get("run", ""))]
    return found


def test_the_vendored_schema_is_the_copy_its_readme_names():
    digest = hashlib.sha256(SCHEMA.read_bytes()).hexdigest()
    assert f"`{digest}`" in (SCHEMA.parent / "README.md").read_text(encoding="utf-8")
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    assert schema["$id"] == "https://json.schemastore.org/github-action.json"
    refs = re.findall(r'"\$ref":\s*"([^"]*)"', SCHEMA.read_text(encoding="utf-8"))
    assert refs and all(ref.startswith("#/") for ref in refs)  # nothing to fetch


@pytest.fixture(scope="module")
def validator() -> Draft7Validator:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    Draft7Validator.check_schema(schema)
    return Draft7Validator(schema)


def test_action_yml_validates_against_schemastores_schema(validator, action):
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(action)]
    assert errors == []
    assert action["runs"]["using"] == "composite"


@pytest.mark.parametrize("break_it", [
    pytest.param(lambda a: a["runs"]["steps"][1].pop("shell"), id="run_step_without_shell"),
    pytest.param(lambda a: a["inputs"]["suite"].update({"required": "yes"}), id="required_not_a_boolean"),
    pytest.param(lambda a: a["outputs"]["gate"].pop("value"), id="composite_output_without_value"),
    pytest.param(lambda a: a.pop("description"), id="no_description"),
])
def test_the_schema_catches_a_broken_action(validator, action, break_it):
    broken = json.loads(json.dumps(action))
    break_it(broken)
    assert list(validator.iter_errors(broken))


def test_every_input_used_is_declared_and_every_declared_input_is_used(action):
    runs = json.dumps(action["runs"]) + json.dumps(action["outputs"])
    used = set(re.findall(r"\binputs\.([A-Za-z0-9_-]+)", runs))
    assert used == set(action["inputs"])
    assert action["inputs"]["suite"]["required"] is True
    assert all("default" in spec for name, spec in action["inputs"].items() if name != "suite")
    assert action["inputs"]["github-token"]["default"] == "${{ github.token }}"
    [history] = [p for p in cli_main.commands["run"].params if p.name == "history_path"]
    assert action["inputs"]["history"]["default"] == github_action.DEFAULT_HISTORY == history.default.as_posix()
    assert action["inputs"]["reports"]["default"] == action["inputs"]["artifact-name"]["default"] == "judgekit-reports"


def test_the_run_step_reads_exactly_the_inputs_the_script_reads(action):
    _, run = step(action, step_id="run")
    assert run["run"] == "python -m judgekit.cli.github_action run" and set(github_action.main.commands) == {
        "run", "comment"}
    assert run["env"] == {variable: f"${{{{ inputs.{name} }}}}" for name, variable in github_action.INPUTS.items()}
    _, comment = step(action, runs="github_action comment")
    assert comment["env"] == {github_action.TOKEN_VARIABLE: "${{ inputs.github-token }}",
                              github_action.SUMMARY_VARIABLE: "${{ steps.run.outputs.summary }}"}
    for other in steps(action):  # the token reaches the comment step alone
        assert other is comment or "github-token" not in json.dumps(other)


def test_outputs_come_from_the_run_step_and_name_what_it_writes(action):
    text = json.dumps(action)
    used = set(re.findall(r"steps\.run\.outputs\.([A-Za-z0-9_-]+)", text))
    assert used <= set(github_action.OUTPUTS)
    assert {name: spec["value"] for name, spec in action["outputs"].items()} == {
        name: f"${{{{ steps.run.outputs.{name} }}}}" for name in ("gate", "flagged-axes", "record", "exit-code")}


def test_no_expression_is_pasted_into_a_shell_line(action):
    """Inputs reach scripts through ``env`` only: an input (a branch name, a suite path) pasted
    into ``run:`` would be shell code."""
    for s in steps(action):
        if "run" in s:
            assert "${{" not in s["run"] and s["shell"] == "bash"


def test_only_pinned_well_known_actions(action):
    assert {s["uses"] for s in steps(action) if "uses" in s} == PINNED
    _, python = step(action, uses="actions/setup-python")
    assert python["with"]["python-version"] == "${{ inputs.python-version }}" and steps(action)[0] is python
    install_at, install = step(action, runs="pip install")
    assert install["run"].endswith('"$GITHUB_ACTION_PATH"')  # the action's own checkout: its version of judgekit
    assert install_at < step(action, step_id="run")[0]


def test_publishing_runs_after_a_red_run_and_the_last_step_fails_the_job(action):
    run_at, _ = step(action, step_id="run")
    for uses in ("actions/upload-artifact", "actions/cache/save"):
        at, s = step(action, uses=uses)
        assert at > run_at and s["if"].startswith("always() && steps.run.outputs.")
    comment_at, comment = step(action, runs="github_action comment")
    assert comment_at > run_at and comment["if"] == "always() && steps.run.outputs.comment == 'true'"
    last = steps(action)[-1]
    assert last["if"] == "always() && steps.run.outputs.exit-code != ''"
    assert last["env"] == {"JUDGEKIT_EXIT_CODE": "${{ steps.run.outputs.exit-code }}"}
    assert last["run"] == 'exit "$JUDGEKIT_EXIT_CODE"'
    _, upload = step(action, uses="actions/upload-artifact")
    assert upload["with"]["path"] == "${{ steps.run.outputs.reports }}"
    assert upload["with"]["name"] == "${{ inputs.artifact-name }}"


def test_the_history_is_restored_before_and_saved_after_under_one_key(action):
    restore_at, restore = step(action, uses="actions/cache/restore")
    save_at, save = step(action, uses="actions/cache/save")
    run_at, _ = step(action, step_id="run")
    assert restore_at < run_at < save_at
    assert restore["if"] == "inputs.history-cache == 'true'"
    assert save["if"] == "always() && steps.run.outputs.save-history == 'true'"  # decided by saves_history
    assert restore["with"]["path"] == save["with"]["path"] == "${{ inputs.history }}"
    key = restore["with"]["key"]
    assert save["with"]["key"] == key and "${{ github.run_id }}" in key  # a new entry per run, never a clash
    prefix = restore["with"]["restore-keys"]
    assert key.startswith(prefix) and "run_id" not in prefix  # the newest saved history is restored


# --- the command line -----------------------------------------------------------------------------


def inputs_env(**given: str) -> dict[str, str]:
    values = {"suite": "evals/suite.yaml", "history-cache": "true", "pr-comment": "true", **given}
    return {github_action.INPUTS[name.replace("_", "-")]: value for name, value in values.items()}


def test_the_command_line_gates_compares_and_writes_every_report_as_the_cli_reads_it():
    inputs = github_action.Inputs.read(inputs_env(args="--no-cache  --max-drop 0.1\n--max-drop-axis faithfulness=0.2"))
    argv, params = github_action.checked_command(inputs)
    assert argv[0] == "evals/suite.yaml"
    assert params["suite"] == Path("evals/suite.yaml") and params["apply_gate"] and params["do_compare"]
    assert params["baseline"] == "last-green" and params["history_path"] == Path(".judgekit/history.sqlite")
    assert {params[kind] for kind in ("out", "junit", "markdown", "html")} == {
        Path("judgekit-reports") / name for name in github_action.REPORT_FILES.values()}
    assert params["no_cache"] and params["max_drop"] == 0.1 and params["max_drop_axis"] == ("faithfulness=0.2",)
    named = github_action.checked_command(github_action.Inputs.read(inputs_env(baseline="main.jsonl")))[1]
    assert named["baseline"] == "main.jsonl"


@pytest.mark.parametrize(("given", "message"), [
    pytest.param({"args": "--history other.sqlite"}, "sets --history, which the action sets itself",
                 id="reserved_flag"),
    pytest.param({"args": "--out=x.jsonl --gate"}, "sets --out, --gate", id="reserved_flags_any_spelling"),
    pytest.param({"args": "--no-such-flag"}, "the `args` input: No such option '--no-such-flag'", id="unknown_flag"),
    pytest.param({"args": "--max-drop 2"}, "--max-drop", id="value_out_of_range"),
    pytest.param({"args": "'unclosed"}, "does not split as a shell would", id="bad_quoting"),
    pytest.param({"pr-comment": "yes"}, "the `pr-comment` input is 'yes': expected true or false", id="not_a_boolean"),
    pytest.param({"suite": " "}, "the `suite` input is required", id="no_suite"),
    pytest.param({"suite": "--help"}, "a path, not an option", id="suite_an_option"),
    pytest.param({"args": "--help"}, "asks for --help: nothing is run", id="help"),
])
def test_bad_inputs_are_refused_before_anything_runs(given, message):
    with pytest.raises(github_action.InputError, match=re.escape(message)):
        github_action.checked_command(github_action.Inputs.read(inputs_env(**given)))


def test_an_earlier_steps_reports_are_never_taken_for_this_runs(tmp_path):
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "summary.md").write_text("an earlier step's summary\n", encoding="utf-8")
    with pytest.raises(github_action.InputError, match="already holds summary.md"):
        github_action.checked_command(github_action.Inputs.read(inputs_env(reports=str(tmp_path / "reports"))))


def test_bad_inputs_fail_the_step_outputs_with_exit_2_and_a_summary(tmp_path):
    env = {**inputs_env(args="--history x"), "GITHUB_OUTPUT": str(tmp_path / "out"),
           "GITHUB_STEP_SUMMARY": str(tmp_path / "summary")}
    assert github_action.run_step(env) == 0  # the action's last step fails the job
    assert read_outputs(tmp_path / "out")["exit-code"] == "2"
    assert "the action's inputs are wrong" in (tmp_path / "summary").read_text(encoding="utf-8")


@pytest.mark.parametrize(("event_name", "ref", "event", "saved"), [
    pytest.param("push", "refs/heads/main", {"repository": {"default_branch": "main"}}, True, id="push_to_default"),
    pytest.param("push", "refs/heads/topic", {"repository": {"default_branch": "main"}}, False, id="push_to_a_branch"),
    pytest.param("schedule", "refs/heads/main", {"schedule": "17 3 * * *"}, True, id="schedule"),
    pytest.param("workflow_dispatch", "refs/heads/main", {"repository": {"default_branch": "main"}}, True,
                 id="manual_on_default"),
    pytest.param("pull_request", "refs/pull/7/merge", {"pull_request": {"number": 7}}, False, id="pull_request"),
    pytest.param("pull_request_target", "refs/heads/main",
                 {"pull_request": {"number": 7}, "repository": {"default_branch": "main"}}, False,
                 id="pull_request_target_runs_on_default_but_is_a_pr"),
])
def test_only_the_default_branchs_runs_are_saved_to_the_cache(event_name, ref, event, saved):
    assert github_action.saves_history({"GITHUB_EVENT_NAME": event_name, "GITHUB_REF": ref}, event) is saved


# --- the runner's files ---------------------------------------------------------------------------


def read_outputs(path: Path) -> dict[str, str]:
    """A GITHUB_OUTPUT file as the runner reads it: ``name=value`` lines and ``name<<DELIMITER``
    blocks ending at a line that is the delimiter alone."""
    lines, found = path.read_text(encoding="utf-8").split("\n"), {}
    i = 0
    while i < len(lines):
        line = lines[i]
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            end = lines.index(delimiter, i + 1)
            found[name] = "\n".join(lines[i + 1:end])
            i = end + 1
        elif line:
            name, value = line.split("=", 1)
            found[name] = value
            i += 1
        else:
            i += 1
    return found


def test_outputs_survive_values_that_look_like_the_syntax(tmp_path):
    values = {"flagged-axes": "task_success,faithfulness", "gate": "", "record": "a\nb<<EOF\nEOF\nc=d",
              "summary": "x=y<<z"}
    (tmp_path / "out").write_text("earlier=1\n", encoding="utf-8")  # the file is appended to
    write_outputs(tmp_path / "out", values)
    assert read_outputs(tmp_path / "out") == {"earlier": "1", **values}
    with pytest.raises(ValueError, match="not an output name"):
        write_outputs(tmp_path / "out", {"a\nb": "x"})


def test_the_job_summary_is_cut_to_githubs_limit_at_a_whole_line(tmp_path):
    big = "".join(f"| row {i} | {'x' * 80} |\n" for i in range(20_000))  # about 1.8 MB
    append_summary(tmp_path / "summary", big)
    text = (tmp_path / "summary").read_text(encoding="utf-8")
    assert len(text.encode("utf-8")) <= 2**20 and text.endswith("the whole summary is in the reports artifact)\n")
    kept = text.split("\n\u2026")[0]
    assert big.startswith(kept) and kept.endswith("|\n")


# --- the comment ----------------------------------------------------------------------------------


HOSTILE = ("| a | b |\n<!-- judgekit-summary -->\nhidden? -->\n"
           "<!-- an opener never closed, to hide the rest\n" + MARKER + " again\n")


def test_the_comment_body_starts_with_the_one_marker_whatever_the_markdown_holds():
    body = comment_body(HOSTILE, footer="judgekit, [workflow run 1](https://github.com/o/r/actions/runs/1)")
    first, rest = body.split("\n", 1)
    assert first == MARKER and body.count(MARKER) == 1
    assert "<!--" not in rest and "-->" not in rest  # nothing opens, closes or fakes an HTML comment
    assert "&lt;!-- judgekit-summary --&gt;" in rest  # shown as text, not dropped
    assert rest.rstrip().endswith("(https://github.com/o/r/actions/runs/1)")


def test_a_long_summary_is_cut_at_a_whole_line_to_githubs_comment_limit():
    markdown = "".join(f"| \U0001F600 {i} | {'y' * 60} |\n" for i in range(3000))  # emoji: 2 UTF-16 units
    body = comment_body(markdown)
    assert len(body.encode("utf-16-le")) // 2 <= COMMENT_LIMIT < len(markdown.encode("utf-16-le")) // 2
    kept = body.split("\n", 1)[1].split("\n\u2026")[0]
    assert markdown.startswith(kept) and kept.endswith("|\n") and "GitHub limits a comment's size" in body


@pytest.mark.parametrize(("comment", "identity", "ours"), [
    pytest.param({"body": MARKER + "\nx", "user": {"login": "github-actions[bot]", "type": "Bot"}}, None, True,
                 id="the_workflow_tokens_bot"),
    pytest.param({"body": MARKER + "\nx", "user": {"login": "mallory", "type": "User"}}, None, False,
                 id="a_person_quoting_the_marker"),
    pytest.param({"body": "see " + MARKER, "user": {"login": "github-actions[bot]", "type": "Bot"}}, None, False,
                 id="marker_not_first"),
    pytest.param({"body": MARKER + "\nx", "user": {"login": "alice", "type": "User"}}, "alice", True,
                 id="a_personal_tokens_own_comment"),
    pytest.param({"body": MARKER + "\nx", "user": {"login": "github-actions[bot]", "type": "Bot"}}, "alice", False,
                 id="a_bots_comment_under_a_personal_token"),
])
def test_whose_comment_is_taken(comment, identity, ours):
    assert is_ours(comment, identity) is ours


class FakeGitHub:
    """The few REST endpoints the action calls, on 127.0.0.1, with their paging (``Link``)."""

    def __init__(self, comments: list[dict[str, Any]], *, login: str | None = None, fail: dict | None = None,
                 redirect_user: str | None = None):
        self.comments = comments
        self.redirect_user = redirect_user  # GET /user answers 302 to this URL
        self.login = login  # None: an installation token (GET /user answers 403)
        self.fail = fail or {}  # (method, path prefix) -> status
        self.requests: list[tuple[str, str, dict[str, Any] | None]] = []
        self.authorizations: set[str] = set()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _answer(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _handle(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                url = urlsplit(self.path)
                fake.requests.append((method, url.path, body))
                fake.authorizations.add(self.headers.get("Authorization", ""))
                for (m, prefix), status in fake.fail.items():
                    if m == method and url.path.startswith(prefix):
                        return self._answer(status, {"message": "Server Error" if status >= 500 else "Forbidden"})
                if url.path == "/user":
                    if fake.redirect_user:
                        return self._answer(302, {}, {"Location": fake.redirect_user})
                    if fake.login is None:
                        return self._answer(403, {"message": "Resource not accessible by integration"})
                    return self._answer(200, {"login": fake.login, "type": "User"})
                listing = f"/repos/{REPO}/issues/{PR}/comments"
                if method == "GET" and url.path == listing:
                    query = parse_qs(url.query)
                    size, page = int(query["per_page"][0]), int(query.get("page", ["1"])[0])
                    chunk = fake.comments[(page - 1) * size: page * size]
                    more = page * size < len(fake.comments)
                    link = {"Link": f'<{fake.url}{listing}?per_page={size}&page={page + 1}>; rel="next", '
                                    f'<{fake.url}{listing}?per_page={size}&page=99>; rel="last"'} if more else {}
                    return self._answer(200, chunk, link)
                if method == "POST" and url.path == listing:
                    new = {"id": 10_000 + len(fake.comments), "body": body["body"],
                           "user": {"login": "github-actions[bot]", "type": "Bot"}}
                    fake.comments.append(new)
                    return self._answer(201, {**new, "html_url": f"https://github.com/{REPO}/pull/{PR}#c{new['id']}"})
                found = re.fullmatch(rf"/repos/{REPO}/issues/comments/(\d+)", url.path)
                if method == "PATCH" and found:
                    [target] = [c for c in fake.comments if c["id"] == int(found.group(1))]
                    target["body"] = body["body"]
                    url = f"https://github.com/{REPO}/pull/{PR}#c{target['id']}"
                    return self._answer(200, {**target, "html_url": url})
                return self._answer(404, {"message": "Not Found"})

            def do_GET(self):
                self._handle("GET")

            def do_POST(self):
                self._handle("POST")

            def do_PATCH(self):
                self._handle("PATCH")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> FakeGitHub:
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def writes(self) -> list[tuple[str, str]]:
        return [(method, path) for method, path, _ in self.requests if method != "GET"]


def chatter(n: int, start: int = 1) -> list[dict[str, Any]]:
    return [{"id": start + i, "body": f"comment {i}", "user": {"login": f"user{i}", "type": "User"}} for i in range(n)]


def comment_env(api: FakeGitHub, tmp_path: Path, markdown: str, event: dict | None = None) -> dict[str, str]:
    (tmp_path / "summary.md").write_text(markdown, encoding="utf-8")
    (tmp_path / "event.json").write_text(json.dumps(event or {"pull_request": {"number": PR}}), encoding="utf-8")
    return {"GITHUB_API_URL": api.url, "GITHUB_REPOSITORY": REPO, "GITHUB_EVENT_PATH": str(tmp_path / "event.json"),
            github_action.TOKEN_VARIABLE: TOKEN, github_action.SUMMARY_VARIABLE: str(tmp_path / "summary.md"),
            "GITHUB_SERVER_URL": "https://github.com", "GITHUB_RUN_ID": "42"}


def test_no_comment_yet_creates_one(tmp_path, capsys):
    with FakeGitHub(chatter(3)) as api:
        assert github_action.comment_step(comment_env(api, tmp_path, "## judgekit: green\n")) == 0
    assert api.writes() == [("POST", f"/repos/{REPO}/issues/{PR}/comments")]
    created = api.comments[-1]["body"]
    assert created == comment_body("## judgekit: green\n",
                                   footer=f"judgekit, [workflow run 42](https://github.com/{REPO}/actions/runs/42)")
    assert api.authorizations == {f"Bearer {TOKEN}"}
    assert "created the summary comment on #7" in capsys.readouterr().out


def test_the_marked_comment_on_page_two_is_updated_not_a_persons_quote_on_page_one(tmp_path):
    people = chatter(100)
    people[40] = {"id": 41, "body": MARKER + "\nfake green summary", "user": {"login": "mallory", "type": "User"}}
    ours = {"id": 500, "body": MARKER + "\nold summary", "user": {"login": "github-actions[bot]", "type": "Bot"}}
    with FakeGitHub([*people, ours, *chatter(5, start=600)]) as api:
        assert github_action.comment_step(comment_env(api, tmp_path, "new summary\n")) == 0
    assert api.writes() == [("PATCH", f"/repos/{REPO}/issues/comments/500")]
    pages = [path for method, path, _ in api.requests if method == "GET" and "comments" in path]
    assert len(pages) == 2  # it read on to page two
    assert ours["body"].startswith(MARKER + "\nnew summary") and people[40]["body"].endswith("fake green summary")


def test_a_personal_token_takes_only_its_own_marked_comment(tmp_path):
    bots = {"id": 7, "body": MARKER + "\nby the workflow token",
            "user": {"login": "github-actions[bot]", "type": "Bot"}}
    mine = {"id": 8, "body": MARKER + "\nby alice's token", "user": {"login": "alice", "type": "User"}}
    with FakeGitHub([bots, mine], login="alice") as api:
        assert github_action.comment_step(comment_env(api, tmp_path, "again\n")) == 0
    assert api.writes() == [("PATCH", f"/repos/{REPO}/issues/comments/8")]


def test_only_a_persons_quote_of_the_marker_means_a_new_comment(tmp_path):
    quote = {"id": 3, "body": MARKER + "\nlooks like judgekit", "user": {"login": "mallory", "type": "User"}}
    with FakeGitHub([quote]) as api:
        assert github_action.comment_step(comment_env(api, tmp_path, "summary\n")) == 0
    assert api.writes() == [("POST", f"/repos/{REPO}/issues/{PR}/comments")] and quote["body"].endswith("judgekit")


def test_not_a_pull_request_means_no_comment_and_no_call(tmp_path, capsys):
    with FakeGitHub([]) as api:
        assert github_action.comment_step(comment_env(api, tmp_path, "x\n", event={"ref": "refs/heads/main"})) == 0
    assert api.requests == [] and "not a pull request" in capsys.readouterr().out


@pytest.mark.parametrize(("fail", "said"), [
    pytest.param({("GET", f"/repos/{REPO}/issues"): 502}, f"GET /repos/{REPO}/issues/{PR}/comments answered 502",
                 id="listing_fails"),
    pytest.param({("POST", f"/repos/{REPO}/issues"): 403},
                 f"POST /repos/{REPO}/issues/{PR}/comments answered 403 Forbidden: Forbidden (the token needs "
                 "`pull-requests: write`", id="no_write_permission"),
])
def test_an_api_error_is_one_clear_line_and_the_job_summary_stands(tmp_path, capfd, fail, said):
    summary = tmp_path / "job-summary"
    append_summary(summary, "## judgekit: the run step's summary\n")  # written by the run step, before
    with FakeGitHub([], fail=fail) as api:
        env = {**comment_env(api, tmp_path, "summary\n"), "GITHUB_ACTIONS": "true"}
        assert github_action.comment_step(env) == 1
    out = capfd.readouterr().out
    [line] = [line for line in out.splitlines() if line.startswith("::error")]
    assert line.startswith("::error title=judgekit::the pull-request comment was not written: GitHub API: ")
    assert said in line and TOKEN not in out
    assert summary.read_text(encoding="utf-8") == "## judgekit: the run step's summary\n"


def test_the_token_is_not_repeated_on_a_redirect():
    with FakeGitHub([], login="alice") as elsewhere:
        with FakeGitHub([], redirect_user=f"{elsewhere.url}/user") as api:
            assert GitHub(api_url=api.url, repository=REPO, token=TOKEN).identity() == "alice"
    assert api.authorizations == {f"Bearer {TOKEN}"} and elsewhere.authorizations == {""}


def test_the_token_never_leaves_https_or_loopback_nor_follows_a_link_elsewhere():
    with pytest.raises(GitHubError, match="expected an https URL"):
        GitHub(api_url="http://api.example.com", repository=REPO, token=TOKEN)
    github = GitHub(api_url="https://api.github.com", repository=REPO, token=TOKEN)
    assert TOKEN not in repr(github)
    with pytest.raises(GitHubError, match="not followed"):
        github._url("https://evil.example/repos/octo/agent/issues/7/comments?page=2")


# --- two real runs of the example through the run step --------------------------------------------


def in_process(argv: list[str], environ) -> int:
    """``judgekit run ARGV`` in this process (the step's own runner, a child process, is tested
    below): the same command, without a second interpreter importing judgekit."""
    return CliRunner().invoke(cli_main, ["run", *argv]).exit_code


@pytest.fixture(scope="module")
def two_steps(tmp_path_factory):
    """The run step twice on one history, as the action runs it: the example (gate set so that it
    passes) on a push to the default branch, then with a regression on a pull request."""
    tmp = tmp_path_factory.mktemp("action")
    before, after = passable(example_suite(tmp / "before")), passable(regressed_copy(tmp / "after"))
    done = []
    with ScriptedOpenAIServer(scripted_judge) as srv:
        for name, suite, event_name, ref, event in (
                ("push", before, "push", "refs/heads/main", {"repository": {"default_branch": "main"}}),
                ("pr", after, "pull_request", f"refs/pull/{PR}/merge", {"pull_request": {"number": PR}})):
            folder = tmp / name
            folder.mkdir()
            (folder / "event.json").write_text(json.dumps(event), encoding="utf-8")
            judge = f"--judge-model {MODEL} --judge-api-base {srv.base_url} --cache-dir {tmp / 'cache'}"
            env = {"GITHUB_ACTIONS": "true", "GITHUB_EVENT_NAME": event_name,
                   "GITHUB_REF": ref, "GITHUB_EVENT_PATH": str(folder / "event.json"),
                   "GITHUB_OUTPUT": str(folder / "outputs"), "GITHUB_STEP_SUMMARY": str(folder / "job-summary"),
                   **inputs_env(suite=str(suite), history=str(tmp / "history.sqlite"), reports=str(folder / "reports"),
                                args=judge)}
            assert github_action.run_step(env, runner=in_process) == 0
            done.append((folder, read_outputs(folder / "outputs")))
    return done


def test_a_green_push_outputs_pass_and_is_saved(two_steps):
    folder, outputs = two_steps[0]
    assert outputs["exit-code"] == "0" and outputs["gate"] == "pass" and outputs["flagged-axes"] == ""
    assert outputs["record"] == str(folder / "reports" / "run.jsonl") and Path(outputs["record"]).is_file()
    assert outputs["save-history"] == "true" and outputs["comment"] == "false"
    assert {p.name for p in (folder / "reports").iterdir()} == set(github_action.REPORT_FILES.values())
    summary = (folder / "reports" / "summary.md").read_text(encoding="utf-8")
    assert (folder / "job-summary").read_text(encoding="utf-8") == summary and "**GREEN**" in summary


def test_a_regressed_pull_request_is_flagged_exit_1_commented_and_not_saved(two_steps, tmp_path):
    first, _ = two_steps[0]
    folder, outputs = two_steps[1]
    assert outputs["exit-code"] == "1" and outputs["gate"] == "pass"
    assert outputs["flagged-axes"] == "tool_correctness"
    assert outputs["comment"] == "true" and outputs["save-history"] == "false"
    summary = (folder / "reports" / "summary.md").read_text(encoding="utf-8")
    # the comparison the outputs were made from is the one the run wrote its report from
    first_run = json.loads((first / "reports" / "run.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert f"compare with last-green ({first_run['header']['run_id']})" in summary and "flagged: tool\\_correctness" in summary
    assert (folder / "job-summary").read_text(encoding="utf-8") == summary
    with FakeGitHub([]) as api:  # the comment step on the real summary
        env = {**comment_env(api, tmp_path, summary), github_action.SUMMARY_VARIABLE: outputs["summary"]}
        assert github_action.comment_step(env) == 0
    posted = api.comments[-1]["body"]
    assert posted.startswith(MARKER + "\n## judgekit: ") and posted.count(MARKER) == 1
    assert posted == comment_body(summary, footer=github_action.run_link(env))


def test_workflow_commands_are_off_while_judgekit_runs(tmp_path, capfd):
    """A trajectory's text in judgekit's output cannot set an output or fake an annotation."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GITHUB_ACTIONS": "true"}
    code = github_action.run_judgekit(["--help"], env)
    out = capfd.readouterr().out
    assert code == 0
    stop = re.search(r"^::stop-commands::([0-9a-f]{32})$", out, re.M)
    assert stop and out.index(stop.group(0)) < out.index("Usage:") < out.index(f"::{stop.group(1)}::")
