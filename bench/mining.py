"""Benchmark: kindling's full mining against a plain SQL pass over the same Hermes-style database.

First, the headline figure: ``mine(iter_sessions(db))`` in one process against the
anchor's ``raw`` scan (``../shared/anchors/anchor_mining.py``: one SELECT, orjson, calls paired
with results, no objects built), both on a database made by the anchor's own generator
(``make_hermes_db.py``) with at least 300,000 messages and on one twice that size (peak memory),
interleaved in one run, in wall and in CPU time (target >= 0.5x).

Then, for two database sizes (generated with ``generate_sample_db`` and cached under build/bench/), each
measurement runs in its own subprocess so its peak memory (ru_maxrss) is its own:

* baseline - one plain ``SELECT`` over ``messages``, ``orjson.loads`` of every ``tool_calls``,
  and pairing each result with its call by id (the least any miner must do);
* select   - the reader's own ``SELECT`` with rows fetched and dropped (the SQL under the reader);
* reader   - ``iter_sessions`` alone (the sessions reader building canonical sessions);
* mining   - ``mine(iter_sessions(...))``: reader + outcomes + contexts + de-duplication + stats,
  in one process;
* parallel - ``mine_source(db, workers=2)``: the same mining, the same result (checked), in two
  worker processes that each read half of the sessions; its peak memory counts the workers too.

It prints messages/second for each, the ratios against the baseline (target >= 0.5x; the
one-process figure also in CPU time, which moves less with other load on a shared machine) and
peak memory,
plus the task-text classifier's accuracy on the first database. ``--quick`` uses small sizes and
finishes in seconds (a test runs it so the script cannot rot).

    .venv/bin/python bench/mining.py            # anchor: ~312k and ~624k; sample: ~355k and ~710k
    .venv/bin/python bench/mining.py --quick
    .venv/bin/python bench/mining.py --anchor-only
    .venv/bin/python bench/mining.py --anchor-only --instructions   # plus callgrind's counts

``--instructions`` also counts, with valgrind's callgrind, the CPU instructions the anchor's raw
scan and one-process mining execute on the first anchor database (each less a worker that only
starts and imports): unlike seconds, they move by a fraction of a percent from run to run whatever
the machine's load, so their ratio settles what a noisy machine's timings leave open. It takes a
minute or two (valgrind runs code about 50 times slower).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import re
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / "build" / "bench"
FULL_SIZES = (4000, 8000)  # sessions: ~355k and ~710k messages
QUICK_SIZES = (60, 120)
SEED = 7
ANCHORS = ROOT.parent / "shared" / "anchors"
ANCHOR_SIZES = (4200, 8400)  # sessions of make_hermes_db.py: ~312k and ~624k messages
QUICK_ANCHOR_SIZES = (40, 80)


def anchor_module(name: str) -> Any:
    """Import one of the anchor scripts (they are not part of kindling) by path."""
    spec = importlib.util.spec_from_file_location(f"anchor_{name}", ANCHORS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def anchor_db(sessions: int, cache: Path = CACHE) -> Path:
    """Return a cached database made by the anchor's own generator, generating it on first use."""
    path = cache / f"anchor-hermes-s{sessions}-seed{SEED}.db"
    if not path.exists():
        cache.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial")
        partial.unlink(missing_ok=True)
        subprocess.run(
            [sys.executable, str(ANCHORS / "make_hermes_db.py"), str(partial), str(sessions), str(SEED)],
            check=True,
            capture_output=True,
        )
        partial.rename(path)
    return path


def run_anchor_raw(path: Path) -> dict[str, Any]:
    """The anchor's raw scan, exactly as its script runs it."""
    calls = anchor_module("anchor_mining").raw(str(path))
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    messages = conn.execute("SELECT count(*) FROM messages").fetchone()[0]
    conn.close()
    return {"messages": messages, "paired": calls}


def sample_db(sessions: int, cache: Path = CACHE) -> Path:
    """Return a cached generated database of ``sessions`` sessions, generating it on first use."""
    from kindling.sessions.sample import SAMPLE_VERSION, generate_sample_db

    path = cache / f"hermes-v{SAMPLE_VERSION}-s{sessions}-seed{SEED}.db"
    if not path.exists():
        generate_sample_db(path, sessions=sessions, seed=SEED)
    return path


def run_baseline(path: Path) -> dict[str, Any]:
    """One plain SELECT, JSON parsing of tool_calls, pairing by id: the floor for any miner."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    messages = paired = 0
    pending: dict[str, str] = {}
    current = None
    rows = conn.execute(
        "SELECT session_id, role, content, tool_call_id, tool_calls FROM messages "
        "WHERE active = 1 OR compacted = 1 ORDER BY session_id, id"
    )
    for session_id, role, _content, tool_call_id, tool_calls in rows:
        messages += 1
        if session_id != current:
            current = session_id
            pending.clear()
        if tool_calls:
            for call in orjson.loads(tool_calls):
                pending[call["id"]] = call["function"]["name"]
        elif role == "tool" and pending.pop(tool_call_id, None) is not None:
            paired += 1
    conn.close()
    return {"messages": messages, "paired": paired}


def run_select(path: Path) -> dict[str, Any]:
    """The reader's own message query with every row fetched and dropped: the SQL under the reader."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    messages = 0
    rows = conn.execute(
        "SELECT session_id, id, role, content, tool_call_id, tool_calls, tool_name, timestamp "
        "FROM messages WHERE active = 1 OR compacted = 1 ORDER BY session_id, id"
    )
    for _row in rows:
        messages += 1
    conn.close()
    return {"messages": messages}


def run_reader(path: Path) -> dict[str, Any]:
    """Read every session through kindling's reader and do nothing else."""
    from kindling.sessions import iter_sessions

    messages = 0
    for session in iter_sessions(path):
        messages += len(session.messages)
    return {"messages": messages}


def run_mining(path: Path) -> dict[str, Any]:
    """kindling's full mining: reader, pairing, outcomes, contexts, de-duplication, stats."""
    from kindling.mining import mine
    from kindling.sessions import iter_sessions
    from kindling.sessions.model import ReadReport

    report = ReadReport()
    result = mine(iter_sessions(path, report=report), report=report)
    return {
        "messages": result.stats.messages,
        "paired": result.stats.results_paired,
        "distinct": result.distinct,
        "examples": len(result.examples),
        "digest": _digest(result),
    }


PARALLEL_WORKERS = 2


def run_parallel(path: Path) -> dict[str, Any]:
    """The same full mining in PARALLEL_WORKERS worker processes (``mine_source``)."""
    from kindling.mining import mine_source
    from kindling.sessions.model import ReadReport

    report = ReadReport()
    result = mine_source(path, workers=PARALLEL_WORKERS, report=report)
    return {
        "messages": result.stats.messages,
        "paired": result.stats.results_paired,
        "distinct": result.distinct,
        "examples": len(result.examples),
        "digest": _digest(result),
    }


def _digest(result: Any) -> str:
    import hashlib

    return hashlib.sha256(orjson.dumps(result.as_dict(), option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]


def run_mine_only(path: Path) -> dict[str, Any]:
    """``mine`` alone over sessions already in memory: mining's own cost without the reader's."""
    from kindling.mining import mine
    from kindling.sessions import iter_sessions

    sessions = list(iter_sessions(path))
    start = time.perf_counter()
    cpu_start = time.process_time()
    result = mine(sessions)
    return {
        "messages": result.stats.messages,
        "timed_seconds": time.perf_counter() - start,
        "timed_cpu_seconds": time.process_time() - cpu_start,
    }


def run_imports(path: Path) -> dict[str, Any]:
    """Nothing: what every worker costs before its work (the start and the imports), to subtract."""
    return {"messages": 0}


WORKERS = {
    "imports": run_imports,
    "anchor_raw": run_anchor_raw,
    "baseline": run_baseline,
    "select": run_select,
    "reader": run_reader,
    "mining": run_mining,
    "parallel": run_parallel,
    "mine_only": run_mine_only,
}


def worker(kind: str, path: Path) -> None:
    """Run one measurement in this process and print its figures as JSON."""
    # Imports are not part of the measurement, and every kind pays the same memory for them.
    # Nothing else is imported to read a Hermes database: telling its format apart no longer
    # imports SQLAlchemy, so the measured process holds what a user's process holds.
    import kindling.mining
    import kindling.sessions.hermes  # noqa: F401

    start = time.perf_counter()
    cpu_start = time.process_time()
    figures = WORKERS[kind](path)
    # CPU time too: on a shared machine it moves less with other processes' load than wall time.
    figures["cpu_seconds"] = figures.pop("timed_cpu_seconds", time.process_time() - cpu_start)
    figures["seconds"] = figures.pop("timed_seconds", time.perf_counter() - start)
    # ru_maxrss is in KiB on Linux. For children it is the largest peak of any waited-for child.
    figures["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    figures["child_peak_rss_mb"] = children.ru_maxrss / 1024
    figures["child_cpu_seconds"] = children.ru_utime + children.ru_stime
    print(json.dumps(figures))


def measure(kind: str, path: Path, repeats: int) -> dict[str, Any]:
    """Run ``kind`` on ``path`` in ``repeats`` fresh subprocesses; keep the fastest run."""
    best: dict[str, Any] | None = None
    for _ in range(repeats):
        out = subprocess.run(
            [sys.executable, __file__, "--worker", kind, "--db", str(path)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        figures = json.loads(out.strip().splitlines()[-1])
        if best is None or figures["seconds"] < best["seconds"]:
            best = figures
    assert best is not None
    return best


def synthetic_sessions(sessions: int, distinct: int, calls: int = 10) -> Iterator[Any]:
    """Stream sessions of 21 messages whose calls cycle through ``distinct`` different commands."""
    from kindling.sessions.model import Message, Session, ToolCall

    for i in range(sessions):
        messages = [Message("user", f"task {i}")]
        for j in range(calls):
            k = (i * calls + j) % distinct
            call = ToolCall(f"c{j}", "terminal", {"command": f"echo {k}", "cwd": "/srv/app"})
            messages.append(Message("assistant", None, (call,)))
            messages.append(Message("tool", f"output of command {k} " + "x" * 300, tool_call_id=f"c{j}"))
        yield Session(f"s{i}", "cli", tuple(messages), started_at=float(i))


def memory_scaling(quick: bool) -> None:
    """Print mining's traced peak memory as input and distinct examples grow independently."""
    import tracemalloc

    from kindling.mining import mine

    base = 1000 if quick else 10000
    cases = ((base, 100), (2 * base, 100), (2 * base, 100 * (10 if quick else 100)))
    print("\nmemory: mine() over streamed synthetic sessions (traced peak, reader excluded)")
    first: float | None = None
    for sessions, distinct in cases:
        tracemalloc.start()
        result = mine(synthetic_sessions(sessions, distinct), max_examples=100)
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        first = first or peak
        print(
            f"  {result.stats.messages:>9,} messages, {result.distinct:>7,} distinct kept: "
            f"peak {peak:7.2f} MB ({peak / first:.1f}x the first)"
        )


def text_accuracy(path: Path) -> tuple[float | None, int]:
    """Return the task-text classifier's accuracy against the tool-call type, and sessions judged."""
    from kindling.mining import measure_text_accuracy
    from kindling.sessions import iter_sessions

    result = measure_text_accuracy(iter_sessions(path))
    return result.accuracy, result.total


def instructions(kinds: tuple[str, ...], path: Path) -> dict[str, tuple[int, dict[str, Any]]]:
    """Return the CPU instructions each worker kind executes on ``path`` (valgrind's callgrind),
    with the figures the worker printed.

    Unlike seconds, the count moves by a fraction of a percent from run to run whatever else the
    machine is doing, so a ratio of counts settles what a noisy machine's timings leave open. All kinds run side by side
    (the counts do not depend on it), each with the same hash seed so sets and dicts are laid out
    alike from run to run.
    """
    with tempfile.TemporaryDirectory() as tmp:
        procs = {
            kind: subprocess.Popen(
                [
                    "valgrind",
                    "--tool=callgrind",
                    f"--callgrind-out-file={tmp}/{kind}.out",
                    sys.executable,
                    __file__,
                    "--worker",
                    kind,
                    "--db",
                    str(path),
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env={**os.environ, "PYTHONHASHSEED": "0"},
            )
            for kind in kinds
        }
        counts: dict[str, tuple[int, dict[str, Any]]] = {}
        for kind, proc in procs.items():
            printed, err = proc.communicate()
            out = Path(tmp) / f"{kind}.out"
            if proc.returncode != 0 or not out.is_file():
                raise SystemExit(f"callgrind failed on {kind}: {err.strip()[-500:]}")
            totals = re.search(r"^(?:totals|summary): (\d+)", out.read_text(errors="replace"), re.M)
            if totals is None:
                raise SystemExit(f"callgrind wrote no totals for {kind} ({out})")
            counts[kind] = (int(totals.group(1)), json.loads(printed.strip().splitlines()[-1]))
    return counts


def instructions_against_anchor(sessions: int, cache: Path) -> None:
    """Print one-process mining against the anchor's raw scan in instructions, not seconds."""
    if not (ANCHORS / "anchor_mining.py").is_file():
        print(f"\nanchor: {ANCHORS} is not there; the instruction counts are left out")
        return
    if shutil.which("valgrind") is None:
        print("\ninstructions: valgrind is not installed (Debian's valgrind package); left out")
        return
    path = anchor_db(sessions, cache)
    print(f"\none process against the anchor's raw scan in CPU instructions (callgrind), {sessions} sessions")
    counts = instructions(("imports", "anchor_raw", "mining"), path)
    messages = counts["anchor_raw"][1]["messages"]
    # Every worker starts the interpreter and imports the same modules first: that is subtracted.
    work = {kind: counts[kind][0] - counts["imports"][0] for kind in ("anchor_raw", "mining")}
    for kind, label in (("anchor_raw", "anchor raw"), ("mining", "mining")):
        print(f"    {label:<10} {work[kind] / messages:>10,.0f} instructions/msg  ({work[kind]:,} in all)")
    print(
        f"    ratio mining/anchor raw in instructions (one process): "
        f"{work['anchor_raw'] / work['mining']:.2f}x (target >= 0.5x)"
    )


def against_anchor(sizes: tuple[int, ...], repeats: int, cache: Path) -> None:
    """Print one-process mining against the anchor's raw scan, measured alternately in this run."""
    if not (ANCHORS / "anchor_mining.py").is_file():
        print(f"\nanchor: {ANCHORS} is not there; the figure against the anchor's raw scan is left out")
        return
    print("\none process against the anchor's raw scan (anchor_mining.py raw), on make_hermes_db.py data")
    peaks: list[float] = []
    for sessions in sizes:
        path = anchor_db(sessions, cache)
        raw: dict[str, Any] | None = None
        mining: dict[str, Any] | None = None
        for _ in range(repeats):  # alternately, so both see the same load
            once_raw = measure("anchor_raw", path, 1)
            once_mining = measure("mining", path, 1)
            if raw is None or once_raw["seconds"] < raw["seconds"]:
                raw = once_raw
            if mining is None or once_mining["seconds"] < mining["seconds"]:
                mining = once_mining
        assert raw is not None and mining is not None
        if raw["paired"] != mining["paired"]:
            print(f"  warning: the anchor paired {raw['paired']} calls, mining {mining['paired']}")
        messages = raw["messages"]
        print(f"  {sessions} sessions, {messages:,} messages ({path.name})")
        for name, fig in (("anchor raw", raw), ("mining", mining)):
            print(
                f"    {name:<10} {messages / fig['seconds']:>12,.0f} msg/s  {fig['seconds']:7.2f} s  "
                f"(cpu {fig['cpu_seconds']:5.2f} s)  peak {fig['peak_rss_mb']:7.1f} MB"
            )
        print(
            f"    ratio mining/anchor raw (one process): {raw['seconds'] / mining['seconds']:.2f}x "
            f"(target >= 0.5x); in CPU time: {raw['cpu_seconds'] / mining['cpu_seconds']:.2f}x"
        )
        peaks.append(mining["peak_rss_mb"])
    if len(peaks) == 2:
        print(f"  mining peak memory as the database doubles: {peaks[0]:.1f} MB -> {peaks[1]:.1f} MB")


def main() -> None:
    """Parse arguments, run the measurements and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small databases; runs in a few seconds")
    parser.add_argument("--repeats", type=int, default=None, help="runs per measurement (fastest kept)")
    parser.add_argument("--cache", type=Path, default=CACHE, help="where generated databases are kept")
    parser.add_argument(
        "--anchor-only", action="store_true", help="only the one-process figure vs the anchor"
    )
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="also count the one-process figure's CPU instructions with valgrind (callgrind) on the "
        "first anchor database: within a fraction of a percent from run to run, whatever the machine's load "
        "(a minute or two)",
    )
    parser.add_argument("--worker", choices=sorted(WORKERS), help=argparse.SUPPRESS)
    parser.add_argument("--db", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.db)
        return

    sizes = QUICK_SIZES if args.quick else FULL_SIZES
    repeats = args.repeats or (1 if args.quick else 3)
    print(f"kindling mining benchmark ({'quick' if args.quick else 'full'}; fastest of {repeats})")
    anchor_sizes = QUICK_ANCHOR_SIZES if args.quick else ANCHOR_SIZES
    against_anchor(anchor_sizes, repeats, args.cache)
    if args.instructions:
        instructions_against_anchor(anchor_sizes[0], args.cache)
    if args.anchor_only:
        return
    for sessions in sizes:
        path = sample_db(sessions, args.cache)
        base = measure("baseline", path, repeats)
        select = measure("select", path, repeats)
        reader = measure("reader", path, repeats)
        mining = measure("mining", path, repeats)
        par = measure("parallel", path, repeats)
        mine_only = measure("mine_only", path, repeats)
        messages = mining["messages"]
        # The baseline counts Hermes's compaction summaries as messages; the reader does not.
        if base["paired"] != mining["paired"]:
            print(
                f"  warning: baseline saw {base['messages']} messages/{base['paired']} pairs, "
                f"mining {messages}/{mining['paired']}"
            )
        if par["digest"] != mining["digest"]:
            print("  warning: parallel mining gave a different result from one process")
        figures = (
            ("baseline", base),
            ("select", select),
            ("reader", reader),
            ("mining", mining),
            ("parallel", par),
            ("mine_only", mine_only),
        )
        rate = {name: fig["messages"] / fig["seconds"] for name, fig in figures}
        cpu_rate = {name: fig["messages"] / fig["cpu_seconds"] for name, fig in figures}
        print(f"\n{sessions} sessions, {messages:,} messages ({path.name})")
        for name, fig in figures[:4]:
            print(
                f"  {name:<9} {rate[name]:>12,.0f} msg/s  {fig['seconds']:7.2f} s  "
                f"(cpu {fig['cpu_seconds']:5.2f} s)  peak {fig['peak_rss_mb']:7.1f} MB"
            )
        # CPU time of every process: the parallel run spends more in total, in less wall time.
        workers_peak = par["child_peak_rss_mb"]
        par_cpu = par["cpu_seconds"] + par["child_cpu_seconds"]
        print(
            f"  parallel  {rate['parallel']:>12,.0f} msg/s  {par['seconds']:7.2f} s  "
            f"(cpu {par_cpu:5.2f} s in all {PARALLEL_WORKERS + 1} processes)  peak {par['peak_rss_mb']:7.1f} MB"
            f" + workers {PARALLEL_WORKERS} x {workers_peak:.1f} MB"
        )
        print(f"  ratio mining/baseline (one process): {rate['mining'] / rate['baseline']:.2f}x")
        print(
            f"  ratio parallel/baseline ({PARALLEL_WORKERS} workers): "
            f"{rate['parallel'] / rate['baseline']:.2f}x (target >= 0.5x)"
        )
        print(
            f"  ratio mining/baseline in CPU time (one process): {cpu_rate['mining'] / cpu_rate['baseline']:.2f}x"
        )
        print(f"  parallel speed-up over one process: {rate['parallel'] / rate['mining']:.2f}x")
        print(f"  ratio reader/baseline: {rate['reader'] / rate['baseline']:.2f}x")
        print(
            f"  the reader's SELECT alone (rows fetched, nothing built)/baseline: "
            f"{rate['select'] / rate['baseline']:.2f}x"
        )
        print(
            f"  ratio mine() alone (sessions in memory)/baseline: {rate['mine_only'] / rate['baseline']:.2f}x"
        )
        print(f"  mining share spent in the reader: {reader['seconds'] / mining['seconds']:.0%}")
        print(f"  distinct examples kept: {mining['distinct']:,} (returned {mining['examples']})")
        print(f"  peak memory above the reader alone: {mining['peak_rss_mb'] - reader['peak_rss_mb']:.1f} MB")
        total_peak = par["peak_rss_mb"] + PARALLEL_WORKERS * workers_peak
        print(
            f"  parallel peak memory, all processes: at most {total_peak:.1f} MB "
            f"(parent {par['peak_rss_mb']:.1f} + {PARALLEL_WORKERS} x the largest worker's "
            f"{workers_peak:.1f}; forked workers share the parent's pages, so less in fact)"
        )
    memory_scaling(args.quick)
    accuracy, judged = text_accuracy(sample_db(sizes[0], args.cache))
    if accuracy is not None:
        print(f"\ntask-text classification accuracy vs tool-call type: {accuracy:.1%} of {judged} sessions")


if __name__ == "__main__":
    main()
