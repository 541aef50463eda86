"""The run record, format 3: a stream of JSON Lines, so neither writing nor reading needs it whole.

    {"header": {...}}     what was run: suite, rubrics and their hashes, project commit, gate policy
    {"result": {...}}     one line per trajectory, in suite order
    {"footer": {...}}     how it ended: summary per axis, ledger, judges seen, the gate's report

Paths in it are relative to the suite's folder, so records of one suite compare across
machines. A file without its footer is a run that did not finish (or a cut file) and is refused.
Older formats are read through numbered migrations (``MIGRATIONS``) into the same model:
format 1 (one JSON document, ``judgekit run --out`` before format 2) whole; format 2 (the same
lines, its header's gate policy with one minimum field per axis) header by header.
"""

from __future__ import annotations

import os
import secrets
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, PrivateAttr, ValidationError, model_validator

from judgekit._util import io as _io
from judgekit._util.files import relative_to
from judgekit._util.io import (
    Version3,
    RECORD_CONFIG,
    Timestamp,
    MAX_FILE_BYTES,
    describe_validation_error,
    open_regular_file,
    read_json,
)
from judgekit._util.strict_json import plain_error, strict_json_loads
from judgekit._util.clock import utc_now
from judgekit.axes.table import axis_named
from judgekit.errors import InputError
from judgekit.gate import GateReport
from judgekit.results import TrajectoryResult
from judgekit.run.ledger import Ledger
from judgekit.suite import ApprovalThresholds, GatePolicy
from judgekit.suite.model import gate_minimums_v1_to_v2

RUN_FORMAT = "judgekit-run"
RUN_FORMAT_VERSION = 3
CI_BUILD_VARIABLES = ("JUDGEKIT_BUILD_ID", "GITHUB_RUN_ID", "CI_PIPELINE_ID", "BUILDKITE_BUILD_ID", "BUILD_ID")
"""Where the CI build id is read from, first set wins (GitHub Actions, GitLab, Buildkite, Jenkins)."""


class _Strict(BaseModel):
    model_config = RECORD_CONFIG


class AxisSummary(_Strict):
    scored: int = Field(description="Trajectories scored on this axis.")
    unscored: int = Field(0, description="Trajectories the judge gave no valid verdict for (never pass or fail).")
    errors: int = Field(description="Trajectories whose axis could not be scored (bad input).")
    passed: int | None = Field(None, description="Binary axes: how many passed.")
    mean_score: float | None = Field(None, description="Mean score over scored trajectories.")


class ProjectState(_Strict):
    """The evaluated project, where it can be told: a record says which commit it measured."""

    git_commit: str | None = Field(None, description="HEAD of the git repository holding the suite.")
    git_dirty: bool | None = Field(None, description="Tracked files differed from that commit.")
    ci_build: str | None = Field(None, description=f"The CI build id (first set of {', '.join(CI_BUILD_VARIABLES)}).")


class RubricEntry(_Strict):
    sha256: str
    file: str = Field(description="The rubric file, relative to the suite's folder.")


class JudgeSeen(_Strict):
    """A judge that answered in this run, with its approval status per axis at run time."""

    fingerprint: str
    model_pin: str
    endpoint: str
    rubric: str
    axes: dict[str, Literal["approved", "advisory"]] = Field(description="Axis -> whether its verdicts gated.")
    verdicts: int = Field(description="Verdicts it gave in this run (unscored included).")
    same_family: int = Field(0, description="Of those, verdicts on trajectories whose agent is of the judge's own "
                             "model family (``judgekit.judge.family``): a judge may favour its family's answers.")


class RunHeader(_Strict):
    format: Literal["judgekit-run"] = RUN_FORMAT
    format_version: Version3 = RUN_FORMAT_VERSION
    run_id: str = Field(description="Unique id of this run (time-sortable).")
    suite: str = Field(description="Suite name.")
    suite_file: str = Field(description="The suite file, relative to the folder holding this record (to the working "
                            "directory for a record not written to a file).")
    project: ProjectState = Field(default_factory=ProjectState)
    judgekit_version: str
    started_at: Timestamp
    rubrics: dict[str, RubricEntry] = Field(description="id@version -> hash and file.")
    gate: GatePolicy = Field(default_factory=GatePolicy, description="The suite's gate policy at run time.")
    approval: ApprovalThresholds = Field(
        default_factory=ApprovalThresholds,
        description="The suite's approval thresholds at run time: the gate checks approval records against them.")
    calibration_dir: str = Field("calibration", description="Approval records, relative to the suite's folder.")

    @model_validator(mode="before")
    @classmethod
    def _migrate(cls, data: Any) -> Any:
        """A format 2 header (a record's line, or one a history stored) through ``MIGRATIONS``."""
        if isinstance(data, dict) and type(data.get("format_version")) is int and data["format_version"] == 2:
            return MIGRATIONS[2](data)
        return data


class RunFooter(_Strict):
    finished_at: Timestamp
    trajectories: int = Field(description="Result lines in the record.")
    summary: dict[str, AxisSummary] = Field(description="Axis -> summary.")
    ledger: Ledger | None = Field(None, description="Judge calls, cache use, tokens and cost (None: nothing judged).")
    judges: list[JudgeSeen] = Field(default_factory=list)
    gate_report: GateReport | None = Field(None, description="The gate, as decided at run time.")


class RunRecord(RunHeader, RunFooter):
    """A whole run in memory: the header's fields, every result, the footer's fields."""

    results: list[TrajectoryResult] = Field(default_factory=list, description="One record per trajectory.")
    _source: Path | None = PrivateAttr(None)  # the file it was read from, for messages
    _rows: Any = PrivateAttr(None)  # the run's rows, kept as it ran (run_suite(keep_rows=True))
    _migrated_from: int | None = PrivateAttr(None)  # the format it was read from, when migrated
    _suite_missing: bool = PrivateAttr(False)  # read for a report whose suite file is gone (judges, gate unknown)

    def rows(self):
        """The rows ``compare`` and the history read, as the run made them (``run_suite(keep_rows=True)``)."""
        if self._rows is None:
            raise ValueError("this record was not made with keep_rows=True")
        return self._rows

    @classmethod
    def of(cls, header: RunHeader, results: list[TrajectoryResult], footer: RunFooter) -> RunRecord:
        return cls(**dict(header), **dict(footer), results=results)

    @property
    def header(self) -> RunHeader:
        return RunHeader(**{name: getattr(self, name) for name in RunHeader.model_fields})

    @property
    def footer(self) -> RunFooter:
        return RunFooter(**{name: getattr(self, name) for name in RunFooter.model_fields})

    @property
    def path(self) -> Path | None:
        """The file this record was read from or written to (None: only in memory)."""
        return self._source

    def suite_path(self) -> Path:
        """The suite file: ``suite_file`` from the folder of the file this record was read
        from or written to (the working directory for a record only in memory)."""
        base = self._source.parent if self._source is not None else Path.cwd()
        return base / self.suite_file

    def calibration_path(self) -> Path:
        return _calibration_path(self.suite_path(), self.calibration_dir, self._source)

    def write(self, path: str | Path) -> None:
        """Write this record to ``path`` as JSON Lines (format 3) (atomically, secrets masked)."""
        from judgekit._util.files import AtomicFile

        path = Path(path)
        header = self.header
        header.suite_file = relative_to(self.suite_path().resolve(), path.parent.resolve())  # from its new folder
        with AtomicFile(path) as handle:
            handle.write(line_of("header", header))
            for result in self.results:
                handle.write(line_of("result", result))
            handle.write(line_of("footer", self.footer))


def line_of(kind: Literal["header", "result", "footer"], part: BaseModel) -> str:
    """One line of a JSON Lines record (pydantic's own JSON encoder, wrapped by its kind)."""
    return f'{{"{kind}":{part.model_dump_json()}}}\n'


class RunLine(_Strict):
    """One line of a run record: exactly one of its three kinds."""

    header: RunHeader | None = None
    result: TrajectoryResult | None = None
    footer: RunFooter | None = None


# --- building -------------------------------------------------------------------------------


def new_run_id() -> str:
    """``20261201T110533Z-3f9a1c``: sorts by start time, unique by its random tail."""
    return f"{utc_now():%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"


def project_state(folder: Path, environ=os.environ) -> ProjectState:
    """The git commit (and whether tracked files changed) of the repository holding ``folder``,
    and the CI build id; each None where it cannot be told (no git, not a repository)."""
    ci_build = next((environ[name] for name in CI_BUILD_VARIABLES if environ.get(name)), None)

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, timeout=10,
                                  stdin=subprocess.DEVNULL)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout if done.returncode == 0 else None

    commit = git("rev-parse", "--verify", "HEAD")
    dirty = git("status", "--porcelain", "--untracked-files=no") if commit else None
    return ProjectState(git_commit=commit.strip() if commit else None,
                        git_dirty=None if dirty is None else bool(dirty.strip()), ci_build=ci_build)


class SummaryBuilder:
    """Per-axis counts and means, one result at a time (nothing kept per trajectory)."""

    def __init__(self) -> None:
        self._axes: dict[str, dict[str, Any]] = {}

    def add(self, result: TrajectoryResult) -> None:
        for name, res in result.axes.items():
            tally = self._axes.setdefault(name, {"scored": 0, "unscored": 0, "errors": 0, "passed": 0,
                                                  "scores": 0, "total": 0.0})
            if res.status == "scored":
                tally["scored"] += 1
                if axis_named(name).binary and res.passed:
                    tally["passed"] += 1
                if res.score is not None:
                    tally["scores"] += 1
                    tally["total"] += res.score
            elif res.status == "unscored":
                tally["unscored"] += 1
            else:
                tally["errors"] += 1

    def summary(self) -> dict[str, AxisSummary]:
        return {
            name: AxisSummary(
                scored=t["scored"], unscored=t["unscored"], errors=t["errors"],
                passed=t["passed"] if axis_named(name).binary else None,
                mean_score=round(t["total"] / t["scores"], 6) if t["scores"] else None,
            )
            for name, t in sorted(self._axes.items())
        }


def summarise(results: list[TrajectoryResult]) -> dict[str, AxisSummary]:
    builder = SummaryBuilder()
    for result in results:
        builder.add(result)
    return builder.summary()


# --- reading --------------------------------------------------------------------------------


def _v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    """Format 1 (one JSON document) -> format 2's fields (then ``_v2_to_v3``). Absolute paths stay as they were;
    the project's commit was not recorded; the gate was not embedded (``gate`` recomputes it)."""
    known = {"format_version", "suite", "suite_path", "judgekit_version", "started_at", "finished_at", "rubrics",
             "summary", "ledger", "gate", "calibration_dir", "results"}
    if not isinstance(data, dict) or data.get("format_version") != 1 or not set(data) <= known:
        raise ValueError("not a format 1 run record")
    results = data.get("results")
    suite_path = str(Path(str(data.get("suite_path", ""))).resolve())  # format 1 named it from the working directory
    return {
        "format_version": 2,
        "run_id": "v1-" + str(data.get("started_at", "unknown")),
        "suite": data.get("suite"),
        "suite_file": suite_path,
        "judgekit_version": data.get("judgekit_version"),
        "started_at": data.get("started_at"),
        "rubrics": data.get("rubrics"),
        "gate": data.get("gate", {}),
        "calibration_dir": data.get("calibration_dir") or "calibration",
        "results": results,
        "finished_at": data.get("finished_at"),
        "trajectories": len(results) if isinstance(results, list) else 0,
        "summary": data.get("summary"),
        "ledger": data.get("ledger"),
    }


def _v2_to_v3(data: dict[str, Any]) -> dict[str, Any]:
    """Format 2 -> 3 (a header, or a whole record's fields): the gate policy's three minimum
    fields become ``gate.min``, as the suite's format 2 names them."""
    return {**data, "format_version": 3, **({"gate": gate_minimums_v1_to_v2(data["gate"])} if "gate" in data else {})}


MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: _v1_to_v2, 2: _v2_to_v3}
"""Format version -> the function that reads it as the next format. Format 1 is one JSON document
(``open_run`` migrates it whole); a format 2 header migrates as it is read (``RunHeader``)."""


def _calibration_path(suite: Path, calibration_dir: str, record: Path | None) -> Path:
    """The approvals folder a record's gate reads: the suite's calibration folder, found from
    the suite file the record names (format 1 named the folder itself, absolute). A suite file
    that is not there is an error, never a gate that quietly finds no approval."""
    if Path(calibration_dir).is_absolute():
        return Path(calibration_dir)
    if not suite.is_file():
        raise InputError(f"the suite file the record names ({suite}) is not there: keep the record beside the "
                         "suite it ran, or pass --calibration-dir", record)
    return suite.parent / calibration_dir


def _parse_line(raw: bytes, path: Path, line_no: int) -> RunLine | None:
    """One line of a JSON Lines record, format 2 or 3 (None for a blank line)."""
    limit = _io.MAX_LINE_BYTES
    if len(raw) > limit and not raw.endswith(b"\n"):
        raise InputError(f"line longer than {limit} bytes", path, line_no)
    if not raw.strip():
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError("not UTF-8", path, line_no) from None
    try:
        line = RunLine.model_validate(strict_json_loads(text))
    except ValidationError as exc:
        raise InputError(f"not a run record line: {describe_validation_error(exc)}", path, line_no) from None
    except ValueError as exc:
        raise InputError(f"invalid JSON: {plain_error(exc)}", path, line_no) from None
    if sum(part is not None for part in (line.header, line.result, line.footer)) != 1:
        raise InputError("a run record line holds exactly one of header, result, footer", path, line_no)
    return line


class RunStream:
    """A JSON Lines record (format 2 or 3) read in one pass over one open file: ``header`` first, ``results``
    streamed once, the footer checked at the end (its count must match, and nothing may follow
    it: a file holding two records is refused, never gated on the first)."""

    def __init__(self, path: Path, handle, header: RunHeader, line_no: int):
        self.path = path
        self.header = header
        self.footer: RunFooter | None = None
        self._handle = handle
        self._line_no = line_no
        self._read = False

    def suite_path(self) -> Path:
        """The suite file: ``suite_file`` from the folder of this record's file."""
        return self.path.parent / self.header.suite_file

    @property
    def line_no(self) -> int:
        """The line (1-based) last read: while ``results`` streams, the line of the result it
        last gave, for a refusal of that result to name."""
        return self._line_no

    def calibration_path(self) -> Path:
        return _calibration_path(self.suite_path(), self.header.calibration_dir, self.path)

    @property
    def gate(self) -> GatePolicy:
        return self.header.gate

    @property
    def results(self) -> Iterator[TrajectoryResult]:
        return self.iter_results()

    def close(self) -> None:
        self._handle.close()

    def iter_results(self) -> Iterator[TrajectoryResult]:
        if self._read:
            raise RuntimeError("a run record stream is read once")
        self._read = True
        try:
            count = 0
            while raw := self._handle.readline(_io.MAX_LINE_BYTES + 1):
                self._line_no += 1
                line = _parse_line(raw, self.path, self._line_no)
                if line is None:
                    continue
                if line.header is not None:
                    raise InputError("a second header: two run records in one file?", self.path, self._line_no)
                if line.footer is not None:
                    if line.footer.trajectories != count:
                        raise InputError(f"the footer counts {line.footer.trajectories} trajectories, the record "
                                         f"holds {count}", self.path, self._line_no)
                    self._after_footer()
                    self.footer = line.footer
                    return
                count += 1
                yield line.result
            raise InputError("the run record ends without its footer: the run did not finish, or the file was cut",
                             self.path)
        finally:
            self.close()

    def _after_footer(self) -> None:
        while raw := self._handle.readline(_io.MAX_LINE_BYTES + 1):
            self._line_no += 1
            if raw.strip():
                raise InputError("more after the footer: two run records in one file?", self.path, self._line_no)


def _sniff(path: Path) -> tuple[int, object]:
    """(2, the open stream) for JSON Lines (format 2 or 3); (1, None) for what may be a format 1 document."""
    handle = open_regular_file(path, expected="a run record").__enter__()
    line_no = 0
    try:
        while raw := handle.readline(_io.MAX_LINE_BYTES + 1):
            line_no += 1
            if len(raw) > _io.MAX_LINE_BYTES and not raw.endswith(b"\n"):
                raise InputError(f"line longer than {_io.MAX_LINE_BYTES} bytes", path, line_no)
            if raw.strip():
                break
        else:
            raise InputError("not a run record: the file is empty", path, 1)
        try:
            data = strict_json_loads(raw)
        except ValueError:
            if raw.lstrip().startswith(b"{"):
                handle.close()
                return 1, None  # format 1 spreads one document over many lines
            raise InputError("not a run record (it does not start with a JSON object)", path, line_no) from None
        if isinstance(data, dict) and data and set(data) <= {"header", "result", "footer"}:
            line = _parse_line(raw, path, line_no)
            if line.header is None:
                raise InputError("a run record starts with its header line", path, line_no)
            return 2, RunStream(path, handle, line.header, line_no)
        handle.close()
        return 1, None
    except BaseException:
        handle.close()
        raise


def open_run(path: str | Path) -> RunStream | RunRecord:
    """A run record of any format: JSON Lines (format 2 or 3) as a stream (one pass over one open file),
    format 1 migrated, whole, in memory."""
    path = Path(path)
    version, stream = _sniff(path)
    if version == 2:
        return stream
    document = read_json(path, max_bytes=MAX_FILE_BYTES, expected="a run record")
    version = document.get("format_version") if isinstance(document, dict) else None
    if not isinstance(document, dict) or isinstance(version, bool) or not isinstance(version, int) or version != 1:
        raise InputError(f"not a run record (format {RUN_FORMAT_VERSION} is JSON Lines starting with a header "
                         "line; format 1 is one JSON document)", path)
    try:
        record = RunRecord.model_validate(MIGRATIONS[1](document))  # to format 2; the header's migration does the rest
    except (ValueError, ValidationError) as exc:
        detail = describe_validation_error(exc) if isinstance(exc, ValidationError) else str(exc)
        raise InputError(f"not a run record: {detail}", path) from None
    record._source = path
    record._migrated_from = version
    return record


def read_run(path: str | Path) -> RunRecord:
    """A run record of either format, whole, in memory."""
    opened = open_run(path)
    if isinstance(opened, RunRecord):
        return opened
    results = list(opened.iter_results())
    record = RunRecord.of(opened.header, results, opened.footer)
    record._source = Path(path)
    return record


def is_run_record(path: Path) -> bool:
    """Whether ``path`` holds what ``gate`` reads as a run record (either format): ``--out`` may
    replace it, and nothing else."""
    try:
        opened = open_run(path)
    except InputError:
        return False
    if isinstance(opened, RunStream):
        opened.close()
    return True
