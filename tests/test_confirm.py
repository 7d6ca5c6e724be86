"""The confirmation daemon over real HTTP on loopback (SQLite): every endpoint, status and rule."""

from __future__ import annotations

import concurrent.futures
import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from kindling.confirm.policy import Identity, request_digest
from kindling.confirm.settings import ConfirmSettings
from kindling.confirm.store import ConfirmationStore
from kindling.errors import ConfigError, ConfirmError, InvalidNameError, StoreError
from test_confirm_support import Tokens, auth, daemon_settings, make_tokens, running


@pytest.fixture
def store(tmp_path: Path) -> Iterator[ConfirmationStore]:
    db = str(tmp_path / "confirm.db")
    s = ConfirmationStore(db, daemon_settings(db))
    yield s
    s.close()


@pytest.fixture
def tokens(store: ConfirmationStore) -> Tokens:
    return make_tokens(store)


@pytest.fixture
def client(store: ConfirmationStore, tokens: Tokens) -> Iterator[httpx.Client]:
    with running(store.settings, store) as server, httpx.Client(base_url=server.base_url, timeout=30) as c:
        yield c


def submit(
    client: httpx.Client, token: str, action: str = "deploy_staging", **extra: object
) -> httpx.Response:
    body = {"action": action, "description": f"Run {action}", "details": {"target": "eu-1"}, **extra}
    return client.post("/confirm", json=body, headers=auth(token))


def test_submit_approve_then_status_approved(client: httpx.Client, tokens: Tokens) -> None:
    r = submit(client, tokens.agent, requester="ci-bot", session_key="s1", timeout_seconds=120)
    assert r.status_code == 202
    body = r.json()
    assert body["status"] == "pending" and body["action"] == "deploy_staging"
    assert body["timeout_seconds"] == 120 and body["message"]
    assert body["approve_url"].endswith(f"/confirm/{body['id']}/approve")
    assert body["deny_url"].endswith(f"/confirm/{body['id']}/deny")
    assert body["digest"] == request_digest("deploy_staging", "Run deploy_staging", {"target": "eu-1"})
    r = client.post(
        f"/confirm/{body['id']}/approve", json={"approver": "Alice A."}, headers=auth(tokens.approver)
    )
    assert r.status_code == 200
    assert r.json()["status"] == "approved" and r.json()["decided_by"] == "alice"
    got = client.get(f"/confirm/{body['id']}", headers=auth(tokens.agent)).json()
    assert got["status"] == "approved" and got["session_key"] == "s1"
    # The requester is the token's name (checked by the server); the body's label is kept apart.
    assert got["requester"] == "bot" and got["requester_label"] == "ci-bot"


def test_deny_with_reason(client: httpx.Client, tokens: Tokens) -> None:
    rid = submit(client, tokens.agent).json()["id"]
    r = client.post(
        f"/confirm/{rid}/deny",
        json={"denier": "bob", "reason": "not on a Friday"},
        headers=auth(tokens.approver2),
    )
    assert r.status_code == 200
    assert r.json()["status"] == "denied" and r.json()["reason"] == "not on a Friday"
    assert r.json()["decided_by"] == "bob"


def test_double_decision_is_409_and_unknown_is_404(client: httpx.Client, tokens: Tokens) -> None:
    rid = submit(client, tokens.agent).json()["id"]
    assert client.post(f"/confirm/{rid}/approve", headers=auth(tokens.approver)).status_code == 200
    again = client.post(f"/confirm/{rid}/approve", headers=auth(tokens.approver2))
    assert again.status_code == 409 and "already approved" in again.json()["error"]
    assert client.post(f"/confirm/{rid}/deny", headers=auth(tokens.approver)).status_code == 409
    for path in ("/confirm/cr_nope", "/confirm/cr_nope/approve", "/confirm/cr_nope/deny"):
        method = client.get if path.count("/") == 2 else client.post
        assert method(path, headers=auth(tokens.approver)).status_code == 404, path


def test_bad_bodies_are_400_and_oversized_is_413(client: httpx.Client, tokens: Tokens) -> None:
    h = auth(tokens.agent)
    assert client.post("/confirm", content=b"not json", headers=h).status_code == 400
    assert client.post("/confirm", content=b"[1, 2]", headers=h).status_code == 400
    assert client.post("/confirm", json={"description": "no action"}, headers=h).status_code == 400
    assert client.post("/confirm", json={"action": "x"}, headers=h).status_code == 400
    assert client.post("/confirm", json={"action": "x", "description": "   "}, headers=h).status_code == 400
    big = {"action": "x", "description": "y", "details": {"blob": "z" * 1_100_000}}
    assert client.post("/confirm", json=big, headers=h).status_code == 413
    rid = submit(client, tokens.agent).json()["id"]
    assert (
        client.post(f"/confirm/{rid}/approve", content=b"{", headers=auth(tokens.approver)).status_code == 400
    )
    # Nothing bad was stored: only the one good request exists.
    assert len(client.get("/confirm", headers=auth(tokens.approver)).json()["requests"]) == 1


def test_timeout_is_clamped(tmp_path: Path, tokens: Tokens, store: ConfirmationStore) -> None:
    settings = store.settings.with_(min_timeout=30)
    with running(settings, ConfirmationStore(store.target, settings)) as server:
        c = httpx.Client(base_url=server.base_url)
        assert submit(c, tokens.agent, "a1", timeout_seconds=1).json()["timeout_seconds"] == 30
        assert submit(c, tokens.agent, "a2", timeout_seconds=99999).json()["timeout_seconds"] == 3600
        assert submit(c, tokens.agent, "a3").json()["timeout_seconds"] == 300


def test_eleventh_request_of_an_action_is_429(client: httpx.Client, tokens: Tokens) -> None:
    for _ in range(10):
        assert submit(client, tokens.agent, "restart_worker").status_code == 202
    r = submit(client, tokens.agent, "restart_worker")
    assert r.status_code == 429
    body = r.json()
    assert body["remaining"] == 0 and body["window_seconds"] == 3600 and "error" in body
    assert 3590 <= int(r.headers["Retry-After"]) <= 3600
    # The limit is per action.
    assert submit(client, tokens.agent, "other_action").status_code == 202


def test_whitelist_auto_approves_but_never_high_risk(
    client: httpx.Client, tokens: Tokens, store: ConfirmationStore
) -> None:
    h = auth(tokens.admin)
    assert client.post("/whitelist", json={"action": "read_*"}, headers=h).status_code == 201
    assert (
        client.post(
            "/whitelist", json={"action": "restart_worker", "session_key": "s9"}, headers=h
        ).status_code
        == 201
    )
    refused = client.post("/whitelist", json={"action": "deploy_production"}, headers=h)
    assert refused.status_code == 400 and "high-risk" in refused.json()["error"]
    r = submit(client, tokens.agent, "read_logs")
    assert r.status_code == 200 and r.json()["status"] == "auto_approved"
    assert (
        submit(client, tokens.agent, "restart_worker", session_key="s9").json()["status"] == "auto_approved"
    )
    assert submit(client, tokens.agent, "restart_worker", session_key="s1").status_code == 202
    # Even a catch-all rule (added below the API's guard, straight into the store) cannot approve high risk.
    with store.engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO confirm_whitelist (action, session_key, created_by, created_at) VALUES ('*', NULL, 'x', 0)"
        )
    for action in sorted(store.settings.high_risk):
        assert submit(client, tokens.agent, action).status_code == 202, action
    # An action off the list that the asking agent marked high-risk (its danger check flagged the
    # command) is not auto-approved either; unmarked, the same action is.
    marked = client.post(
        "/confirm",
        json={"action": "read_logs", "description": "rm -rf /", "details": {"risk": "high"}},
        headers=auth(tokens.agent),
    )
    assert marked.status_code == 202 and marked.json()["status"] == "pending"
    assert submit(client, tokens.agent, "read_logs").json()["status"] == "auto_approved"
    rules = client.get("/whitelist", headers=h).json()["rules"]
    assert {r["action"] for r in rules} == {"read_*", "restart_worker", "*"}
    assert client.delete(f"/whitelist/{rules[0]['id']}", headers=h).status_code == 200
    assert client.delete(f"/whitelist/{rules[0]['id']}", headers=h).status_code == 404


def test_auth_401_403_and_requester_cannot_decide(client: httpx.Client, tokens: Tokens) -> None:
    assert client.post("/confirm", json={"action": "a", "description": "b"}).status_code == 401
    assert (
        client.post(
            "/confirm", json={"action": "a", "description": "b"}, headers=auth("kct_wrong")
        ).status_code
        == 401
    )
    assert client.get("/audit").status_code == 401
    rid = submit(client, tokens.agent).json()["id"]
    assert client.post(f"/confirm/{rid}/approve").status_code == 401
    # Wrong role: agents cannot decide, approvers cannot submit, only admins manage.
    assert client.post(f"/confirm/{rid}/approve", headers=auth(tokens.agent2)).status_code == 403
    assert submit(client, tokens.approver).status_code == 403
    assert client.get("/tokens", headers=auth(tokens.approver)).status_code == 403
    assert client.post("/whitelist", json={"action": "x"}, headers=auth(tokens.agent)).status_code == 403
    # An admin may decide but never submit: it could mint an approver token and approve its own.
    refused = submit(client, tokens.admin)
    assert refused.status_code == 403 and "submit" in refused.json()["error"]
    minted = client.post("/tokens", json={"role": "approver", "name": "mint"}, headers=auth(tokens.admin))
    assert minted.status_code == 201
    assert submit(client, minted.json()["token"]).status_code == 403
    # Agents read only their own requests.
    assert client.get(f"/confirm/{rid}", headers=auth(tokens.agent2)).status_code == 404
    assert client.get("/confirm", headers=auth(tokens.agent2)).json()["requests"] == []


def test_revoked_token_stops_working(client: httpx.Client, tokens: Tokens) -> None:
    h = auth(tokens.admin)
    created = client.post("/tokens", json={"role": "agent", "name": "temp"}, headers=h)
    assert created.status_code == 201
    raw = created.json()["token"]
    assert submit(client, raw).status_code == 202
    assert client.post("/tokens", json={"role": "agent", "name": "temp"}, headers=h).status_code == 409
    assert client.post("/tokens", json={"role": "king", "name": "x"}, headers=h).status_code == 400
    listed = client.get("/tokens", headers=h).json()["tokens"]
    assert "temp" in {t["name"] for t in listed} and all("token" not in t for t in listed)
    assert client.delete("/tokens/temp", headers=h).status_code == 200
    assert submit(client, raw).status_code == 401
    assert client.delete("/tokens/temp", headers=h).status_code == 404


def test_digest_binds_the_decision(client: httpx.Client, tokens: Tokens) -> None:
    body = submit(client, tokens.agent).json()
    wrong = client.post(
        f"/confirm/{body['id']}/approve", json={"digest": "0" * 64}, headers=auth(tokens.approver)
    )
    assert wrong.status_code == 412
    ok = client.post(
        f"/confirm/{body['id']}/approve", json={"digest": body["digest"]}, headers=auth(tokens.approver)
    )
    assert ok.status_code == 200


def test_idempotency_key_returns_the_same_request(client: httpx.Client, tokens: Tokens) -> None:
    h = {**auth(tokens.agent), "Idempotency-Key": "k-1"}
    body = {"action": "deploy_staging", "description": "d"}
    first = client.post("/confirm", json=body, headers=h)
    second = client.post("/confirm", json=body, headers=h)
    assert first.status_code == second.status_code == 202
    assert first.json()["id"] == second.json()["id"]
    # The same key from another agent is another request.
    other = client.post("/confirm", json=body, headers={**auth(tokens.agent2), "Idempotency-Key": "k-1"})
    assert other.json()["id"] != first.json()["id"]
    assert len(client.get("/confirm", headers=auth(tokens.approver)).json()["requests"]) == 2


def test_long_poll_wakes_on_a_decision(client: httpx.Client, tokens: Tokens) -> None:
    rid = submit(client, tokens.agent).json()["id"]
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        started = time.monotonic()
        waiting = pool.submit(client.get, f"/confirm/{rid}", params={"wait": 20}, headers=auth(tokens.agent))
        time.sleep(0.5)
        assert not waiting.done()
        client.post(f"/confirm/{rid}/deny", json={"reason": "no"}, headers=auth(tokens.approver))
        result = waiting.result(timeout=10)
        elapsed = time.monotonic() - started
    assert result.json()["status"] == "denied"
    assert 0.5 <= elapsed < 5
    # Without a decision the wait ends on time with the request still pending.
    rid2 = submit(client, tokens.agent).json()["id"]
    started = time.monotonic()
    r = client.get(f"/confirm/{rid2}?wait=0.6", headers=auth(tokens.agent))
    assert r.json()["status"] == "pending" and 0.5 <= time.monotonic() - started < 3
    assert client.get(f"/confirm/{rid2}?wait=-1", headers=auth(tokens.agent)).status_code == 400


def test_fifty_concurrent_decisions_exactly_one_wins(client: httpx.Client, tokens: Tokens) -> None:
    rid = submit(client, tokens.agent).json()["id"]
    decider = [tokens.approver, tokens.approver2, tokens.admin]

    def decide(i: int) -> int:
        verb = "approve" if i % 2 else "deny"
        with httpx.Client(base_url=str(client.base_url), timeout=30) as c:
            return c.post(f"/confirm/{rid}/{verb}", headers=auth(decider[i % 3])).status_code

    with concurrent.futures.ThreadPoolExecutor(50) as pool:
        codes = list(pool.map(decide, range(50)))
    assert codes.count(200) == 1 and codes.count(409) == 49
    events = client.get("/audit?limit=500", headers=auth(tokens.approver)).json()["events"]
    assert len([e for e in events if e["request_id"] == rid and e["event"] in ("approved", "denied")]) == 1


def test_expiry_happens_without_anyone_looking(
    client: httpx.Client, tokens: Tokens, store: ConfirmationStore
) -> None:
    rid = submit(client, tokens.agent, timeout_seconds=1).json()["id"]
    # Read the database directly, not through the API: the sweeper does it on its own.
    deadline = time.monotonic() + 10
    while store.get(rid).status == "pending" and time.monotonic() < deadline:
        time.sleep(0.05)
    record = store.get(rid)
    assert record.status == "expired" and record.decided_by == "timeout"
    assert record.decided_at is not None and 0 <= record.decided_at - record.expires_at < 1.0
    assert client.post(f"/confirm/{rid}/approve", headers=auth(tokens.approver)).status_code == 409
    assert [e.event for e in store.audit_events(request_id=rid)] == ["expired", "submitted"]


def test_late_decision_on_an_unswept_request_expires_it(store: ConfirmationStore, tokens: Tokens) -> None:
    agent = store.authenticate(tokens.agent)
    approver = store.authenticate(tokens.approver)
    assert agent and approver
    rid = store.submit(action="a", description="d", identity=agent, timeout_seconds=1).request.id  # type: ignore[union-attr]
    time.sleep(1.1)
    with pytest.raises(ConfirmError) as err:
        store.decide(rid, "approved", identity=approver)
    assert err.value.status_code == 409 and store.get(rid).status == "expired"


def test_audit_and_health(client: httpx.Client, tokens: Tokens, store: ConfirmationStore) -> None:
    rid = submit(client, tokens.agent).json()["id"]
    client.post(f"/confirm/{rid}/approve", headers=auth(tokens.approver))
    health = client.get("/health")
    assert (
        health.status_code == 200
        and health.json()["status"] == "ok"
        and health.json()["database"] == "sqlite"
    )
    events = client.get("/audit", params={"limit": 2}, headers=auth(tokens.approver)).json()["events"]
    assert [e["event"] for e in events] == ["approved", "submitted"]
    assert events[0]["prev_hash"] == events[1]["hash"]
    assert client.get("/audit?limit=0", headers=auth(tokens.approver)).status_code == 400
    assert client.get("/audit?limit=501", headers=auth(tokens.approver)).status_code == 400
    assert client.get("/audit", headers=auth(tokens.agent)).status_code == 403
    assert store.verify_audit().ok


def test_audit_is_append_only_and_tampering_is_detected(store: ConfirmationStore, tokens: Tokens) -> None:
    agent = store.authenticate(tokens.agent)
    assert agent
    for i in range(3):
        store.submit(action=f"a{i}", description="d", identity=agent)
    report = store.verify_audit()
    assert report.ok and report.rows == 5 + 3
    with pytest.raises(StoreError, match="append-only"), store._write() as conn:
        conn.execute(sa.text("UPDATE confirm_audit SET actor = 'mallory' WHERE seq = 7"))
    with pytest.raises(StoreError, match="append-only"), store._write() as conn:
        conn.execute(sa.text("DELETE FROM confirm_audit WHERE seq = 7"))
    # Someone with file access drops the guard and edits a row: verify names the row.
    with store.engine.begin() as conn:
        conn.exec_driver_sql("DROP TRIGGER confirm_audit_no_update")
        conn.exec_driver_sql('UPDATE confirm_audit SET data = \'{"action":"evil"}\' WHERE seq = 7')
    bad = store.verify_audit()
    assert not bad.ok and bad.bad_seq == 7 and "hash" in (bad.problem or "")


def test_names_and_settings_are_validated(store: ConfirmationStore, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(InvalidNameError):
        store.create_token("agent", "../etc")
    with pytest.raises(InvalidNameError):
        store.create_token("root", "fine")
    agent = Identity("tok_x", "x", "agent")
    with pytest.raises(InvalidNameError):
        store.submit(action="bad\naction", description="d", identity=agent)
    monkeypatch.setenv("KINDLING_CONFIRM_RATE_LIMIT", "lots")
    with pytest.raises(ConfigError, match="KINDLING_CONFIRM_RATE_LIMIT"):
        ConfirmSettings.from_env()
    monkeypatch.setenv("KINDLING_CONFIRM_RATE_LIMIT", "3")
    monkeypatch.setenv("KINDLING_CONFIRM_HIGH_RISK", "launch_rocket, fire_staff")
    monkeypatch.setenv("KINDLING_CONFIRM_NOTIFY_URLS", "json://127.0.0.1:9/a jsons://127.0.0.1:9/b")
    s = ConfirmSettings.from_env(port=7000)
    assert s.rate_limit == 3 and s.port == 7000
    assert s.high_risk == frozenset({"launch_rocket", "fire_staff"})
    assert s.notify_urls == ("json://127.0.0.1:9/a", "jsons://127.0.0.1:9/b")
    monkeypatch.setenv("KINDLING_CONFIRM_MIN_TIMEOUT", "900")
    with pytest.raises(ConfigError):
        ConfirmSettings.from_env()


def test_details_are_stored_untruncated(client: httpx.Client, tokens: Tokens) -> None:
    details = {"diff": "x" * 200_000, "nested": {"list": list(range(100)), "ü": "ñ"}}
    rid = submit(client, tokens.agent, details=details).json()["id"]
    got = client.get(f"/confirm/{rid}", headers=auth(tokens.approver)).json()
    assert got["details"] == details
    assert json.dumps(got["details"]) == json.dumps(details)


def test_ready_is_503_when_the_database_breaks_and_health_stays_up(
    client: httpx.Client, store: ConfirmationStore
) -> None:
    assert client.get("/health").status_code == 200
    assert client.get("/ready").json() == {"status": "ready"}
    with store.engine.begin() as conn:
        conn.exec_driver_sql("ALTER TABLE confirm_requests RENAME TO confirm_requests_gone")
    broken = client.get("/ready")
    assert broken.status_code == 503 and broken.json()["status"] == "not ready"
    # What failed goes to the daemon's log; a client learns nothing of the database's whereabouts.
    assert "log" in broken.json()["problems"][0] and str(store.target) not in broken.text
    # Liveness touches nothing: the process answers, so it is not restarted for a database outage.
    assert client.get("/health").status_code == 200


def test_gets_never_change_state(client: httpx.Client, tokens: Tokens, store: ConfirmationStore) -> None:
    rid = submit(client, tokens.agent).json()["id"]
    before = (store.verify_audit().rows, store.get(rid), store.summary())
    for path in (
        f"/confirm/{rid}",
        "/confirm",
        "/confirm?status=pending",
        "/audit",
        "/health",
        "/ready",
        "/metrics",
        "/tokens",
        "/whitelist",
        "/ui",
        "/ui/pending",
        "/ui/login",
        "/openapi.json",
    ):
        for token in (tokens.admin, tokens.agent, "kct_unknown"):
            assert client.get(path, headers=auth(token)).status_code < 500, path
    assert (store.verify_audit().rows, store.get(rid), store.summary()) == before
