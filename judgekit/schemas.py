"""JSON Schemas of every file format, generated from the pydantic models.

The committed copies under ``schemas/`` at the repository root (for editors: a rubric may
start with ``$schema: ../schemas/rubric.schema.json``) are checked against these by the test
suite; ``python -m judgekit.schemas DIR`` rewrites them.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

# name -> "module:Model"; import is deferred so the CLI starts fast.
_MODELS = {
    "trajectory": "judgekit.trajectory:Trajectory",
    "rubric": "judgekit.rubric:Rubric",
    "suite": "judgekit.suite:Suite",
    "diff": "judgekit.diff:Diff",
    "result": "judgekit.results:TrajectoryResult",
    "run": "judgekit.runner:RunRecord",
    "lock": "judgekit.lock:LockFile",
    "labels": "judgekit.calibration.labels:Label",
    "verdicts": "judgekit.calibration.verdicts:JudgeVerdictRecord",
    "approval": "judgekit.calibration.approval:ApprovalRecord",
    "judge-verdict": "judgekit.verdict:JudgeVerdict",
}
SCHEMA_NAMES = tuple(_MODELS)


def schema_for(name: str) -> dict[str, Any]:
    module, _, attr = _MODELS[name].partition(":")
    model = getattr(import_module(module), attr)
    schema = model.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema.setdefault("title", attr)
    if name == "rubric":
        # YAML rubric files may name their schema for editor completion.
        schema.setdefault("properties", {})["$schema"] = {"type": "string", "description": "Editor hint; ignored."}
    return schema


def write_all(folder: str) -> list[str]:
    """Write ``<name>.schema.json`` for every format into ``folder``."""
    import json
    from pathlib import Path

    from judgekit._files import write_text_atomically

    written = []
    for name in SCHEMA_NAMES:
        path = Path(folder) / f"{name}.schema.json"
        write_text_atomically(path, json.dumps(schema_for(name), indent=2, sort_keys=True) + "\n")
        written.append(str(path))
    return written


if __name__ == "__main__":
    import sys

    print("\n".join(write_all(sys.argv[1] if len(sys.argv) > 1 else "schemas")))
