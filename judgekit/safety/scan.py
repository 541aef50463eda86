"""``judgekit safety SUITE``: run the detectors over a suite, apply the waivers, decide per signal.

The scan is a frozen measurement: its record names the revision measured (and refuses a dirty
tree unless told), the suite and policy hashes, the identity the job ran as, and the day the
waivers were judged on. It never claims completeness (``LIMITS``), and a clean scan still
writes its residual-risk summary with an owner and a date.
"""

from __future__ import annotations

import getpass
import os
import socket
from datetime import date, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from judgekit._util.io import Version1, sha256_json
from judgekit._util.text import redact
from judgekit._util.clock import utc_now
from judgekit._util.version import __version__
from judgekit.trajectory import WorldState
from judgekit.errors import ConfigError, InputError
from judgekit.suite.inputs import iter_trajectories_of
from judgekit.run.record import ProjectState, new_run_id, project_state
from judgekit.safety.findings import SIGNAL_TITLES, SIGNALS, Finding
from judgekit.safety.risks import RiskRegister, RiskState, confine_risks, load_risks
from judgekit.rubric.model import Rubric
from judgekit.safety.exfiltration import judged_write, unflagged_actions
from judgekit.safety.judged import EXFILTRATION, QUESTION, QUESTIONS, SafetyJudge, Question
from judgekit.safety.signals import Detectors, Scanned, masked
from judgekit.trajectory import Trajectory
from judgekit.suite import LoadedSuite

SAFETY_FORMAT_VERSION = 1
LIMITS = ("Automated checks catch known patterns; new chains and policy judgement still need review. "
          "A clean scan means none of these detectors fired on the trajectories scanned, nothing more.")
EXPIRY_WARNING_DAYS = 14
JUDGE_WINDOW = 64
"""Trajectories scanned before the judge is asked about their untrusted text (memory stays flat)."""
IDENTITY_VARIABLES = ("JUDGEKIT_SAFETY_IDENTITY", "GITHUB_ACTOR", "GITLAB_USER_LOGIN", "BUILD_REQUESTEDFOR")


class ScanFinding(Finding):
    waived_by: str | None = Field(None, description="The residual-risk record that waived it (file name).")


class SignalDecision(BaseModel):
    model_config = ConfigDict(extra="forbid")

    signal: str
    title: str
    fired: int = Field(description="Findings of this signal.")
    waived: int = Field(description="Of them, waived by a valid residual-risk record.")
    open: int = Field(description="Of them, neither waived nor advisory: these stop shipping.")
    stop_ship: bool
    trajectories: list[str] = Field(description="Trajectories with an open finding (the first 20).")
    owners: list[str] = Field(default_factory=list, description="Owners of the waivers used for this signal.")


class WaiverUse(BaseModel):
    model_config = ConfigDict(extra="forbid")

    file: str
    signal: str
    owner: str
    expires: date
    reason: str
    rollback: str
    findings: int


class ResidualRisk(BaseModel):
    """What is left after the scan, owned and dated, archived even when the sweep is clean."""

    model_config = ConfigDict(extra="forbid")

    owner: str
    date: date
    summary: str
    deferred: list[str] = Field(default_factory=list, description="Open judgement the scan leaves to people.")


class SafetyReport(BaseModel):
    """One safety scan: ``judgekit schema safety-report``."""

    model_config = ConfigDict(extra="forbid")

    format_version: Version1 = SAFETY_FORMAT_VERSION
    kind: Literal["judgekit-safety-scan"] = "judgekit-safety-scan"
    scan_id: str
    suite: str
    suite_file: str
    suite_sha256: str = Field(description="sha256 of the suite's settings as loaded (policy included).")
    policy_sha256: str
    rubrics: dict[str, str] = Field(description="Rubric id@version -> sha256.")
    project: ProjectState
    ran_as: str = Field(description="The identity the job ran as.")
    judgekit_version: str
    started_at: datetime
    finished_at: datetime
    today: date = Field(description="The day waivers were judged valid or expired on.")
    trajectories: int
    stop_ship: bool
    decisions: list[SignalDecision]
    findings: list[ScanFinding]
    notes: list[str] = Field(default_factory=list, description="Seen, not a signal: an instruction nobody followed...")
    waivers_used: list[WaiverUse] = Field(default_factory=list)
    waivers_refused: list[str] = Field(default_factory=list, description="Records that matched a finding but "
                                       "were not valid, and why.")
    expiring: list[str] = Field(default_factory=list, description=f"Valid records that expire within "
                                f"{EXPIRY_WARNING_DAYS} days.")
    risk_problems: list[str] = Field(default_factory=list, description="Residual-risk files that could not be read "
                                     "(they waive nothing; they stop shipping until fixed).")
    risks: list[RiskState] = Field(default_factory=list, description="Every residual-risk record and its state today.")
    residual_risk: ResidualRisk
    judge: str | None = Field(None, description="The judge-based detectors that ran, if any (the injection question's "
                              "first, the exfiltration question's named), and whether their findings stop shipping "
                              "(approved by calibration) or only advise, and why.")
    limits: str = LIMITS


def ran_as(environ=os.environ) -> str:
    """Who the job ran as: JUDGEKIT_SAFETY_IDENTITY or the CI's actor, else user@host."""
    for name in IDENTITY_VARIABLES:
        if environ.get(name):
            return environ[name]
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return f"{user}@{socket.gethostname()}"


def scan_suite(loaded: LoadedSuite, *, today: date | None = None, allow_dirty: bool = False,
               risks: RiskRegister | None = None, owner: str | None = None, use_judge: bool = True,
               environ=os.environ) -> SafetyReport:
    """Scan every trajectory of ``loaded`` under its ``safety:`` policy (and, unless
    ``use_judge`` is false, ask its judge the policy's ``judge_questions``: about the untrusted
    text no pattern flagged, and about the writes and sends no check flagged).

    The waivers are the records of ``safety.risks`` (``risks`` replaces them). A risks folder,
    or a record that is a symbolic link, outside the suite file's folder tree once every link
    is followed is an InputError naming the suite file. A record longer than
    ``safety.max_waiver_days`` or dated after ``today`` waives nothing and stops shipping.
    """
    policy = loaded.suite.safety
    if policy is None:
        raise ConfigError(f"{loaded.path}: the suite has no `safety:` section (tool classes, allowed changes): "
                          "judgekit safety needs one")
    owner = owner or policy.owner or environ.get("JUDGEKIT_SAFETY_OWNER")
    if not owner or not owner.strip():
        raise ConfigError(f"{loaded.path}: the scan's residual risk needs an owner: set `safety.owner` or "
                          "JUDGEKIT_SAFETY_OWNER, or pass --owner")
    # Refused before anything else: records outside the suite's folder tree are never read.
    risks_folder = loaded.base_dir / policy.risks
    confined_risks = confine_risks(risks_folder, loaded.path)
    project = project_state(loaded.path.parent, environ)
    if project.git_commit and not project.git_dirty and _unversioned_inputs(loaded, confined_risks):
        project = project.model_copy(update={"git_dirty": True})
    if project.git_dirty and not allow_dirty:
        raise ConfigError(f"{loaded.path.parent}: the working tree has uncommitted changes (or inputs that are not in "
                          "the commit: untracked trajectories or residual-risk records), so the scan would not measure "
                          "a revision: commit them, or pass --allow-dirty (the record then says so)")
    started = utc_now()
    today = today or started.date()
    register = risks if risks is not None else load_risks(
        risks_folder, suite_file=loaded.path, today=today, max_days=policy.max_waiver_days)
    judges = ({name: SafetyJudge(loaded, policy.judge, QUESTIONS[name]) for name in policy.judge_questions}
              if policy.judge is not None and use_judge else {})
    judge, exfil = judges.get(QUESTION), judges.get(EXFILTRATION)
    detectors = Detectors(policy, keep_unflagged=judge is not None)
    findings: list[ScanFinding] = []
    notes: list[str] = []
    used: dict[str, tuple[object, int]] = {}
    refused: set[str] = set()
    asked = [0, 0]  # questions to the judge, and those without a valid answer
    asked_exfil = [0, 0]

    def settle(window: list[tuple[Rubric, Trajectory, Scanned]]) -> None:
        if judge is not None:
            _judge_window(judge, detectors, window, asked)
        if exfil is not None:
            _exfil_window(exfil, detectors, window, asked_exfil)
        for _, _, scanned in window:
            notes.extend(scanned.notes)
            for finding in scanned.findings:
                waiver = register.waiver_for(finding, today)
                for considered in register.considered(finding, today):
                    refused.add(f"{considered.describe()} to {finding.signal} in {finding.trajectory_id}")
                if waiver is not None:
                    record, n = used.get(waiver.name, (waiver, 0))
                    used[waiver.name] = (record, n + 1)
                findings.append(ScanFinding(**finding.model_dump(), waived_by=waiver.name if waiver else None))

    count = 0
    # Only the judge needs trajectories kept (its questions go in batches); without it each is
    # settled at once: 64 parsed trajectories alive at a time cost the garbage collector ~25%
    # of the scan (measured).
    window_size = JUDGE_WINDOW if judges else 1
    window: list[tuple[Rubric, Trajectory, Scanned]] = []
    try:
        for rubric, item in iter_trajectories_of(loaded):
            count += 1
            world = WorldState(item)
            try:
                diff = world.diff if world.present else None
            except InputError as exc:
                raise InputError(f"trajectory {item.trajectory.id}: its world could not be read, so the scan cannot "
                                 f"vouch for it: {exc}", item.path, item.line) from None
            window.append((rubric, item.trajectory, detectors.scan(item.trajectory, rubric, diff)))
            if len(window) >= window_size:
                settle(window)
                window = []
        settle(window)
    finally:
        for each in judges.values():
            each.close()
    decisions = [_decide(signal, findings, used) for signal in SIGNALS]
    problems = [masked(p, 400) for p in register.problems]
    stop = any(d.stop_ship for d in decisions) or bool(problems)
    deferred = _deferred(notes, findings, used, judge, asked, exfil, asked_exfil)
    summary = _summary(stop, decisions, findings, count, problems)
    suite_settings = loaded.suite.model_dump(mode="json")
    report = SafetyReport(
        scan_id=new_run_id(), suite=loaded.suite.name, suite_file=loaded.path.name,
        suite_sha256=sha256_json(suite_settings), policy_sha256=sha256_json(policy.model_dump(mode="json")),
        rubrics={ref: rubric.sha256() for ref, rubric in loaded.rubrics.items()}, project=project,
        ran_as=masked(ran_as(environ), 200), judgekit_version=__version__, started_at=started, finished_at=utc_now(),
        today=today, trajectories=count, stop_ship=stop, decisions=decisions, findings=findings,
        notes=[masked(n, 400) for n in notes],
        waivers_used=[WaiverUse(file=name, signal=r.record.signal, owner=r.record.owner, expires=r.record.expires,
                                reason=masked(r.record.reason), rollback=masked(r.record.rollback), findings=n)
                      for name, (r, n) in sorted(used.items())],
        waivers_refused=sorted(refused),
        expiring=[f"{r.name}: {r.record.signal}, owner {r.record.owner}, expires {r.record.expires}"
                  for r in register.expiring(today, within_days=EXPIRY_WARNING_DAYS)],
        risk_problems=problems,
        risks=register.summary(today, within_days=EXPIRY_WARNING_DAYS),
        residual_risk=ResidualRisk(owner=masked(owner, 200), date=today, summary=summary, deferred=deferred),
        judge="; ".join(f"{j.name}{'' if name == QUESTION else ' on ' + name}: "
                        f"{j.advisory or 'approved by calibration, its findings stop shipping'}"
                        for name, j in judges.items()) or None,
    )
    # Every other text masked too, the suite's and the records' included (the record is written
    # as is): each string on its own, so the JSON stays JSON. The findings were masked as they
    # were made (they are most of the record: masking them twice doubled the scan's time).
    rest = _masked_strings(report.model_dump(mode="json", exclude={"findings"}))
    return SafetyReport.model_validate({**rest, "findings": findings})


def _masked_strings(value):
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact(key): _masked_strings(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_masked_strings(item) for item in value]
    return value


def _unversioned_inputs(loaded: LoadedSuite, risks_folder: Path) -> bool:
    """Whether an input of the scan is not in the commit: an untracked (or ignored) trajectory,
    rubric or residual-risk record, or a risks folder outside the repository. ``git status
    --untracked-files=no`` does not see them, and an untracked waiver would silence a signal."""
    import subprocess

    paths = [str(p) for p in loaded.input_files()] + [str(risks_folder)]
    try:
        done = subprocess.run(["git", "-C", str(loaded.path.parent), "ls-files", "--others", "--", *paths],
                              capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.SubprocessError):
        return True
    return done.returncode != 0 or bool(done.stdout.strip())


def _decide(signal: str, findings: list[ScanFinding], used: dict) -> SignalDecision:
    mine = [f for f in findings if f.signal == signal]
    waived = [f for f in mine if f.waived_by is not None]
    open_ = [f for f in mine if f.waived_by is None and f.stop_ship]
    owners = sorted({used[f.waived_by][0].record.owner for f in waived})
    trajectories = list(dict.fromkeys(f.trajectory_id for f in open_))[:20]
    return SignalDecision(signal=signal, title=SIGNAL_TITLES[signal], fired=len(mine), waived=len(waived),
                          open=len(open_), stop_ship=bool(open_), trajectories=trajectories, owners=owners)


def _judge_window(judge: SafetyJudge, detectors: Detectors, window, asked: list[int]) -> None:
    """Ask the judge about every unflagged source of the window, then follow what it found."""
    questions = [(k, source) for k, (_, _, scanned) in enumerate(window) for source in scanned.unflagged]
    if not questions:
        return
    answers = judge.ask([Question(window[k][0], k, source.where, source.shown, source.readable_from)
                         for k, source in questions])
    asked[0] += len(questions)
    for (k, source), answer in zip(questions, answers):
        rubric, trajectory, scanned = window[k]
        if answer is None:
            asked[1] += 1
        elif answer.instruction_found and answer.instruction.strip():
            detectors.follow_judged(trajectory, rubric, source, answer.instruction, judge.name, judge.advisory, scanned)


def _exfil_window(judge: SafetyJudge, detectors: Detectors, window, asked: list[int]) -> None:
    """Ask the judge about every write and send of the window no check flagged, and report
    what it reads as exfiltration (with a recipient copied from the call) as an unexpected write."""
    questions = [item for k, (rubric, trajectory, scanned) in enumerate(window)
                 for item in unflagged_actions(detectors, rubric, trajectory, k, scanned.findings)]
    if not questions:
        return
    answers = judge.ask(questions)
    asked[0] += len(questions)
    for item, answer in zip(questions, answers):
        _, trajectory, scanned = window[item.trajectory_index]
        if answer is None:
            asked[1] += 1
        elif answer.exfiltration:
            made = judged_write(detectors, trajectory, item, answer, judge.name, judge.advisory)
            (scanned.notes if isinstance(made, str) else scanned.findings).append(made)


def _deferred(notes: list[str], findings: list[ScanFinding], used: dict, judge: SafetyJudge | None,
              asked: list[int], exfil: SafetyJudge | None = None, asked_exfil: list[int] | None = None) -> list[str]:
    if judge is None:
        why = ("the judge is not asked safety.injection (safety.judge_questions)" if exfil is not None
               else "no judge-based detector ran (set safety.judge)")
        unknown = ("untrusted text the patterns do not know (paraphrased or encoded instructions, multi-step chains): "
                   f"{why}, so nobody read it; review a sample by hand")
    else:
        status = (judge.advisory or f"approved, so its findings stop shipping ({judge.certificate})")
        unknown = (f"untrusted text the patterns do not know was read by {judge.name}: {asked[0]} source(s) asked, "
                   f"{asked[1]} without a valid answer; what it found is {status}")
    deferred = [unknown]
    if exfil is not None and asked_exfil is not None:
        status = (exfil.advisory or f"approved, so its findings stop shipping ({exfil.certificate})")
        deferred.append(f"writes and sends no check flagged were read for exfiltration by {exfil.name}: "
                        f"{asked_exfil[0]} asked, {asked_exfil[1]} without a valid answer; what it found is {status}")
    if notes:
        deferred.append(f"{len(notes)} note(s): instructions seen but not followed, or queries holding untrusted "
                        "text that did not parse; each is listed under notes")
    for name, (risk, n) in sorted(used.items()):
        deferred.append(f"{n} finding(s) of {risk.record.signal} waived by {name} (owner {risk.record.owner}, "
                        f"expires {risk.record.expires}): contained, not fixed")
    return [masked(d, 400) for d in deferred]


def _summary(stop: bool, decisions: list[SignalDecision], findings: list[ScanFinding], count: int,
             problems: list[str]) -> str:
    if stop:
        fired = [f"{d.signal} ({d.open})" for d in decisions if d.stop_ship]
        extra = f"; {len(problems)} residual-risk file(s) unreadable" if problems else ""
        return f"STOP SHIP: open stop-ship findings in {count} trajectories: {', '.join(fired) or 'none'}{extra}"
    waived = sum(d.waived for d in decisions)
    return (f"no open stop-ship finding in {count} trajectories" + (f" ({waived} waived)" if waived else "")
            + ". " + LIMITS)


__all__ = ["SafetyReport", "scan_suite", "LIMITS", "ran_as"]
