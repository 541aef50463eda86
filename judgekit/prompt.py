"""The judge prompt: one versioned template, built from named sections, with untrusted data fenced.

Everything that came from the agent, its tools or its world (task, diff, tool calls and
results, context, output) is untrusted. Each item is written as one JSON string (ASCII only,
with ``<``, ``>`` and ``&`` escaped too) inside a block delimited by a nonce derived from the
data itself, so no text inside data can close a block, fake a role line or look like a verdict,
and Unicode look-alikes arrive as visible escapes (OWASP LLM prompt-injection prevention).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

from judgekit._io import sha256_json
from judgekit.diff import Diff, render_text
from judgekit.trajectory import Trajectory

TEMPLATE_NAME = "judge_v1.txt"
RENDER_VERSION = "1"  # bump with any change to how sections are rendered
DIFF_MAX_CHARS = 12000
RESULT_MAX_CHARS = 4000


@lru_cache(maxsize=1)
def _template() -> tuple[dict[str, str], str]:
    text = resources.files("judgekit.prompts").joinpath(TEMPLATE_NAME).read_text(encoding="utf-8")
    parts = dict(re.findall(r"^=== (\w+) ===\n(.*?)(?=^=== |\Z)", text, flags=re.S | re.M))
    digest = hashlib.sha256((RENDER_VERSION + "\n" + text).encode()).hexdigest()
    return {k: v.strip() for k, v in parts.items()}, digest


def template_sha256() -> str:
    return _template()[1]


def encode_untrusted(text: str) -> str:
    """One JSON string literal that no delimiter, role marker or look-alike survives in."""
    encoded = json.dumps(text, ensure_ascii=True)
    return encoded.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


@dataclass
class Evidence:
    """The evidence a faithfulness judge may cite: id -> the text it was shown."""

    items: dict[str, str] = field(default_factory=dict)


def call_text(call) -> str:
    args = json.dumps(call.args, sort_keys=True, ensure_ascii=False)
    if call.error is not None:
        outcome = f"an error: {call.error}"
    else:
        outcome = call.result if isinstance(call.result, str) else json.dumps(call.result, sort_keys=True, ensure_ascii=False)
    if len(outcome) > RESULT_MAX_CHARS:
        outcome = outcome[:RESULT_MAX_CHARS] + f" [cut: {len(outcome) - RESULT_MAX_CHARS} more chars]"
    return f"{call.tool}({args}) returned {outcome}"


def evidence_for(trajectory: Trajectory) -> Evidence:
    items = {f"R{i}": call_text(call) for i, call in enumerate(trajectory.calls)}
    items.update({f"C{i}": f"{key}: {text}" for i, (key, text) in enumerate(trajectory.context.items())})
    return Evidence(items)


@dataclass
class Prompt:
    axis: str
    messages: list[dict[str, str]]
    template_sha256: str
    evidence: Evidence

    def render(self) -> str:
        """Exactly what the judge receives, for people."""
        return "\n\n".join(f"----- {m['role']} -----\n{m['content']}" for m in self.messages)


def _block(name: str, items: list[tuple[str, str]], nonce: str) -> str:
    lines = [f"<<<DATA {name} {nonce}>>>"]
    lines += [f"{item_id} = {encode_untrusted(text)}" for item_id, text in items] or ["(empty)"]
    lines.append(f"<<<END {nonce}>>>")
    return "\n".join(lines)


def build_prompt(
    axis: str,
    guide: str,
    trajectory: Trajectory,
    diff: Diff | None,
    *,
    show_output: bool = False,
) -> Prompt:
    """Build the judge prompt for one axis from named sections."""
    parts, digest = _template()
    sections: list[tuple[str, str, list[tuple[str, str]]]] = [("Task", "task", [("P", trajectory.prompt)])]
    evidence = evidence_for(trajectory)
    if axis == "task_success":
        diff_lines = render_text(diff, max_chars=DIFF_MAX_CHARS).splitlines() if diff is not None else ["(no world snapshots)"]
        sections.append(("End-state diff", "diff", [(f"D{i}", line) for i, line in enumerate(diff_lines)]))
        if show_output:
            sections.append(("Agent output (its own claims; judge the world, not the wording)", "output", [("O", trajectory.output)]))
    elif axis == "faithfulness":
        sections.append(("Tool calls and results", "tool_results", [(k, v) for k, v in evidence.items.items() if k.startswith("R")]))
        sections.append(("Context", "context", [(k, v) for k, v in evidence.items.items() if k.startswith("C")]))
        sections.append(("Agent output (the claims to check)", "output", [("O", trajectory.output)]))
    else:
        raise ValueError(f"no judge prompt for axis {axis!r}")
    # The nonce comes from the data itself: text inside cannot predict (and so cannot close) it.
    nonce = sha256_json([s[2] for s in sections])[:16]
    body = "\n\n".join(f"## {title}\n{_block(name, items, nonce)}" for title, name, items in sections)
    system = parts["system"].replace("{nonce}", "<nonce>").replace("{axis_instructions}", parts[axis])
    user = parts["user"].replace("{guide}", guide.strip()).replace("{sections}", body)
    system = system.replace("<nonce>", nonce)
    return Prompt(axis=axis, messages=[{"role": "system", "content": system}, {"role": "user", "content": user}], template_sha256=digest, evidence=evidence)


def _normalise(text: str) -> str:
    return re.sub(r"\s+", " ", text.casefold()).strip()


def quote_found(quote: str, evidence_text: str) -> bool:
    """Whether a quote occurs in the evidence after whitespace and case normalisation."""
    needle = _normalise(quote)
    if not needle:
        return False
    return needle in _normalise(evidence_text) or needle in _normalise(json.dumps(evidence_text, ensure_ascii=False)[1:-1])


def prompt_summary(prompt: Prompt) -> dict[str, Any]:
    return {"axis": prompt.axis, "template_sha256": prompt.template_sha256, "messages": prompt.messages}
