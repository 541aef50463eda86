"""How a run runs: ``RunOptions``, and the executors a run can name.

Executors are named in ``RunOptions.executor``: ``local`` is built in; a third party registers a
factory ``(loaded suite, RunOptions) -> Executor`` under the entry-point group
``judgekit.executors`` ("name = module:function"). A third party cannot shadow a built-in name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import import_module
from importlib.metadata import entry_points
from pathlib import Path

from judgekit.cache.base import VerdictStore
from judgekit.cache.store import DEFAULT_CACHE_DIR, VerdictCache
from judgekit.errors import ConfigError
from judgekit.judge.backend import Backend
from judgekit.judge.resolve import JudgeOverride
from judgekit.run.execute import Executor, LocalExecutor
from judgekit.run.pace import Pacer
from judgekit.run.plan import DEFAULT_WINDOW
from judgekit.suite import Budget, LoadedSuite


@dataclass
class RunOptions:
    """How to run (none of it changes what is measured, except ``override``, which is recorded)."""

    override: JudgeOverride = field(default_factory=JudgeOverride)
    allow_floating: bool = False
    concurrency: int | None = None
    cache_dir: Path | None = None
    use_cache: bool = True
    budget: Budget | None = None
    backend: Backend | None = None
    progress: Callable[[int], Callable[[], None]] | None = None  # questions in a window -> per-verdict tick
    window: int = DEFAULT_WINDOW
    executor: Executor | str = "local"
    """Answers the judge questions: the name of a registered executor (``local``, or one a third
    party registers under the entry-point group ``judgekit.executors``), made for the run and
    closed by it; or an ``Executor``, which its caller closes."""
    pacer: Pacer | None = None
    """Each judge endpoint's rate and the budget, for the ``local`` executor: None, a
    ``LocalPacer`` holding ``budget`` (else the suite's). One passed in keeps its own budget,
    and its own clock and sleep (tests pass one on a virtual clock): a run that also names a
    budget is refused."""


# --- the store and the executors a run can name ---------------------------------------------------


def cache_dir_of(loaded: LoadedSuite, options: RunOptions) -> Path:
    """The verdict cache a run of ``loaded`` uses: ``--cache-dir``, else the suite's, else .judgekit/cache."""
    suite = loaded.suite
    return Path(options.cache_dir or (loaded.resolve(suite.cache_dir) if suite.cache_dir else DEFAULT_CACHE_DIR))


def open_store(loaded: LoadedSuite, options: RunOptions, *, read_only: bool = False) -> VerdictStore | None:
    """The suite's verdict cache (see ``cache_dir_of``), or None without a cache."""
    if not options.use_cache:
        return None
    return VerdictCache(cache_dir_of(loaded, options), read_only=read_only)


def local_executor(loaded: LoadedSuite, options: RunOptions) -> LocalExecutor:
    """The ``local`` executor for a run of ``loaded``: the suite's store, concurrency and budget
    unless ``options`` say otherwise."""
    return LocalExecutor(store=open_store(loaded, options), backend=options.backend,
                         concurrency=options.concurrency or loaded.suite.concurrency,
                         budget=options.budget or loaded.suite.budget, progress=options.progress, pacer=options.pacer)


ExecutorFactory = Callable[[LoadedSuite, RunOptions], Executor]
"""Makes the executor of one run: ``(loaded suite, options) -> Executor``; the run closes it."""

ENTRY_POINT_GROUP = "judgekit.executors"
BUILTIN = {"local": "judgekit.run.options:local_executor"}


def _registry() -> dict[str, str]:
    found = {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}
    return {**found, **BUILTIN}  # built-ins cannot be shadowed


def executor_names() -> list[str]:
    """The executors a run can name: the built-in ones and those registered as entry points."""
    return sorted(_registry())


def executor_factory(name: str) -> ExecutorFactory:
    """The factory registered under ``name``; a ConfigError names the known ones."""
    target = BUILTIN.get(name) or _registry().get(name)  # a built-in name needs no scan of installed packages
    if target is None:
        raise ConfigError(f"unknown executor {name!r}; known: {', '.join(executor_names())} (a third party's "
                          f"executor registers its factory under the entry-point group {ENTRY_POINT_GROUP!r})")
    module, _, attr = target.partition(":")
    return getattr(import_module(module), attr)
