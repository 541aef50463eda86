"""Suites: which rubrics apply to which trajectory files, and run settings.

A suite file is YAML; paths in it are relative to the suite file's folder. ``judgekit run``
takes the suite file or a folder holding ``suite.yaml``.

Format 2 names the gate's minimums per axis (``gate.min``); a format 1 file (or one that names
no format) is read through a numbered migration (``MIGRATIONS``) into format 2, with the same
meaning.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from judgekit._util.io import Version2
from judgekit._util.documents import load_document
from judgekit.errors import InputError
from judgekit.judge.spec import JudgeSpec
from judgekit.rubric.model import Rubric, load_rubrics
from judgekit.world.keys import WorldKeys, merge_keys
from judgekit.world.snapshot import DEFAULT_MAX_SNAPSHOT_BYTES, SnapshotPolicy
from judgekit.suite.safety_policy import SafetyPolicy

SUITE_FORMAT_VERSION = 2


RUBRIC_PLACEHOLDER = "FILL-IN"
"""Where an importer's ``suite.yaml`` leaves the rubric's id to the user (never a rubric id,
which is lower case): a suite that still holds it is refused, saying what to write there."""


class TrajectorySet(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    file: str = Field(description="A trajectory JSON Lines file, relative to the suite file.")
    rubric: str = Field(description="The rubric applied to every trajectory in it: 'id' or 'id@version'.")

    @field_validator("rubric")
    @classmethod
    def _filled_in(cls, rubric: str) -> str:
        if rubric == RUBRIC_PLACEHOLDER:
            # PydanticCustomError keeps the message as written (a ValueError gets "Value error, ").
            raise PydanticCustomError("rubric_placeholder", f"{RUBRIC_PLACEHOLDER} is a placeholder: write a rubric "
                                      "for these trajectories in the suite's rubrics, lock it (`judgekit rubric lock`) "
                                      "and put its id here (the comments at the top of the suite say how)")
        return rubric


class ApprovalThresholds(BaseModel):
    """What a judge must reach, per axis, before it may gate."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    min_kappa: float = Field(0.6, ge=-1, le=1, description="Lower bound of Cohen's kappa, judge vs human, at least this.")
    min_items: int = Field(20, ge=1, description="Labelled items per axis with a verdict, at least this many.")
    min_tpr: float = Field(0.8, ge=0, le=1, description="Binary axes: lower bound of the TPR (judge pass among "
                           "human pass), at least this.")
    min_tnr: float = Field(0.8, ge=0, le=1, description="Binary axes: lower bound of the TNR (judge fail among "
                           "human fail), at least this.")
    min_spearman: float = Field(0.6, ge=-1, le=1, description="Graded axes: lower bound of Spearman's correlation "
                                "of judge and human scores, at least this.")
    max_mae: float = Field(0.2, ge=0, le=1, description="Graded axes: upper bound of the mean absolute error "
                           "between judge and human scores, at most this.")
    confidence: float = Field(0.95, ge=0.5, lt=1, description="One-sided level of every bound.")
    max_abstention_rate: float = Field(
        0.1, ge=0, le=1, description="Labelled items the judge gave no scored verdict on (unscored on every "
        "repeat), as a share of the labelled items, at most this: a judge never earns approval on the items it "
        "chose to answer.")
    graded_pass: float = Field(
        0.5, ge=0, le=1, description="Graded axes: a score at or above this counts as pass where kappa is measured "
        "on binarised scores.")
    allow_model_labels: bool = Field(
        False, description="Approve on labels a model made (labeler_kind: model) as well as on a person's. Off by "
        "default: a judge earns approval against people's labels; when on, an approval resting on model-made labels "
        "says so, and how many, in its statement. (Labels that do not say who made them are not refused; every "
        "statement counts them as of unknown origin.)")


class Budget(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    max_tokens: int | None = Field(None, gt=0, description="Prompt + completion tokens for the run.")
    max_cost_usd: float | None = Field(None, gt=0, description="Dollars for the run (litellm's cost map).")


class SnapshotSettings(BaseModel):
    """Which snapshot files (``world.before`` / ``world.after`` paths in trajectories) may be read."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    roots: list[str] = Field(
        default_factory=lambda: ["."],
        min_length=1,
        description="Folders snapshot files must lie in once every symlink is followed, relative to the "
        "suite file. Default: the suite's own folder tree.",
    )
    max_bytes: int = Field(
        DEFAULT_MAX_SNAPSHOT_BYTES,
        gt=0,
        description="Largest snapshot file read, in bytes; a SQLite -wal or -journal beside a database counts apart.",
    )


AxisName = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]*$", max_length=64)]


class GatePolicy(BaseModel):
    """What a run must reach to pass the gate. Judge axes count only with an approved judge."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    min: dict[AxisName, Annotated[float, Field(ge=0, le=1)]] = Field(
        default_factory=dict,
        description="Axis -> the least its gate value may be: the share of trajectories that pass (binary axes, "
        "such as task_success) or the mean score (graded axes, such as tool_correctness and faithfulness). An axis "
        "not named here must reach its default (1.0 for every built-in axis). Naming an axis judgekit does not know "
        "is an error.",
    )
    max_unscored_rate: float = Field(
        0.1, ge=0, le=1, description="A gating judge axis with more unscored verdicts than this fails the gate."
    )
    allow_model_mismatch: bool = Field(
        False,
        description="Let verdicts gate when the API reported another model than the pin. Off: such "
        "verdicts are advisory, with the reported model named.",
    )
    refuse_same_family: bool = Field(
        False,
        description="Fail a judge axis whose judge judged trajectories of an agent of its own model family (the "
        "agent's model from the trajectory's metadata: agent_model, else model; the family: judgekit.judge.family). "
        "Off: such verdicts gate as any other, and the gate report notes them.",
    )


GATE_V1_MINIMUMS = {"min_task_success_rate": "task_success", "min_tool_correctness": "tool_correctness",
                    "min_faithfulness": "faithfulness"}
"""The gate minimums of suite format 1 (and run record format 2), one field per axis -> the axis."""


def gate_minimums_v1_to_v2(gate: Any) -> Any:
    """A format 1 gate policy (``min_task_success_rate`` and its two siblings) as ``gate.min``;
    anything but a mapping is left for validation to refuse. An axis named both ways is refused."""
    if not isinstance(gate, dict) or not set(gate) & set(GATE_V1_MINIMUMS):
        return gate
    gate = dict(gate)
    minimums = gate.get("min", {})
    minimums = dict(minimums) if isinstance(minimums, dict) else minimums
    for old, axis in GATE_V1_MINIMUMS.items():
        if old in gate:
            if isinstance(minimums, dict) and axis in minimums:
                raise ValueError(f"gate: {old} and min.{axis} both set the minimum of {axis}: keep min.{axis}")
            value = gate.pop(old)
            if isinstance(minimums, dict):
                minimums[axis] = value
    gate["min"] = minimums
    return gate


def _suite_v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    """Format 1 -> 2: the gate's three minimum fields become ``gate.min`` (same values, same meaning)."""
    data = {**data, "format_version": 2}
    if "gate" in data:
        data["gate"] = gate_minimums_v1_to_v2(data["gate"])
    return data


MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: _suite_v1_to_v2}
"""Suite format version -> the function that reads it as the next version."""


class Suite(BaseModel):
    """A fixed set of trajectories and the rubrics they are scored against."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    format_version: Version2 = Field(SUITE_FORMAT_VERSION, description="Suite format version (a file that names "
                                     "none is read as format 1, through its migration).")
    name: str = Field(description="Name of the suite, for reports.")
    rubrics: list[str] = Field(
        min_length=1, description="Rubric files or folders of rubric files, relative to the suite file."
    )
    lock: str | None = Field(
        None,
        description="rubrics.lock to enforce: a rubric whose content differs from its locked hash, "
        "or that is not locked, stops the run. Relative to the suite file.",
    )
    trajectories: list[TrajectorySet] = Field(min_length=1, description="Trajectory files and their rubric.")
    judge: JudgeSpec | None = Field(None, description="The judge for every rubric that names none.")
    allow_floating: bool = Field(
        False, description="Allow an unpinned judge model; every verdict then says it floated."
    )
    concurrency: int = Field(8, ge=1, le=256, description="Judge calls in flight at once.")
    cache_dir: str | None = Field(None, description="Verdict cache folder (default .judgekit/cache in the working directory).")
    budget: Budget | None = Field(None, description="Stop judging cleanly past this many tokens or dollars.")
    gate: GatePolicy = Field(default_factory=GatePolicy, description="What `judgekit gate` requires.")
    calibration_dir: str = Field(
        "calibration", description="Where labels and approval records live, relative to the suite file."
    )
    approval: ApprovalThresholds = Field(
        default_factory=lambda: ApprovalThresholds(), description="What a judge must reach to gate."
    )
    snapshots: SnapshotSettings = Field(
        default_factory=lambda: SnapshotSettings(),
        description="Where the snapshot files trajectories name may be, and how big they may be.",
    )
    safety: SafetyPolicy | None = Field(
        None, description="What `judgekit safety` checks against: tool classes, allowed changes, untrusted text."
    )
    world: WorldKeys = Field(
        default_factory=WorldKeys,
        description="Keys for the JSON lists of every trajectory's world (keys: {/orders: id}); a rubric's "
        "world.keys win over these, a trajectory's own over both, list by list.",
    )

    @model_validator(mode="before")
    @classmethod
    def _migrate(cls, data: Any) -> Any:
        """An older format (or none named: format 1) through ``MIGRATIONS``, one version at a time;
        a version that is not a plain whole number is left for validation to refuse."""
        if not isinstance(data, dict):
            return data
        version = data.get("format_version", 1)
        while type(version) is int and version in MIGRATIONS:
            data = MIGRATIONS[version](data)
            version = data["format_version"]
        return data


@dataclass
class LoadedSuite:
    suite: Suite
    path: Path
    rubrics: dict[str, Rubric] = field(default_factory=dict)  # id@version -> rubric
    rubric_files: dict[str, Path] = field(default_factory=dict)

    @property
    def base_dir(self) -> Path:
        return self.path.parent

    def resolve(self, relative: str) -> Path:
        return (self.base_dir / relative).resolve()

    def input_files(self) -> list[Path]:
        """The files this suite is made of: no output may ever replace one of them."""
        suite = self.suite
        files = [self.path, *self.rubric_files.values(), *(self.resolve(t.file) for t in suite.trajectories)]
        return files + ([self.resolve(suite.lock)] if suite.lock else [])

    def snapshot_policy(self) -> SnapshotPolicy:
        """The suite's ``snapshots`` setting, its roots resolved from the suite file's folder."""
        settings = self.suite.snapshots
        return SnapshotPolicy(tuple(self.base_dir / root for root in settings.roots), settings.max_bytes)

    def list_keys(self, rubric: Rubric) -> dict[str, str]:
        """The list keys declared for the trajectories ``rubric`` scores: the suite's, then the rubric's."""
        return merge_keys(self.suite.world.keys, rubric.world.keys if rubric.world is not None else None)

    def rubric_for(self, ref: str) -> Rubric:
        if ref in self.rubrics:
            return self.rubrics[ref]
        matches = [rubric for rubric in self.rubrics.values() if rubric.id == ref]
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            versions = ", ".join(sorted(r.version for r in matches))
            raise InputError(f"rubric {ref!r} is ambiguous (versions {versions}): name it as id@version", self.path)
        raise InputError(f"no rubric {ref!r} among the suite's rubrics", self.path)


def load_suite(path: str | Path) -> LoadedSuite:
    path = Path(path)
    if path.is_dir():
        if not (path / "suite.yaml").is_file():
            raise InputError("this folder holds no suite.yaml: write one with `judgekit init`, or import "
                             "trajectories with `judgekit import FORMAT SRC --out FOLDER`, which writes one to fill "
                             "in (or name the suite file itself)", path)
        path = path / "suite.yaml"
    suite = load_document(path, Suite)
    loaded = LoadedSuite(suite=suite, path=path.resolve())
    loaded.rubrics, loaded.rubric_files = load_rubrics([loaded.resolve(p) for p in suite.rubrics])
    for entry in suite.trajectories:
        loaded.rubric_for(entry.rubric)  # fail early on a rubric the suite does not have
    return loaded
