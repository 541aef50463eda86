"""The faithfulness axis (graded, judged): every claim in the output traced to what the world said.

The judge lists atomic claims with evidence ids and quotes. judgekit checks each citation: the
id names a tool result or a context item (never what the agent sent), and the quote occurs in
that item and is long enough to identify a fact (``prompt.quote_problem``). A claim the judge
supported with a failed citation is unsupported and counted as a judge citation error. A judge
that lists no claim for an output that makes some has not answered: unless the rubric allows
it, that verdict is unscored (``no_claims``), never a 1.0.
"""

from __future__ import annotations

from judgekit.axes.base import Axis
from judgekit.prompt import Evidence, Prompt, Section, call_sent_text, quote_problem
from judgekit.results import ClaimResult, FaithfulnessResult
from judgekit.rubric.model import FaithfulnessCriteria
from judgekit.trajectory import Trajectory
from judgekit.verdict import FaithfulnessAnswer, JudgeVerdict
from judgekit.world.diff import Diff


def faithfulness_sections(trajectory: Trajectory, evidence: Evidence, diff: Diff | None, show_output: bool) -> list[Section]:
    """Every call (what was sent, what came back), the context, and the output whose claims are checked."""
    calls = [item for i, call in enumerate(trajectory.calls)
             for item in ((f"A{i}", call_sent_text(call)), (f"R{i}", evidence.items[f"R{i}"]))]
    return [
        ("Tool calls (A: what the agent sent) and results (R: what the tool returned)", "tool_results", calls),
        ("Context", "context", [(k, v) for k, v in evidence.items.items() if k.startswith("C")]),
        ("Agent output (the claims to check)", "output", [("O", trajectory.output)]),
    ]


def _citation_problem(claim: str, evidence_items: list[dict[str, str]], evidence: Evidence, min_chars: int) -> str | None:
    if not evidence_items:
        return "no citation"
    for item in evidence_items:
        text = evidence.items.get(item["id"])
        if text is None:
            return f"cites {item['id']!r}, which is not a tool result or context item"
        problem = quote_problem(item["quote"], text, claim, min_chars)
        if problem is not None:
            return f"{item['id']}: {problem}"
    return None


def faithfulness_from_verdict(
    verdict: JudgeVerdict, evidence: Evidence, criteria: FaithfulnessCriteria, output: str
) -> FaithfulnessResult:
    if verdict.status != "scored":
        return FaithfulnessResult(
            status="unscored", unscored_reason=verdict.unscored_reason, error=verdict.detail, judge=verdict.provenance
        )
    if not verdict.answer.claims and output.strip() and not criteria.allow_no_claims:
        return FaithfulnessResult(
            status="unscored", unscored_reason="no_claims", judge=verdict.provenance,
            error="the judge listed no claim for an output that is not empty (a rubric whose outputs may "
            "make no claim sets faithfulness.allow_no_claims: true)",
        )
    claims: list[ClaimResult] = []
    for raw in verdict.answer.claims:
        cited = [{"id": e.id, "quote": e.quote} for e in raw.evidence]
        problem = _citation_problem(raw.claim, cited, evidence, criteria.min_quote_chars) if raw.supported else None
        claims.append(
            ClaimResult(claim=raw.claim, supported=raw.supported and problem is None, evidence=cited, citation_error=problem)
        )
    supported = sum(c.supported for c in claims)
    return FaithfulnessResult(
        score=supported / len(claims) if claims else 1.0,
        claims_total=len(claims),
        supported=supported,
        unsupported=len(claims) - supported,
        citation_errors=sum(c.citation_error is not None for c in claims),
        claims=claims,
        judge=verdict.provenance,
    )


class Faithfulness(Axis):
    name = "faithfulness"
    kind = "graded"
    result = FaithfulnessResult
    answer = FaithfulnessAnswer
    description = "Supported claims over all claims: every claim in the output traced to a tool result or the context."
    prompt_reads_task = False

    def judged(self, criteria: FaithfulnessCriteria) -> bool:
        return True

    def sections(self, trajectory, evidence, diff, show_output) -> list[Section]:
        return faithfulness_sections(trajectory, evidence, diff, show_output)

    def min_quote_chars(self, criteria: FaithfulnessCriteria) -> int:
        return criteria.min_quote_chars

    def from_verdict(self, criteria: FaithfulnessCriteria, result, verdict: JudgeVerdict,
                     prompt: Prompt) -> FaithfulnessResult:
        return faithfulness_from_verdict(verdict, prompt.evidence, criteria, prompt.output)

    def describe(self, result: FaithfulnessResult) -> str:
        text = f"{result.score:.2f} ({result.supported}/{result.claims_total} claims)"
        return text + (f", {result.citation_errors} citation error(s)" if result.citation_errors else "")

    def headline(self, result: FaithfulnessResult) -> str:
        """The score and the supported claims (citation errors: the ``describe`` of a wider cell)."""
        return f"{result.score:.2f} ({result.supported}/{result.claims_total})"

    def lost(self, result: FaithfulnessResult) -> list[tuple[str, str]]:
        return [(f"claim: {claim.claim}", claim.citation_error or "not supported by any tool result or context item")
                for claim in result.claims if not claim.supported]


AXIS = Faithfulness()
"""The faithfulness axis."""
