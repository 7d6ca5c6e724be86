"""Mine a Hermes database in several worker processes, with exactly the result of one pass.

One process tops out well below the speed of a plain SQL pass over ``messages`` (building sessions,
pairing, judging outcomes and de-duplicating all run in Python), and most machines have more than
one core. ``mine_source`` splits a Hermes database (SQLite or PostgreSQL) into shards of session ids
that hold about the same number of messages (``kindling.sessions.hermes.shard_bounds``), so every
session goes to exactly one worker. Each worker reads its shard with the same streaming reader and
runs the same ``mine_partial`` as ``mine``; the parent merges the parts in shard order with
``merge_partials`` (counts add, each group keeps the representative one pass would keep) and then
ranks and caps once, never per shard. The stats and read reports add up. The result is identical
to ``mine(iter_sessions(source))``, which the tests check on SQLite and PostgreSQL.

Other formats, ``max_sessions`` (a stop after N mined sessions is inherently sequential) and
sources too small to repay starting processes are mined in this process, the same way as before.

A worker that raises surfaces as the same KindlingError in the caller (other errors as a
KindlingError naming the worker); a worker that dies (killed, out of memory) is noticed through
its process sentinel and reported as a KindlingError too. Nothing waits on a dead worker.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import multiprocessing
import multiprocessing.connection
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kindling.errors import KindlingError
from kindling.mining.config import MiningConfig, load_mining_config
from kindling.mining.patterns import (
    DEFAULT_CONTEXT_CHARS,
    DEFAULT_MAX_EXAMPLES,
    DEFAULT_MIN_MESSAGES,
    DEFAULT_RESULT_CHARS,
    MiningResult,
    PartialMining,
    check_limits,
    finish,
    merge_partials,
    mine,
    mine_partial,
)
from kindling.sessions.model import ReadReport, Session, SessionRows, SessionStream, session_rows

#: At most this many workers unless asked for more: beyond it, the reads contend for the disk and
#: the merge grows while the gain per worker shrinks.
MAX_AUTO_WORKERS = 4
#: Automatic mode starts one worker per this many message rows (at least two, or it stays in this
#: process): below it, starting a process costs more than it saves.
MESSAGES_PER_WORKER = 25_000
_PROGRESS_EVERY = 100
# Filters ``mine`` accepts, for a clear TypeError on a misspelt one before any process starts.
_FILTERS = frozenset(inspect.signature(mine).parameters) - {"sessions", "report", "config"}

ProgressCallback = Callable[[int], None]


@dataclass(frozen=True)
class Shard:
    """One worker's share of a source: the sessions with ``low <= id < high`` (None: unbounded)."""

    source: str | Path
    low: Any
    high: Any


def default_workers() -> int:
    """Return how many workers automatic mode may use: the cores, at most ``MAX_AUTO_WORKERS``."""
    return max(1, min(os.cpu_count() or 1, MAX_AUTO_WORKERS))


def mine_source(
    source: str | Path,
    *,
    format: str | None = None,
    workers: int | None = None,
    report: ReadReport | None = None,
    on_progress: ProgressCallback | None = None,
    config: MiningConfig | None = None,
    start_method: str | None = None,
    **filters: Any,
) -> MiningResult:
    """Return ``mine(iter_sessions(source, format), **filters)``, computed in worker processes.

    See ``mine_sources``; this is the one-source case.
    """
    return mine_sources(
        [source],
        format=format,
        workers=workers,
        report=report,
        on_progress=on_progress,
        config=config,
        start_method=start_method,
        **filters,
    )


def mine_sources(
    sources: Sequence[str | Path],
    *,
    format: str | None = None,
    workers: int | None = None,
    report: ReadReport | None = None,
    on_progress: ProgressCallback | None = None,
    config: MiningConfig | None = None,
    start_method: str | None = None,
    **filters: Any,
) -> MiningResult:
    """Mine ``sources`` read one after another as one stream; the same result as ``mine`` over them.

    ``filters`` are ``mine``'s (min_messages, max_sessions, source_filter, max_examples, ...).
    ``workers`` None picks ``min(cores, 4)`` when the Hermes sources hold at least
    ``MESSAGES_PER_WORKER`` message rows per worker, else 1; 1 mines in this process. Non-Hermes
    formats and ``max_sessions`` always mine in this process. ``report`` receives the read counts
    of every shard; ``on_progress`` is called with the number of sessions read since its last call.
    ``start_method`` forces a multiprocessing start method (default: see ``_context``).
    Every source is opened before any is read, so a bad one fails at once. Raises SourceError or
    UnknownFormatError for a source, ConfigError for a bad ``mining.json``, ValueError for a bad
    limit or worker count, TypeError for an unknown filter, and KindlingError when a worker dies.
    """
    from kindling.errors import UnknownFormatError
    from kindling.sessions.sources import (
        FORMATS,
        HERMES,
        _shown,
        detect_format,
        iter_sessions,
        resolve_source,
    )

    unknown = sorted(set(filters) - _FILTERS)
    if unknown:
        raise TypeError(f"unknown mining filter {unknown[0]!r}")
    if workers is not None and workers < 1:
        raise ValueError(f"workers must be 1 or more, not {workers}")
    max_examples = int(filters.get("max_examples", DEFAULT_MAX_EXAMPLES))
    check_limits(
        int(filters.get("min_messages", DEFAULT_MIN_MESSAGES)),
        filters.get("max_sessions"),
        max_examples,
        int(filters.get("result_chars", DEFAULT_RESULT_CHARS)),
        int(filters.get("context_chars", DEFAULT_CONTEXT_CHARS)),
    )
    if format is not None and format not in FORMATS:
        raise UnknownFormatError(
            f"Unknown format {format!r}; choose one of: {', '.join(FORMATS)}.",
            path=_shown(sources[0]) if sources else "",
        )
    config = config if config is not None else load_mining_config()
    report = report if report is not None else ReadReport()
    resolved = [resolve_source(source) for source in sources]
    formats = [format or detect_format(source) for source in resolved]

    from kindling.sessions.files import WalFiles
    from kindling.sessions.hermes import is_postgres_url

    shards: list[Shard] = []
    count = 1
    wal_guards: list[WalFiles] = []
    if (
        workers != 1
        and filters.get("max_sessions") is None
        and resolved
        and all(f == HERMES for f in formats)
    ):
        wal_guards = [WalFiles(Path(source)) for source in resolved if not is_postgres_url(source)]
        shards, count = _plan(resolved, workers)
    if len(shards) < 2:
        # One process, exactly as mine(iter_sessions(...)) always did.
        # The format as given (None: detect it), so a source that reads as nothing in a format forced
        # on it is an error (FormatMismatchError), while a detected one is read as before.
        streams = [iter_sessions(source, format, report=report) for source in resolved]
        return mine(_chained(streams, on_progress), report=report, config=config, **filters)

    partial_filters = {
        k: v for k, v in filters.items() if k not in ("max_examples", "max_sessions", "keep_personal_data")
    }
    for key in ("source_filter", "skip_end_reasons", "skip_tools"):
        value = partial_filters.get(key)
        if value is not None and not isinstance(value, str):
            partial_filters[key] = tuple(value)  # generators and views do not cross processes
    partial_filters["keep_examples"] = max_examples > 0
    try:
        parts = _run(shards, count, partial_filters, config, on_progress, start_method)
    finally:
        # Workers read side by side: the last one to finish cannot tell whether the -wal/-shm files
        # were there before the first one began. This process can.
        for guard in wal_guards:
            guard.release()
    for _partial, shard_report in parts:
        report.merge(shard_report)
    merged = merge_partials(partial for partial, _report in parts)
    return finish(
        merged,
        max_examples=max_examples,
        report=report,
        config=config,
        keep_personal_data=bool(filters.get("keep_personal_data", False)),
    )


def _chained(streams: list[Iterator[Session]], on_progress: ProgressCallback | None) -> SessionStream:
    # In row form, so mining takes the readers' rows without building Message objects.
    return SessionStream(_chained_rows(streams, on_progress))


def _chained_rows(
    streams: list[Iterator[Session]], on_progress: ProgressCallback | None
) -> Iterator[SessionRows]:
    for stream in streams:
        for pair in session_rows(stream):
            if on_progress is not None:
                on_progress(1)
            yield pair


def _plan(sources: list[str | Path], workers: int | None) -> tuple[list[Shard], int]:
    """Return the shards for ``sources`` (in reading order) and how many may run at once."""
    from kindling.sessions.hermes import shard_bounds, shards_of

    wanted = workers if workers is not None else default_workers()
    first = wanted  # the bounds below are cut for this many parts
    totals: list[int] = []
    bounds: list[list[Any]] = []
    for source in sources:
        total, cuts = shard_bounds(source, first)
        totals.append(total)
        bounds.append(cuts)
    everything = sum(totals)
    if workers is None:
        wanted = min(wanted, everything // MESSAGES_PER_WORKER)
        if wanted < 2:
            return [], 1
    shards: list[Shard] = []
    for source, total, cuts in zip(sources, totals, bounds, strict=True):
        # Each source gets shards in proportion to its share of the messages.
        parts = max(1, min(wanted, round(wanted * total / everything))) if everything else 1
        if parts == 1:
            cuts = []
        elif parts != first:
            _total, cuts = shard_bounds(source, parts)
        shards.extend(Shard(source, low, high) for low, high in shards_of(cuts))
    return shards, wanted


def _context(start_method: str | None) -> Any:
    """Return the multiprocessing context workers start in.

    fork is by far the cheapest: no interpreter start and no imports. Two workers over 340k messages
    took 0.51 s with fork, 0.65 s with forkserver (its first use starts the server and imports
    kindling there) and 0.67 s with spawn (each worker imports kindling and the caller's main
    module), against 0.93 s in one process. But fork copies only the calling thread: a lock another thread holds at that moment (a log
    handler, a console, a connection pool) stays locked forever in the child. So fork is used only
    while this process runs a single Python thread; otherwise forkserver, whose server forks from a
    clean single-threaded process and preloads this module once.
    """
    if start_method is not None:
        return multiprocessing.get_context(start_method)
    methods = multiprocessing.get_all_start_methods()
    if threading.active_count() == 1 and "fork" in methods:
        return multiprocessing.get_context("fork")
    if "forkserver" in methods:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["kindling.mining.parallel"])
        return context
    return multiprocessing.get_context("spawn")


def _label(shard: Shard) -> str:
    from kindling.db import redact_url

    return redact_url(shard.source)


def _run(
    shards: list[Shard],
    concurrency: int,
    filters: dict[str, Any],
    config: MiningConfig,
    on_progress: ProgressCallback | None,
    start_method: str | None,
) -> list[tuple[PartialMining, ReadReport]]:
    """Run every shard in a worker (at most ``concurrency`` at once); return their parts in order."""
    context = _context(start_method)
    results: dict[int, tuple[PartialMining, ReadReport]] = {}
    waiting = list(range(len(shards)))
    running: dict[int, tuple[Any, Any]] = {}  # shard index -> (process, receiving end)
    try:
        while waiting or running:
            while waiting and len(running) < concurrency:
                index = waiting.pop(0)
                receiver, sender = context.Pipe(duplex=False)
                process = context.Process(
                    target=_worker,
                    args=(sender, shards[index], filters, config, on_progress is not None),
                    name=f"kindling-mine-{index}",
                    daemon=True,
                )
                process.start()
                sender.close()  # the child holds the only sending end: EOF means it is gone
                running[index] = (process, receiver)
            ready = multiprocessing.connection.wait(
                [end for _process, end in running.values()] + [p.sentinel for p, _end in running.values()]
            )
            for index, (process, receiver) in list(running.items()):
                if receiver not in ready and process.sentinel not in ready:
                    continue
                done = _drain(receiver, index, shards, on_progress)
                if done is not None:
                    results[index] = done
                    receiver.close()
                    process.join()
                    del running[index]
                elif not process.is_alive():
                    process.join()
                    raise KindlingError(
                        f"A mining worker for {_label(shards[index])} (shard {index + 1} of {len(shards)}) "
                        f"stopped without a result (exit code {process.exitcode})."
                    )
    finally:
        for process, _receiver in running.values():
            process.terminate()
        for process, receiver in running.values():
            process.join(5)
            if process.is_alive():
                process.kill()
                process.join()
            receiver.close()
    return [results[i] for i in range(len(shards))]


def _drain(
    receiver: Any, index: int, shards: list[Shard], on_progress: ProgressCallback | None
) -> tuple[PartialMining, ReadReport] | None:
    """Read every message waiting from one worker; return its part once it has sent it."""
    while receiver.poll():
        try:
            kind, payload = receiver.recv()
        except (EOFError, OSError):
            return None  # the worker closed its end: the caller looks at its exit
        if kind == "progress":
            if on_progress is not None:
                on_progress(payload)
        elif kind == "done":
            part: tuple[PartialMining, ReadReport] = payload
            return part
        else:
            raise _rebuild(payload, shards[index], index, len(shards))
    return None


def _worker(sender: Any, shard: Shard, filters: dict[str, Any], config: MiningConfig, progress: bool) -> None:
    """Mine one shard and send ``("done", (part, report))`` or ``("error", description)``."""
    try:
        from kindling.sessions.hermes import is_postgres_url, read_hermes_postgres, read_hermes_sqlite

        report = ReadReport()
        bounds = (shard.low, shard.high)
        if is_postgres_url(shard.source):
            sessions = read_hermes_postgres(str(shard.source), report, shard=bounds)
        else:
            sessions = read_hermes_sqlite(shard.source, report, shard=bounds)
        stream = SessionStream(_reporting(session_rows(sessions), sender)) if progress else sessions
        part = mine_partial(stream, config=config, **filters)
        sender.send(("done", (part, report)))
    except BaseException as exc:  # every failure must reach the parent, described
        # If even this fails, the parent sees the worker exit without a result instead.
        with contextlib.suppress(Exception):
            sender.send(("error", _describe(exc)))
    finally:
        sender.close()


def _reporting(sessions: Iterable[SessionRows], sender: Any) -> Iterator[SessionRows]:
    read = 0
    for session in sessions:
        read += 1
        if read == _PROGRESS_EVERY:
            sender.send(("progress", read))
            read = 0
        yield session
    if read:
        sender.send(("progress", read))


def _describe(exc: BaseException) -> tuple[str, str, str, dict[str, Any]]:
    """Describe an exception so the parent can raise the same one (pickling may not round-trip)."""
    attributes: dict[str, Any] = {}
    if isinstance(exc, KindlingError):
        attributes = {k: v for k, v in vars(exc).items() if isinstance(v, (str, int, float, type(None)))}
    return type(exc).__module__, type(exc).__qualname__, str(exc), attributes


def _rebuild(
    description: tuple[str, str, str, dict[str, Any]], shard: Shard, index: int, shards: int
) -> Exception:
    module, name, message, attributes = description
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        cls = None
    if isinstance(cls, type) and issubclass(cls, KindlingError):
        error: KindlingError = cls.__new__(cls)
        KindlingError.__init__(error, message)
        vars(error).update(attributes)
        return error
    return KindlingError(
        f"A mining worker for {_label(shard)} (shard {index + 1} of {shards}) failed: {name}: {message}"
    )
