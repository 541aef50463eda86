"""JSON Schemas of every file format, generated from the pydantic models: the one registry.

A name is here when judgekit reads or writes that JSON (a file, a JSON Lines record, or JSON
printed for other tools, such as ``judgekit agreement --json``); ``judgekit schema NAME`` prints it.

The committed copies under ``schemas/`` at the repository root (for editors: a rubric may
start with ``$schema: ../schemas/rubric.schema.json``) are checked against these by the test
suite; ``python -m judgekit.schemas DIR`` rewrites them.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

# name -> "module:Model"; import is deferred so the CLI starts fast. Not here: models that are only
# printed as text (the gate report and its corrected pass rate).
_MODELS = {
    "trajectory": "judgekit.trajectory:Trajectory",
    "rubric": "judgekit.rubric.model:Rubric",
    "suite": "judgekit.suite.model:Suite",
    "diff": "judgekit.world.diff:Diff",
    "result": "judgekit.results:TrajectoryResult",
    "run": "judgekit.run.record:RunLine",
    "lock": "judgekit.rubric.lock:LockFile",
    "labels": "judgekit.calibration.labels:Label",
    "verdicts": "judgekit.calibration.verdicts:JudgeVerdictRecord",
    "approval": "judgekit.calibration.approval_record:ApprovalRecord",
    # `agreement --json` prints one; `calibrate --out` writes {rubric id@version: one}.
    "agreement-report": "judgekit.calibration.agreement:AgreementReport",
    "judge-verdict": "judgekit.verdict:JudgeVerdict",
    # `compare --json` prints one.
    "comparison": "judgekit.ci.compare:Comparison",
    # `safety --out` writes one.
    "safety-report": "judgekit.safety.scan:SafetyReport",
    # safety/risks/*.yaml: one residual-risk record (a waiver) per file.
    "residual-risk": "judgekit.safety.risks:RiskRecord",
    # <cache>/batches/<batch id>.json: one provider batch (`judgekit batch`).
    "batch-record": "judgekit.run.batch_record:BatchRecord",
}
SCHEMA_NAMES = tuple(_MODELS)


def schema_for(name: str) -> dict[str, Any]:
    module, _, attr = _MODELS[name].partition(":")
    model = getattr(import_module(module), attr)
    schema = model.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema.setdefault("title", attr)
    if name in ("rubric", "residual-risk"):
        # YAML rubric and residual-risk files may name their schema for editor completion.
        schema.setdefault("properties", {})["$schema"] = {"type": "string", "description": "Editor hint; ignored."}
    return schema


def write_all(folder: str) -> list[str]:
    """Write ``<name>.schema.json`` for every format into ``folder``."""
    import json
    from pathlib import Path

    from judgekit._util.files import write_text_atomically

    written = []
    for name in SCHEMA_NAMES:
        path = Path(folder) / f"{name}.schema.json"
        write_text_atomically(path, json.dumps(schema_for(name), indent=2, sort_keys=True) + "\n")
        written.append(str(path))
    return written


if __name__ == "__main__":
    import sys

    print("\n".join(write_all(sys.argv[1] if len(sys.argv) > 1 else "schemas")))
