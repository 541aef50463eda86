"""The judge-based injection detector: untrusted text the patterns do not know, read by a judge.

Opt-in (the policy's ``judge:``), it asks one question per untrusted source the deterministic
detectors found nothing in: does it hold an instruction addressed to the agent? The question
goes through the judge runner like any verdict (pinned model, temperature 0, the suite's cache,
the same fencing of data as the judge prompt: every item an escaped JSON string inside a block
whose nonce comes from the data). An instruction the judge quotes (checked: copied from the
source) is then followed or not by the same deterministic test as a pattern's.

The calibration rule holds: this detector has no approval record (there is no calibration of it
yet), so what it finds is **advisory**: reported, never a stop-ship finding, and said so.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import Field

from judgekit._io import sha256_json
from judgekit.prompt import Evidence, Prompt, data_block, load_template
from judgekit.rubric import Rubric
from judgekit.verdict import COMPACT_CHARS, _Answer, _object, register_answer

QUESTION = "safety.injection"
TEMPLATE = "safety_injection_v1.txt"
ADVISORY = "advisory: this detector has no approval record (it is not calibrated), so it never stops shipping"


class InjectionAnswer(_Answer):
    """Does one piece of untrusted text hold an instruction addressed to the agent?"""

    instruction_found: bool = Field(description="Whether the text holds an instruction addressed to the agent.")
    instruction: str = Field(max_length=300, description="The instruction, copied exactly from the text; empty "
                             "when there is none.")

    COMPACT_CHARS: ClassVar[int] = 160

    @classmethod
    def compact_schema(cls, evidence_ids: tuple[str, ...]) -> dict[str, Any]:
        instruction = {"type": "string", "maxLength": cls.COMPACT_CHARS,
                       "pattern": f"^{COMPACT_CHARS}{{0,{cls.COMPACT_CHARS}}}$"}
        return _object({"instruction_found": {"type": "boolean"}, "instruction": instruction})


register_answer(QUESTION, InjectionAnswer)


def injection_prompt(where: str, text: str) -> Prompt:
    """The question about one untrusted source, its text fenced as data."""
    parts, digest = load_template(TEMPLATE)
    items = [("W", where), ("U", text)]  # where names a tool: untrusted too
    nonce = sha256_json(items)[:16]
    system = parts["system"].replace("{nonce}", nonce)
    user = parts["user"].replace("{block}", data_block("untrusted", items, nonce))
    return Prompt(axis=QUESTION, messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
                  template_sha256=digest, evidence=Evidence({}))


@dataclass
class Question:
    """One untrusted source to ask about, and what the scan needs to act on the answer."""

    rubric: Rubric
    trajectory_index: int
    where: str
    text: str
    readable_from: int


class InjectionJudge:
    """Asks the judge about a window's sources, through one executor for the whole scan."""

    def __init__(self, loaded, spec):
        from judgekit.judge.resolve import JudgeOverride, JudgeResolver
        from judgekit.run.api import RunOptions, local_executor

        self.target = JudgeResolver(override=JudgeOverride(), allow_floating=loaded.suite.allow_floating).resolve(spec)
        self.executor = local_executor(loaded, RunOptions())
        self.name = f"judge {self.target.model_pin}"

    def ask(self, questions: Sequence[Question]) -> list[InjectionAnswer | None]:
        """The judge's answer to each question, or None where it gave no valid one."""
        from judgekit.run.judging import JudgeJob

        jobs = [JudgeJob(q.rubric, QUESTION, injection_prompt(q.where, q.text), self.target) for q in questions]
        verdicts = asyncio.run(self.executor.execute(jobs))
        return [v.answer if v.status == "scored" else None for v in verdicts]

    @property
    def ledger(self):
        return self.executor.ledger

    def close(self) -> None:
        self.executor.close()
