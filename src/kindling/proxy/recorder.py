"""The proxy's store and the recorder that writes to it off the request path.

``ProxyStore`` is plain SQL (SQLAlchemy Core over the tables in ``kindling.sessions.recorded``):
every write is an insert that ignores rows already there, so replaying a batch after a failure, or
two proxies writing the same conversation, never stores a message twice.

``Recorder`` owns a bounded in-memory queue and one writer thread. Requests only enqueue; the thread
gathers what arrives within ``linger`` seconds and writes it in one transaction. When the store is down the queue keeps everything (up
to its bound; what does not fit is counted as dropped), one line is logged, and the thread retries
until the store is back.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from kindling.db import apply_migrations, create_engine, redact_url
from kindling.proxy.identity import Conversation
from kindling.sessions.recorded import (
    COMPONENT,
    DEFAULT_TENANT,
    MIGRATIONS,
    messages_table,
    prefixes_table,
    sessions_table,
)

__all__ = ["MessageRow", "PrefixRow", "ProxyStore", "Recorder", "SessionRow", "Write"]

log = logging.getLogger("kindling.proxy")


@dataclass(slots=True)
class SessionRow:
    """A conversation's first sighting (a branch's too: ``parent_id`` names the session it left)."""

    id: str
    started_at: float
    updated_at: float
    warm_state: str
    warm_block: str | None = None
    template: str | None = None
    message_count: int = 0
    tenant: str = DEFAULT_TENANT
    label: str | None = None
    parent_id: str | None = None


@dataclass(slots=True)
class MessageRow:
    """One real message at its position in the conversation (replies carry model and timing).

    ``message`` is the parsed message; the writer serializes it, off the request's path. An
    assistant message is ``verified`` when the proxy relayed it; one a client sent carries the
    ``digest`` of the conversation up to it (see ``kindling.sessions.recorded``).
    """

    session_id: str
    seq: int
    role: str
    message: Any
    created_at: float
    model: str | None = None
    duration_ms: float | None = None
    first_chunk_ms: float | None = None
    finish_reason: str | None = None
    verified: bool | None = None
    digest: str | None = None


@dataclass(slots=True)
class PrefixRow:
    """The hash of a conversation's messages up to a reply, naming the session."""

    hash: str
    session_id: str
    message_count: int


@dataclass(slots=True)
class Write:
    """What one request adds to the store, written in one transaction with others queued.

    ``digest`` names the session's messages once this write's are recorded (None: unknown).
    """

    session_id: str
    updated_at: float
    session: SessionRow | None = None
    messages: list[MessageRow] = field(default_factory=list)
    prefixes: tuple[PrefixRow, ...] = ()
    model: str | None = None
    digest: str | None = None


class ProxyStore:
    """SQL access to the proxy's tables; a path (SQLite) or a ``postgresql://`` URL.

    The engine is created at once (so a malformed URL is a StoreError now), but nothing connects
    until the first read or write, so a proxy starts even while its database is down.
    """

    def __init__(self, target: str | Path) -> None:
        self.target = target
        kwargs: dict[str, Any] = {}
        if isinstance(target, str) and target.startswith(("postgresql", "postgres://")):
            # Fail fast when the server is down: a request waits on nothing but the upstream.
            kwargs["connect_args"] = {"connect_timeout": 3}
        self.engine: Engine = create_engine(target, **kwargs)
        self._ready = False
        self._statements: dict[str, str] | None = None
        self._lock = threading.Lock()

    @property
    def shown(self) -> str:
        """The store's location with any password hidden."""
        return redact_url(self.target)

    def ensure_ready(self) -> None:
        """Apply the migrations once. Raises StoreError (or a driver error) when the store is down."""
        if self._ready:
            return
        with self._lock:
            if not self._ready:
                apply_migrations(self.engine, COMPONENT, MIGRATIONS)
                self._ready = True

    def write(self, batch: list[Write]) -> None:
        """Write a batch in one transaction; rows already stored are left as they are.

        Plain DBAPI ``executemany`` with SQL built once per dialect: the writer shares the
        interpreter with the requests, and SQLAlchemy's per-row parameter handling cost more than
        the database did.
        """
        self.ensure_ready()
        sessions = [_values(w.session) for w in batch if w.session is not None]
        messages = [_values(m, _MESSAGE_AT) for w in batch for m in w.messages]
        prefixes = [_values(p) for w in batch for p in w.prefixes]
        touched: dict[str, list[Any]] = {}
        for w in batch:
            top = max((m.seq + 1 for m in w.messages), default=0)
            seen = touched.get(w.session_id)
            if seen is None:
                touched[w.session_id] = [w.updated_at, top, w.model, w.digest, w.session_id]
            else:
                seen[0] = max(seen[0], w.updated_at)
                if top > seen[1]:
                    seen[1], seen[3] = top, w.digest
                seen[2] = w.model or seen[2]
        sql = self._sql()
        with self.engine.begin() as conn:
            for name, rows in (("sessions", sessions), ("messages", messages), ("prefixes", prefixes)):
                if rows:
                    conn.exec_driver_sql(sql[name], rows)
            if touched:
                conn.exec_driver_sql(
                    sql["touch"],
                    [(t, t, n, d, n, n, model, sid) for t, n, model, d, sid in touched.values()],
                )

    def _sql(self) -> dict[str, str]:
        if self._statements is None:
            mark = "%s" if self.engine.dialect.paramstyle in ("format", "pyformat") else "?"
            statements = {}
            for name, table, row in (
                ("sessions", sessions_table, SessionRow),
                ("messages", messages_table, MessageRow),
                ("prefixes", prefixes_table, PrefixRow),
            ):
                columns = row.__slots__
                statements[name] = (
                    f"INSERT INTO {table.name} ({', '.join(columns)}) "
                    f"VALUES ({', '.join([mark] * len(columns))}) ON CONFLICT DO NOTHING"
                )
            # Every SET expression reads the row as it was, so the digest follows the count it names.
            statements["touch"] = (
                f"UPDATE {sessions_table.name} SET updated_at = CASE WHEN updated_at < {mark} THEN {mark} "
                f"ELSE updated_at END, digest = CASE WHEN message_count < {mark} THEN {mark} ELSE digest END, "
                f"message_count = CASE WHEN message_count < {mark} THEN {mark} "
                f"ELSE message_count END, model = COALESCE({mark}, model) WHERE id = {mark}"
            )
            self._statements = statements
        return self._statements

    def reachable(self) -> bool:
        """True when the store answers a trivial query."""
        try:
            self.ensure_ready()
            with self.engine.connect() as conn:
                conn.execute(sa.text("SELECT 1"))
        except Exception:
            return False
        return True

    def find_prefix(self, digest: str) -> Conversation | None:
        """The conversation whose messages up to a reply hash to ``digest``, or None.

        Its ``message_count`` and ``digest`` are the session's as stored (it may have grown since
        that reply), so the caller can tell a continuation from a branch.
        """
        self.ensure_ready()
        p, s = prefixes_table, sessions_table
        query = (
            sa.select(
                p.c.session_id,
                p.c.message_count,
                s.c.message_count.label("end"),
                s.c.digest,
                s.c.warm_block,
                s.c.warm_state,
                s.c.label,
            )
            .select_from(p.join(s, s.c.id == p.c.session_id))
            .where(p.c.hash == digest)
        )
        with self.engine.connect() as conn:
            row = conn.execute(query).first()
        if row is None:
            return None
        end = max(row.end or 0, row.message_count)
        return Conversation(
            row.session_id,
            end,
            _bytes(row.warm_block),
            row.warm_state,
            row.digest if end == row.end else None,
            row.label,
        )

    def find_session(self, session_id: str) -> Conversation | None:
        """The conversation stored under ``session_id`` (with how many messages it has), or None."""
        self.ensure_ready()
        s = sessions_table
        with self.engine.connect() as conn:
            row = conn.execute(_session_query().where(s.c.id == session_id)).first()
            return None if row is None else _conversation(conn, row)

    def find_label(self, tenant: str, label: str) -> Conversation | None:
        """The newest branch of the conversation ``tenant`` named ``label`` (X-Kindling-Session), or None."""
        self.ensure_ready()
        s = sessions_table
        query = (
            _session_query()
            .where(s.c.tenant == tenant, s.c.label == label)
            .order_by(s.c.started_at.desc(), s.c.id.desc())
            .limit(1)
        )
        with self.engine.connect() as conn:
            row = conn.execute(query).first()
            return None if row is None else _conversation(conn, row)

    def relayed(self, digests: list[str]) -> set[str]:
        """Which of ``digests`` name a prefix ending with a reply the proxy relayed."""
        if not digests:
            return set()
        self.ensure_ready()
        p = prefixes_table
        with self.engine.connect() as conn:
            return {row.hash for row in conn.execute(sa.select(p.c.hash).where(p.c.hash.in_(digests)))}

    def tenant_sessions(self) -> dict[str, int]:
        """How many conversations each tenant has recorded."""
        self.ensure_ready()
        s = sessions_table
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(s.c.tenant, sa.func.count()).group_by(s.c.tenant)).all()
        return {str(tenant): int(count) for tenant, count in rows}

    def close(self) -> None:
        """Release the connection pool."""
        self.engine.dispose()


def _session_query() -> sa.Select[Any]:
    s = sessions_table
    return sa.select(s.c.id, s.c.warm_block, s.c.warm_state, s.c.digest, s.c.label, s.c.message_count)


def _conversation(conn: sa.Connection, row: Any) -> Conversation:
    # The messages say how far the session got (its row may lag behind a write still queued).
    m = messages_table
    top = conn.execute(sa.select(sa.func.max(m.c.seq)).where(m.c.session_id == row.id)).scalar()
    count = 0 if top is None else int(top) + 1
    digest = row.digest if count == row.message_count else None
    return Conversation(row.id, count, _bytes(row.warm_block), row.warm_state, digest, row.label)


def _values(item: Any, serialize: int = -1) -> tuple[Any, ...]:
    values = [getattr(item, name) for name in item.__slots__]
    if serialize >= 0 and not isinstance(values[serialize], str):
        values[serialize] = orjson.dumps(values[serialize], default=str).decode("utf-8")
    return tuple(values)


_MESSAGE_AT = MessageRow.__slots__.index("message")


def _bytes(value: str | None) -> bytes | None:
    return value.encode("utf-8") if value else None


class Recorder:
    """A bounded queue of writes and the thread that drains it into a ``ProxyStore``.

    ``submit`` never blocks and never raises. ``status()`` reports what is pending, written and
    dropped, and whether the store is reachable.
    """

    def __init__(
        self,
        store: ProxyStore,
        *,
        capacity: int = 10_000,
        batch_size: int = 500,
        linger: float = 0.05,
        retry_seconds: tuple[float, float] = (0.2, 5.0),
    ) -> None:
        self.store = store
        self.linger = linger
        self.capacity = capacity
        self.batch_size = batch_size
        self.retry_seconds = retry_seconds
        self.written = 0
        self.dropped = 0
        self.rejected = 0
        self.store_state = "unknown"
        self.last_error: str | None = None
        self._queue: deque[Write] = deque()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = False
        self._thread: threading.Thread | None = None

    @property
    def store_up(self) -> bool:
        """False only while the store is known to be unreachable."""
        return self.store_state != "down"

    def start(self) -> None:
        """Start the writer thread."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="kindling-proxy-recorder", daemon=True)
            self._thread.start()

    def submit(self, write: Write) -> bool:
        """Queue ``write``; False (and counted as dropped) when the queue is full."""
        with self._lock:
            if len(self._queue) >= self.capacity:
                self.dropped += 1
                first = self.dropped == 1
            else:
                self._queue.append(write)
                self._wake.set()
                return True
        if first:
            log.warning(
                "recording queue full (%d writes waiting for %s): dropping new writes, counted in /kindling/status",
                self.capacity,
                self.store.shown,
            )
        return False

    def pending(self) -> int:
        """How many writes wait in the queue."""
        with self._lock:
            return len(self._queue)

    def status(self) -> dict[str, Any]:
        """Counts and store state, for ``/kindling/status``."""
        return {
            "store": self.store.shown,
            "store_state": self.store_state,
            "pending": self.pending(),
            "written": self.written,
            "dropped": self.dropped,
            "rejected": self.rejected,
            "last_error": self.last_error,
        }

    def stop(self, timeout: float = 5.0) -> None:
        """Write what is queued (for up to ``timeout`` seconds), then stop the thread."""
        self._stopping = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        left = self.pending()
        if left:
            log.warning("stopped with %d writes not recorded (store %s)", left, self.store_state)

    def _take(self) -> list[Write]:
        with self._lock:
            return [self._queue[i] for i in range(min(self.batch_size, len(self._queue)))]

    def _done(self, count: int) -> None:
        with self._lock:
            for _ in range(count):
                self._queue.popleft()
            if not self._queue:
                self._wake.clear()

    def _run(self) -> None:
        delay = self.retry_seconds[0]
        # Reach the store at once, so a proxy started against a dead database says so at start.
        self._probe()
        while True:
            self._wake.wait(timeout=1.0)
            if self.linger and not self._stopping and 0 < self.pending() < self.batch_size:
                # One transaction for what arrives within `linger` costs a tenth of one per write,
                # and this thread then takes the interpreter from requests that much less often.
                time.sleep(self.linger)
            batch = self._take()
            if not batch:
                if self._stopping:
                    return
                if self.store_state == "down":
                    self._probe()  # so lookups resume once the store is back, even with nothing queued
                continue
            try:
                self.store.write(batch)
            except Exception as exc:  # any failure of the store: keep the batch and retry
                if self.store.reachable():
                    # The store is fine, so some write in the batch is bad: write them one by one
                    # and set aside (counted, logged) only what the store refuses.
                    self._write_singly(batch)
                    continue
                self._went_down(exc)
                if self._stopping:
                    return
                time.sleep(delay)
                delay = min(delay * 2, self.retry_seconds[1])
                continue
            delay = self.retry_seconds[0]
            self._done(len(batch))
            self.written += len(batch)
            self._came_up()

    def _write_singly(self, batch: list[Write]) -> None:
        for write in batch:
            try:
                self.store.write([write])
            except Exception as exc:
                if not self.store.reachable():
                    return  # down after all: the rest stays queued
                self.rejected += 1
                log.warning(
                    "store %s refused a recording of session %s: %s",
                    self.store.shown,
                    write.session_id,
                    _line(exc),
                )
            else:
                self.written += 1
            self._done(1)

    def _probe(self) -> None:
        try:
            self.store.ensure_ready()
        except Exception as exc:
            self._went_down(exc)
        else:
            self._came_up()

    def _went_down(self, exc: BaseException) -> None:
        detail = _line(exc)
        self.last_error = detail
        if self.store_state != "down":
            self.store_state = "down"
            log.warning("store %s unreachable, queueing recordings in memory: %s", self.store.shown, detail)

    def _came_up(self) -> None:
        if self.store_state == "down":
            log.warning("store %s reachable again, %d writes pending", self.store.shown, self.pending())
        self.store_state = "up"
        self.last_error = None


def _line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
