"""Benchmark: what the scheduler's crash safety costs per job, against the least a run must write.

For N due jobs whose run does nothing (the prompt runner is replaced by one that answers at once,
so only scheduling is measured), one tick claims each slot (compare-and-set, saved before the
run), saves the output and records the status. The baseline is the least any scheduler that keeps
output must do per job: one atomic write of the output file. It prints, for the JSON store and the
SQLite store, milliseconds per job and the ratio to that baseline (how many "durable writes" of
work a job costs), plus the cost of a tick with nothing due.

    .venv/bin/python bench/cron.py            # 300 jobs
    .venv/bin/python bench/cron.py --quick    # 20 jobs, a few seconds
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path


def _setup(home: Path) -> None:
    os.environ["KINDLING_HOME"] = str(home)


def baseline_per_write(directory: Path, count: int) -> float:
    """Seconds for one atomic write of a small Markdown file (mean over ``count``)."""
    from kindling.fileio import write_atomic

    start = time.perf_counter()
    for index in range(count):
        write_atomic(directory / f"{index}.md", f"# job {index}\n\nok\n")
    return (time.perf_counter() - start) / count


def tick_per_job(store_target: Path, jobs: int) -> tuple[float, float]:
    """Return (seconds per job for a tick running ``jobs`` due jobs, seconds for an idle tick)."""
    from kindling.cron import runners
    from kindling.cron.jobs import make_job, open_job_store
    from kindling.cron.scheduler import tick

    runners.RUNNERS["prompt"] = lambda job: runners.RunOutcome("ok", response="[SILENT] nothing to do")
    store = open_job_store(store_target)
    now = datetime.now(timezone.utc)
    past = now - timedelta(hours=2)
    for index in range(jobs):
        store.add(make_job(f"job{index}", "prompt", "every 1h", now=past, prompt="x", context_length=100_000))
    start = time.perf_counter()
    result = tick(store, now=now)
    elapsed = time.perf_counter() - start
    if len(result.runs) != jobs or any(r.status != "ok" for r in result.runs):
        raise SystemExit(f"bench broken: {len(result.runs)} runs of {jobs}")
    start = time.perf_counter()
    idle = tick(store, now=now)
    idle_elapsed = time.perf_counter() - start
    if idle.runs:
        raise SystemExit("bench broken: an idle tick ran jobs again")
    return elapsed / jobs, idle_elapsed


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its figures."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="20 jobs instead of 300")
    args = parser.parse_args(argv)
    jobs = 20 if args.quick else 300
    with tempfile.TemporaryDirectory(prefix="kindling-bench-cron-") as tmp:
        root = Path(tmp)
        _setup(root / "home")
        (root / "baseline").mkdir()
        base = baseline_per_write(root / "baseline", max(jobs, 50))
        print(f"baseline: one atomic output write = {base * 1000:.2f} ms")
        for label, target in (("json", root / "jobs.json"), ("sqlite", root / "jobs.db")):
            per_job, idle = tick_per_job(target, jobs)
            print(
                f"{label} store: {jobs} due jobs, {per_job * 1000:.2f} ms/job = {per_job / base:.1f}x baseline; "
                f"idle tick {idle * 1000:.1f} ms = {idle / base:.1f}x baseline"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
