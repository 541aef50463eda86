"""``judgekit import bfcl``: Berkeley Function Calling Leaderboard questions, one rubric each.

Follows BFCL v4's single-turn Python data as ShishirPatil/gorilla's
berkeley-function-call-leaderboard ships it (commit 6ea57973), and its AST checker
(``bfcl_eval/eval_checker/ast_eval/ast_checker.py``) for what an answer must be.

SRC is one question file, ``BFCL_v<N>_<category>.json``, or a folder of them (the files directly
in it; a category this importer does not read is skipped and listed in ``OUT/bfcl-import.json``).
Categories read: simple_python (and v3's simple), multiple, parallel, parallel_multiple,
irrelevance and their live_ counterparts. A question file is JSON Lines despite its name:
``{id, question: [[messages]], function: [{name, description, parameters}]}``; its answers are
``possible_answer/<same name>`` beside it, ``{id, ground_truth: [{function: {argument:
[acceptable values]}}]}`` ("" among the values: the argument may be left out). An irrelevance
category has no answers: the right answer is no call.

Writes, per question, ``OUT/rubrics/bfcl-<id>.json`` (pre-registered in ``rubrics.lock``) and
``OUT/trajectories/bfcl-<id>.jsonl``, then ``OUT/suite.yaml`` and ``OUT/bfcl-import.json``
(categories, counts, what was skipped, and the unanswerable questions: id -> its arguments
whose ground truth lists no acceptable value, ``[]``). Rubrics are registered on ``--registered``, else on
1970-01-01 (the data carries no date). The rubric, tool correctness only:

- ``expected_calls``: one per ground-truth call, in any order (``ordered: false``; BFCL pairs
  parallel calls in any order too), every argument of it in ``values``: ``any_of`` its
  acceptable values, ``optional`` when "" is among them, and, when a value holds a string,
  ``normalize: [casefold, remove_punctuation, remove_whitespace]``. "" alone, for an argument
  declared neither string nor any, is BFCL's "leave it out" (its type check refuses a present
  ""): ``optional``, with the schema ``false`` in ``args``, so any value given loses the point.
  A dict argument's acceptable values (BFCL lists alternatives per key) are expanded into the
  whole dicts they allow, as is each dict of a list of dicts; at most MAX_EXPANSION per argument;
- ``tools``: each function of the question, ``parameters`` mapped to JSON Schema ("dict" ->
  object, "float" -> number, "tuple" -> array, "any" -> no type; BFCL's own ``optional`` key
  dropped; the rest kept). So an argument is also checked against its declared type, and keys a
  function does not declare are reported, not scored;
- irrelevance: no expected call, so any call loses the call-count point;
- an argument whose ground truth lists no acceptable value (``[]``, or only dict alternatives
  that list none for a key): BFCL's checker fails every answer to that question, so the
  argument is required with the schema ``false`` and no ``values``: missing or given, it loses
  its point. The question has no reference trajectory (there is no right answer to build) and
  is listed under ``unanswerable`` in ``bfcl-import.json``; the rest of the file imports.

Trajectories, in the question's file: ``<id>-reference``, built from the ground truth (the first
acceptable value of each argument, left out when that is ""; metadata ``kind: reference``), so
the suite runs as is and scores itself 1.0 (an unanswerable question has none); and, for each
model with a BFCL result file, found
as ``result/<model>/**/BFCL_v<N>_<category>_result.json`` in SRC's folder (JSON Lines ``{id,
result, latency?}``), ``<id>-<model>`` (metadata ``kind: model``). ``result`` is read as BFCL's
handlers decode it: a list of ``{function: arguments}`` (an object, or its JSON text as
function-calling models give it), or Python call syntax ``[f(a=1), g(b='x')]`` as prompting
models write it, parsed with Python's ``ast`` (nothing run: literals, and arithmetic on numbers
such as ``5/100`` worked out within bounds, as BFCL's decoder evaluates it; any other argument
becomes its source text, as BFCL's decoder keeps a variable). Text that is no call list is the
output, with no call (``metadata.decode_error`` says why): for irrelevance, the right answer. A
called name that is a declared one with "." written "_" (function-calling APIs refuse dots) is
read as the declared name, recorded in ``metadata.renamed``. A model folder may not be named
``reference`` (its runs would take the reference runs' ids).

Where judgekit differs from BFCL's checker: every point is scored, not one pass/fail per
question; an undeclared argument is reported, not a failure; strings lose every Unicode
punctuation character and all whitespace (BFCL removes only `` ,./-_*^`` and makes ' into "),
and symbols such as ``^`` stay; integer arguments accept 5.0 (JSON Schema's integer) where
BFCL's Python type check does not, and arrays of floats accept ints (BFCL converts only a
top-level int); an enum in a declaration is enforced (BFCL never checks
one) except for a value the ground truth pins exactly; a present empty string is acceptable
only where "" is the only listed value and the argument is text; a required argument whose
values list "" may be left out (BFCL requires it whatever its answer says); lists compare in
order, as BFCL's do. Lost: BFCL's error types, and the model results' token counts and
inference logs.
"""

from __future__ import annotations

import ast
import itertools
import json
import math
import operator
import re
from collections.abc import Iterator
from contextlib import ExitStack
from datetime import date
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from judgekit._util.io import (
    MAX_LINE_BYTES,
    describe_validation_error,
    iter_json_lines,
    open_regular_file,
)
from judgekit._util.strict_json import has_lone_surrogate, strict_json_loads
from judgekit.errors import InputError
from judgekit.importers._messages import messages_to_trajectory
from judgekit.importers._writer import DEFAULT_REGISTERED, ImportWriter, file_name
from judgekit.rubric.model import Rubric
from judgekit.trajectory import Call, Trajectory

QUESTION_FILE = re.compile(r"^BFCL_v(\d+)_(.+)\.json$")
CATEGORIES = ("simple", "simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance")
SUPPORTED = {*CATEGORIES, *(f"live_{c}" for c in CATEGORIES if c not in ("simple_python",))}
NORMALIZE = ["casefold", "remove_punctuation", "remove_whitespace"]
MAX_EXPANSION = 1000
"""Most whole values one argument's acceptable values may expand into."""
TYPES = {"string": "string", "integer": "integer", "float": "number", "number": "number", "boolean": "boolean",
         "array": "array", "tuple": "array", "dict": "object", "object": "object", "any": None}
TOOL_GUIDE = (
    "Award the pre-registered points: one for each ground-truth call made with the right function, one "
    "for each of its arguments given an acceptable value (strings compared case-folded, without "
    "punctuation or whitespace; an optional argument may be left out), one when the number of calls "
    "equals the number expected, one when no forbidden tool was used. Calls may come in any order. Keys "
    "a function does not declare are reported, not scored."
)
NO_CALL_GUIDE = (
    "None of the functions fits the question: the right answer is no call. Award one point when no call "
    "was made and one when no forbidden tool was used."
)


# --- where things are ------------------------------------------------------------------------------


def _sources(src: Path) -> tuple[list[tuple[str, Path]], dict[str, str]]:
    """([(category, question file)], {skipped file: why})."""
    if not src.is_dir():
        match = QUESTION_FILE.match(src.name)
        if match is None or match.group(2) not in SUPPORTED:
            raise InputError(f"expected a BFCL question file BFCL_v<N>_<category>.json of a category read here "
                             f"({', '.join(sorted(SUPPORTED))}), or a folder of them", src)
        return [(match.group(2), src)], {}
    found, skipped = [], {}
    for path in sorted(src.iterdir()):
        match = QUESTION_FILE.match(path.name)
        if match is None or not path.is_file():
            continue
        if match.group(2) in SUPPORTED:
            found.append((match.group(2), path))
        else:
            skipped[path.name] = "not a single-turn Python category (its answers are not {function: {argument: values}})"
    if not found:
        raise InputError("holds no BFCL question file (BFCL_v<N>_<category>.json) of a category read here", src)
    return found, skipped


class _LineIndex:
    """A JSON Lines file's records by id, read back one at a time: a file whose records come
    in any order is joined without holding it in memory (only ids and offsets are kept). Open
    until ``close()``."""

    def __init__(self, path: Path, what: str):
        self.path, self.what = path, what
        self.offsets: dict[str, tuple[int, int]] = {}
        self.used: set[str] = set()
        self._handle = open_regular_file(path, expected=what)
        line = 0
        while True:
            offset = self._handle.tell()
            raw = self._handle.readline(MAX_LINE_BYTES + 1)
            if not raw:
                break
            line += 1
            if raw.strip():
                record_id = self._parse(raw, line)["id"]
                if record_id in self.offsets:
                    raise InputError(f"id {record_id!r} again (first on line {self.offsets[record_id][1]})", path, line)
                self.offsets[record_id] = (offset, line)

    def close(self) -> None:
        self._handle.close()

    def _parse(self, raw: bytes, line: int) -> dict[str, Any]:
        try:
            record = strict_json_loads(raw)
        except ValueError as exc:
            raise InputError(f"invalid JSON: {exc}", self.path, line) from None
        if not isinstance(record, dict) or not isinstance(record.get("id"), str):
            raise InputError(f"expected an object with a string id ({self.what})", self.path, line)
        return record

    def get(self, record_id: str) -> tuple[int, dict[str, Any]] | None:
        """(line, record) for ``record_id``, or None."""
        if record_id not in self.offsets:
            return None
        self.used.add(record_id)
        offset, line = self.offsets[record_id]
        self._handle.seek(offset)
        return line, self._parse(self._handle.readline(MAX_LINE_BYTES + 1), line)

    def check_all_used(self, src: Path) -> None:
        unused = sorted(set(self.offsets) - self.used)
        if unused:
            raise InputError(f"holds {len(unused)} record(s) for questions {src.name} does not hold (first: "
                             f"{unused[0]!r}): is it for another version of the data?", self.path)


def _model_results(folder: Path, question_file: Path, opened: ExitStack) -> list[tuple[str, _LineIndex]]:
    """(model, its results) for every ``result/<model>/**/<question stem>_result.json``."""
    root = folder / "result"
    if not root.is_dir():
        return []
    name = f"{question_file.stem}_result.json"
    models = []
    for model_dir in sorted(path for path in root.iterdir() if path.is_dir()):
        files = sorted(model_dir.rglob(name))
        if files and model_dir.name == "reference":  # its runs would take the ids of the reference runs
            raise InputError("a model folder may not be named 'reference': rename it", model_dir)
        if len(files) > 1:
            raise InputError(f"{len(files)} files named {name} for model {model_dir.name}: keep one", model_dir)
        if files:
            index = _LineIndex(files[0], f"a BFCL result file of {model_dir.name}")
            opened.callback(index.close)
            models.append((model_dir.name, index))
    return models


# --- declarations ----------------------------------------------------------------------------------


def json_schema(node: Any, where: str) -> dict[str, Any]:
    """A BFCL parameter declaration as JSON Schema (the mapping in the module docstring)."""
    if not isinstance(node, dict):
        raise ValueError(f"{where}: a declaration is an object, not {json.dumps(node)[:40]}")
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "type":
            if not isinstance(value, str) or value not in TYPES:
                raise ValueError(f"{where}: type {json.dumps(value)[:40]} is none of {', '.join(TYPES)}")
            if TYPES[value] is not None:
                out["type"] = TYPES[value]
        elif key == "properties" and isinstance(value, dict):
            out[key] = {name: json_schema(item, f"{where}.{name}") for name, item in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = json_schema(value, f"{where}.{key}")
        elif key != "optional":  # BFCL's own flag, which `required` already says
            out[key] = value
    return out


# --- ground truth ----------------------------------------------------------------------------------


def _dict_variants(alternatives: Any, where: str) -> list[dict[str, Any]]:
    """Every dict a BFCL dict answer ({key: [acceptable values]}) allows; "" leaves the key out."""
    if not isinstance(alternatives, dict) or not all(isinstance(v, list) for v in alternatives.values()):
        return [alternatives]
    _ABSENT = object()
    if empty := [key for key, values in alternatives.items() if not values]:
        raise _Unanswerable(f"{where}.{empty[0]}")
    choices = [[(key, _ABSENT if value == "" else value) for value in values] for key, values in alternatives.items()]
    if math.prod(len(c) for c in choices) > MAX_EXPANSION:
        raise ValueError(f"{where}: its acceptable values expand into more than {MAX_EXPANSION} values")
    return [{key: value for key, value in combo if value is not _ABSENT} for combo in itertools.product(*choices)]


def _variants(value: Any, declared: dict[str, Any], where: str) -> list[Any]:
    """The whole values one acceptable value stands for (BFCL nests alternatives in dicts)."""
    kind = declared.get("type")
    if kind in ("dict", "object") and isinstance(value, dict):
        return _dict_variants(value, where)
    items = declared.get("items") if isinstance(declared.get("items"), dict) else {}
    if kind in ("array", "tuple") and items.get("type") in ("dict", "object") and isinstance(value, list) \
            and all(isinstance(item, dict) for item in value):
        per_item = [_dict_variants(item, where) for item in value]
        if math.prod(len(v) for v in per_item) > MAX_EXPANSION:
            raise ValueError(f"{where}: its acceptable values expand into more than {MAX_EXPANSION} values")
        return [list(combo) for combo in itertools.product(*per_item)]
    return [value]


def _holds_text(value: Any) -> bool:
    if isinstance(value, str):
        return True
    if isinstance(value, list):
        return any(map(_holds_text, value))
    return isinstance(value, dict) and any(map(_holds_text, value.values()))


def _expectation(values: Any, declared: dict[str, Any], where: str) -> tuple[dict[str, Any] | None, Any]:
    """(the argument's ``values`` entry, its reference value or _LEFT_OUT). "" alone is BFCL's
    "leave it out": for text BFCL takes a present "" too, for another type its type check
    refuses it; there the entry is None: no value may be given. A dict alternative that lists
    no value for a key allows nothing and is dropped; with nothing left and no "", the argument
    has no acceptable value (``_Unanswerable``)."""
    if not isinstance(values, list):
        raise ValueError(f"{where}: expected a non-empty list of acceptable values")
    acceptable: list[Any] = []
    for value in values:
        if value == "":
            continue
        try:
            variants = _variants(value, declared, where)
        except _Unanswerable:
            continue
        for variant in variants:
            if variant not in acceptable:
                acceptable.append(variant)
    if not acceptable and "" not in values:
        raise _Unanswerable(where)
    if not acceptable and declared.get("type") not in (None, "string", "any"):
        return None, _LEFT_OUT
    spec: dict[str, Any] = {"any_of": acceptable or [""]}
    if "" in values:
        spec["optional"] = True
    if _holds_text(spec["any_of"]):
        spec["normalize"] = NORMALIZE
    reference = _LEFT_OUT if values[0] == "" or not acceptable else acceptable[0]
    return spec, reference


_LEFT_OUT = object()


class _Unanswerable(ValueError):
    """An argument whose ground truth lists no acceptable value (``[]``): BFCL's checker fails
    every answer to its question, given or left out."""


def _answer(ground_truth: Any, functions: dict[str, dict[str, Any]],
            where: str) -> tuple[list[dict], list[Call], list[str]]:
    """(expected calls, the reference's calls, the arguments with no acceptable value) of one
    question's ground truth. An argument with none is required and refused whatever its value
    (schema ``false``, no ``values`` entry): absent it is missing, given it is off-schema, so
    every answer loses its point, as BFCL fails every answer to the question."""
    if not isinstance(ground_truth, list):
        raise ValueError(f"{where}: ground_truth must be a list of {{function: {{argument: values}}}}")
    expected, reference, unanswerable = [], [], []
    for n, call in enumerate(ground_truth):
        if not isinstance(call, dict) or len(call) != 1 or not isinstance(next(iter(call.values())), dict):
            raise ValueError(f"{where}: ground_truth[{n}] must be {{function: {{argument: values}}}}")
        ((name, arguments),) = call.items()
        properties = functions.get(name, {}).get("parameters", {}).get("properties", {})
        values, absent, args = {}, {}, {}
        for arg, acceptable in arguments.items():
            declared = properties.get(arg) if isinstance(properties.get(arg), dict) else {}
            try:
                spec, first = _expectation(acceptable, declared, f"{where}: {name}.{arg}")
            except _Unanswerable:
                absent[arg] = False
                unanswerable.append(f"{name}.{arg}")
                continue
            if spec is None:  # to be left out: optional, and the schema false refuses any value
                spec, absent[arg] = {"optional": True}, False
            values[arg] = spec
            if first is not _LEFT_OUT:
                args[arg] = first
        expected.append({"tool": name, "values": values, **({"args": absent} if absent else {})})
        reference.append(Call(tool=name, args=args))
    return expected, reference, unanswerable


def _rubric_id(question_id: str) -> str:
    """The rubric id of a question, and the name of its rubric and trajectories files."""
    return f"bfcl-{file_name(question_id, 'question', lower=True)}"


def _rubric(question: dict[str, Any], expected: list[dict] | None, registered: date) -> Rubric:
    where = question["id"]
    tools = {f["name"]: json_schema(f.get("parameters", {}), f"{where}: {f['name']}") for f in question["function"]}
    return Rubric.model_validate({
        "id": _rubric_id(question["id"]),
        "version": "1.0.0",
        "registered": registered,
        "description": _prompt_text(question),
        "tool_correctness": {
            "guide": TOOL_GUIDE if expected else NO_CALL_GUIDE,
            "expected_calls": expected or [],
            "ordered": False,
            "tools": tools,
        },
    })


def _messages(question: dict[str, Any]) -> list[Any]:
    return [m for turn in question["question"] for m in (turn if isinstance(turn, list) else [turn])]


def _prompt_text(question: dict[str, Any]) -> str:
    return "\n\n".join(str(m.get("content", "")) for m in _messages(question)
                       if isinstance(m, dict) and m.get("role") == "user")


# --- model results ---------------------------------------------------------------------------------


class _NotJson(ValueError):
    pass


def _literal(node: ast.AST, source: str) -> Any:
    """A call argument's value: a JSON literal, else arithmetic on numbers worked out (BFCL's
    decoder evaluates ``5/100``), else the text the model wrote for it (BFCL's decoder also
    keeps a variable such as ``data['sales']`` as text)."""
    try:
        return _jsonable(ast.literal_eval(node))
    except (_NotJson, ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        pass
    try:
        number = _arithmetic(node)
    except RecursionError:
        number = None
    return number if number is not None else ast.get_source_segment(source, node) or ast.unparse(node)


MAX_BITS = 1100
"""Largest integer, in bits, that arithmetic in a model's call is worked out to (past float range)."""
_OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
              ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow}


def _arithmetic(node: ast.AST) -> int | float | None:
    """The value of ``+ - * / // % **`` on number literals, or None (another expression, booleans,
    a division by zero, a value past MAX_BITS or float range). Nothing is run: only these nodes."""
    if isinstance(node, ast.Constant):
        number = node.value
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
        number = _arithmetic(node.operand)
        number = -number if number is not None and isinstance(node.op, ast.USub) else number
    elif isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        left, right = _arithmetic(node.left), _arithmetic(node.right)
        if left is None or right is None or (isinstance(node.op, ast.Pow) and isinstance(left, int)
                                             and isinstance(right, int) and right * left.bit_length() > MAX_BITS):
            return None
        try:
            number = _OPERATORS[type(node.op)](left, right)
        except ArithmeticError:  # a division by zero, a float overflow
            return None
    else:
        return None
    if isinstance(number, bool) or not isinstance(number, (int, float)):  # (-8) ** 0.5 is complex
        return None
    if isinstance(number, float):
        return number if math.isfinite(number) else None
    return number if number.bit_length() <= MAX_BITS else None


def _jsonable(value: Any) -> Any:
    if isinstance(value, (tuple, list)):
        return [_jsonable(item) for item in value]
    if isinstance(value, dict) and all(isinstance(key, str) and not has_lone_surrogate(key) for key in value):
        return {key: _jsonable(item) for key, item in value.items()}
    if isinstance(value, str) and has_lone_surrogate(value):
        raise _NotJson("a lone surrogate")  # '\ud800' reads as a string that JSON cannot hold
    if value is None or isinstance(value, (bool, int, str)) or (isinstance(value, float) and math.isfinite(value)):
        return value
    raise _NotJson(type(value).__name__)  # a set, bytes, complex or infinite number


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    raise ValueError("a called name is not a plain (dotted) name")


def python_calls(text: str) -> list[tuple[str, dict[str, Any]]]:
    """``[f(a=1), g.h(b='x')]`` (code fences allowed) as (name, arguments); ValueError if not."""
    body = re.sub(r"^```(?:python|tool_code)?\s*|\s*```$", "", text.strip())
    if not body.startswith("["):
        body = f"[{body}]"
    try:
        tree = ast.parse(body, mode="eval").body
    except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
        raise ValueError(f"not Python call syntax ({type(exc).__name__})") from None
    if not isinstance(tree, (ast.List, ast.Tuple)):
        raise ValueError("not a list of calls")
    calls = []
    for node in tree.elts:
        if not isinstance(node, ast.Call):
            raise ValueError("an item is not a function call")
        if node.args or any(keyword.arg is None for keyword in node.keywords):
            raise ValueError("a call passes arguments by position, not by name")
        calls.append((_dotted(node.func), {keyword.arg: _literal(keyword.value, body) for keyword in node.keywords}))
    return calls


def _listed_calls(result: list[Any]) -> list[tuple[str, dict[str, Any]]]:
    calls = []
    for item in result:
        if not isinstance(item, dict):
            raise ValueError("an item of the result is not {function: arguments}")
        for name, arguments in item.items():
            if isinstance(arguments, str):
                try:
                    arguments = strict_json_loads(arguments)
                except ValueError as exc:
                    raise ValueError(f"the arguments of {name} are not JSON: {exc}") from None
            if not isinstance(arguments, dict):
                raise ValueError(f"the arguments of {name} are not an object")
            calls.append((name, arguments))
    return calls


def decode_result(result: Any) -> tuple[list[tuple[str, dict[str, Any]]], str, str | None]:
    """(calls, output text, why it is no call list or None) of a BFCL ``result``."""
    try:
        if isinstance(result, list):
            return _listed_calls(result), "", None
        if isinstance(result, str):
            return python_calls(result), "", None
        return [], json.dumps(result), "the result is neither a list of calls nor text"
    except ValueError as exc:
        return [], result if isinstance(result, str) else json.dumps(result), str(exc)


def _model_trajectory(question: dict[str, Any], category: str, model: str, record: dict[str, Any],
                      where: str) -> Trajectory:
    calls, output, problem = decode_result(record.get("result"))
    declared = {f["name"] for f in question["function"]}
    by_underscore = {name.replace(".", "_"): name for name in declared}
    renamed = {name: by_underscore[name] for name, _ in calls if name not in declared and name in by_underscore}
    metadata: dict[str, Any] = {"bfcl_id": question["id"], "category": category, "kind": "model", "model": model,
                                "source": where}
    if problem:
        metadata["decode_error"] = problem
    if renamed:
        metadata["renamed"] = renamed
    latency = record.get("latency")
    return _trajectory(question, f"{question['id']}-{model}", metadata, output, ("", None, "")).model_copy(update={
        "calls": [Call(tool=renamed.get(name, name), args=args) for name, args in calls],
        "latency_s": latency if isinstance(latency, (int, float)) and not isinstance(latency, bool) and latency >= 0 else None,
    })


def _trajectory(question: dict[str, Any], trajectory_id: str, metadata: dict[str, Any], output: str,
                where: tuple[str, int | None, str]) -> Trajectory:
    trajectory = messages_to_trajectory(_messages(question), trajectory_id=trajectory_id, metadata=metadata,
                                        where=where)
    return trajectory.model_copy(update={"output": output})


# --- the import ------------------------------------------------------------------------------------


def _questions(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    for line, question in iter_json_lines(path, expected="a BFCL question file (JSON Lines)"):
        if not isinstance(question, dict) or not isinstance(question.get("id"), str):
            raise InputError("expected a question object with a string id", path, line)
        if not isinstance(question.get("question"), list) or not isinstance(question.get("function"), list) or not all(
                isinstance(f, dict) and isinstance(f.get("name"), str) for f in question["function"]) or not all(
                isinstance(turn, (list, dict)) for turn in question["question"]):
            raise InputError(f"{question['id']}: expected question (lists of messages) and function "
                             "(a list of {name, parameters})", path, line)
        for function in question["function"]:
            parameters = function.get("parameters", {})
            problem = ("parameters must be an object" if not isinstance(parameters, dict)
                       else None if isinstance(parameters.get("properties", {}), dict)
                       else "properties must be an object")
            if problem:
                raise InputError(f"{question['id']}: function {function['name']}: {problem}", path, line)
        yield line, question


def import_bfcl(src: Path, out: Path, *, registered: date | None = None) -> list[Path]:
    sources, skipped = _sources(src)
    registered = registered or DEFAULT_REGISTERED
    folder = src if src.is_dir() else src.parent
    entries: list[dict[str, str]] = []
    summary: dict[str, Any] = {"source": src.name, "categories": {}, "skipped": skipped, "unanswerable": {}}
    seen: dict[str, str] = {}
    with ImportWriter(out) as writer, ExitStack() as opened:
        for category, path in sources:
            answers = None
            if "irrelevance" not in category:
                answer_path = path.parent / "possible_answer" / path.name
                if not answer_path.is_file():
                    raise InputError(f"no possible answers for it: expected {answer_path}", path)
                answers = _LineIndex(answer_path, "a BFCL possible-answer file (JSON Lines)")
                opened.callback(answers.close)
            models = _model_results(folder, path, opened)
            count = 0
            for line, question in _questions(path):
                named = _rubric_id(question["id"])
                if named in seen:
                    raise InputError(f"question {question['id']!r} has the same rubric id as {seen[named]!r}", path, line)
                seen[named] = question["id"]
                entry, unanswerable = _import_question(writer, question, category, path, line, answers, models,
                                                       registered)
                entries.append(entry)
                if unanswerable:
                    summary["unanswerable"][question["id"]] = unanswerable
                count += 1
            for _, index in [*models, *([("", answers)] if answers else [])]:
                index.check_all_used(path)
            summary["categories"][category] = {"file": path.name, "questions": count,
                                               "model_results": {model: len(index.used) for model, index in models}}
        writer.json("bfcl-import.json", summary)
        writer.suite(f"BFCL import of {src.name}", entries)
    return writer.written


def _import_question(writer: ImportWriter, question: dict[str, Any], category: str, path: Path, line: int,
                     answers: _LineIndex | None, models: list[tuple[str, _LineIndex]],
                     registered: date) -> tuple[dict[str, str], list[str]]:
    """(the suite entry of one question, its arguments with no acceptable value)."""
    where = f"{path.name}:{line}"
    functions = {}
    for function in question["function"]:
        if function["name"] in functions:
            raise InputError(f"{question['id']}: function {function['name']} is declared twice", path, line)
        functions[function["name"]] = function
    expected, reference, unanswerable = None, [], []
    if answers is not None:
        found = answers.get(question["id"])
        if found is None:
            raise InputError(f"no possible answer for {question['id']}", answers.path)
        answer_line, answer = found
        where += f", {answers.path.parent.name}/{answers.path.name}:{answer_line}"
        try:
            expected, reference, unanswerable = _answer(answer.get("ground_truth"), functions, question["id"])
        except ValueError as exc:
            raise InputError(str(exc), answers.path, answer_line) from None
    try:
        rubric = _rubric(question, expected, registered)
    except ValidationError as exc:
        raise InputError(f"{question['id']}: {describe_validation_error(exc)}", path, line) from None
    except ValueError as exc:
        raise InputError(str(exc), path, line) from None
    # JSON, not YAML: PyYAML's pure-Python emitter and loader take seconds over a thousand
    # rubrics (see the module docstring); judgekit reads a .json rubric as strictly.
    writer.text(f"rubrics/{rubric.id}.json", json.dumps(rubric.canonical(), indent=1, ensure_ascii=True) + "\n")
    metadata = {"bfcl_id": question["id"], "category": category, "kind": "reference", "source": where}
    at = (str(path), line, f"{question['id']}: ")
    lines = []
    if not unanswerable:  # a question no answer can pass has no right answer to build
        lines.append(_trajectory(question, f"{question['id']}-reference", metadata, "", at)
                     .model_copy(update={"calls": reference}))
    for model, index in models:
        found = index.get(question["id"])
        if found is not None:
            result_line, record = found
            lines.append(_model_trajectory(question, category, model, record, f"{index.path.name}:{result_line}"))
    name = f"trajectories/{rubric.id}.jsonl"
    writer.text(name, "".join(t.model_dump_json(exclude_defaults=True) + "\n" for t in lines))
    return {"file": name, "rubric": rubric.ref}, unanswerable
