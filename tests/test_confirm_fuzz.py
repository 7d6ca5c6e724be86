"""Fuzz: schemathesis generates requests from the daemon's own OpenAPI schema; none may get a 5xx."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode

from kindling.confirm.app import create_app
from kindling.confirm.store import ConfirmationStore
from test_confirm_support import auth, daemon_settings


def test_openapi_fuzz_finds_no_server_errors(tmp_path: Path) -> None:
    db = str(tmp_path / "fuzz.db")
    store = ConfirmationStore(db, daemon_settings(db))
    admin = store.create_token("admin", "fuzz-admin")[1]
    agent_token = store.create_token("agent", "fuzz-agent")[1]
    agent = store.authenticate(agent_token)
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
    codes: list[int] = []
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            # Only agents submit; the admin token reaches every other handler.
            token = (
                agent_token if (operation.method.upper(), operation.path) == ("POST", "/confirm") else admin
            )
            _fuzz(operation, mode, token, codes, failures)
    store.close()
    assert failures == []
    # The token was honoured: plenty of generated requests got past auth to real handlers.
    assert sum(200 <= c < 300 for c in codes) >= 20
    assert {400, 404} <= set(codes)
    assert 202 in codes  # submits got through to the store


def _fuzz(operation: Any, mode: Any, token: str, codes: list[int], failures: list[str]) -> None:
    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(max_examples=15, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    def check(case: Any) -> None:
        response = case.call(headers=auth(token))
        codes.append(response.status_code)
        if response.status_code >= 500:
            failures.append(
                f"{case.method} {case.formatted_path} -> {response.status_code}: {response.text[:200]}"
            )

    try:
        check()
    except Unsatisfiable:
        # An operation with no parameters or body has nothing to make invalid.
        assert mode == GenerationMode.NEGATIVE
