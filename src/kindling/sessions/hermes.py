"""Hermes Agent's session database: ``state.db`` on SQLite, or the same two tables on PostgreSQL.

Hermes keeps every session in two tables. ``sessions`` holds one row per session (id, source,
model, started_at, ended_at, end_reason, parent_session_id, ...); ``messages`` holds the messages
in OpenAI shape: ``tool_calls`` is a JSON string of OpenAI calls whose ``arguments`` is itself a
JSON string, and tool results are ``role='tool'`` rows naming their call in ``tool_call_id``.
Columns differ between Hermes versions, so the reader asks the database which columns exist and
selects only those. Where ``messages.active`` exists, only live rows (``active = 1``) are read:
compaction keeps the replaced rows with ``active = 0`` and they must not be read twice.

Reading is one streaming query over ``messages`` ordered by ``(session_id, id)`` merged with one
ordered query over ``sessions``: memory stays constant in the number of sessions, and a running
Hermes is never blocked (SQLite is opened read-only; WAL readers never block the writer).

A read can be limited to a ``shard``: the sessions whose ids fall in ``[low, high)`` in the
database's own order (``shard_bounds`` picks bounds that split the messages evenly). Shards read
one after another give exactly the sessions of one full read, in the same order, which is what
parallel mining relies on.
"""

from __future__ import annotations

import contextlib
import sqlite3
import urllib.parse
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson

from kindling.config import env_int
from kindling.errors import SourceError
from kindling.sessions.convert import CONTENT_SENTINELS, decode_sentinel, normalize_role, parse_calls_at
from kindling.sessions.files import epoch
from kindling.sessions.model import ROLES, Message, ReadReport, Session, _MessageInit, new_tool_call

# Message columns read, in this order, after (session_id, order key). Missing ones read as NULL.
MESSAGE_COLUMNS: tuple[str, ...] = ("role", "content", "tool_call_id", "tool_calls", "tool_name", "timestamp")
# Session columns read after id. The first six fill Session fields; the rest go to metadata.
SESSION_COLUMNS: tuple[str, ...] = (
    "source",
    "model",
    "started_at",
    "ended_at",
    "end_reason",
    "parent_session_id",
    "title",
    "message_count",
    "tool_call_count",
    "user_id",
    "system_prompt",
)
_METADATA_COLUMNS = SESSION_COLUMNS[6:]

DEFAULT_BUSY_TIMEOUT_MS = 5000
_FETCH_SIZE = 2000


def is_postgres_url(source: str | Path) -> bool:
    """True when ``source`` is a ``postgresql://`` (or ``postgres://``) URL."""
    return isinstance(source, str) and source.startswith(
        ("postgresql://", "postgres://", "postgresql+psycopg://")
    )


# --------------------------------------------------------------------------------------- SQLite


def read_hermes_sqlite(
    path: str | Path,
    report: ReadReport,
    *,
    session_id: str | None = None,
    shard: tuple[Any, Any] | None = None,
) -> Iterator[Session]:
    """Open a Hermes ``state.db`` read-only and return an iterator over its sessions.

    ``shard`` = ``(low, high)`` reads only sessions with ``low <= id < high`` (None: unbounded;
    the first shard also gets rows without a session id). The database is opened here, so an
    unopenable file fails at once. Raises SourceError when the file is missing, is not a SQLite
    database, is locked beyond ``KINDLING_BUSY_TIMEOUT_MS`` (default 5000), or has no
    ``messages``/``sessions`` tables.
    """
    db_path = Path(path).expanduser()
    if not db_path.exists():
        raise SourceError(f"Cannot open {db_path}: no such file.", path=db_path)
    if db_path.is_dir():
        raise SourceError(f"Cannot open {db_path}: it is a directory, not a database.", path=db_path)
    timeout_ms = env_int("KINDLING_BUSY_TIMEOUT_MS", DEFAULT_BUSY_TIMEOUT_MS)
    uri = f"file:{urllib.parse.quote(str(db_path.resolve()))}?mode=ro"
    connections: list[sqlite3.Connection] = []
    try:
        # Two connections: each has its own text decoder (see _stream), so a row with bad bytes in
        # one table never changes how the other is decoded.
        for _ in range(2):
            # Not shared between threads at once, but a stream may be started in one thread and
            # consumed in another (background reviews, schedulers).
            connections.append(
                sqlite3.connect(uri, uri=True, timeout=timeout_ms / 1000, check_same_thread=False)
            )
        message_columns = _sqlite_columns(connections[0], "messages")
        session_columns = _sqlite_columns(connections[1], "sessions")
        _require_tables(str(db_path), message_columns, session_columns)
        prompts = _has_prompt_table(session_columns, _sqlite_columns(connections[1], "system_prompts"))
    except sqlite3.Error as exc:
        _close_all(connections)
        raise SourceError(_sqlite_problem(db_path, exc, timeout_ms), path=db_path) from exc
    except SourceError:
        _close_all(connections)
        raise
    return _read_sqlite(
        connections, db_path, message_columns, session_columns, report, session_id, shard, prompts
    )


def _close_all(connections: list[sqlite3.Connection]) -> None:
    for conn in connections:
        conn.close()


def _sqlite_columns(conn: sqlite3.Connection, table: str) -> dict[str, str]:
    return {row[1]: str(row[2]).lower() for row in conn.execute(f"PRAGMA table_info({table})")}


def _require_tables(label: str, message_columns: dict[str, str], session_columns: dict[str, str]) -> None:
    if not message_columns or not session_columns:
        missing = "messages" if not message_columns else "sessions"
        raise SourceError(
            f"Cannot read {label}: it has no {missing} table, so it is not a Hermes session database.",
            path=label,
        )
    for column in ("session_id", "role"):
        if column not in message_columns:
            raise SourceError(
                f"Cannot read {label}: messages has no {column} column, so it is not a Hermes session database.",
                path=label,
            )
    if "id" not in session_columns:
        raise SourceError(f"Cannot read {label}: sessions has no id column.", path=label)


def _sqlite_problem(path: Path, exc: sqlite3.Error, timeout_ms: int) -> str:
    text = str(exc).strip()
    lowered = text.lower()
    if "locked" in lowered or "busy" in lowered:
        return (
            f"Cannot read {path}: the database is locked by another process (waited {timeout_ms / 1000:g}s)."
        )
    if "not a database" in lowered or "malformed" in lowered or "corrupt" in lowered:
        return f"Cannot read {path}: the file is not a valid SQLite database ({text})."
    if "unable to open" in lowered:
        return f"Cannot open {path}: SQLite cannot open it read-only (check permissions and its -wal/-shm files)."
    return f"Cannot read {path}: {text}."


def _has_prompt_table(session_columns: dict[str, str], prompt_columns: dict[str, str]) -> bool:
    """True when system prompts live in their own table (Hermes schema 25 and later).

    Those versions store each prompt once in ``system_prompts(hash, prompt)`` and keep only
    ``sessions.system_prompt_hash``; ``sessions.system_prompt`` stays for rows not yet moved.
    """
    return "system_prompt_hash" in session_columns and {"hash", "prompt"} <= prompt_columns.keys()


def _select_lists(
    message_columns: dict[str, str], session_columns: dict[str, str], prompts: bool = False
) -> tuple[str, str, str]:
    order = "id" if "id" in message_columns else "rowid"
    message_select = ", ".join(
        ["session_id", order, *(c if c in message_columns else "NULL" for c in MESSAGE_COLUMNS)]
    )
    selected = {c: (c if c in session_columns else "NULL") for c in SESSION_COLUMNS}
    if prompts:
        # The prompt as Hermes itself resolves it: the inline copy, else the shared one by its hash.
        shared = "(SELECT p.prompt FROM system_prompts p WHERE p.hash = sessions.system_prompt_hash)"
        selected["system_prompt"] = (
            f"COALESCE(sessions.system_prompt, {shared})" if "system_prompt" in session_columns else shared
        )
    session_select = ", ".join(["id", *selected.values()])
    return message_select, session_select, order


def _read_sqlite(
    connections: list[sqlite3.Connection],
    path: Path,
    message_columns: dict[str, str],
    session_columns: dict[str, str],
    report: ReadReport,
    session_id: str | None,
    shard: tuple[Any, Any] | None = None,
    prompts: bool = False,
) -> Iterator[Session]:
    message_select, session_select, order = _select_lists(message_columns, session_columns, prompts)
    live = "active = 1" if "active" in message_columns else None
    where, session_where, params = _where_clauses(live, session_id, shard, "?", "")
    # Messages first: a session committed in between then shows up empty rather than its messages
    # showing up without their session.
    message_rows = _stream(
        connections[0],
        f"SELECT {message_select} FROM messages{where} ORDER BY session_id, {order}",
        params,
        report,
    )
    session_rows = _stream(
        connections[1], f"SELECT {session_select} FROM sessions{session_where} ORDER BY id", params, report
    )
    try:
        yield from assemble_sessions(message_rows, session_rows, report, key=_sqlite_order_key)
    except sqlite3.DatabaseError as exc:
        # A page that cannot be read mid-stream: what was read has been yielded; say why it stopped.
        report.skip("database_error")
        raise SourceError(f"Cannot finish reading {path}: {str(exc).strip()}.", path=path) from exc
    finally:
        # Cursors first, then their connections: closing in the other order raises from the cursors.
        for rows in (message_rows, session_rows):
            with contextlib.suppress(sqlite3.Error):
                rows.close()
        _close_all(connections)


def _where_clauses(
    live: str | None, session_id: str | None, shard: tuple[Any, Any] | None, mark: str, collate: str
) -> tuple[str, str, tuple[Any, ...]]:
    """Return the WHERE clauses (with their leading space, or empty) on messages and on sessions.

    ``live`` is the condition for live (not compacted) rows, if the table has one; ``session_id``
    limits the read to one session, else ``shard`` to a range of them. Both queries take the
    returned parameters.
    """
    conditions = [live] if live is not None else []
    params: tuple[Any, ...] = ()
    session_where = ""
    if session_id is not None:
        conditions.append(f"session_id = {mark}")
        params = (session_id,)
        session_where = f" WHERE id = {mark}"
    elif shard is not None:
        message_range, session_range, params = _shard_conditions(shard, mark, collate)
        conditions.append(message_range)
        session_where = f" WHERE {session_range}"
    where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
    return where, session_where, params


def _shard_conditions(shard: tuple[Any, Any], mark: str, collate: str) -> tuple[str, str, tuple[Any, ...]]:
    """Return the WHERE conditions on messages and on sessions for ``shard``, and their parameters.

    Both queries take the same parameters. Rows without a session id sort first, so they belong to
    the first shard (the one without a lower bound), exactly as a full read meets them first.
    """
    low, high = shard
    parts_messages: list[str] = []
    parts_sessions: list[str] = []
    params: list[Any] = []
    if low is not None:
        parts_messages.append(f"session_id{collate} >= {mark}")
        parts_sessions.append(f"id{collate} >= {mark}")
        params.append(low)
    if high is not None:
        if low is None:
            parts_messages.append(f"(session_id{collate} < {mark} OR session_id IS NULL)")
            parts_sessions.append(f"(id{collate} < {mark} OR id IS NULL)")
        else:
            parts_messages.append(f"session_id{collate} < {mark}")
            parts_sessions.append(f"id{collate} < {mark}")
        params.append(high)
    if not params:
        return "1 = 1", "1 = 1", ()
    return " AND ".join(parts_messages), " AND ".join(parts_sessions), tuple(params)


def _stream(
    conn: sqlite3.Connection, sql: str, params: tuple[Any, ...], report: ReadReport
) -> Generator[Any, None, None]:
    """Yield the rows of ``sql``; rows holding bytes that are not UTF-8 are counted and skipped."""
    cursor = conn.execute(sql, params)
    try:
        yield from cursor
        return
    except sqlite3.OperationalError as exc:
        if "decode" not in str(exc).lower():
            raise
    # The row that failed to decode was not consumed. Go on row by row with a lenient decoder
    # (installed only now: the default one is the fast path) and skip each row it had to repair.
    repaired = [0]

    def lenient_text(raw: bytes) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            repaired[0] += 1
            return raw.decode("utf-8", "replace")

    conn.text_factory = lenient_text
    while True:
        before = repaired[0]
        row = cursor.fetchone()
        if row is None:
            return
        if repaired[0] != before:
            report.skip("invalid_utf8")
            continue
        yield row


def _sqlite_order_key(value: Any) -> tuple[int, Any]:
    # SQLite sorts NULL < numbers < text < blobs; the merge must compare ids the same way.
    if value is None:
        return (0, 0)
    if isinstance(value, (int, float)):
        return (1, value)
    if isinstance(value, str):
        return (2, value)
    return (3, bytes(value))


# ----------------------------------------------------------------------------------- PostgreSQL


def read_hermes_postgres(
    url: str,
    report: ReadReport,
    *,
    session_id: str | None = None,
    shard: tuple[Any, Any] | None = None,
) -> Iterator[Session]:
    """Connect to Hermes tables on PostgreSQL and return an iterator over the sessions.

    Streams through server-side cursors in one read-only transaction. ``shard`` limits the read as
    in ``read_hermes_sqlite``. Raises SourceError when the server cannot be reached or the database
    has no Hermes tables.
    """
    import psycopg

    conn, label, message_columns, session_columns = _pg_open(url)
    try:
        prompts = _has_prompt_table(session_columns, _pg_columns(conn, "system_prompts"))
    except psycopg.Error as exc:
        conn.close()
        raise SourceError(f"Cannot read {label}: {str(exc).strip()}", path=label) from exc
    return _read_postgres(conn, label, message_columns, session_columns, report, session_id, shard, prompts)


def _pg_open(url: str) -> tuple[Any, str, dict[str, str], dict[str, str]]:
    """Connect read-only and check the Hermes tables: (connection, label, message/session columns)."""
    import psycopg

    label = _label(url)
    dsn = url.replace("postgresql+psycopg://", "postgresql://", 1)
    try:
        conn = psycopg.connect(dsn, connect_timeout=10)
    except psycopg.Error as exc:
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SourceError(f"Cannot open {label}: {detail}", path=label) from exc
    try:
        conn.read_only = True
        message_columns = _pg_columns(conn, "messages")
        session_columns = _pg_columns(conn, "sessions")
        _require_tables(label, message_columns, session_columns)
    except psycopg.Error as exc:
        conn.close()
        raise SourceError(f"Cannot read {label}: {str(exc).strip()}", path=label) from exc
    except SourceError:
        conn.close()
        raise
    return conn, label, message_columns, session_columns


def _label(url: str) -> str:
    """The URL as the user wrote it, with any password hidden."""
    import sqlalchemy as sa

    try:
        return sa.engine.make_url(url).render_as_string(hide_password=True)
    except Exception:  # any parse failure: never echo a URL that may hold a password
        return "<database URL>"


def _pg_columns(conn: Any, table: str) -> dict[str, str]:
    rows = conn.execute(
        "SELECT column_name, data_type FROM information_schema.columns "
        "WHERE table_schema = current_schema() AND table_name = %s",
        (table,),
    ).fetchall()
    return {str(name): str(kind).lower() for name, kind in rows}


def _read_postgres(
    conn: Any,
    label: str,
    message_columns: dict[str, str],
    session_columns: dict[str, str],
    report: ReadReport,
    session_id: str | None,
    shard: tuple[Any, Any] | None = None,
    prompts: bool = False,
) -> Iterator[Session]:
    import psycopg

    message_select, session_select, order = _select_lists(message_columns, session_columns, prompts)
    if order == "rowid":
        order = "ctid"
        message_select = message_select.replace(", rowid,", ", ctid,", 1)
    live = None
    if "active" in message_columns:
        live = "active" if message_columns["active"] == "boolean" else "active = 1"
    # The same C collation as the ORDER BY below, so a shard is a contiguous run of the order.
    where, session_where, params = _where_clauses(live, session_id, shard, "%s", ' COLLATE "C"')
    # C collation: byte order of UTF-8 equals Python's code-point order, which the merge relies on.
    message_sql = f'SELECT {message_select} FROM messages{where} ORDER BY session_id COLLATE "C", {order}'
    session_sql = f'SELECT {session_select} FROM sessions{session_where} ORDER BY id COLLATE "C"'

    def rows(name: str, sql: str) -> Generator[Any, None, None]:
        with conn.cursor(name=name) as cursor:
            cursor.itersize = _FETCH_SIZE
            cursor.execute(sql, params)
            yield from cursor

    message_rows = rows("kindling_messages", message_sql)
    session_rows = rows("kindling_sessions", session_sql)
    try:
        yield from assemble_sessions(message_rows, session_rows, report, key=_text_order_key)
    except psycopg.Error as exc:
        report.skip("database_error")
        raise SourceError(f"Cannot finish reading {label}: {str(exc).strip()}", path=label) from exc
    finally:
        for stream in (message_rows, session_rows):
            with contextlib.suppress(psycopg.Error):
                stream.close()
        conn.close()


def _text_order_key(value: Any) -> tuple[int, Any]:
    if value is None:
        return (0, "")
    return (1, str(value))


# --------------------------------------------------------------------------------------- shards


def shard_bounds(source: str | Path, parts: int) -> tuple[int, list[Any]]:
    """Return ``(message rows, bounds)``: up to ``parts - 1`` session ids that split the messages evenly.

    Shard ``i`` is then ``(bounds[i-1], bounds[i])`` with None at both ends (see ``shard``).
    ``bounds`` is empty when the source cannot be split: fewer sessions than parts, or (SQLite)
    id columns of different type affinities, which SQLite would compare differently from the order
    a full read follows. Raises SourceError when the source cannot be opened.
    """
    if is_postgres_url(source):
        return _pg_shard_bounds(str(source), parts)
    return _sqlite_shard_bounds(Path(source).expanduser(), parts)


def shards_of(bounds: Sequence[Any]) -> list[tuple[Any, Any]]:
    """Return the ``(low, high)`` shards that ``bounds`` cut a database into, in reading order."""
    edges: list[Any] = [None, *bounds, None]
    return [(edges[i], edges[i + 1]) for i in range(len(edges) - 1)]


def _affinity(declared: str) -> str:
    # SQLite's rules for a column's type affinity, in its order of precedence.
    if "int" in declared:
        return "integer"
    if any(word in declared for word in ("char", "clob", "text")):
        return "text"
    if "blob" in declared or not declared:
        return "blob"
    if any(word in declared for word in ("real", "floa", "doub")):
        return "real"
    return "numeric"


def _sqlite_shard_bounds(path: Path, parts: int) -> tuple[int, list[Any]]:
    if not path.is_file():
        raise SourceError(f"Cannot open {path}: no such file.", path=path)
    timeout_ms = env_int("KINDLING_BUSY_TIMEOUT_MS", DEFAULT_BUSY_TIMEOUT_MS)
    uri = f"file:{urllib.parse.quote(str(path.resolve()))}?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=timeout_ms / 1000)
    except sqlite3.Error as exc:
        raise SourceError(_sqlite_problem(path, exc, timeout_ms), path=path) from exc
    try:
        message_columns = _sqlite_columns(conn, "messages")
        session_columns = _sqlite_columns(conn, "sessions")
        _require_tables(str(path), message_columns, session_columns)
        # A bound taken from messages.session_id is compared with sessions.id too: with different
        # affinities SQLite would convert it for one table and not the other.
        total = int(conn.execute("SELECT count(*) FROM messages").fetchone()[0])
        bounds: list[Any] = []
        if _affinity(message_columns["session_id"]) != _affinity(session_columns["id"]):
            return total, bounds
        for i in range(1, parts):
            # Walks the (session_id, ...) index Hermes keeps: a few milliseconds per bound.
            row = conn.execute(
                "SELECT session_id FROM messages WHERE session_id IS NOT NULL "
                "ORDER BY session_id LIMIT 1 OFFSET ?",
                (total * i // parts,),
            ).fetchone()
            if row is not None and (not bounds or bounds[-1] != row[0]):
                bounds.append(row[0])
        return total, bounds
    except sqlite3.Error as exc:
        raise SourceError(_sqlite_problem(path, exc, timeout_ms), path=path) from exc
    finally:
        conn.close()


def _pg_shard_bounds(url: str, parts: int) -> tuple[int, list[Any]]:
    import psycopg

    conn, label, _message_columns, _session_columns = _pg_open(url)
    try:
        # One pass: message rows per session in the reader's order; bounds are picked from it.
        rows = conn.execute(
            "SELECT session_id, count(*) FROM messages WHERE session_id IS NOT NULL "
            'GROUP BY session_id ORDER BY session_id COLLATE "C"'
        ).fetchall()
        total = int(conn.execute("SELECT count(*) FROM messages").fetchone()[0])
    except psycopg.Error as exc:
        raise SourceError(f"Cannot read {label}: {str(exc).strip()}", path=label) from exc
    finally:
        conn.close()
    bounds: list[Any] = []
    seen = 0
    step = 1
    for session_key, count in rows:
        if step >= parts:
            break
        if seen >= total * step // parts and seen > 0:
            bounds.append(session_key)
            while step < parts and seen >= total * step // parts:
                step += 1
        seen += int(count)
    return total, bounds


# ------------------------------------------------------------------------------------ assembly


def assemble_sessions(
    message_rows: Iterable[Sequence[Any]],
    session_rows: Iterable[Sequence[Any]],
    report: ReadReport,
    *,
    key: Callable[[Any], Any],
) -> Iterator[Session]:
    """Merge message rows ordered by (session_id, id) with session rows ordered by id into Sessions.

    Message rows are ``(session_id, order, *MESSAGE_COLUMNS)``; session rows are
    ``(id, *SESSION_COLUMNS)``. Both must be sorted consistently with ``key``. Sessions with no
    live messages are yielded empty; messages whose session row is missing are counted as
    ``message_without_session`` and skipped.
    """
    sessions = iter(session_rows)
    pending = next(sessions, None)
    current: Any = _NO_SESSION
    current_row: Sequence[Any] | None = None
    messages: list[Message] = []
    known: set[str] = set()
    append = messages.append
    roles = ROLES
    sentinels = CONTENT_SENTINELS
    loads = orjson.loads
    new_call = new_tool_call
    # Messages are built inline (see kindling.sessions.model._MessageInit): this loop runs once per
    # row, and a call per message is a good part of its cost.
    new_object = object.__new__
    blank = _MessageInit
    message_class = Message
    # Counted here, while each session is built, so the report need not walk it again.
    calls_seen = results_seen = 0
    arguments_cache: dict[str, dict[str, Any]] = {}
    for session_key, order, role, content, call_id, raw_calls, tool_name, stamp in message_rows:
        if session_key != current:
            if current_row is not None:
                report.add_counted(len(messages), calls_seen, results_seen)
                yield _session(current_row, messages)
            messages = []
            append = messages.append
            known = set()
            calls_seen = results_seen = 0
            current = session_key
            current_row = None
            if session_key is None:
                current = _NO_SESSION
            else:
                target = key(session_key)
                while pending is not None and key(pending[0]) < target:
                    report.add_counted(0, 0, 0)
                    yield _session(pending, [])
                    pending = next(sessions, None)
                if pending is not None and pending[0] == session_key:
                    current_row = pending
                    pending = next(sessions, None)
        if current_row is None:
            report.skip("message_without_session")
            continue
        if role not in roles:
            role = normalize_role(role)
            if role is None:
                report.skip("unknown_role")
                continue
        if content is not None:
            if type(content) is str:
                # Both sentinels start below "\x02": one comparison rules out almost every row.
                if content < "\x02" and content.startswith(sentinels):
                    content = decode_sentinel(content)
            elif type(content) is bytes:
                # A BLOB where Hermes writes text: fine when it is UTF-8, skipped (counted) when not.
                try:
                    content = content.decode("utf-8")
                except UnicodeDecodeError:
                    report.skip("invalid_utf8")
                    continue
            else:
                content = str(content)
        if raw_calls:
            calls = None
            if type(raw_calls) is str:
                # The shape Hermes writes, with argument texts already parsed once in this read:
                # built here. Anything else (and a text not seen yet) goes through parse_calls_at.
                try:
                    items = loads(raw_calls)
                except orjson.JSONDecodeError:
                    items = None
                if type(items) is list:
                    built = []
                    for item in items:
                        if type(item) is not dict or "requestor" in item:
                            break
                        function = item.get("function")
                        if type(function) is not dict:
                            break
                        call_name = function.get("name")
                        text = function.get("arguments")
                        given_id = item.get("id")
                        if not (type(call_name) is str and call_name and type(given_id) is str and given_id):
                            break
                        arguments = arguments_cache.get(text) if type(text) is str else None
                        if arguments is None:
                            break
                        built.append(new_call(given_id, call_name, arguments, None, "assistant"))
                    else:
                        calls = tuple(built)
            if calls is None:
                calls = parse_calls_at(raw_calls, report, session_key, order, "assistant", arguments_cache)
            for call in calls:
                known.add(call.id)
        else:
            calls = ()
        if call_id is not None and type(call_id) is not str:
            call_id = str(call_id)
        if role == "tool":
            if call_id is None or call_id not in known:
                report.skip("orphan_tool_result")
                continue
            results_seen += 1
            if calls:
                calls_seen += len(calls)
        elif calls:
            calls_seen += len(calls)
        if stamp is not None and type(stamp) is not float:
            stamp = epoch(stamp)
        built_message: Any = new_object(blank)
        built_message.role = role
        built_message.content = content
        built_message.tool_calls = calls
        built_message.tool_call_id = call_id
        built_message.name = tool_name
        built_message.error = None
        built_message.timestamp = stamp
        built_message.__class__ = message_class
        append(built_message)
    if current_row is not None:
        report.add_counted(len(messages), calls_seen, results_seen)
        yield _session(current_row, messages)
    while pending is not None:
        report.add_counted(0, 0, 0)
        yield _session(pending, [])
        pending = next(sessions, None)


_NO_SESSION = object()


def _session(row: Sequence[Any], messages: list[Message]) -> Session:
    metadata = {
        name: value for name, value in zip(_METADATA_COLUMNS, row[7:], strict=False) if value is not None
    }
    return Session(
        str(row[0]),
        str(row[1]) if row[1] is not None else "unknown",
        tuple(messages),
        epoch(row[3]),
        epoch(row[4]),
        row[5],
        row[2],
        str(row[6]) if row[6] is not None else None,
        None,
        metadata,
    )
