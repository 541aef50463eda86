"""The gate: deterministic axes always gate; a judge axis gates only with an approved judge.

A judge of the same model family as the agent it judges (``judgekit.judge.family``) is noted
on its axis; with ``gate.refuse_same_family`` the axis fails (closed, with the reason) and those
verdicts do not count in its value.

A judge's verdict may fail the gate only when the approval filed under its exact fingerprint
(model pin, endpoint, parameters, rubric id@version and hash, template hash) re-derives from its
labels and verdicts files as approved on that axis under the suite's thresholds
(``judgekit.calibration.evidence``), and the API reported the pinned model (unless the suite
allows a mismatch). Otherwise the axis is advisory: shown, never gating, and the report says why
and which command would approve it. In task-success judge mode an advisory judge leaves the
deterministic checks gating on their own. Thresholds always come from the suite, never from a
run record or an approval record.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, Field

from judgekit._util.io import RECORD_CONFIG
from judgekit.axes.table import AXES, axis_named
from judgekit.calibration.approval_record import JudgeIdentity, Thresholds
from judgekit.calibration.evidence import DerivedApproval, derive_approval
from judgekit.calibration.corrected import CorrectedRate, corrected_pass_rate
from judgekit.judge.family import same_family
from judgekit.results import TrajectoryResult
from judgekit.suite import ApprovalThresholds, GatePolicy


class Advisory(BaseModel):
    model_config = RECORD_CONFIG

    rubric: str
    trajectories: int
    reason: str
    command: str = Field(description="What would approve it.")


class JudgeCorrection(BaseModel):
    model_config = RECORD_CONFIG

    rubric: str
    fingerprint: str
    rate: CorrectedRate


class AxisGate(BaseModel):
    model_config = RECORD_CONFIG

    axis: str
    gating_n: int = Field(description="Trajectories whose verdict on this axis gates.")
    value: float | None = Field(None, description="Pass rate (task success) or mean score over gating verdicts.")
    minimum: float
    unscored: int = Field(0, description="Gating judge verdicts that are unscored (never pass or fail).")
    passed: bool
    reasons: list[str] = Field(default_factory=list)
    advisory: list[Advisory] = Field(default_factory=list, description="Judge verdicts shown but not gating, and why.")
    advisory_value: float | None = Field(None, description="The same figure over advisory judge verdicts.")
    approvals: list[str] = Field(
        default_factory=list,
        description="What the approval of each gating judge certifies, and on which labels (its statement).",
    )
    corrected: list[JudgeCorrection] = Field(
        default_factory=list,
        description="Approved binary judges: the Rogan-Gladen corrected pass rate of each judge's own verdicts "
        "(one per rubric and judge: two judges' errors never mix).",
    )
    same_family: list[str] = Field(
        default_factory=list,
        description="Judges that judged agents of their own model family on this axis, in words (judge, family, "
        "how many verdicts): a judge may favour its own family's answers. With gate.refuse_same_family the axis "
        "fails on them.",
    )


class GateReport(BaseModel):
    model_config = RECORD_CONFIG

    passed: bool
    axes: list[AxisGate]
    reasons: list[str] = Field(default_factory=list, description="Why the run as a whole fails (e.g. nothing was scored).")


def _mismatch_reason(provenance) -> str:
    return (f"the API reported model {provenance.reported_model!r}, not the pinned {provenance.model_pin!r}: "
            "another model answered (set gate.allow_model_mismatch in the suite to let it gate)")


NO_APPROVAL = ("no approval record matches this judge's fingerprint (new judge, or the model, parameters, rubric or "
               "prompt template changed since calibration)")


class _Mean:
    """A running mean: a gate over a million results holds two numbers per figure, not a list."""

    __slots__ = ("n", "total")

    def __init__(self) -> None:
        self.n = 0
        self.total = 0.0

    def add(self, value: float) -> None:
        self.n += 1
        self.total += value

    @property
    def value(self) -> float | None:
        return self.total / self.n if self.n else None


class Gate:
    """The gate, fed one result at a time (``add``), decided at the end (``report``).

    Deterministic axes always gate. A judge's verdict gates only when an approval record
    matches its fingerprint, its axis was approved and (unless the suite allows it) the API
    reported the pinned model; otherwise it is advisory, and what still gates of it is what the
    axis says (``Axis.fallback_value``) (task success: its deterministic checks).
    """

    def __init__(self, policy: GatePolicy, calibration_dir: Path, *, seed: int = 0,
                 thresholds: ApprovalThresholds | None = None):
        unknown = sorted(set(policy.min) - set(AXES))
        if unknown:
            from judgekit.errors import InputError

            raise InputError(f"the suite's gate.min names {', '.join(map(repr, unknown))}, which is not an axis "
                             f"judgekit knows (the axes: {', '.join(AXES)})")
        self.policy = policy
        self.thresholds = Thresholds.of(thresholds if thresholds is not None else ApprovalThresholds())
        """The suite's approval thresholds: every approval is re-derived under them."""
        self.calibration_dir = Path(calibration_dir)
        self.seed = seed
        self._approvals: dict[str, DerivedApproval | None] = {}
        self._gating: dict[str, _Mean] = defaultdict(_Mean)
        self._advisory_values: dict[str, _Mean] = defaultdict(_Mean)
        self._unscored: dict[str, int] = defaultdict(int)
        self._advisory: dict[tuple[str, str, str, bool], int] = defaultdict(int)  # (axis, rubric, reason, mismatch)
        # (axis, rubric, fingerprint) -> the approved judge's own pass/fail verdicts, and its calibration pairs
        self._judge_binary: dict[tuple[str, str, str], list[bool]] = defaultdict(list)
        self._calib_pairs: dict[tuple[str, str, str], list[tuple[bool, bool]]] = {}
        self._statements: dict[str, dict[tuple[str, str], str]] = defaultdict(dict)  # axis -> (rubric, fp) -> text
        self._gate_decisions: dict[tuple[str, str], tuple[bool, str]] = {}
        self._errors: dict[str, int] = defaultdict(int)
        self._axes: set[str] = set()
        self._identities: dict[tuple, tuple[JudgeIdentity, str]] = {}
        self._same_family: dict[tuple[str, str, str], int] = defaultdict(int)  # (axis, judge pin, family) -> verdicts

    def identity_of(self, provenance) -> tuple[JudgeIdentity, str]:
        """The judge identity of a verdict and its fingerprint, worked out once per judge (a run
        has a few judges and may have a million verdicts)."""
        key = (provenance.model_pin, provenance.endpoint, provenance.rubric, provenance.rubric_sha256,
               provenance.template_sha256, repr(sorted(provenance.parameters.items())))
        if key not in self._identities:
            identity = JudgeIdentity.of(provenance)
            self._identities[key] = (identity, identity.fingerprint)
        return self._identities[key]

    def _approval(self, identity: JudgeIdentity, fingerprint: str) -> DerivedApproval | None:
        if fingerprint not in self._approvals:
            self._approvals[fingerprint] = derive_approval(self.calibration_dir, identity, self.thresholds)
        return self._approvals[fingerprint]

    def approval_of(self, provenance) -> tuple[str, DerivedApproval | None]:
        """A verdict's judge fingerprint and its approval re-derived, if one is filed (once per gate)."""
        identity, fingerprint = self.identity_of(provenance)
        return fingerprint, self._approval(identity, fingerprint)

    def _gates_of(self, fingerprint: str, approval: DerivedApproval | None, axis: str) -> tuple[bool, str]:
        """Whether this judge's verdicts on ``axis`` gate, and if not why: once per judge and axis."""
        key = (fingerprint, axis)
        if key not in self._gate_decisions:
            allowed, why = approval.gates(axis) if approval is not None else (False, NO_APPROVAL)
            self._gate_decisions[key] = (allowed, "" if allowed else why or "the judge is not approved")
        return self._gate_decisions[key]

    def judge_gates(self, provenance, axis: str) -> bool:
        """Whether the judge behind ``provenance`` is approved on ``axis`` (its approval re-derived)."""
        fingerprint, approval = self.approval_of(provenance)
        return self._gates_of(fingerprint, approval, axis)[0]

    def add(self, result: TrajectoryResult) -> None:
        for name, res in result.axes.items():
            axis = axis_named(name)
            self._axes.add(name)
            if res.status == "error":
                self._errors[name] += 1  # bad input: the run is not a measurement of this axis
                continue
            if res.judge is None:  # deterministic: always gates
                self._gating[name].add(axis.value(res))
                continue
            family = same_family(res.judge.model_pin, result.metadata)
            if family is not None:
                self._same_family[(name, res.judge.model_pin, family)] += 1
                if self.policy.refuse_same_family:
                    if res.status == "scored":
                        self._advisory_values[name].add(axis.value(res))
                    continue
            fingerprint, approval = self.approval_of(res.judge)
            mismatch = res.judge.model_mismatch and not self.policy.allow_model_mismatch
            allowed, why = self._gates_of(fingerprint, approval, name)
            if allowed and not mismatch:
                key = (result.rubric, fingerprint)
                if key not in self._statements[name]:  # rebuilt from the re-measured figures, once per judge
                    self._statements[name][key] = approval.certified(name)
                if res.status == "unscored":
                    self._unscored[name] += 1
                    continue
                self._gating[name].add(axis.value(res))
                if axis.binary:
                    key = (name, result.rubric, fingerprint)
                    self._judge_binary[key].append(bool(axis.judge_value(res)))
                    self._calib_pairs[key] = approval.pairs(name)
                continue
            reason = _mismatch_reason(res.judge) if mismatch else why
            self._advisory[(name, result.rubric, reason, mismatch)] += 1
            if res.status == "scored":
                self._advisory_values[name].add(axis.value(res))
            fallback = axis.fallback_value(res)
            if fallback is not None:
                self._gating[name].add(fallback)

    def report(self) -> GateReport:
        policy = self.policy
        axes_out = []
        for name in sorted(self._axes):
            axis = axis_named(name)
            gating = self._gating[name]
            minimum = axis.gate_minimum(policy)
            value = gating.value
            reasons = []
            if value is not None and value < minimum:
                reasons.append(f"{axis.figure} {value:.3f} is below {minimum}")
            if self._errors[name]:
                reasons.append(f"{self._errors[name]} trajectories could not be scored (input errors; see the run's output)")
            unscored = self._unscored[name]
            judged = gating.n + unscored
            if unscored and unscored / judged > policy.max_unscored_rate:
                reasons.append(f"{unscored} of {judged} gating judge verdicts are unscored (max rate {policy.max_unscored_rate})")
            families = [f"judge {pin} is of the agent's model family ({family}) on {n} verdict(s)"
                        for (a, pin, family), n in sorted(self._same_family.items()) if a == name]
            if families and policy.refuse_same_family:
                reasons.append(f"{'; '.join(families)}: the suite refuses a judge of the agent's own family "
                               "(gate.refuse_same_family); judge with a model of another family")
            adv = [
                Advisory(rubric=rubric, trajectories=n, reason=reason,
                         command="pin the model the API reports in the suite's judge, or set gate.allow_model_mismatch: true"
                         if mismatch else f"judgekit calibrate SUITE --labels {self.calibration_dir}/{rubric.split('@')[0]}/labels.jsonl")
                for (a, rubric, reason, mismatch), n in sorted(self._advisory.items()) if a == name
            ]
            corrected = [
                JudgeCorrection(rubric=rubric, fingerprint=fingerprint,
                                rate=corrected_pass_rate(verdicts, self._calib_pairs[(a, rubric, fingerprint)], seed=self.seed))
                for (a, rubric, fingerprint), verdicts in sorted(self._judge_binary.items()) if a == name and verdicts
            ]
            axes_out.append(AxisGate(
                axis=name, gating_n=gating.n, value=value, minimum=minimum, unscored=unscored,
                passed=not reasons, reasons=reasons, advisory=adv,
                advisory_value=self._advisory_values[name].value,
                approvals=[text for _, text in sorted(self._statements[name].items())], corrected=corrected,
                same_family=families,
            ))
        reasons = [] if axes_out else ["the run scored nothing (no trajectory, or no axis): an empty run never passes"]
        return GateReport(passed=not reasons and all(a.passed for a in axes_out), axes=axes_out, reasons=reasons)


def gate_results(results: Iterable[TrajectoryResult], policy: GatePolicy, calibration_dir: Path, *,
                 seed: int = 0, thresholds: ApprovalThresholds | None = None) -> GateReport:
    """The gate over ``results`` (any iterable: a run record's, streamed from its file)."""
    accumulator = Gate(policy, calibration_dir, seed=seed, thresholds=thresholds)
    for result in results:
        accumulator.add(result)
    return accumulator.report()


def gate(record, *, calibration_dir: Path | None = None, seed: int = 0, loaded=None) -> GateReport:
    """The gate of a run record: a ``judgekit.run.RunRecord``, or a stream from ``open_run``
    (its results are read once, as they come), under the gate policy and approval thresholds of
    the suite it names, read again from the suite file (what the record says of them, and of its
    calibration folder, is its claim, not the suite's). ``calibration_dir`` defaults to the suite's;
    ``loaded``: the suite (a ``LoadedSuite``) to gate under instead of the one the record names."""
    from judgekit.suite import load_suite

    loaded = loaded or load_suite(record.suite_path())
    if loaded.suite.name != record.header.suite:
        from judgekit.errors import InputError

        raise InputError(f"the record is a run of suite {record.header.suite[:200]!r}, but the suite file "
                         f"({loaded.path}) is {loaded.suite.name[:200]!r}", getattr(record, "path", None))
    calibration_dir = Path(calibration_dir or loaded.resolve(loaded.suite.calibration_dir))
    return gate_results(record.results, loaded.suite.gate, calibration_dir, seed=seed,
                        thresholds=loaded.suite.approval)
