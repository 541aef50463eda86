"""``judgekit rubric lint``: guides must stay true as models and frameworks change.

Flags version-bound language (model names and versions, framework versions, "as of", dates,
"latest"), vague criteria nobody can measure, and axes with no checks at all. Each finding
names the file and line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from judgekit._util.documents import compose, find_node
from judgekit._util.io import read_text
from judgekit.axes.table import axes_of
from judgekit.rubric.model import Rubric, load_rubric

_MONTHS = "january|february|march|april|may|june|july|august|september|october|november|december"
VERSION_BOUND: list[tuple[str, re.Pattern[str]]] = [
    (
        "model-name",
        re.compile(
            r"\b(gpt-?\d[\w.-]*|chatgpt|o[134](-mini|-preview|-pro)?|claude(-| )?(\d[\w.-]*|opus|sonnet|haiku|instant)"
            r"|llama-?\d[\w.-]*|gemini(-| )?(\d[\w.-]*|pro|flash|ultra)|mistral[\w.-]*|mixtral[\w.-]*|qwen[\w.-]*"
            r"|deepseek[\w.-]*|phi-\d[\w.-]*|command-r[\w.-]*|smollm[\w.-]*)\b",
            re.IGNORECASE,
        ),
    ),
    (
        "framework-version",
        re.compile(
            r"\b(langchain|langgraph|llama-?index|autogen|crewai|openai|anthropic|pydantic|python|litellm|inspect|"
            r"dspy|semantic kernel)[ -]?v?\d+(\.\d+)*\b",
            re.IGNORECASE,
        ),
    ),
    ("version-number", re.compile(r"\bv\d+(\.\d+)+\b|\b\d+\.\d+\.\d+\b|\bversion \d", re.IGNORECASE)),
    ("as-of", re.compile(r"\b(as of|at the time of writing|currently|nowadays|these days)\b", re.IGNORECASE)),
    ("latest", re.compile(r"\b(latest|newest|state[- ]of[- ]the[- ]art|most recent (model|version))\b", re.IGNORECASE)),
    (
        "date",
        re.compile(rf"\b\d{{4}}-\d{{2}}-\d{{2}}\b|\b({_MONTHS})\s+\d{{4}}\b|\b(19|20)\d{{2}}\b", re.IGNORECASE),
    ),
]
VAGUE = re.compile(
    r"\b(good|appropriate(ly)?|reasonable|reasonably|proper(ly)?|nice|high[- ]quality|as needed|sensible|adequate(ly)?)\b",
    re.IGNORECASE,
)
MIN_GUIDE_CHARS = 20


@dataclass(frozen=True)
class Finding:
    path: Path
    line: int | None
    code: str
    message: str

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else str(self.path)
        return f"{where}: {self.code}: {self.message}"


def _line_of(node: yaml.Node | None, phrase: str, source_lines: list[str]) -> int | None:
    """The first source line inside ``node`` that holds ``phrase`` (any scalar style: plain,
    quoted, literal or folded); the node's first line when the phrase spans lines."""
    if node is None:
        return None
    first, last = node.start_mark.line, node.end_mark.line
    needle = phrase.casefold()
    for number in range(first, min(last + 1, len(source_lines))):
        if needle and needle in source_lines[number].casefold():
            return number + 1
    return first + 1


def _key_line(tree: yaml.Node | None, key: str) -> int | None:
    if isinstance(tree, yaml.MappingNode):
        for key_node, _ in tree.value:
            if key_node.value == key:
                return key_node.start_mark.line + 1
    return None


def lint_rubric(rubric: Rubric, path: Path, tree: yaml.Node | None = None, source: str = "") -> list[Finding]:
    findings: list[Finding] = []
    lines = source.splitlines()
    for spec in axes_of(rubric):
        axis = spec.name
        criteria = spec.criteria(rubric)
        node = find_node(tree, (axis, "guide"))
        axis_line = _key_line(tree, axis)
        guide = criteria.guide
        if len(guide.strip()) < MIN_GUIDE_CHARS:
            findings.append(Finding(path, _line_of(node, "", lines), "empty-guide", f"{axis} guide is empty or too short to score by"))
        for code, pattern in VERSION_BOUND:
            for match in pattern.finditer(guide):
                findings.append(
                    Finding(path, _line_of(node, match.group(0), lines), code, f"{axis} guide says {match.group(0)!r}: version-bound language goes stale; describe the behaviour instead")
                )
        for match in VAGUE.finditer(guide):
            findings.append(
                Finding(path, _line_of(node, match.group(0), lines), "unmeasurable", f"{axis} guide says {match.group(0)!r}: say what is checked and what passes")
            )
        findings.extend(Finding(path, axis_line, "empty-criteria", message) for message in spec.empty(criteria))
    return findings


def lint_file(path: Path) -> list[Finding]:
    return lint_files([path]).findings


@dataclass(frozen=True)
class LintReport:
    """What ``judgekit rubric lint`` checked, and what it found."""

    files: int
    rubrics: list[str]
    """id@version of each rubric read (each loaded, so validated against the rubric schema)."""
    axes: int
    """Axis sections whose guide and criteria were linted."""
    validated: dict[str, int]
    """What loading validated, by kind: predicates, argument schemas, diff path patterns."""
    findings: list[Finding]

    def summary(self) -> str:
        """The report in one line, e.g. what a clean run says."""
        counted = ", ".join(f"{n} {kind}" for kind, n in self.validated.items() if n)
        return (f"checked {len(self.rubrics)} rubric(s) in {self.files} file(s) ({', '.join(self.rubrics)}): "
                f"{self.axes} axis section(s) linted for version-bound, vague or empty criteria"
                + (f"; {counted} validated" if counted else "")
                + (f": {len(self.findings)} finding(s)" if self.findings else ": no findings"))


def _validated(rubric: Rubric) -> dict[str, int]:
    """How many predicates, argument schemas and diff path patterns ``rubric`` holds (loading it
    validated each)."""
    task, tools = rubric.task_success, rubric.tool_correctness
    counts = {"predicates": 0, "argument schemas": 0, "diff path patterns": 0}
    if task is not None:
        counts["predicates"] += len(task.preconditions) + len(task.postconditions)
        counts["diff path patterns"] += len(task.side_effects.allow) if task.side_effects else 0
    if tools is not None:
        counts["argument schemas"] += sum(len(call.args) for call in tools.expected_calls) + len(tools.tools)
        counts["diff path patterns"] += len(tools.forbidden.effects)
    return counts


def lint_files(paths: list[Path]) -> LintReport:
    """Load and lint each rubric file of ``paths``; raises what loading one raises (InputError)."""
    rubrics: list[str] = []
    findings: list[Finding] = []
    validated = {"predicates": 0, "argument schemas": 0, "diff path patterns": 0}
    axes = 0
    for path in paths:
        rubric = load_rubric(path)
        rubrics.append(rubric.ref)
        axes += len(axes_of(rubric))
        for kind, n in _validated(rubric).items():
            validated[kind] += n
        findings += lint_rubric(rubric, path, compose(path), read_text(path))
    return LintReport(files=len(paths), rubrics=rubrics, axes=axes, validated=validated, findings=findings)
