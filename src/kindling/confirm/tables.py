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
    # The folded action name (``folding.fold_action``): the rate limit's key, per agent token.
    sa.Column("action_key", sa.String(200)),
    # The request's number among its token's requests, and among its token's for its action_key
    # (1, 2, ...): a rate limit looks up the request ``limit`` places back instead of counting.
    sa.Column("token_seq", sa.Integer),
    sa.Column("key_seq", sa.Integer),
)
# A retried submit finds its request by its agent token and Idempotency-Key. Only requests with a
# key have an entry (a unique constraint put one in for every request, with a key or without).
_HAS_KEY = requests.c.idempotency_key.isnot(None)
sa.Index(
    "ux_confirm_requests_idempotency",
    requests.c.requester_token,
    requests.c.idempotency_key,
    unique=True,
    sqlite_where=_HAS_KEY,
    postgresql_where=_HAS_KEY,
)
sa.Index("ix_confirm_requests_status_expires", requests.c.status, requests.c.expires_at)
sa.Index("ux_confirm_requests_token_seq", requests.c.requester_token, requests.c.token_seq, unique=True)
sa.Index(
    "ux_confirm_requests_key_seq",
    requests.c.requester_token,
    requests.c.action_key,
    requests.c.key_seq,
    unique=True,
)

tokens = sa.Table(
    "confirm_tokens",
    metadata,
    sa.Column("id", sa.String(40), primary_key=True),
    sa.Column("name", sa.String(64), nullable=False, unique=True),
    sa.Column("role", sa.String(16), nullable=False),
    sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
    sa.Column("created_at", sa.Double, nullable=False),
    sa.Column("revoked_at", sa.Double),
    # The token that minted this one through the API (None: the CLI, or the first-start admin).
    sa.Column("created_by", sa.String(40)),
)

# Web sign-ins, so that signing out ends one on the server (its cookie and CSRF token die with it).
web_sessions = sa.Table(
    "confirm_web_sessions",
    metadata,
    sa.Column("nonce", sa.String(32), primary_key=True),
    sa.Column("token_id", sa.String(40), nullable=False),
    sa.Column("created_at", sa.Double, nullable=False),
    sa.Column("expires_at", sa.Double, nullable=False),
    sa.Column("ended_at", sa.Double),
)
sa.Index("ix_confirm_web_sessions_expires", web_sessions.c.expires_at)

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


# Rows in confirm_meta that count changes, so every daemon can tell cheaply when its caches of
# tokens and whitelist rules are stale: triggers bump them on any change, whoever makes it.
GENERATIONS = {"token_gen": "confirm_tokens", "whitelist_gen": "confirm_whitelist"}


def m005_fast_paths(conn: Connection) -> None:
    """Rate limits per agent token and folded action; change counters for the token and rule caches."""
    from kindling.confirm.folding import fold_action  # a leaf module; imported here to keep tables pure

    if "action_key" not in {c["name"] for c in sa.inspect(conn).get_columns("confirm_requests")}:
        conn.exec_driver_sql("ALTER TABLE confirm_requests ADD COLUMN action_key VARCHAR(200)")
    for row in conn.execute(
        sa.select(requests.c.id, requests.c.action).where(requests.c.action_key.is_(None))
    ):
        conn.execute(
            requests.update().where(requests.c.id == row.id).values(action_key=fold_action(row.action))
        )
    conn.exec_driver_sql(
        "CREATE INDEX IF NOT EXISTS ix_confirm_requests_token_key_created "
        "ON confirm_requests (requester_token, action_key, created_at)"
    )
    conn.exec_driver_sql(
        "CREATE INDEX IF NOT EXISTS ix_confirm_requests_token_created ON confirm_requests (requester_token, created_at)"
    )
    postgres = conn.dialect.name == "postgresql"
    if postgres:
        conn.exec_driver_sql(
            "CREATE FUNCTION confirm_bump_generation() RETURNS trigger LANGUAGE plpgsql AS $$ "
            "BEGIN UPDATE confirm_meta SET value = (value::bigint + 1)::text WHERE key = TG_ARGV[0]; "
            "RETURN NULL; END $$"
        )
    for key, table in GENERATIONS.items():
        conn.execute(meta.insert().values(key=key, value="0"))
        if postgres:
            conn.exec_driver_sql(
                f"CREATE TRIGGER {table}_gen AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON {table} "
                f"FOR EACH STATEMENT EXECUTE FUNCTION confirm_bump_generation('{key}')"
            )
            continue
        for verb in ("INSERT", "UPDATE", "DELETE"):
            conn.exec_driver_sql(
                f"CREATE TRIGGER {table}_gen_{verb.lower()} AFTER {verb} ON {table} BEGIN "
                f"UPDATE confirm_meta SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT) WHERE key = '{key}'; END"
            )


def m006_web_sessions(conn: Connection) -> None:
    """Record web sign-ins, so that signing out revokes one on the server."""
    web_sessions.create(conn, checkfirst=True)
    for index in web_sessions.indexes:
        index.create(conn, checkfirst=True)


def m007_token_minter(conn: Connection) -> None:
    """Remember which token minted each token, so an admin cannot decide its own agents' requests."""
    if "created_by" not in {c["name"] for c in sa.inspect(conn).get_columns("confirm_tokens")}:
        conn.exec_driver_sql("ALTER TABLE confirm_tokens ADD COLUMN created_by VARCHAR(40)")


def m008_rate_sequences(conn: Connection) -> None:
    """Number each token's requests (in all and per folded action), so a rate limit is one index
    look-up rather than a count of the window; existing requests are numbered in creation order."""
    present = {c["name"] for c in sa.inspect(conn).get_columns("confirm_requests")}
    for column in ("token_seq", "key_seq"):
        if column not in present:
            conn.exec_driver_sql(f"ALTER TABLE confirm_requests ADD COLUMN {column} INTEGER")
    counts: dict[tuple[str, str | None], int] = {}
    numbered = []
    rows = conn.execute(
        sa.select(requests.c.id, requests.c.requester_token, requests.c.action_key)
        .where(requests.c.token_seq.is_(None))
        .order_by(requests.c.created_at, requests.c.id)
    ).all()
    for row in rows:
        token = counts[(row.requester_token, None)] = counts.get((row.requester_token, None), 0) + 1
        key = (row.requester_token, row.action_key or "")
        counts[key] = counts.get(key, 0) + 1
        numbered.append({"rid": row.id, "t": token, "k": counts[key]})
    if numbered:
        conn.execute(
            requests.update()
            .where(requests.c.id == sa.bindparam("rid"))
            .values(token_seq=sa.bindparam("t"), key_seq=sa.bindparam("k")),
            numbered,
        )
    for index in ("ux_confirm_requests_token_seq", "ux_confirm_requests_key_seq"):
        next(i for i in requests.indexes if i.name == index).create(conn, checkfirst=True)


# Indexes no query reads any longer (the rate limits once counted the window through them), which
# every submit still wrote: a page or two more in each commit.
_UNREAD_INDEXES = ("ix_confirm_requests_action_created", "ix_confirm_requests_token_key_created")


def m009_drop_unread_indexes(conn: Connection) -> None:
    """Drop the request indexes only the old counting rate limits read (see ``m008``)."""
    for index in _UNREAD_INDEXES:
        conn.exec_driver_sql(f"DROP INDEX IF EXISTS {index}")


def m010_drop_token_created_index(conn: Connection) -> None:
    """Drop the index of a token's requests by creation time: an agent's own list reads them in
    ``token_seq`` order through the rate limit's index (see ``ConfirmationStore.list_requests``),
    and every submit wrote this one too."""
    conn.exec_driver_sql("DROP INDEX IF EXISTS ix_confirm_requests_token_created")


def m011_idempotency_index(conn: Connection) -> None:
    """Index idempotency keys only where a request has one, in place of the unique constraint
    (see ``ux_confirm_requests_idempotency``): the same look-up and the same refusal of a second
    request with a token's key, one index entry fewer for every request without a key."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql("ALTER TABLE confirm_requests DROP CONSTRAINT IF EXISTS uq_confirm_idempotency")
    elif any(
        c["name"] == "uq_confirm_idempotency" for c in sa.inspect(conn).get_unique_constraints(requests.name)
    ):
        _rebuild_sqlite_requests(conn)
    for index in requests.indexes:
        index.create(conn, checkfirst=True)


def _rebuild_sqlite_requests(conn: Connection) -> None:
    # SQLite drops a table's constraint only by building the table again: a new one from today's
    # metadata, the rows copied by column name, the old one dropped (with its indexes), the new one
    # renamed. One transaction, begun here: the driver would run each DDL statement on its own.
    driver = conn.connection.driver_connection
    if not driver.in_transaction:  # type: ignore[union-attr]
        conn.exec_driver_sql("BEGIN IMMEDIATE")
    new = requests.to_metadata(sa.MetaData(), name="confirm_requests_new")
    conn.execute(sa.schema.CreateTable(new))
    columns = ", ".join(c.name for c in requests.columns)
    conn.exec_driver_sql(
        f"INSERT INTO confirm_requests_new ({columns}) SELECT {columns} FROM confirm_requests"
    )
    conn.exec_driver_sql("DROP TABLE confirm_requests")
    conn.exec_driver_sql("ALTER TABLE confirm_requests_new RENAME TO confirm_requests")


MIGRATIONS = (
    m001_initial,
    m002_append_only_audit,
    m003_requester_label,
    m004_audit_no_truncate,
    m005_fast_paths,
    m006_web_sessions,
    m007_token_minter,
    m008_rate_sequences,
    m009_drop_unread_indexes,
    m010_drop_token_created_index,
    m011_idempotency_index,
)
