"""SIGKILL at random moments: no verdict is lost, and only calls in flight at a kill repeat.

`judgekit run` judges 40 trajectories (faithfulness) at concurrency 4 against a scripted judge
in another process that answers after 0.2 s and logs when each request arrived and when its
answer went out. The run is killed with SIGKILL five times at seeded random moments (after a
random number, 0 to 6, of that run's answers went out, plus a random 0.02-0.3 s, so kills land
before any answer, while answers are being processed and in steady judging), then allowed to
finish.

"None requested twice" cannot hold strictly: a request in flight at a kill (sent, maybe even
answered, but its verdict not yet stored) dies with the process, and the next run must ask
again. The exact invariant, checked here from the server log and the cache after each kill:

    requests == distinct verdicts + requests in flight at a kill (verdict not stored when killed)

and no request is ever sent for a verdict already stored, no run sends one twice, and at
most 2 x `concurrency` requests are lost per kill: at most `concurrency` calls in flight and
at most `concurrency` answered verdicts waiting for the cache's writer thread.

The killed runs are forked from a process that has already imported judgekit and litellm
(tests/data/judge/cli_zygote.py: the console script's entry point, minus ~6 s of imports per
start); the final run is the real `judgekit` console script. JUDGEKIT_KILL_TEST_EXEC=1 execs
the console script for every run (slower, same assertions).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from judgekit._util.io import canonical_json
from judgekit.cache.store import VerdictCache
from judgekit.judge.resolve import JudgeOverride
from judgekit.run.plan import plan_run
from judgekit.run.record import read_run
from judgekit.suite import load_suite

DATA = Path(__file__).resolve().parent / "data" / "judge"
MODEL = "openai/judge-2024-08-06"
SEED = 20261130
TRAJECTORIES = 40
CONCURRENCY = 4
LATENCY_S = 0.2
KILLS = 5
KILL_AFTER_ANSWERS = (0, 6)  # kill once this many answers of the run went out (0: its first request)...
KILL_DELAY_S = (0.02, 0.3)  # ...plus this long: no run can store all 40 verdicts before its kill
EXEC_EVERY_RUN = os.environ.get("JUDGEKIT_KILL_TEST_EXEC") == "1"


def write_suite(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy(DATA / "rubric-faithfulness.yaml", root / "rubric.yaml")
    with (root / "trajectories.jsonl").open("w") as handle:
        for i in range(TRAJECTORIES):
            handle.write(json.dumps({
                "id": f"k{i:02d}",
                "prompt": f"How many seats does account {i} have?",
                "calls": [{"tool": "get_account", "args": {"id": i}, "result": {"id": i, "seats": 3 * i + 1}}],
                "output": f"Account {i} has {3 * i + 1} seats.",
            }) + "\n")
    suite = {
        "name": "kill test",
        "rubrics": ["rubric.yaml"],
        "trajectories": [{"file": "trajectories.jsonl", "rubric": "faithful-only"}],
        "judge": {"model": "local"},
    }
    (root / "suite.yaml").write_text(yaml.safe_dump(suite, sort_keys=False))
    return root / "suite.yaml"


def expected_keys(suite: Path, override: JudgeOverride) -> dict[str, str]:
    """sha256 of the messages sent -> the verdict's cache key, built the way planning does."""
    plan = plan_run(load_suite(suite), override=override)
    return {hashlib.sha256(canonical_json(j.job.prompt.messages).encode()).hexdigest(): j.job.key
            for j in plan.judgements if j.axis == "faithfulness"}


# --- processes ---------------------------------------------------------------------------------


class Zygote:
    """Runs `judgekit` command lines in children forked from a warm process."""

    def __init__(self):
        self.proc = subprocess.Popen([sys.executable, str(DATA / "cli_zygote.py")], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)

    def ready(self) -> None:
        assert json.loads(self.proc.stdout.readline())["ready"] is True

    def start(self, args: list[str], log: Path) -> int:
        self.proc.stdin.write(json.dumps({"args": args, "log": str(log)}) + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())["pid"]

    def wait(self, pid: int) -> int:
        done = json.loads(self.proc.stdout.readline())
        assert done["pid"] == pid
        return done["status"]

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class Exec:
    """Runs the real console script for each command line."""

    def __init__(self):
        self.children: dict[int, subprocess.Popen] = {}

    def ready(self) -> None:
        pass

    def start(self, args: list[str], log: Path) -> int:
        with log.open("w") as handle:
            proc = subprocess.Popen(["judgekit", *args], stdout=handle, stderr=subprocess.STDOUT)
        self.children[proc.pid] = proc
        return proc.pid

    def wait(self, pid: int) -> int:
        code = self.children.pop(pid).wait(120)
        return (-code) if code < 0 else (code << 8)  # as a wait status

    def close(self) -> None:
        pass


def read_log(path: Path) -> list[dict[str, Any]]:
    """The server's events so far: complete lines only. The server (another process) may be
    writing the last one as this reads, and a read can see part of it."""
    text = path.read_text()
    return [json.loads(line) for line in text[:text.rfind("\n") + 1].splitlines() if line.strip()]


def wait_for_events(path: Path, since: float, kind: str, count: int, timeout_s: float = 60) -> None:
    """Until the server logged `count` events of `kind` ('recv' or 'sent') at or after `since`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if sum(e["event"] == kind and e["t"] >= since for e in read_log(path)) >= count:
            return
        time.sleep(0.005)
    raise AssertionError(f"the run did not get {count} {kind!r} events")


def stored_keys(cache_dir: Path, keys: set[str]) -> set[str]:
    if not cache_dir.exists():
        return set()
    with VerdictCache(cache_dir) as store:
        return {key for key in keys if store.get(key) is not None}


@dataclass
class Run:
    started: float
    killed: float | None = None
    stored_after: set[str] = field(default_factory=set)
    requests: list[dict[str, Any]] = field(default_factory=list)


def test_sigkill_loses_no_verdict_and_repeats_only_calls_in_flight(tmp_path):
    rng = random.Random(SEED)
    suite = write_suite(tmp_path / "suite")
    cache_dir, log_path, out = tmp_path / "cache", tmp_path / "server.log", tmp_path / "run.json"
    log_path.touch()
    test_started = time.monotonic()

    server = subprocess.Popen([sys.executable, str(DATA / "logging_server.py"), str(log_path), str(LATENCY_S)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    launcher = Exec() if EXEC_EVERY_RUN else Zygote()
    pid = None  # the run not yet waited for: killed on the way out if the test fails
    try:
        base_url = server.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:")
        override = JudgeOverride(model=MODEL, api_base=base_url)
        keys = expected_keys(suite, override)
        all_keys = set(keys.values())
        assert len(all_keys) == TRAJECTORIES
        args = ["run", str(suite), "--judge-model", MODEL, "--judge-api-base", base_url,
                "--cache-dir", str(cache_dir), "--concurrency", str(CONCURRENCY)]
        launcher.ready()

        runs: list[Run] = []
        for i in range(KILLS):
            run = Run(started=time.monotonic())
            answers, delay = rng.randint(*KILL_AFTER_ANSWERS), rng.uniform(*KILL_DELAY_S)
            pid = launcher.start(args, tmp_path / f"run{i}.log")
            wait_for_events(log_path, run.started, "recv", 1)
            wait_for_events(log_path, run.started, "sent", answers)
            time.sleep(delay)
            run.killed = time.monotonic()
            os.kill(pid, signal.SIGKILL)
            status, pid = launcher.wait(pid), None
            assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, (
                f"run {i} ended before its kill: {(tmp_path / f'run{i}.log').read_text()[-500:]}"
            )
            run.stored_after = stored_keys(cache_dir, all_keys)
            runs.append(run)

        final = Run(started=time.monotonic())
        proc = subprocess.run(["judgekit", *args, "--out", str(out), "--format", "jsonl"],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        final.stored_after = stored_keys(cache_dir, all_keys)
        runs.append(final)
        time.sleep(LATENCY_S)  # let the server log its last answers
    finally:
        if pid is not None:
            os.kill(pid, signal.SIGKILL)
            launcher.wait(pid)
        launcher.close()
        server.stdin.close()
        server.wait(10)

    events = read_log(log_path)
    received = [e for e in events if e["event"] == "recv"]
    sent = {(e["digest"], round(e["t"], 6)) for e in events if e["event"] == "sent"}
    for event in received:  # each request belongs to the run started last before it arrived
        owner = max((r for r in runs if r.started <= event["t"]), key=lambda r: r.started)
        owner.requests.append(event)

    stored_before: set[str] = set()
    lost_per_kill, answered_but_lost = [], 0
    for index, run in enumerate(runs):
        asked = [keys[e["digest"]] for e in run.requests]
        assert len(asked) == len(set(asked)), f"run {index} asked for one verdict twice"
        assert not set(asked) & stored_before, f"run {index} asked for a verdict already stored"
        assert run.stored_after >= stored_before, f"run {index}: a stored verdict was lost"
        if run.killed is not None:
            lost = [e for e in run.requests if keys[e["digest"]] not in run.stored_after]
            assert len(lost) <= 2 * CONCURRENCY
            lost_per_kill.append(len(lost))
            answered_but_lost += sum(
                any(d == e["digest"] and run.started <= t < run.killed for d, t in sent) for e in lost
            )
        stored_before = run.stored_after

    record = read_run(out).model_dump(mode="json")
    faithfulness = [r["axes"]["faithfulness"] for r in record["results"]]
    per_key = Counter(keys[e["digest"]] for e in received)
    elapsed = time.monotonic() - test_started
    print(
        f"\nSIGKILL x{KILLS}: requests per killed run {[len(r.requests) for r in runs[:-1]]}, "
        f"final run {len(runs[-1].requests)}; stored after each kill {[len(r.stored_after) for r in runs[:-1]]}; "
        f"in flight at each kill (verdict not stored) {lost_per_kill}, of which answered by the server "
        f"before the kill {answered_but_lost}; total requests {len(received)} = {len(all_keys)} distinct verdicts "
        f"+ {sum(lost_per_kill)} re-sent; max sends of one verdict {max(per_key.values())}; {elapsed:.1f}s"
    )

    # No verdict lost: the final run has a scored verdict for every trajectory, all in the cache.
    assert len(faithfulness) == TRAJECTORIES
    assert all(a["status"] == "scored" for a in faithfulness)
    assert final.stored_after == all_keys
    # None requested twice, except exactly the requests in flight at a kill.
    assert set(per_key) == all_keys
    assert len(received) == len(all_keys) + sum(lost_per_kill)
    assert all(count - 1 <= KILLS for count in per_key.values())
    # The final run asked only for what no earlier run had stored, and says so in its ledger.
    assert len(runs[-1].requests) == len(all_keys - runs[-2].stored_after)
    assert record["ledger"]["cache_hits"] == len(runs[-2].stored_after)
