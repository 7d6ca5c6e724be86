"""Benchmark the Hermes reader: constant memory, and speed against a plain SELECT.

Generates two sample databases (1,000 and 20,000 sessions by default), then prints

* the peak Python memory while streaming every session of each, and their ratio (a streaming
  reader keeps it near 1.0x however many sessions there are);
* messages per second of ``iter_sessions`` against one plain ``SELECT`` over the same ``messages``
  table in the same run, as a ratio (the baseline does no parsing, pairing or object building).

Usage: python bench/read_sessions.py [--quick] [--small N] [--large N] [--repeat N]
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from kindling.sessions import ReadReport, generate_sample_db, iter_sessions


def peak_memory(path: Path) -> tuple[int, int]:
    """Return (peak traced bytes, messages) while streaming every session of ``path``."""
    report = ReadReport()
    tracemalloc.start()
    try:
        for _session in iter_sessions(path, report=report):
            pass
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak, report.messages


def reader_seconds(path: Path) -> tuple[float, int]:
    report = ReadReport()
    start = time.perf_counter()
    for _session in iter_sessions(path, report=report):
        pass
    return time.perf_counter() - start, report.messages


def select_seconds(path: Path) -> tuple[float, int]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        start = time.perf_counter()
        count = 0
        for _row in conn.execute(
            "SELECT session_id, id, role, content, tool_call_id, tool_calls, tool_name, timestamp "
            "FROM messages WHERE active = 1 OR compacted = 1 ORDER BY session_id, id"
        ):
            count += 1
        return time.perf_counter() - start, count
    finally:
        conn.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="small sizes that run in a few seconds")
    parser.add_argument("--small", type=int, default=1000, help="sessions in the small database")
    parser.add_argument("--large", type=int, default=20000, help="sessions in the large database")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs; the best is reported")
    args = parser.parse_args(argv)
    small, large = (50, 1000) if args.quick else (args.small, args.large)
    repeat = 1 if args.quick else max(1, args.repeat)

    with tempfile.TemporaryDirectory(prefix="kindling-bench-") as tmp:
        paths = {}
        for size in (small, large):
            start = time.perf_counter()
            paths[size] = generate_sample_db(Path(tmp) / f"state-{size}.db", sessions=size, seed=7)
            print(f"generated {size:,} sessions in {time.perf_counter() - start:.1f}s", flush=True)

        peak_memory(paths[small])  # warm-up: first-use imports and caches are not the reader's working set
        peaks = {}
        for size in (small, large):
            peak, messages = peak_memory(paths[size])
            peaks[size] = peak
            print(f"peak memory reading {size:,} sessions ({messages:,} messages): {peak / 1e6:.2f} MB")
        print(
            f"memory ratio {large:,}/{small:,} sessions: {peaks[large] / peaks[small]:.2f}x (constant memory: near 1.0x)"
        )

        path = paths[large]
        reader = min(reader_seconds(path) for _ in range(repeat))
        select = min(select_seconds(path) for _ in range(repeat))
        reader_rate = reader[1] / reader[0]
        select_rate = select[1] / select[0]
        print(f"plain SELECT: {select_rate:,.0f} messages/s")
        print(f"iter_sessions: {reader_rate:,.0f} messages/s")
        print(f"reader speed vs plain SELECT: {reader_rate / select_rate:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
