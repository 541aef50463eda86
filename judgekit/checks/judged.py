"""Judge verdicts turned into axis results: faithfulness (citations verified) and task success.

The judge lists atomic claims with evidence ids and quotes. judgekit checks each citation: the
id exists and the quote occurs in that item (whitespace and case normalised). A claim the judge
supported with a failed citation is unsupported and counted as a judge citation error.
"""

from __future__ import annotations

from judgekit.prompt import Evidence, quote_found
from judgekit.results import ClaimResult, FaithfulnessResult, TaskSuccessResult, CheckOutcome
from judgekit.verdict import JudgeVerdict


def _citation_problem(evidence_items: list[dict[str, str]], evidence: Evidence) -> str | None:
    if not evidence_items:
        return "no citation"
    for item in evidence_items:
        text = evidence.items.get(item["id"])
        if text is None:
            return f"cites {item['id']!r}, which does not exist"
        if not quote_found(item["quote"], text):
            return f"quote {item['quote'][:80]!r} does not occur in {item['id']}"
    return None


def faithfulness_from_verdict(verdict: JudgeVerdict, evidence: Evidence) -> FaithfulnessResult:
    if verdict.status != "scored":
        return FaithfulnessResult(
            status="unscored", unscored_reason=verdict.unscored_reason, error=verdict.detail, judge=verdict.provenance
        )
    claims: list[ClaimResult] = []
    for raw in verdict.answer["claims"]:
        cited = [{"id": e["id"], "quote": e["quote"]} for e in raw["evidence"]]
        problem = _citation_problem(cited, evidence) if raw["supported"] else None
        claims.append(
            ClaimResult(claim=raw["claim"], supported=raw["supported"] and problem is None, evidence=cited, citation_error=problem)
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
    passed_by_judge = verdict.answer["verdict"] == "pass"
    check = CheckOutcome(check="judge", passed=passed_by_judge, reason="; ".join(verdict.answer["reasons"]) or verdict.answer["verdict"], source="judge")
    checks = [*result.checks, check]
    passed = all(c.passed for c in checks)
    return result.model_copy(update={**update, "checks": checks, "passed": passed, "score": 1.0 if passed else 0.0})
