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
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

from judgekit._util.io import sha256_json
from judgekit.world.diff import Diff
from judgekit.trajectory import Trajectory

TEMPLATES = {"full": "judge_v2.txt", "compact": "judge_compact_v1.txt"}
"""The template of each answer form. The compact one is for small models: fewer words, and
nothing the axis does not read (no empty block, no headings, no task for faithfulness), since
reading the prompt is most of a small local judge's time."""
RENDER_VERSION = "1"  # bump with any change to how sections are rendered
DIFF_MAX_CHARS = 12000
RESULT_MAX_CHARS = 4000


@lru_cache(maxsize=8)
def load_template(name: str) -> tuple[dict[str, str], str]:
    """A template of ``judgekit/prompts``: its ``=== part ===`` sections, and its hash (with
    ``RENDER_VERSION``: part of every cache key of a question asked in it)."""
    text = resources.files("judgekit.prompts").joinpath(name).read_text(encoding="utf-8")
    parts = dict(re.findall(r"^=== (\w+) ===\n(.*?)(?=^=== |\Z)", text, flags=re.S | re.M))
    digest = hashlib.sha256((RENDER_VERSION + "\n" + text).encode()).hexdigest()
    return {k: v.strip() for k, v in parts.items()}, digest


def _template(form: str = "full") -> tuple[dict[str, str], str]:
    return load_template(TEMPLATES[form])


def template_sha256(form: str = "full") -> str:
    return _template(form)[1]


def encode_untrusted(text: str) -> str:
    """One JSON string literal that no delimiter, role marker or look-alike survives in."""
    encoded = json.dumps(text, ensure_ascii=True)
    return encoded.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


@dataclass
class Evidence:
    """The evidence a faithfulness judge may cite: id -> the text it was shown.

    Only what the world said: tool results (``R<n>``) and the given context (``C<n>``). What
    the agent sent (``A<n>``, a call's tool and arguments) is shown to the judge but is never
    evidence: ``refund(note="Refund approved")`` answered with ``denied`` supports nothing.
    """

    items: dict[str, str] = field(default_factory=dict)


def _cut(text: str) -> str:
    if len(text) > RESULT_MAX_CHARS:
        return text[:RESULT_MAX_CHARS] + f" [cut: {len(text) - RESULT_MAX_CHARS} more chars]"
    return text


def sent_text(call) -> str:
    """What the agent sent: ``tool({args})``, whole (the safety scan reads all of it)."""
    return f"{call.tool}({json.dumps(call.args, sort_keys=True, ensure_ascii=False)})"


def call_sent_text(call) -> str:
    """What the agent sent, cut as the judge prompt shows it."""
    return _cut(sent_text(call))


def call_result_text(call) -> str:
    """What the tool returned (or the error it raised)."""
    if call.error is not None:
        return _cut(f"error: {call.error}")
    return _cut(call.result if isinstance(call.result, str) else json.dumps(call.result, sort_keys=True, ensure_ascii=False))


def evidence_for(trajectory: Trajectory) -> Evidence:
    items = {f"R{i}": call_result_text(call) for i, call in enumerate(trajectory.calls)}
    items.update({f"C{i}": f"{key}: {text}" for i, (key, text) in enumerate(trajectory.context.items())})
    return Evidence(items)


class Prompt:
    """A judge prompt: its messages, the evidence it shows, the output whose claims it asks about.

    ``build_prompt`` makes one whose messages are rendered on first use: a question the cache
    answers by its inputs' fingerprint (``judgekit.run.jobs.JudgeJob.fingerprint``) is never
    rendered. What the messages will be is fixed when the prompt is made; rendering only writes
    them out. It is rendered when pickled (see ``__getstate__``).
    """

    def __init__(self, axis: str, messages: list[dict[str, str]] | None = None, template_sha256: str = "",
                 evidence: Evidence | None = None, output: str = "", *,
                 pending: Callable[[], list[dict[str, str]]] | None = None):
        if (messages is None) == (pending is None):
            raise ValueError("a prompt has either its messages or the means to render them")
        self.axis = axis
        self.template_sha256 = template_sha256
        self.evidence = evidence if evidence is not None else Evidence()
        self.output = output
        """The agent output shown to a faithfulness judge (the claims to check)."""
        self._messages = messages
        self._pending = pending

    @property
    def messages(self) -> list[dict[str, str]]:
        """Exactly what the judge is sent (rendered now if not yet)."""
        if self._messages is None:
            self._messages = self._pending()
            self._pending = None
        return self._messages

    @property
    def rendered(self) -> bool:
        return self._messages is not None

    def render(self) -> str:
        """Exactly what the judge receives, for people."""
        return "\n\n".join(f"----- {m['role']} -----\n{m['content']}" for m in self.messages)

    def __repr__(self) -> str:
        return f"Prompt(axis={self.axis!r}, template_sha256={self.template_sha256[:12]!r}, rendered={self.rendered})"

    def __getstate__(self) -> dict:
        # Rendered before it travels: what a plan asks is fixed by the code that planned it, so
        # a process running other code (another template, another renderer) asks the same
        # question under the same key, and learns no fingerprint for messages it did not plan.
        self.messages  # noqa: B018 - renders
        return self.__dict__.copy()


def data_block(name: str, items: list[tuple[str, str]], nonce: str) -> str:
    """One fenced block of untrusted items: ``<<<DATA name NONCE>>>``, one ``ID = "<JSON string>"``
    line per item, ``<<<END NONCE>>>``."""
    lines = [f"<<<DATA {name} {nonce}>>>"]
    lines += [f"{item_id} = {encode_untrusted(text)}" for item_id, text in items] or ["(empty)"]
    lines.append(f"<<<END {nonce}>>>")
    return "\n".join(lines)


Section = tuple[str, str, list[tuple[str, str]]]
"""One block of a prompt: (title, block name, [(item id, text)])."""


def build_prompt(
    axis: str,
    guide: str,
    trajectory: Trajectory,
    sections_of: Callable[[Trajectory, Evidence, Diff | None, bool], list[Section]],
    *,
    diff: Diff | None = None,
    show_output: bool = False,
    min_quote_chars: int = 8,
    form: str = "full",
    reads_task: bool = True,
    instructions: str | None = None,
) -> Prompt:
    """The judge prompt for one axis: the task, then the axis's own sections (``sections_of``,
    the axis's ``sections``), under the template's instructions for that axis.

    ``form`` picks the template (``TEMPLATES``). The compact form leaves out empty blocks,
    the section headings (each block names itself) and, when the axis does not read it
    (``reads_task``), the task.

    ``instructions``: the axis's own instructions, for an axis the template has none for; they
    are hashed into the prompt's ``template_sha256`` (so into every cache key). An axis the
    template has instructions for always gets the template's."""
    parts, digest = _template(form)
    if axis in parts:
        instructions = parts[axis]
    elif instructions is None:
        raise ValueError(f"the prompt template has no instructions for axis {axis!r}")
    else:
        instructions = instructions.strip()
        digest = hashlib.sha256(f"{digest}\n{axis}\n{instructions}".encode()).hexdigest()
    evidence = evidence_for(trajectory)
    render = _Render(axis, guide, trajectory, evidence, sections_of, diff, show_output, min_quote_chars, form,
                     reads_task, instructions)
    return Prompt(axis=axis, template_sha256=digest, evidence=evidence, output=trajectory.output, pending=render)


@dataclass
class _Render:
    """The rest of ``build_prompt``: the sections written out under the template, when the
    messages are first asked for."""

    axis: str
    guide: str
    trajectory: Trajectory
    evidence: Evidence
    sections_of: Callable[[Trajectory, Evidence, Diff | None, bool], list[Section]]
    diff: Diff | None
    show_output: bool
    min_quote_chars: int
    form: str
    reads_task: bool
    instructions: str

    def __call__(self) -> list[dict[str, str]]:
        parts, _ = _template(self.form)
        trajectory, form = self.trajectory, self.form
        sections: list[Section] = [("Task", "task", [("P", trajectory.prompt)])]
        sections += self.sections_of(trajectory, self.evidence, self.diff, self.show_output)
        if form == "compact":
            sections = [s for s in sections if s[2] and (self.reads_task or s[1] != "task")]
        # The nonce comes from the data itself: text inside cannot predict (and so cannot close) it.
        nonce = sha256_json([s[2] for s in sections])[:16]
        if form == "compact":
            body = "\n".join(data_block(name, items, nonce) for _, name, items in sections)
        else:
            body = "\n\n".join(f"## {title}\n{data_block(name, items, nonce)}" for title, name, items in sections)
        instructions = self.instructions.replace("{min_quote_chars}", str(self.min_quote_chars))
        system = parts["system"].replace("{nonce}", "<nonce>").replace("{axis_instructions}", instructions)
        user = parts["user"].replace("{guide}", self.guide.strip()).replace("{sections}", body)
        system = system.replace("<nonce>", nonce)
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def _normalise(text: str) -> str:
    """Case-folded, whitespace runs as one space, trimmed (str.split's whitespace is exactly
    the regular expression ``\\s``'s)."""
    return " ".join(text.casefold().split())


def _forms(text: str) -> tuple[str, str]:
    # As shown (a JSON string line) a judge may copy the escaped form: accept both.
    return _normalise(text), _normalise(json.dumps(text, ensure_ascii=False)[1:-1])


def _unescaped(quote: str) -> str | None:
    """The quote with JSON string escapes undone, when it has any and they decode: items are
    shown ASCII-only with ``<``, ``>`` and ``&`` escaped, so a judge copying what it saw writes
    ``caf\\u00e9 \\u003cb\\u003e`` for ``café <b>``. Its length is the text's, not the escapes'."""
    if "\\" not in quote:
        return None
    try:
        value = json.loads(f'"{quote}"')
    except ValueError:
        return None
    try:
        value.encode("utf-8")  # a lone surrogate quotes no text
    except UnicodeEncodeError:
        return None
    return value


def _as_token(needle: str, text: str) -> bool:
    """``needle`` occurs in ``text`` with no letter or digit right before or after it, and not
    as part of a longer number ("5" is not a token of "5.99", nor "1,000" of "1,000,000")."""
    return re.search(rf"(?<![^\W_])(?<!\d[.,]){re.escape(needle)}(?![^\W_])(?![.,]\d)", text) is not None


def quote_problem(quote: str, evidence_text: str, claim: str, min_chars: int) -> str | None:
    """Why a quote does not identify a fact in the evidence (None when it does).

    A quote must occur in the item (whitespace and case normalised) and be long enough to
    identify a fact: at least ``min_chars`` characters, or the whole item (a result that is
    just "42" or "denied"), or a value with a digit that the claim itself states, as a whole
    token in both ("$500" for "Refund of $500 approved"). A one-letter quote found anywhere
    proves nothing.
    """
    forms = _forms(evidence_text)
    unescaped = _unescaped(quote)
    candidates = [_normalise(text) for text in (unescaped, quote) if text is not None]
    if not any(candidates):
        return "empty quote"
    needle = next((c for c in candidates if c and any(c in text for text in forms)), None)
    if needle is None:
        return f"quote {quote[:80]!r} does not occur in it"
    if len(needle) >= min_chars or needle in forms:
        return None
    if any(ch.isdigit() for ch in needle) and _as_token(needle, _normalise(claim)) and any(_as_token(needle, t) for t in forms):
        return None
    return (f"quote {quote[:80]!r} is too short to identify a fact (under {min_chars} characters, not the "
            "whole item, not a value the claim states)")


def prompt_summary(prompt: Prompt) -> dict[str, Any]:
    return {"axis": prompt.axis, "template_sha256": prompt.template_sha256, "messages": prompt.messages}
