"""Time and peak memory of ``judgekit import inspect`` on a 20,000-sample Inspect log.

    python benchmarks/bench_import_inspect.py [--samples 20000] [--compression zstd|deflate]
                                              [--json] [--interval 0.1] [--workdir DIR] [--keep]
                                              [--profile N]

Writes an Inspect ``.eval`` log (format version 2, members zstd-compressed as inspect_ai writes
them now; ``--compression deflate`` for older logs) whose samples look like an agent's: a
system prompt and the user's task; two assistant turns making three tool calls (one fails with
a ToolCallError), their tool messages and ToolEvents; a ModelEvent per model call carrying the
conversation so far (the bulk of a real log, read and skipped by the importer); span events
(init, the ``solvers`` root, the generate solver, one span per tool); the store written by a
tool, the change logged again by each enclosing span (tool, solver and root StoreEvents, as
Inspect logs them) and in a StateEvent; scores, usage and metadata. Store values differ per
sample, so every after-world is its own file: the worst case for the number of files written.

The import runs once through the CLI in a subprocess (stdout, one line per file written, to
/dev/null); its resident set is read from ``/proc/PID/status`` (VmRSS, and the kernel's
high-water mark VmHWM) every ``--interval`` seconds and ``wait4`` adds ru_maxrss. Printed:
wall, CPU, samples per second, peak RSS, the files written, and PASS/FAIL against the target
(peak RSS < 300 MB). The output is checked: one trajectory per sample, ids unique.

``--json``: also write the same samples as the whole-log ``.json`` form and import that (the
streamed reader). ``--profile N``: import in-process under cProfile and print the N functions
with the most cumulative time (where the time goes).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import json
import pstats
import random
import shutil
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_run_memory import MB, Measured, count_lines, judgekit_command, run_sampled  # noqa: E402

PEAK_TARGET_MB = 300.0
ZSTD = 93  # the zip compression method number of Zstandard
TASK = "support_agent"
MODEL = "openai/gpt-4o-2024-08-06"
TOOLS = ["get_order", "update_address", "refund_order", "send_email"]


# --- one realistic sample ---------------------------------------------------------------------------


def _at(second: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(1_740_000_000 + second)) + f".{int(second * 1e6) % 1_000_000:06d}+00:00"


def _event(kind: str, second: float, span_id: str | None, **fields) -> dict:
    event = {"uuid": f"u{second:.6f}{kind}", "timestamp": _at(second), "working_start": second % 100, "event": kind, **fields}
    if span_id:
        event["span_id"] = span_id
    return event


def _span(span_id: str, parent: str | None, name: str, kind: str, second: float) -> list[dict]:
    begin = {"id": span_id, "type": kind, "name": name}
    if parent:
        begin["parent_id"] = parent
    return [_event("span_begin", second, span_id, **begin)]


def _model_event(messages: list[dict], reply: dict, second: float, span_id: str) -> dict:
    return _event("model", second, span_id, model=MODEL, input=list(messages), tools=[
        {"name": name, "description": f"{name.replace('_', ' ')} for a customer", "parameters": {
            "type": "object", "properties": {"order_id": {"type": "string"}, "value": {"type": "string"}}, "required": ["order_id"]}}
        for name in TOOLS], tool_choice="auto", config={"temperature": 0.0},
        output={"model": MODEL, "choices": [{"message": reply, "stop_reason": "tool_calls" if reply.get("tool_calls") else "stop"}],
                "completion": reply["content"], "usage": {"input_tokens": 900, "output_tokens": 60, "total_tokens": 960}},
        completed=_at(second + 0.8), working_time=0.8)


def make_sample(n: int) -> dict:
    rng = random.Random(n)
    order = f"ord-{n:06d}"
    city = rng.choice(["Lyon", "Porto", "Oslo", "Quito", "Perth"])
    t = n * 30.0
    calls = [("c1", "get_order", {"order_id": order}, json.dumps({"order_id": order, "status": "shipped", "items": rng.randint(1, 5),
                                                                   "address": "1 Old Street, Leeds", "history": ["created", "paid", "shipped"]})),
             ("c2", "update_address", {"order_id": order, "value": f"{n} Rue Neuve, {city}"}, json.dumps({"ok": True})),
             ("c3", "send_email", {"order_id": order, "value": "Your address was updated."}, "")]
    messages = [
        {"id": f"m{n}-0", "content": "You are a support agent for an online shop. Use the tools; never guess.", "role": "system"},
        {"id": f"m{n}-1", "content": f"Please change the delivery address of order {order} to {n} Rue Neuve, {city}.", "source": "input", "role": "user"},
    ]
    first = {"id": f"m{n}-2", "content": "Let me check the order first.", "source": "generate", "role": "assistant", "model": MODEL,
             "tool_calls": [{"id": c, "function": f, "arguments": a, "type": "function"} for c, f, a, _ in calls[:2]]}
    second = {"id": f"m{n}-5", "content": "", "source": "generate", "role": "assistant", "model": MODEL,
              "tool_calls": [{"id": "c3", "function": "send_email", "arguments": calls[2][2], "type": "function"}]}
    final = {"id": f"m{n}-7", "content": f"Done: order {order} now ships to {n} Rue Neuve, {city}.", "source": "generate",
             "role": "assistant", "model": MODEL}
    error = {"type": "permission", "message": "the mail relay refused the message"}
    tool_messages = [{"id": f"m{n}-{3 + i}", "content": r, "role": "tool", "tool_call_id": c, "function": f}
                     for i, (c, f, _, r) in enumerate(calls[:2])]
    failed = {"id": f"m{n}-6", "content": "", "role": "tool", "tool_call_id": "c3", "function": "send_email", "error": error}
    store_change = [{"op": "replace", "path": "/address", "value": f"{n} Rue Neuve, {city}", "replaced": "1 Old Street, Leeds"},
                    {"op": "add", "path": "/changes/0", "value": f"address:{order}"}]
    root_change = [{"op": "add", "path": "/address", "value": f"{n} Rue Neuve, {city}"},
                   {"op": "add", "path": "/changes", "value": [f"address:{order}"]}]
    events = [*_span("init", None, "init", "init", t),
              _event("sample_init", t, "init", sample={"input": messages[1]["content"], "id": n}, state={"store": {}}),
              _event("span_end", t, "init", id="init"),
              *_span("solvers", None, "solvers", "solvers", t + 1),
              *_span("setup", "solvers", "setup", "solver", t + 1),
              _event("store", t + 1, "setup", changes=[{"op": "add", "path": "/address", "value": "1 Old Street, Leeds"},
                                                      {"op": "add", "path": "/changes", "value": []}]),
              _event("span_end", t + 1, "setup", id="setup"),
              *_span("gen", "solvers", "generate", "solver", t + 2),
              _model_event(messages, first, t + 2, "gen")]
    conversation = [*messages, first]
    for i, (c, f, a, r) in enumerate(calls):
        if i == 2:
            conversation += tool_messages
            events.append(_model_event(conversation, second, t + 9, "gen"))
            conversation.append(second)
        start = t + 3 + 3 * i
        events += _span(f"tool-{c}", "gen", f, "tool", start)
        events.append(_event("tool", start, "gen", type="function", id=c, function=f, arguments=a, result=r, events=[],
                             completed=_at(start + 0.4), working_time=0.4, **({"error": error} if i == 2 else {})))
        if f == "update_address":
            events.append(_event("store", start + 0.4, f"tool-{c}", changes=store_change))
        events.append(_event("span_end", start + 0.5, f"tool-{c}", id=f"tool-{c}"))
    conversation.append(failed)
    events += [_model_event(conversation, final, t + 20, "gen"),
               _event("store", t + 21, "gen", changes=store_change),
               _event("state", t + 21, "gen", changes=[{"op": "replace", "path": "/store/address", "value": root_change[0]["value"]}]),
               _event("span_end", t + 21, "gen", id="gen"),
               _event("store", t + 22, "solvers", changes=root_change),
               _event("span_end", t + 22, "solvers", id="solvers")]
    return {
        "id": n, "epoch": 1, "input": messages[1]["content"], "target": city,
        "messages": [*messages, first, *tool_messages, second, failed, final],
        "output": {"model": MODEL, "choices": [{"message": final, "stop_reason": "stop"}], "completion": final["content"],
                   "usage": {"input_tokens": 2700, "output_tokens": 180, "total_tokens": 2880}},
        "scores": {"includes": {"value": "C", "answer": city, "explanation": final["content"]}},
        "metadata": {"customer_tier": rng.choice(["gold", "silver"]), "order": order},
        "store": {"address": root_change[0]["value"], "changes": [f"address:{order}"]},
        "events": events,
        "model_usage": {MODEL: {"input_tokens": 2700, "output_tokens": 180, "total_tokens": 2880}},
        "total_time": 23.0, "working_time": 21.5, "uuid": f"sample-{n}",
    }


def header(samples: int) -> dict:
    created = _at(0)
    return {
        "version": 2, "status": "success",
        "eval": {"eval_id": "bench-eval", "run_id": "bench-run", "created": created, "task": TASK, "task_id": "bench-task",
                 "task_version": 0, "dataset": {"name": TASK, "samples": samples}, "model": MODEL, "config": {},
                 "packages": {"inspect_ai": "0.3.285"}},
        "plan": {"name": "plan", "steps": [{"solver": "generate", "params": {}}], "config": {}},
        "results": {"total_samples": samples, "completed_samples": samples, "scores": []},
        "stats": {"started_at": created, "completed_at": _at(samples * 30.0), "model_usage": {}},
    }


# --- writing the log ------------------------------------------------------------------------------


@contextlib.contextmanager
def zstd_members() -> Iterator[None]:
    """Let zipfile write Zstandard members, as the zipfile_zstd patch that inspect_ai applies does."""
    import zstandard

    check, get = zipfile._check_compression, zipfile._get_compressor

    def _check(method):
        if method != ZSTD:
            check(method)

    def _get(method, level=None):
        return zstandard.ZstdCompressor(level=3).compressobj() if method == ZSTD else get(method, level)

    zipfile._check_compression, zipfile._get_compressor = _check, _get
    try:
        yield
    finally:
        zipfile._check_compression, zipfile._get_compressor = check, get


def write_eval(path: Path, samples: int, compression: str) -> None:
    method = ZSTD if compression == "zstd" else zipfile.ZIP_DEFLATED
    with zstd_members() if method == ZSTD else contextlib.nullcontext(), zipfile.ZipFile(path, "w") as archive:
        def member(name: str, value) -> None:
            info = zipfile.ZipInfo(name, date_time=(2025, 2, 19, 21, 20, 0))
            info.compress_type = method
            archive.writestr(info, json.dumps(value, indent=2))

        top = header(samples)
        member("_journal/start.json", {"version": 2, "eval": top["eval"], "plan": top["plan"]})
        for n in range(samples):
            member(f"samples/{n}_epoch_1.json", make_sample(n))
        member("header.json", top)


def write_json(path: Path, samples: int) -> None:
    """The whole-log form, written sample by sample (never all of them in memory)."""
    with open(path, "w", encoding="utf-8") as out:
        out.write(json.dumps(header(samples), indent=2)[:-2] + ',\n  "samples": [\n')
        for n in range(samples):
            out.write(("" if n == 0 else ",\n") + json.dumps(make_sample(n), indent=2))
        out.write("\n  ]\n}\n")


# --- measuring ------------------------------------------------------------------------------------


def measure_import(src: Path, out: Path, interval: float) -> Measured:
    shutil.rmtree(out, ignore_errors=True)
    return run_sampled([*judgekit_command(), "import", "inspect", str(src), "--out", str(out)], interval=interval)


def check_output(out: Path, samples: int) -> int:
    trajectories = out / "trajectories" / f"{TASK}.jsonl"
    found = count_lines(trajectories)
    if found != samples:
        raise SystemExit(f"expected {samples} trajectories, found {found}")
    ids = set()
    with open(trajectories, encoding="utf-8") as handle:
        for line in handle:
            ids.add(json.loads(line)["id"])
    if len(ids) != samples:
        raise SystemExit(f"{samples - len(ids)} duplicate trajectory ids")
    return sum(1 for p in out.rglob("*") if p.is_file())


def report(label: str, src: Path, m: Measured, samples: int, written: int) -> bool:
    ok = m.rc == 0 and m.peak_mb < PEAK_TARGET_MB
    print(f"{label}: {src.stat().st_size / MB:,.1f} MB log -> {written:,} files; wall {m.wall_s:.1f} s, cpu {m.cpu_s:.1f} s "
          f"({samples / m.wall_s:,.0f} samples/s); peak RSS {m.peak_mb:.1f} MB (sampled {m.sampled_peak_mb:.1f}, "
          f"ru_maxrss {m.maxrss_mb:.1f}); RSS MB at % of wall: {m.curve()}")
    print(f"    {'PASS' if ok else 'FAIL'}: peak {m.peak_mb:.0f} MB vs target < {PEAK_TARGET_MB:.0f} MB")
    return ok


def profile(src: Path, out: Path, top: int) -> None:
    from judgekit.importers.inspect_ai import import_inspect

    shutil.rmtree(out, ignore_errors=True)
    profiler = cProfile.Profile()
    profiler.runcall(import_inspect, src, out)
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(top)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=20_000)
    parser.add_argument("--compression", choices=["zstd", "deflate"], default="zstd")
    parser.add_argument("--json", action="store_true", help="also import the .json form of the same log")
    parser.add_argument("--interval", type=float, default=0.1)
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--profile", type=int, default=0, metavar="N")
    args = parser.parse_args(argv)

    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench-import-inspect-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        started = time.monotonic()
        src = work / f"{TASK}.eval"
        write_eval(src, args.samples, args.compression)
        print(f"wrote {src} ({args.samples:,} samples, {args.compression}) in {time.monotonic() - started:.1f} s")
        m = measure_import(src, work / "out-eval", args.interval)
        if m.rc != 0:
            raise SystemExit(f"import failed ({m.rc}): {m.stderr.strip()[-2000:]}")
        ok = report(".eval", src, m, args.samples, check_output(work / "out-eval", args.samples))
        if args.json:
            started = time.monotonic()
            src_json = work / f"{TASK}.json"
            write_json(src_json, args.samples)
            print(f"wrote {src_json} in {time.monotonic() - started:.1f} s")
            m = measure_import(src_json, work / "out-json", args.interval)
            if m.rc != 0:
                raise SystemExit(f"import failed ({m.rc}): {m.stderr.strip()[-2000:]}")
            ok = report(".json", src_json, m, args.samples, check_output(work / "out-json", args.samples)) and ok
        if args.profile:
            profile(src, work / "out-profile", args.profile)
    finally:
        if not args.keep and args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
