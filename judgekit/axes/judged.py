"""Judge verdicts turned into axis results: faithfulness (citations verified) and task success.

The judge lists atomic claims with evidence ids and quotes. judgekit checks each citation: the
id names a tool result or a context item (never what the agent sent), and the quote occurs in
that item and is long enough to identify a fact (``prompt.quote_problem``). A claim the judge
supported with a failed citation is unsupported and counted as a judge citation error. A judge
that lists no claim for an output that makes some has not answered: unless the rubric allows
it, that verdict is unscored (``no_claims``), never a 1.0.
"""

from __future__ import annotations

from judgekit.prompt import Evidence, quote_problem
from judgekit.results import CheckOutcome, ClaimResult, FaithfulnessResult, TaskSuccessResult
from judgekit.rubric.model import FaithfulnessCriteria
from judgekit.verdict import JudgeVerdict


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


def task_success_with_verdict(result: TaskSuccessResult, verdict: JudgeVerdict) -> TaskSuccessResult:
    """Add the judge's check to the deterministic ones; unscored makes the axis unscored."""
    if result.status == "error":
        return result
    update = {"judge": verdict.provenance, "source": "judge"}
    if verdict.status != "scored":
        return result.model_copy(
            update={**update, "status": "unscored", "unscored_reason": verdict.unscored_reason,
                    "error": verdict.detail, "passed": None, "score": None}
        )
    answer = verdict.answer
    check = CheckOutcome(check="judge", passed=answer.verdict == "pass", reason="; ".join(answer.reasons) or answer.verdict,
                         source="judge")
    checks = [*result.checks, check]
    passed = all(c.passed for c in checks)
    return result.model_copy(update={**update, "checks": checks, "passed": passed, "score": 1.0 if passed else 0.0})
