"""A run as a first-class object: plan (pure, picklable), execute (any ``Executor``), merge.

    plan = plan_run(loaded, select=ids, repeats=3)     # deterministic axes scored, judge jobs built
    verdicts = await executor.execute(plan.jobs)       # LocalExecutor here; Ray or a queue elsewhere, asking
                                                       # each question with ``ask``, paced by one ``Pacer``
                                                       # (each endpoint's rate, the budget)
    results = merge(plan, verdicts)

``run_suite`` / ``run_suite_async`` do all three in bounded windows and return a ``RunRecord``.
"""

from judgekit.run.api import RunOptions, run_suite, run_suite_async
from judgekit.run.ask import ask
from judgekit.run.execute import Executor, LocalExecutor
from judgekit.run.options import executor_names, local_executor, open_store
from judgekit.run.jobs import JudgeJob
from judgekit.run.judging import JudgeRunner
from judgekit.run.ledger import Ledger
from judgekit.run.merge import judged_results, merge
from judgekit.run.pace import Endpoint, LocalPacer, Pacer
from judgekit.run.plan import (
    PlannedJudgement,
    RunPlan,
    iter_deterministic,
    iter_plans,
    iter_trajectories_of,
    plan_run,
    score_deterministic,
)
from judgekit.run.record import RunFooter, RunHeader, RunRecord, open_run, read_run

__all__ = [
    "Endpoint", "Executor", "JudgeJob", "JudgeRunner", "Ledger", "LocalExecutor", "LocalPacer", "Pacer", "PlannedJudgement", "RunFooter", "RunHeader",
    "RunOptions", "RunPlan", "RunRecord", "ask", "executor_names", "iter_deterministic", "iter_plans",
    "iter_trajectories_of", "judged_results", "local_executor", "merge", "open_run", "open_store", "plan_run",
    "read_run", "run_suite", "run_suite_async", "score_deterministic",
]
