"""The spot check: re-ask a sample of an approval's recorded calibration questions.

An approval rests on its labels file and its verdicts file (``judgekit.calibration.evidence``);
whoever can rewrite both can still forge one. The nightly job can catch it, and catch a model
that drifted behind its pin: ``spot_check`` plans the labelled items exactly as calibration does
(the same questions, under the same cache keys), finds the approval of the judge the suite names
today, and

- lists labelled items the plan asks about that have no recorded verdict (dropped from the
  verdicts file), recorded verdicts whose question the plan does not ask (fabricated, or the
  trajectory, rubric or prompt changed since calibration), and recorded verdicts filed under
  another item than the question their key names (an answer moved to the item it fits);
- re-asks a seeded sample of the recorded questions, past the cache, and lists the answers that
  differ from the recorded ones.

Nothing is written: not the cache, not the approval.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field
from pathlib import Path

from judgekit.calibration.approval import JudgeIdentity, find_approval
from judgekit.calibration.calibrate import verdict_record
from judgekit.calibration.evidence import within
from judgekit.calibration.labels import load_labels
from judgekit.calibration.verdicts import JudgeVerdictRecord, load_verdicts
from judgekit.errors import InputError
from judgekit.suite import LoadedSuite

SCORE_TOLERANCE = 1e-9


@dataclass
class Difference:
    trajectory_id: str
    axis: str
    repeat: int
    recorded: str
    now: str


@dataclass
class RubricSpotCheck:
    """The spot check of one rubric's judge."""

    rubric: str
    fingerprint: str
    problem: str | None = None
    """Why nothing was checked (no approval for today's judge, no verdicts file)."""
    recorded: int = 0
    asked: int = 0
    same: int = 0
    differences: list[Difference] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    """Planned questions (trajectory id, axis) with no recorded verdict."""
    unknown: list[str] = field(default_factory=list)
    """Recorded verdicts whose question the plan does not ask."""
    misplaced: list[str] = field(default_factory=list)
    """Recorded verdicts filed under another item or axis than the question their key names."""

    @property
    def clean(self) -> bool:
        return (self.problem is None and not self.differences and not self.missing and not self.unknown
                and not self.misplaced)


def _said(record: JudgeVerdictRecord) -> str:
    if not record.scored:
        return f"unscored ({record.unscored_reason})"
    return record.verdict if record.verdict is not None else f"score {record.score:.3f}"


def _agree(a: JudgeVerdictRecord, b: JudgeVerdictRecord) -> bool:
    if a.scored != b.scored:
        return False
    if not a.scored:
        return True
    if a.verdict != b.verdict:
        return False
    return (a.score is None) == (b.score is None) and (a.score is None or abs(a.score - b.score) <= SCORE_TOLERANCE)


def spot_check(loaded: LoadedSuite, labels_path: Path, *, calibration_dir: Path, sample: int, seed: int = 0,
               options=None, repeats: int = 1) -> list[RubricSpotCheck]:
    """Check the approval of each rubric's judge of today against the questions calibration
    asked (see the module's docstring). ``sample``: recorded questions to re-ask per rubric;
    ``repeats``: as the calibration asked them (its questions' keys name their repeat)."""
    from judgekit.run.api import RunOptions, local_executor
    from judgekit.run.judging import _identity
    from judgekit.run.merge import judged_results
    from judgekit.run.plan import plan_run

    options = options or RunOptions()
    labels = load_labels(labels_path)
    if not labels:
        raise InputError("no labels in the file", labels_path)
    plan = plan_run(loaded, select={label.trajectory_id for label in labels}, repeats=repeats,
                    override=options.override, allow_floating=options.allow_floating)
    by_rubric: dict[str, list[int]] = {}
    for index, judgement in enumerate(plan.judgements):
        by_rubric.setdefault(judgement.job.rubric.ref, []).append(index)
    checks = []
    to_ask: list[tuple[RubricSpotCheck, list[int], dict[tuple[str, int], JudgeVerdictRecord]]] = []
    for rubric_ref, indices in sorted(by_rubric.items()):
        first = plan.judgements[indices[0]].job
        identity = JudgeIdentity(**{name: value for name, value in _identity(first).items()
                                    if name in JudgeIdentity.model_fields})
        check = RubricSpotCheck(rubric=rubric_ref, fingerprint=identity.fingerprint)
        checks.append(check)
        record = find_approval(calibration_dir, first.rubric.id, identity.fingerprint)
        path = within(calibration_dir, record.verdicts_file or "") if record is not None else None
        if record is None or path is None:
            check.problem = ("no approval of this judge to check" if record is None else
                             "its approval keeps no verdicts file inside the calibration folder")
            continue
        lines = load_verdicts(path)
        recorded = {(v.cache_key, v.effective_repeat): v for v in lines if v.cache_key is not None}
        check.recorded = len(recorded)
        check.unknown = sorted(f"{v.trajectory_id} {v.axis} (no question)" for v in lines
                               if v.cache_key is None and v.unscored_reason != "input_error")
        planned = {}
        for index in indices:
            judgement = plan.judgements[index]
            planned[(judgement.job.key, judgement.repeat)] = index
        check.missing = sorted(f"{plan.items[plan.judgements[i].item].trajectory_id} {plan.judgements[i].axis}"
                               for key, i in planned.items() if key not in recorded)
        check.unknown += sorted(f"{v.trajectory_id} {v.axis}" for key, v in recorded.items() if key not in planned)
        for key, index in planned.items():
            line, judgement = recorded.get(key), plan.judgements[index]
            asked = (plan.items[judgement.item].trajectory_id, judgement.axis)
            if line is not None and (line.trajectory_id, line.axis) != asked:
                check.misplaced.append(f"{line.trajectory_id} {line.axis} (its question is {asked[0]} {asked[1]})")
        shared = sorted(key for key in planned if key in recorded)
        chosen = random.Random(seed).sample(shared, min(sample, len(shared)))
        to_ask.append((check, [planned[key] for key in chosen], {key: recorded[key] for key in chosen}))
    asked = [index for _, indices, _ in to_ask for index in indices]
    if asked:
        executor = local_executor(loaded, RunOptions(override=options.override, allow_floating=options.allow_floating,
                                                     use_cache=False, backend=options.backend))
        try:
            verdicts = asyncio.run(executor.execute([plan.judgements[i].job for i in asked]))
        finally:
            executor.close()
        answers = dict(zip(asked, judged_results(plan, verdicts, [plan.judgements[i] for i in asked])))
        for check, indices, recorded in to_ask:
            for index in indices:
                item, axis, repeat, result = answers[index]
                judgement = plan.judgements[index]
                before = recorded[(judgement.job.key, judgement.repeat)]
                now = verdict_record(plan.items[item].trajectory_id, result, repeat)
                check.asked += 1
                if now is not None and _agree(before, now):
                    check.same += 1
                else:
                    check.differences.append(Difference(before.trajectory_id, axis, repeat, _said(before),
                                                        "no verdict" if now is None else _said(now)))
    return checks
