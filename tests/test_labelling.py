"""`judgekit label`: a reproducible, optionally stratified sample, shown blind, labels appended
one at a time, resumable after a quit, an end of input or Ctrl-C.

Most runs go through the real click command in process (fast); the pipes and the terminal
are driven through real subprocesses: piped stdin, and a pseudo-terminal with Ctrl-C.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest
from click.testing import CliRunner

from judgekit.calibration.labelling import QUIT, SKIP, PlainTerminal, append_label, parse_answer, run_session
from judgekit.calibration.sampling import FAIL, NO_VERDICT, PASS, allocate, draw_sample, plan
from judgekit.calibration.labels import Label, load_labels
from judgekit.cli import main
from judgekit.errors import InputError
from judgekit.results import (
    ClaimResult,
    FaithfulnessResult,
    TaskSuccessResult,
    TrajectoryResult,
)
from judgekit.run.api import header_for
from judgekit.run.plan import iter_trajectories_of
from judgekit.run.record import RunFooter, RunRecord, read_run, summarise
from judgekit.suite import load_suite

ROOT = Path(__file__).resolve().parent.parent
SECRET = "JUDGE-SAYS-UNSUPPORTED-7f3a"  # text only the judge's verdicts hold
CLI = [sys.executable, "-c", "from judgekit.cli import main; main()"]


@pytest.fixture
def example(tmp_path: Path) -> Path:
    """examples/email-update with the rubric and lock it points at, under tmp_path."""
    shutil.copytree(ROOT / "examples" / "email-update", tmp_path / "examples" / "email-update")
    shutil.copytree(ROOT / "rubrics", tmp_path / "rubrics")
    return tmp_path / "examples" / "email-update"


@pytest.fixture
def judged_suite(tmp_path: Path) -> Path:
    """A suite whose rubric has task success in judge mode and faithfulness; no world snapshots."""
    folder = tmp_path / "judged"
    folder.mkdir()
    (folder / "rubric.yaml").write_text(
        "id: capital\nversion: 1.0.0\nregistered: 2026-01-01\n"
        "task_success:\n  guide: Pass when the answer names the capital the tool returned.\n  judge: true\n"
        "faithfulness:\n  guide: Every claim must come from a tool result or the context.\n",
        encoding="utf-8",
    )
    lines = []
    for i in range(6):
        calls = [{"tool": "lookup", "args": {"country": "FR"}, "result": {"capital": "Paris"}}]
        if i == 0:
            calls.insert(0, {"tool": "lookup", "args": {"country": "FR"}, "error": "timeout after 30 s"})
        lines.append(json.dumps({
            "id": f"c{i}", "prompt": f"What is the capital of France? ({i})", "calls": calls,
            "output": "Paris.\x1b[2J" if i == 0 else "Paris.", "context": {"doc1": "France is in Europe."},
            "metadata": {"expected": "EXPECTED-OUTCOME-IN-METADATA"},
        }))
    (folder / "t.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (folder / "suite.yaml").write_text(
        "name: capitals\nrubrics: [rubric.yaml]\ntrajectories:\n  - {file: t.jsonl, rubric: capital}\n",
        encoding="utf-8",
    )
    return folder


def ids_of(suite: Path) -> list[str]:
    return [item.trajectory.id for _, item in iter_trajectories_of(load_suite(suite))]


def default_labels(suite: Path, rubric_id: str = "update-email") -> Path:
    loaded = load_suite(suite)
    return loaded.resolve(loaded.suite.calibration_dir) / rubric_id / "labels.jsonl"


def label_cli(*args: str | Path, input: str = ""):
    result = CliRunner().invoke(main, ["label", *map(str, args)], input=input, catch_exceptions=False)
    return result.exit_code, result.output


def labelled(path: Path) -> list[tuple[str, str, object]]:
    return [(lab.trajectory_id, lab.axis, lab.label if lab.score is None else lab.score) for lab in load_labels(path)]


def asked_ids(transcript: str) -> list[str]:
    return re.findall(r"\] trajectory (\S+) \(rubric", transcript)


def write_verdicts(suite: Path, out: Path, passing: set[str], rubric_sha: str | None = None) -> Path:
    """A run record in which the judge passed ``passing`` on faithfulness and failed the rest."""
    loaded = load_suite(suite)
    results = []
    for rubric, item in iter_trajectories_of(loaded):
        tid = item.trajectory.id
        ok = tid in passing
        results.append(TrajectoryResult(
            trajectory_id=tid, rubric=rubric.ref, rubric_sha256=rubric_sha or rubric.sha256(), source=item.where,
            axes={
                "faithfulness": FaithfulnessResult(
                    score=0.987 if ok else 0.123, claims_total=1, supported=int(ok), unsupported=int(not ok),
                    claims=[ClaimResult(claim=f"{SECRET} claim of {tid}", supported=ok)],
                ),
                "task_success": TaskSuccessResult(passed=ok, score=float(ok), source="deterministic"),
            },
        ))
    header = header_for(loaded)
    footer = RunFooter(finished_at=datetime.now(timezone.utc), trajectories=len(results), summary=summarise(results))
    RunRecord.of(header, results, footer).write(out)
    return out


# --- the sample --------------------------------------------------------------------------------


def test_sample_is_reproducible_and_order_free():
    ids = [f"t-{i:03d}" for i in range(50)]
    first = draw_sample(ids, 10, seed=7)
    assert draw_sample(list(reversed(ids)), 10, seed=7) == first
    assert draw_sample(set(ids), 10, seed=7) == first
    assert draw_sample(ids, 10, seed=8) != first
    assert draw_sample(ids, 12, seed=7)[: len(first)] != [] and set(first) <= set(draw_sample(ids, 12, seed=7))
    assert len(set(first)) == 10


@pytest.mark.parametrize(
    "n, sizes, expected",
    [
        pytest.param(10, {PASS: 20, FAIL: 20}, {PASS: 5, FAIL: 5, NO_VERDICT: 0}, id="even_split"),
        pytest.param(5, {PASS: 20, FAIL: 20}, {PASS: 2, FAIL: 3, NO_VERDICT: 0}, id="odd_one_to_fail"),
        pytest.param(6, {PASS: 2, FAIL: 7}, {PASS: 2, FAIL: 4, NO_VERDICT: 0}, id="fail_makes_up_for_pass"),
        pytest.param(6, {PASS: 7, FAIL: 1}, {PASS: 5, FAIL: 1, NO_VERDICT: 0}, id="pass_makes_up_for_fail"),
        pytest.param(6, {PASS: 1, FAIL: 2, NO_VERDICT: 9}, {PASS: 1, FAIL: 2, NO_VERDICT: 3}, id="no_verdict_fills_last"),
        pytest.param(20, {PASS: 3, FAIL: 4}, {PASS: 3, FAIL: 4, NO_VERDICT: 0}, id="fewer_than_asked"),
    ],
)
def test_allocate(n, sizes, expected):
    assert allocate(n, sizes) == expected


def test_stratified_sample_takes_both_classes_in_rank_order():
    ids = [f"t-{i:03d}" for i in range(40)]
    classes = {tid: PASS if i < 4 else FAIL for i, tid in enumerate(ids)}  # passes are rare
    sample = draw_sample(ids, 8, seed=3, classes=classes)
    assert sum(classes[t] == PASS for t in sample) == 4 and len(sample) == 8
    assert sample == [t for t in draw_sample(ids, 40, seed=3) if t in sample]  # interleaved, not grouped
    assert draw_sample(list(reversed(ids)), 8, seed=3, classes=classes) == sample


@pytest.mark.parametrize(
    "axis, text, expected",
    [
        pytest.param("task_success", "p", PASS, id="p"),
        pytest.param("task_success", " FAIL ", FAIL, id="fail_word"),
        pytest.param("task_success", "1", None, id="number_is_not_pass"),
        pytest.param("faithfulness", "0.5", 0.5, id="half"),
        pytest.param("faithfulness", "1", 1.0, id="one"),
        pytest.param("faithfulness", ".25", 0.25, id="leading_dot"),
        pytest.param("faithfulness", "1.5", None, id="above_one"),
        pytest.param("faithfulness", "nan", None, id="nan"),
        pytest.param("faithfulness", "p", None, id="pass_is_not_a_score"),
        pytest.param("faithfulness", "s", SKIP, id="skip"),
        pytest.param("task_success", "q", QUIT, id="quit"),
    ],
)
def test_parse_answer(axis, text, expected):
    assert parse_answer(axis, text) is expected if expected in (SKIP, QUIT, None) else parse_answer(axis, text) == expected


def test_append_label_never_joins_a_hand_edited_last_line(tmp_path: Path):
    path = tmp_path / "labels.jsonl"
    first = '{"trajectory_id": "a", "axis": "faithfulness", "score": 1, "labeler": "x", "labeled_at": "2026-01-01T00:00:00Z"}'
    path.write_text(first, encoding="utf-8")  # no final newline
    append_label(path, Label(trajectory_id="b", axis="faithfulness", score=0.5, labeler="x",
                             labeled_at=datetime(2026, 1, 2, tzinfo=timezone.utc)))
    assert path.read_text(encoding="utf-8").startswith(first + "\n")
    assert [lab.trajectory_id for lab in load_labels(path)] == ["a", "b"]


def test_session_with_injected_input_output_and_clock(judged_suite: Path, tmp_path: Path):
    labels = tmp_path / "l.jsonl"
    loaded = load_suite(judged_suite)
    work = plan(list(iter_trajectories_of(loaded)), n=1, seed=0, labeler="eve", labels_path=lambda _: labels)
    answers, written = iter(["f\n", "wrong city\n", "0.25\n", "\n"]), []
    clock = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
    outcome = run_session(work, "eve", PlainTerminal(written.append, lambda: next(answers, "")), now=lambda: clock)
    assert (outcome.labelled, outcome.left, outcome.stopped) == (2, 0, False)
    assert [(lab.axis, lab.label, lab.score, lab.note, lab.labeled_at) for lab in load_labels(labels)] == [
        ("task_success", "fail", None, "wrong city", clock), ("faithfulness", None, 0.25, None, clock)]
    assert "task_success: p = pass, f = fail (s skip, q quit): " in written


# --- the command, in process -------------------------------------------------------------------


def test_full_run_shows_the_trajectory_and_writes_labels(example: Path, tmp_path: Path):
    code, out = label_cli(example, "--sample", 3, "--seed", 1, "--labeler", "alice",
                          input="1\n\n0.5\nunsure about the plan\n0\n\n")
    assert code == 0, out
    path = default_labels(example)  # in the suite's calibration_dir
    assert path.is_relative_to(tmp_path)
    labels = load_labels(path)
    assert [lab.trajectory_id for lab in labels] == asked_ids(out) == draw_sample(ids_of(example), 3, 1)
    assert [lab.score for lab in labels] == [1.0, 0.5, 0.0]
    assert [lab.note for lab in labels] == [None, "unsure about the plan", None]
    assert {(lab.labeler, lab.axis, lab.kind, lab.labeled_at.utcoffset().total_seconds()) for lab in labels} == {
        ("alice", "faithfulness", "graded", 0.0)
    }
    assert '"labeled_at":"' in path.read_text() and path.read_text().count("Z\"") == 3
    for shown in ("-- Task", "Update my email to alice@example.com", "-- End-state diff", '~ users/1/email: "alice.old',
                  "-- Calls", "-- Output", "faithfulness: guide", "Split the answer into atomic claims",
                  "faithfulness score in [0, 1]", "labelled 3; every item of this sample is labelled"):
        assert shown in out
    assert '"expected"' not in out and "metadata" not in out.lower()  # it may hold the expected outcome

    code, again = label_cli(example, "--sample", 3, "--seed", 1, "--labeler", "alice")
    assert code == 0 and "nothing left to label" in again and len(load_labels(path)) == 3


def test_invalid_answers_are_asked_again(example: Path, tmp_path: Path):
    labels = tmp_path / "l.jsonl"
    code, out = label_cli(example, "--sample", 1, "--seed", 1, "--labeler", "a", "--labels", labels,
                          input="2\nyes\n-0.1\n0.75\n\n")
    assert code == 0
    assert out.count("faithfulness score in [0, 1]") == 4 and out.count("expected a number from 0 to 1") == 3
    assert [lab.score for lab in load_labels(labels)] == [0.75]


def test_skip_and_quit_leave_items_for_the_next_run(example: Path, tmp_path: Path):
    labels = tmp_path / "l.jsonl"
    args = (example, "--sample", 4, "--seed", 2, "--labeler", "a", "--labels", labels)
    code, out = label_cli(*args, input="s\n1\n\nq\n")
    assert code == 0
    assert out.strip().endswith("labelled 1, skipped 1, 3 left; run the same command to resume")
    order = draw_sample(ids_of(example), 4, 2)
    assert [lab.trajectory_id for lab in load_labels(labels)] == [order[1]]
    code, out = label_cli(*args, input="0\n\n0\n\n0\n\n")
    assert code == 0 and asked_ids(out) == [order[0], order[2], order[3]]
    assert sorted(t for t, _, _ in labelled(labels)) == sorted(order)


def test_malformed_labels_file_is_exit_2_naming_the_line(example: Path, tmp_path: Path):
    labels = tmp_path / "l.jsonl"
    good = '{"trajectory_id": "ok", "axis": "faithfulness", "score": 1, "labeler": "b", "labeled_at": "2026-01-01T00:00:00Z"}\n'
    labels.write_text(good + '{"trajectory_id": "x", "axis": "faithfulness", "score": 3, "labeler": "b"\n', encoding="utf-8")
    before = labels.read_bytes()
    result = CliRunner().invoke(main, ["label", str(example), "--sample", "2", "--seed", "1", "--labeler", "a",
                                       "--labels", str(labels)], input="1\n\n1\n\n")
    assert result.exit_code == 2
    assert f"{labels}:2: invalid JSON" in result.output
    assert "trajectory" not in result.output.replace(str(labels), "")  # stopped before showing anything
    assert labels.read_bytes() == before


def test_stratified_by_the_judge_and_blind_to_it(example: Path, tmp_path: Path):
    passing = {"ok", "retry-after-error"}
    verdicts = write_verdicts(example, tmp_path / "run.json", passing)
    labels = tmp_path / "l.jsonl"
    code, out = label_cli(example, "--sample", 4, "--seed", 5, "--labeler", "a", "--labels", labels,
                          "--verdicts", verdicts, input="1\n\n" * 4)
    assert code == 0, out
    ids = [t for t, _, _ in labelled(labels)]
    assert len(ids) == 4 and set(ids) >= passing  # both judge-pass trajectories, though only 2 of 9
    assert "stratified by the judge's faithfulness verdict (score >= 0.5 counts as pass)" in out
    for leaked in (SECRET, "0.987", "0.123", "0.99", "0.12", "judge-pass", "judge-fail", "verdict:"):
        assert leaked not in out

    plain = draw_sample(ids_of(example), 4, 5)
    assert not passing <= set(plain)  # stratification changed the sample for this seed


def test_verdicts_of_another_rubric_version_are_not_used(example: Path, tmp_path: Path):
    record = read_run(write_verdicts(example, tmp_path / "run.json", {"ok"}))
    for result in record.results:
        result.rubric = "update-email@0.9.0"
    record.write(tmp_path / "run.json")
    code, out = label_cli(example, "--sample", 2, "--seed", 5, "--labeler", "a", "--labels", tmp_path / "l.jsonl",
                          "--verdicts", tmp_path / "run.json")
    assert code == 0 and "plain seeded sample" in out
    assert asked_ids(out) == draw_sample(ids_of(example), 2, 5)[:1]


def test_task_success_in_judge_mode_is_pass_fail(judged_suite: Path, tmp_path: Path):
    labels = tmp_path / "l.jsonl"
    code, out = label_cli(judged_suite, "--sample", 2, "--seed", 0, "--labeler", "a", "--labels", labels,
                          input="maybe\np\nlooks right\n1\n\nf\n\n0.5\n\n")
    assert code == 0, out
    assert out.count("task_success: p = pass, f = fail") == 3 and "expected p or f" in out
    got = labelled(labels)
    assert [(axis, value) for _, axis, value in got] == [
        ("task_success", "pass"), ("faithfulness", 1.0), ("task_success", "fail"), ("faithfulness", 0.5)]
    assert [lab.kind for lab in load_labels(labels)] == ["binary", "graded", "binary", "graded"]
    if "c0" in asked_ids(out):
        assert "ERROR: timeout after 30 s" in out and "Paris.\\x1b[2J" in out and "\x1b" not in out
    assert "(no world snapshots)" in out and "[doc1] France is in Europe." in out
    assert "EXPECTED-OUTCOME-IN-METADATA" not in out

    code, out = label_cli(judged_suite, "--sample", 6, "--seed", 0, "--labeler", "b", "--labels", labels,
                          "--axis", "faithfulness", input="")
    assert code == 0 and "task_success:" not in out and "labelled 0, 6 left" in out


def test_escape_sequences_in_output_are_shown_escaped(judged_suite: Path, tmp_path: Path):
    code, out = label_cli(judged_suite, "--sample", 6, "--seed", 0, "--labeler", "a", "--labels", tmp_path / "l.jsonl",
                          "--axis", "faithfulness", input="1\n\n" * 6)
    assert code == 0 and "Paris.\\x1b[2J" in out and "\x1b" not in out
    assert "ERROR: timeout after 30 s" in out


def test_nothing_to_label_is_an_input_error(judged_suite: Path, tmp_path: Path):
    rubric = judged_suite / "rubric.yaml"
    rubric.write_text(rubric.read_text().replace("  judge: true\n", "").split("faithfulness:")[0])
    result = CliRunner().invoke(main, ["label", str(judged_suite), "--sample", "2", "--seed", "0", "--labeler", "a"])
    assert result.exit_code == 2 and "nothing to label" in result.output and "--axis" in result.output
    code, out = label_cli(judged_suite, "--sample", 1, "--seed", 0, "--labeler", "a", "--labels", tmp_path / "l.jsonl",
                          "--axis", "task_success", "--axis", "faithfulness", input="p\n\n")
    assert code == 0 and "has no faithfulness section" in out and "labelled 1;" in out


def test_kind_conflict_with_another_labeler_is_refused(judged_suite: Path, tmp_path: Path):
    labels = tmp_path / "l.jsonl"
    lines = [json.dumps({"trajectory_id": f"c{i}", "axis": "task_success", "score": 0.5, "labeler": "z",
                         "labeled_at": "2026-01-01T00:00:00Z"}) for i in range(6)]
    labels.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match="graded item"):
        loaded = load_suite(judged_suite)
        plan(list(iter_trajectories_of(loaded)), n=2, seed=0, labeler="a", labels_path=lambda _: labels)


# --- the command, through real pipes and a real terminal ---------------------------------------


def run_cli(args: list, cwd: Path, input: str, hash_seed: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    return subprocess.run([*CLI, "label", *map(str, args)], input=input, capture_output=True, text=True,
                          cwd=cwd, check=False, env=env, timeout=60)


def test_interrupted_through_pipes_then_resumed_equals_a_full_run(example: Path, tmp_path: Path):
    args = [example, "--sample", 5, "--seed", 11, "--labeler", "carol"]
    answers = "0.5\nfirst note\n1\n\n0\n\n0.25\n\n1\n\n"

    full_dir = tmp_path / "full"
    full_dir.mkdir()
    code, _ = label_cli(*args, "--labels", full_dir / "labels.jsonl", input=answers)
    assert code == 0

    work = tmp_path / "resumed"
    work.mkdir()
    path = default_labels(example)
    first = run_cli(args, work, answers[: answers.index("0\n\n")], hash_seed="1")  # ends mid-sample: EOF
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip().splitlines()[-1] == "labelled 2, 3 left; run the same command to resume"
    written = path.read_bytes()
    assert len(written.splitlines()) == 2

    second = run_cli(args, work, answers[answers.index("0\n\n"):], hash_seed="2")  # another hash seed
    assert second.returncode == 0, second.stderr
    assert "(2 already done)" in second.stdout and "labelled 3; every item" in second.stdout
    assert path.read_bytes().startswith(written)  # earlier lines byte-identical
    resumed, full = labelled(path), labelled(full_dir / "labels.jsonl")
    assert resumed == full and len({(t, a) for t, a, _ in resumed}) == 5
    assert [lab.note for lab in load_labels(path)] == [lab.note for lab in load_labels(full_dir / "labels.jsonl")]


class Pty:
    """The command in a pseudo-terminal, as a person would run it."""

    def __init__(self, argv: list[str], cwd: Path):
        env = {**os.environ, "COLUMNS": "100", "LINES": "40", "TERM": "xterm-256color"}
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: the pty is its controlling terminal
            signal.signal(signal.SIGINT, signal.SIG_DFL)  # as a shell would leave it, whatever pytest did
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
            os.chdir(cwd)
            os.execvpe(argv[0], argv, env)
        self.text = ""

    def _read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return True
        try:
            chunk = os.read(self.fd, 65536)
        except OSError:  # EIO: the child has gone
            return False
        self.text += chunk.decode("utf-8", "replace")
        return bool(chunk)

    @property
    def plain(self) -> str:
        return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", self.text).replace("\r\n", "\n")

    def expect(self, needle: str, count: int = 1, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while self.plain.count(needle) < count:
            if time.monotonic() > deadline or not self._read(0.2):
                raise AssertionError(f"{needle!r} did not appear; got:\n{self.plain[-2000:]}")

    def send(self, text: str) -> None:
        os.write(self.fd, text.encode())

    def ctrl_c(self) -> None:
        """Ctrl-C once the child sleeps reading the terminal. A SIGINT that lands between the
        prompt being printed and read() starting is only acted on after the next line (a
        CPython signal race a person answers by pressing Ctrl-C again), so wait for the read."""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                state = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
                wchan = Path(f"/proc/{self.pid}/wchan").read_text()
            except OSError:  # no /proc: give it a moment instead
                time.sleep(0.5)
                break
            if state == "S" and wchan in ("wait_woken", "n_tty_read"):
                break
            self._read(0.05)
        self.send("\x03")  # the terminal turns it into SIGINT for the foreground process

    def wait(self, timeout: float = 30) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._read(0.1)
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                while self._read(0.05) and select.select([self.fd], [], [], 0)[0]:
                    pass
                os.close(self.fd)
                return os.waitstatus_to_exitcode(status)
        os.kill(self.pid, 9)
        raise AssertionError(f"the command did not exit; got:\n{self.plain[-2000:]!r}")


def test_terminal_session_prompts_and_ctrl_c_then_resume(example: Path, tmp_path: Path):
    args = [str(example), "--sample", "3", "--seed", "4", "--labeler", "dana"]
    term = Pty([*CLI, "label", *args], tmp_path)
    prompt = "faithfulness score in [0, 1], e.g. 1, 0.5, 0 (s skip, q quit):"
    term.expect(prompt)
    for shown in ("Task", "End-state diff", "Calls", "Output", "faithfulness: guide", "Split the answer"):
        assert shown in term.plain
    assert "╭" in term.text  # rich panels on a terminal
    term.send("0.5\n")
    term.expect("note (optional, Enter for none):")
    term.send("partly\n")
    term.expect(prompt, count=2)
    term.ctrl_c()
    assert term.wait() == 0
    assert "labelled 1, 2 left; run the same command to resume" in term.plain
    assert "Traceback" not in term.plain

    path = default_labels(example)
    first = load_labels(path)
    assert [(lab.trajectory_id, lab.score, lab.note) for lab in first] == [(draw_sample(ids_of(example), 3, 4)[0], 0.5, "partly")]
    code, _ = label_cli(*args, "--labels", path, input="1\n\n1\n\n")
    assert code == 0 and sorted(t for t, _, _ in labelled(path)) == sorted(draw_sample(ids_of(example), 3, 4))


# --- one session per labels file; a torn last line set aside -----------------------------------

PROMPT = b"faithfulness score in [0, 1]"
HELD = "another `judgekit label` session holds this labels file; finish or quit it first (or label into another file with --labels)"


class PipedSession:
    """A real `judgekit label` process on pipes, read as it prints, so a test can act mid-session."""

    def __init__(self, args: list, cwd: Path):
        self.proc = subprocess.Popen([*CLI, "label", *map(str, args)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, cwd=cwd)
        self.out = b""

    def expect(self, needle: bytes, count: int = 1, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while self.out.count(needle) < count:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise AssertionError(f"{needle!r} did not appear; got:\n{self.out[-2000:].decode()}")
            chunk = os.read(fd, 65536)
            if not chunk:
                raise AssertionError(f"the session ended before {needle!r}; got:\n{self.out[-2000:].decode()}")
            self.out += chunk

    def send(self, text: str) -> None:
        self.proc.stdin.write(text.encode())
        self.proc.stdin.flush()

    def wait_reading(self) -> None:
        """Until the process sleeps in read() on its stdin (a signal sent earlier could wait for
        the next line; see Pty.ctrl_c)."""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                state = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
                wchan = Path(f"/proc/{self.proc.pid}/wchan").read_text()
            except OSError:  # no /proc: give it a moment instead
                time.sleep(0.5)
                return
            if state == "S" and "pipe" in wchan:
                return
            time.sleep(0.02)

    def finish(self, text: str = "", timeout: float = 30) -> tuple[int, str, str]:
        out, err = self.proc.communicate(text.encode(), timeout=timeout)
        return self.proc.returncode, (self.out + out).decode(), err.decode()


def lock_is_free(path: Path) -> bool:
    """Whether an exclusive lock on ``path`` can be taken now (and it is released at once)."""
    import fcntl

    with open(path, "rb") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(handle, fcntl.LOCK_UN)
        return True


@pytest.mark.parametrize("second_labeler", [
    pytest.param("alice", id="same_labeler_would_write_a_duplicate"),
    pytest.param("bob", id="another_labeler_same_file"),
])
def test_a_second_session_on_one_labels_file_is_refused_at_once(example: Path, tmp_path: Path, second_labeler: str):
    labels = tmp_path / "l.jsonl"
    common = [example, "--sample", 3, "--seed", 1, "--labels", labels]
    first = PipedSession([*common, "--labeler", "alice"], tmp_path)
    try:
        first.expect(PROMPT)
        first.send("1\n\n")
        first.expect(PROMPT, count=2)  # the first label is on disk
        before = labels.read_bytes()
        assert len(before.splitlines()) == 1

        started = time.monotonic()
        second = run_cli([*common, "--labeler", second_labeler], tmp_path, "1\n\n" * 3, hash_seed="0")
        elapsed = time.monotonic() - started
        assert second.returncode == 2, second.stdout
        assert second.stderr.strip() == f"judgekit: error: {labels}: {HELD}"
        assert "trajectory" not in second.stdout and elapsed < 20  # refused before showing anything
        assert labels.read_bytes() == before and not lock_is_free(labels)

        code, out, err = first.finish("0.5\n\n0\n\n")
    finally:
        if first.proc.poll() is None:
            first.proc.kill()
    assert code == 0, err
    assert "labelled 3; every item of this sample is labelled" in out
    assert labelled(labels) == [(t, "faithfulness", s) for t, s in zip(draw_sample(ids_of(example), 3, 1), [1.0, 0.5, 0.0])]
    assert lock_is_free(labels)

    again = run_cli([*common, "--labeler", second_labeler], tmp_path, "1\n\n" * 3, hash_seed="0")
    assert again.returncode == 0, again.stderr
    assert len(load_labels(labels)) == (3 if second_labeler == "alice" else 6)  # valid, no duplicate


@pytest.mark.parametrize("end", [
    pytest.param("quit", id="quit"),
    pytest.param("eof", id="end_of_input"),
    pytest.param("ctrl_c", id="ctrl_c"),
    pytest.param("kill", id="killed"),
])
def test_the_lock_goes_when_the_session_ends_however_it_ends(example: Path, tmp_path: Path, end: str):
    labels = tmp_path / "l.jsonl"
    args = [example, "--sample", 2, "--seed", 3, "--labeler", "a", "--labels", labels]
    session = PipedSession(args, tmp_path)
    try:
        session.expect(PROMPT)
        session.send("0.5\n\n")
        session.expect(PROMPT, count=2)
        assert not lock_is_free(labels)
        if end == "quit":
            code, out, _ = session.finish("q\n")
        elif end == "eof":
            code, out, _ = session.finish("")
        elif end == "ctrl_c":
            session.wait_reading()
            session.proc.send_signal(signal.SIGINT)
            code, out, _ = session.finish()
        else:
            session.proc.kill()
            code, out, _ = session.finish()
    finally:
        if session.proc.poll() is None:
            session.proc.kill()
    if end == "kill":
        assert code == -signal.SIGKILL
    else:
        assert code == 0 and "labelled 1, 1 left; run the same command to resume" in out
    assert lock_is_free(labels) and len(load_labels(labels)) == 1
    code, out = label_cli(*args, input="1\n\n")
    assert code == 0 and "(1 already done)" in out and len(load_labels(labels)) == 2


def test_the_lock_goes_when_the_session_fails(judged_suite: Path, tmp_path: Path):
    labels = tmp_path / "l.jsonl"
    labels.write_text(json.dumps({"trajectory_id": "c0", "axis": "task_success", "score": 0.5, "labeler": "z",
                                  "labeled_at": "2026-01-01T00:00:00Z"}) + "\n")
    before = labels.read_bytes()
    result = CliRunner().invoke(main, ["label", str(judged_suite), "--sample", "6", "--seed", "0", "--labeler", "a",
                                       "--labels", str(labels)], input="p\n\n")
    assert result.exit_code == 2 and "as a graded item" in result.output
    assert labels.read_bytes() == before and lock_is_free(labels)


def test_a_session_that_labels_nothing_leaves_nothing(example: Path, tmp_path: Path):
    labels = tmp_path / "new" / "deeper" / "l.jsonl"
    code, out = label_cli(example, "--sample", 2, "--seed", 1, "--labeler", "a", "--labels", labels, input="q\n")
    assert code == 0 and "labelled 0, 2 left" in out
    assert not (tmp_path / "new").exists()  # neither the file nor the folders made for it


def test_a_torn_last_line_is_set_aside_and_the_session_resumes(example: Path, tmp_path: Path):
    labels = tmp_path / "l.jsonl"
    args = (example, "--sample", 3, "--seed", 1, "--labeler", "a", "--labels", labels)
    code, _ = label_cli(*args, input="1\n\n0.5\nhalf right\n")
    assert code == 0
    whole = labels.read_bytes()
    first, second = whole.splitlines(keepends=True)
    labels.write_bytes(first + second[:70])  # what a crash in the middle of the second append leaves
    torn = second[:70]

    code, out = label_cli(*args, input="0.25\n\n0\n\n")
    assert code == 0, out
    side = tmp_path / "l.jsonl.torn"
    assert (f"note: {labels}:2: the last line is cut off (70 bytes without a newline, not a complete label), as a "
            f"crash mid-write leaves it; set aside in {side} and removed from the labels file") in out
    assert side.read_bytes() == torn + b"\n"  # every byte kept, as one line
    assert "(1 already done)" in out and "labelled 2; every item" in out
    assert labels.read_bytes().startswith(first)
    order = draw_sample(ids_of(example), 3, 1)
    assert labelled(labels) == [(order[0], "faithfulness", 1.0), (order[1], "faithfulness", 0.25),
                                (order[2], "faithfulness", 0.0)]

    labels.write_bytes(labels.read_bytes() + b'{"trajectory_id": "x", "ax')  # torn again: appended, not overwritten
    code, out = label_cli(*args)
    assert code == 0 and "nothing left to label" in out
    assert side.read_bytes() == torn + b"\n" + b'{"trajectory_id": "x", "ax\n'
    assert len(load_labels(labels)) == 3


def test_a_complete_last_line_without_newline_is_kept(example: Path, tmp_path: Path):
    labels = tmp_path / "l.jsonl"
    args = (example, "--sample", 2, "--seed", 1, "--labeler", "a", "--labels", labels)
    assert label_cli(*args, input="1\n\n")[0] == 0
    labels.write_bytes(labels.read_bytes().rstrip(b"\n"))
    kept = labels.read_bytes()
    code, out = label_cli(*args, input="0\n\n")
    assert code == 0 and "cut off" not in out and "(1 already done)" in out
    assert labels.read_bytes().startswith(kept + b"\n") and len(load_labels(labels)) == 2
    assert not (tmp_path / "l.jsonl.torn").exists()


def test_a_bad_line_before_a_torn_last_line_is_an_error_and_nothing_moves(example: Path, tmp_path: Path):
    labels = tmp_path / "l.jsonl"
    good = '{"trajectory_id": "ok", "axis": "faithfulness", "score": 1, "labeler": "b", "labeled_at": "2026-01-01T00:00:00Z"}\n'
    labels.write_text(good + '{"bad": \n' + good.replace('"ok"', '"ok2"')[:40], encoding="utf-8")
    before = labels.read_bytes()
    result = CliRunner().invoke(main, ["label", str(example), "--sample", "2", "--seed", "1", "--labeler", "a",
                                       "--labels", str(labels)], input="1\n\n1\n\n")
    assert result.exit_code == 2
    assert f"{labels}:2: invalid JSON" in result.output and "set aside" not in result.output
    assert labels.read_bytes() == before and not (tmp_path / "l.jsonl.torn").exists()


def test_calibration_readers_say_that_label_sets_a_torn_line_aside(tmp_path: Path):
    labels = tmp_path / "l.jsonl"
    good = '{"trajectory_id": "ok", "axis": "faithfulness", "score": 1, "labeler": "b", "labeled_at": "2026-01-01T00:00:00Z"}\n'
    labels.write_text(good + good[:50], encoding="utf-8")
    with pytest.raises(InputError) as err:
        load_labels(labels)
    assert err.value.line == 2 and str(err.value).startswith(f"{labels}:2: invalid JSON")
    assert str(err.value).endswith("; this last line has no newline, as when a crash cuts a write short: "
                                   "`judgekit label` on this file sets it aside into l.jsonl.torn, or delete the line")
    labels.write_text(good + good[:50] + "\n", encoding="utf-8")  # a complete bad line: no such hint
    with pytest.raises(InputError) as err:
        load_labels(labels)
    assert "judgekit label" not in str(err.value) and err.value.line == 2
