"""``judgekit import tau-bench``: tau-bench's run records, scored on the tools' declared schemas.

Follows the run records of sierra-research/tau-bench at commit 59a200c6 (the list ``run.py``
writes, one object per run): ``task_id``, ``trial``, ``reward`` (tau-bench's own outcome label,
kept in metadata, never used for scoring), ``info.task.actions`` (the ground-truth calls,
``{name, kwargs}``), ``info.task.outputs`` (values the answer must state),
``info.task.instruction`` and ``traj`` (OpenAI-format messages). SRC is that JSON list (read
whole, as any JSON document is; each record is then converted and written before the next).

The domain's tool declarations, the list tau-bench gives the agent (``[{"type": "function",
"function": {"name", "parameters"}}]``), are read from ``airline_tools.json`` beside SRC, else
from the one ``*_tools.json`` there; without one the import stops, saying so. They decide which
tools write (below) and what each tool's arguments are; guessing either from the runs would
make one run's rubric depend on the other runs in the file.

Writes, through the import writer (all or nothing):

- ``OUT/trajectories/task-<id>.jsonl``: the runs of each task, in the order of SRC (``<id>``: the
  task id, an integer with at least three digits or a string, through the import writer's
  ``file_name`` in lower case; two task ids that would share a name are refused);
- ``OUT/rubrics/tau-bench-task-<id>.yaml``, pre-registered in ``OUT/rubrics/rubrics.lock``:
  tool correctness expects exactly the ground-truth *write* calls, in any order, each argument
  pinned to its ground-truth value (``{"const": V}``: JSON equality, so ``1786`` is ``1786.0``);
  ``in_scope``: every write tool the declarations name, so an extra write costs the call-count
  point and a lookup costs nothing; ``tools``: those write tools' declared parameters, so a
  matched call's keys that its tool does not declare are reported in the result (never
  scored), as are its unpinned arguments off their declared schema. Task success requires the
  outputs in the agent's answers; a task without outputs has no task-success axis (its end
  state is not in the records), rather than one that passes with no check;
- ``OUT/suite.yaml``.

A tool writes when its name says so (``WRITE_TOOL``: book/cancel/update/modify/send/...; the
declarations carry no such flag). Tool results starting with ``Error:`` are failed calls
(tau-bench's convention): they changed nothing. Rubrics are registered on ``--registered``,
else on 1970-01-01 (the records carry no date). Every run of a task must carry the same
``info.task`` (its rubric is written from the first), and a (task, trial) pair may appear once.

Lost: the database's end state, from which tau-bench computes ``reward`` (compare the two with
``benchmarks/tau_bench_agreement.py``); tool results other than ``Error:`` are kept as text or
JSON but never scored; ``info`` beyond the task, and ``reward_info``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from judgekit._util.io import MAX_FILE_BYTES, describe_validation_error, read_json, sha256_json
from judgekit.rubric.json_schema import check_declaration
from judgekit.errors import InputError
from judgekit.importers._messages import messages_to_trajectory
from judgekit.importers._writer import DEFAULT_REGISTERED, ImportWriter, Names
from judgekit.rubric.model import Rubric

WRITE_TOOL = re.compile(r"^(book|cancel|update|modify|send|create|delete|remove|add|exchange|return|transfer_funds|set)_")
TOOLS_FILE = "airline_tools.json"
TOOL_GUIDE = (
    "Award the pre-registered points: one for each ground-truth write call made with the right tool, "
    "one for each of its arguments equal to the ground-truth value, one when the number of successful "
    "write calls equals the number expected, one when no forbidden tool was used. Read-only lookups are "
    "not scored. Failed calls changed nothing and earn nothing. Keys a tool does not declare are "
    "reported, not scored."
)
TASK_GUIDE = (
    "Pass when every value the task requires appears in the agent's answers to the user. The database "
    "end state is not part of these records, so the state of the world is measured by the write calls "
    "on the tool-correctness axis."
)


# --- the tools file --------------------------------------------------------------------------------


def find_tools_file(src: Path) -> Path:
    """``airline_tools.json`` beside SRC, else the one ``*_tools.json`` there."""
    folder = src.parent
    if (folder / TOOLS_FILE).is_file():
        return folder / TOOLS_FILE
    found = sorted(path for path in folder.glob("*_tools.json") if path.is_file())
    if len(found) == 1:
        return found[0]
    why = "none is there" if not found else f"several are there ({', '.join(p.name for p in found)})"
    raise InputError(
        f"needs the domain's tool declarations beside it ({TOOLS_FILE}, or one *_tools.json: the list of "
        f"{{type: function, function: {{name, parameters}}}} tau-bench gives the agent), but {why}", src
    )


def read_tools(path: Path) -> tuple[set[str], dict[str, dict[str, Any]]]:
    """(every declared tool, write tool -> its declared parameters as a JSON Schema)."""
    data = read_json(path, expected="tau-bench tool declarations")
    if not isinstance(data, list):
        raise InputError("expected a JSON list of tool declarations", path)
    names: set[str] = set()
    tools: dict[str, dict[str, Any]] = {}
    for n, item in enumerate(data):
        function = item.get("function") if isinstance(item, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise InputError(f"declaration {n} has no function.name", path)
        parameters = function.get("parameters", {"type": "object", "properties": {}})
        if not isinstance(parameters, dict):
            raise InputError(f"declaration {n} ({function['name']}): parameters must be a JSON Schema object", path)
        if function["name"] in names:
            raise InputError(f"declaration {n}: {function['name']} is declared twice", path)
        names.add(function["name"])
        if WRITE_TOOL.match(function["name"]):
            problem = check_declaration(parameters)  # as the rubric will: refused here, naming this file
            if problem is not None:
                raise InputError(f"declaration {n} ({function['name']}): {problem}", path)
            tools[function["name"]] = parameters
    return names, tools


# --- the records -----------------------------------------------------------------------------------


def _records(src: Path) -> Iterator[tuple[int, Any]]:
    """(record number from 0, record). tau-bench writes one JSON list, which is read whole (as
    any JSON document is); each record is then converted and written before the next."""
    data = read_json(src, max_bytes=MAX_FILE_BYTES)
    if not isinstance(data, list):
        raise InputError("expected a JSON list of tau-bench run records", src, 1)
    yield from enumerate(data)


def _check_record(record: Any, src: Path, n: int, declared: set[str]) -> None:
    if not isinstance(record, dict):
        raise InputError(f"record {n} is not an object", src)
    for key in ("task_id", "trial", "reward", "info", "traj"):
        if key not in record:
            raise InputError(f"record {n} has no {key!r}", src)
    if isinstance(record["task_id"], bool) or not isinstance(record["task_id"], (int, str)):
        raise InputError(f"record {n}: task_id must be an integer or a string", src)
    task = record["info"].get("task") if isinstance(record["info"], dict) else None
    if not isinstance(task, dict) or not isinstance(task.get("actions"), list):
        raise InputError(f"record {n}: info.task.actions is missing or not a list", src)
    for action in task["actions"]:
        if not isinstance(action, dict) or not isinstance(action.get("name"), str) or not isinstance(
                action.get("kwargs", {}), dict):
            raise InputError(f"record {n}: each of info.task.actions must be {{name, kwargs}}", src)
        if action["name"] not in declared:
            raise InputError(f"record {n}: the ground truth calls {action['name']}, which the tool declarations "
                             "do not declare: are they this domain's?", src)


def _task_label(task_id: int | str, names: Names, src: Path) -> str:
    """``task-<id>``: the name of the task's trajectories file, and of its rubric after ``tau-bench-``."""
    text = f"{task_id:03d}" if isinstance(task_id, int) else task_id
    return "task-" + names.give(text, "id", src, owner=f"task {task_id!r}", lower=True)


def rubric_for_task(name: str, task: dict[str, Any], registered: date, tools: dict[str, dict[str, Any]]) -> Rubric:
    """The rubric of one task (``name``: ``_task_label``'s); ``tools``: the write tools'
    declared parameters."""
    writes = [action for action in task["actions"] if action["name"] in tools]
    outputs = [str(o) for o in task.get("outputs") or []]
    # Without outputs there is nothing task success could check here (the database's end state
    # is not in these records): the axis is left out, never passed with no check.
    task_success = {"task_success": {"guide": TASK_GUIDE, "required_outputs": outputs}} if outputs else {}
    return Rubric.model_validate(
        {
            "id": f"tau-bench-{name}",
            "version": "1.0.0",
            "registered": registered,
            "description": task.get("instruction", ""),
            **task_success,
            "tool_correctness": {
                "guide": TOOL_GUIDE,
                "expected_calls": [
                    {"tool": action["name"], "args": {k: {"const": v} for k, v in action.get("kwargs", {}).items()}}
                    for action in writes
                ],
                "in_scope": sorted(tools),
                "ordered": False,
                "tools": dict(sorted(tools.items())),
            },
        }
    )


# --- the import ------------------------------------------------------------------------------------


def import_tau_bench(src: Path, out: Path, *, registered: date | None = None) -> list[Path]:
    declared, tools = read_tools(find_tools_file(src))
    registered = registered or DEFAULT_REGISTERED
    # task id -> (fingerprint of info.task, first record, rubric ref, its name: _task_label)
    tasks: dict[Any, tuple[str, int, str, str]] = {}
    trials: set[tuple[str, str]] = set()
    names = Names()
    with ImportWriter(out) as writer:
        for n, record in _records(src):
            _check_record(record, src, n, declared)
            task_id, task = record["task_id"], record["info"]["task"]
            label = f"record {n} (task {task_id}, trial {record['trial']}): "
            fingerprint = sha256_json(task)
            if task_id not in tasks:
                name = _task_label(task_id, names, src)
                try:
                    rubric = rubric_for_task(name, task, registered, tools)
                except ValidationError as exc:  # an instruction that is not text, an output list that is not one
                    raise InputError(f"{label}its info.task makes no valid rubric: {describe_validation_error(exc)}",
                                     src) from None
                writer.rubric(rubric)
                tasks[task_id] = (fingerprint, n, rubric.ref, name)
            elif tasks[task_id][0] != fingerprint:
                raise InputError(f"{label}its info.task differs from record {tasks[task_id][1]}'s, which the "
                                 "task's rubric was written from: every run of a task must have the same task", src)
            trial = (repr(task_id), repr(record["trial"]))
            if trial in trials:
                raise InputError(f"{label}this task and trial were already imported", src)
            trials.add(trial)
            trajectory = messages_to_trajectory(
                record["traj"],
                trajectory_id=f"{tasks[task_id][3]}-trial-{record['trial']}",
                prompt=task.get("instruction"),
                metadata={"task_id": task_id, "trial": record["trial"], "reward": record["reward"], "source": src.name},
                output="all",
                is_error=lambda text: text.startswith("Error:"),
                where=(str(src), None, label),
            )
            writer.lines(f"trajectories/{tasks[task_id][3]}.jsonl").add(trajectory)
        entries = [
            {"file": f"trajectories/{tasks[task_id][3]}.jsonl", "rubric": tasks[task_id][2]}
            for task_id in sorted(tasks, key=lambda t: (str(type(t)), t))
        ]
        if not entries:
            raise InputError("holds no run record", src)
        writer.suite(f"tau-bench import of {src.name}", entries)
    return writer.written
