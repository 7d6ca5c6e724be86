"""scripts/test-services (run by `make test`): what the suite needs besides Python packages."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from pathlib import Path

import psycopg
import pytest

from conftest import PG_ADMIN_URL

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "test-services"


@pytest.mark.postgres
@pytest.mark.skipif(shutil.which("psql") is None, reason="needs PostgreSQL's psql client")
def test_services_create_the_tests_database_when_it_is_missing() -> None:
    # A fresh server has no database for the tests to connect to: make test creates it.
    name = f"kindling_t_{uuid.uuid4().hex[:12]}"
    url = f"{PG_ADMIN_URL.rpartition('/')[0]}/{name}"
    env = {**os.environ, "KINDLING_TEST_PG": url}
    try:
        first = subprocess.run([str(SCRIPT)], env=env, capture_output=True, text=True, timeout=120)
        assert first.returncode == 0, first.stderr
        assert f"Creating the tests' database {name}" in first.stdout
        with psycopg.connect(url, connect_timeout=5) as conn:
            assert conn.execute("SELECT current_database()").fetchone() == (name,)
        # Once it exists, nothing more is done.
        again = subprocess.run([str(SCRIPT)], env=env, capture_output=True, text=True, timeout=120)
        assert again.returncode == 0 and "Creating" not in again.stdout, again.stdout + again.stderr
    finally:
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
