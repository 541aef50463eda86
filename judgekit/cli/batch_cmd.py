"""Command group: batch (provider batch APIs as a verdict-cache filler): submit, status, collect."""

from __future__ import annotations

from pathlib import Path

import click

from judgekit.cli._exit import handle_errors
from judgekit.cli._out import one_line, say

_suite_argument = click.argument("suite", required=False, type=click.Path(path_type=Path))
_cache_option = click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path),
                             help="Verdict cache the batches are recorded in (default: the suite's, else .judgekit/cache).")


def _usd(value: float | None) -> str:
    return "unknown" if value is None else f"${value:.4f}"


def _server_options(func):
    func = click.option("--judge-api-key-env", help="With --judge-api-base: a server and key variable a batch "
                        "record may use (as given to `batch submit`).")(func)
    return click.option("--judge-api-base", help="The judge's OpenAI-compatible server, as given to `batch submit`.")(func)


def _where(suite: Path | None, cache_dir: Path | None, api_base: str | None, api_key_env: str | None):
    """The cache folder, the suite name whose batches a command reads, and the servers a record
    may send an API key to (``judgekit.run.batch.servers_of``)."""
    from judgekit.cache.store import DEFAULT_CACHE_DIR
    from judgekit.judge.resolve import JudgeOverride
    from judgekit.run.batch import servers_of
    from judgekit.run.options import RunOptions, cache_dir_of
    from judgekit.suite import load_suite

    override = JudgeOverride(api_base=api_base, api_key_env=api_key_env)
    if suite is None:
        return Path(cache_dir or DEFAULT_CACHE_DIR), None, servers_of(None, override)
    loaded = load_suite(suite)
    return cache_dir_of(loaded, RunOptions(cache_dir=cache_dir)), loaded.suite.name, servers_of(loaded, override)


@click.group("batch")
def batch() -> None:
    """Judge through providers' batch APIs (about half the price, answered within a day) to fill
    the verdict cache; then `judgekit run SUITE` finds every verdict there.

    \b
      judgekit batch submit SUITE     send the questions the cache does not answer, one batch per judge
      judgekit batch status [SUITE]   each batch's state and counts
      judgekit batch collect [SUITE]  store a finished batch's valid verdicts in the cache
      judgekit batch cancel BATCH_ID  ask the provider to stop a batch (collect what it answered)

    Batches are recorded beside the verdict cache, in <cache>/batches/<batch id>.json.
    """


@batch.command("submit")
@click.argument("suite", type=click.Path(path_type=Path))
@click.option("--judge-model", help="Override the judge model (pinned), as `judgekit run` does.")
@click.option("--judge-api-base", help="Override the judge's OpenAI-compatible server.")
@click.option("--judge-api-key-env", help="Override the variable holding the judge's API key.")
@click.option("--allow-floating", is_flag=True, help="Allow an unpinned judge model; verdicts say so.")
@_cache_option
@handle_errors
def submit(suite: Path, judge_model, judge_api_base, judge_api_key_env, allow_floating, cache_dir) -> None:
    """Send SUITE's judge questions that the verdict cache does not answer as provider batches.

    Planned exactly as `judgekit run --dry-run` plans (same questions, same cache keys); a
    question already in an open batch of this cache is not sent again. One batch per judge
    endpoint, each request carrying its cache key as custom_id. A judge that cannot batch (the
    embedded judge, a provider litellm sends no batch to) is skipped with the reason; when no
    judge with questions to ask can batch, nothing is sent (exit 2).
    """
    from judgekit.judge.resolve import JudgeOverride
    from judgekit.run.batch import submit_batches
    from judgekit.run.batch_record import record_path
    from judgekit.run.options import RunOptions
    from judgekit.suite import load_suite

    loaded = load_suite(suite)
    options = RunOptions(override=JudgeOverride(judge_model, judge_api_base, judge_api_key_env),
                         allow_floating=allow_floating, cache_dir=cache_dir)
    report = submit_batches(loaded, options)
    say(f"batch submit of {one_line(loaded.suite.name)}: {report.questions} distinct questions, "
        f"{report.cached} cached, {report.in_open_batches} already in open batches")
    for judge, (count, why) in sorted(report.skipped.items()):
        say(f"skipped {one_line(judge)}: {count} questions not sent ({one_line(why)})")
    for record in report.records:
        say(f"batch {one_line(record.batch_id)}: {one_line(record.model_pin)} at {one_line(record.endpoint)}, "
            f"{record.sent} questions")
        say(f"  cost: at most {_usd(record.estimated_cost_usd_max)} at batch prices ({record.priced}); "
            f"online at most {_usd(record.online_cost_usd_max)}")
        say(f"  recorded in {record_path(report.cache_dir, record.batch_id)}")
    if not report.records:
        say("nothing to send: every question is cached or in an open batch")
    else:
        say(f"next: `judgekit batch status {suite}`, then `judgekit batch collect {suite}` once completed")


@batch.command("status")
@_suite_argument
@_cache_option
@_server_options
@handle_errors
def status(suite: Path | None, cache_dir: Path | None, judge_api_base, judge_api_key_env) -> None:
    """Each recorded batch (of SUITE, when given) with its state and counts, asked of the provider
    for the batches not collected yet.

    A record sends an API key to its own server only when SUITE's judges or --judge-api-base and
    --judge-api-key-env name that server and key variable (a record may come from a shared cache)."""
    from judgekit.run.batch import batch_status

    directory, name, servers = _where(suite, cache_dir, judge_api_base, judge_api_key_env)
    records = batch_status(directory, suite=name, servers=servers)
    if not records:
        say(f"no batch recorded in {directory}")
    for record in records:
        counts = record.counts
        progress = (f"{counts.get('completed', 0)}/{counts.get('total', record.sent)} answered, "
                    f"{counts.get('failed', 0)} failed") if counts else f"{record.sent} sent"
        say(f"{one_line(record.batch_id)}  {one_line(record.model_pin)} at {one_line(record.endpoint)}  "
            f"{one_line(record.state)}  {progress}  created {record.created_at:%Y-%m-%d %H:%M} UTC")
        if record.provider_errors:
            say(f"  provider errors: {one_line(record.provider_errors)}")
        if not record.open:
            say(f"  collected: {_collected(record)}")


def _collected(record) -> str:
    from collections import Counter

    reasons = Counter(entry.reason for entry in record.unscored.values())
    text = f"{record.stored} stored, {record.already_stored} already in the cache, {len(record.unscored)} unscored"
    if reasons:
        text += " (" + ", ".join(f"{n} {reason}" for reason, n in sorted(reasons.items())) + ")"
    if record.rejected_count:
        text += f", {record.rejected_count} lines rejected"
    if record.model_mismatch:
        text += f", {record.model_mismatch} from another model than the pin (the gate refuses them)"
    return text


@batch.command("collect")
@_suite_argument
@_cache_option
@_server_options
@handle_errors
def collect(suite: Path | None, cache_dir: Path | None, judge_api_base, judge_api_key_env) -> None:
    """Store the valid verdicts of every finished batch (of SUITE, when given) in the verdict cache.

    Each reply is validated as an online one is; the questions without a valid reply are written
    to the batch's record with their reason, and `judgekit run` asks them online. Collecting
    again stores nothing twice; a batch still running is left for later.
    """
    from judgekit.run.batch_collect import collect_batches
    from judgekit.run.batch_record import record_path

    directory, name, servers = _where(suite, cache_dir, judge_api_base, judge_api_key_env)
    reports = collect_batches(directory, suite=name, servers=servers)
    if not reports:
        say(f"no batch recorded in {directory}")
    for report in reports:
        record = report.record
        if report.collected:
            say(f"{one_line(record.batch_id)}: {one_line(record.state)}; {_collected(record)}")
            for line in record.rejected[:5]:
                say(f"  rejected: {one_line(line)}")
            say(f"  recorded in {record_path(directory, record.batch_id)}")
        elif record.open:
            say(f"{one_line(record.batch_id)}: {one_line(record.state)}: not finished, collect it later")
        else:
            say(f"{one_line(record.batch_id)}: collected before ({record.collected_at:%Y-%m-%d %H:%M} UTC): nothing to do")
    if any(report.collected for report in reports):
        target = suite if suite is not None else "SUITE"
        say(f"next: `judgekit run {target}` takes these verdicts from the cache; questions without one are asked online")


@batch.command("cancel")
@click.argument("batch_id")
@_cache_option
@_server_options
@handle_errors
def cancel(batch_id: str, cache_dir: Path | None, judge_api_base, judge_api_key_env) -> None:
    """Ask the provider to cancel BATCH_ID (a batch recorded in the cache folder). Collect it
    afterwards: what it answered is stored, the rest is unscored `cancelled` and asked online by
    the next `judgekit run`."""
    from judgekit.run.batch import cancel_batch

    directory, _, servers = _where(None, cache_dir, judge_api_base, judge_api_key_env)
    record = cancel_batch(directory, batch_id, servers=servers)
    say(f"{one_line(record.batch_id)}: {one_line(record.state)}; next: `judgekit batch collect` once it is cancelled")
