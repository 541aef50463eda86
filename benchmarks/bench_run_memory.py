"""Peak memory of a streamed deterministic run: ``judgekit run SUITE --format jsonl --no-cache``.

    python benchmarks/bench_run_memory.py [--sizes 10000,100000] [--full] [--out-size N]
                                          [--interval 0.2] [--data DIR] [--workdir DIR] [--keep]
                                          [--tracemalloc N]

Imports ``../shared/data/tau-bench-airline/gpt-4o-airline.even-tasks.json`` with ``judgekit
import tau-bench`` (100 real GPT-4o runs, 25 task rubrics: tool correctness, and task success where a task names outputs,
no judge), then, for each size N, writes a suite whose trajectory files hold the 100 runs
replicated N / 100 times with unique ids. The files are written copy by copy (nothing holds N
records, here or there: 1M is ~14 GB on disk), and each size's files are deleted once measured.

Each size runs once as a subprocess, stdout to /dev/null. Its resident set is read from
``/proc/PID/status`` (VmRSS, and the kernel's high-water mark VmHWM) every ``--interval``
seconds; ``wait4`` adds the kernel's own maximum (ru_maxrss) and the CPU time. Printed per
size: wall, CPU, trajectories per CPU-second, the sampled peak and ru_maxrss, the RSS curve at
a few points of the run, and the slope of RSS over the run's second half (bytes per
trajectory: ~0 when memory is bounded by the window). One more run with ``--out run.jsonl``
(at ``--out-size``, default the largest size) shows whether writing the record changes memory.

Targets: peak RSS < 300 MB at N = 1,000,000, and flat from 10k to 1M (the largest size's peak
within 15% of the smallest's). The default sizes (10k, 100k) take ~2 minutes; ``--full`` adds
1M (~10 minutes of scoring and 14 GB of scratch disk per run). The verdict line judges the sizes
measured and says when 1M was not among them.

``--tracemalloc N``: also score N trajectories in a subprocess through ``judgekit.run.run_suite``
with tracemalloc on, and print the allocation sites that grew most between the 2,000th result
and the last (what to look at when memory grows per trajectory).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = ROOT.parent / "shared" / "data"
SOURCE = Path("tau-bench-airline") / "gpt-4o-airline.even-tasks.json"
DEFAULT_SIZES = (10_000, 100_000)
FULL_SIZE = 1_000_000
PEAK_TARGET_MB = 300.0
FLAT_TOLERANCE = 0.15
CURVE_POINTS = (0.1, 0.25, 0.5, 0.75, 0.9, 1.0)
MB = 1024 * 1024


# --- measuring a subprocess ----------------------------------------------------------------------


def judgekit_command() -> list[str]:
    """The console script of this interpreter (not a pyenv shim, whose bash would be sampled first)."""
    script = Path(sys.executable).with_name("judgekit")
    if script.exists():
        return [str(script)]
    found = shutil.which("judgekit")
    return [found] if found else [sys.executable, "-m", "judgekit"]


def _status_kb(pid: int) -> tuple[int, int] | None:
    """(VmRSS, VmHWM) of ``pid`` in kB, or None once it has gone (or is a zombie without them)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as handle:
            text = handle.read()
    except OSError:
        return None
    rss = hwm = None
    for line in text.splitlines():
        if line.startswith(b"VmRSS:"):
            rss = int(line.split()[1])
        elif line.startswith(b"VmHWM:"):
            hwm = int(line.split()[1])
    return None if rss is None or hwm is None else (rss, hwm)


@dataclass
class Measured:
    """One subprocess run: how long, how much CPU, and its resident set over time."""

    rc: int
    wall_s: float
    cpu_s: float
    maxrss_mb: float  # the kernel's ru_maxrss from wait4
    hwm_mb: float  # the last VmHWM sampled
    samples: list[tuple[float, float]] = field(default_factory=list)  # (seconds since start, VmRSS MB)
    stderr: str = ""

    @property
    def sampled_peak_mb(self) -> float:
        return max((mb for _, mb in self.samples), default=0.0)

    @property
    def peak_mb(self) -> float:
        """The peak: the kernel's maximum (it sees spikes between samples)."""
        return max(self.maxrss_mb, self.hwm_mb, self.sampled_peak_mb)

    def at(self, fraction: float) -> float:
        """VmRSS at ``fraction`` of the run's wall time (the last sample at or before it)."""
        cut = fraction * self.wall_s
        chosen = self.samples[0][1] if self.samples else 0.0
        for t, mb in self.samples:
            if t > cut:
                break
            chosen = mb
        return chosen

    def curve(self) -> str:
        return "  ".join(f"{int(f * 100)}%:{self.at(f):.0f}" for f in CURVE_POINTS)

    def slope_mb_per_s(self, start: float = 0.5) -> float:
        """Least-squares slope of VmRSS over the samples after ``start`` of the run (MB/s)."""
        points = [(t, mb) for t, mb in self.samples if t >= start * self.wall_s]
        if len(points) < 3:
            return 0.0
        n = len(points)
        mean_t = sum(t for t, _ in points) / n
        mean_m = sum(m for _, m in points) / n
        var = sum((t - mean_t) ** 2 for t, _ in points)
        return 0.0 if var == 0 else sum((t - mean_t) * (m - mean_m) for t, m in points) / var


def run_sampled(command: list[str], *, interval: float = 0.2, env: dict[str, str] | None = None,
                cwd: Path | None = None, stdout=subprocess.DEVNULL) -> Measured:
    """Run ``command`` (stdout to /dev/null by default), sampling its VmRSS every ``interval`` s."""
    with tempfile.TemporaryFile() as errors:
        started = time.monotonic()
        proc = subprocess.Popen(command, stdout=stdout, stderr=errors, stdin=subprocess.DEVNULL, env=env, cwd=cwd)
        samples: list[tuple[float, float]] = []
        hwm = [0]
        done = threading.Event()

        def sample() -> None:
            while not done.is_set():
                got = _status_kb(proc.pid)
                if got is not None:
                    samples.append((time.monotonic() - started, got[0] / 1024))
                    hwm[0] = max(hwm[0], got[1])
                done.wait(interval)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.monotonic() - started
        done.set()
        sampler.join()
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
        errors.seek(0)
        text = errors.read().decode("utf-8", "replace")
    return Measured(rc=proc.returncode, wall_s=wall, cpu_s=usage.ru_utime + usage.ru_stime,
                    maxrss_mb=usage.ru_maxrss / 1024, hwm_mb=hwm[0] / 1024, samples=samples, stderr=text)


def print_measured(label: str, m: Measured, trajectories: int) -> None:
    rate = trajectories / m.cpu_s if m.cpu_s else 0.0
    per_traj = m.slope_mb_per_s() * MB * m.wall_s / trajectories if trajectories else 0.0
    print(f"{label}: wall {m.wall_s:7.1f} s  cpu {m.cpu_s:7.1f} s  ({rate:,.0f} trajectories/cpu-s)  "
          f"peak RSS {m.peak_mb:6.1f} MB (sampled {m.sampled_peak_mb:.1f}, ru_maxrss {m.maxrss_mb:.1f})")
    print(f"    RSS MB at % of wall: {m.curve()}   second-half slope {m.slope_mb_per_s():+.3f} MB/s "
          f"= {per_traj:+.1f} bytes/trajectory")


# --- the suite ---------------------------------------------------------------------------------


def import_base(source: Path, folder: Path) -> Path:
    """``judgekit import tau-bench SOURCE --out FOLDER``; the folder holding suite.yaml."""
    command = [*judgekit_command(), "import", "tau-bench", str(source), "--out", str(folder)]
    done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise SystemExit(f"judgekit import tau-bench failed ({done.returncode}): {done.stderr.strip()}")
    return folder


def id_templates(lines: list[str]) -> list[tuple[str, str]]:
    """Each record as (text before its id's end, text after), so a copy is two concatenations."""
    marker = "\u0000ID\u0000"
    templates = []
    for line in lines:
        record = json.loads(line)
        original = record["id"]
        record["id"] = original + marker
        text = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
        before, after = text.split(json.dumps(marker)[1:-1], 1)
        templates.append((before, after + "\n"))
    return templates


def replicate(base: Path, folder: Path, size: int) -> tuple[Path, int]:
    """A copy of the imported suite in ``folder`` whose trajectory files hold each original run
    ``size / runs`` times (ids suffixed ``-cNNNNNNN``), written copy by copy. (suite, runs)."""
    import yaml

    if folder.exists():
        shutil.rmtree(folder)
    shutil.copytree(base, folder, ignore=shutil.ignore_patterns("trajectories"))
    suite = yaml.safe_load((base / "suite.yaml").read_text(encoding="utf-8"))
    files = [entry["file"] for entry in suite["trajectories"]]
    originals = {name: [line for line in (base / name).read_text(encoding="utf-8").splitlines() if line.strip()]
                 for name in files}
    runs = sum(len(lines) for lines in originals.values())
    copies = max(1, -(-size // runs))  # rounded up: at least ``size``
    for name, lines in originals.items():
        templates = id_templates(lines)
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "w", encoding="utf-8", buffering=8 * MB) as out:
            for copy in range(copies):
                suffix = f"-c{copy:07d}"
                out.write("".join(before + suffix + after for before, after in templates))
    return folder / "suite.yaml", runs * copies


# --- tracemalloc ---------------------------------------------------------------------------------

TRACEMALLOC_SCRIPT = r"""
import sys, tracemalloc
from pathlib import Path
from judgekit.run import RunOptions, run_suite
from judgekit.run.plan import DEFAULT_WINDOW
FIRST = 2000
total = int(sys.argv[2])
LAST = FIRST + (total - FIRST) // DEFAULT_WINDOW * DEFAULT_WINDOW  # the same place in its window as FIRST
tracemalloc.start(8)
snapshots = {}
count = 0
def on_result(result):
    global count
    count += 1
    if count in (FIRST, LAST):
        snapshots[count] = tracemalloc.take_snapshot()
cache_dir = sys.argv[3] if len(sys.argv) > 3 else ""
options = RunOptions(cache_dir=Path(cache_dir)) if cache_dir else RunOptions(use_cache=False)
record = run_suite(sys.argv[1], options=options, on_result=on_result, keep_results=False)
if LAST <= FIRST or LAST not in snapshots:
    sys.exit("too few results to compare: trace more trajectories")
first, last = snapshots[FIRST], snapshots[LAST]
ignore = [tracemalloc.Filter(False, tracemalloc.__file__)]
first_size = sum(s.size for s in first.filter_traces(ignore).statistics("filename"))
last_size = sum(s.size for s in last.filter_traces(ignore).statistics("filename"))
print(f"traced memory at result {FIRST:,}: {first_size / 2**20:.1f} MB; at result {LAST:,}: {last_size / 2**20:.1f} MB "
      f"({(last_size - first_size) / (LAST - FIRST):+.1f} bytes per trajectory)")
stats = sorted(last.filter_traces(ignore).compare_to(first.filter_traces(ignore), "traceback"),
               key=lambda stat: stat.size_diff, reverse=True)
print(f"allocation sites that grew most between result {FIRST:,} and {LAST:,}:")
for stat in stats[:6]:
    print(f"  {stat.size_diff / 2**20:+8.2f} MB  {stat.count_diff:+9d} blocks  "
          f"({stat.size_diff / (LAST - FIRST):+.1f} bytes per trajectory)")
    for line in stat.traceback.format()[-8:]:
        print("      " + line)
"""


def trace_growth(suite: Path, size: int, cache_dir: Path | None = None) -> None:
    """Run ``suite`` (``size`` trajectories) through ``run_suite`` under tracemalloc in a subprocess
    (with a verdict cache in ``cache_dir``, else none) and print the sites that grew most."""
    print(f"\ntracemalloc ({size:,} trajectories, library API, no output):", flush=True)
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    command = [sys.executable, "-c", TRACEMALLOC_SCRIPT, str(suite), str(size), str(cache_dir or "")]
    done = subprocess.run(command, check=False, capture_output=True, text=True, env=env)
    print(done.stdout.rstrip())
    if done.returncode != 0:
        print(done.stderr.strip()[-3000:])


# --- main ----------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default=",".join(str(s) for s in DEFAULT_SIZES),
                        help="comma-separated trajectory counts (default 10000,100000)")
    parser.add_argument("--full", action="store_true", help="add 1,000,000 (the target's size)")
    parser.add_argument("--out-size", type=int, help="size of the extra --out run (default: the largest size)")
    parser.add_argument("--no-out-run", action="store_true", help="skip the --out run")
    parser.add_argument("--interval", type=float, default=0.2, help="seconds between RSS samples")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--workdir", type=Path, help="scratch folder (default: a new one in TMPDIR)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")
    parser.add_argument("--tracemalloc", type=int, metavar="N", help="also trace allocations over N trajectories")
    args = parser.parse_args()

    sizes = sorted({int(s) for s in args.sizes.split(",") if s.strip()} | ({FULL_SIZE} if args.full else set()))
    out_size = args.out_size or sizes[-1]
    source = args.data / SOURCE
    if not source.is_file():
        raise SystemExit(f"no tau-bench data at {source} (--data DIR)")
    work = args.workdir or Path(tempfile.mkdtemp(prefix="judgekit-bench-memory-"))
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    print(f"judgekit run SUITE --format jsonl --no-cache > /dev/null; RSS every {args.interval} s; "
          f"scratch {work}", flush=True)
    peaks: dict[int, Measured] = {}
    out_measured: Measured | None = None
    out_runs = 0
    try:
        base = import_base(source, work / "imported")
        for size in sorted(set(sizes) | ({out_size} if not args.no_out_run else set())):
            started = time.monotonic()
            suite, runs = replicate(base, work / f"n{size}", size)
            folder_bytes = sum(p.stat().st_size for p in (suite.parent / "trajectories").iterdir())
            print(f"\nN = {runs:,}: wrote {folder_bytes / 2**30:.2f} GiB of trajectories in "
                  f"{time.monotonic() - started:.1f} s", flush=True)
            command = [*judgekit_command(), "run", str(suite), "--format", "jsonl", "--no-cache"]
            if size in sizes:
                m = run_sampled(command, interval=args.interval, env=env)
                check_rc(m, "run")
                print_measured("  run        ", m, runs)
                peaks[runs] = m
            if size == out_size and not args.no_out_run:
                record = suite.parent / "run.jsonl"
                m = run_sampled([*command, "--out", str(record)], interval=args.interval, env=env)
                check_rc(m, "run --out")
                lines = count_lines(record)
                assert lines == runs + 2, f"--out record holds {lines} lines, expected {runs} results + 2"
                print_measured("  run --out  ", m, runs)
                print(f"    record: {record.stat().st_size / 2**20:,.0f} MB, {lines:,} lines", flush=True)
                out_measured = m
                out_runs = runs
                record.unlink()
            if not args.keep:
                shutil.rmtree(suite.parent)
        if args.tracemalloc:
            suite, _ = replicate(base, work / "traced", args.tracemalloc)
            trace_growth(suite, args.tracemalloc)
    finally:
        if not args.keep and args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)

    print("\nsummary:")
    for runs, m in sorted(peaks.items()):
        print(f"  N = {runs:>9,}: peak RSS {m.peak_mb:6.1f} MB   wall {m.wall_s:6.1f} s")
    smallest, largest = min(peaks), max(peaks)
    growth = peaks[largest].peak_mb / peaks[smallest].peak_mb - 1
    print(f"  peak at {largest:,} vs {smallest:,}: {growth:+.1%} (flat: within {FLAT_TOLERANCE:.0%})")
    problems = []
    if growth > FLAT_TOLERANCE:
        problems.append(f"not flat: {growth:+.1%} from {smallest:,} to {largest:,}")
    if peaks[largest].peak_mb >= PEAK_TARGET_MB:
        problems.append(f"peak {peaks[largest].peak_mb:.0f} MB >= {PEAK_TARGET_MB:.0f} MB at {largest:,}")
    if out_measured is not None:
        same = peaks.get(out_runs)
        if same is not None:
            change = out_measured.peak_mb / same.peak_mb - 1
            print(f"  --out at {out_runs:,}: peak {out_measured.peak_mb:.1f} MB vs {same.peak_mb:.1f} MB "
                  f"({change:+.1%})")
            if change > FLAT_TOLERANCE:
                problems.append(f"--out adds {change:+.1%} peak RSS at {out_runs:,}")
    scope = "" if FULL_SIZE in peaks else f" [1M not measured: largest {largest:,}; --full for the target size]"
    target = f"peak < {PEAK_TARGET_MB:.0f} MB at 1M, flat 10k->1M within {FLAT_TOLERANCE:.0%}, --out no change"
    if problems:
        print(f"MISS ({target}): {'; '.join(problems)}{scope}")
    else:
        print(f"PASS ({target}): peak {peaks[largest].peak_mb:.0f} MB at {largest:,}, {growth:+.1%} vs "
              f"{smallest:,}{scope}")
    return 0


def check_rc(m: Measured, what: str) -> None:
    if m.rc != 0:
        raise AssertionError(f"judgekit {what} exited {m.rc}: {m.stderr.strip()[-2000:]}")


def count_lines(path: Path) -> int:
    lines = 0
    with open(path, "rb") as handle:
        while chunk := handle.read(8 * MB):
            lines += chunk.count(b"\n")
    return lines


if __name__ == "__main__":
    sys.exit(main())
