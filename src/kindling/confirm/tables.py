"""The daemon's SQL tables and their numbered migrations (SQLite and PostgreSQL alike)."""

from __future__ import annotations

import secrets

import sqlalchemy as sa
from sqlalchemy.engine import Connection

metadata = sa.MetaData()

requests = sa.Table(
    "confirm_requests",
    metadata,
    sa.Column("id", sa.String(40), primary_key=True),
    sa.Column("action", sa.String(200), nullable=False),
    sa.Column("description", sa.Text, nullable=False),
    sa.Column("details", sa.Text, nullable=False),
    sa.Column("digest", sa.String(64), nullable=False),
    sa.Column("requester", sa.String(200), nullable=False),
    sa.Column("requester_token", sa.String(40), nullable=False),
    sa.Column("session_key", sa.String(200)),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("timeout_seconds", sa.Integer, nullable=False),
    sa.Column("created_at", sa.Double, nullable=False),
    sa.Column("expires_at", sa.Double, nullable=False),
    sa.Column("decided_at", sa.Double),
    sa.Column("decided_by", sa.String(200)),
    sa.Column("reason", sa.Text),
    sa.Column("idempotency_key", sa.String(200)),
    # What the submitter called itself (the body's ``requester``); ``requester`` is the token's name.
    sa.Column("requester_label", sa.String(200)),
    sa.UniqueConstraint("requester_token", "idempotency_key", name="uq_confirm_idempotency"),
)
sa.Index("ix_confirm_requests_status_expires", requests.c.status, requests.c.expires_at)
sa.Index("ix_confirm_requests_action_created", requests.c.action, requests.c.created_at)

tokens = sa.Table(
    "confirm_tokens",
    metadata,
    sa.Column("id", sa.String(40), primary_key=True),
    sa.Column("name", sa.String(64), nullable=False, unique=True),
    sa.Column("role", sa.String(16), nullable=False),
    sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
    sa.Column("created_at", sa.Double, nullable=False),
    sa.Column("revoked_at", sa.Double),
)

whitelist = sa.Table(
    "confirm_whitelist",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("action", sa.String(200), nullable=False),
    sa.Column("session_key", sa.String(200)),
    sa.Column("created_by", sa.String(64), nullable=False),
    sa.Column("created_at", sa.Double, nullable=False),
)

audit = sa.Table(
    "confirm_audit",
    metadata,
    sa.Column("seq", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("at", sa.Double, nullable=False),
    sa.Column("event", sa.String(40), nullable=False),
    sa.Column("request_id", sa.String(40)),
    sa.Column("actor", sa.String(200)),
    sa.Column("data", sa.Text, nullable=False),
    sa.Column("prev_hash", sa.String(64), nullable=False),
    sa.Column("hash", sa.String(64), nullable=False),
)

outbox = sa.Table(
    "confirm_outbox",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("request_id", sa.String(40), nullable=False),
    sa.Column("url", sa.Text, nullable=False),
    sa.Column("event", sa.String(40), nullable=False),
    sa.Column("title", sa.Text, nullable=False),
    sa.Column("body", sa.Text, nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False, default=0),
    sa.Column("next_attempt_at", sa.Double, nullable=False),
    sa.Column("claimed_until", sa.Double),
    sa.Column("last_error", sa.Text),
    sa.Column("created_at", sa.Double, nullable=False),
    sa.Column("sent_at", sa.Double),
)
sa.Index("ix_confirm_outbox_due", outbox.c.status, outbox.c.next_attempt_at)

meta = sa.Table(
    "confirm_meta",
    metadata,
    sa.Column("key", sa.String(64), primary_key=True),
    sa.Column("value", sa.Text, nullable=False),
)


def m001_initial(conn: Connection) -> None:
    """Create every table, and the secret that signs web-page CSRF tokens."""
    metadata.create_all(conn)
    conn.execute(meta.insert().values(key="secret", value=secrets.token_hex(32)))


def m002_append_only_audit(conn: Connection) -> None:
    """Make the database itself refuse UPDATE and DELETE on the audit table."""
    if conn.dialect.name == "sqlite":
        for verb in ("UPDATE", "DELETE"):
            conn.exec_driver_sql(
                f"CREATE TRIGGER confirm_audit_no_{verb.lower()} BEFORE {verb} ON confirm_audit "
                "BEGIN SELECT RAISE(ABORT, 'confirm_audit is append-only'); END"
            )
    elif conn.dialect.name == "postgresql":
        conn.exec_driver_sql(
            "CREATE FUNCTION confirm_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$ "
            "BEGIN RAISE EXCEPTION 'confirm_audit is append-only'; END $$"
        )
        conn.exec_driver_sql(
            "CREATE TRIGGER confirm_audit_append_only BEFORE UPDATE OR DELETE ON confirm_audit "
            "FOR EACH ROW EXECUTE FUNCTION confirm_audit_append_only()"
        )


def m003_requester_label(conn: Connection) -> None:
    """Keep the submitter's own label apart from the authenticated token name."""
    # m001 builds tables from the current metadata, so a fresh database already has the column.
    if "requester_label" not in {c["name"] for c in sa.inspect(conn).get_columns("confirm_requests")}:
        conn.exec_driver_sql("ALTER TABLE confirm_requests ADD COLUMN requester_label VARCHAR(200)")


def m004_audit_no_truncate(conn: Connection) -> None:
    """On PostgreSQL, refuse TRUNCATE of the audit table too (a row trigger never sees it)."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(
            "CREATE TRIGGER confirm_audit_no_truncate BEFORE TRUNCATE ON confirm_audit "
            "FOR EACH STATEMENT EXECUTE FUNCTION confirm_audit_append_only()"
        )


MIGRATIONS = (m001_initial, m002_append_only_audit, m003_requester_label, m004_audit_no_truncate)
