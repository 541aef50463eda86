"""A judge job: one (trajectory, axis) question, its cache key and fingerprint, and its answer schema.

A job is planned (``judgekit.run.plan``), asked (``judgekit.run.ask``) and executed with others
(``judgekit.run.execute``). Everything here is pure: no call, no store, no secret.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any

from judgekit._util.io import sha256_json
from judgekit._util.version import code_sha256
from judgekit.cache.base import cache_key
from judgekit.judge.local import compact_json_grammar
from judgekit.judge.target import JudgeTarget
from judgekit.prompt import Prompt
from judgekit.rubric.model import Rubric
from judgekit.verdict import JudgeVerdict, answer_model


@lru_cache(maxsize=1024)
def answer_schema(axis: str, form: str = "full", evidence_ids: tuple[str, ...] = ()) -> tuple[dict[str, Any], str]:
    """The answer schema (sent as the response format) and its hash (in the cache key).

    ``full``: the axis's answer model as it is. ``compact``: its restriction for small judges
    (``_Answer.compact_schema``), built for the ids of the evidence the prompt shows; a
    different schema is a different question, so its hash keys the verdict too.
    """
    model = answer_model(axis)
    if form == "compact":
        schema = model.compact_schema(evidence_ids)
    elif form == "full":
        schema = model.model_json_schema()
    else:
        raise ValueError(f"no answer form {form!r} (full or compact)")
    return schema, sha256_json(schema)


JSON_SPACE_CHARS = 22
"""The most whitespace llama.cpp's JSON-schema grammar admits at each point it admits any
(``| " " | "\\n"{1,2} [ \\t]{0,20}``)."""


def answer_chars_bound(schema: dict[str, Any], space: int = JSON_SPACE_CHARS) -> int:
    """The longest reply a grammar built from ``schema`` admits, in characters: an upper bound
    on its tokens, as every token is at least one character. Only for bounded schemas (compact
    ones): every array has ``maxItems``, every string a ``maxLength`` and no escapes (compact
    text), every object lists all its properties as required."""
    if "enum" in schema:
        return max(len(json.dumps(value)) for value in schema["enum"]) + space
    kind = schema.get("type")
    if kind == "boolean":
        return len("false") + space
    if kind == "string":
        if "pattern" not in schema or "maxLength" not in schema:
            raise ValueError("unbounded string: no maxLength, or escapes allowed")
        return 2 + schema["maxLength"] + space
    if kind == "array":
        if "maxItems" not in schema:
            raise ValueError("unbounded array: no maxItems")
        n = schema["maxItems"]
        return 2 * (1 + space) + n * answer_chars_bound(schema["items"], space) + max(n - 1, 0) * (1 + space)
    if kind == "object":
        properties = schema["properties"]
        if set(schema.get("required", ())) != set(properties) or schema.get("additionalProperties") is not False:
            raise ValueError("an object whose properties are not all required and closed")
        members = sum(len(json.dumps(name)) + 1 + 2 * space + answer_chars_bound(value, space)
                      for name, value in properties.items())
        return 2 * (1 + space) + members + max(len(properties) - 1, 0) * (1 + space)
    raise ValueError(f"cannot bound a schema of type {kind!r}")


def response_format(schema: dict[str, Any]) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": "verdict", "schema": schema, "strict": True}}


FINGERPRINT_FORMAT = 2


@dataclass
class JudgeJob:
    """One question to a judge: a rubric's axis, the rendered prompt and the pinned target.

    Jobs with the same ``key`` ask the same thing and share one verdict."""

    rubric: Rubric
    axis: str
    prompt: Prompt
    judge: JudgeTarget
    repeat: int = 0  # calibration --repeats: the same input asked again under its own key
    inputs_sha256: str | None = None
    """sha256 of all the prompt is rendered from besides the rubric, the judge and judgekit's
    code (the trajectory's line), when that is all: then ``fingerprint`` names the question."""
    known_key: str | None = field(default=None, compare=False)
    """The key the store's memo gave for ``fingerprint`` (``key`` is then not rendered for)."""

    @cached_property
    def _answer_schema(self) -> tuple[dict[str, Any], str]:
        form = self.judge.spec.answer_form
        ids = tuple(self.prompt.evidence.items) if form == "compact" else ()  # the full schema names no id
        return answer_schema(self.axis, form, ids)

    @property
    def response_schema(self) -> dict[str, Any]:
        """The schema the judge answers in: its spec's answer form for this prompt's evidence."""
        return self._answer_schema[0]

    @property
    def compact_decoding(self) -> bool:
        """The embedded judge answers compact schemas under a grammar that admits no whitespace
        (llama.cpp's own ``response_format`` grammar lets a small model spend most of its
        tokens on indentation: measured 40 instead of 130-220 tokens per answer)."""
        return self.judge.embedded and self.judge.spec.answer_form == "compact"

    def request_format(self) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """``(response_format, extra_body)`` of this job's request."""
        if self.compact_decoding:
            return None, {"grammar": compact_json_grammar(self.response_schema)}
        return response_format(self.response_schema), None

    @property
    def key(self) -> str:
        """The verdict's cache key: the one the memo gave for the fingerprint, else computed from
        the rendered prompt (once: a job does not change once built)."""
        return self.known_key if self.known_key is not None else self.rendered_key

    @cached_property
    def rendered_key(self) -> str:
        """The cache key, from the rendered prompt: the question exactly as the judge gets it."""
        return cache_key({**self._question(), "messages": self.prompt.messages})

    @cached_property
    def fingerprint(self) -> str | None:
        """A name for this question that needs no rendering (None when it has none): the key's
        material with the prompt's inputs in place of its messages, and the digest of the code
        that renders them. The same fingerprint renders the same messages, so the store keeps
        fingerprint -> key and a rerun finds its verdicts without building a prompt."""
        code = code_sha256()
        if self.inputs_sha256 is None or code is None:
            return None
        spec = self.judge.spec
        # Every part is a hex digest or a word from a closed set: one per line is unambiguous.
        material = "\n".join((
            f"judgekit-fingerprint/{FINGERPRINT_FORMAT}", code, _static_question_sha256(self),
            self._answer_schema[1], self.inputs_sha256, spec.answer_form,
            "show-output" if spec.show_output_for_task_success else "no-output",
        ))
        return hashlib.sha256(material.encode("ascii")).hexdigest()

    def _question(self) -> dict[str, Any]:
        """The cache key's material, all but the messages."""
        return {**self._static_question(), "response_schema_sha256": self._answer_schema[1]}

    def _static_question(self) -> dict[str, Any]:
        """The part of ``_question`` that every job of one rubric, axis, judge, template and
        repeat shares (the answer schema can name the prompt's own evidence ids)."""
        repeat = {"repeat": self.repeat} if self.repeat else {}
        decoding = {"decoding": "compact-json-grammar"} if self.compact_decoding else {}
        return {
            **repeat,
            **decoding,
            "rubric": self.rubric.ref,
            "rubric_sha256": self.rubric.sha256(),
            "axis": self.axis,
            "template_sha256": self.prompt.template_sha256,
            "model": self.judge.model_pin,
            "endpoint": self.judge.endpoint,
            "override": self.judge.override,
            "parameters": self.judge.spec.cache_parameters(),
        }


_STATIC_QUESTIONS: dict[tuple[int, int, str, int, str], tuple[Rubric, JudgeTarget, str]] = {}
_STATIC_QUESTIONS_MAX = 256


def _static_question_sha256(job: JudgeJob) -> str:
    """sha256 of ``job._static_question()``, worked out once per rubric, judge, axis, repeat and
    template (a run of a million questions has a few of them). Rubrics, targets and their specs
    are frozen, so the same objects give the same digest; each entry holds its rubric and
    target, so an id is never taken for another object's."""
    key = (id(job.rubric), id(job.judge), job.axis, job.repeat, job.prompt.template_sha256)
    found = _STATIC_QUESTIONS.get(key)
    if found is not None and found[0] is job.rubric and found[1] is job.judge:
        return found[2]
    if len(_STATIC_QUESTIONS) >= _STATIC_QUESTIONS_MAX:
        _STATIC_QUESTIONS.clear()  # a long-lived process plans many runs: keep only recent ones
    digest = sha256_json(job._static_question())
    _STATIC_QUESTIONS[key] = (job.rubric, job.judge, digest)
    return digest


def differing_identity(verdict: JudgeVerdict, job: JudgeJob) -> list[str]:
    """The provenance fields of a stored verdict that name another judge or rubric than the
    job's own (empty when it is the job's): a run refuses such a verdict."""
    return [name for name, value in identity_of(job).items() if getattr(verdict.provenance, name) != value]


def identity_of(job: JudgeJob) -> dict[str, Any]:
    """The provenance fields that say which judge answered which rubric: every verdict gets
    them, and a cached verdict must carry exactly the job's own."""
    return {
        "model_pin": job.judge.model_pin,
        "endpoint": job.judge.endpoint,
        "floating": job.judge.floating,
        "override": job.judge.override,
        "parameters": job.judge.spec.cache_parameters(),
        "rubric": job.rubric.ref,
        "rubric_sha256": job.rubric.sha256(),
        "template_sha256": job.prompt.template_sha256,
    }


def model_mismatch(judge: JudgeTarget, reported: str | None) -> bool:
    """The API reported another model than the pin. Provider prefixes ('openai/') are ignored;
    a name that is merely part of the pin ('gpt-4o' for 'gpt-4o-mini-2024-07-18') is a mismatch."""
    return pin_mismatch(judge.model_pin, reported)


def pin_mismatch(model_pin: str, reported: str | None) -> bool:
    """``model_mismatch`` for a judge pinned to ``model_pin``."""
    if reported is None or model_pin.startswith("local/"):
        return False
    pinned = model_pin.split("@sha256:")[0].rsplit("/", 1)[-1]
    return reported.rsplit("/", 1)[-1] != pinned
