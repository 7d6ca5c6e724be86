"""The sessions kindling's proxy records: their tables, and a reader that turns them into Sessions.

The proxy (``kindling.proxy``) writes; this module owns the schema so that ``kindling sessions``,
``stats`` and ``build`` read a proxy store like any other source, without importing the proxy.

Three tables, in SQLite (default ``$KINDLING_HOME/proxy.db``) or PostgreSQL:

- ``proxy_sessions``: one row per conversation (times, model, the serialized warm-up block the proxy
  repeats on every request of it, and whether warm-up was on).
- ``proxy_messages``: every real message once, keyed by ``(session_id, seq)`` where ``seq`` is the
  message's position in the conversation, so a replayed write is a no-op. The message is stored as
  the client sent it (or, for a reply, as the upstream produced it) in OpenAI shape.
- ``proxy_prefixes``: the hash of a conversation's canonical messages up to and including a reply,
  naming the session; the next request of the conversation starts with that prefix.
"""

from __future__ import annotations

import contextlib
import sqlite3
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from kindling.sessions.convert import message_from_dict
from kindling.sessions.model import Message, ReadReport, Session

SOURCE = "proxy"
COMPONENT = "proxy"

metadata = sa.MetaData()

sessions_table = sa.Table(
    "proxy_sessions",
    metadata,
    sa.Column("id", sa.String(80), primary_key=True),
    sa.Column("started_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
    sa.Column("model", sa.String(200)),
    sa.Column("message_count", sa.Integer, nullable=False, default=0),
    # "on" (a block was injected), "none" (no template fitted), "off" (header or --no-warm).
    sa.Column("warm_state", sa.String(16), nullable=False),
    sa.Column("warm_block", sa.Text),
    sa.Column("template", sa.String(200)),
)

messages_table = sa.Table(
    "proxy_messages",
    metadata,
    sa.Column("session_id", sa.String(80), primary_key=True),
    sa.Column("seq", sa.Integer, primary_key=True),
    sa.Column("role", sa.String(32), nullable=False),
    sa.Column("message", sa.Text, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    # Set on replies: the model that answered and how long it took.
    sa.Column("model", sa.String(200)),
    sa.Column("duration_ms", sa.Float),
    sa.Column("first_chunk_ms", sa.Float),
    sa.Column("finish_reason", sa.String(40)),
)

prefixes_table = sa.Table(
    "proxy_prefixes",
    metadata,
    sa.Column("hash", sa.String(64), primary_key=True),
    sa.Column("session_id", sa.String(80), nullable=False),
    sa.Column("message_count", sa.Integer, nullable=False),
)


def m001_initial(conn: Connection) -> None:
    """Create the three proxy tables."""
    metadata.create_all(conn, tables=[sessions_table, messages_table, prefixes_table])


MIGRATIONS = (m001_initial,)


def has_recorded_tables(conn: Connection) -> bool:
    """True when the database behind ``conn`` holds a proxy store."""
    return sa.inspect(conn).has_table(messages_table.name)


def is_recorded_store(target: str | Path) -> bool:
    """True when ``target`` (a SQLite file or a database URL) holds the proxy's tables.

    A SQLite file is opened read-only and changed in no way (it is often Hermes's live ``state.db``).
    Never raises: a database that cannot be opened is simply not a proxy store.
    """
    if not (isinstance(target, str) and "://" in target):
        return _sqlite_has_tables(Path(target).expanduser())
    from kindling.db import create_engine

    try:
        engine = create_engine(target, **_connect_args(target))
    except Exception:
        return False
    try:
        with engine.connect() as conn:
            return has_recorded_tables(conn)
    except Exception:
        return False
    finally:
        engine.dispose()


def _sqlite_has_tables(path: Path) -> bool:
    # First as an immutable file: no lock, no -wal/-shm created. Tables still only in a live WAL
    # (a proxy running now) are seen by a plain read-only open, made only when that WAL exists,
    # so the files it would need are already there.
    base = f"file:{urllib.parse.quote(str(path.resolve()))}?mode=ro"
    uris = [base + "&immutable=1"]
    if Path(f"{path}-wal").exists():
        uris.append(base)
    for uri in uris:
        try:
            with contextlib.closing(sqlite3.connect(uri, uri=True, timeout=5)) as db:
                found = db.execute(
                    "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (messages_table.name,)
                ).fetchone()
        except (sqlite3.Error, OSError, ValueError):
            continue
        if found is not None:
            return True
    return False


def _connect_args(target: str | Path) -> dict[str, Any]:
    if isinstance(target, str) and target.startswith(("postgresql://", "postgres://", "postgresql+")):
        return {"connect_args": {"connect_timeout": 5}}
    return {}


def read_recorded(
    target: str | Path, report: ReadReport, *, session_id: str | None = None
) -> Iterator[Session]:
    """Stream the sessions of a proxy store, oldest first, each with its messages in order.

    Messages are read in one ordered query, so memory holds one session at a time. A stored message
    that is not valid JSON or not a usable message is counted in ``report`` and skipped; a gap in a
    session's positions (messages the proxy had to drop) is counted as ``recording_gap``. Raises
    SourceError when the store cannot be opened.
    """
    from kindling.db import create_engine, translate_errors
    from kindling.errors import SourceError, StoreError

    try:
        engine = create_engine(target, **_connect_args(target))
        with translate_errors(target, "read"), engine.connect() as conn:
            if not has_recorded_tables(conn):
                raise SourceError(
                    f"{_shown(target)} holds no sessions recorded by kindling's proxy.", path=target
                )
    except StoreError as exc:
        raise SourceError(str(exc), path=target) from exc
    return _sessions(engine, target, report, session_id)


def _sessions(
    engine: Engine, target: str | Path, report: ReadReport, session_id: str | None
) -> Iterator[Session]:
    from kindling.db import translate_errors

    s, m = sessions_table, messages_table
    query = (
        sa.select(
            s.c.id,
            s.c.started_at,
            s.c.updated_at,
            s.c.model,
            s.c.warm_state,
            s.c.template,
            m.c.seq,
            m.c.message,
            m.c.created_at,
        )
        .select_from(s.outerjoin(m, m.c.session_id == s.c.id))
        .order_by(s.c.started_at, s.c.id, m.c.seq)
    )
    if session_id is not None:
        query = query.where(s.c.id == session_id)
    try:
        with translate_errors(target, "read"), engine.connect() as conn:
            rows = conn.execution_options(stream_results=True, yield_per=500).execute(query)
            current: list[Any] | None = None
            messages: list[Message] = []
            known: set[str] = set()
            expected = 0
            for row in rows:
                if current is None or row.id != current[0]:
                    if current is not None:
                        yield _session(current, messages, report)
                    current = [
                        row.id,
                        row.started_at,
                        row.updated_at,
                        row.model,
                        row.warm_state,
                        row.template,
                    ]
                    messages, known, expected = [], set(), 0
                if row.seq is None:
                    continue
                if row.seq != expected:
                    report.skip("recording_gap", max(row.seq - expected, 1))
                expected = row.seq + 1
                message = _message(row, report, known)
                if message is not None:
                    messages.append(message)
            if current is not None:
                yield _session(current, messages, report)
    finally:
        engine.dispose()


def _message(row: Any, report: ReadReport, known: set[str]) -> Message | None:
    try:
        data = orjson.loads(row.message)
    except orjson.JSONDecodeError:
        report.skip("malformed_json")
        return None
    if isinstance(data, dict) and data.get("timestamp") is None:
        data["timestamp"] = row.created_at
    return message_from_dict(data, report, id_prefix=f"{row.id}:{row.seq}", known_calls=known)


def _session(head: list[Any], messages: list[Message], report: ReadReport) -> Session:
    session_id, started, updated, model, warm_state, template = head
    meta: dict[str, Any] = {"warm": warm_state}
    if template:
        meta["template"] = template
    session = Session(
        id=session_id,
        source=SOURCE,
        messages=tuple(messages),
        started_at=started,
        ended_at=updated,
        model=model,
        metadata=meta,
    )
    report.add_session(session)
    return session


def _shown(target: str | Path) -> str:
    from kindling.db import redact_url

    with contextlib.suppress(Exception):
        return redact_url(target)
    return str(target)
