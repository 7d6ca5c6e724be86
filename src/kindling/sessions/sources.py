"""One entry point for every session source: detect the format, open it, stream canonical sessions.

``iter_sessions(source)`` accepts a Hermes ``state.db`` (or a Hermes home directory holding one),
a ``postgresql://`` URL with Hermes tables, kindling's proxy store (SQLite file or URL), a file in
one of the JSON formats, or a folder: every session file below it is read (a Claude Code home
``~/.claude`` is read from its ``projects/``, a Codex home ``~/.codex`` from its ``sessions/``). The
format is detected from the content, never from the file name alone; ``format=`` forces one.
"""

from __future__ import annotations

import contextlib
import itertools
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson

from kindling.errors import (
    FormatMismatchError,
    KindlingError,
    NotFoundError,
    SourceError,
    UnknownFormatError,
)

# The detection predicates of the file formats (their readers are imported when a file is read).
from kindling.sessions.claudecode import is_claude_code_record, read_claude_code
from kindling.sessions.codex import is_codex_record, read_codex
from kindling.sessions.files import (
    LEADING_BYTES,
    SQLITE_MAGIC,
    keep_detected,
    peek_head,
    read_document,
)
from kindling.sessions.folders import (
    home_format,
    session_entries,
    session_files,
)
from kindling.sessions.model import ReadReport, Session
from kindling.sessions.openai_agents import (
    agents_sessions,
    is_agents_document,
    is_agents_record,
    read_openai_agents,
)
from kindling.sessions.openhands import is_openhands_event, openhands_sessions, read_openhands
from kindling.sessions.sweagent import is_swe_agent_trajectory, read_swe_agent, swe_agent_sessions
from kindling.sessions.taubench import describe_document, document_format, is_run_directory_results

HERMES = "hermes"
HERMES_EXPORT = "hermes-export"
SHAREGPT = "sharegpt"
OPENAI = "openai"
TAU_BENCH = "tau-bench"
TAU2_BENCH = "tau2-bench"
PROXY = "proxy"
CLAUDE_CODE = "claude-code"
CODEX = "codex"
OPENHANDS = "openhands"
SWE_AGENT = "swe-agent"
OPENAI_AGENTS = "openai-agents"

#: Every format name ``iter_sessions`` and ``--format`` accept.
FORMATS: tuple[str, ...] = (
    HERMES,
    HERMES_EXPORT,
    SHAREGPT,
    OPENAI,
    TAU_BENCH,
    TAU2_BENCH,
    PROXY,
    CLAUDE_CODE,
    CODEX,
    OPENHANDS,
    SWE_AGENT,
    OPENAI_AGENTS,
)

# Keys of a Hermes session row: a JSONL object holding one of these next to "messages" is a Hermes
# session export rather than a plain OpenAI chat log.
_HERMES_SESSION_KEYS = frozenset({"source", "started_at", "end_reason", "parent_session_id", "message_count"})

# Keys of the run info at the top of a tau2-bench results file ({"timestamp", "info": {...}, ...}).
_TAU2_INFO_KEYS = (b'"info"', b'"user_info"', b'"agent_info"')

Reader = Callable[[Path, ReadReport], Iterator[Session]]


def resolve_source(source: str | Path) -> str | Path:
    """Return what ``source`` names: a URL unchanged, a Hermes home directory as its ``state.db``,
    a tau2-bench run directory as its ``results.json``, any other directory of JSON files as is.

    Raises SourceError when a path does not exist or is a directory that holds none of these.
    """
    from kindling.sessions.hermes import is_postgres_url

    if is_postgres_url(source):
        return str(source)
    if isinstance(source, str) and source.startswith("sqlite:///"):
        source = source[len("sqlite:///") :]
    path = Path(source).expanduser()
    if not path.exists():
        raise SourceError(f"Cannot open {path}: no such file or directory.", path=path)
    if path.is_dir():
        state_db = path / "state.db"
        if state_db.is_file():
            return state_db
        results = path / "results.json"
        if results.is_file() and (path / "simulations").is_dir():
            return results  # a tau2-bench run saved in its directory format
        try:
            first = next(session_files(path), None)
        except OSError as exc:
            raise SourceError(f"Cannot open {path}: {exc.strerror or exc}.", path=path) from exc
        if first is not None:
            # Kept for telling the folder's format, which nearly always follows (and looks for it again).
            _FIRST_FILE.clear()
            _FIRST_FILE[path] = first
            return path  # a folder of session files (a coding agent's home, benchmark results), read file by file
        raise SourceError(
            f"Cannot read {path}: it is a directory without a state.db (so not a Hermes home) "
            "and without session files (.jsonl, .json, .traj) in it or its subfolders.",
            path=path,
        )
    return path


# The first session file of the folder ``resolve_source`` resolved last (one entry at most).
_FIRST_FILE: dict[Path, Path] = {}


def detect_format(source: str | Path) -> str:
    """Return the format name of ``source`` (one of FORMATS), judged from its content.

    Raises SourceError when the source cannot be opened and UnknownFormatError when its content
    matches no known format (a JSON document of an unknown shape is one such error).
    """
    return _resolved_format(resolve_source(source))


def _resolved_format(resolved: str | Path) -> str:
    """``detect_format`` of a source ``resolve_source`` already returned."""
    if isinstance(resolved, str):
        return _database_format(resolved)
    if resolved.is_dir():
        return _directory_format(resolved)
    return _file_format(resolved)


def _file_format(path: Path) -> str:
    """The format of one file (``detect_format`` once the source is known to be a file)."""
    fmt, document, data = _sniff(path)
    keep_detected(path, document, data=data)  # the reader that follows takes it instead of reading again
    return fmt


def _sniff(path: Path) -> tuple[str, Any, bytes | None]:
    """``(format, document, data)`` of one file.

    ``document`` is the parsed document when telling the format parsed all of it, ``data`` all
    of the file's bytes when telling the format read all of it (else None). Raises SourceError
    and UnknownFormatError as ``detect_format`` does.
    """
    head, whole, compressed = peek_head(path, _SNIFF_BYTES)
    if head.startswith(SQLITE_MAGIC):
        return _database_format(path), None, None
    if not whole:
        # A longer file: its first lines nearly always say. When they do not, judge as below from
        # a longer peek (its key heuristics look at all of it).
        for value in _first_values(head.lstrip(LEADING_BYTES), whole=False):
            found = _format_of_value(value)
            if found is not None:
                return found, None, None
            if isinstance(value, dict):
                break
        head, whole, compressed = peek_head(path)
    data = head if whole and not compressed else None
    text = head.lstrip(LEADING_BYTES)
    if not text:
        problem = (
            "the file is empty"
            if _size(path) == 0
            else "it holds no data (only whitespace, or a gzip file cut off before its first line)"
        )
        raise UnknownFormatError(f"Cannot detect the format of {path}: {problem}.", path=path)
    if text[:1] not in (b"{", b"["):
        raise UnknownFormatError(
            f"Cannot detect the format of {path}: it is neither a SQLite database nor JSON; "
            "use --format to force one.",
            path=path,
        )
    if data is not None:
        # All of a document written over many lines (its first line opens it and holds nothing
        # else): parsed whole straight away, as its reader takes it, rather than trying its lines.
        newline = text.find(b"\n")
        if newline > 0 and text[:newline].strip() in (b"{", b"["):
            document = _loads(data)
            found = None if document is None else _format_of_value(document)
            if found is not None:
                return found, document, None
    # One JSON value per line (JSONL, or a document on one line): judge by the first line that
    # parses among those the peek holds whole.
    for first in _first_values(text, whole=whole):
        found = _format_of_value(first)
        if found is not None:
            # An array on one line is a whole document: its reader takes it as parsed.
            one_line = data is not None and isinstance(first, list) and b"\n" not in text.strip()
            return found, first if one_line else None, data
        if isinstance(first, dict):
            break  # a line of an unknown shape: the key heuristics below decide
    else:
        # No line parses: a document spread over many lines (or one long line). Parse it whole and
        # find the runs by their shape wherever they sit (from the peek when it holds all of it).
        found, document = _document_format(path, data)
        if found is not None:
            return found, document, None
    # A document that does not parse whole (cut short): judge by the keys near its start. tau2-bench
    # writes its results indented with "simulations" last, after the run info and every task (often
    # far past what is peeked here), so the keys of its run info near the top say tau2-bench too.
    if b'"simulations"' in text or b'"task_results"' in text or all(key in text for key in _TAU2_INFO_KEYS):
        return TAU2_BENCH, None, data
    if b'"traj"' in text:
        return TAU_BENCH, None, data
    if b'"conversations"' in text:
        return SHAREGPT, None, data
    if b'"messages"' in text:
        return OPENAI, None, data
    raise UnknownFormatError(
        f"Cannot detect the format of {path}: no known session keys "
        "(messages, conversations, traj, simulations); use --format to force one.",
        path=path,
    )


_LINES_TRIED = 8
# What detection reads of a file first: all of most session files, the first lines of the others.
_SNIFF_BYTES = 64 * 1024
# Detection parses a multi-line JSON document whole only up to this size on disk.
_DOCUMENT_LIMIT = 512 * 1024 * 1024


def _first_values(text: bytes, *, whole: bool) -> Iterator[Any]:
    """Yield the JSON values of the first lines of ``text`` that parse (a few at most).

    Only lines ``text`` holds whole count (the last one only when ``text`` is all of the file), and
    only those that can be an object or array (a line of a document spread over many lines never is:
    trying it would cost an exception each).
    """
    lines = text.split(b"\n", _LINES_TRIED)
    if len(lines) <= _LINES_TRIED and not whole:
        lines.pop()
    for line in lines[:_LINES_TRIED]:
        line = line.strip()
        if line[:1] not in (b"{", b"[") or line[-1:] not in (b"}", b"]"):
            continue
        try:
            yield orjson.loads(line)
        except orjson.JSONDecodeError:
            continue


def _format_of_value(value: Any) -> str | None:
    found = document_format(value)
    if found is not None:
        return found
    if isinstance(value, dict):
        return _format_of_object(value)
    if isinstance(value, list) and value and isinstance(value[0], dict):
        return _format_of_object(value[0], in_array=True)
    return None


def _document_format(path: Path, data: bytes | None = None) -> tuple[str | None, Any]:
    """``(format, document)`` of a whole JSON document found by its shape; ``(None, None)`` when it does not parse.

    ``data`` is the file's content when the caller holds all of it already. Raises
    UnknownFormatError when it parses but holds nothing kindling reads.
    """
    if data is not None:
        document = _loads(data)
    elif _size(path) > _DOCUMENT_LIMIT:
        return None, None  # too big to parse just to look: perhaps JSONL with a long first line
    else:
        document = read_document(path, ReadReport())
    if document is None:
        return None, None
    found = _format_of_value(document)
    if found is not None:
        return found, document
    if is_run_directory_results(document, path):
        return TAU2_BENCH, document
    raise UnknownFormatError(
        f"Cannot read {path}: unrecognised format. It is {describe_document(document)}, and no "
        "sessions were found in it (no tau-bench runs, tau2-bench simulations, messages or "
        "conversations).",
        path=path,
    )


def _loads(data: bytes) -> Any:
    """``data`` parsed as one JSON document, or None when it is not one (detection only looks)."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return None


def benchmark_directory_format(directory: Path) -> str | None:
    """The format of a directory of benchmark result files (that of its first file holding runs), else None.

    None as soon as a file holds sessions of another format: a folder of session files.
    """
    from kindling.sessions.taubench import document_files

    for path in document_files(directory):
        try:
            document = read_document(path, ReadReport())
        except SourceError:
            continue
        found = _format_of_value(document)
        if found in (TAU_BENCH, TAU2_BENCH):
            return found
        if found is not None:
            return None
    return None


def _directory_format(directory: Path) -> str:
    """The format of a folder: its benchmark results', else that of the first session file below it."""
    first = _FIRST_FILE.pop(directory, None)  # the first session file, as resolve_source just found it
    found = benchmark_directory_format(directory)
    if found is not None:
        return found
    home = home_format(directory)
    if home is not None:
        return home
    if first is not None:
        with contextlib.suppress(SourceError):
            return OPENHANDS if first.is_dir() else _file_format(first)
    for path in session_files(directory):
        try:
            return OPENHANDS if path.is_dir() else _file_format(path)
        except SourceError:
            continue
    raise UnknownFormatError(
        f"Cannot read {directory}: none of the files in it or its subfolders holds sessions "
        "kindling can read.",
        path=directory,
    )


# The table kindling's proxy writes its messages to (``kindling.sessions.recorded.messages_table``),
# named here so that telling a SQLite file's format apart does not import SQLAlchemy (about 0.3 s of
# CPU in a fresh process, and some 20,000 objects every later full collection of the garbage collector walks).
PROXY_MESSAGES_TABLE = "proxy_messages"


def _database_format(target: str | Path) -> str:
    # A database holding the tables kindling's proxy writes is a proxy store; any other is Hermes's.
    if isinstance(target, Path):
        # A file with SQLite's header: read as it is, without importing kindling.db (and its file
        # locking) for the URL forms only a string can take.
        path: Path | None = target.expanduser()
    else:
        from kindling.db import sqlite_path

        path = sqlite_path(target)
    if path is not None:
        return PROXY if _sqlite_has_table(path, PROXY_MESSAGES_TABLE) else HERMES
    from kindling.sessions.recorded import is_recorded_store

    return PROXY if is_recorded_store(target) else HERMES


def _sqlite_has_table(path: Path, table: str) -> bool:
    # Read-only, waiting at most KINDLING_BUSY_TIMEOUT_MS: detecting the format of someone else's
    # database (Hermes's state.db) must not change it (no journal-mode switch, no leftover -wal/-shm
    # files), and a locked file is then reported by the reader, not after a 30 s wait here.
    import sqlite3

    from kindling.config import env_int
    from kindling.sessions.files import WalFiles
    from kindling.sessions.hermes import DEFAULT_BUSY_TIMEOUT_MS

    if not path.is_file():
        return False
    wal = WalFiles(path)
    timeout_ms = env_int("KINDLING_BUSY_TIMEOUT_MS", DEFAULT_BUSY_TIMEOUT_MS)
    try:
        conn = sqlite3.connect(wal.uri, uri=True, timeout=timeout_ms / 1000)
        try:
            query = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"
            return conn.execute(query, (table,)).fetchone() is not None
        finally:
            conn.close()
    except sqlite3.Error:
        return False
    finally:
        wal.release()


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return -1


def _format_of_object(obj: dict[str, Any], *, in_array: bool = False) -> str | None:
    if is_claude_code_record(obj):
        return CLAUDE_CODE
    if is_codex_record(obj):
        return CODEX
    if is_agents_record(obj) or (not in_array and is_agents_document(obj)):
        return OPENAI_AGENTS
    if is_swe_agent_trajectory(obj):
        return SWE_AGENT
    if is_openhands_event(obj):
        return OPENHANDS
    if in_array and "role" in obj and "messages" not in obj:
        return OPENAI  # a plain list of OpenAI chat messages: one conversation
    if "simulations" in obj:
        return TAU2_BENCH
    if "traj" in obj:
        return TAU_BENCH
    if "conversations" in obj:
        return SHAREGPT
    if "messages" in obj:
        if not in_array and _HERMES_SESSION_KEYS & obj.keys():
            return HERMES_EXPORT
        return OPENAI
    return None


# The coding agents' readers (their modules hold the detection predicates, imported above).
_AGENT_READERS: dict[str, Reader] = {
    CLAUDE_CODE: read_claude_code,
    CODEX: read_codex,
    OPENHANDS: read_openhands,
    SWE_AGENT: read_swe_agent,
    OPENAI_AGENTS: read_openai_agents,
}


def reader_for(fmt: str) -> Reader:
    """Return the reader function of one file format (one of FORMATS except the database ones)."""
    return _reader(fmt)


def _reader(fmt: str) -> Reader:
    # Imported on demand: each reader module pulls in only what its format needs.
    if fmt == HERMES:
        from kindling.sessions.hermes import read_hermes_sqlite

        return read_hermes_sqlite
    if fmt == PROXY:
        from kindling.sessions.recorded import read_recorded

        return read_recorded
    reader = _AGENT_READERS.get(fmt)
    if reader is not None:
        return reader
    if fmt in (HERMES_EXPORT, SHAREGPT, OPENAI):
        from kindling.sessions.jsonl import read_hermes_export, read_openai, read_sharegpt

        readers: dict[str, Reader] = {
            HERMES_EXPORT: read_hermes_export,
            SHAREGPT: read_sharegpt,
            OPENAI: read_openai,
        }
        return readers[fmt]
    from kindling.sessions.taubench import read_tau2_bench, read_tau_bench

    return read_tau_bench if fmt == TAU_BENCH else read_tau2_bench


def iter_sessions(
    source: str | Path, format: str | None = None, *, report: ReadReport | None = None
) -> Iterator[Session]:
    """Stream the sessions of ``source`` in the canonical model.

    ``format`` forces one of FORMATS (None detects it). Every session yielded and every malformed
    thing skipped is counted in ``report``. When a forced format reads nothing of a file (no
    session, only skipped records), the stream ends with FormatMismatchError. The source is opened before this returns, so a missing,
    unreadable, locked or corrupt source raises SourceError (UnknownFormatError when the format
    cannot be detected) here rather than midway through the stream.
    """
    from kindling.sessions.hermes import is_postgres_url, read_hermes_postgres

    counts = report if report is not None else ReadReport()
    if format is not None and format not in FORMATS:
        raise UnknownFormatError(
            f"Unknown format {format!r}; choose one of: {', '.join(FORMATS)}.", path=_shown(source)
        )
    resolved = resolve_source(source)
    fmt = format or _resolved_format(resolved)
    if isinstance(resolved, str):
        if fmt not in (HERMES, PROXY) or not is_postgres_url(resolved):
            raise SourceError(
                f"A database URL can only be read as {HERMES!r} or {PROXY!r}.", path=_shown(resolved)
            )
        if fmt == PROXY:
            from kindling.sessions.recorded import read_recorded

            return read_recorded(resolved, counts)
        return read_hermes_postgres(resolved, counts)
    if resolved.is_dir() and fmt not in (TAU_BENCH, TAU2_BENCH):
        return _counted(read_tree(resolved, counts, format), counts, resolved, format)
    sessions = _reader(fmt)(resolved, counts)
    # The Hermes and proxy readers count sessions, messages, calls and results as they build them.
    return sessions if fmt in (HERMES, PROXY) else _counted(sessions, counts, resolved, format)


# ------------------------------------------------------------------------------------- folders


def read_tree(
    directory: Path, report: ReadReport, format: str | None = None, formats: set[str] | None = None
) -> Iterator[Session]:
    """Stream the sessions of every session file below ``directory``, each read in its own format.

    A file whose format cannot be told (or that cannot be opened) is counted (``file_without_sessions``,
    ``unreadable_file``) and the read goes on. ``formats`` collects the formats read.
    """
    from kindling.sessions.skips import FILE_WITHOUT_SESSIONS, UNREADABLE_FILE

    for path, stream in _listed_ahead(session_entries(directory)):
        try:
            if stream:
                fmt = OPENHANDS
                sessions = read_openhands(path, report)
            else:
                document = data = None
                if format is not None:
                    fmt = format
                else:
                    fmt, document, data = _sniff(path)
                if fmt in (HERMES, PROXY):
                    report.skip(FILE_WITHOUT_SESSIONS)
                    continue
                sessions = _read_file(fmt, path, document, data, report)
        except UnknownFormatError:
            report.skip(FILE_WITHOUT_SESSIONS)
            continue
        except SourceError:
            report.skip(UNREADABLE_FILE)
            continue
        if formats is not None:
            formats.add(fmt)
        yield from sessions


def _listed_ahead(entries: Iterator[tuple[Path, bool]]) -> Iterator[tuple[Path, bool]]:
    """``entries``, listed a few hundred at a time before they are read.

    Listing folders and reading files one after the other costs more than doing each in a run
    (the processor's caches keep one kind of work at a time); a bounded batch keeps memory flat.
    """
    while True:
        batch = list(itertools.islice(entries, _LISTED_AHEAD))
        if not batch:
            return
        yield from batch


_LISTED_AHEAD = 256


# The readers that take a document detection already parsed.
_DOCUMENT_READERS: dict[str, Callable[[Path, Any, ReadReport], Iterator[Session]]] = {
    OPENHANDS: openhands_sessions,
    SWE_AGENT: swe_agent_sessions,
    OPENAI_AGENTS: agents_sessions,
}


def _read_file(
    fmt: str, path: Path, document: Any, data: bytes | None, report: ReadReport
) -> Iterator[Session]:
    """The sessions of one file in ``fmt``, given what detection read of it (its parsed document, or its bytes)."""
    if document is not None:
        read = _DOCUMENT_READERS.get(fmt)
        if read is not None:
            return read(path, document, report)
    # The reader takes it instead of reading the file again, right away.
    keep_detected(path, document, data=data, handed=True)
    return _reader(fmt)(path, report)


def _shown(source: str | Path) -> str:
    """``source`` as messages may show it: a database URL's password hidden."""
    if isinstance(source, str) and "://" in source:
        from kindling.db import redact_url  # SQLAlchemy only when there is a URL to parse

        return redact_url(source)
    return str(source)


def _counted(
    sessions: Iterator[Session], report: ReadReport, path: Path, forced: str | None
) -> Iterator[Session]:
    before_sessions, before_skipped = report.sessions, report.skipped.copy()
    for session in sessions:
        report.add_session(session)
        yield session
    if forced is not None and report.sessions == before_sessions:
        skipped = report.skipped - before_skipped
        if skipped:
            raise _mismatch(path, forced, skipped)


def _mismatch(path: Path, forced: str, skipped: Counter[str]) -> FormatMismatchError:
    """The error for a source of which nothing could be read in the format forced on it."""
    reasons = ", ".join(f"{reason} {count:,}" for reason, count in skipped.most_common(3))
    try:
        detected: str | None = detect_format(path)
    except SourceError:
        detected = None
    if detected is not None and detected != forced:
        hint = f"its content looks like {detected}: drop --format to read it as that"
    else:
        hint = "check the file, or drop --format to detect its format"
    return FormatMismatchError(
        f"Nothing in {path} could be read as {forced}: 0 sessions, {sum(skipped.values()):,} "
        f"skipped ({reasons}); {hint}.",
        path=path,
    )


def summarize_source(
    source: str | Path,
    format: str | None = None,
    *,
    on_session: Callable[[ReadReport], None] | None = None,
) -> tuple[str, ReadReport]:
    """Read ``source`` to the end and return ``(format, report)`` with its counts.

    ``on_session`` is called with the running report after each session (for progress display).
    Raises SourceError as ``iter_sessions`` does.
    """
    resolved = resolve_source(source)
    fmt = format or _resolved_format(resolved)
    report = ReadReport()
    formats: set[str] = set()
    if isinstance(resolved, Path) and resolved.is_dir() and fmt not in (TAU_BENCH, TAU2_BENCH):
        for _ in _counted(read_tree(resolved, report, format, formats), report, resolved, format):
            if on_session is not None:
                on_session(report)
        return "+".join(sorted(formats)) or fmt, report
    for _ in iter_sessions(resolved, format, report=report):
        if on_session is not None:
            on_session(report)
    return fmt, report


#: The session id that names a source's most recent session, wherever a session id is accepted.
LATEST = "latest"


def estimate_sessions(sources: Iterable[str | Path], format: str | None = None) -> int | None:
    """Return how many sessions ``sources`` hold when that is cheap to know, else None (for progress bars).

    Known for Hermes ``state.db`` files: their session rows, counted read-only (the same open as the
    reader's, leaving no ``-wal``/``-shm`` behind). Any other source, or one that cannot be opened
    or detected, makes the total unknown; reading it later reports the real problem.
    """
    import sqlite3

    from kindling.sessions.files import WalFiles

    total = 0
    for source in sources:
        try:
            resolved = resolve_source(source)
            if (
                isinstance(resolved, str)
                or not resolved.is_file()
                or (format or _resolved_format(resolved)) != HERMES
            ):
                return None
            wal = WalFiles(resolved)
            conn = sqlite3.connect(wal.uri, uri=True, timeout=1)
            try:
                total += int(conn.execute("SELECT count(*) FROM sessions").fetchone()[0])
            finally:
                conn.close()
                wal.release()
        except (KindlingError, sqlite3.Error, OSError):
            return None
    return total


def latest_session(sessions: Iterable[Session]) -> Session | None:
    """Return the session that started last (among equal or missing start times, the last read)."""
    latest: Session | None = None
    for session in sessions:
        if latest is None or (session.started_at or 0.0) >= (latest.started_at or 0.0):
            latest = session
    return latest


def find_session_in(
    sources: Iterable[str | Path], session_id: str, format: str | None = None
) -> tuple[str | Path, Session]:
    """Return ``(source, session)`` for the session with id ``session_id`` in the first source holding it.

    ``"latest"`` names the session that started last across all the sources. Raises NotFoundError
    when none holds it, SourceError when a source cannot be read.
    """
    given = list(sources)
    if session_id == LATEST:
        newest: tuple[str | Path, Session] | None = None
        for source in given:
            try:
                candidate = find_session(source, LATEST, format)
            except NotFoundError:
                continue
            if newest is None or (candidate.started_at or 0.0) >= (newest[1].started_at or 0.0):
                newest = (source, candidate)
        if newest is None:
            shown = ", ".join(_shown(source) for source in given)
            raise NotFoundError(f"No sessions in {shown}, so no latest one.", kind="session", name=session_id)
        return newest
    for source in given:
        try:
            return source, find_session(source, session_id, format)
        except NotFoundError:
            continue
    shown = ", ".join(_shown(source) for source in given)
    raise NotFoundError(f"No session {session_id!r} in {shown}.", kind="session", name=session_id)


def resolve_session_id(source: str | Path, session_id: str, format: str | None = None) -> str:
    """Return ``session_id``, or the id of the source's most recent session when it is ``"latest"``.

    Raises NotFoundError when the source holds no session, SourceError when it cannot be read.
    """
    if session_id != LATEST:
        return session_id
    return find_session(source, LATEST, format).id


def find_session(source: str | Path, session_id: str, format: str | None = None) -> Session:
    """Return the session with id ``session_id`` from ``source`` (``"latest"``: the one that started last).

    Raises NotFoundError when no session has that id, SourceError when the source cannot be read.
    """
    resolved = resolve_source(source)
    if session_id == LATEST and (format or _resolved_format(resolved)) == HERMES:
        # The newest is known from the session rows: read only that session, not every one (when
        # the rows cannot tell, or the one-session read cannot find it, everything is read).
        from kindling.sessions.hermes import newest_session_id

        newest = newest_session_id(resolved)
        if newest is not None:
            with contextlib.suppress(NotFoundError):
                return find_session(resolved, newest, format)
    if session_id == LATEST:
        latest = latest_session(iter_sessions(resolved, format))
        if latest is None:
            raise NotFoundError(
                f"No sessions in {_shown(source)}, so no latest one.", kind="session", name=session_id
            )
        return latest
    fmt = format or _resolved_format(resolved)
    if fmt == HERMES:
        # Hermes databases can be asked for the one session instead of scanning them all.
        from kindling.sessions.hermes import read_hermes_postgres, read_hermes_sqlite

        report = ReadReport()
        if isinstance(resolved, str):
            found = read_hermes_postgres(resolved, report, session_id=session_id)
        else:
            found = read_hermes_sqlite(resolved, report, session_id=session_id)
        sessions: Iterator[Session] = found
    elif fmt == PROXY:
        from kindling.sessions.recorded import read_recorded

        sessions = read_recorded(resolved, ReadReport(), session_id=session_id)
    else:
        sessions = iter_sessions(resolved, format)
    for session in sessions:
        if session.id == session_id:
            return session
    # A postgresql:// URL may carry a password: messages show it hidden.
    raise NotFoundError(f"No session {session_id!r} in {_shown(source)}.", kind="session", name=session_id)
