"""Daemons in subprocesses: kill -9 durability on SQLite, and two daemons racing on one PostgreSQL."""

from __future__ import annotations

import concurrent.futures
import time
from pathlib import Path

import httpx
import psycopg
import pytest
import sqlalchemy as sa

from kindling.confirm.settings import ConfirmSettings
from kindling.confirm.store import ConfirmationStore
from kindling.errors import ConfirmError, StoreError
from test_confirm_support import DaemonProcess, auth, make_tokens


def _submit(url: str, token: str, action: str, timeout: int) -> dict[str, object]:
    r = httpx.post(
        f"{url}/confirm",
        json={"action": action, "description": f"do {action}", "timeout_seconds": timeout},
        headers=auth(token),
        timeout=10,
    )
    assert r.status_code == 202, r.text
    return dict(r.json())


def test_kill_9_loses_nothing_and_pending_still_expire(tmp_path: Path) -> None:
    db = str(tmp_path / "confirm.db")
    store = ConfirmationStore(db, ConfirmSettings(db=db, min_timeout=1))
    tokens = make_tokens(store)
    daemon = DaemonProcess(db).start()
    try:
        approved = _submit(daemon.url, tokens.agent, "deploy_a", 600)
        denied = _submit(daemon.url, tokens.agent, "deploy_b", 600)
        long_pending = _submit(daemon.url, tokens.agent, "deploy_c", 600)
        short_pending = _submit(daemon.url, tokens.agent, "deploy_d", 8)  # room for two starts under load
        assert (
            httpx.post(
                f"{daemon.url}/confirm/{approved['id']}/approve", headers=auth(tokens.approver)
            ).status_code
            == 200
        )
        assert (
            httpx.post(
                f"{daemon.url}/confirm/{denied['id']}/deny",
                json={"reason": "no"},
                headers=auth(tokens.approver),
            ).status_code
            == 200
        )
        daemon.kill()
        assert daemon.proc is not None and daemon.proc.returncode == -9
    finally:
        daemon.stop()
    restarted = DaemonProcess(db).start()
    restarted_at = time.time()
    try:

        def status(request: dict[str, object]) -> str:
            r = httpx.get(f"{restarted.url}/confirm/{request['id']}", headers=auth(tokens.approver))
            return str(r.json()["status"])

        assert status(approved) == "approved"
        assert status(denied) == "denied"
        assert status(long_pending) == "pending"
        # Pending still, unless two starts on a loaded machine took longer than its timeout (then
        # expired: either way not lost, and the long one above shows a pending request survives).
        expires_at = float(short_pending["expires_at"])  # type: ignore[arg-type]
        before = time.time()
        seen = status(short_pending)
        if time.time() < expires_at:
            assert seen == "pending"
        elif before > expires_at + 1.0:
            assert seen == "expired"
        # The short one expires on time on the restarted daemon, with nobody asking.
        time.sleep(max(0.0, expires_at - time.time()) + 1.0)
        record = store.get(str(short_pending["id"]))
        assert record.status == "expired"
        # On time: within a couple of sweeps of the deadline (or of the restart, had it come later).
        assert record.decided_at is not None
        assert expires_at <= record.decided_at < max(expires_at, restarted_at) + 2.0
        assert status(long_pending) == "pending"
        assert store.verify_audit().ok
        # A decision still works on the survivor.
        assert (
            httpx.post(
                f"{restarted.url}/confirm/{long_pending['id']}/approve", headers=auth(tokens.approver2)
            ).status_code
            == 200
        )
    finally:
        restarted.stop()
        store.close()


@pytest.mark.postgres
def test_two_daemons_on_one_postgresql_one_decision_wins(pg_url: str) -> None:
    store = ConfirmationStore(pg_url, ConfirmSettings(db=pg_url))
    tokens = make_tokens(store)
    first = DaemonProcess(pg_url).launch()
    second = DaemonProcess(pg_url).launch()
    first.start()
    second.start()
    try:
        rid = _submit(first.url, tokens.agent, "rotate_keys", 600)["id"]
        # The other daemon sees the same queue.
        seen = httpx.get(f"{second.url}/confirm/{rid}", headers=auth(tokens.approver)).json()
        assert seen["status"] == "pending"
        approvers = [tokens.approver, tokens.approver2, tokens.admin]

        def decide(i: int) -> int:
            url = (first if i % 2 else second).url
            verb = "approve" if i % 3 else "deny"
            return httpx.post(
                f"{url}/confirm/{rid}/{verb}", headers=auth(approvers[i % 3]), timeout=30
            ).status_code

        with concurrent.futures.ThreadPoolExecutor(50) as pool:
            codes = list(pool.map(decide, range(50)))
        assert codes.count(200) == 1 and codes.count(409) == 49, codes
        final = store.get(str(rid))
        assert final.status in ("approved", "denied")
        decisions = [e for e in store.audit_events(request_id=str(rid)) if e.event in ("approved", "denied")]
        assert len(decisions) == 1 and decisions[0].event == final.status
        assert store.verify_audit().ok
    finally:
        first.stop()
        second.stop()
        store.close()


@pytest.mark.postgres
def test_store_on_postgresql(pg_url: str) -> None:
    store = ConfirmationStore(pg_url, ConfirmSettings(db=pg_url, min_timeout=1, rate_limit=2))
    tokens = make_tokens(store)
    agent = store.authenticate(tokens.agent)
    approver = store.authenticate(tokens.approver)
    assert agent and approver and approver.role == "approver"
    rule = store.add_rule("read_*", "s1")
    first = store.submit(action="read_logs", description="d", identity=agent, session_key="s1")
    assert first.kind == "auto_approved"
    assert store.submit(action="read_logs", description="d", identity=agent).kind == "pending"
    assert store.submit(action="read_logs", description="d", identity=agent).kind == "rate_limited"
    store.remove_rule(rule.id)
    short = store.submit(action="x", description="d", identity=agent, timeout_seconds=1, idempotency_key="k")
    again = store.submit(action="x", description="d", identity=agent, timeout_seconds=1, idempotency_key="k")
    assert (
        short.request and again.kind == "duplicate" and again.request and again.request.id == short.request.id
    )
    time.sleep(1.1)
    assert store.expire_due() == [short.request.id]
    with pytest.raises(ConfirmError) as err:
        store.decide(short.request.id, "approved", identity=approver)
    assert err.value.status_code == 409
    assert store.verify_audit().ok
    with pytest.raises(StoreError, match="append-only"), store._write() as conn:
        conn.execute(sa.text("UPDATE confirm_audit SET actor = 'mallory' WHERE seq = 3"))
    with store.engine.begin() as conn:
        conn.exec_driver_sql("ALTER TABLE confirm_audit DISABLE TRIGGER confirm_audit_append_only")
        conn.exec_driver_sql("DELETE FROM confirm_audit WHERE seq = 3")
    report = store.verify_audit()
    assert not report.ok and report.bad_seq == 4 and "missing" in (report.problem or "")
    store.close()


@pytest.mark.postgres
def test_a_dropped_database_shows_up_on_stderr(pg_url: str) -> None:
    store = ConfirmationStore(pg_url, ConfirmSettings(db=pg_url))
    tokens = make_tokens(store)
    store.close()
    daemon = DaemonProcess(pg_url).start()
    try:
        assert httpx.get(f"{daemon.url}/confirm?limit=1", headers=auth(tokens.approver)).status_code == 200
        name = pg_url.rpartition("/")[2]
        with psycopg.connect(pg_url.rpartition("/")[0] + "/postgres", autocommit=True) as admin:
            admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
        r = httpx.get(f"{daemon.url}/confirm?limit=1", headers=auth(tokens.approver))
        assert r.status_code == 503
        deadline = time.monotonic() + 10
        while "ERROR kindling.confirm: the expiry sweeper failed" not in daemon.log():
            assert time.monotonic() < deadline, daemon.log()
            time.sleep(0.1)
        log = daemon.log()
        assert "ERROR kindling.confirm: request failed" in log
        assert "does not exist" in log and "Traceback" not in log
    finally:
        daemon.stop()
