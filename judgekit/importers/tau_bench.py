"""``judgekit import tau-bench``: tau-bench's historical trajectory records.

Each record is one run: ``task_id``, ``trial``, ``reward`` (tau-bench's own outcome label,
kept in metadata, never used for scoring), ``info.task.actions`` (the ground-truth calls),
``info.task.outputs`` (values the answer must state) and ``traj`` (OpenAI-format messages).

Writes a suite that runs as is:
- ``OUT/trajectories/task-<id>.jsonl``: the runs of each task;
- ``OUT/rubrics/tau-bench-task-<id>.yaml``: one rubric per task, pre-registered in
  ``OUT/rubrics/rubrics.lock``. Tool correctness expects exactly the ground-truth *write*
  calls, each argument pinned to its ground-truth value; read-only tools are out of scope and
  do not count as extra calls. Task success requires the outputs in the agent's answers; a
  task with no outputs has no task-success axis (nothing here could check it: the database's
  end state is not in the records), rather than one that passes with no check.
- ``OUT/suite.yaml``.

Which tools write is decided by name (``WRITE_TOOL``: book/cancel/update/modify/send/...),
for every task alike. Tool results starting with ``Error:`` are failed calls (tau-bench's
convention): they changed nothing.
"""

from __future__ import annotations

import re
from collections import defaultdict
from datetime import date
from pathlib import Path
from typing import Any

import yaml

from judgekit import lock as locking
from judgekit._files import write_text_atomically
from judgekit._io import MAX_FILE_BYTES, read_json
from judgekit.errors import InputError
from judgekit.importers._messages import messages_to_trajectory
from judgekit.rubric import Rubric

WRITE_TOOL = re.compile(r"^(book|cancel|update|modify|send|create|delete|remove|add|exchange|return|transfer_funds|set)_")
TOOL_GUIDE = (
    "Award the pre-registered points: one for each ground-truth write call made with the right tool, "
    "one for each of its arguments equal to the ground-truth value, one when the number of successful "
    "write calls equals the number expected, one when no forbidden tool was used. Read-only lookups are "
    "not scored. Failed calls changed nothing and earn nothing."
)
TASK_GUIDE = (
    "Pass when every value the task requires appears in the agent's answers to the user. The database "
    "end state is not part of these records, so the state of the world is measured by the write calls "
    "on the tool-correctness axis."
)


def _load(src: Path) -> list[dict[str, Any]]:
    data = read_json(src, max_bytes=MAX_FILE_BYTES)
    if not isinstance(data, list):
        raise InputError("expected a JSON list of tau-bench run records", src, 1)
    return data


def _check_record(record: Any, src: Path, n: int) -> None:
    if not isinstance(record, dict):
        raise InputError(f"record {n} is not an object", src)
    for key in ("task_id", "trial", "reward", "info", "traj"):
        if key not in record:
            raise InputError(f"record {n} has no {key!r}", src)
    task = record["info"].get("task") if isinstance(record["info"], dict) else None
    if not isinstance(task, dict) or not isinstance(task.get("actions"), list):
        raise InputError(f"record {n}: info.task.actions is missing or not a list", src)


def rubric_for_task(task_id: Any, task: dict[str, Any], registered: date, write_tools: list[str]) -> Rubric:
    writes = [action for action in task["actions"] if WRITE_TOOL.match(action["name"])]
    outputs = [str(o) for o in task.get("outputs") or []]
    # Without outputs there is nothing task success could check here (the database's end state
    # is not in these records): the axis is left out, never passed with no check.
    task_success = {"task_success": {"guide": TASK_GUIDE, "required_outputs": outputs}} if outputs else {}
    return Rubric.model_validate(
        {
            "id": f"tau-bench-task-{task_id:03d}" if isinstance(task_id, int) else f"tau-bench-task-{task_id}",
            "version": "1.0.0",
            "registered": registered,
            "description": task.get("instruction", ""),
            **task_success,
            "tool_correctness": {
                "guide": TOOL_GUIDE,
                "expected_calls": [
                    {"tool": action["name"], "args": {k: {"const": v} for k, v in action["kwargs"].items()}}
                    for action in writes
                ],
                "in_scope": write_tools,
                "ordered": False,
            },
        }
    )


def import_tau_bench(src: Path, out: Path, registered: date | None = None) -> list[Path]:
    records = _load(src)
    registered = registered or date.today()
    by_task: dict[Any, list[tuple[int, dict[str, Any]]]] = defaultdict(list)
    for n, record in enumerate(records):
        _check_record(record, src, n)
        by_task[record["task_id"]].append((n, record))

    written: list[Path] = []
    write_tools: set[str] = set()
    for record in records:
        for message in record["traj"]:
            for call in message.get("tool_calls") or []:
                name = (call.get("function") or {}).get("name", "")
                if WRITE_TOOL.match(name):
                    write_tools.add(name)
        write_tools.update(a["name"] for a in record["info"]["task"]["actions"] if WRITE_TOOL.match(a["name"]))

    rubric_dir, traj_dir = out / "rubrics", out / "trajectories"
    entries = []
    for task_id in sorted(by_task, key=lambda t: (str(type(t)), t)):
        runs = by_task[task_id]
        rubric = rubric_for_task(task_id, runs[0][1]["info"]["task"], registered, sorted(write_tools))
        rubric_path = rubric_dir / f"{rubric.id}.yaml"
        write_text_atomically(rubric_path, rubric.to_yaml(), mask_secrets=False)
        lines = []
        for n, run in sorted(runs, key=lambda item: item[1]["trial"]):
            trajectory = messages_to_trajectory(
                run["traj"],
                trajectory_id=f"{rubric.id.removeprefix('tau-bench-')}-trial-{run['trial']}",
                prompt=run["info"]["task"].get("instruction"),
                metadata={"task_id": task_id, "trial": run["trial"], "reward": run["reward"], "source": src.name},
                output="all",
                is_error=lambda text: text.startswith("Error:"),
                where=(str(src), None, f"record {n} (task {task_id}, trial {run['trial']}): "),
            )
            lines.append(trajectory.model_dump_json(exclude_defaults=True))
        traj_path = traj_dir / f"{rubric.id.removeprefix('tau-bench-')}.jsonl"
        write_text_atomically(traj_path, "".join(line + "\n" for line in lines), mask_secrets=False)
        written += [rubric_path, traj_path]
        entries.append({"file": traj_path.relative_to(out).as_posix(), "rubric": rubric.ref})

    lock_path = rubric_dir / locking.LOCK_NAME
    lock_path.unlink(missing_ok=True)  # a fresh import pre-registers its own fresh rubrics
    _, problems = locking.lock([rubric_dir], lock_path)
    if problems:
        raise InputError("; ".join(map(str, problems)), lock_path)
    suite = {
        "name": f"tau-bench import of {src.name}",
        "rubrics": ["rubrics"],
        "lock": "rubrics/rubrics.lock",
        "trajectories": entries,
    }
    suite_path = out / "suite.yaml"
    write_text_atomically(suite_path, yaml.safe_dump(suite, sort_keys=False), mask_secrets=False)
    return [*written, lock_path, suite_path]
