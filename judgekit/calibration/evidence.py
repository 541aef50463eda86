"""The evidence an approval rests on, and the approval re-derived from it at the gate.

Calibration writes two files side by side in ``calibration/<rubric-id>/approvals/``: the
approval record ``<fingerprint>.json`` and the judge's verdicts on the labelled items,
``<fingerprint>.verdicts.jsonl`` (a verdicts file, one line per item, axis and repeat, each
naming the judge's fingerprint and its question's cache key). The record names that file and
the labels file, both relative to the calibration folder, with their sha256.

An approval is re-derived, never read (``derive_approval``). For the judge it gates, the gate:

1. reads the record filed under the judge's fingerprint, and checks that the record's
   fingerprint and the identity it names are that judge's (a record copied from another judge,
   endpoint, rubric or prompt template is that other judge's);
2. reads the labels and verdicts files it names (inside the calibration folder), checks their
   hashes, that every verdict names this judge, that no label is dated after the decision and
   the decision not after now;
3. rebuilds every axis's items from those two files with ``items_of``, the function calibration
   used, and refuses a record whose items differ (fabricated, dropped or edited items);
4. measures the bounds again from the items with this judgekit's seed and draws, under the
   suite's thresholds (the axis's kind from the axis table, never from the record), and applies
   the rule (``approval.shortfalls``), abstentions included.

A record that cannot be re-derived is advisory, with the reason. The trust root is what the
repository holds and its review: whoever can rewrite the labels file or the verdicts file (either
alone is enough) and decide the record again from them can still forge an approval. That edit is
visible: both files are hashed into the record and shown in every certificate, and ``judgekit
calibrate --spot-check`` re-asks a sample of the recorded questions and reports answers that
differ (drift of the model behind its pin, or rewritten verdicts); relabelled items it cannot
see: only review of the labels file can.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path, PurePosixPath

from judgekit._util.files import AtomicFile, write_text_atomically
from judgekit._util.io import read_bytes
from judgekit._util.clock import as_utc, utc_now
from judgekit.axes.table import axis_named
from judgekit.calibration._aggregate import References, aggregate, reference_labels
from judgekit.calibration._bootstrap import Metric
from judgekit.calibration.approval import (
    FLOOR_CONFIDENCE,
    FLOORS,
    decide,
    label_sample,
    lowered,
    statement_of,
)
from judgekit.calibration.approval_record import (
    ApprovalRecord,
    AxisApproval,
    CalibrationItem,
    JudgeIdentity,
    Thresholds,
    approval_path,
    approvals_dir,
    read_approval,
)
from judgekit.calibration.bounds import BOUNDS_SEED, N_DRAWS, axis_bounds
from judgekit.calibration.labels import SAFETY_QUESTIONS, Label, load_labels
from judgekit.calibration.verdicts import JudgeVerdictRecord, load_verdicts
from judgekit.errors import InputError

VERDICTS_SUFFIX = ".verdicts.jsonl"
CLOCK_SKEW = timedelta(minutes=5)
"""How far a recorded time may lie ahead of this machine's clock (two machines' clocks differ)."""
_BOUND_FIELDS = {"kappa": "kappa_lower", "tpr": "tpr_lower", "tnr": "tnr_lower", "spearman": "spearman_lower",
                 "mae": "mae_upper"}


def verdicts_path(calibration_dir: Path, rubric_id: str, fingerprint: str) -> Path:
    return approvals_dir(calibration_dir, rubric_id) / f"{fingerprint}{VERDICTS_SUFFIX}"


def sha256_file(path: Path, *, expected: str) -> str:
    return hashlib.sha256(read_bytes(path, expected=expected)).hexdigest()


def kind_of(name: str) -> str | None:
    """The kind of an axis (the axis table's) or of a safety question (``SAFETY_QUESTIONS``);
    None for a name judgekit does not know."""
    if name in SAFETY_QUESTIONS:
        return SAFETY_QUESTIONS[name]
    try:
        return axis_named(name).kind
    except ValueError:
        return None


def axis_threshold(kind: str, thresholds: Thresholds) -> float:
    """The score that counts as pass: the suite's ``graded_pass`` on a graded axis; a binary
    axis's values are 1.0 or 0.0 and are never cut elsewhere."""
    return thresholds.graded_pass if kind == "graded" else 0.5


# --- the items --------------------------------------------------------------------------------


def items_of(references: References, verdicts: Sequence[JudgeVerdictRecord], axis: str, kind: str,
             threshold: float) -> tuple[list[CalibrationItem], list[str]]:
    """The labelled items of ``axis`` the verdicts speak of, in trajectory id order: the humans'
    reference and the judge's verdict over its repeats (None: no repeat was scored). Also the
    ids of items the verdicts speak of whose labels are of another kind than the axis (pass/fail
    labels on a graded axis cannot certify its Spearman and MAE)."""
    by_item: dict[str, list[JudgeVerdictRecord]] = defaultdict(list)
    for record in verdicts:
        if record.axis == axis:
            by_item[record.trajectory_id].append(record)
    items: list[CalibrationItem] = []
    other_kind: list[str] = []
    for (tid, ref_axis), ref in sorted(references.items.items()):
        if ref_axis != axis or tid not in by_item:
            continue
        if ref.kind != kind:
            other_kind.append(tid)
            continue
        judged = aggregate(by_item[tid], ref.kind, threshold).value
        if kind == "binary":
            human = float(ref.value == "pass")
            judge = None if judged is None else float(judged == "pass")
        else:
            human = float(ref.value)
            judge = None if judged is None else float(judged)
        items.append(CalibrationItem(trajectory_id=tid, human=human, judge=judge, repeats=len(by_item[tid])))
    return items, other_kind


def measure_axis(axis: str, kind: str, items: Sequence[CalibrationItem], labels: Sequence[Label],
                 thresholds: Thresholds, *, shown: AxisApproval | None = None) -> AxisApproval:
    """The decision for ``axis`` from its items: bounds measured with this judgekit's seed and
    draws at the thresholds' level, the rule applied, the statement written. ``shown``: where
    the agreement report's figures (kappa, accuracy, ... with their intervals) come from, to be
    shown beside the bounds; they decide nothing."""
    threshold = axis_threshold(kind, thresholds)
    scored = [item for item in items if item.judge is not None]
    human = [item.human for item in scored]
    judge = [item.judge for item in scored]
    bounds = axis_bounds(kind, human, judge, threshold=threshold, seed=BOUNDS_SEED, name=axis, n_draws=N_DRAWS,
                         confidence=thresholds.confidence)
    at_floor = bounds if thresholds.confidence >= FLOOR_CONFIDENCE else axis_bounds(
        kind, human, judge, threshold=threshold, seed=BOUNDS_SEED, name=axis, n_draws=N_DRAWS,
        confidence=FLOOR_CONFIDENCE)
    floors = {name: at_floor.bounds[name].bound for name in FLOORS if name in at_floor.bounds}
    shown_fields = {} if shown is None else {
        name: getattr(shown, name) for name in ("kappa", "accuracy", "tpr", "tnr", "spearman", "mae")}
    measured = AxisApproval(
        axis=axis, kind=kind, n=len(scored), abstained=len(items) - len(scored), items=list(items),
        kappa=shown_fields.pop("kappa", Metric(value=bounds.bounds["kappa"].estimate)),
        accuracy=shown_fields.pop("accuracy", Metric(value=None)), **shown_fields,
        mean_human=sum(human) / len(human) if human else None, mean_judge=sum(judge) / len(judge) if judge else None,
        n_pass=bounds.n_pass, n_fail=bounds.n_fail, confidence=bounds.confidence,
        methods={name: bound.method for name, bound in bounds.bounds.items()}, floor_bounds=floors,
        sample=label_sample(labels, axis, {item.trajectory_id for item in scored}), threshold=threshold,
        decision="refused", reasons=[], **{_BOUND_FIELDS[name]: bound.bound for name, bound in bounds.bounds.items()},
    )
    decision, reasons = decide(measured, thresholds)
    measured = measured.model_copy(update={"decision": decision, "reasons": reasons})
    return measured.model_copy(update={"statement": statement_of(measured, thresholds)})


# --- writing ----------------------------------------------------------------------------------


def relative_to_calibration(calibration_dir: Path, path: Path, what: str) -> str:
    try:
        return path.resolve().relative_to(calibration_dir.resolve()).as_posix()
    except ValueError:
        raise InputError(f"the {what} must lie in the calibration folder ({calibration_dir}), where the gate re-reads "
                         "it to re-derive the approval: move it there", path) from None


def write_calibration(calibration_dir: Path, record: ApprovalRecord, verdicts: Sequence[JudgeVerdictRecord],
                      labels_path: Path) -> Path:
    """Write the judge's calibration verdicts and the approval record naming them and the labels
    file, with their hashes; the record's path. Each verdict is stamped with the record's
    fingerprint. Refused (InputError) when the labels file lies outside the calibration folder;
    a record the gate would not re-derive exactly as written is never written (RuntimeError)."""
    calibration_dir = Path(calibration_dir)
    rubric_id = record.judge.rubric.split("@", 1)[0]
    labels_file = relative_to_calibration(calibration_dir, Path(labels_path), "labels file")
    unasked = unasked_verdicts(verdicts)
    if unasked:
        raise InputError(f"{unasked}: a calibration records the questions its judge was asked")
    out = verdicts_path(calibration_dir, rubric_id, record.fingerprint)
    out.parent.mkdir(parents=True, exist_ok=True)
    with AtomicFile(out) as handle:
        for verdict in verdicts:
            stamped = verdict.model_copy(update={"judge_fingerprint": record.fingerprint})
            handle.write(stamped.model_dump_json(exclude_none=True) + "\n")
    record = record.model_copy(update={
        "labels_file": labels_file, "label_set_sha256": sha256_file(Path(labels_path), expected="a labels file"),
        "verdicts_file": out.relative_to(calibration_dir).as_posix(),
        "verdicts_sha256": sha256_file(out, expected="a verdicts file"),
    })
    path = approval_path(calibration_dir, rubric_id, record.fingerprint)
    write_text_atomically(path, record.model_dump_json(indent=2) + "\n")
    derived = derive_approval(calibration_dir, record.judge, record.thresholds, now=lambda: record.decided_at)
    for axis, decision in record.axes.items():
        if derived is None or derived.gates(axis)[0] != (decision.decision == "approved"):
            raise RuntimeError(f"internal: the approval written to {path} does not re-derive as decided on {axis}: "
                               f"{derived.gates(axis)[1] if derived else 'not found'}")
    return path


# --- re-deriving ------------------------------------------------------------------------------


@dataclass
class DerivedApproval:
    """An approval as the gate sees it: re-derived from its evidence, or refused with the reason."""

    fingerprint: str
    thresholds: Thresholds
    record: ApprovalRecord | None = None
    problem: str | None = None
    """Why nothing of the record can gate (None: each axis is decided on its own)."""
    axes: dict[str, AxisApproval] = field(default_factory=dict)
    """Axis -> its decision, measured again from the evidence under ``thresholds``."""
    axis_problems: dict[str, str] = field(default_factory=dict)
    evidence: str = ""
    """The files it was re-derived from, with their hashes (shown in every certificate)."""

    def gates(self, axis: str) -> tuple[bool, str | None]:
        """Whether this judge's verdicts on ``axis`` may gate, and if not, why."""
        if self.problem is not None:
            return False, self.problem
        if axis in self.axis_problems:
            return False, self.axis_problems[axis]
        if axis not in self.axes:
            return False, f"the approval record has no decision for {axis} (no labels for it)"
        derived = self.axes[axis]
        if derived.decision != "approved":
            return False, ("the judge is refused: re-derived from its labels and verdicts under the suite's "
                           "thresholds, it does not clear the rule: " + "; ".join(derived.reasons)
                           + ": recalibrate (`judgekit calibrate`)")
        if self.record is None or self.record.axes[axis].decision != "approved":
            return False, ("the judge was refused at calibration: recalibrate (`judgekit calibrate`) to decide it "
                           "under the suite's thresholds of today")
        return True, None

    def certified(self, axis: str) -> str:
        """What the approval of ``axis`` certifies, from the re-derived figures, with the evidence
        and any threshold more lenient than judgekit's defaults."""
        text = statement_of(self.axes[axis], self.thresholds)
        soft = lowered(self.thresholds)
        if soft:
            text += "; under thresholds more lenient than judgekit's defaults: " + ", ".join(soft)
        return f"{text}; evidence: {self.evidence}"

    def pairs(self, axis: str) -> list[tuple[bool, bool]]:
        return self.axes[axis].pairs


def within(folder: Path, relative: str) -> Path | None:
    """``relative`` (a record's POSIX path) under ``folder``, or None when it leaves it (absolute,
    ``..``, or a link pointing out)."""
    parts = PurePosixPath(relative).parts
    if not parts or PurePosixPath(relative).is_absolute() or ".." in parts or "\\" in relative:
        return None
    path = folder.joinpath(*parts)
    try:
        path.resolve().relative_to(folder.resolve())
    except ValueError:
        return None
    return path


def _differing(record: JudgeIdentity, gated: JudgeIdentity) -> list[str]:
    return [name for name in JudgeIdentity.model_fields if getattr(record, name) != getattr(gated, name)]


def unasked_verdicts(verdicts: Sequence[JudgeVerdictRecord]) -> str | None:
    """In words, verdicts that name no question a judge was asked (no cache key: only an item
    that could not be put to the judge, an input error, has none) or one question twice."""
    unasked = [v for v in verdicts if v.cache_key is None and v.unscored_reason != "input_error"]
    if unasked:
        return (f"{len(unasked)} verdict(s) name no question (no cache key; first: {unasked[0].trajectory_id[:80]!r}): "
                "every verdict a judge gave names the question it answered")
    keys = [v.cache_key for v in verdicts if v.cache_key is not None]
    if len(set(keys)) != len(keys):
        return "two verdicts answer one question (one cache key twice)"
    return None


def _short(digest: str | None) -> str:
    return (digest or "none")[:12]


def _first_difference(claimed: Sequence[CalibrationItem], derived: Sequence[CalibrationItem]) -> str:
    for index, (a, b) in enumerate(zip(claimed, derived)):
        if a != b:
            return f"item {index} is {a.trajectory_id[:80]!r} in the record, {b.trajectory_id[:80]!r} from the files" \
                if a.trajectory_id != b.trajectory_id else f"item {b.trajectory_id[:80]!r} differs"
    return f"the record lists {len(claimed)} item(s), the files give {len(derived)}"


def derive_approval(calibration_dir: Path, identity: JudgeIdentity, thresholds: Thresholds, *,
                    now: Callable[[], datetime] = utc_now) -> DerivedApproval | None:
    """The approval of the judge ``identity``, re-derived from its evidence under the suite's
    ``thresholds``; None when no record is filed under its fingerprint. Whatever keeps it from
    being re-derived is a ``problem`` (the judge is then advisory, with that reason), a record
    file that is not an approval record at all (malformed, of the wrong types, naming fields of
    its own such as a bounds seed) included: it never approves and never stops the gate."""
    calibration_dir = Path(calibration_dir)
    thresholds = Thresholds.of(thresholds)
    fingerprint = identity.fingerprint
    rubric_id = identity.rubric.split("@", 1)[0]
    path = approval_path(calibration_dir, rubric_id, fingerprint)
    if not path.exists():
        return None
    record = _readable(calibration_dir, path)
    if isinstance(record, str):
        return DerivedApproval(fingerprint=fingerprint, thresholds=thresholds, problem=record)
    derived = DerivedApproval(fingerprint=fingerprint, thresholds=thresholds, record=record)
    derived.problem = _record_problem(record, identity, now)
    if derived.problem is not None:
        return derived
    files = _evidence(calibration_dir, record, fingerprint)
    if isinstance(files, str):
        derived.problem = files
        return derived
    labels, verdicts, derived.evidence = files
    references = reference_labels(labels)
    for name, claimed in sorted(record.axes.items()):
        kind = kind_of(name)
        if kind is None:
            derived.axis_problems[name] = f"{name[:60]!r} is not an axis judgekit knows"
            continue
        try:
            items, other_kind = items_of(references, verdicts, name, kind, axis_threshold(kind, thresholds))
        except InputError as exc:  # a verdict of another kind (A/B on a pass/fail item): advisory, never a crash
            derived.axis_problems[name] = f"its verdicts cannot be read as {kind} verdicts: {exc.detail}"
            continue
        derived.axes[name] = measure_axis(name, kind, items, labels, thresholds)
        as_decided = None
        if claimed.kind == kind and not other_kind and claimed.items == items:
            mine, _ = items_of(references, verdicts, name, kind, axis_threshold(kind, record.thresholds))
            as_decided = _figures_differ(claimed, measure_axis(name, kind, mine, labels, record.thresholds))
        if claimed.kind != kind:
            derived.axis_problems[name] = (f"the record calls the {kind} axis {name} {claimed.kind}: a {kind} axis is "
                                           "decided on the rule for its own kind")
        elif other_kind:
            derived.axis_problems[name] = (f"{len(other_kind)} labelled item(s) of the {kind} axis {name} are not "
                                           f"labelled as {kind} (first: {other_kind[0][:80]!r}): a {kind} axis is "
                                           "certified on labels of its own kind")
        elif claimed.items != items:
            derived.axis_problems[name] = ("its items differ from what its labels and verdicts give ("
                                           + _first_difference(claimed.items, items) + "): the record was edited")
        elif as_decided is not None:
            derived.axis_problems[name] = ("its figures are not what its labels and verdicts give under the thresholds "
                                           f"it names ({as_decided}): the record was edited")
    return derived


_DERIVED = ("kind", "n", "abstained", "n_pass", "n_fail", "confidence", "kappa_lower", "tpr_lower", "tnr_lower",
            "spearman_lower", "mae_upper", "floor_bounds", "threshold", "mean_human", "mean_judge", "sample",
            "decision")
"""What an axis's decision says that its evidence decides (its words and the agreement
report's intervals aside: the words are rebuilt, the intervals are only shown)."""


def _figures_differ(claimed: AxisApproval, measured: AxisApproval) -> str | None:
    """The first figure of ``claimed`` that ``measured`` (the same items under the same
    thresholds) does not bear out, in words."""
    for name in _DERIVED:
        a, b = getattr(claimed, name), getattr(measured, name)
        if name == "sample" and a is not None and b is not None and a.n_model is None and a.n_unknown is None:
            # written before labels said who made them: it claims nothing of that (the decision,
            # re-derived from the labels, still counts them)
            b = b.model_copy(update={"n_model": None, "n_unknown": None})
        if not _same(a, b):
            return f"{name} {str(a)[:60]} in the record, {str(b)[:60]} from the files"
    return None


def _same(a, b) -> bool:
    """Equal, floats within 1e-9 (bounds drawn on another machine may differ in the last bits)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[key], b[key]) for key in a)
    if isinstance(a, float) and isinstance(b, float):
        return abs(a - b) <= 1e-9
    return a == b


def derive_filed(calibration_dir: Path, rubric_id: str, fingerprint: str, thresholds: Thresholds
                 ) -> DerivedApproval | None:
    """``derive_approval`` for a judge known by its fingerprint only (a run's footer names its
    judges so): the identity is the one the record filed under it names, when it hashes to it."""
    path = approval_path(Path(calibration_dir), rubric_id, fingerprint)
    if not path.exists():
        return None
    record = _readable(Path(calibration_dir), path)
    if isinstance(record, str):
        return DerivedApproval(fingerprint=fingerprint, thresholds=Thresholds.of(thresholds), problem=record)
    if record.judge.fingerprint != fingerprint:
        return DerivedApproval(fingerprint=fingerprint, thresholds=Thresholds.of(thresholds), record=record,
                               problem="the record filed under this fingerprint names another judge")
    return derive_approval(calibration_dir, record.judge, thresholds)


def _readable(calibration_dir: Path, path: Path) -> ApprovalRecord | str:
    """The approval record at ``path``, or why it is not one, naming the file by its place in the
    calibration folder (a gate report is compared across machines, so no absolute path)."""
    try:
        return read_approval(path)
    except InputError as exc:
        name = path.relative_to(calibration_dir).as_posix() if path.is_relative_to(calibration_dir) else path.name
        return f"the approval record {name} cannot be re-derived: {exc.detail}: recalibrate (`judgekit calibrate`)"


def _record_problem(record: ApprovalRecord, identity: JudgeIdentity, now: Callable[[], datetime]) -> str | None:
    fingerprint = identity.fingerprint
    if record.migrated_from is not None:
        return (f"approval format {record.migrated_from} names no labelled items and keeps no verdicts, so it cannot "
                "be re-derived: recalibrate (`judgekit calibrate`)")
    if record.fingerprint != fingerprint or record.judge.fingerprint != fingerprint:
        differing = _differing(record.judge, identity)
        named = ", ".join(differing) if differing else "its fingerprint"
        return (f"the record filed under this judge's fingerprint is another judge's (it differs in {named}): an "
                "approval is never copied from one judge to another; calibrate this judge")
    if as_utc(record.decided_at) > now() + CLOCK_SKEW:
        return f"the record is dated {record.decided_at.isoformat()}, in the future: it was not decided yet"
    return None


def _evidence(calibration_dir: Path, record: ApprovalRecord, fingerprint: str
              ) -> tuple[list[Label], list[JudgeVerdictRecord], str] | str:
    """The labels and verdicts the record names, checked; or, in words, why they cannot be used."""
    read: dict[str, object] = {}
    shown = []
    for what, relative, digest, load in (("labels file", record.labels_file, record.label_set_sha256, load_labels),
                                         ("verdicts file", record.verdicts_file, record.verdicts_sha256, load_verdicts)):
        path = within(calibration_dir, relative or "")
        if path is None:
            return f"the {what} it names ({str(relative)[:200]!r}) is not a file inside the calibration folder"
        try:
            actual = sha256_file(path, expected=f"a {what}")
            if actual != digest:
                return (f"the {what} {relative} changed since calibration (sha256 {_short(actual)}, the record says "
                        f"{_short(digest)}): recalibrate (`judgekit calibrate`)")
            read[what] = load(path)
        except InputError as exc:
            return f"its {what} cannot be read: {exc}"
        shown.append(f"{what.split()[0]} {relative} (sha256 {_short(digest)})")
    labels, verdicts = read["labels file"], read["verdicts file"]
    strangers = [v for v in verdicts if v.judge_fingerprint != fingerprint]
    if strangers:
        return (f"{len(strangers)} verdict(s) of its verdicts file name another judge (first: "
                f"{strangers[0].trajectory_id[:80]!r}): only this judge's own verdicts certify it")
    unasked = unasked_verdicts(verdicts)
    if unasked:
        return f"its verdicts file: {unasked}"
    late = [lab for lab in labels if lab.labeled_at is not None and as_utc(lab.labeled_at) > as_utc(record.decided_at)]
    if late:
        return (f"{len(late)} label(s) are dated after the calibration they are said to certify (first: "
                f"{late[0].trajectory_id[:80]!r}, {late[0].labeled_at.isoformat()})")
    return labels, verdicts, ", ".join(shown)
