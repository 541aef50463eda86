"""pytest plugin: judge suites as test items, beside the unit tests and in the same JUnit output.

Registered through the ``pytest11`` entry point, so it loads in every pytest session where
judgekit is installed; until a suite is named it does nothing and imports nothing of judgekit.

    pytest --judgekit-suite examples/email-update/suite.yaml --junitxml junit.xml

or, in the project's pytest configuration (collected, like ``testpaths``, when pytest is run
without path arguments)::

    [tool.pytest.ini_options]
    judgekit_suites = ["examples/email-update/suite.yaml"]

Each trajectory x axis of a suite is one item, ``suite.yaml::<trajectory id>::<axis>``. The suite
runs once per session, through ``judgekit.run_suite``, when its first item runs. An item passes
when its verdict passes (binary axes) or has full marks (graded axes), fails with what it lost,
is skipped with the reason when the verdict is unscored or its judge is advisory (not approved
by calibration), and is an error when the axis could not be scored (bad input). These are the
JUnit report's rules (``judgekit.report.junit.outcomes``).

With ``--judgekit-history PATH`` each suite's run is also recorded in that run history and
compared with the suite's last green run there, as ``judgekit run --compare`` does (through
``judgekit.finish``): one more item per suite, ``suite.yaml::compare``, fails when the comparison
flags or fails.

The ``judgekit_run`` fixture runs a suite for a test of one's own: ``judgekit_run(path, **options)``
returns the ``RunRecord`` (options are ``judgekit.run.RunOptions`` fields).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("judgekit", "judgekit: judge suites as test items")
    group.addoption("--judgekit-suite", action="append", default=[], metavar="PATH", dest="judgekit_suite",
                    help="Run this judgekit suite (a suite file or a folder holding suite.yaml) and report each "
                         "trajectory x axis as a test item. Repeatable.")
    group.addoption("--judgekit-judge-model", default=None, metavar="MODEL",
                    help="Use this judge model instead of the suites' own (recorded in each verdict's provenance).")
    group.addoption("--judgekit-judge-api-base", default=None, metavar="URL",
                    help="Send judge questions to this OpenAI-compatible endpoint.")
    group.addoption("--judgekit-cache-dir", default=None, metavar="DIR",
                    help="The verdict cache (default: judgekit's own).")
    group.addoption("--judgekit-history", default=None, metavar="PATH",
                    help="Record each suite's run in this run history (SQLite) and compare it with the suite's "
                         "last green run there; a suite.yaml::compare item fails when the comparison does.")
    parser.addini("judgekit_suites", type="linelist", default=[],
                  help="judgekit suites to collect when pytest runs without path arguments (paths relative to "
                       "the configuration file).")


_RUNS = pytest.StashKey[dict]()
"""Suite file -> (record, outcomes by (trajectory id, axis), ``judgekit.finish``'s outcome) or the
exception its run raised."""


def _suite_file(path: Path) -> Path:
    path = path.resolve()
    return path / "suite.yaml" if path.is_dir() else path


def _configured_suites(config: pytest.Config) -> list[Path]:
    found = [Path(config.invocation_params.dir, p) for p in config.getoption("judgekit_suite") or []]
    listed = config.getini("judgekit_suites")
    if listed and config.args_source != pytest.Config.ArgsSource.ARGS:
        base = config.inipath.parent if config.inipath is not None else config.rootpath
        found += [Path(base, p) for p in listed]
    unique: dict[Path, None] = {}
    for path in found:
        unique.setdefault(_suite_file(path), None)
    return list(unique)


def _nodeid(config: pytest.Config, path: Path) -> str:
    try:
        return path.relative_to(config.rootpath).as_posix()
    except ValueError:  # outside the rootdir: as the user would type it
        try:
            return Path(os.path.relpath(path, config.invocation_params.dir)).as_posix()
        except ValueError:  # another drive
            return path.as_posix()


@pytest.hookimpl(tryfirst=True)  # before -k / -m deselect, so they apply to these items too
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    suites = _configured_suites(config)
    if not suites:
        return
    for path in suites:
        collector = SuiteFile.from_parent(session, path=path, nodeid=_nodeid(config, path))
        items.extend(session.genitems(collector))


def _options(config: pytest.Config, **given):
    from judgekit.judge.resolve import JudgeOverride
    from judgekit.run import RunOptions

    model = config.getoption("judgekit_judge_model")
    api_base = config.getoption("judgekit_judge_api_base")
    cache_dir = config.getoption("judgekit_cache_dir")
    if "override" not in given and (model or api_base):
        given["override"] = JudgeOverride(model, api_base, None)
    if "cache_dir" not in given and cache_dir:
        given["cache_dir"] = Path(config.invocation_params.dir, cache_dir)
    return RunOptions(**given)


def _history(config: pytest.Config) -> Path | None:
    given = config.getoption("judgekit_history")
    return Path(config.invocation_params.dir, given) if given else None


def _run(config: pytest.Config, path: Path):
    """The suite's run, once per session, finished (recorded and compared when a history is
    given): (record, outcome map, finish's outcome); raises what the run raised."""
    runs = config.stash.setdefault(_RUNS, {})
    if path not in runs:
        try:
            from judgekit.ci.compare import ComparePolicy
            from judgekit.ci.loop import finish
            from judgekit.report.junit import outcome_map
            from judgekit.run import run_suite

            history = _history(config)
            record = run_suite(path, options=_options(config), keep_rows=history is not None)
            finished = finish(record, history=history, policy=ComparePolicy() if history is not None else None,
                              gate=False)
            runs[path] = (record, outcome_map(record), finished)
        except Exception as exc:  # noqa: BLE001 - every item of the suite reports it, the run is not retried
            runs[path] = exc
    found = runs[path]
    if isinstance(found, Exception):
        raise SuiteRunError(f"the judgekit run of {path} failed: {found}") from found
    return found


class SuiteRunError(Exception):
    """The suite could not be loaded or run: every one of its items is an error."""


class SuiteFile(pytest.File):
    """A judgekit suite: one item per trajectory x axis, read without running anything."""

    def collect(self):
        from judgekit.axes.table import axes_of
        from judgekit.errors import JudgekitError
        from judgekit.suite.inputs import iter_trajectories_of
        from judgekit.suite import load_suite

        try:
            loaded = load_suite(self.path)
            found = [(item, [axis.name for axis in axes_of(rubric)]) for rubric, item in iter_trajectories_of(loaded)]
        except JudgekitError as exc:
            raise SuiteRunError(f"judgekit could not read the suite {self.path}: {exc}") from exc
        from judgekit._util.text import one_line

        for item, axes in found:
            tid = item.trajectory.id
            for axis in axes:
                # The shown name is escaped (an id cannot draw on the terminal or fake a result
                # line); the raw id finds the result.
                yield AxisItem.from_parent(self, name=f"{one_line(tid)}::{axis}", trajectory_id=tid, axis=axis,
                                           source=(item.path, item.line))
        if _history(self.config) is not None:
            yield CompareItem.from_parent(self, name="compare")

    def repr_failure(self, excinfo):  # pytest.Collector's signature: (excinfo) only
        if isinstance(excinfo.value, SuiteRunError):
            return str(excinfo.value)
        return super().repr_failure(excinfo)


class AxisItem(pytest.Item):
    """One trajectory on one axis of a suite's run."""

    def __init__(self, *, trajectory_id: str, axis: str, source: tuple[Path, int], **kwargs) -> None:
        super().__init__(**kwargs)
        self.trajectory_id = trajectory_id
        self.axis = axis
        self.source = source
        """The trajectory's file and (1-based) line."""
        self._outcome = None

    def setup(self) -> None:
        # In setup, so that a run that failed and an axis with bad input are errors, not failures.
        try:
            _, outcomes, _ = _run(self.config, self.path)
        except SuiteRunError as exc:
            pytest.fail(str(exc), pytrace=False)
        outcome = outcomes.get((self.trajectory_id, self.axis))
        if outcome is None:
            pytest.fail(f"the run record has no result for {self.trajectory_id!r} on {self.axis}", pytrace=False)
        if outcome.kind == "error":
            pytest.fail(outcome.message, pytrace=False)
        if outcome.kind == "skipped":
            # Reported at the trajectory's line, not at this one, as a skip marker would be.
            try:
                skip = pytest.skip.Exception(outcome.message, _use_item_location=True)
            except TypeError:  # a pytest without the (private) flag: reported here instead
                skip = pytest.skip.Exception(outcome.message)
            raise skip
        self._outcome = outcome

    def runtest(self) -> None:
        outcome = self._outcome
        if outcome.kind == "failed":
            pytest.fail("\n".join((outcome.headline, *(f"  lost: {line}" for line in outcome.details))),
                        pytrace=False)

    def reportinfo(self):
        path, line = self.source
        from judgekit._util.text import one_line

        return path, max(line - 1, 0), f"{one_line(self.trajectory_id)} [{self.axis}]"


class CompareItem(pytest.Item):
    """The suite's run compared with its last green run in the ``--judgekit-history``."""

    def runtest(self) -> None:
        try:
            _, _, finished = _run(self.config, self.path)
        except SuiteRunError as exc:
            pytest.fail(str(exc), pytrace=False)
        comparison = finished.comparison
        if comparison is not None and not comparison.passed:
            from judgekit._util.text import one_line, redact

            lines = [one_line(redact(reason)) for reason in comparison.reasons]
            pytest.fail("\n".join(["the comparison with the baseline failed:", *lines]), pytrace=False)

    def reportinfo(self):
        return self.path, None, "compare with the last green run"


@pytest.fixture
def judgekit_run(request: pytest.FixtureRequest):
    """``judgekit_run(path, **options) -> RunRecord``: run a judgekit suite in a test. Options are
    ``RunOptions`` fields; the command line's judge and cache options apply unless given. A suite
    the session already ran for its items (and no options given) is not run again."""
    config = request.config

    def run(path, **options):
        from judgekit.run import run_suite

        suite = _suite_file(Path(path))
        if not options:
            return _run(config, suite)[0]
        return run_suite(suite, options=_options(config, **options))

    return run
