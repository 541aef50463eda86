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
- Scopes are plain ids, compared exactly: no glob patterns (``*``, ``?``, ``[`` are refused
  when the record loads, so a pattern never silently matches nothing, nor everything).
- A file that does not load (bad YAML, a missing field, a blank owner, an unknown signal,
  ``expires`` not after ``date``...) waives nothing and does not stop the scan: it is kept in
  ``RiskRegister.problems`` as ``file:line: why``, which the scan reports as a stop-ship
  configuration problem. A record file that is a symbolic link is such a problem too: the
  record reviewers see must be the file in the folder.
- The folder is read, not searched: ``*.yaml`` and ``*.yml`` files (any case) directly in it, sorted by
  name; anything else (this folder's README, a subfolder) is listed in ``RiskRegister.ignored``.
"""

from __future__ import annotations

import datetime as dt
import os
import re
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

from judgekit._documents import load_document, parse_yaml
from judgekit._io import Version1, describe_validation_error
from judgekit.errors import InputError
from judgekit.safety.findings import Finding, Signal

RISK_FORMAT_VERSION = 1
RISK_SUFFIXES = (".yaml", ".yml")
MAX_RISK_FILES = 10_000
"""Most entries the risks folder may hold: a register is reviewed by people, not generated."""
DEFAULT_EXPIRING_DAYS = 14
SCHEMA_HINT = "../../schemas/residual-risk.schema.json"
"""The ``$schema`` a record in ``safety/risks/`` names for editor completion."""

_ISO_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")
_GLOB = re.compile(r"[*?\[]")
_NOT_BLANK = {"minLength": 1, "pattern": r"\S"}


def _iso_day(value: object) -> object:
    # pydantic alone would also take 1767225600 (a timestamp) or "2026-01-01T00:00:00" as a
    # day; a record is written by a person, so only the plain ISO form is accepted.
    if isinstance(value, str) and not _ISO_DAY.fullmatch(value):
        raise ValueError(f"{value!r} is not an ISO date: write YYYY-MM-DD")
    if not isinstance(value, (str, dt.date)):
        # ValueError, not TypeError: pydantic reports only the former as a validation error.
        raise ValueError(f"expected an ISO date (YYYY-MM-DD), got {type(value).__name__}")  # noqa: TRY004
    return value


def _text(value: str, what: str) -> str:
    if not value.strip():
        raise ValueError(f"{what} must not be blank")
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

    def why_invalid(self, today: dt.date) -> str | None:
        """None when the record counts on ``today``; otherwise why it does not."""
        # A blank owner is refused when the record loads; checked here as well for records
        # built in code (model_construct), so "ownerless waivers don't count" holds either way.
        if not (self.owner or "").strip():
            return "has no owner"
        if self.expires < today:
            return f"expired on {self.expires}"
        if self.date > today:
            return f"not yet valid: dated {self.date}, after today ({today})"
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

    def waiver_for(self, finding: Finding, today: dt.date) -> LoadedRisk | None:
        """The first record (by file name) valid on ``today`` with the finding's signal whose
        scope covers the finding; None when no record waives it."""
        return next((risk for risk in self._covering(finding) if risk.record.why_invalid(today) is None), None)

    def considered(self, finding: Finding, today: dt.date) -> list[Considered]:
        """Records with the finding's signal covering it that do not count on ``today``."""
        return [Considered(risk, why) for risk in self._covering(finding)
                if (why := risk.record.why_invalid(today)) is not None]

    def expiring(self, today: dt.date, within_days: int = DEFAULT_EXPIRING_DAYS) -> list[LoadedRisk]:
        """Records valid on ``today`` whose last day is within ``within_days`` of it."""
        last = today + dt.timedelta(days=within_days)
        return [risk for risk in self.risks if risk.record.why_invalid(today) is None and risk.record.expires <= last]

    def summary(self, today: dt.date, within_days: int = DEFAULT_EXPIRING_DAYS) -> list[RiskState]:
        """Every record with its state on ``today``, in file-name order."""
        return [_state(risk, today, within_days) for risk in self.risks]

    def _covering(self, finding: Finding) -> list[LoadedRisk]:
        return [risk for risk in self.risks
                if risk.record.signal == finding.signal and risk.record.scope.covers(finding)]


def _state(risk: LoadedRisk, today: dt.date, within_days: int) -> RiskState:
    record = risk.record
    days_left = (record.expires - today).days
    why = record.why_invalid(today)
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


def load_risks(folder: str | Path, *, max_files: int = MAX_RISK_FILES) -> RiskRegister:
    """Every record in ``folder`` (not its subfolders), sorted by file name.

    A folder that does not exist is an empty register. A path that is a file or a symbolic
    link, an unreadable folder, or more than ``max_files`` entries is an InputError. A
    record that does not load is a problem in the register (see ``RiskRegister.problems``).
    """
    folder = Path(folder)
    if folder.is_symlink():
        raise InputError("the residual-risk folder is a symbolic link: records must live in the repository "
                         "folder itself", folder)
    if not folder.exists():
        return RiskRegister()
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
    register = RiskRegister()
    for entry in sorted(entries, key=lambda e: e.name):
        path = folder / entry.name
        is_record = entry.name.lower().endswith(RISK_SUFFIXES)
        if entry.is_symlink():
            if is_record:
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
        except InputError as exc:
            register.problems.append(f"{exc}; not applied")
            continue
        register.risks.append(LoadedRisk(record=record, path=path, name=entry.name))
    return register


def new_risk_yaml(signal: str, scope: RiskScope, owner: str, reason: str, expires: dt.date, rollback: str,
                  today: dt.date, *, ticket: str | None = None, notes: str | None = None) -> str:
    """A record's YAML text, validated (InputError when a field is wrong), dated ``today``."""
    try:
        record = RiskRecord(signal=signal, scope=scope, owner=owner, date=today, reason=reason, expires=expires,
                            rollback=rollback, ticket=ticket, notes=notes)
    except ValidationError as exc:
        raise InputError(f"residual-risk record: {describe_validation_error(exc)}") from None
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
