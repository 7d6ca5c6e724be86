"""Fixtures every test shares: isolated homes, a fresh PostgreSQL database, a fake LLM server."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import typer.testing

from fake_openai import FakeOpenAI


def _build_each_cli_app_once() -> None:
    """Make typer's CliRunner build an app's click command once instead of on every invoke.

    Building kindling's command tree costs ~50 ms and the suite invokes the CLI hundreds of times
    (about 20 s in all). The tree depends only on the app's registered commands and groups, so it is
    rebuilt whenever those change; output is identical (test_cli_main walks every --help).
    """
    build = typer.testing._get_command
    built: dict[int, tuple[typer.Typer, tuple[int, int], Any]] = {}

    def cached(app: typer.Typer) -> Any:
        shape = (len(app.registered_commands), len(app.registered_groups))
        hit = built.get(id(app))
        if hit is None or hit[0] is not app or hit[1] != shape:
            hit = built[id(app)] = (app, shape, build(app))
        return hit[2]

    typer.testing._get_command = cached


_build_each_cli_app_once()

PG_ADMIN_URL = os.environ.get("KINDLING_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")


@pytest.fixture(autouse=True)
def isolated_homes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point KINDLING_HOME and HERMES_HOME at a temp dir so no test touches real user state."""
    home = tmp_path / "home"
    monkeypatch.setenv("KINDLING_HOME", str(home / "kindling"))
    monkeypatch.setenv("HERMES_HOME", str(home / "hermes"))
    monkeypatch.delenv("KINDLING_HERMES_HOME", raising=False)
    monkeypatch.delenv("KINDLING_RAISE_ERRORS", raising=False)
    return home


def _pg_server_url(database: str) -> str:
    base, _, _ = PG_ADMIN_URL.rpartition("/")
    return f"{base}/{database}"


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh, empty PostgreSQL database on the local server, dropped after the test.

    Fails (never skips) when the server is down: `.ci/run` starts it.
    """
    name = f"kindling_t_{uuid.uuid4().hex[:12]}"
    try:
        admin = psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:  # pragma: no cover - environment problem
        pytest.fail(f"PostgreSQL is not reachable at {PG_ADMIN_URL}: {exc}")
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield _pg_server_url(name)
    finally:
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    """A real OpenAI-compatible HTTP server on loopback that replays a script and records requests."""
    server = FakeOpenAI()
    server.start()
    try:
        yield server
    finally:
        server.stop()
