"""LLMBar (princeton-nlp/LLMBar) pairwise data as judgekit labels and verdicts.

A subset folder holds ``dataset.json`` (a list of ``{input, output_1, output_2, label}``, label
1 or 2 being the human choice) and ``evaluators/<model>/<prompt>/result.json``, the same list
with ``results``: its last element has ``"swap = False"`` and ``"swap = True"`` entries whose
``winner`` ("1", "2", or null when LLMBar's parser found no answer) is already mapped back to
the original output numbering by LLMBar's own script.

Conversion:

- item n (1-based, in file order) gets the trajectory id ``llmbar-<subset>-<nnnn>``, the subset
  being the folder name in lower case (``prefix`` overrides ``llmbar-<subset>``);
- axis ``task_success``: LLMBar's question "which output follows the instruction?" is the
  task-success question asked pairwise; the items are ``item_kind: "pairwise"``;
- output_1 is answer ``A``, output_2 is answer ``B`` (the original order);
- ``labels.jsonl``: one label per item, labeler ``llmbar-human`` (``labeler_kind: person``:
  LLMBar's labels are its authors'), no ``labeled_at`` (the dataset
  has no per-label time; ``labeled_at=`` sets one for every label if the caller knows it);
- ``verdicts-<model>-<prompt>.jsonl`` per evaluator, judge ``<model>/<prompt>``: two verdicts per
  item, order ``original`` (swap = False) and ``swapped`` (swap = True), each naming the chosen
  answer by its original label; a null winner becomes an unscored verdict (reason
  ``parse_failure``). The file name goes through the import writer's ``file_name``; two
  evaluators that would share one are refused.

A folder without any ``evaluators/<model>/<prompt>/result.json`` is refused (``InputError``,
exit 2 from the CLI) and nothing is written: labels alone would measure no judge, and an
import that "succeeds" with them hides a wrong path (the subset's parent, or a copy without its
evaluators). Every input is read and checked before the first file is written, so a bad
result file leaves no half-written import behind.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Any

from judgekit._util.io import MAX_FILE_BYTES, read_json
from judgekit.calibration.labels import Label
from judgekit.calibration.verdicts import JudgeVerdictRecord
from judgekit.errors import InputError
from judgekit.importers._writer import ImportWriter, Names

LABELER = "llmbar-human"
AXIS = "task_success"
_CHOICE = {"1": "A", "2": "B"}
_SWAP_KEYS = (("original", "swap = False"), ("swapped", "swap = True"))

NEXT_STEP = ("next: measure each judge against the human labels: judgekit agreement --labels {out}/labels.jsonl "
             "--verdicts {out}/verdicts-<judge>.jsonl")
"""What ``judgekit import llmbar`` says to do with the files it wrote."""


def _load_list(path: Path) -> list[dict[str, Any]]:
    data = read_json(path, max_bytes=MAX_FILE_BYTES)
    if not isinstance(data, list) or not all(isinstance(x, dict) for x in data):
        raise InputError("expected a JSON list of objects (LLMBar format)", path)
    return data


def _item_ids(prefix: str, n: int) -> list[str]:
    width = max(4, len(str(n)))
    return [f"{prefix}-{i:0{width}d}" for i in range(1, n + 1)]


def _labels(dataset: list[dict[str, Any]], ids: list[str], path: Path, labeled_at: datetime | None) -> list[Label]:
    labels = []
    for i, (item, tid) in enumerate(zip(dataset, ids, strict=True)):
        choice = _CHOICE.get(str(item.get("label")))
        if choice is None:
            raise InputError(f"item {i}: label is {item.get('label')!r}, expected 1 or 2", path)
        labels.append(
            Label(
                trajectory_id=tid, axis=AXIS, label=choice, labeler=LABELER, labeler_kind="person", labeled_at=labeled_at,
                item_kind="pairwise",
            )
        )
    return labels


def _verdicts(
    dataset: list[dict[str, Any]], results: list[dict[str, Any]], ids: list[str], judge: str, path: Path
) -> list[JudgeVerdictRecord]:
    if len(results) != len(dataset):
        raise InputError(f"{len(results)} results for {len(dataset)} dataset items", path)
    verdicts = []
    for i, (item, res, tid) in enumerate(zip(dataset, results, ids, strict=True)):
        if any(res.get(k) != item.get(k) for k in ("input", "output_1", "output_2", "label")):
            raise InputError(f"item {i} differs from dataset.json item {i}; results follow the dataset order", path)
        runs = res.get("results")
        last = runs[-1] if isinstance(runs, list) and runs else None
        if not isinstance(last, dict) or any(key not in last for _, key in _SWAP_KEYS):
            raise InputError(f'item {i}: results[-1] lacks "swap = False"/"swap = True"', path)
        for order, key in _SWAP_KEYS:
            winner = last[key].get("winner") if isinstance(last[key], dict) else None
            common = {"trajectory_id": tid, "axis": AXIS, "judge": judge, "order": order}
            if winner is None:
                rec = JudgeVerdictRecord(**common, unscored_reason="parse_failure")
            elif str(winner) in _CHOICE:
                rec = JudgeVerdictRecord(**common, verdict=_CHOICE[str(winner)])
            else:
                raise InputError(f"item {i} ({key}): winner is {winner!r}, expected \"1\", \"2\" or null", path)
            verdicts.append(rec)
    return verdicts


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "subset"


def import_llmbar(
    src_dir: str | Path, out_dir: str | Path, *, prefix: str | None = None, labeled_at: datetime | None = None
) -> list[Path]:
    """Convert one LLMBar subset folder; returns the labels file then the verdicts files (sorted)."""
    src_dir, out_dir = Path(src_dir), Path(out_dir)
    dataset_path = src_dir / "dataset.json"
    dataset = _load_list(dataset_path)
    ids = _item_ids(prefix or f"llmbar-{_slug(src_dir.name)}", len(dataset))
    labels = _labels(dataset, ids, dataset_path, labeled_at)
    result_paths = sorted(src_dir.glob("evaluators/*/*/result.json"))
    if not result_paths:
        found = ("has no evaluators/ folder" if not (src_dir / "evaluators").is_dir()
                 else "has an evaluators/ folder without any <model>/<prompt>/result.json")
        raise InputError(f"{found}: an LLMBar subset keeps its judges' verdicts there, and labels alone measure no "
                         "judge; point at a subset folder that has them (such as Natural/, with its "
                         "evaluators/); nothing written", src_dir)
    converted = []
    names = Names()
    for result_path in result_paths:
        model, prompt = result_path.parent.parent.name, result_path.parent.name
        verdicts = _verdicts(dataset, _load_list(result_path), ids, f"{model}/{prompt}", result_path)
        name = names.give(f"verdicts-{model}-{prompt}", "verdicts", result_path, owner=f"judge {model}/{prompt}")
        converted.append((f"{name}.jsonl", verdicts))
    with ImportWriter(out_dir) as writer:
        for name, records in [("labels.jsonl", labels), *converted]:
            writer.text(name, "".join(record.model_dump_json(exclude_none=True) + "\n" for record in records))
    return writer.written
