"""``judgekit import tooltalk``: ToolTalk reference conversations, one rubric each.

Follows the ToolTalk format of microsoft/ToolTalk at commit e05f4ce6 (``data/easy``,
``data/tooltalk``, ``data/databases``, and ``api_schemas.json``, the ``name``, ``parameters``,
``database_name``, ``is_action`` and ``requires_auth`` of each API class in
``src/tooltalk/apis``).

SRC is one conversation file or a folder of them (``*.json`` in it, not below; a conversation
is one JSON document ``{name, conversation_id, user, metadata, conversation: [{index, role,
text, apis?}]}``). ``api_schemas.json`` and the ``databases/`` folder are looked up first in
SRC's folder, then in its parent (the published layout: ``easy/``, ``databases/`` and
``api_schemas.json`` side by side); either missing is an error naming where it looked.

Each conversation becomes one trajectory, ``OUT/trajectories/<name>.jsonl`` (id
``tooltalk-<name>``, ``name`` in lower case through the import writer's ``file_name``: other
characters than letters, digits, ``.``, ``_`` and ``-`` as ``-``; one then empty, over 100
characters or a Windows device name ends in ``-`` and 12 hex digits of the whole name's sha256):

- ``calls``: the reference ``apis`` of every assistant turn, in order: ``request.api_name`` ->
  tool, ``request.parameters`` -> args, ``response`` -> result, ``exception`` -> error (a
  failed call);
- ``prompt``: the first user turn; later user turns -> ``turns`` (placed among the calls) and
  ``context`` (``user-<index>``, the turn's place when it has no index, ``-2``, ``-3``... added
  when an index repeats); ``context.system``: the system text ToolTalk's own
  evaluation gives the model (location, timestamp, username, session token from ``metadata``);
- ``output``: every assistant text, in order, separated by blank lines;
- ``metadata``: ``conversation_id``, ``name``, ``scenario``, ``user``, ``metadata`` (ToolTalk's),
  ``suites_used``, ``apis_used``, ``source`` (the file name) and ``databases`` (the copies in
  OUT of the databases its APIs use).

One rubric per conversation, ``OUT/rubrics/tooltalk-<name>.yaml``, pre-registered in
``rubrics/rubrics.lock``, with a tool-correctness axis only:

- ``expected_calls``: every successful reference call, each argument pinned to its reference
  value (``const``), in any order (ToolTalk matches in any order too);
- ``in_scope``: every API the schemas mark ``is_action`` plus the lookups the reference makes.
  So an extra successful action call costs the call-count point (ToolTalk's "bad action"), an
  extra call to one of the reference's lookups does too, and a lookup the reference does not
  make is not counted (ToolTalk's success ignores extra lookups; only its precision drops).

Writes: an ``is_action`` API is a write. Every action call of the reference is an expected
call of its rubric, and ``OUT/suite.yaml`` carries a ``safety:`` policy classifying every API
of the schemas as ``write`` (``is_action``) or ``read``, which ``judgekit safety`` reads.

No world. The starting databases are copied to ``OUT/databases/<Name>.json`` (``<Name>``
through ``file_name`` too; two databases that would share one are refused). They are the world
before, as published (ToolTalk also logs the conversation's user in by setting their
``session_token`` and ``verification_code`` before the first turn), but the world after is not
derived: it comes from ToolTalk's Python API implementations (ids from a seeded random
generator, accounts created and removed, emails delivered to other users' inboxes), and
replaying the writes would re-implement ToolTalk rather than read its data. There is therefore
no task-success axis: the state change is measured by the action calls.

How this relates to ToolTalk's own scoring (``ToolExecutor.evaluate_predictions``): ToolTalk
counts recall over every reference call and calls a conversation a success when recall is 1 and
no successful action call fails to match a reference call. Lost or different here: ToolTalk
compares lookups by their *response* (same result, or a superset of alarm ids) where judgekit
compares their arguments; it compares free text (event names, descriptions, email bodies...)
by sentence-embedding similarity >= 0.9 where judgekit wants the same text; it expects a
reference call that failed to fail the same way, where judgekit scores no failed call (such a
call stays in the trajectory, unexpected). Rubrics are registered on ``--registered``, else
1970-01-01: ``metadata.timestamp`` is the scenario's simulated clock, not when the reference
was written.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from judgekit._util.io import describe_validation_error, read_json
from judgekit.errors import InputError
from judgekit.importers._writer import DEFAULT_REGISTERED, ImportWriter, Names, file_name
from judgekit.rubric.model import Rubric
from judgekit.trajectory import Call, Trajectory, UserTurn

SCHEMAS_NAME = "api_schemas.json"
DATABASES_NAME = "databases"
ACCOUNT_DATABASE = "Account"  # ToolTalk's ACCOUNT_DB_NAME: every API that requires auth reads it
TOOL_GUIDE = (
    "Award the pre-registered points: one for each reference call made successfully with the right tool, "
    "one for each of its arguments equal to the reference value, one when the number of successful calls "
    "to in-scope tools (every state-changing API and the lookups the reference makes) equals the number of "
    "reference calls, one when no forbidden tool was used. Calls that failed changed nothing and earn nothing."
)
# ToolTalk's OpenAIPredictor.system_prompt, with the session-token line it adds by default.
SYSTEM_TEXT = (
    "You are a helpful assistant. Here is some user data:\nlocation: {location}\ntimestamp: {timestamp}"
    "\nusername (if logged in): {username}\nsession_token (if logged in): {session_token}"
)


@dataclass(frozen=True)
class Api:
    """What judgekit needs of one ToolTalk API schema."""

    name: str
    is_action: bool
    databases: tuple[str, ...]


# --- finding and reading the inputs ------------------------------------------------------------


def _beside(folder: Path, name: str) -> Path:
    """``name`` in ``folder``, else in its parent; an error naming both places otherwise."""
    for place in (folder, folder.parent):
        if (place / name).exists():
            return place / name
    raise InputError(f"no {name} found in {folder} or {folder.parent}: ToolTalk conversations need it "
                     "beside them or one folder up (the published layout)", folder)


def _conversation_files(src: Path) -> tuple[Path, list[Path]]:
    if src.is_dir():
        files = sorted(p for p in src.glob("*.json") if p.name != SCHEMAS_NAME and p.is_file())
        if not files:
            raise InputError("no ToolTalk conversation (*.json) in this folder", src)
        return src, files
    if not src.is_file():
        raise InputError("file not found", src)
    return src.parent, [src]


def _load_schemas(path: Path) -> dict[str, Api]:
    data = read_json(path, expected="ToolTalk's api_schemas.json")
    if not isinstance(data, list):
        raise InputError("expected a JSON list of API schemas", path)
    apis: dict[str, Api] = {}
    for n, schema in enumerate(data):
        if not isinstance(schema, dict) or not isinstance(schema.get("name"), str) \
                or not isinstance(schema.get("is_action"), bool):
            raise InputError(f"schema {n}: expected an object with a string 'name' and a boolean 'is_action'", path)
        databases = [schema["database_name"]] if isinstance(schema.get("database_name"), str) else []
        if schema.get("requires_auth") and ACCOUNT_DATABASE not in databases:
            databases.append(ACCOUNT_DATABASE)
        apis[schema["name"]] = Api(schema["name"], schema["is_action"], tuple(sorted(databases)))
    return apis


def _database_files(folder: Path) -> list[Path]:
    if not folder.is_dir():
        raise InputError("expected a folder of ToolTalk databases (<Name>.json)", folder)
    files = sorted(p for p in folder.glob("*.json") if p.is_file())
    if not files:
        raise InputError("no ToolTalk database (<Name>.json) in this folder", folder)
    return files


# --- one conversation --------------------------------------------------------------------------


def _name(conversation: dict[str, Any], path: Path) -> str:
    for key in ("name", "conversation_id"):
        value = conversation.get(key)
        if isinstance(value, str) and value:
            return file_name(value, "conversation", lower=True)
    raise InputError("the conversation has neither a 'name' nor a 'conversation_id' to name it by", path)


def _load_conversation(path: Path) -> dict[str, Any]:
    data = read_json(path, expected="a ToolTalk conversation")
    if not isinstance(data, dict) or not isinstance(data.get("conversation"), list):
        raise InputError("expected a ToolTalk conversation: an object with a 'conversation' list of turns", path)
    for key in ("user", "metadata"):
        if not isinstance(data.get(key, {}), dict):
            raise InputError(f"'{key}' must be an object", path)
    return data


def _call(api: Any, where: str, path: Path, apis: dict[str, Api]) -> Call:
    request = api.get("request") if isinstance(api, dict) else None
    if not isinstance(request, dict) or not isinstance(request.get("api_name"), str) \
            or not isinstance(request.get("parameters"), dict):
        raise InputError(f"{where}: expected {{request: {{api_name, parameters: {{...}}}}, response, exception}}", path)
    if request["api_name"] not in apis:
        raise InputError(f"{where}: API {request['api_name']!r} is not in {SCHEMAS_NAME}, so whether it "
                         "changes state is unknown", path)
    exception = api.get("exception")
    if exception is not None and not isinstance(exception, str):
        raise InputError(f"{where}: 'exception' must be a string or null", path)
    return Call(tool=request["api_name"], args=request["parameters"], result=api.get("response"), error=exception)


def _system_text(metadata: dict[str, Any]) -> str:
    keys = ("location", "timestamp", "username", "session_token")
    return SYSTEM_TEXT.format(**{key: metadata.get(key) for key in keys})


def _turn(turn: Any, n: int, path: Path) -> tuple[str, str, list[Any]]:
    """(role, text, apis) of one turn, checked."""
    if not isinstance(turn, dict) or turn.get("role") not in ("user", "assistant"):
        raise InputError(f"turn {n}: expected an object with role 'user' or 'assistant'", path)
    text, apis = turn.get("text") or "", turn.get("apis") or []
    if not isinstance(text, str):
        raise InputError(f"turn {n}: 'text' must be a string", path)
    if not isinstance(apis, list):
        raise InputError(f"turn {n}: 'apis' must be a list", path)
    if apis and turn["role"] == "user":
        raise InputError(f"turn {n}: a user turn carries 'apis'; only assistant turns make calls", path)
    return turn["role"], text, apis


def _user_key(context: dict[str, str], index: Any, n: int) -> str:
    """``user-<index>`` (the turn's place ``n`` without one); ``-2``, ``-3``... added when taken."""
    key = base = f"user-{n if index is None else index}"
    copies = 1
    while key in context:  # published conversations repeat indexes (or have none): no turn may be lost
        copies += 1
        key = f"{base}-{copies}"
    return key


def _trajectory(conversation: dict[str, Any], name: str, path: Path, apis: dict[str, Api],
                databases: dict[str, str]) -> Trajectory:
    calls: list[Call] = []
    turns: list[UserTurn] = []
    context = {"system": _system_text(conversation.get("metadata") or {})}
    answers: list[str] = []
    prompt: str | None = None
    for n, raw in enumerate(conversation["conversation"]):
        role, text, made = _turn(raw, n, path)
        if role == "assistant":
            calls.extend(_call(api, f"turn {n}, api {k}", path, apis) for k, api in enumerate(made))
            answers += [text] if text else []
        elif prompt is None:
            prompt = text
        else:
            context[_user_key(context, raw.get("index"), n)] = text
            turns.append(UserTurn(text=text, before_call=len(calls)))
    used = sorted({db for call in calls for db in apis[call.tool].databases} & databases.keys())
    metadata = {
        **{key: conversation[key] for key in ("conversation_id", "name", "scenario", "user", "metadata",
                                              "suites_used", "apis_used") if key in conversation},
        "source": path.name,
        "databases": [databases[db] for db in used],
    }
    return Trajectory(id=f"tooltalk-{name}", prompt=prompt or "", calls=calls, output="\n\n".join(answers),
                      context=context, metadata=metadata, turns=turns)


def _rubric(trajectory: Trajectory, description: str, apis: dict[str, Api], registered: date) -> Rubric:
    expected = [call for call in trajectory.calls if call.succeeded]
    actions = {api.name for api in apis.values() if api.is_action}
    return Rubric.model_validate({
        "id": trajectory.id,
        "version": "1.0.0",
        "registered": registered,
        "description": description,
        "tool_correctness": {
            "guide": TOOL_GUIDE,
            "expected_calls": [
                {"tool": call.tool, "args": {key: {"const": value} for key, value in call.args.items()}}
                for call in expected
            ],
            "in_scope": sorted(actions | {call.tool for call in trajectory.calls}),
            "ordered": False,
        },
    })


def _convert(path: Path, apis: dict[str, Api], databases: dict[str, str],
             registered: date) -> tuple[Trajectory, Rubric]:
    conversation = _load_conversation(path)
    name = _name(conversation, path)
    try:
        trajectory = _trajectory(conversation, name, path, apis, databases)
        description = conversation.get("scenario")
        rubric = _rubric(trajectory, description if isinstance(description, str) else "", apis, registered)
    except ValidationError as exc:  # a value the trajectory or rubric model refuses (e.g. non-finite)
        raise InputError(describe_validation_error(exc), path) from None
    return trajectory, rubric


# --- the import --------------------------------------------------------------------------------


def import_tooltalk(src: Path, out: Path, *, registered: date | None = None) -> list[Path]:
    src = Path(src)
    folder, files = _conversation_files(src)
    apis = _load_schemas(_beside(folder, SCHEMAS_NAME))
    databases = _database_files(_beside(folder, DATABASES_NAME))
    registered = registered or DEFAULT_REGISTERED
    entries: list[dict[str, str]] = []
    seen: dict[str, Path] = {}
    names = Names()
    copies = {p.stem: f"{DATABASES_NAME}/{names.give(p.stem, 'database', p, owner=p.name)}.json" for p in databases}
    with ImportWriter(out) as writer:
        for database in databases:
            writer.json(copies[database.stem], read_json(database, expected="a ToolTalk database"))
        for path in files:  # one conversation in memory at a time
            trajectory, rubric = _convert(path, apis, copies, registered)
            if trajectory.id in seen:
                raise InputError(f"names the same conversation as {seen[trajectory.id]} ({trajectory.id})", path)
            seen[trajectory.id] = path
            file = f"trajectories/{trajectory.id.removeprefix('tooltalk-')}.jsonl"
            writer.lines(file).add(trajectory)
            writer.rubric(rubric)
            entries.append({"file": file, "rubric": rubric.ref})
        tools = {name: "write" if api.is_action else "read" for name, api in sorted(apis.items())}
        writer.suite(f"ToolTalk import of {src.name}", entries, safety={"tools": tools})
    return writer.written
