"""Commands: run, diff, schema, import, rubric."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from judgekit.cli._exit import EXIT_INPUT, AxisChoice, handle_errors
from judgekit.cli._out import one_line, say, say_json
from judgekit.cli._prepare import prepare_out, suite_inputs
from judgekit.cli.loop_cmd import (
    check_outputs,
    compare_options,
    compare_policy,
    history_option,
    open_history,
    report_options,
)
from judgekit.errors import InputError
from judgekit.importers import importer_names
from judgekit.schemas import SCHEMA_NAMES


@click.command()
@click.argument("suite", type=click.Path(path_type=Path))
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="Write the run record (JSON) here.")
@click.option(
    "--format", "fmt", type=click.Choice(["table", "jsonl"]), default="table", show_default=True,
    help="table for people; jsonl prints one JSON object per trajectory.",
)
@click.option("--judge-model", help="Override the judge model (pinned); recorded in provenance and the cache key.")
@click.option("--judge-api-base", help="Override the judge's OpenAI-compatible server.")
@click.option("--judge-api-key-env", help="Override the variable holding the judge's API key.")
@click.option("--allow-floating", is_flag=True, help="Allow an unpinned judge model; verdicts say so.")
@click.option("--concurrency", type=click.IntRange(1, 256), help="Judge calls in flight (default: suite's, 8).")
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path), help="Verdict cache (default .judgekit/cache).")
@click.option("--no-cache", is_flag=True, help="Neither read nor write the verdict cache.")
@click.option("--budget-tokens", type=click.IntRange(1), help="Stop judging cleanly past this many tokens.")
@click.option("--budget-usd", type=click.FloatRange(0, min_open=True), help="Stop judging cleanly past this cost.")
@click.option("--gate", "apply_gate", is_flag=True, help="Then gate the run: exit 1 when it fails (see `judgekit gate`).")
@click.option("--compare", "do_compare", is_flag=True,
              help="Then compare with the baseline (see `judgekit compare`) and record the run in the history.")
@compare_options
@click.option("--record", "do_record", is_flag=True, help="Record the run in the history (implied by --compare).")
@history_option
@report_options
@click.option("--dry-run", is_flag=True,
              help="Plan only: judge questions, how many the cache answers, estimated tokens and cost; spend nothing.")
@handle_errors
def run(suite: Path, out: Path | None, fmt: str, judge_model, judge_api_base, judge_api_key_env, allow_floating,
        concurrency, cache_dir, no_cache, budget_tokens, budget_usd, apply_gate, do_compare, baseline, max_drop,
        max_drop_axis, axes, require_baseline, do_record, history_path, junit, markdown, html, dry_run) -> None:
    """Score every trajectory of SUITE (a suite file, or a folder holding suite.yaml).

    Deterministic axes are scored first; judge axes go through the verdict cache, then the
    judge. Every verdict is stored the moment it is validated, so an interrupted run resumes
    without repeating a call. Results stream: --format jsonl prints each as it is merged, --out
    writes the run record (JSON Lines: header, one line per trajectory, footer) as it goes.

    With --compare the run is compared with its baseline (the suite's last green run in the
    history by default) and recorded in the history; it is green when its gate passed and the
    comparison did not fail. --junit, --markdown and --html write the reports.

    Exit codes: 0 ok, 1 the gate failed (with --gate) or the comparison flagged or failed (with
    --compare), 2 an input error (some trajectory could not be scored, or a bad flag or file),
    3 internal error. The gate is decided even when some trajectories could not be scored.
    """
    from judgekit.ci.loop import Reports, finish
    from judgekit.cli._render import TablePrinter, print_jsonl, print_ledger, progress_factory
    from judgekit.runtime import init
    from judgekit.judge.resolve import JudgeOverride
    from judgekit.run import RunOptions, run_suite
    from judgekit.run.record import is_run_record
    from judgekit.suite import Budget, load_suite

    init(tune_gc=True)  # a process that judges and ends: fewer, cheaper garbage collections
    loaded = load_suite(suite)
    reports = Reports(junit=junit, markdown=markdown, html=html)
    if not dry_run:
        if out is not None:
            prepare_out(out, suite_inputs(loaded), what="a run record", is_ours=is_run_record)
        from judgekit.ci.history import history_files

        baseline_file = [Path(baseline)] if do_compare and Path(baseline).exists() else []
        check_outputs({"--out": out, **{f"--{name}": path for name, path in reports.targets().items()}},
                      suite_inputs(loaded) + history_files(history_path) + baseline_file)
    budget = Budget(max_tokens=budget_tokens, max_cost_usd=budget_usd) if (budget_tokens or budget_usd) else None
    options = RunOptions(
        override=JudgeOverride(judge_model, judge_api_base, judge_api_key_env),
        allow_floating=allow_floating,
        concurrency=concurrency,
        cache_dir=cache_dir,
        use_cache=not no_cache,
        budget=budget,
        progress=progress_factory(),
    )
    if dry_run:
        from judgekit.run.estimate import estimate_run, render_estimate

        say(render_estimate(estimate_run(loaded, options)))
        return
    policy = compare_policy(max_drop, max_drop_axis, axes, require_baseline) if do_compare else None
    history = open_history(history_path, create=True) if (do_compare or do_record) else None
    table = TablePrinter() if fmt == "table" else None
    errors: list[tuple[str, str, str]] = []

    def on_result(result) -> None:
        if table is not None:
            table.add(result)
        else:
            print_jsonl(result)
        for axis in result.axes.values():
            if axis.status == "error":
                errors.append((result.trajectory_id, axis.axis, axis.error or ""))

    record = run_suite(loaded, options=options, on_result=on_result, keep_results=bool(reports), out=out,
                       keep_rows=history is not None)
    if table is not None:
        table.print(record)
    if record.ledger is not None:
        print_ledger(record.ledger)
    for trajectory_id, axis, error in errors[:MAX_ERRORS_SHOWN]:
        say(f"judgekit: error: {one_line(trajectory_id)} {axis}: {one_line(error)}", err=True)
    if len(errors) > MAX_ERRORS_SHOWN:
        say(f"judgekit: error: ... and {len(errors) - MAX_ERRORS_SHOWN} more axis error(s)"
            + (f" (all in {one_line(str(out))})" if out else ""), err=True)
    if apply_gate:
        from judgekit.cli._render import print_gate

        print_gate(record.gate_report, err=fmt == "jsonl")  # stdout stays JSON Lines
    outcome = finish(record, history=history, policy=policy, baseline=baseline, reports=reports, gate=apply_gate,
                     notify=_shown(history_path, err_only=fmt == "jsonl"))
    if history is not None:
        history.close()
    if outcome.exit_code:
        sys.exit(outcome.exit_code)


def _shown(history_path: Path, *, err_only: bool):
    """What ``run`` says of each step of the CI loop as it is done."""

    def show(step: str, value) -> None:
        if step == "compared":
            from judgekit.cli._render import print_comparison

            print_comparison(value, err=err_only)
        elif step == "recorded":
            say(f"recorded {value.run_id} in {one_line(str(history_path))}: "
                f"{'green' if value.green else 'not green'}", err=True)
        elif step == "wrote":
            say(f"wrote {one_line(str(value))}", err=True)

    return show


MAX_ERRORS_SHOWN = 50


@click.command()
@click.argument("before", type=click.Path(path_type=Path))
@click.argument("after", type=click.Path(path_type=Path))
@click.option("--key", "keys", multiple=True, metavar="POINTER=FIELD", help="JSON: match the list at POINTER by FIELD.")
@click.option("--text", is_flag=True, help="The compact text rendering a judge sees, instead of JSON.")
@click.option("--max-chars", type=int, default=8000, show_default=True, help="Size cap of --text.")
@handle_errors
def diff(before: Path, after: Path, keys: tuple[str, ...], text: bool, max_chars: int) -> None:
    """Canonical end-state diff of two JSON documents or two SQLite databases."""
    from judgekit.world.diff import diff_paths, render_text
    from judgekit.errors import InputError

    key_map = {}
    for item in keys:
        pointer, sep, field = item.partition("=")
        if not sep or not field:
            raise InputError(f"--key {item!r}: expected POINTER=FIELD, e.g. /users=id")
        key_map[pointer] = field
    result = diff_paths(before, after, keys=key_map or None)
    if text:
        say(render_text(result, max_chars=max_chars))
    else:
        say_json(result.to_json())


@click.command()
@click.argument("name", type=click.Choice(sorted(SCHEMA_NAMES)))
@handle_errors
def schema(name: str) -> None:
    """Print the JSON Schema of a file format."""
    from judgekit.schemas import schema_for

    say_json(json.dumps(schema_for(name), indent=2, sort_keys=True))


class _ImportCommand(click.Command):
    """``judgekit import --help`` lists every registered format with its one-line description
    (computed only when help is shown: describing a format imports its module)."""

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        from judgekit.importers import describe

        with formatter.section("Formats"):
            formatter.write_dl([(name, describe(name)) for name in importer_names()])
        super().format_epilog(ctx, formatter)


@click.command("import", cls=_ImportCommand)
@click.argument("fmt", metavar="FORMAT", type=click.Choice(importer_names()))
@click.argument("src", type=click.Path(path_type=Path))
@click.option("--out", required=True, type=click.Path(file_okay=False, path_type=Path), help="Folder to write into.")
@click.option("--registered", type=click.DateTime(formats=["%Y-%m-%d"]), default=None,
              help="The day imported rubrics are registered on (YYYY-MM-DD). Default: a date the input "
              "itself gives, else 1970-01-01, so that an import is the same whenever it runs.")
@click.option("--draft-rubric", is_flag=True, help="Also draft rubrics from the tool definitions the input "
              "declares (formats that carry them).")
@handle_errors
def import_(fmt: str, src: Path, out: Path, registered, draft_rubric: bool) -> None:
    """Convert another tool's trajectories (FORMAT) at SRC into judgekit files under --out.

    The import is all or nothing: files appear in --out only when every record converted.
    """
    from judgekit._util.files import protect
    from judgekit.importers import accepted_options, get_importer

    importer = get_importer(fmt)
    options = {"registered": registered.date() if registered else None, "draft_rubric": draft_rubric or None}
    given = {name: value for name, value in options.items() if value is not None}
    refused = sorted(set(given) - accepted_options(importer))
    if refused:
        flags = ", ".join("--" + name.replace("_", "-") for name in refused)
        raise InputError(f"the {fmt} importer does not take {flags}")
    with protect([src]):  # an import may write next to its source, never over it
        written = importer(src, out, **given)
    for path in written:
        say(one_line(str(path)))


@click.group()
def rubric() -> None:
    """Pre-register, check and lint rubric files."""


def _rubric_paths(paths: tuple[Path, ...]) -> list[Path]:
    return list(paths) or [Path("rubrics")]


@rubric.command("lock")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--lock", "lock_path", type=click.Path(dir_okay=False, path_type=Path), default=Path("rubrics/rubrics.lock"), show_default=True)
@handle_errors
def rubric_lock(paths: tuple[Path, ...], lock_path: Path) -> None:
    """Freeze the hash of every rubric not locked yet (PATHS default: rubrics/)."""
    import judgekit.rubric.lock as locking

    added, problems = locking.lock(_rubric_paths(paths), lock_path)
    for problem in problems:
        say(f"judgekit: error: {one_line(str(problem))}", err=True)
    if problems:
        say(f"nothing written to {one_line(str(lock_path))}", err=True)
        sys.exit(EXIT_INPUT)
    for ref in added:
        say(f"locked {ref}")
    if not added:
        say(f"{one_line(str(lock_path))}: every rubric is already locked")


@rubric.command("check")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--lock", "lock_path", type=click.Path(dir_okay=False, path_type=Path), default=Path("rubrics/rubrics.lock"), show_default=True)
@handle_errors
def rubric_check(paths: tuple[Path, ...], lock_path: Path) -> None:
    """Fail when a locked rubric changed without a version bump, or a rubric is not locked."""
    import judgekit.rubric.lock as locking

    problems = locking.check(_rubric_paths(paths), lock_path)
    for problem in problems:
        say(f"judgekit: error: {one_line(str(problem))}", err=True)
    if problems:
        sys.exit(EXIT_INPUT)
    say("every rubric matches its locked hash")


@rubric.command("lint")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@handle_errors
def rubric_lint(paths: tuple[Path, ...]) -> None:
    """Flag version-bound language, vague criteria and empty axes, each with file:line."""
    from judgekit.axes.lint import lint_file
    from judgekit.suite import rubric_files

    findings = [f for path in rubric_files(_rubric_paths(paths)) for f in lint_file(path)]
    for finding in findings:
        say(one_line(str(finding)))
    if findings:
        say(f"{len(findings)} finding(s)", err=True)
        sys.exit(EXIT_INPUT)


@rubric.command("schema")
@handle_errors
def rubric_schema() -> None:
    """Print the rubric file's JSON Schema."""
    from judgekit.schemas import schema_for

    say_json(json.dumps(schema_for("rubric"), indent=2, sort_keys=True))


@click.group()
def prompt() -> None:
    """Show exactly what a judge receives."""


@prompt.command("show")
@click.argument("suite", type=click.Path(path_type=Path))
@click.argument("trajectory_id")
@click.option("--axis", type=AxisChoice(judged=True), required=True)
@click.option("--show-output", is_flag=True, help="task_success: include the agent's output (off by default).")
@click.option("--json", "as_json", is_flag=True, help="The messages as JSON, with the template hash.")
@handle_errors
def prompt_show(suite: Path, trajectory_id: str, axis: str, show_output: bool, as_json: bool) -> None:
    """Print the judge prompt for TRAJECTORY_ID of SUITE on one axis."""
    from judgekit.axes.table import axis_named
    from judgekit.trajectory import WorldState
    from judgekit.errors import InputError
    from judgekit.prompt import prompt_summary
    from judgekit.suite.inputs import iter_trajectories_of
    from judgekit.suite import load_suite

    loaded = load_suite(suite)
    chosen = axis_named(axis)
    for rubric, item in iter_trajectories_of(loaded):
        if item.trajectory.id != trajectory_id:
            continue
        if chosen.criteria(rubric) is None:
            raise InputError(f"rubric {rubric.ref} has no {axis} section", loaded.rubric_files[rubric.ref])
        spec = rubric.judge or loaded.suite.judge
        show = show_output or bool(spec and spec.show_output_for_task_success)
        built = chosen.prompt(rubric, item, WorldState(item), show)
        if as_json:
            say_json(json.dumps(prompt_summary(built), indent=2))
        else:
            say(built.render())
        return
    raise InputError(f"no trajectory {trajectory_id!r} in the suite", loaded.path)


@click.group()
def cache() -> None:
    """Inspect and clean the verdict cache."""


_cache_dir_option = click.option(
    "--cache-dir", type=click.Path(file_okay=False, path_type=Path), default=Path(".judgekit/cache"), show_default=True
)


@cache.command("stats")
@_cache_dir_option
@handle_errors
def cache_stats(cache_dir: Path) -> None:
    """Verdicts (entries), fingerprints (the rerun memo) and size on disk (a folder that does
    not exist is reported, not created)."""
    from judgekit.cache.store import cache_stats as stats

    say_json(json.dumps(stats(cache_dir), indent=2))


@cache.command("clear")
@_cache_dir_option
@handle_errors
def cache_clear(cache_dir: Path) -> None:
    """Remove every cached verdict and fingerprint; a cache that cannot be read loses its database files."""
    from judgekit.cache.files import CacheLocked, clear_unreadable
    from judgekit.cache.store import VerdictCache
    from judgekit.errors import InputError

    if not cache_dir.exists():
        say(f"no verdict cache at {one_line(str(cache_dir))}: nothing to clear")
        return
    try:
        store = VerdictCache(cache_dir, create=False)
    except CacheLocked:
        raise  # in use by another process, not unreadable: its files are never removed
    except InputError:
        if not cache_dir.is_dir():
            raise
        db = cache_dir / "cache.db"
        if db.is_dir() and not db.is_symlink():
            raise InputError("its cache.db is a folder, which no verdict cache has: judgekit removes no folder, "
                             "remove it yourself", cache_dir) from None
        removed = clear_unreadable(cache_dir)
        names = ", ".join(p.name for p in removed) or "none"
        say(f"the verdict cache at {one_line(str(cache_dir))} could not be read; removed its database files: {names}")
        return
    with store:
        say(f"removed {store.clear()} verdict(s)")


@cache.command("prune")
@_cache_dir_option
@click.option("--older-than-days", type=click.FloatRange(0), required=True, help="Remove verdicts older than this.")
@handle_errors
def cache_prune(cache_dir: Path, older_than_days: float) -> None:
    """Remove old verdicts, entries judgekit refuses to read (another format, tampered) and
    fingerprints whose verdict is gone."""
    from judgekit.cache.store import VerdictCache

    if not cache_dir.exists():
        say(f"no verdict cache at {one_line(str(cache_dir))}: nothing to prune")
        return
    with VerdictCache(cache_dir, create=False) as store:
        say(f"removed {store.prune(older_than_days)} verdict(s)")
