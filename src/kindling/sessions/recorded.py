"""The sessions kindling's proxy records: their tables, and a reader that turns them into Sessions.

The proxy (``kindling.proxy``) writes; this module owns the schema so that ``kindling sessions``,
``stats`` and ``build`` read a proxy store like any other source, without importing the proxy.

Four tables, in SQLite (default ``$KINDLING_HOME/proxy.db``) or PostgreSQL:

- ``proxy_sessions``: one row per conversation (its tenant, times, model, the serialized warm-up
  block the proxy repeats on every request of it, whether warm-up was on, the ``X-Kindling-Session``
  label it was given, the session it branched from, and the digest of what it holds so far).
- ``proxy_messages``: every real message once, keyed by ``(session_id, seq)`` where ``seq`` is the
  message's position in the conversation, so a replayed write is a no-op. The message is stored as
  the client sent it (or, for a reply, as the upstream produced it) in OpenAI shape. An assistant
  message is ``verified`` when the proxy relayed it from the upstream itself; one a client sent that
  the proxy never relayed is not, and keeps the digest (``digest``) of the conversation up to it.
- ``proxy_prefixes``: the digest of a conversation's canonical messages up to and including a reply
  the proxy relayed, naming the session: the next request of the conversation starts with that
  prefix, and a client-sent assistant message whose digest is here is one the proxy relayed.
- ``proxy_tokens``: the tenants' tokens, stored as SHA-256 digests.

Only verified assistant turns are the agent's: the reader gives the calls of the others the
requestor ``"unverified"``, so mining never keeps them, and counts them
(``unverified_assistant_turn``), unless the store's history is trusted (``trust_client_history``,
for a store imported from elsewhere).
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
from kindling.sessions.skips import UNVERIFIED_ASSISTANT_TURN

SOURCE = "proxy"
COMPONENT = "proxy"
#: The tenant of a proxy without tenant tokens (and of its single ``--token``).
DEFAULT_TENANT = "default"
#: What the calls of an assistant turn the proxy never relayed are marked with (``ToolCall.requestor``).
UNVERIFIED = "unverified"

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
    sa.Column("tenant", sa.String(64), nullable=False, server_default=DEFAULT_TENANT),
    # The X-Kindling-Session value the client named the conversation by (scoped to its tenant).
    sa.Column("label", sa.String(80)),
    # The session this one branched from, when a request's history diverged from the recorded one.
    sa.Column("parent_id", sa.String(80)),
    # The digest (see kindling.proxy.identity) of the messages recorded so far, in order.
    sa.Column("digest", sa.String(64)),
)
sa.Index("ix_proxy_sessions_label", sessions_table.c.tenant, sessions_table.c.label)

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
    # Assistant messages: true when the proxy relayed it from the upstream, false when a client sent
    # it; then ``digest`` names the conversation up to it, to be found among the relayed replies.
    sa.Column("verified", sa.Boolean),
    sa.Column("digest", sa.String(64)),
)

prefixes_table = sa.Table(
    "proxy_prefixes",
    metadata,
    sa.Column("hash", sa.String(64), primary_key=True),
    sa.Column("session_id", sa.String(80), nullable=False),
    sa.Column("message_count", sa.Integer, nullable=False),
)


tokens_table = sa.Table(
    "proxy_tokens",
    metadata,
    sa.Column("id", sa.String(40), primary_key=True),
    sa.Column("tenant", sa.String(64), nullable=False),
    sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("revoked_at", sa.Float),
)


def m001_initial(conn: Connection) -> None:
    """Create the three proxy tables."""
    metadata.create_all(conn, tables=[sessions_table, messages_table, prefixes_table])


# Columns m002 adds to a store made before it (a fresh store has them from m001's tables already).
_M002_COLUMNS = {
    "proxy_sessions": (
        ("tenant", f"VARCHAR(64) NOT NULL DEFAULT '{DEFAULT_TENANT}'"),
        ("label", "VARCHAR(80)"),
        ("parent_id", "VARCHAR(80)"),
        ("digest", "VARCHAR(64)"),
    ),
    "proxy_messages": (("verified", "BOOLEAN"), ("digest", "VARCHAR(64)")),
}


def m002_tenants(conn: Connection) -> None:
    """Add tenants, labels, branches, verification and the tenants' tokens.

    In a store recorded before, a session's label is its id (what ``X-Kindling-Session`` named it
    by), and an assistant message is verified when the proxy wrote it as a reply (it timed it).
    """
    inspector = sa.inspect(conn)
    for table, columns in _M002_COLUMNS.items():
        present = {column["name"] for column in inspector.get_columns(table)}
        for name, kind in columns:
            if name not in present:
                conn.execute(sa.text(f"ALTER TABLE {table} ADD COLUMN {name} {kind}"))
    metadata.create_all(conn, tables=[tokens_table])
    index = next(iter(sessions_table.indexes))
    index.create(conn, checkfirst=True)
    conn.execute(sa.text("UPDATE proxy_sessions SET label = id WHERE label IS NULL"))
    conn.execute(
        sa.text(
            "UPDATE proxy_messages SET verified = (duration_ms IS NOT NULL) "
            "WHERE role = 'assistant' AND verified IS NULL"
        )
    )


MIGRATIONS = (m001_initial, m002_tenants)


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
    target: str | Path,
    report: ReadReport,
    *,
    session_id: str | None = None,
    tenant: str | None = None,
    trust_client_history: bool = False,
) -> Iterator[Session]:
    """Stream the sessions of a proxy store, oldest first, each with its messages in order.

    ``tenant`` reads that tenant's sessions only. Each session's metadata names its ``tenant``,
    its ``label`` and ``parent`` (when it has them) and whether its agent turns are ``verified``.
    An assistant message the proxy never relayed keeps its place, its calls marked with the
    requestor ``"unverified"`` (mining keeps none of them) and counted in ``report`` as
    ``unverified_assistant_turn``; with ``trust_client_history`` (a store imported from elsewhere)
    they count as the agent's, and the session's ``verified`` is then false.

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
            modern = _has_tenants(conn)
    except StoreError as exc:
        raise SourceError(str(exc), path=target) from exc
    return _sessions(
        engine, target, report, session_id, tenant if modern else None, trust_client_history, modern
    )


def _has_tenants(conn: Connection) -> bool:
    # A store no proxy of this version has opened yet has no tenants: it is read as it is (its
    # replies are the ones the proxy timed), never migrated by a reader.
    columns = {column["name"] for column in sa.inspect(conn).get_columns(sessions_table.name)}
    return "tenant" in columns


def recorded_tenants(target: str | Path) -> dict[str, int]:
    """Return how many sessions each tenant has in the proxy store ``target`` (name -> count).

    A store recorded before tenants existed holds the default tenant's only. Raises SourceError
    when the store cannot be opened or is not a proxy store.
    """
    from kindling.db import create_engine, translate_errors
    from kindling.errors import SourceError, StoreError

    try:
        engine = create_engine(target, **_connect_args(target))
        try:
            with translate_errors(target, "read"), engine.connect() as conn:
                if not has_recorded_tables(conn):
                    raise SourceError(
                        f"{_shown(target)} holds no sessions recorded by kindling's proxy.", path=target
                    )
                if not _has_tenants(conn):
                    total = conn.execute(sa.select(sa.func.count()).select_from(sessions_table)).scalar()
                    return {DEFAULT_TENANT: int(total or 0)} if total else {}
                s = sessions_table
                rows = conn.execute(
                    sa.select(s.c.tenant, sa.func.count()).group_by(s.c.tenant).order_by(s.c.tenant)
                ).all()
        finally:
            engine.dispose()
    except StoreError as exc:
        raise SourceError(str(exc), path=target) from exc
    return {str(tenant): int(count) for tenant, count in rows}


def _sessions(
    engine: Engine,
    target: str | Path,
    report: ReadReport,
    session_id: str | None,
    tenant: str | None,
    trust: bool,
    modern: bool,
) -> Iterator[Session]:
    from kindling.db import translate_errors

    s, m, p = sessions_table, messages_table, prefixes_table
    extra: tuple[Any, ...]
    if modern:
        extra = (s.c.tenant, s.c.label, s.c.parent_id, m.c.verified, p.c.hash.label("relayed"))
        joined = s.outerjoin(m, m.c.session_id == s.c.id).outerjoin(p, p.c.hash == m.c.digest)
    else:
        extra = (m.c.duration_ms,)
        joined = s.outerjoin(m, m.c.session_id == s.c.id)
    query = (
        sa.select(
            s.c.id,
            s.c.started_at,
            s.c.updated_at,
            s.c.model,
            s.c.warm_state,
            s.c.template,
            m.c.seq,
            m.c.role,
            m.c.message,
            m.c.created_at,
            *extra,
        )
        .select_from(joined)
        .order_by(s.c.started_at, s.c.id, m.c.seq)
    )
    if session_id is not None:
        query = query.where(s.c.id == session_id)
    if tenant is not None:
        query = query.where(s.c.tenant == tenant)
    try:
        with translate_errors(target, "read"), engine.connect() as conn:
            rows = conn.execution_options(stream_results=True, yield_per=500).execute(query)
            current: _Head | None = None
            messages: list[Message] = []
            known: set[str] = set()
            expected = 0
            for row in rows:
                if current is None or row.id != current.id:
                    if current is not None:
                        yield current.session(messages, report, trust)
                    current = _Head(row, modern)
                    messages, known, expected = [], set(), 0
                if row.seq is None:
                    continue
                if row.seq != expected:
                    report.skip("recording_gap", max(row.seq - expected, 1))
                expected = row.seq + 1
                relayed = _relayed(row, modern)
                if relayed is False:
                    current.unverified += 1
                message = _message(row, report, known, unverified=relayed is False and not trust)
                if message is not None:
                    messages.append(message)
            if current is not None:
                yield current.session(messages, report, trust)
    finally:
        engine.dispose()


def _relayed(row: Any, modern: bool) -> bool | None:
    """For an assistant message, whether the proxy relayed it; None for other messages."""
    if row.role != "assistant":
        return None
    if not modern:
        return row.duration_ms is not None  # the proxy timed the replies it relayed
    return bool(row.verified) or row.relayed is not None


class _Head:
    """A session's row while its messages are read."""

    __slots__ = (
        "id",
        "label",
        "model",
        "parent",
        "started",
        "template",
        "tenant",
        "unverified",
        "updated",
        "warm",
    )

    def __init__(self, row: Any, modern: bool) -> None:
        self.id: str = row.id
        self.started, self.updated, self.model = row.started_at, row.updated_at, row.model
        self.warm, self.template = row.warm_state, row.template
        self.tenant: str = row.tenant if modern and row.tenant else DEFAULT_TENANT
        self.label: str | None = row.label if modern else None
        self.parent: str | None = row.parent_id if modern else None
        self.unverified = 0

    def session(self, messages: list[Message], report: ReadReport, trust: bool) -> Session:
        meta: dict[str, Any] = {"warm": self.warm, "tenant": self.tenant}
        if self.template:
            meta["template"] = self.template
        if self.label and self.label != self.id:
            meta["label"] = self.label
        if self.unverified:
            meta["unverified_turns"] = self.unverified
            if not trust:
                report.skip(UNVERIFIED_ASSISTANT_TURN, self.unverified)
        meta["verified"] = not (trust and self.unverified)
        session = Session(
            id=self.id,
            source=SOURCE,
            messages=tuple(messages),
            started_at=self.started,
            ended_at=self.updated,
            model=self.model,
            parent_id=self.parent,
            metadata=meta,
        )
        report.add_session(session)
        return session


def _message(row: Any, report: ReadReport, known: set[str], *, unverified: bool = False) -> Message | None:
    try:
        data = orjson.loads(row.message)
    except orjson.JSONDecodeError:
        report.skip("malformed_json")
        return None
    if isinstance(data, dict):
        if data.get("timestamp") is None:
            data["timestamp"] = row.created_at
        if unverified and isinstance(data.get("tool_calls"), list):
            # Calls the proxy never saw the model make: kept in the session, never mined.
            data["tool_calls"] = [
                {**call, "requestor": UNVERIFIED} if isinstance(call, dict) else call
                for call in data["tool_calls"]
            ]
    return message_from_dict(data, report, id_prefix=f"{row.id}:{row.seq}", known_calls=known)


def _shown(target: str | Path) -> str:
    from kindling.db import redact_url

    with contextlib.suppress(Exception):
        return redact_url(target)
    return str(target)
