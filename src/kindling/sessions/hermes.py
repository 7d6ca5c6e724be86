"""Hermes Agent's session database: ``state.db`` on SQLite, or the same two tables on PostgreSQL.

Hermes keeps every session in two tables. ``sessions`` holds one row per session (id, source,
model, started_at, ended_at, end_reason, parent_session_id, ...); ``messages`` holds the messages
in OpenAI shape: ``tool_calls`` is a JSON string of OpenAI calls whose ``arguments`` is itself a
JSON string, and tool results are ``role='tool'`` rows naming their call in ``tool_call_id``.
Columns differ between Hermes versions, so the reader asks the database which columns exist and
selects only those.

What Hermes keeps that did not happen, or happened once but is stored twice:

* Rewound turns (``active = 0, compacted = 0``: the user took them back) are not read. Turns that
  in-place compaction summarised away (``active = 0, compacted = 1``) really ran and are read.
* Compaction copies: in-place compaction re-inserts the turns it keeps as new live rows, and a
  compression child session (its parent ended with ``end_reason = 'compression'``) starts with its
  parent's tail, with the same call ids. A call whose id, tool and arguments were already read
  from a compacted row of the session, or from the compression parent, is a copy: it is dropped
  with the result answering it and counted as ``compaction_copy``, so each call counts once.
* Hermes's compaction summary ("[CONTEXT COMPACTION — REFERENCE ONLY] …") is its own note, not a
  message anyone sent: dropped and counted as ``compaction_summary``; where Hermes merged it into a
  real message, the message keeps its own text.
* Results of web, browser and MCP tools are stored inside ``<untrusted_tool_result …>``: the reader
  keeps the inner text, so the outcome is judged on what the tool returned.
* ``reasoning`` (else ``reasoning_content``) becomes ``Message.reasoning``.

Reading is one ordered pass over ``messages`` by ``(session_id, id)`` merged with one ordered pass
over ``sessions``: memory stays constant in the number of sessions. SQLite is opened read-only and
read in pages (of ``messages``: whole sessions, about 512 rows, bounded by session ids found on the
index), each its own short read transaction resumed by key, so a long read never holds Hermes's WAL
checkpoint back; ``-wal``/``-shm`` files the read created are
removed again when no other connection has the database open. Where the only index on sessions is
Hermes's older ``(session_id, timestamp)``, a page is read in that index's order (no sorting) and
kept when it is the id order, else read again by id (``_index_order``).

A read can be limited to a ``shard``: the sessions whose ids fall in ``[low, high)`` in the
database's own order (``shard_bounds`` picks bounds that split the messages evenly). Shards read
one after another give exactly the sessions of one full read, in the same order, which is what
parallel mining relies on.
"""

from __future__ import annotations

import contextlib
import itertools
import operator
import sqlite3
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson

from kindling.config import env_int
from kindling.errors import SourceError
from kindling.sessions.convert import (
    ARGUMENT_CACHE_ENTRIES,
    ARGUMENT_CACHE_MAX_CHARS,
    CONTENT_SENTINELS,
    UNTRUSTED_OPEN,
    compaction_remainder,
    decode_sentinel,
    drop_repeated_calls,
    normalize_role,
    parse_calls_at,
    unwrap_untrusted,
)
from kindling.sessions.files import WalFiles, epoch
from kindling.sessions.model import (
    ROLES,
    MessageRow,
    ReadReport,
    Session,
    SessionRows,
    SessionStream,
    ToolCall,
    new_tool_call,
)
from kindling.sessions.skips import (
    COMPACTION_COPY,
    COMPACTION_SUMMARY,
    DATABASE_ERROR,
    INVALID_UTF8,
    MESSAGE_WITHOUT_SESSION,
    ORPHAN_TOOL_RESULT,
    UNKNOWN_ROLE,
)

# Message columns read, in this order, after (session_id, order key). Missing ones read as NULL.
# Mining reads only the first LEAN_COLUMNS of them: every column fetched costs per row.
MESSAGE_COLUMNS: tuple[str, ...] = (
    "role",
    "content",
    "tool_call_id",
    "tool_calls",
    "compacted",
    "tool_name",
    "timestamp",
    "reasoning",
    "reasoning_content",
)
LEAN_COLUMNS = 5
LEAN_ROW = 2 + LEAN_COLUMNS
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
# After the session columns: the parent's end reason (is this a compression child?).
PARENT_END = 1 + len(SESSION_COLUMNS)

DEFAULT_BUSY_TIMEOUT_MS = 5000
# Columns mining reads through a converter (see _select_lists): CPython's sqlite3 releases and takes
# back the GIL around each column it reads with its own decoder, a converter's column is read without
# (a NULL without any call). The name is kindling's own, so no other converter is replaced.
_DECODED = "kindling_utf8"
_DECODED_COLUMNS = ("role", "content", "tool_call_id", "tool_calls")
# The converted columns where a BLOB would read differently from the exact path (content skips the
# sentinel check as bytes, a call id becomes "b'...'", a role would be known): such a row is handed
# to the converter as bytes that are not UTF-8, and the read goes on through the exact columns
# (_Pages). An empty role reads as None, which is as unknown as the empty text.
_GUARDED_COLUMNS = ("role", "content", "tool_call_id")
# The role's converter hands out one shared text per known role, whose hash is kept, so the loop's
# look-ups and comparisons of roles need not hash a new text per row.
_ROLE = "kindling_role"


class _RoleTexts(dict[bytes, str]):
    def __missing__(self, raw: bytes) -> str:
        return raw.decode()


sqlite3.register_converter(_DECODED, bytes.decode)
sqlite3.register_converter(_ROLE, _RoleTexts({role.encode(): role for role in sorted(ROLES)}).__getitem__)
_FETCH_SIZE = 2000
# Rows per SQLite read transaction (for messages: whole sessions up to about this many rows). Between
# pages the reader holds no snapshot, so Hermes's WAL checkpoint can run. Small pages stay in the CPU cache until they are read (4096-row pages of
# long results did not, and cost about a third more than reading the rows straight from the cursor).
_PAGE_ROWS = 512


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
    wal = WalFiles(db_path)
    connections: list[sqlite3.Connection] = []
    try:
        # Two connections: each has its own text decoder (see _Pages), so a row with bad bytes in
        # one table never changes how the other is decoded.
        for index in range(2):
            # Not shared between threads at once, but a stream may be started in one thread and
            # consumed in another (background reviews, schedulers). The messages connection reads
            # columns named "name [kindling_utf8]" through the converter (see _select_lists).
            connections.append(
                sqlite3.connect(
                    wal.uri,
                    uri=True,
                    timeout=timeout_ms / 1000,
                    check_same_thread=False,
                    detect_types=sqlite3.PARSE_COLNAMES if index == 0 else 0,
                )
            )
        message_columns = _sqlite_columns(connections[0], "messages")
        session_columns = _sqlite_columns(connections[1], "sessions")
        _require_tables(str(db_path), message_columns, session_columns)
        prompts = _has_prompt_table(session_columns, _sqlite_columns(connections[1], "system_prompts"))
    except sqlite3.Error as exc:
        _close_all(connections)
        wal.release()
        raise SourceError(_sqlite_problem(db_path, exc, timeout_ms), path=db_path) from exc
    except SourceError:
        _close_all(connections)
        wal.release()
        raise
    mode = _Mode()
    return SessionStream(
        _read_sqlite(
            connections,
            db_path,
            message_columns,
            session_columns,
            report,
            session_id,
            shard,
            prompts,
            wal,
            mode,
        ),
        on_rows=mode.lean_rows,
        on_assemble=mode.assemble_with,
    )


class _Mode:
    """How a stream is consumed, known when its first row is read: lean when only mining reads it,
    and by whose assembly (``assemble_rows`` unless the consumer brings its own)."""

    def __init__(self) -> None:
        self.lean = False
        self.assemble: Callable[..., Iterator[Any]] | None = None

    def lean_rows(self) -> None:
        """The stream is read in row form: read only the columns mining needs."""
        self.lean = True

    def assemble_with(self, assembler: Callable[..., Iterator[Any]]) -> None:
        """The consumer runs ``assembler`` over the lean rows in place of ``assemble_rows``; rows then
        end before ``compacted`` where the table has no such column."""
        self.lean = True
        self.assemble = assembler

    def assembler(self) -> Callable[..., Iterator[Any]]:
        """The assembly to run: the consumer's, else ``assemble_rows`` (looked up when the read starts)."""
        return self.assemble if self.assemble is not None else assemble_rows


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
    message_columns: dict[str, str],
    session_columns: dict[str, str],
    prompts: bool = False,
    lean: bool = False,
    narrow: bool = False,
    decoded: bool = False,
    keyed: bool = False,
) -> tuple[str, str, str]:
    """Return the select lists of messages and sessions, and the messages' order column.

    ``decoded`` (SQLite, for mining: ``narrow``) reads the text-affinity columns of
    ``_DECODED_COLUMNS`` through the converter: the same values as the exact path for text and
    NULL (an empty text reads as None, which mining takes alike), and a guarded column's BLOB reads
    as bytes that are not UTF-8, so the converter fails and the page is read again exactly.
    ``keyed`` (with ``decoded``) reads session_id through the converter too where its affinity is
    text: only for pages between two non-empty texts, which hold no NULL, no empty text and no
    BLOB (see _Pages._group_page_of).
    """
    order = "id" if "id" in message_columns else "rowid"
    wanted = MESSAGE_COLUMNS[:LEAN_COLUMNS] if lean else MESSAGE_COLUMNS
    if narrow and "compacted" not in message_columns:
        # A consumer that takes rows without compacted (it comes last) need not fetch a NULL per row.
        wanted = MESSAGE_COLUMNS[: LEAN_COLUMNS - 1]

    def column(name: str) -> str:
        if name not in message_columns:
            return "NULL"
        if not decoded or name not in _DECODED_COLUMNS or _affinity(message_columns[name]) != "text":
            return name
        value = f"CASE WHEN {name} >= x'' THEN x'ff' ELSE {name} END" if name in _GUARDED_COLUMNS else name
        return f'{value} AS "{name} [{_ROLE if name == "role" else _DECODED}]"'

    key = "session_id"
    if keyed and decoded and _affinity(message_columns.get("session_id", "")) == "text":
        key = f'session_id AS "session_id [{_DECODED}]"'
    message_select = ", ".join([key, order, *map(column, wanted)])
    selected = {c: (c if c in session_columns else "NULL") for c in SESSION_COLUMNS}
    if prompts:
        # The prompt as Hermes itself resolves it: the inline copy, else the shared one by its hash.
        shared = "(SELECT p.prompt FROM system_prompts p WHERE p.hash = sessions.system_prompt_hash)"
        selected["system_prompt"] = (
            f"COALESCE(sessions.system_prompt, {shared})" if "system_prompt" in session_columns else shared
        )
    parent_end = "NULL"
    if {"parent_session_id", "end_reason"} <= session_columns.keys():
        parent_end = "(SELECT p.end_reason FROM sessions p WHERE p.id = sessions.parent_session_id)"
    session_select = ", ".join(["id", *selected.values(), parent_end])
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
    wal: WalFiles | None = None,
    mode: _Mode | None = None,
) -> Iterator[Any]:
    lean = mode is not None and mode.lean
    narrow = mode is not None and mode.assemble is not None
    message_select, session_select, order = _select_lists(
        message_columns, session_columns, prompts, lean, narrow
    )
    decoded_select = _select_lists(message_columns, session_columns, prompts, lean, narrow, decoded=narrow)[0]
    keyed_select = _select_lists(
        message_columns, session_columns, prompts, lean, narrow, decoded=narrow, keyed=True
    )[0]
    live = _live_condition(message_columns, boolean=False)
    # A shard's lower bound is where its pages start (``_Pages.pages``), not a condition of each
    # page: SQLite bounds an index range below by one term only, and given the shard's and the
    # page's it took the shard's, so every page scanned from the shard's first row (the second of
    # two shards read eight times slower than the first).
    start: Any = None
    if shard is not None and session_id is None and shard[0] is not None:
        start, shard = shard[0], (None, shard[1])
    where, session_where, params = _where_clauses(live, session_id, shard, "?", "")
    # The pages of the two tables are read at different moments, so rows Hermes writes during a read
    # may or may not be seen; a message whose session row was not seen is counted as
    # message_without_session, never dropped silently.
    key_where, _session_where, _params = _where_clauses(None, session_id, shard, "?", "")
    message_rows = _Pages(
        connections[0],
        f"SELECT {message_select} FROM messages",
        where,
        params,
        report,
        keys=("messages", key_where[len(" WHERE ") :]),
        index_order=_index_order(connections[0], message_columns, order),
        decoded=f"SELECT {decoded_select} FROM messages",
        keyed=f"SELECT {keyed_select} FROM messages" if keyed_select != decoded_select else None,
    )
    message_pages = message_rows.pages("session_id", order, start)
    session_rows = _Pages(
        connections[1], f"SELECT {session_select} FROM sessions", session_where, params, report
    )
    session_pages = session_rows.pages("id", None, start)
    parents = _sqlite_parent_calls(connections[1], live, order)
    assemble = mode.assembler() if mode is not None else assemble_rows
    try:
        yield from assemble(
            itertools.chain.from_iterable(message_pages),
            itertools.chain.from_iterable(session_pages),
            report,
            key=_sqlite_order_key,
            parent_calls=parents,
        )
    except sqlite3.DatabaseError as exc:
        # A page that cannot be read mid-stream: what was read has been yielded; say why it stopped.
        report.skip(DATABASE_ERROR)
        raise SourceError(f"Cannot finish reading {path}: {str(exc).strip()}.", path=path) from exc
    finally:
        for stream in (message_pages, session_pages):
            with contextlib.suppress(sqlite3.Error):
                stream.close()
        # Cursors first, then their connections: closing in the other order raises from the cursors.
        message_rows.close()
        session_rows.close()
        _close_all(connections)
        if wal is not None:
            wal.release()


def _index_order(conn: sqlite3.Connection, message_columns: dict[str, str], order: str) -> str | None:
    """Return "timestamp" when an index hands out each session's messages by (timestamp, order) but
    none by order alone: older Hermes schemas index messages on (session_id, timestamp) only, so
    reading by (session_id, order) sorts every page. Pages are then read in the index's order where
    that is the order's own (see _Pages._grouped). None when that cannot help, or is not known to
    be exact: the order column must be the rowid (unique, never NULL)."""
    if "timestamp" not in message_columns:
        return None
    try:
        if order != "rowid":
            keys = [row[1] for row in conn.execute("PRAGMA table_info(messages)") if row[5]]
            if keys != [order] or message_columns[order] != "integer":
                return None

        def sorts(by: str) -> bool:
            plan = conn.execute(
                f"EXPLAIN QUERY PLAN SELECT session_id FROM messages WHERE session_id >= ? AND session_id < ? "
                f"ORDER BY session_id, {by}",
                ("", ""),
            ).fetchall()
            return any("TEMP B-TREE" in str(step[-1]) for step in plan)

        if sorts(order) and not sorts(f"timestamp, {order}"):
            return "timestamp"
    except sqlite3.Error:
        pass
    return None


def _live_condition(message_columns: dict[str, str], *, boolean: bool) -> str | None:
    """The condition for rows that ran: live ones, and those compaction summarised away.

    Rewound rows (``active = 0`` without ``compacted``) are left out. On PostgreSQL the columns may
    be booleans (``boolean=True`` allows that).
    """
    if "active" not in message_columns:
        return None

    def truth(column: str) -> str:
        return column if boolean and message_columns[column] == "boolean" else f"{column} = 1"

    if "compacted" in message_columns:
        return f"({truth('active')} OR {truth('compacted')})"
    return truth("active")


def _sqlite_parent_calls(
    conn: sqlite3.Connection, live: str | None, order: str
) -> Callable[[Any], dict[str, ToolCall]]:
    """Return a look-up of a compression parent's calls by id (its rows that ran, as read)."""
    where = f" AND {live}" if live else ""
    sql = (
        f"SELECT {order}, tool_calls FROM messages WHERE session_id = ?{where} "
        f"AND tool_calls IS NOT NULL ORDER BY {order}"
    )

    def lookup(parent_id: Any) -> dict[str, ToolCall]:
        try:
            rows = conn.execute(sql, (parent_id,)).fetchall()
        except sqlite3.OperationalError as exc:
            if "decode" not in str(exc).lower():
                raise
            return {}  # rows that do not decode are skipped (and counted) where they are read
        return _calls_by_id(parent_id, rows)

    return lookup


def _calls_by_id(parent_id: Any, rows: Iterable[Sequence[Any]]) -> dict[str, ToolCall]:
    # Parsed as the reader parses them, into a scratch report: the parent's own read counts its rows.
    scratch = ReadReport()
    found: dict[str, ToolCall] = {}
    for order, raw_calls in rows:
        for call in parse_calls_at(raw_calls, scratch, parent_id, order, "assistant"):
            found[call.id] = call
    return found


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


class _Pages:
    """The rows of one SQLite query in key order, read ``_PAGE_ROWS`` at a time.

    Each page is fetched by its own statement, which is closed before its rows are handed on, so no
    read transaction stays open while the caller works (Hermes's checkpoint can run between pages);
    the next statement resumes after the last key read. Rows holding bytes that are not UTF-8 are
    counted as ``invalid_utf8`` and skipped: the default decoder is the fast path; after the first
    failure the page is read again with a lenient one that repairs and counts, and the rest is read
    as that one statement (a repaired key could not resume a page exactly).
    """

    def __init__(
        self,
        conn: sqlite3.Connection,
        select: str,
        where: str,
        params: tuple[Any, ...],
        report: ReadReport,
        *,
        keys: tuple[str, str] | None = None,
        index_order: str | None = None,
        decoded: str | None = None,
        keyed: str | None = None,
    ) -> None:
        self.conn = conn
        # Pages are read with ``decoded`` (columns through the converter, see _select_lists) until
        # a row's converter fails; from then on with ``select``, the exact columns. ``keyed`` is
        # ``decoded`` with the first key through the converter too, for pages of whole groups
        # between two non-empty texts (see _group_page_of).
        self.exact_select = select
        self.select = decoded if decoded is not None else select
        self.keyed = keyed
        self.conditions = where[len(" WHERE ") :] if where else ""
        # (table, conditions on the key alone taking the same parameters): pages of whole groups.
        self.keys = keys
        # A column an index orders each group by before the second key (see _index_order).
        self.index_order = index_order
        self.params = params
        self.report = report
        self.repaired = 0
        self.lenient = False
        self.cursor: sqlite3.Cursor | None = None

    def pages(self, first: str, second: str | None, start: Any = None) -> Generator[list[Any], None, None]:
        """Yield the rows ordered by ``(first, second)`` (first alone when second is None), in lists.

        ``first`` may be NULL: those rows sort first, as in one ``ORDER BY``; ``(first, second)``
        must be unique, and the key columns must be the first columns selected. ``start`` (not
        None) yields only the rows with ``first >= start``, none with a NULL ``first``.
        """
        base = [self.conditions] if self.conditions else []
        if start is None:
            if second is not None:
                yield from self._paged([*base, f"{first} IS NULL"], second, f"{second} > ?", slice(1, 2))
            else:
                yield from self._paged([*base, f"{first} IS NULL"], None, "", slice(0, 0))
        if second is not None and self.keys is not None:
            yield from self._grouped([*base, f"{first} IS NOT NULL"], first, second, start)
            return
        order = f"{first}, {second}" if second else first
        resume = f"({first}, {second}) > (?, ?)" if second else f"{first} > ?"
        floor = None if start is None else (f"{first} >= ?", start)
        yield from self._paged(
            [*base, f"{first} IS NOT NULL"], order, resume, slice(0, 2 if second else 1), floor
        )

    def _grouped(
        self, conditions: list[str], first: str, second: str, start: Any = None
    ) -> Generator[list[Any], None, None]:
        # Pages of whole groups of ``first``, each ending before the group about _PAGE_ROWS rows on
        # (found on the key's index alone). SQLite sorts a group by ``second`` before handing out
        # its first row, so a page that stopped inside a group had read all of it, and the next
        # page read it again.
        assert self.keys is not None
        table, key_where = self.keys
        key_conditions = " AND ".join(
            [key_where, f"{first} IS NOT NULL"] if key_where else [f"{first} IS NOT NULL"]
        )
        bound_sql = f"SELECT {first} FROM {table} WHERE {key_conditions} ORDER BY {first} LIMIT 1 OFFSET ?"
        next_bound_sql = f"SELECT {first} FROM {table} WHERE {key_conditions} AND {first} >= ? ORDER BY {first} LIMIT 1 OFFSET ?"
        after_sql = f"SELECT min({first}) FROM {table} WHERE {key_conditions} AND {first} > ?"
        where = " AND ".join(conditions)
        low: Any = start
        while True:
            if low is None:
                found = self.conn.execute(bound_sql, (*self.params, _PAGE_ROWS)).fetchone()
            else:
                found = self.conn.execute(next_bound_sql, (*self.params, low, _PAGE_ROWS)).fetchone()
            high = found[0] if found is not None else None
            if high is not None and high == low:  # one group of more than _PAGE_ROWS rows
                high = self.conn.execute(after_sql, (*self.params, low)).fetchone()[0]
            page_conditions = [where]
            params: tuple[Any, ...] = self.params
            if low is not None:
                page_conditions.append(f"{first} >= ?")
                params = (*params, low)
            rest_where = " AND ".join(page_conditions)
            if high is not None:
                page_conditions.append(f"{first} < ?")
                params = (*params, high)
            if not self.lenient:
                # Between two non-empty texts (in SQLite's order NULL < numbers < texts < BLOBs)
                # a text-affinity key is a non-empty text on every row: read through the converter.
                keyed = type(low) is str and low != "" and type(high) is str
                try:
                    page = self._group_page(" AND ".join(page_conditions), params, first, second, keyed)
                except sqlite3.OperationalError as exc:
                    # As in _paged: the rest is read by one statement with the lenient decoder.
                    if self.cursor is not None:
                        self.cursor.close()
                    self._go_lenient(exc)
            if self.lenient:
                rest_sql = f"{self.select} WHERE {rest_where} ORDER BY {first}, {second}"
                cursor = self._execute(rest_sql, params[: len(params) - (high is not None)])
                yield self._rest(cursor)
                return
            yield page
            if high is None:
                return
            low = high

    def _group_page(
        self, where: str, params: tuple[Any, ...], first: str, second: str, keyed: bool = False
    ) -> list[Any]:
        # The rows of one page of whole groups, ordered by (first, second). With an index that
        # hands out each group by (index_order, second) (see _index_order), the page is read in
        # that order, which needs no sorting, and kept when every group's rows came in order of
        # ``second`` (the first two columns, compared with their sorted copy in C: the second alone
        # first, as sessions written one after another have it rising through the whole page); else it is
        # read again in the order asked, which SQLite sorts group by group.
        try:
            return self._group_page_of(where, params, first, second, keyed)
        except UnicodeDecodeError:
            # A converter failed (see _select_lists): this page and the rest read exactly.
            if self.cursor is not None:
                self.cursor.close()
            self._go_exact()
            return self._group_page_of(where, params, first, second)

    def _group_page_of(
        self, where: str, params: tuple[Any, ...], first: str, second: str, keyed: bool = False
    ) -> list[Any]:
        base = self.select
        if keyed and self.keyed is not None and base is not self.exact_select:
            base = self.keyed
        select = f"{base} WHERE {where} ORDER BY {first}, "
        if self.index_order is not None:
            cursor = self._execute(f"{select}{self.index_order}, {second}", params)
            page: list[Any] = cursor.fetchall()
            cursor.close()
            try:
                # The ids alone first; the (session, id) pairs are built only when they do not rise.
                for key in (_SECOND, _FIRST_TWO):
                    keys = list(map(key, page))
                    if keys == sorted(keys):  # rising: the keys are unique (the order is the rowid)
                        return page
            except TypeError:  # keys Python cannot compare (a number and a text)
                pass
        cursor = self._execute(f"{select}{second}", params)
        page = cursor.fetchall()
        cursor.close()
        return page

    def _paged(
        self,
        conditions: list[str],
        order: str | None,
        resume: str,
        key: slice,
        floor: tuple[str, Any] | None = None,
    ) -> Generator[list[Any], None, None]:
        where = " WHERE " + " AND ".join(conditions)
        if order is None:  # rows without a key to resume by: one statement
            cursor = self._execute(f"{self.select}{where}", self.params)
            yield self._rest(cursor)
            return
        # No LIMIT: SQLite then streams in index order instead of sorting for a top-N; the page
        # ends when its statement is closed. ``floor`` (a condition and its parameter) bounds the
        # first page below, as ``resume`` bounds the pages after it.
        params = self.params
        resumed = False
        first_page = ""
        if floor is not None:
            first_page = f" AND {floor[0]}"
            params = (*params, floor[1])

        def statement() -> str:  # self.select changes when a page is read exactly
            after = f" AND {resume}" if resumed else first_page
            return f"{self.select}{where}{after} ORDER BY {order}"

        while True:
            cursor = self._execute(statement(), params)
            if not self.lenient:
                try:
                    page = cursor.fetchmany(_PAGE_ROWS)
                except UnicodeDecodeError:
                    # A converter failed (see _select_lists): this page and the rest read exactly.
                    cursor.close()
                    self._go_exact()
                    continue
                except sqlite3.OperationalError as exc:
                    # Read the page again with a decoder that repairs and counts (installed only
                    # now: the default one is the fast path).
                    cursor.close()
                    self._go_lenient(exc)
                    cursor = self._execute(statement(), params)
            if self.lenient:
                yield self._rest(cursor)
                return
            cursor.close()
            yield page
            if len(page) < _PAGE_ROWS:
                return
            resumed = True
            params = (*self.params, *page[-1][key])

    def _go_lenient(self, exc: sqlite3.OperationalError) -> None:
        """After a row that did not decode, install the decoder that repairs and counts; any other
        error is raised again."""
        if "decode" not in str(exc).lower():
            raise exc
        self.lenient = True
        self.conn.text_factory = self._lenient_text
        self._go_exact()

    def _go_exact(self) -> None:
        """Read the exact columns from now on (not those through the converter)."""
        self.select = self.exact_select

    def _execute(self, sql: str, params: tuple[Any, ...]) -> sqlite3.Cursor:
        cursor = self.cursor = self.conn.execute(sql, params)
        return cursor

    def _rest(self, cursor: sqlite3.Cursor) -> list[Any]:
        # Every remaining row of ``cursor``, skipping (and counting) those the decoder repaired.
        rows: list[Any] = []
        if not self.lenient:
            try:
                rows.extend(cursor)
                return rows
            except sqlite3.OperationalError as exc:
                self._go_lenient(exc)
        while True:
            before = self.repaired
            row = cursor.fetchone()
            if row is None:
                cursor.close()
                return rows
            if self.repaired != before:
                self.report.skip(INVALID_UTF8)
                continue
            rows.append(row)

    def _lenient_text(self, raw: bytes) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            self.repaired += 1
            return raw.decode("utf-8", "replace")

    def close(self) -> None:
        """Close the last statement's cursor (the connection stays open)."""
        if self.cursor is not None:
            with contextlib.suppress(sqlite3.Error):
                self.cursor.close()


def _sqlite_order_key(value: Any) -> tuple[int, Any]:
    # SQLite sorts NULL < numbers < text < blobs; the merge must compare ids the same way.
    if value is None:
        return (0, 0)
    if isinstance(value, (int, float)):
        return (1, value)
    if isinstance(value, str):
        return (2, value)
    return (3, bytes(value))


_SECOND = operator.itemgetter(1)
_FIRST_TWO = operator.itemgetter(0, 1)

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
    mode = _Mode()
    return SessionStream(
        _read_postgres(
            conn, label, message_columns, session_columns, report, session_id, shard, prompts, mode
        ),
        on_rows=mode.lean_rows,
        on_assemble=mode.assemble_with,
    )


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
    mode: _Mode | None = None,
) -> Iterator[Any]:
    import psycopg

    lean = mode is not None and mode.lean
    narrow = mode is not None and mode.assemble is not None
    message_select, session_select, order = _select_lists(
        message_columns, session_columns, prompts, lean, narrow
    )
    if order == "rowid":
        order = "ctid"
        message_select = message_select.replace(", rowid,", ", ctid,", 1)
    live = _live_condition(message_columns, boolean=True)
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
    parent_where = f" AND {live}" if live else ""
    parent_sql = (
        f"SELECT {order}, tool_calls FROM messages WHERE session_id = %s{parent_where} "
        f"AND tool_calls IS NOT NULL ORDER BY {order}"
    )

    def parents(parent_id: Any) -> dict[str, ToolCall]:
        return _calls_by_id(parent_id, conn.execute(parent_sql, (parent_id,)).fetchall())

    assemble = mode.assembler() if mode is not None else assemble_rows
    try:
        yield from assemble(message_rows, session_rows, report, key=_text_order_key, parent_calls=parents)
    except psycopg.Error as exc:
        report.skip(DATABASE_ERROR)
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


# ------------------------------------------------------------------------------------- latest


def newest_session_id(source: str | Path) -> str | None:
    """Return the id of the session a full read would find started last, from the session rows alone.

    The same choice as ``latest_session`` over the whole read, without reading any message: each
    row's start time parsed as the reader parses it (none counts as 0), ties going to the session
    read last (the reader's order of ids). None when the rows cannot tell: no sessions, or two
    ids the reader would name alike (``1`` and ``'1'``). Raises SourceError when the source cannot
    be opened.
    """
    if is_postgres_url(source):
        import psycopg

        conn, label, _messages, columns = _pg_open(str(source))
        try:
            started = "started_at" if "started_at" in columns else "NULL"
            rows = conn.execute(f"SELECT id, {started} FROM sessions").fetchall()
        except psycopg.Error as exc:
            raise SourceError(f"Cannot read {label}: {str(exc).strip()}", path=label) from exc
        finally:
            conn.close()
        order: Callable[[Any], tuple[int, Any]] = _text_order_key
    else:
        path = Path(source).expanduser()
        with _short_read(path) as sqlite_conn:
            columns = _sqlite_columns(sqlite_conn, "sessions")
            _require_tables(str(path), _sqlite_columns(sqlite_conn, "messages"), columns)
            started = "started_at" if "started_at" in columns else "NULL"
            rows = sqlite_conn.execute(f"SELECT id, {started} FROM sessions").fetchall()
        order = _sqlite_order_key
    if len({str(session_id) for session_id, _started in rows}) < len(rows):
        return None
    newest: tuple[float, tuple[int, Any]] | None = None
    found: Any = None
    for session_id, started_at in rows:
        rank = (epoch(started_at) or 0.0, order(session_id))
        if newest is None or rank > newest:
            newest, found = rank, session_id
    return None if newest is None else str(found)


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


@contextlib.contextmanager
def _short_read(path: Path) -> Iterator[sqlite3.Connection]:
    """Open ``path`` for a short read as the reader opens it (busy timeout, its ``-wal``/``-shm``
    files removed again after); a SQLite error inside becomes a SourceError naming the file."""
    if not path.is_file():
        raise SourceError(f"Cannot open {path}: no such file.", path=path)
    timeout_ms = env_int("KINDLING_BUSY_TIMEOUT_MS", DEFAULT_BUSY_TIMEOUT_MS)
    wal = WalFiles(path)
    try:
        conn = sqlite3.connect(wal.uri, uri=True, timeout=timeout_ms / 1000)
        try:
            yield conn
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise SourceError(_sqlite_problem(path, exc, timeout_ms), path=path) from exc
    finally:
        wal.release()


def _sqlite_shard_bounds(path: Path, parts: int) -> tuple[int, list[Any]]:
    with _short_read(path) as conn:
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
    parent_calls: Callable[[Any], dict[str, ToolCall]] | None = None,
) -> Iterator[Session]:
    """Merge message rows ordered by (session_id, id) with session rows ordered by id into Sessions.

    The sessions of ``assemble_rows`` as a ``SessionStream`` (see there).
    """
    return SessionStream(
        assemble_rows(message_rows, session_rows, report, key=key, parent_calls=parent_calls)
    )


def assemble_rows(
    message_rows: Iterable[Sequence[Any]],
    session_rows: Iterable[Sequence[Any]],
    report: ReadReport,
    *,
    key: Callable[[Any], Any],
    parent_calls: Callable[[Any], dict[str, ToolCall]] | None = None,
) -> Iterator[SessionRows]:
    """Merge message rows ordered by (session_id, id) with session rows ordered by id into sessions
    in row form: each session (without messages) and its messages as ``MessageRow`` tuples.

    Message rows are ``(session_id, order, *MESSAGE_COLUMNS)``, or only their first ``2 +
    LEAN_COLUMNS`` items (then the messages have no name, timestamp or reasoning); session rows are
    ``(id, *SESSION_COLUMNS, parent's end_reason)``. Both must be sorted consistently with ``key``.
    Sessions with no live messages are yielded empty; messages whose session row is missing are
    counted as ``message_without_session`` and skipped. ``parent_calls(parent_id)`` returns the calls
    of a compression parent by id, so its child's copies of them are dropped (see the module
    docstring); without it they are kept.
    """
    sessions = iter(session_rows)
    pending = next(sessions, None)
    current: Any = _NO_SESSION
    current_row: Sequence[Any] | None = None
    messages: list[MessageRow] = []
    known: set[str] = set()
    # Calls a later row of this session may repeat (from its compacted rows and its compression
    # parent), and the ids of repeated calls dropped, whose repeated results are dropped too.
    earlier: dict[str, ToolCall] = {}
    copies: set[str] = set()
    append = messages.append
    roles = ROLES
    sentinels = CONTENT_SENTINELS
    loads = orjson.loads
    new_call = new_tool_call
    # This loop runs once per row: everything it needs is a local, and a message is a tuple (a
    # Message object is built from it only for a consumer that asks for Sessions).
    # Counted here, while each session is built, so the report need not walk it again.
    calls_seen = results_seen = 0
    lean = True
    arguments_cache: dict[str, dict[str, Any]] = {}
    cache_entries = ARGUMENT_CACHE_ENTRIES
    cache_max_chars = ARGUMENT_CACHE_MAX_CHARS
    for row in message_rows:
        # Rows are (session_id, order, *MESSAGE_COLUMNS), or only the lean part of it (mining):
        # the slice of a lean row is the row itself.
        session_key, order, role, content, call_id, raw_calls, compacted = row[:LEAN_ROW]
        if session_key != current:
            # Every row of a read has the same shape: judged once per session, not per row.
            lean = len(row) == LEAN_ROW
            if current_row is not None:
                report.add_counted(len(messages), calls_seen, results_seen)
                yield session_from_row(current_row), messages
            messages = []
            append = messages.append
            known = set()
            earlier = {}
            copies = set()
            calls_seen = results_seen = 0
            current = session_key
            current_row = None
            if session_key is None:
                current = _NO_SESSION
            else:
                target = key(session_key)
                while pending is not None and key(pending[0]) < target:
                    report.add_counted(0, 0, 0)
                    yield session_from_row(pending), []
                    pending = next(sessions, None)
                if pending is not None and pending[0] == session_key:
                    current_row = pending
                    pending = next(sessions, None)
                    if parent_calls is not None and current_row[PARENT_END] == "compression":
                        earlier = dict(parent_calls(current_row[6]))
        if current_row is None:
            report.skip(MESSAGE_WITHOUT_SESSION)
            continue
        if role not in roles:
            role = normalize_role(role)
            if role is None:
                report.skip(UNKNOWN_ROLE)
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
                    report.skip(INVALID_UTF8)
                    continue
            else:
                content = str(content)
            # Hermes's own wrappers start with "<" (a tool result) or "[" (a compaction summary):
            # one comparison rules out most texts ("{" of a JSON result, lower-case words).
            if "<" <= content < "\\":
                if content < "=":
                    if role == "tool" and content.startswith(UNTRUSTED_OPEN):
                        content = unwrap_untrusted(content)
                elif content >= "[" and role != "tool":
                    remainder = compaction_remainder(content)
                    if remainder is not None:
                        if not remainder and not raw_calls:
                            report.skip(COMPACTION_SUMMARY)
                            continue
                        content = remainder or None
        if raw_calls:
            calls = None
            if type(raw_calls) is str:
                # The shape Hermes writes (arguments a JSON object): built here. Anything else goes
                # through parse_calls_at.
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
                        if type(text) is not str:
                            break
                        arguments = arguments_cache.get(text)
                        if arguments is None:
                            # First time this argument text is read: parsed (and kept) here as
                            # parse_calls_at would; anything but a JSON object goes there.
                            if text[:1] != "{":
                                break
                            try:
                                arguments = loads(text)
                            except orjson.JSONDecodeError:
                                break
                            if type(arguments) is not dict:
                                break
                            if len(text) <= cache_max_chars:
                                if len(arguments_cache) >= cache_entries:
                                    arguments_cache.clear()
                                arguments_cache[text] = arguments
                        built.append(new_call(given_id, call_name, arguments, None, "assistant"))
                    else:
                        calls = tuple(built)
            if calls is None:
                calls = parse_calls_at(raw_calls, report, session_key, order, "assistant", arguments_cache)
            if earlier:
                calls = drop_repeated_calls(calls, earlier, copies, report)
                if not calls and not content:
                    continue  # the whole message was a copy
            if compacted:
                for call in calls:
                    earlier[call.id] = call
            for call in calls:
                known.add(call.id)
        else:
            calls = ()
        if call_id is not None and type(call_id) is not str:
            call_id = str(call_id)
        if role == "tool":
            if call_id is None or call_id not in known or call_id in copies:
                if call_id in copies or call_id in earlier:
                    # The result of a copy (or of a call Hermes did not copy with it).
                    copies.discard(call_id)
                    report.skip(COMPACTION_COPY)
                    continue
                report.skip(ORPHAN_TOOL_RESULT)
                continue
            results_seen += 1
            if calls:
                calls_seen += len(calls)
        elif calls:
            calls_seen += len(calls)
        if lean:
            append((role, content, calls, call_id, None, None, None, None))
            continue
        tool_name, stamp, reasoning, reasoning_content = row[LEAN_ROW:]
        if stamp is not None and type(stamp) is not float:
            stamp = epoch(stamp)
        if not reasoning:
            reasoning = reasoning_content or None
        if reasoning is not None and type(reasoning) is not str:
            reasoning = _text_of(reasoning)
        append((role, content, calls, call_id, tool_name, None, stamp, reasoning))
    if current_row is not None:
        report.add_counted(len(messages), calls_seen, results_seen)
        yield session_from_row(current_row), messages
    while pending is not None:
        report.add_counted(0, 0, 0)
        yield session_from_row(pending), []
        pending = next(sessions, None)


def _text_of(value: Any) -> str | None:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


_NO_SESSION = object()


def session_from_row(row: Sequence[Any]) -> Session:
    """The session of a session row, without its messages."""
    metadata = {
        name: value for name, value in zip(_METADATA_COLUMNS, row[7:], strict=False) if value is not None
    }
    return Session(
        str(row[0]),
        str(row[1]) if row[1] is not None else "unknown",
        (),
        epoch(row[3]),
        epoch(row[4]),
        row[5],
        row[2],
        str(row[6]) if row[6] is not None else None,
        None,
        metadata,
    )
