"""Benchmark the Hermes reader: constant memory, and speed against a plain SELECT.

Generates two sample databases (1,000 and 20,000 sessions by default), then prints

* the peak Python memory while streaming every session of each, and their ratio (a streaming
  reader keeps it near 1.0x however many sessions there are);
* messages per second of ``iter_sessions`` against one plain ``SELECT`` over the same ``messages``
  table in the same run, as a ratio (the baseline does no parsing, pairing or object building).

and, for each coding agent's format (Claude Code, Codex CLI in both layouts, OpenHands, SWE-agent,
OpenAI Agents SDK traces),
the reader's speed against plain ``json.loads`` over the same lines (JSONL) or documents (JSON), as a
ratio: the repository's real fixtures, copied into a folder many times over, read through
``iter_sessions`` (detection, pairing, Session objects) and parsed by ``json.loads`` alone.

Usage: python bench/read_sessions.py [--quick] [--small N] [--large N] [--repeat N] [--rounds N] [--copies N]
                                     [--formats-only]
"""

from __future__ import annotations

import argparse
import json
import shutil
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


FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures"
#: format -> fixture folder, for the per-format ratios.
AGENT_FORMATS = {
    "claude-code": "claude-code",
    "codex": "codex",
    "codex (older layout)": "codex-legacy",
    "openhands": "openhands",
    "swe-agent": "swe-agent",
    "openai-agents": "openai-agents",
}


def _copies(folder: Path, target: Path, copies: int) -> list[Path]:
    """Copy the fixture files of ``folder`` ``copies`` times into ``target``; return the files."""
    files = [p for p in sorted(folder.rglob("*")) if p.is_file() and p.name != "NOTICE"]
    out: list[Path] = []
    for n in range(copies):
        for path in files:
            dest = target / f"copy{n}" / path.relative_to(folder)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, dest)
            out.append(dest)
    return out


def loads_seconds(files: list[Path]) -> float:
    """CPU seconds to read every file and ``json.loads`` each JSONL line, or each JSON document whole."""
    start = time.process_time()
    for path in files:
        data = path.read_bytes()
        if path.suffix == ".jsonl":
            for line in data.splitlines():
                if line.strip():
                    json.loads(line)
        else:
            json.loads(data)
    return time.process_time() - start


def agent_reader_seconds(folder: Path) -> tuple[float, ReadReport]:
    """CPU seconds to read every session below ``folder`` through ``iter_sessions``, and its report."""
    report = ReadReport()
    start = time.process_time()
    for _session in iter_sessions(folder, report=report):
        pass
    return time.process_time() - start, report


def agent_formats(copies: int, repeat: int) -> None:
    """Print each coding agent's reading speed as a ratio against json.loads over the same input.

    Both sides read the same files, in CPU time of this process (so other work on the machine
    does not count, though it still shares the caches), alternating round by round after one
    round that warms imports and the page cache. The ratio is of the fastest round of each; the
    spread is the lowest and highest ratio of single rounds.
    """
    with tempfile.TemporaryDirectory(prefix="kindling-bench-agents-") as tmp:
        for label, fixture in AGENT_FORMATS.items():
            target = Path(tmp) / fixture
            files = _copies(FIXTURES / fixture, target, copies)
            megabytes = sum(p.stat().st_size for p in files) / 1e6
            loads_seconds(files)
            agent_reader_seconds(target)
            rounds = []
            for _ in range(repeat):
                baseline = loads_seconds(files)
                reader, report = agent_reader_seconds(target)
                rounds.append((baseline, reader))
            best_baseline = min(b for b, _ in rounds)
            best_reader = min(r for _, r in rounds)
            ratios = [b / r for b, r in rounds]
            print(
                f"{label:<22} {megabytes:5.1f} MB, {report.sessions:,} sessions, {report.messages:,} messages: "
                f"json.loads {best_baseline:.3f}s, iter_sessions {best_reader:.3f}s (CPU, best of {repeat}), "
                f"ratio {best_baseline / best_reader:.2f}x (rounds {min(ratios):.2f}-{max(ratios):.2f}x; "
                "target at least 0.5x)",
                flush=True,
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="small sizes that run in a few seconds")
    parser.add_argument("--small", type=int, default=1000, help="sessions in the small database")
    parser.add_argument("--large", type=int, default=20000, help="sessions in the large database")
    parser.add_argument(
        "--repeat", type=int, default=3, help="timed runs of the database; the best is reported"
    )
    parser.add_argument(
        "--rounds", type=int, default=7, help="timed rounds of each agent format; the best is reported"
    )
    parser.add_argument("--copies", type=int, default=40, help="copies of each agent fixture read")
    parser.add_argument("--formats-only", action="store_true", help="only the coding agents' formats")
    args = parser.parse_args(argv)
    small, large = (50, 1000) if args.quick else (args.small, args.large)
    repeat = 1 if args.quick else max(1, args.repeat)
    agent_formats(4 if args.quick else max(1, args.copies), 1 if args.quick else max(1, args.rounds))
    if args.formats_only:
        return 0

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
