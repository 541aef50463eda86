"""Residual-risk records: the only way a safety finding is waived.

One YAML file per record under ``safety/risks/`` in the repository (schema:
``schemas/residual-risk.schema.json``). A record names one signal, the trajectories or tools it
covers, who owns the risk, when it was written, why it is accepted, when it expires and how to
roll back if it materialises.

The rules, so that a waiver never happens by accident:

- A record waives a finding only when it is *valid today*: dated no later than today and
  expiring no earlier than today (``expires`` is the last day it counts), with an owner. An
  expired record, or one dated in the future, waives nothing; the report says so
  (``RiskRegister.considered``).
- A record lasts at most ``max_days`` (the suite's ``safety.max_waiver_days``, default 90) from
  its ``date`` to its ``expires``, so every waiver is reviewed again at least that often. A
  longer one is a problem (below). So is one dated after the day the scan judges on: ``date`` is
  the day it was written, and records dated ahead, one after another, would outlast the limit.
- Scopes are plain ids, compared exactly: no glob patterns (``*``, ``?``, ``[`` are refused
  when the record loads, so a pattern never silently matches nothing, nor everything).
- A file that does not load (bad YAML, a missing field, a blank or invisible owner, an unknown
  signal, ``expires`` not after ``date``...) waives nothing and does not stop the scan: it is kept in
  ``RiskRegister.problems`` as ``file:line: why``, which the scan reports as a stop-ship
  configuration problem. A record file that is a symbolic link is such a problem too: the
  record reviewers see must be the file in the folder.
- The folder is read, not searched: ``*.yaml`` and ``*.yml`` files (any case) directly in it, sorted by
  name; anything else (this folder's README, a subfolder) is listed in ``RiskRegister.ignored``.
- A suite's folder is confined as its snapshot files are: once every symbolic link is followed,
  the folder, and any record file that is a link, must lie in the suite file's folder tree, where
  review of the suite sees them. Anything else is an InputError naming the suite file, never a
  record silently read from elsewhere nor silently skipped.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from judgekit._util.documents import compose, find_node, load_document, parse_yaml
from judgekit._util.io import Version1, describe_validation_error
from judgekit.errors import InputError
from judgekit.safety.findings import Finding, Signal

RISK_FORMAT_VERSION = 1
RISK_SUFFIXES = (".yaml", ".yml")
MAX_RISK_FILES = 10_000
"""Most entries the risks folder may hold: a register is reviewed by people, not generated."""
DEFAULT_EXPIRING_DAYS = 14
DEFAULT_MAX_WAIVER_DAYS = 90
"""The longest a record may last from its ``date`` to its ``expires`` unless the suite sets
``safety.max_waiver_days``."""
SCHEMA_HINT = "../../schemas/residual-risk.schema.json"
"""The ``$schema`` a record in ``safety/risks/`` names for editor completion."""

_ISO_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")
_GLOB = re.compile(r"[*?\[]")
_NOT_BLANK = {"minLength": 1, "pattern": r"\S"}
# Letters that render as nothing though Unicode calls them letters or symbols (Hangul fillers,
# the blank Braille pattern): an owner written in them would look empty in review.
_BLANK_LETTERS = frozenset("\u115f\u1160\u2800\u3164\uffa0")
_INVISIBLE = ("Z", "C", "M")  # separators, control/format/unassigned, lone combining marks


def _iso_day(value: object) -> object:
    # pydantic alone would also take 1767225600 (a timestamp) or "2026-01-01T00:00:00" as a
    # day; a record is written by a person, so only the plain ISO form is accepted.
    if isinstance(value, str) and not _ISO_DAY.fullmatch(value):
        raise ValueError(f"{value!r} is not an ISO date: write YYYY-MM-DD")
    if not isinstance(value, (str, dt.date)):
        # ValueError, not TypeError: pydantic reports only the former as a validation error.
        raise ValueError(f"expected an ISO date (YYYY-MM-DD), got {type(value).__name__}")  # noqa: TRY004
    return value


def visible(value: str) -> bool:
    """Whether ``value`` holds a character a reader sees (not only spaces, zero-width or format
    characters, combining marks, blank-looking letters)."""
    return any(unicodedata.category(c)[0] not in _INVISIBLE and c not in _BLANK_LETTERS for c in value)


def _text(value: str, what: str) -> str:
    if not visible(value):
        raise ValueError(f"{what} must not be blank (nor only invisible characters)")
    return value


class RiskScope(BaseModel):
    """What a record covers: findings in these trajectories, or on calls of these tools."""

    model_config = ConfigDict(extra="forbid")

    trajectories: list[str] = Field(default_factory=list, description="Trajectory ids, exactly as in the "
                                    "trajectory files (no patterns).")
    tools: list[str] = Field(default_factory=list, description="Tool names, exactly as called (no patterns). A "
                             "finding that is not about a call (the output, the world diff) has no tool.")

    @field_validator("trajectories", "tools")
    @classmethod
    def _plain_ids(cls, values: list[str]) -> list[str]:
        for value in values:
            if not value or value != value.strip():
                raise ValueError(f"{value!r}: an id may not be blank or start or end with whitespace")
            if _GLOB.search(value):
                raise ValueError(f"{value!r}: patterns are not supported, list each id")
        return values

    @model_validator(mode="after")
    def _not_empty(self) -> RiskScope:
        if not self.trajectories and not self.tools:
            raise ValueError("name at least one trajectory or tool: a record cannot cover everything")
        return self

    def covers(self, finding: Finding) -> bool:
        return finding.trajectory_id in self.trajectories or (finding.tool is not None and finding.tool in self.tools)

    def describe(self) -> str:
        parts = []
        if self.trajectories:
            parts.append("trajectories " + ", ".join(self.trajectories))
        if self.tools:
            parts.append("tools " + ", ".join(self.tools))
        return "; ".join(parts)


class RiskRecord(BaseModel):
    """One accepted residual risk: a signal, where it is accepted, by whom, why, until when."""

    model_config = ConfigDict(extra="forbid")

    format_version: Version1 = Field(1, description="Format of this record.")
    signal: Signal = Field(description="The stop-ship signal this record waives (judgekit.safety.findings.SIGNALS).")
    scope: RiskScope = Field(description="The trajectories and/or tools it covers; a finding is covered when "
                             "its trajectory id or its tool is listed.")
    owner: str = Field(description="Who answers for the risk: a person or team, e.g. an email address.",
                       json_schema_extra=_NOT_BLANK)
    date: dt.date = Field(description="The day the record was written (YYYY-MM-DD); it counts from that day.")
    reason: str = Field(description="Why the risk is accepted.", json_schema_extra=_NOT_BLANK)
    expires: dt.date = Field(description="The last day the record counts (YYYY-MM-DD), after `date`.")
    rollback: str = Field(description="How to undo or contain it if the risk materialises.",
                          json_schema_extra=_NOT_BLANK)
    ticket: str | None = Field(None, description="Where the risk is tracked (an issue URL or id).")
    notes: str | None = Field(None, description="Anything else a reviewer should know.")

    @field_validator("date", "expires", mode="before")
    @classmethod
    def _iso_day(cls, value: object) -> object:
        return _iso_day(value)

    @field_validator("owner", "reason", "rollback")
    @classmethod
    def _not_blank(cls, value: str, info) -> str:
        return _text(value, info.field_name)

    @model_validator(mode="after")
    def _expires_after_date(self) -> RiskRecord:
        if self.expires <= self.date:
            raise ValueError(f"expires ({self.expires}) must be after date ({self.date})")
        return self

    @property
    def days(self) -> int:
        """How long the record lasts: days from ``date`` to ``expires``."""
        return (self.expires - self.date).days

    def why_invalid(self, today: dt.date, max_days: int = DEFAULT_MAX_WAIVER_DAYS) -> str | None:
        """None when the record counts on ``today``; otherwise why it does not."""
        # A blank owner and a record longer than max_days are refused when the record loads;
        # checked here as well for records built in code (model_construct), so neither an
        # ownerless waiver nor an overlong one counts either way.
        if not visible(self.owner or ""):
            return "has no owner"
        if self.expires < today:
            return f"expired on {self.expires}"
        if self.date > today:
            return f"not yet valid: dated {self.date}, after today ({today})"
        if self.days > max_days:
            return f"lasts {self.days} days, more than the {max_days} a waiver may last"
        return None


@dataclass(frozen=True)
class LoadedRisk:
    """A record with the file it came from."""

    record: RiskRecord
    path: Path
    name: str
    """The file's name in the risks folder, for reports (``payments-refund.yaml``)."""


@dataclass(frozen=True)
class Considered:
    """A record that covers a finding but does not count today, and why."""

    risk: LoadedRisk
    why: str

    def describe(self) -> str:
        return f"waiver {self.risk.name} {self.why}: not applied"


class RiskState(BaseModel):
    """One record's standing on a day, for the report's residual-risk summary."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="The record's file name in the risks folder.")
    signal: Signal
    scope: str = Field(description="What it covers, in words.")
    owner: str
    date: dt.date
    expires: dt.date
    state: Literal["valid", "expiring", "expired", "not yet valid", "invalid"] = Field(
        description="valid; expiring (valid, and expires within the window); expired; not yet valid (dated "
        "after today); invalid (any other reason it does not count).")
    days_left: int = Field(description="Days from today to `expires` (0: its last day; negative: expired).")
    text: str = Field(description="The state in words: 'valid', 'expires in 3 days', 'expired on 2026-11-01'.")


@dataclass
class RiskRegister:
    """Every record of a risks folder, and every file that failed to load."""

    risks: list[LoadedRisk] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    """``file:line: why`` for each record that did not load: it waives nothing, and the scan
    reports it as a stop-ship configuration problem."""
    ignored: list[str] = field(default_factory=list)
    """Entries of the folder that are not records (a README, a subfolder), by name."""
    max_days: int = DEFAULT_MAX_WAIVER_DAYS
    """The longest a record may last; a longer one waives nothing."""

    def waiver_for(self, finding: Finding, today: dt.date) -> LoadedRisk | None:
        """The first record (by file name) valid on ``today`` with the finding's signal whose
        scope covers the finding; None when no record waives it."""
        return next((risk for risk in self._covering(finding) if self._why_invalid(risk, today) is None), None)

    def considered(self, finding: Finding, today: dt.date) -> list[Considered]:
        """Records with the finding's signal covering it that do not count on ``today``."""
        return [Considered(risk, why) for risk in self._covering(finding)
                if (why := self._why_invalid(risk, today)) is not None]

    def expiring(self, today: dt.date, within_days: int = DEFAULT_EXPIRING_DAYS) -> list[LoadedRisk]:
        """Records valid on ``today`` whose last day is within ``within_days`` of it."""
        last = today + dt.timedelta(days=within_days)
        return [risk for risk in self.risks if self._why_invalid(risk, today) is None and risk.record.expires <= last]

    def summary(self, today: dt.date, within_days: int = DEFAULT_EXPIRING_DAYS) -> list[RiskState]:
        """Every record with its state on ``today``, in file-name order."""
        return [_state(risk, today, within_days, self._why_invalid(risk, today)) for risk in self.risks]

    def _why_invalid(self, risk: LoadedRisk, today: dt.date) -> str | None:
        return risk.record.why_invalid(today, self.max_days)

    def _covering(self, finding: Finding) -> list[LoadedRisk]:
        return [risk for risk in self.risks
                if risk.record.signal == finding.signal and risk.record.scope.covers(finding)]


def _state(risk: LoadedRisk, today: dt.date, within_days: int, why: str | None) -> RiskState:
    record = risk.record
    days_left = (record.expires - today).days
    if why is None and days_left <= within_days:
        state, text = "expiring", ("expires today" if days_left == 0 else
                                   f"expires in {days_left} day{'s' if days_left != 1 else ''} ({record.expires})")
    elif why is None:
        state, text = "valid", f"valid until {record.expires}"
    elif record.expires < today:
        state, text = "expired", why
    elif record.date > today:
        state, text = "not yet valid", why
    else:
        state, text = "invalid", why
    return RiskState(name=risk.name, signal=record.signal, scope=record.scope.describe(), owner=record.owner,
                     date=record.date, expires=record.expires, state=state, days_left=days_left, text=text)


def confine_risks(folder: str | Path, suite_file: str | Path) -> Path:
    """``folder`` with every symbolic link followed; InputError naming ``suite_file`` when that
    lies outside the suite file's folder tree (or the path cannot be a file's: a NUL in it)."""
    suite_file = Path(suite_file)
    return _confined(Path(folder), Path(os.path.realpath(suite_file.parent)), suite_file,
                     f"safety.risks: the residual-risk folder {folder}")


def _confined(path: Path, root: Path, suite_file: Path, what: str) -> Path:
    # As SnapshotPolicy.confine: the real path, compared with the real root.
    try:
        resolved = Path(os.path.realpath(path))
    except ValueError:  # a NUL in the name: no file can have it
        raise InputError(f"{str(path)!r}: a path with a NUL character cannot be the residual-risk folder (safety.risks)",
                         suite_file) from None
    if resolved == root or resolved.is_relative_to(root):
        return resolved
    raise InputError(f"{what} resolves to {resolved}, outside the suite's folder tree ({root}): a waiver must be "
                     "where review of the suite sees it; keep the records in a folder under the suite file's",
                     suite_file)


def load_risks(folder: str | Path, *, suite_file: str | Path | None = None, today: dt.date | None = None,
               max_days: int = DEFAULT_MAX_WAIVER_DAYS, max_files: int = MAX_RISK_FILES) -> RiskRegister:
    """Every record in ``folder`` (not its subfolders), sorted by file name.

    A folder that does not exist is an empty register. A path that is a file or a symbolic
    link, an unreadable folder, or more than ``max_files`` entries is an InputError. A
    record that does not load is a problem in the register (see ``RiskRegister.problems``),
    and so is one that lasts more than ``max_days`` from its ``date`` to its ``expires``, or,
    when ``today`` is given, one dated after it.

    With ``suite_file`` (a suite's ``safety.risks``) the folder, and every record file that is
    a symbolic link, must lie in the suite file's folder tree once every link is followed: one
    outside it is an InputError naming the suite file (``confine_risks``).
    """
    folder = Path(folder)
    root = None
    if suite_file is not None:
        suite_file = Path(suite_file)
        root = Path(os.path.realpath(suite_file.parent))
        confine_risks(folder, suite_file)
    if folder.is_symlink():
        raise InputError("the residual-risk folder is a symbolic link: records must live in the repository "
                         "folder itself", folder)
    if not folder.exists():
        return RiskRegister(max_days=max_days)
    if not folder.is_dir():
        raise InputError("expected the residual-risk folder (safety/risks), found a file", folder)
    entries: list[os.DirEntry[str]] = []
    try:
        with os.scandir(folder) as scan:
            for entry in scan:
                entries.append(entry)
                if len(entries) > max_files:
                    raise InputError(f"holds more than {max_files} entries: a residual-risk register is "
                                     "written by people; remove what does not belong there", folder)
    except OSError as exc:
        raise InputError(f"cannot read the residual-risk folder: {exc.strerror}", folder) from None
    register = RiskRegister(max_days=max_days)
    for entry in sorted(entries, key=lambda e: e.name):
        path = folder / entry.name
        is_record = entry.name.lower().endswith(RISK_SUFFIXES)
        if entry.is_symlink():
            if is_record:
                if root is not None:
                    _confined(path, root, suite_file, f"the residual-risk record {path} is a symbolic link that")
                register.problems.append(str(InputError(
                    "is a symbolic link: a record must be a regular file in the folder (a link may point where "
                    "review does not see it); not applied", path)))
            else:
                register.ignored.append(entry.name)
            continue
        if not is_record or entry.is_dir():
            register.ignored.append(entry.name)
            continue
        try:
            record = load_document(path, RiskRecord)
            _check_dates(record, path, today, max_days)
        except InputError as exc:
            register.problems.append(f"{exc}; not applied")
            continue
        register.risks.append(LoadedRisk(record=record, path=path, name=entry.name))
    return register


def _check_dates(record: RiskRecord, path: Path, today: dt.date | None, max_days: int) -> None:
    """InputError at the line of ``expires`` for a record longer than ``max_days``; at the line of
    ``date`` for one dated after ``today``."""
    if record.days > max_days:
        raise InputError(f"the record lasts {record.days} days (date {record.date} to expires {record.expires}), "
                         f"more than the {max_days} a waiver may last (safety.max_waiver_days): set expires no later "
                         f"than {record.date + dt.timedelta(days=max_days)}, and write a new record to renew it",
                         path, _line_of(path, "expires"))
    if today is not None and record.date > today:
        raise InputError(f"dated {record.date}, after today ({today}): date a record the day it is written (records "
                         "dated ahead, one after another, would outlast safety.max_waiver_days)",
                         path, _line_of(path, "date"))


def _line_of(path: Path, key: str) -> int | None:
    node = find_node(compose(path), (key,))
    return node.start_mark.line + 1 if node is not None else None


def new_risk_yaml(signal: str, scope: RiskScope, owner: str, reason: str, expires: dt.date, rollback: str,
                  today: dt.date, *, ticket: str | None = None, notes: str | None = None,
                  max_days: int = DEFAULT_MAX_WAIVER_DAYS) -> str:
    """A record's YAML text, validated (InputError when a field is wrong, or when it would last
    more than ``max_days``), dated ``today``."""
    try:
        record = RiskRecord(signal=signal, scope=scope, owner=owner, date=today, reason=reason, expires=expires,
                            rollback=rollback, ticket=ticket, notes=notes)
    except ValidationError as exc:
        raise InputError(f"residual-risk record: {describe_validation_error(exc)}") from None
    if record.days > max_days:
        raise InputError(f"residual-risk record: it would last {record.days} days, more than the {max_days} a waiver "
                         f"may last: set expires no later than {today + dt.timedelta(days=max_days)}")
    data = {"$schema": SCHEMA_HINT, **record.model_dump(mode="json", exclude_none=True)}
    data["scope"] = {key: value for key, value in data["scope"].items() if value}
    # Written as people write it (unicode as is), unless that would not read back the same:
    # PyYAML writes some line breaks (U+0085, U+2028) raw, and reading folds them into spaces.
    for allow_unicode in (True, False):
        text = yaml.safe_dump(data, sort_keys=False, allow_unicode=allow_unicode, width=100)
        try:
            if parse_yaml(text, "<new record>")[1] == data:
                return text
        except InputError:
            pass
    raise InputError("residual-risk record: a field holds text that YAML cannot keep as written")
