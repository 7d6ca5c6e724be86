"""Fuzz: schemathesis generates requests from the daemon's own OpenAPI schema; none may get a 5xx."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode

from kindling.confirm.app import create_app
from kindling.confirm.store import ConfirmationStore
from test_confirm_support import auth, daemon_settings


@pytest.fixture(params=["sqlite", "postgresql"])
def fuzz_db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "fuzz.db")
    return str(request.getfixturevalue("pg_url"))


def test_openapi_fuzz_finds_no_server_errors(fuzz_db: str) -> None:
    """Every operation, as each of the three roles, on SQLite and PostgreSQL: no 5xx."""
    store = ConfirmationStore(fuzz_db, daemon_settings(fuzz_db))
    tokens = {role: store.create_token(role, f"fuzz-{role}")[1] for role in ("agent", "approver", "admin")}
    agent = store.authenticate(tokens["agent"])
    assert agent is not None
    store.submit(action="seed", description="seed", identity=agent)
    app = create_app(store.settings, store, background=False)
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    failures: list[str] = []
    operations = [result.ok() for result in schema.get_all_operations()]
    assert {op.path for op in operations} >= {
        "/confirm",
        "/confirm/{request_id}",
        "/confirm/{request_id}/approve",
        "/confirm/{request_id}/deny",
        "/audit",
        "/health",
        "/tokens",
        "/whitelist",
    }
    codes: dict[str, list[int]] = {role: [] for role in tokens}
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            _fuzz(operation, mode, tokens, codes, failures)
    store.close()
    assert failures == []
    # The tokens were honoured: generated requests got past auth to real handlers for each role,
    # and each role was refused what it may not do.
    for role in tokens:
        assert sum(200 <= c < 300 for c in codes[role]) >= 5, role
        assert 403 in codes[role] and 400 in codes[role], role
    assert 202 in codes["agent"]  # submits got through to the store
    assert 404 in codes["admin"]


def _fuzz(
    operation: Any, mode: Any, tokens: dict[str, str], codes: dict[str, list[int]], failures: list[str]
) -> None:
    # Each generated request is sent once as every role: generating a case costs more than sending it,
    # so every role still gets as many requests, from a third of the generation work.
    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(max_examples=8, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    def check(case: Any) -> None:
        for role, token in tokens.items():
            response = case.call(headers=auth(token))
            codes[role].append(response.status_code)
            if response.status_code >= 500:
                failures.append(
                    f"{role}: {case.method} {case.formatted_path} -> {response.status_code}: "
                    f"{response.text[:200]}"
                )

    try:
        check()
    except Unsatisfiable:
        # An operation with no parameters or body has nothing to make invalid.
        assert mode == GenerationMode.NEGATIVE
