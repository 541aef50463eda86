"""Running a suite: plan a window, execute its judge questions, merge, let the results go.

``run_suite`` / ``run_suite_async`` return a complete ``RunRecord`` (or, with ``keep_results=False``,
one without the per-trajectory results, which went to ``on_result`` and ``out`` as they were
merged). Memory is bounded by the window, not by the suite: a run of a million trajectories
holds a window of them, the per-axis tallies and the gate's running means.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

from judgekit._util.files import relative_to
from judgekit._util.clock import utc_now
from judgekit._util.version import __version__
from judgekit.results import TrajectoryResult
from judgekit.run.execute import Executor, LocalExecutor  # noqa: F401 - LocalExecutor's former home
from judgekit.run.options import RunOptions, executor_factory
from judgekit.run.options import cache_dir_of, local_executor, open_store  # noqa: F401 - former home
from judgekit.run.merge import merge
from judgekit.run.plan import Select, iter_plans
from judgekit.run.record import RubricEntry, RunHeader, RunRecord, line_of, new_run_id, project_state
from judgekit.run.remeasure import Measure
from judgekit.suite import LoadedSuite, load_suite


def header_for(loaded: LoadedSuite, record_dir: Path | None = None) -> RunHeader:
    """The header of a run of ``loaded`` whose record goes into ``record_dir`` (None: memory only)."""
    base = loaded.base_dir
    return RunHeader(
        run_id=new_run_id(),
        suite=loaded.suite.name,
        suite_file=relative_to(loaded.path.resolve(), (record_dir or Path.cwd()).resolve()),
        project=project_state(base),
        judgekit_version=__version__,
        started_at=utc_now(),
        rubrics={
            ref: RubricEntry(sha256=rubric.sha256(), file=relative_to(loaded.rubric_files[ref], base))
            for ref, rubric in sorted(loaded.rubrics.items())
        },
        gate=loaded.suite.gate,
        approval=loaded.suite.approval,
        calibration_dir=loaded.suite.calibration_dir,
    )


async def run_suite_async(
    suite: str | Path | LoadedSuite,
    *,
    options: RunOptions | None = None,
    select: Select = None,
    executor: Executor | None = None,
    on_result: Callable[[TrajectoryResult], None] | None = None,
    keep_results: bool = True,
    out: str | Path | None = None,
    keep_rows: bool = False,
) -> RunRecord:
    """Run ``suite`` (a suite file, a folder with suite.yaml, or a loaded suite) and return its
    record, gate report embedded. Safe to await from inside a running event loop.

    ``out``: write the record there as it is made (JSON Lines, atomically: the file appears
    when the run ends, never half-written). ``on_result``: called with each trajectory's result
    as soon as it is merged. ``keep_results=False``: the record returned leaves them out (for
    runs too big to hold). ``executor``: answers the judge questions (default: ``options.executor``).
    ``keep_rows``: keep the rows ``compare`` and the history read (``RunRecord.rows()``).

    The footer is made by ``judgekit.run.remeasure.Measure`` from the results, exactly as a record
    read back is measured again.
    """
    from judgekit._util.files import AtomicFile, protect

    options = options or RunOptions()
    loaded = suite if isinstance(suite, LoadedSuite) else load_suite(suite)
    header = header_for(loaded, Path(out).parent if out is not None else None)
    measure = Measure(loaded, keep_rows=keep_rows)
    kept: list[TrajectoryResult] = []
    if executor is None and not isinstance(options.executor, str):
        executor = options.executor  # the caller's: not closed here
    own_executor = executor is None
    make = executor_factory(options.executor) if own_executor else None  # an unknown name fails before any work
    with ExitStack() as stack:
        stack.enter_context(protect(loaded.input_files()))  # a record never replaces the suite's own files
        writer = stack.enter_context(AtomicFile(out)) if out is not None else None
        if writer is not None:
            writer.write(line_of("header", header))
        if own_executor:
            stack.callback(lambda: executor is not None and executor.close())
        plans = iter_plans(loaded, select=select, override=options.override, allow_floating=options.allow_floating,
                           window=options.window)
        while (plan := await asyncio.to_thread(next, plans, None)) is not None:
            if plan.judgements:
                if executor is None:
                    executor = make(loaded, options)
                verdicts = await executor.execute(plan.jobs)
                results = merge(plan, verdicts)
            else:
                results = plan.items
            for result in results:
                measure.add(result)
                if writer is not None:
                    writer.write(line_of("result", result))
                if on_result is not None:
                    on_result(result)
                if keep_results:
                    kept.append(result)
        footer = measure.footer(finished_at=utc_now(),
                                ledger=executor.ledger.model_copy(deep=True) if executor is not None else None)
        if writer is not None:
            writer.write(line_of("footer", footer))
    record = RunRecord.of(header, kept, footer)
    if out is not None:
        record._source = Path(out)
    if keep_rows:
        record._rows = measure.rows_of(header, footer)
    return record


def run_suite(suite: str | Path | LoadedSuite, **kwargs) -> RunRecord:
    """``run_suite_async`` for callers without an event loop; from inside a running loop (a
    notebook) it runs on a thread of its own, so it works there too."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(run_suite_async(suite, **kwargs))
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, run_suite_async(suite, **kwargs)).result()
