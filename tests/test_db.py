"""SQL plumbing: engines for paths and URLs, numbered migrations, errors translated."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from kindling.db import apply_migrations, create_engine, normalize_url, redact_url, translate_errors
from kindling.errors import StoreError


def m001_things(conn: sa.Connection) -> None:
    conn.execute(sa.text("CREATE TABLE things (id INTEGER PRIMARY KEY)"))


def m002_more(conn: sa.Connection) -> None:
    conn.execute(sa.text("ALTER TABLE things ADD COLUMN name TEXT"))


def test_urls_are_normalized_and_redacted(tmp_path: Path) -> None:
    assert normalize_url(tmp_path / "x.db") == f"sqlite:///{tmp_path / 'x.db'}"
    assert normalize_url("postgresql://u@h/db") == "postgresql+psycopg://u@h/db"
    assert "secret" not in redact_url("postgresql://u:secret@h/db")


def test_migrations_apply_once_in_order(tmp_path: Path) -> None:
    engine = create_engine(tmp_path / "deep" / "m.db")
    assert apply_migrations(engine, "things", [m001_things]) == ["m001_things"]
    assert apply_migrations(engine, "things", [m001_things, m002_more]) == ["m002_more"]
    assert apply_migrations(engine, "things", [m001_things, m002_more]) == []
    with engine.connect() as conn:
        assert conn.execute(sa.text("PRAGMA journal_mode")).scalar() == "wal"


@pytest.mark.postgres
def test_migrations_on_postgres(pg_url: str) -> None:
    engine = create_engine(pg_url)
    assert apply_migrations(engine, "things", [m001_things, m002_more]) == ["m001_things", "m002_more"]
    assert apply_migrations(engine, "things", [m001_things, m002_more]) == []
    engine.dispose()


def test_unusable_sqlite_path_is_one_store_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(StoreError, match="cannot create"):
        create_engine(blocker / "sub" / "x.db")


def test_driver_errors_are_translated(tmp_path: Path) -> None:
    engine = create_engine(tmp_path / "t.db")
    with (
        pytest.raises(StoreError, match="no such table"),
        translate_errors(tmp_path / "t.db", "read"),
        engine.connect() as conn,
    ):
        conn.execute(sa.text("SELECT * FROM missing"))


_OPEN_AND_MIGRATE = """
import sys
from kindling.db import apply_migrations, create_engine
import sqlalchemy as sa

def m001_things(conn):
    conn.execute(sa.text("CREATE TABLE things (id INTEGER PRIMARY KEY)"))

print("ready", flush=True)
sys.stdin.readline()  # every process has imported everything: all open the database at once
engine = create_engine(sys.argv[1])
print(apply_migrations(engine, "things", [m001_things]))
"""


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_processes_opening_a_fresh_database_together_take_turns(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    import subprocess
    import sys

    target = str(tmp_path / "fresh.db") if backend == "sqlite" else request.getfixturevalue("pg_url")
    # Four processes released together once all have started (a start takes longer than the race
    # window, so more processes started one after another would mostly not overlap).
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _OPEN_AND_MIGRATE, target],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    for proc in procs:
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != "ready":
            pytest.fail(f"a process failed to start: {proc.communicate(timeout=60)[1]}")
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    results = [proc.communicate(timeout=60) for proc in procs]
    assert [proc.returncode for proc in procs] == [0] * 4, [err for _, err in results]
    outputs = sorted(out.strip() for out, _ in results)
    assert outputs == ["['m001_things']"] + ["[]"] * 3
