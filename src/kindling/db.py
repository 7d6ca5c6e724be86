"""SQL plumbing shared by every SQL-backed store: engines, migrations and error translation.

A store names its database either as a file path (SQLite, opened in WAL mode) or as a URL
(``sqlite:///...``, ``postgresql://...``). ``postgresql://`` URLs use psycopg 3. Migrations are
numbered functions (``m001_initial``, ...) applied in order and recorded per component in the
``kindling_migrations`` table, so several stores can share one database.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from kindling.errors import StoreError
from kindling.fileio import file_lock

Migration = Callable[[Connection], None]

_migrations_table = sa.Table(
    "kindling_migrations",
    sa.MetaData(),
    sa.Column("component", sa.String(64), primary_key=True),
    sa.Column("name", sa.String(128), primary_key=True),
    sa.Column("applied_at", sa.String(40), nullable=False),
)


def is_url(target: str | Path) -> bool:
    """True when ``target`` is a database URL rather than a file path."""
    return isinstance(target, str) and "://" in target


def normalize_url(target: str | Path) -> str:
    """Turn a path or URL into a SQLAlchemy URL (``postgresql://`` becomes psycopg 3)."""
    if not is_url(target):
        return f"sqlite:///{Path(target).expanduser()}"
    url = str(target)
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def sqlite_path(target: str | Path) -> Path | None:
    """Return the file a SQLite path or ``sqlite:///`` URL names; None for other databases and memory."""
    url = normalize_url(target)
    if not url.startswith("sqlite:///") or url == "sqlite:///:memory:":
        return None
    return Path(url[len("sqlite:///") :])


def missing_sqlite_file(target: str | Path) -> Path | None:
    """Return the SQLite file ``target`` names when it does not exist yet (opening it would create it).

    Read-only commands use this to say "nothing here yet" instead of creating an empty database.
    """
    path = sqlite_path(target)
    return path if path is not None and not path.exists() else None


def holds_table(target: str | Path, table: str) -> bool:
    """True when the database ``target`` already holds ``table``; checked without creating anything.

    Read-only commands use this to leave alone an empty PostgreSQL database, or another program's
    SQLite file, instead of migrating it. A missing SQLite file holds nothing. When the check
    itself cannot run, True: opening the store then reports what is wrong.
    """
    path = sqlite_path(target)
    try:
        if path is not None:
            if not path.exists():
                return False
            with contextlib.closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as conn:
                found = conn.execute(
                    "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
                ).fetchone()
                return found is not None
        engine = create_engine(target)
        try:
            with engine.connect() as conn:
                return bool(sa.inspect(conn).has_table(table))
        finally:
            engine.dispose()
    except (sqlite3.Error, SQLAlchemyError, StoreError):
        return True


def redact_url(target: str | Path) -> str:
    """Return ``target`` with any password replaced, for messages and logs."""
    if not is_url(target):
        return str(target)
    try:
        return sa.engine.make_url(normalize_url(target)).render_as_string(hide_password=True)
    except SQLAlchemyError:
        return "<unparseable database URL>"


def create_engine(target: str | Path, **kwargs: Any) -> Engine:
    """Create an engine for a path or URL. SQLite files get WAL, a busy timeout and foreign keys.

    Raises StoreError when the URL cannot be parsed or its driver is missing.
    """
    url = normalize_url(target)
    path = sqlite_path(target)
    if path is not None:
        directory = path.parent
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(
                f"Cannot open database {redact_url(target)}: cannot create {directory}: {exc.strerror or exc}.",
                path=str(target),
            ) from exc
    try:
        if url.startswith("sqlite"):
            connect_args = kwargs.pop("connect_args", {})
            connect_args.setdefault("timeout", 30)
            connect_args.setdefault("check_same_thread", False)
            engine = sa.create_engine(url, connect_args=connect_args, **kwargs)
            sa.event.listen(engine, "connect", _sqlite_pragmas)
        else:
            kwargs.setdefault("pool_pre_ping", True)
            engine = sa.create_engine(url, **kwargs)
    except (SQLAlchemyError, ImportError, ValueError) as exc:
        raise StoreError(f"Cannot open database {redact_url(target)}: {exc}.", path=str(target)) from exc
    return engine


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


@contextlib.contextmanager
def translate_errors(target: str | Path, action: str = "use") -> Iterator[None]:
    """Turn SQLAlchemy/driver errors raised in the block into one StoreError sentence."""
    try:
        yield
    except SQLAlchemyError as exc:
        raise store_error(exc, target, action) from exc


def store_error(exc: SQLAlchemyError, target: str | Path, action: str = "use") -> StoreError:
    """Return the StoreError sentence ``translate_errors`` raises for ``exc`` (for hot paths that
    catch the error themselves rather than open a context manager per statement)."""
    detail = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
    return StoreError(f"Cannot {action} database {redact_url(target)}: {detail}", path=str(target))


def apply_migrations(engine: Engine, component: str, migrations: Sequence[Migration]) -> list[str]:
    """Apply, in order, the migrations of ``component`` not yet recorded; return the names applied.

    Each migration runs in its own transaction together with its record, so a crash leaves the
    database at a known step. Processes opening a fresh database at the same moment take turns:
    a PostgreSQL advisory lock, or a file lock beside a SQLite file.
    """
    database = engine.url.database if engine.dialect.name == "sqlite" else None
    guard = file_lock(database) if database and database != ":memory:" else contextlib.nullcontext()
    with guard:
        return _apply_migrations(engine, component, migrations)


def _apply_migrations(engine: Engine, component: str, migrations: Sequence[Migration]) -> list[str]:
    applied: list[str] = []
    with engine.begin() as conn:
        _lock_migrations(conn, "kindling_migrations")
        _migrations_table.create(conn, checkfirst=True)
    for migration in migrations:
        name = migration.__name__
        with engine.begin() as conn:
            _lock_migrations(conn, component)
            done = conn.execute(
                sa.select(_migrations_table.c.name).where(
                    _migrations_table.c.component == component, _migrations_table.c.name == name
                )
            ).first()
            if done:
                continue
            migration(conn)
            conn.execute(
                _migrations_table.insert().values(
                    component=component, name=name, applied_at=datetime.now(timezone.utc).isoformat()
                )
            )
            applied.append(name)
    return applied


def _lock_migrations(conn: Connection, key: str) -> None:
    # Held until the transaction ends; SQLite is serialised by the file lock in apply_migrations.
    if conn.dialect.name == "postgresql":
        conn.execute(sa.text("SELECT pg_advisory_xact_lock(hashtext(:key))"), {"key": key})


def schema_problems(conn: Connection, component: str, migrations: Sequence[Migration]) -> list[str]:
    """Return what keeps ``component``'s schema from being the one this code expects, one sentence
    each: migrations not applied yet, or applied by a newer kindling that this one does not know.

    An empty list: the schema is current. Runs one small query; raises what the driver raises.
    """
    known = [migration.__name__ for migration in migrations]
    if not sa.inspect(conn).has_table("kindling_migrations"):
        return [f"The {component} schema was never created (no kindling_migrations table)."]
    applied = set(
        conn.execute(
            sa.select(_migrations_table.c.name).where(_migrations_table.c.component == component)
        ).scalars()
    )
    problems = []
    missing = [name for name in known if name not in applied]
    if missing:
        problems.append(
            f"The {component} schema lacks {len(missing)} migration(s) ({', '.join(missing)}); "
            "start the service once, or run any command that opens the store, to apply them."
        )
    newer = sorted(applied.difference(known))
    if newer:
        problems.append(
            f"The {component} schema has migration(s) from a newer kindling ({', '.join(newer)}); "
            "upgrade kindling here."
        )
    return problems
