"""The Python client and the agent-facing request_confirmation tool, against a real daemon on loopback."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kindling.confirm.client import ConfirmClient
from kindling.confirm.store import ConfirmationStore
from kindling.errors import ConfirmError
from kindling.integrations.confirm_tool import REQUEST_CONFIRMATION_SCHEMA, request_confirmation
from test_confirm_support import Tokens, daemon_settings, free_port, make_tokens, running


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[tuple[str, Tokens, ConfirmationStore]]:
    db = str(tmp_path / "confirm.db")
    store = ConfirmationStore(db, daemon_settings(db, rate_limit=3))
    tokens = make_tokens(store)
    with running(store.settings, store) as server:
        yield server.base_url, tokens, store
    store.close()


def _decide_when_pending(base: str, token: str, verdict: str, reason: str | None = None) -> threading.Thread:
    """A human (on another thread) who decides the first pending request that appears."""

    def human() -> None:
        with ConfirmClient(base, token) as approver:
            for _ in range(200):
                pending = approver._call("GET", "/confirm", params={"status": "pending"}).json()["requests"]
                if pending:
                    request = pending[0]
                    if verdict == "approve":
                        approver.approve(request["id"], reason=reason, digest=request["digest"])
                    else:
                        approver.deny(request["id"], reason=reason, digest=request["digest"])
                    return
                time.sleep(0.05)

    thread = threading.Thread(target=human, daemon=True)
    thread.start()
    return thread


def test_request_confirmation_waits_for_the_human(daemon: tuple[str, Tokens, ConfirmationStore]) -> None:
    base, tokens, _ = daemon
    human = _decide_when_pending(base, tokens.approver, "approve", "looks fine")
    with ConfirmClient(base, tokens.agent) as client:
        decision = client.request_confirmation("deploy_production", "Deploy v2", {"sha": "abc123"})
    human.join(5)
    assert decision.approved and decision.status == "approved"
    assert decision.decided_by == "alice" and decision.reason == "looks fine"
    human = _decide_when_pending(base, tokens.approver, "deny", "freeze")
    with ConfirmClient(base, tokens.agent) as client:
        denied = client.request_confirmation("deploy_production", "Deploy v3")
    human.join(5)
    assert not denied.approved and denied.status == "denied" and denied.reason == "freeze"


def test_timeout_denies_and_whitelist_returns_at_once(daemon: tuple[str, Tokens, ConfirmationStore]) -> None:
    base, tokens, store = daemon
    with ConfirmClient(base, tokens.agent) as client:
        started = time.monotonic()
        decision = client.request_confirmation("restart", "Restart", timeout_seconds=1)
        assert decision.status == "expired" and not decision.approved
        assert time.monotonic() - started < 5
        store.add_rule("read_*")
        quick = client.request_confirmation("read_logs", "Read logs")
        assert quick.approved and quick.status == "auto_approved"


def test_client_errors_and_idempotent_submit(daemon: tuple[str, Tokens, ConfirmationStore]) -> None:
    base, tokens, _ = daemon
    with ConfirmClient(base, tokens.agent) as client:
        first = client.submit("migrate", "m", idempotency_key="same")
        assert client.submit("migrate", "m", idempotency_key="same")["id"] == first["id"]
        client.submit("migrate", "m")
        client.submit("migrate", "m")
        with pytest.raises(ConfirmError) as err:
            client.submit("migrate", "m")
        assert err.value.status_code == 429
        with pytest.raises(ConfirmError) as err:
            client.approve(first["id"])
        assert err.value.status_code == 403
    with ConfirmClient(base, "kct_wrong") as bad, pytest.raises(ConfirmError) as err:
        bad.submit("x", "y")
    assert err.value.status_code == 401
    with ConfirmClient(f"http://127.0.0.1:{free_port()}", tokens.agent, retries=1) as nowhere:
        with pytest.raises(ConfirmError, match="Cannot reach") as err:
            nowhere.submit("x", "y")
        assert err.value.status_code is None


def test_tool_schema_and_handler(
    daemon: tuple[str, Tokens, ConfirmationStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    base, tokens, _ = daemon
    assert REQUEST_CONFIRMATION_SCHEMA["name"] == "request_confirmation"
    assert REQUEST_CONFIRMATION_SCHEMA["parameters"]["required"] == ["action", "description"]
    assert json.loads(request_confirmation({"description": "x"}))["success"] is False
    monkeypatch.delenv("KINDLING_CONFIRM_TOKEN", raising=False)
    no_token = json.loads(request_confirmation({"action": "a", "description": "b"}))
    assert no_token["success"] is False and "KINDLING_CONFIRM_TOKEN" in no_token["error"]
    monkeypatch.setenv("KINDLING_CONFIRM_URL", base)
    monkeypatch.setenv("KINDLING_CONFIRM_TOKEN", tokens.agent)
    assert (
        json.loads(request_confirmation({"action": "a", "description": "b", "timeout_seconds": "soon"}))[
            "success"
        ]
        is False
    )
    human = _decide_when_pending(base, tokens.approver2, "approve")
    result = json.loads(
        request_confirmation(
            {"action": "publish_package", "description": "Publish 1.0", "details": {"version": "1.0"}}
        )
    )
    human.join(5)
    assert result == {
        "success": True,
        "approved": True,
        "status": "approved",
        "request_id": result["request_id"],
        "decided_by": "bob",
        "reason": None,
    }
    human = _decide_when_pending(base, tokens.approver2, "deny", "not today")
    denied = json.loads(request_confirmation({"action": "publish_package", "description": "Publish 1.1"}))
    human.join(5)
    assert denied["success"] is True and denied["approved"] is False and "Do not perform" in denied["message"]
    monkeypatch.setenv("KINDLING_CONFIRM_URL", f"http://127.0.0.1:{free_port()}")
    down = json.loads(request_confirmation({"action": "a", "description": "b"}))
    assert down["success"] is False and down["approved"] is False


def test_the_tool_never_raises_on_bad_input_or_a_bad_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KINDLING_CONFIRM_TOKEN", "kct_x")
    monkeypatch.setenv("KINDLING_CONFIRM_URL", "http://[::1")
    bad_url = json.loads(request_confirmation({"action": "a", "description": "b"}))
    assert bad_url["success"] is False and "not a usable daemon URL" in bad_url["error"]
    not_a_dict = json.loads(request_confirmation(["a"]))  # type: ignore[arg-type]
    assert not_a_dict["success"] is False and "JSON object" in not_a_dict["error"]
    monkeypatch.setenv("KINDLING_CONFIRM_URL", f"http://127.0.0.1:{free_port()}")
    nan = json.loads(
        request_confirmation({"action": "a", "description": "b", "details": {"x": float("nan")}})
    )
    assert nan["success"] is False and "JSON" in nan["error"]
