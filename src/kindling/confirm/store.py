"""The confirmation state machine in SQL: requests, decisions, expiry, tokens, whitelist, outbox, audit.

Every state change runs in one write transaction that also appends its audit row. Writers are
serialised (``BEGIN IMMEDIATE`` on SQLite, a transaction-scoped advisory lock on PostgreSQL) so the
audit hash chain has one order; on top of that each decision is a conditional
``UPDATE ... WHERE id = :id AND status = 'pending'``, so exactly one decision ever wins, across
threads and across daemon processes sharing one database.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hmac
import json
import os
import re
import secrets
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from functools import cache
from pathlib import Path
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from kindling.confirm import audit, policy
from kindling.confirm import tables as t
from kindling.confirm.batching import BatchWriter, GroupCommit, execute_raw
from kindling.confirm.folding import fold_action
from kindling.confirm.records import (
    AuditEvent,
    AuditReport,
    Confirmation,
    OutboxItem,
    SubmitOutcome,
    TokenInfo,
    WhitelistRule,
)
from kindling.confirm.settings import ConfirmSettings
from kindling.db import apply_migrations, create_engine, holds_table, normalize_url, translate_errors
from kindling.errors import ConfirmError, InvalidNameError, NotFoundError, StoreError

COMPONENT = "confirm"
_PG_LOCK_KEY = 0x6B696E646C  # "kindl": one advisory lock serialises the audit chain
GENESIS_HASH = audit.GENESIS_HASH

Status = Literal["pending", "approved", "denied", "expired", "auto_approved"]
STATUSES: tuple[str, ...] = ("pending", "approved", "denied", "expired", "auto_approved")

# A cached token is trusted only while the last check of the token change counter started at
# most this long ago (a daemon serving checks every TOKEN_CHECK_SECONDS), so a token revoked on
# any daemon stops working on every daemon within a second.
TOKEN_FRESH_SECONDS = 0.75
TOKEN_CHECK_SECONDS = 0.25


@dataclasses.dataclass
class _Batch:
    """What a write transaction reads once when it opens and its blocks then share."""

    seq: int  # the audit chain's head
    hash: str
    whitelist_gen: str | None  # None once a block in this transaction changed the rules
    cursor: Any  # the transaction's DBAPI cursor: the hot paths' statements skip SQLAlchemy (see _run)
    rules: list[WhitelistRule] | None = None

    def copy(self) -> _Batch:
        """Return a copy, to restore if a block fails (``dataclasses.replace`` looks up the fields
        on every call, and every block makes one)."""
        return _Batch(self.seq, self.hash, self.whitelist_gen, self.cursor, self.rules)


@cache
def _pyformat(sql: str) -> str:
    # psycopg takes %(name)s where sqlite3 takes :name.
    return re.sub(r"(?<![:\w]):(\w+)", r"%(\1)s", sql)


class ConfirmationStore:
    """Requests, decisions, tokens, whitelist rules, outbox and audit in one SQL database.

    ``target`` is a SQLite file path or a ``sqlite://``/``postgresql://`` URL. Raises StoreError
    when the database cannot be opened or migrated.
    """

    def __init__(self, target: str | Path, settings: ConfirmSettings | None = None) -> None:
        self.target = str(target)
        self.settings = settings or ConfirmSettings(db=self.target)
        try:
            self.engine: Engine = create_engine(target)
        except OSError as exc:  # the SQLite file's folder cannot be created
            raise StoreError(
                f"Cannot open database {target}: {exc.strerror or exc}.", path=self.target
            ) from None
        self._sqlite = self.engine.dialect.name == "sqlite"
        # UPDATE ... RETURNING: PostgreSQL, and SQLite from 3.35 (2021; older ones take two statements).
        self._returning = not self._sqlite or sqlite3.sqlite_version_info >= (3, 35, 0)
        self._driver_error: type[Exception] = self.engine.dialect.dbapi.Error  # type: ignore[union-attr]
        if self._sqlite:
            _restrict_sqlite_file(self.engine.url.database)
            # A 202 or a decision must survive a power cut, not only a crash: WAL's NORMAL default
            # can lose the last commits, and with them an approval an agent already acted on.
            sa.event.listen(self.engine, "connect", _sqlite_full_sync)
        with translate_errors(self.target, "migrate"):
            apply_migrations(self.engine, COMPONENT, t.MIGRATIONS)
        self._secret: str | None = None
        # Writers share transactions and commits (see batching.py); this process's writers queue
        # there rather than in SQLite's busy-sleep loop.
        self._group: GroupCommit[_Batch] = GroupCommit(
            self.engine,
            self.target,
            self._begin,
            _Batch.copy,
            keep_connection=True,
            when_idle=_sqlite_checkpoint if self._sqlite else None,
        )
        # The daemon's hot writes (submit, decide) from its event loop: ``await store.writes.run(call)``.
        self.writes = BatchWriter(self._group, self.target)
        self._rules: tuple[str, list[WhitelistRule]] | None = None  # (whitelist_gen, rules)
        # Token hash -> identity, trusted while fresh (see TOKEN_FRESH_SECONDS).
        self._tokens_lock = threading.Lock()
        self._tokens: dict[str, policy.Identity] = {}
        self._tokens_gen: int | None = None
        self._tokens_checked = float("-inf")
        self._minted_by: dict[str, str | None] = {}  # token id -> the id of the token that minted it

    def close(self) -> None:
        """Finish the queued writes, release the writers' connection and the connection pool."""
        self.writes.close()
        self._group.close()
        self.engine.dispose()

    # -- plumbing -------------------------------------------------------------------------
    def _sql(self, sql: str) -> str:
        return sql if self._sqlite else _pyformat(sql)

    def _begin(self, conn: Connection) -> _Batch:
        # Take the write lock first: what is read after it stays true until the commit.
        if self._sqlite:
            # Begun for SQLAlchemy (so that its commit commits), locked on the DBAPI cursor as the
            # hot statements run (see _run): through SQLAlchemy the BEGIN cost more than the batch's
            # savepoints. (SQLite has no server to lose, which only SQLAlchemy would notice.)
            conn.begin()
            cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
            execute_raw(cursor, self._driver_error, "BEGIN IMMEDIATE")
        else:
            # Through SQLAlchemy, which tells a server that ended the kept connection (see
            # GroupCommit) from any other error.
            conn.exec_driver_sql("SELECT pg_advisory_xact_lock(%(k)s)", {"k": _PG_LOCK_KEY})
            cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        # One statement: the chain's head (none yet on a new database) and the rules' counter.
        head = execute_raw(
            cursor,
            self._driver_error,
            "SELECT (SELECT seq FROM confirm_audit ORDER BY seq DESC LIMIT 1), "
            "(SELECT hash FROM confirm_audit ORDER BY seq DESC LIMIT 1), "
            "(SELECT value FROM confirm_meta WHERE key = 'whitelist_gen')",
        ).fetchone()
        if head[0] is None:
            return _Batch(0, GENESIS_HASH, head[2], cursor)
        return _Batch(int(head[0]), str(head[1]), head[2], cursor)

    def _run(self, sql: str, params: dict[str, Any]) -> Any:
        """Run one statement in the open write transaction on its DBAPI cursor; return the cursor.

        Submit, decide and the audit row run a handful of statements per request, for which
        SQLAlchemy's per-statement work cost more than the database's. A driver error is raised
        as SQLAlchemy would raise it, so ``translate_errors`` and the HTTP handlers (a DataError is
        the client's fault) see what they always saw.
        """
        return execute_raw(self._group.state.cursor, self._driver_error, self._sql(sql), params)

    def _write(self) -> contextlib.AbstractContextManager[Connection]:
        """A block of one shared write transaction; returns once its writes are committed
        (``GroupCommit.block``, which says database errors as StoreError)."""
        return self._group.block()

    @contextlib.contextmanager
    def _read(self) -> Iterator[Connection]:
        with translate_errors(self.target, "read"), self.engine.connect() as conn:
            yield conn

    def _audit(
        self,
        conn: Connection,
        event: str,
        request_id: str | None,
        actor: str | None,
        data: dict[str, Any] | None = None,
        *,
        at: float | None = None,
    ) -> None:
        # The chain's head was read once when the transaction took the write lock.
        batch = self._group.state
        seq = batch.seq + 1
        prev = batch.hash
        when = time.time() if at is None else at
        payload = policy.canonical_json(data or {})
        digest = policy.audit_hash(prev, seq, when, event, request_id, actor, payload)
        self._run(
            "INSERT INTO confirm_audit (seq, at, event, request_id, actor, data, prev_hash, hash) "
            "VALUES (:seq, :at, :event, :request_id, :actor, :data, :prev_hash, :hash)",
            {
                "seq": seq,
                "at": when,
                "event": event,
                "request_id": request_id,
                "actor": actor,
                "data": payload,
                "prev_hash": prev,
                "hash": digest,
            },
        )
        batch.seq, batch.hash = seq, digest

    def _rate_state(self, token_id: str, action_key: str) -> tuple[int, int, float | None, float | None]:
        """Return what the two rate limits need, in one statement of four index look-ups.

        ``(token_seq, key_seq, token_nth, key_nth)``: how many requests the token has made in all
        and for this folded action (the numbers the newest ones carry), and when the request
        ``token_rate_limit`` (``rate_limit``) places back was made: if that is inside the window,
        the limit is reached, and it is the one that must age out first. Each is one index seek,
        however many requests the window holds (counting them cost a scan of the window on every
        submit, growing with the limit). Requests are numbered under the write lock, in commit
        order, so the numbers are the order of ``created_at`` as every daemon's clock wrote it.
        """
        s = self.settings
        row = self._run(
            "SELECT m.t, m.k, "
            "(SELECT created_at FROM confirm_requests WHERE requester_token = :token "
            "AND token_seq = m.t - :token_limit + 1), "
            "(SELECT created_at FROM confirm_requests WHERE requester_token = :token AND action_key = :key "
            "AND key_seq = m.k - :key_limit + 1) "
            "FROM (SELECT (SELECT max(token_seq) FROM confirm_requests WHERE requester_token = :token) AS t, "
            "(SELECT max(key_seq) FROM confirm_requests WHERE requester_token = :token AND action_key = :key) "
            "AS k) m",
            {
                "token": token_id,
                "key": action_key,
                "token_limit": max(1, s.token_rate_limit),
                "key_limit": max(1, s.rate_limit),
            },
        ).fetchone()
        return int(row[0] or 0), int(row[1] or 0), row[2], row[3]

    @staticmethod
    def _row_to_request(row: Any) -> Confirmation:
        return Confirmation(
            id=row.id,
            action=row.action,
            description=row.description,
            details=_load_details(row.details),
            digest=row.digest,
            requester=row.requester,
            session_key=row.session_key,
            status=row.status,
            timeout_seconds=row.timeout_seconds,
            created_at=row.created_at,
            expires_at=row.expires_at,
            decided_at=row.decided_at,
            decided_by=row.decided_by,
            reason=row.reason,
            requester_label=row.requester_label,
            requester_token=row.requester_token,
        )

    def secret(self) -> str:
        """Return the database's secret that signs web-page CSRF tokens (shared by all daemons)."""
        if self._secret is None:
            with self._read() as conn:
                value = conn.execute(sa.select(t.meta.c.value).where(t.meta.c.key == "secret")).scalar()
            if not value:
                raise StoreError(
                    f"{self.target} has no confirm secret; the database is damaged.", path=self.target
                )
            self._secret = str(value)
        return self._secret

    # -- requests -------------------------------------------------------------------------
    def submit(
        self,
        *,
        action: str,
        description: str,
        identity: policy.Identity,
        details: Any = None,
        requester: str | None = None,
        session_key: str | None = None,
        timeout_seconds: int | None = None,
        idempotency_key: str | None = None,
        notify_urls: Sequence[str] | None = None,
    ) -> SubmitOutcome:
        """Record a new request; return what happened (pending, auto-approved, duplicate, rate-limited).

        Raises InvalidNameError for an unusable action, ConfirmError(400) for an empty description
        or details that are not JSON, StoreError when the database fails.
        """
        action = policy.validate_action(action)
        if not isinstance(description, str) or not description.strip():
            raise ConfirmError("description must be a non-empty string.", status_code=400)
        try:
            details_json = policy.canonical_json(details)
        except (TypeError, ValueError) as exc:
            raise ConfirmError(f"details cannot be stored as JSON: {exc}.", status_code=400) from None
        s = self.settings
        timeout = s.clamp_timeout(timeout_seconds)
        digest = policy.request_digest(action, description, details, details_json)
        urls = s.notify_urls if notify_urls is None else tuple(notify_urls)
        with self._write() as conn:
            now = time.time()
            if idempotency_key:
                # kindling's own client sends a key with every submit: on the DBAPI cursor, as the
                # statements after it (through SQLAlchemy this look-up cost as much as the rest).
                found = self._run(
                    _IDEMPOTENT_REQUEST, {"token": identity.token_id, "key": idempotency_key}
                ).fetchone()
                if found is not None:
                    earlier = _request_from_columns(found)
                    if earlier.digest != digest:
                        # Returning the old request would hand its decision to a different action.
                        raise ConfirmError(
                            f"Idempotency-Key {idempotency_key!r} was already used for a different request.",
                            status_code=422,
                        )
                    return SubmitOutcome("duplicate", earlier)
            window_start = now - s.rate_window
            # Per agent token and folded action, so one agent cannot use up another's budget and a
            # new spelling of an action gets no new budget; and per token across all actions.
            action_key = fold_action(action)
            token_seq, key_seq, token_nth, key_nth = self._rate_state(identity.token_id, action_key)
            if key_nth is not None and key_nth > window_start:
                retry = max(1, int(key_nth - window_start + 0.999))
                return SubmitOutcome("rate_limited", None, retry_after=retry, limit="action")
            if token_nth is not None and token_nth > window_start:
                retry = max(1, int(token_nth - window_start + 0.999))
                return SubmitOutcome("rate_limited", None, retry_after=retry, limit="token")
            rule = (
                None
                if policy.marked_high_risk(action, details, s.high_risk)
                else self._matching_rule(conn, action, session_key)
            )
            status = "auto_approved" if rule else "pending"
            request_id = new_request_id(now)
            values = {
                "id": request_id,
                "action": action,
                "description": description,
                "details": details_json,
                "digest": digest,
                "requester": identity.name,
                "requester_label": requester if requester and requester != identity.name else None,
                "requester_token": identity.token_id,
                "session_key": session_key,
                "status": status,
                "timeout_seconds": timeout,
                "created_at": now,
                "expires_at": now + timeout,
                "decided_at": now if rule else None,
                "decided_by": f"whitelist:{rule.id}" if rule else None,
                "reason": f"whitelist rule {rule.id} ({rule.action})" if rule else None,
                "idempotency_key": idempotency_key or None,
                "action_key": action_key,
                "token_seq": token_seq + 1,
                "key_seq": key_seq + 1,
            }
            self._run(_INSERT_REQUEST, values)
            audit_data = {
                "action": action,
                "digest": digest,
                "requester": values["requester"],
                "requester_label": values["requester_label"],
                "session_key": session_key,
                "timeout_seconds": timeout,
            }
            if rule:
                self._audit(
                    conn, "auto_approved", request_id, identity.name, {**audit_data, "rule": rule.id}, at=now
                )
            else:
                self._audit(conn, "submitted", request_id, identity.name, audit_data, at=now)
                for url in urls:
                    conn.execute(
                        t.outbox.insert().values(
                            request_id=request_id,
                            url=url,
                            event="submitted",
                            title=f"Confirmation needed: {action}",
                            # The page link, not the API's approve URL: deciding needs a signed-in approver.
                            body=f"{description}\n\nrequest {request_id} · digest {digest[:16]} · "
                            f"expires in {timeout}s\nDecide at {s.base_url}/ui#req-{request_id}",
                            status="pending",
                            attempts=0,
                            next_attempt_at=now,
                            created_at=now,
                        )
                    )
            record = self._row_to_request(_Values(values))
            return SubmitOutcome(status, record)  # type: ignore[arg-type]

    def get(self, request_id: str) -> Confirmation:
        """Return one request. Raises NotFoundError when there is none with that id."""
        with self._read() as conn:
            row = conn.execute(sa.select(t.requests).where(t.requests.c.id == request_id)).first()
        if row is None:
            raise NotFoundError(f"No confirmation request {request_id!r}.", kind="request", name=request_id)
        return self._row_to_request(row)

    def list_requests(
        self,
        *,
        status: str | None = None,
        requester_token: str | None = None,
        limit: int = 100,
        newest_first: bool = True,
    ) -> list[Confirmation]:
        """Return requests, optionally only one status or one requester's, newest first by default.

        One requester's come in the order they were numbered (``token_seq``, under the write lock,
        so in commit order whatever the daemons' clocks say), read through the rate limit's index.
        """
        query = sa.select(t.requests)
        if status:
            query = query.where(t.requests.c.status == status)
        key = t.requests.c.created_at
        if requester_token:
            query = query.where(t.requests.c.requester_token == requester_token)
            key = t.requests.c.token_seq
        order = key.desc() if newest_first else key.asc()
        with self._read() as conn:
            rows = conn.execute(query.order_by(order).limit(max(1, limit))).all()
        return [self._row_to_request(r) for r in rows]

    def pending_ids(self, limit: int = 500) -> list[str]:
        """Return the ids of pending requests, oldest first (for the page's cheap poll)."""
        with self._read() as conn:
            rows = conn.execute(
                sa.select(t.requests.c.id)
                .where(t.requests.c.status == "pending")
                .order_by(t.requests.c.created_at.asc())
                .limit(max(1, limit))
            ).scalars()
            return [str(r) for r in rows]

    def decide(
        self,
        request_id: str,
        decision: Literal["approved", "denied"],
        *,
        identity: policy.Identity,
        reason: str | None = None,
        digest: str | None = None,
        claimed_name: str | None = None,
    ) -> Confirmation:
        """Approve or deny a pending request; exactly one decision per request ever wins.

        Raises NotFoundError (unknown id), ConfirmError 403 (the requester deciding its own
        request), 412 (``digest`` differs from what is stored), 409 (already resolved or expired).
        """
        if decision not in ("approved", "denied"):
            raise ConfirmError(f"Unknown decision {decision!r}.", status_code=400)
        with self._write() as conn:
            if self._returning:
                # The common case in one statement: a pending request, not the decider's own, as
                # shown. Whatever this leaves out is told apart below, as before.
                now = time.time()
                found = self._run(
                    _DECIDE_RETURNING if digest is None else _DECIDE_RETURNING_DIGEST,
                    {
                        "status": decision,
                        "now": now,
                        "by": identity.name,
                        "reason": reason,
                        "id": request_id,
                        "me": identity.token_id,
                        "digest": digest,
                    },
                ).fetchone()
                if found is not None:
                    row = _request_from_columns(found)
                    if identity.token_id in self._minters(conn, row.requester_token):
                        raise ConfirmError(_MINTER_REFUSED, status_code=403)  # undoes the update
                    self._audit_decision(conn, row, reason, claimed_name, identity, now)
                    return row
            found = self._run(
                f"SELECT {_REQUEST_COLUMNS} FROM confirm_requests WHERE id = :id", {"id": request_id}
            ).fetchone()
            if found is None:
                raise NotFoundError(
                    f"No confirmation request {request_id!r}.", kind="request", name=request_id
                )
            row = _request_from_columns(found)
            if row.requester_token == identity.token_id:
                raise ConfirmError("The requester of a request can never decide it.", status_code=403)
            if identity.token_id in self._minters(conn, row.requester_token):
                raise ConfirmError(_MINTER_REFUSED, status_code=403)
            if digest is not None and digest != row.digest:
                raise ConfirmError(
                    "The request differs from what you were shown (digest mismatch); reload and decide again.",
                    status_code=412,
                )
            now = time.time()
            # Conditional: exactly one decision ever wins, whatever else runs on any daemon.
            result = self._run(
                "UPDATE confirm_requests SET status = :status, decided_at = :now, decided_by = :by, "
                "reason = :reason WHERE id = :id AND status = 'pending' AND expires_at > :now",
                {"status": decision, "now": now, "by": identity.name, "reason": reason, "id": request_id},
            )
            if result.rowcount == 1:
                row = dataclasses.replace(
                    row, status=decision, decided_at=now, decided_by=identity.name, reason=reason
                )
                self._audit_decision(conn, row, reason, claimed_name, identity, now)
                return row
            # Past its timeout but not yet swept: a timeout denies, so expire it now (and commit
            # that before refusing, which is why the error is raised outside the transaction).
            expired_now = row.status == "pending" and self._expire_one(conn, request_id, now)
        status = "expired" if expired_now else row.status
        raise ConfirmError(f"Request {request_id} is already {status}.", status_code=409)

    def _audit_decision(
        self,
        conn: Connection,
        row: Confirmation,
        reason: str | None,
        claimed_name: str | None,
        identity: policy.Identity,
        now: float,
    ) -> None:
        data: dict[str, Any] = {"digest": row.digest}
        if reason:
            data["reason"] = reason
        if claimed_name and claimed_name != identity.name:
            data["claimed_name"] = claimed_name
        self._audit(conn, row.status, row.id, identity.name, data, at=now)

    def _minters(self, conn: Connection, token_id: str) -> set[str]:
        """The ids of the tokens that minted ``token_id``, its minter's minter, and so on."""
        found: set[str] = set()
        current: str | None = token_id
        while current and len(found) < 64:
            # Who minted a token never changes: each link is read once per process.
            if current in self._minted_by:
                current = self._minted_by[current]
            else:
                parent = conn.execute(
                    sa.select(t.tokens.c.created_by).where(t.tokens.c.id == current)
                ).scalar()
                self._minted_by[current] = parent
                current = parent
            if not current or current in found:
                break
            found.add(current)
        return found

    def _expire_one(self, conn: Connection, request_id: str, now: float) -> bool:
        result = conn.execute(
            t.requests.update()
            .where(
                t.requests.c.id == request_id,
                t.requests.c.status == "pending",
                t.requests.c.expires_at <= now,
            )
            .values(status="expired", decided_at=now, decided_by="timeout", reason="timed out")
        )
        if result.rowcount == 1:
            self._audit(conn, "expired", request_id, "timeout", {}, at=now)
            return True
        return False

    def expire_due(self, now: float | None = None) -> list[str]:
        """Mark every pending request past its timeout ``expired``; return their ids."""
        when = time.time() if now is None else now
        with self._read() as conn:
            due = (
                conn.execute(
                    sa.select(t.requests.c.id)
                    .where(t.requests.c.status == "pending", t.requests.c.expires_at <= when)
                    .limit(500)
                )
                .scalars()
                .all()
            )
        if not due:
            return []
        expired: list[str] = []
        with self._write() as conn:
            for request_id in due:
                if self._expire_one(conn, request_id, when):
                    expired.append(request_id)
        return expired

    def decided_among(self, request_ids: Sequence[str]) -> list[str]:
        """Return which of ``request_ids`` are no longer pending (one query for all of them)."""
        with self._read() as conn:
            return list(
                conn.execute(
                    sa.select(t.requests.c.id).where(
                        t.requests.c.id.in_(list(request_ids)), t.requests.c.status != "pending"
                    )
                ).scalars()
            )

    def next_expiry(self) -> float | None:
        """Return the earliest ``expires_at`` among pending requests, or None."""
        with self._read() as conn:
            value = conn.execute(
                sa.select(sa.func.min(t.requests.c.expires_at)).where(t.requests.c.status == "pending")
            ).scalar()
        return float(value) if value is not None else None

    def counts(self) -> dict[str, int]:
        """Return how many requests are in each status."""
        with self._read() as conn:
            rows = conn.execute(
                sa.select(t.requests.c.status, sa.func.count()).group_by(t.requests.c.status)
            ).all()
        found = {status: int(n) for status, n in rows}
        return {status: found.get(status, 0) for status in STATUSES}

    def summary(self) -> dict[str, Any]:
        """Return counts for ``kindling confirm status``: requests, tokens, rules, outbox, audit rows."""
        with self._read() as conn:
            live_tokens = conn.execute(
                sa.select(sa.func.count()).select_from(t.tokens).where(t.tokens.c.revoked_at.is_(None))
            ).scalar()
            rules = conn.execute(sa.select(sa.func.count()).select_from(t.whitelist)).scalar()
            outbox_rows = conn.execute(
                sa.select(t.outbox.c.status, sa.func.count()).group_by(t.outbox.c.status)
            ).all()
            audit_rows = conn.execute(sa.select(sa.func.count()).select_from(t.audit)).scalar()
        return {
            "database": self.engine.dialect.name,
            "requests": self.counts(),
            "tokens": int(live_tokens or 0),
            "whitelist_rules": int(rules or 0),
            "outbox": {status: int(n) for status, n in outbox_rows},
            "audit_events": int(audit_rows or 0),
        }

    # -- tokens ---------------------------------------------------------------------------
    def create_token(
        self, role: str, name: str, *, actor: str = "cli", minted_by: str | None = None
    ) -> tuple[TokenInfo, str]:
        """Create a token; return its record and the raw secret (shown once, stored hashed).

        ``minted_by`` is the id of the token that asked (through the API): that token, and any
        that minted it, can never decide the new token's requests.
        Raises InvalidNameError for a bad role or name, ConfirmError(409) when the name is taken.
        """
        policy.validate_role(role)
        policy.validate_token_name(name)
        raw = policy.new_token()
        info = TokenInfo(
            id="tok_" + secrets.token_hex(8), name=name, role=role, created_at=time.time(), revoked_at=None
        )
        with self._write() as conn:
            taken = conn.execute(sa.select(t.tokens.c.id).where(t.tokens.c.name == name)).first()
            if taken:
                raise ConfirmError(f"A token named {name!r} already exists.", status_code=409)
            conn.execute(
                t.tokens.insert().values(
                    id=info.id,
                    name=name,
                    role=role,
                    token_hash=policy.hash_token(raw),
                    created_at=info.created_at,
                    revoked_at=None,
                    created_by=minted_by,
                )
            )
            data = {"name": name, "role": role, "token_id": info.id}
            if minted_by:
                data["minted_by"] = minted_by
            self._audit(conn, "token_created", None, actor, data)
        return info, raw

    def bootstrap_admin(self, name: str = "admin") -> str | None:
        """On a database with no tokens at all, create an admin token and return it; else None."""
        with self._write() as conn:
            if conn.execute(sa.select(sa.func.count()).select_from(t.tokens)).scalar():
                return None
            raw = policy.new_token()
            token_id = "tok_" + secrets.token_hex(8)
            conn.execute(
                t.tokens.insert().values(
                    id=token_id,
                    name=name,
                    role="admin",
                    token_hash=policy.hash_token(raw),
                    created_at=time.time(),
                    revoked_at=None,
                )
            )
            self._audit(
                conn, "token_created", None, name, {"role": "admin", "token_id": token_id, "bootstrap": True}
            )
            return raw

    def list_tokens(self) -> list[TokenInfo]:
        """Return every token (revoked ones too), oldest first, without secrets."""
        with self._read() as conn:
            rows = conn.execute(sa.select(t.tokens).order_by(t.tokens.c.created_at)).all()
        return [TokenInfo(r.id, r.name, r.role, r.created_at, r.revoked_at) for r in rows]

    def revoke_token(self, name: str, *, actor: str = "cli") -> TokenInfo:
        """Revoke a token by name; return it. Raises NotFoundError when there is no such live token."""
        with self._write() as conn:
            now = time.time()
            result = conn.execute(
                t.tokens.update()
                .where(t.tokens.c.name == name, t.tokens.c.revoked_at.is_(None))
                .values(revoked_at=now)
            )
            if result.rowcount != 1:
                raise NotFoundError(f"No live token named {name!r}.", kind="token", name=name)
            self._audit(conn, "token_revoked", None, actor, {"name": name})
            r = conn.execute(sa.select(t.tokens).where(t.tokens.c.name == name)).one()
            gen = conn.exec_driver_sql("SELECT value FROM confirm_meta WHERE key = 'token_gen'").scalar()
        with (
            self._tokens_lock
        ):  # here at once (a lookup that raced this is not cached); elsewhere at the next check
            self._adopt_token_gen(int(gen or 0))
        return TokenInfo(r.id, r.name, r.role, r.created_at, r.revoked_at)

    def check_tokens(self) -> None:
        """Read the token change counter; forget every cached token when it moved.

        A serving daemon calls this every ``TOKEN_CHECK_SECONDS``; cached tokens are used only
        while the last check started at most ``TOKEN_FRESH_SECONDS`` ago. Raises StoreError when
        the database fails.
        """
        started = time.monotonic()
        with self._read() as conn:
            gen = conn.exec_driver_sql("SELECT value FROM confirm_meta WHERE key = 'token_gen'").scalar()
        with self._tokens_lock:
            self._adopt_token_gen(int(gen or 0))
            self._tokens_checked = max(self._tokens_checked, started)

    def _adopt_token_gen(self, gen: int) -> bool:
        # Called holding _tokens_lock. The counter only grows: a newer value empties the cache,
        # an older one (a read that raced a change) is ignored. True when ``gen`` is current.
        if self._tokens_gen is None or gen > self._tokens_gen:
            self._tokens.clear()
            self._tokens_gen = gen
        return gen == self._tokens_gen

    def cached_identity(self, raw: str | None) -> policy.Identity | None:
        """Return the identity of a live token seen since the last check, without a query; else None.

        None only means "not known here": call ``authenticate`` to decide.
        """
        if not raw or len(raw) > 200 or time.monotonic() - self._tokens_checked > TOKEN_FRESH_SECONDS:
            return None
        return self._tokens.get(policy.hash_token(raw))

    def authenticate(self, raw: str | None) -> policy.Identity | None:
        """Return the identity behind a raw bearer token, or None when it is unknown or revoked.

        Always asks the database; a live token is then remembered for ``cached_identity``.
        """
        if not raw or not raw.startswith(policy.TOKEN_PREFIX) or len(raw) > 200:
            return None
        presented = policy.hash_token(raw)
        with self._read() as conn:
            # The token and the change counter from one snapshot: the identity is cached under
            # the counter value it was read with.
            row = conn.exec_driver_sql(
                self._sql(
                    "SELECT m.value AS gen, t.id, t.name, t.role, t.token_hash FROM confirm_meta m "
                    "LEFT JOIN confirm_tokens t ON t.token_hash = :hash AND t.revoked_at IS NULL "
                    "WHERE m.key = 'token_gen'"
                ),
                {"hash": presented},
            ).first()
        # The lookup is by a hash of a 256-bit secret; compare again in constant time anyway.
        if row is None or row.id is None or not hmac.compare_digest(row.token_hash, presented):
            return None
        identity = policy.Identity(row.id, row.name, row.role)
        with self._tokens_lock:
            if self._adopt_token_gen(int(row.gen or 0)):
                self._tokens[presented] = identity
        return identity

    def identity_by_id(self, token_id: str) -> policy.Identity | None:
        """Return the identity of a live (not revoked) token by its id, or None."""
        with self._read() as conn:
            row = conn.execute(
                sa.select(t.tokens).where(t.tokens.c.id == token_id, t.tokens.c.revoked_at.is_(None))
            ).first()
        return policy.Identity(row.id, row.name, row.role) if row else None

    # -- web sessions ---------------------------------------------------------------------
    def open_web_session(self, token_id: str, expires_at: float) -> str:
        """Record a web sign-in of ``token_id`` until ``expires_at``; return its nonce (for the cookie)."""
        nonce = secrets.token_hex(16)
        with self._write() as conn:
            now = time.time()
            # Sign-ins past their expiry are of no use to anyone: drop them as new ones arrive.
            conn.execute(t.web_sessions.delete().where(t.web_sessions.c.expires_at < now - 86400))
            conn.execute(
                t.web_sessions.insert().values(
                    nonce=nonce, token_id=token_id, created_at=now, expires_at=expires_at, ended_at=None
                )
            )
        return nonce

    def web_session_live(self, nonce: str, token_id: str, now: float | None = None) -> bool:
        """True when the sign-in ``nonce`` of ``token_id`` exists, has not expired and was not ended."""
        when = time.time() if now is None else now
        with self._read() as conn:
            row = conn.execute(
                sa.select(t.web_sessions.c.token_id).where(
                    t.web_sessions.c.nonce == nonce,
                    t.web_sessions.c.ended_at.is_(None),
                    t.web_sessions.c.expires_at > when,
                )
            ).first()
        return row is not None and row.token_id == token_id

    def end_web_session(self, nonce: str) -> None:
        """End a web sign-in: its cookie and CSRF token stop working at once, on every daemon."""
        with self._write() as conn:
            conn.execute(
                t.web_sessions.update()
                .where(t.web_sessions.c.nonce == nonce, t.web_sessions.c.ended_at.is_(None))
                .values(ended_at=time.time())
            )

    # -- whitelist ------------------------------------------------------------------------
    def _matching_rule(self, conn: Connection, action: str, session_key: str | None) -> WhitelistRule | None:
        # The rules are read once per change anywhere (whitelist_gen, bumped by a trigger), not
        # once per submit; the counter was read under the write lock, so it is current.
        batch = self._group.state
        rules = batch.rules
        if rules is None:
            cached = self._rules
            if batch.whitelist_gen is not None and cached is not None and cached[0] == batch.whitelist_gen:
                rules = cached[1]
            else:
                rows = conn.execute(sa.select(t.whitelist).order_by(t.whitelist.c.id)).all()
                rules = [
                    WhitelistRule(r.id, r.action, r.session_key, r.created_by, r.created_at) for r in rows
                ]
                if batch.whitelist_gen is not None:
                    self._rules = (batch.whitelist_gen, rules)
            batch.rules = rules
        for rule in rules:
            if policy.rule_matches(rule.action, rule.session_key, action, session_key):
                return rule
        return None

    def _rules_changed(self) -> None:
        # This transaction changed the rules: its later blocks read them afresh, uncached.
        batch = self._group.state
        batch.whitelist_gen = None
        batch.rules = None

    def add_rule(self, action: str, session_key: str | None = None, *, actor: str = "cli") -> WhitelistRule:
        """Add a whitelist rule (global when ``session_key`` is None); return it.

        A rule naming a high-risk action is refused with InvalidNameError: it could never apply.
        """
        action = policy.validate_action(action)
        if policy.is_high_risk(action, self.settings.high_risk):
            raise InvalidNameError(
                f"{action} is high-risk and can never be auto-approved.", name=action, kind="action"
            )
        with self._write() as conn:
            now = time.time()
            result = conn.execute(
                t.whitelist.insert().values(
                    action=action, session_key=session_key, created_by=actor, created_at=now
                )
            )
            rule_id = int(result.inserted_primary_key[0])  # type: ignore[index]
            self._rules_changed()
            self._audit(
                conn,
                "whitelist_added",
                None,
                actor,
                {"rule": rule_id, "action": action, "session_key": session_key},
            )
        return WhitelistRule(rule_id, action, session_key, actor, now)

    def list_rules(self) -> list[WhitelistRule]:
        """Return every whitelist rule, oldest first."""
        with self._read() as conn:
            rows = conn.execute(sa.select(t.whitelist).order_by(t.whitelist.c.id)).all()
        return [WhitelistRule(r.id, r.action, r.session_key, r.created_by, r.created_at) for r in rows]

    def remove_rule(self, rule_id: int, *, actor: str = "cli") -> None:
        """Remove a whitelist rule. Raises NotFoundError when there is none with that id."""
        with self._write() as conn:
            result = conn.execute(t.whitelist.delete().where(t.whitelist.c.id == rule_id))
            self._rules_changed()
            if result.rowcount != 1:
                raise NotFoundError(f"No whitelist rule {rule_id}.", kind="whitelist rule", name=str(rule_id))
            self._audit(conn, "whitelist_removed", None, actor, {"rule": rule_id})

    # -- outbox ---------------------------------------------------------------------------
    def claim_outbox(self, *, limit: int = 20, lease_seconds: float = 60.0) -> list[OutboxItem]:
        """Lease up to ``limit`` due notifications to this worker; a crashed worker's lease runs out."""
        with self._write() as conn:
            now = time.time()
            rows = conn.execute(
                sa.select(t.outbox)
                .where(
                    t.outbox.c.status == "pending",
                    t.outbox.c.next_attempt_at <= now,
                    sa.or_(t.outbox.c.claimed_until.is_(None), t.outbox.c.claimed_until < now),
                )
                .order_by(t.outbox.c.id)
                .limit(limit)
            ).all()
            if rows:
                conn.execute(
                    t.outbox.update()
                    .where(t.outbox.c.id.in_([r.id for r in rows]))
                    .values(claimed_until=now + lease_seconds)
                )
        return [OutboxItem(r.id, r.request_id, r.url, r.event, r.title, r.body, r.attempts) for r in rows]

    def finish_outbox(self, item: OutboxItem, *, ok: bool, error: str | None = None) -> None:
        """Record one delivery attempt: sent, or failed and scheduled for retry (or given up)."""
        s = self.settings
        with self._write() as conn:
            now = time.time()
            attempts = item.attempts + 1
            if ok:
                values: dict[str, Any] = {
                    "status": "sent",
                    "attempts": attempts,
                    "sent_at": now,
                    "claimed_until": None,
                    "last_error": None,
                }
            else:
                gave_up = attempts >= s.notify_max_attempts
                delay = s.notify_retry_seconds * (2 ** (attempts - 1))
                values = {
                    "status": "dead" if gave_up else "pending",
                    "attempts": attempts,
                    "next_attempt_at": now + min(delay, 3600.0),
                    "claimed_until": None,
                    "last_error": (error or "unknown error")[:2000],
                }
            conn.execute(t.outbox.update().where(t.outbox.c.id == item.id).values(**values))
            event = "notification_sent" if ok else "notification_failed"
            data: dict[str, Any] = {
                "outbox": item.id,
                "attempt": attempts,
                "url": _redact_notify_url(item.url),
            }
            if not ok:
                data["error"] = values["last_error"]
                data["will_retry"] = values["status"] == "pending"
            self._audit(conn, event, item.request_id, "notifier", data, at=now)

    def outbox(self) -> list[dict[str, Any]]:
        """Return every outbox row (for status and tests), oldest first, with URLs redacted."""
        with self._read() as conn:
            rows = conn.execute(sa.select(t.outbox).order_by(t.outbox.c.id)).all()
        return [{**dict(r._mapping), "url": _redact_notify_url(r.url)} for r in rows]

    # -- audit ----------------------------------------------------------------------------
    def audit_events(self, *, limit: int = 50, request_id: str | None = None) -> list[AuditEvent]:
        """Return the newest ``limit`` audit events (optionally one request's), newest first."""
        query = sa.select(t.audit)
        if request_id:
            query = query.where(t.audit.c.request_id == request_id)
        with self._read() as conn:
            rows = conn.execute(query.order_by(t.audit.c.seq.desc()).limit(max(1, limit))).all()
        return [
            AuditEvent(r.seq, r.at, r.event, r.request_id, r.actor, json.loads(r.data), r.prev_hash, r.hash)
            for r in rows
        ]

    def verify_audit(self, expect_head: str | None = None) -> AuditReport:
        """Check the audit chain, the requests table against it, and ``expect_head`` if given.

        ``expect_head`` is the ``"<seq>:<hash>"`` an earlier report printed as its ``head``.
        Raises ConfirmError when it is malformed. See ``kindling.confirm.audit``.
        """
        with self._read() as conn:
            return audit.verify(conn, expect_head)


_INSERT_REQUEST = (
    "INSERT INTO confirm_requests (id, action, description, details, digest, requester, requester_label, "
    "requester_token, session_key, status, timeout_seconds, created_at, expires_at, decided_at, decided_by, "
    "reason, idempotency_key, action_key, token_seq, key_seq) VALUES (:id, :action, :description, :details, "
    ":digest, :requester, :requester_label, :requester_token, :session_key, :status, :timeout_seconds, "
    ":created_at, :expires_at, :decided_at, :decided_by, :reason, :idempotency_key, :action_key, :token_seq, "
    ":key_seq)"
)

# The columns of a Confirmation, in its fields' order (details as stored: JSON text).
_REQUEST_COLUMNS = (
    "id, action, description, details, digest, requester, session_key, status, timeout_seconds, created_at, "
    "expires_at, decided_at, decided_by, reason, requester_label, requester_token"
)

# The request a token already made with an idempotency key (read through the key's partial index).
_IDEMPOTENT_REQUEST = (
    f"SELECT {_REQUEST_COLUMNS} FROM confirm_requests "
    "WHERE requester_token = :token AND idempotency_key = :key"
)

# A decision on a pending request, not yet expired, not the decider's own (and, with a digest, as
# shown): exactly one ever wins, whatever else runs on any daemon. Returns the decided request.
_DECIDE_RETURNING = (
    "UPDATE confirm_requests SET status = :status, decided_at = :now, decided_by = :by, reason = :reason "
    "WHERE id = :id AND status = 'pending' AND expires_at > :now AND requester_token != :me "
    f"RETURNING {_REQUEST_COLUMNS}"
)
_DECIDE_RETURNING_DIGEST = _DECIDE_RETURNING.replace(" RETURNING ", " AND digest = :digest RETURNING ", 1)

_MINTER_REFUSED = (
    "You minted the token that asked (or the token that minted it); another approver must decide."
)


# A request id's time part: 11 hex digits of milliseconds, which last until the year 2527.
_ID_TIME_SPAN = 1 << 44


def new_request_id(now: float) -> str:
    """Return a new request id: ``cr_`` and 32 hex digits, the first 11 its creation time in
    milliseconds, the other 21 random (84 bits).

    Wholly random ids put each new request's entry on a random page of the primary key's index:
    every submit dirtied a page of its own, to be read, written to the WAL in the commit and copied
    back in the checkpoint, and more of them as the table grows. Ids that start with their time
    land on the same few pages as the last ones'. Nothing is ordered by id (requests are listed by
    ``created_at`` or ``token_seq``), and the random part alone keeps an id unguessable; every
    route that takes one needs a token besides.
    """
    return f"cr_{int(now * 1000) % _ID_TIME_SPAN:011x}{secrets.randbits(84):021x}"


def _request_from_columns(row: Sequence[Any]) -> Confirmation:
    return Confirmation(*row[:3], _load_details(row[3]), *row[4:])  # type: ignore[call-arg]


class _Values:
    """A dict read like a row (``values.id``), to build a record from what was just written."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.__dict__.update(values)


def _load_details(text: str) -> Any:
    try:
        return json.loads(text)
    except RecursionError:
        # Stored by a daemon that did not yet bound the depth; reading it must not fail every read.
        return {"not_shown": "These details nest too deeply to read; deny this request."}


def _restrict_sqlite_file(path: str | None) -> None:
    # The database holds the secret that signs web sign-in cookies: readable by other local users,
    # it would let them forge an approver's session. SQLite gives -wal/-shm the main file's mode.
    if not path or path == ":memory:" or path.startswith("file:"):
        return
    try:
        fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
        os.close(fd)
        if os.stat(path).st_mode & 0o077:
            os.chmod(path, 0o600)
    except OSError as exc:
        raise StoreError(f"Cannot open database {path}: {exc.strerror or exc}.", path=path) from None


def _sqlite_full_sync(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA synchronous=FULL")
    cursor.close()


def _sqlite_checkpoint(conn: Connection) -> None:
    # Between batches (GroupCommit's idle work): copy the committed pages in the WAL into the
    # database file while the writer has nothing else to do. SQLite otherwise does it in the
    # commit that takes the WAL past 1,000 pages, and every request of that batch waited for it
    # (and for its sync of the database file). PASSIVE: it takes no lock a writer or reader needs;
    # once it has copied everything, the next write starts the WAL over.
    cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
    try:
        cursor.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
    finally:
        cursor.close()


def _redact_notify_url(url: str) -> str:
    # Apprise URLs carry bot tokens and passwords; keep the scheme and host only.
    scheme, sep, rest = url.partition("://")
    if not sep:
        return "<url>"
    host = rest.split("/", 1)[0].rsplit("@", 1)[-1]
    return f"{scheme}://{host}/…"


def open_store(settings: ConfirmSettings | None = None) -> ConfirmationStore:
    """Open the daemon database named by ``settings`` (default: from the environment)."""
    s = settings or ConfirmSettings.from_env()
    return ConfirmationStore(s.database, s)


def open_existing_store(settings: ConfirmSettings | None = None) -> ConfirmationStore | None:
    """Open the daemon database only if it exists: None for a SQLite file not yet created.

    For read-only commands, which must not leave a new database behind.
    """
    s = settings or ConfirmSettings.from_env()
    url = normalize_url(s.database)
    path = url[len("sqlite:///") :] if url.startswith("sqlite:///") else ""
    if path and path != ":memory:" and not Path(path).exists():
        return None
    if path != ":memory:" and not holds_table(s.database, t.requests.name):
        return None  # an empty PostgreSQL database, or another program's SQLite file: leave it be
    return ConfirmationStore(s.database, s)
