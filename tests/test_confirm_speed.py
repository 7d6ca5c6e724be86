"""The daemon's fast paths keep its promises: folded rate-limit keys, cached tokens, targeted wake-ups."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import enum
import functools
import json
import re
import socket
import sqlite3
import threading
import time
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa
from hypothesis import given, settings
from hypothesis import strategies as st

from kindling.confirm.folding import fold_action
from kindling.confirm.policy import Identity, is_high_risk
from kindling.confirm.records import Confirmation
from kindling.confirm.settings import HIGH_RISK_ACTIONS, ConfirmSettings
from kindling.confirm.store import ConfirmationStore
from kindling.errors import ConfirmError, NotFoundError, StoreError
from test_confirm_support import DaemonProcess, auth, daemon_settings, make_tokens, running


def test_fold_action_makes_spellings_one_key() -> None:
    same = [
        "rotate_keys",
        "Rotate-Keys",
        " ROTATE  keys ",
        "ｒｏｔａｔｅ＿ｋｅｙｓ",
        "rotate.keys_",
        "_rotate__keys",
    ]
    assert {fold_action(a) for a in same} == {"rotate_keys"}
    assert fold_action("ﬁle_read") == "file_read"  # a ligature
    assert fold_action("rotate_key") != fold_action("rotate_keys")
    # The high-risk check uses the same fold: a full-width spelling is still high-risk.
    assert is_high_risk("ｒｏｔａｔｅ＿ｋｅｙｓ", HIGH_RISK_ACTIONS)


# -- rate limits per agent token and folded action (issue 13 item 16) -----------------------------
def test_rate_limit_is_per_agent_and_folded_action(tmp_path: Path) -> None:
    db = str(tmp_path / "confirm.db")
    store = ConfirmationStore(db, daemon_settings(db, rate_limit=3))
    tokens = make_tokens(store)
    with running(store.settings, store) as server, httpx.Client(base_url=server.base_url) as client:

        def submit(token: str, action: str) -> httpx.Response:
            return client.post("/confirm", json={"action": action, "description": "d"}, headers=auth(token))

        for _ in range(3):
            assert submit(tokens.agent, "restart_worker").status_code == 202
        # Another spelling of the same action is the same budget...
        for spelling in ("Restart-Worker", "ｒｅｓｔａｒｔ_ｗｏｒｋｅｒ", " restart.worker "):
            refused = submit(tokens.agent, spelling)
            assert refused.status_code == 429, spelling
        assert "'bot'" in refused.json()["error"] and int(refused.headers["Retry-After"]) > 3000
        # ...and another agent's budget is its own.
        assert submit(tokens.agent2, "restart_worker").status_code == 202
        assert submit(tokens.agent, "other_action").status_code == 202
    store.close()


# -- cached tokens: revocation reaches every daemon within a second -------------------------------
def test_revocation_reaches_another_daemon_within_a_second(tmp_path: Path) -> None:
    db = str(tmp_path / "confirm.db")
    store = ConfirmationStore(db, ConfirmSettings(db=db))
    tokens = make_tokens(store)
    temp = store.create_token("agent", "temp")[1]
    store.close()
    first, second = DaemonProcess(db).launch(), DaemonProcess(db).launch()
    first.start()
    second.start()
    try:
        with httpx.Client(timeout=10) as client:
            # Warm the second daemon's cache with the token.
            for _ in range(5):
                assert client.get(f"{second.url}/confirm?limit=1", headers=auth(temp)).status_code == 200
            revoked = client.delete(f"{first.url}/tokens/temp", headers=auth(tokens.admin))
            assert revoked.status_code == 200
            revoked_at = time.monotonic()
            codes: list[tuple[float, int]] = []
            while time.monotonic() < revoked_at + 1.5:
                sent = time.monotonic()
                codes.append(
                    (sent, client.get(f"{second.url}/confirm?limit=1", headers=auth(temp)).status_code)
                )
            # Every request sent a second or more after the revocation is refused.
            late = [code for sent, code in codes if sent >= revoked_at + 1.0]
            assert late and set(late) == {401}, codes
            # Other tokens are unaffected.
            assert (
                client.get(f"{second.url}/confirm?limit=1", headers=auth(tokens.approver)).status_code == 200
            )
    finally:
        first.stop()
        second.stop()


def test_a_lookup_racing_a_revocation_is_not_cached(tmp_path: Path) -> None:
    db = str(tmp_path / "confirm.db")
    store = ConfirmationStore(db, ConfirmSettings(db=db))
    other = ConfirmationStore(db, ConfirmSettings(db=db))  # another daemon on the same database
    raw = store.create_token("agent", "temp")[1]
    store.check_tokens()
    assert store.authenticate(raw) is not None and store.cached_identity(raw) is not None
    other.revoke_token("temp")
    # The library call always asks the database.
    assert store.authenticate(raw) is None
    # The cache forgets it at the next check of the change counter (a serving daemon checks
    # every TOKEN_CHECK_SECONDS), and is not trusted at all once the last check is too old.
    store.check_tokens()
    assert store.cached_identity(raw) is None
    store.close()
    other.close()


# -- group commit: across daemons and across a crash -------------------------------------------
def _loop(url: str, agent: str, approver: str, until: float, acked: dict[str, str], n: int) -> None:
    """Submit then approve or deny until ``until``; record each acknowledged outcome."""
    with httpx.Client(base_url=url, timeout=10) as client:
        i = 0
        while time.monotonic() < until:
            i += 1
            try:
                r = client.post(
                    "/confirm",
                    json={"action": f"load_{n}", "description": f"{n}/{i}"},
                    headers=auth(agent),
                )
                if r.status_code != 202:
                    continue
                rid = r.json()["id"]
                verb = "approve" if i % 2 else "deny"
                # Until the decision is answered, either outcome may be stored.
                acked[rid] = "pending|" + ("approved" if verb == "approve" else "denied")
                d = client.post(f"/confirm/{rid}/{verb}", headers=auth(approver))
                if d.status_code == 200:
                    acked[rid] = d.json()["status"]
            except httpx.HTTPError:
                return  # the daemon is gone (killed): what was acknowledged is checked after


def _two_daemons_share_one_chain(db: str) -> None:
    store = ConfirmationStore(db, ConfirmSettings(db=db))
    tokens = make_tokens(store)
    env = {"KINDLING_CONFIRM_RATE_LIMIT": "100000", "KINDLING_CONFIRM_TOKEN_RATE_LIMIT": "100000"}
    first, second = DaemonProcess(db, env=env).launch(), DaemonProcess(db, env=env).launch()
    first.start()
    second.start()
    acked: dict[str, str] = {}
    try:
        until = time.monotonic() + 2.0
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            for n in range(8):
                url = (first if n % 2 else second).url
                pool.submit(
                    _loop, url, tokens.agent if n % 3 else tokens.agent2, tokens.approver, until, acked, n
                )
    finally:
        first.stop()
        second.stop()
    decided = [rid for rid, status in acked.items() if "|" not in status]
    assert len(decided) > 20
    report = store.verify_audit()
    # Both daemons wrote into one chain, in one order, with nothing missing.
    assert report.ok, report
    events = store.audit_events(limit=100_000)
    assert len({e.seq for e in events}) == len(events) == report.rows
    for rid, status in acked.items():
        assert store.get(rid).status in status.split("|")
    store.close()


def test_two_daemons_share_one_audit_chain_on_sqlite(tmp_path: Path) -> None:
    _two_daemons_share_one_chain(str(tmp_path / "confirm.db"))


@pytest.mark.postgres
def test_two_daemons_share_one_audit_chain_on_postgresql(pg_url: str) -> None:
    _two_daemons_share_one_chain(pg_url)


def test_kill_9_under_load_loses_nothing_acknowledged(tmp_path: Path) -> None:
    db = str(tmp_path / "confirm.db")
    store = ConfirmationStore(db, ConfirmSettings(db=db))
    tokens = make_tokens(store)
    env = {"KINDLING_CONFIRM_RATE_LIMIT": "100000", "KINDLING_CONFIRM_TOKEN_RATE_LIMIT": "100000"}
    daemon = DaemonProcess(db, env=env).start()
    acked: dict[str, str] = {}
    try:
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            until = time.monotonic() + 30
            runs = [
                pool.submit(_loop, daemon.url, tokens.agent, tokens.approver, until, acked, n)
                for n in range(8)
            ]
            deadline = time.monotonic() + 20
            while len(acked) < 40:  # well under way, many requests in flight
                assert time.monotonic() < deadline
                time.sleep(0.05)
            daemon.kill()
            for run in runs:
                run.result(timeout=20)
    finally:
        daemon.stop()
    assert daemon.proc is not None and daemon.proc.returncode == -9
    # Everything the daemon acknowledged (a 202, a decision) is in the database as acknowledged.
    assert sum("|" not in status for status in acked.values()) >= 20
    for rid, status in acked.items():
        assert store.get(rid).status in status.split("|"), rid
    assert store.verify_audit().ok
    store.close()


# -- long polls (issue 13 item 14) -----------------------------------------------------------
def _pending(client: httpx.Client, agent: str, n: int) -> list[str]:
    return [
        client.post("/confirm", json={"action": f"act_{i}", "description": "d"}, headers=auth(agent)).json()[
            "id"
        ]
        for i in range(n)
    ]


def test_a_decision_wakes_only_its_own_waiters(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = str(tmp_path / "confirm.db")
    store = ConfirmationStore(db, daemon_settings(db, poll_interval=30.0, max_waits_per_token=64))
    tokens = make_tokens(store)
    reads: list[str] = []
    real_get = store.get

    def counting_get(request_id: str) -> Confirmation:
        reads.append(request_id)
        return real_get(request_id)

    monkeypatch.setattr(store, "get", counting_get)
    with (
        running(store.settings, store) as server,
        httpx.Client(base_url=server.base_url, timeout=30) as client,
    ):
        idle = _pending(client, tokens.agent, 20)
        decided = _pending(client, tokens.agent, 10)
        with concurrent.futures.ThreadPoolExecutor(21) as pool:
            waits = [
                pool.submit(client.get, f"/confirm/{rid}", params={"wait": 20}, headers=auth(tokens.approver))
                for rid in idle
            ]
            watched = pool.submit(
                client.get, f"/confirm/{decided[0]}", params={"wait": 20}, headers=auth(tokens.approver)
            )
            deadline = time.monotonic() + 10
            while len(reads) < 21:  # every waiter has read its request once and waits
                assert time.monotonic() < deadline
                time.sleep(0.02)
            reads.clear()
            for rid in decided:
                assert (
                    client.post(f"/confirm/{rid}/approve", headers=auth(tokens.approver2)).status_code == 200
                )
            assert watched.result(timeout=10).json()["status"] == "approved"
            # Ten decisions: the idle waiters were not woken and read nothing.
            assert reads == [] and not any(w.done() for w in waits)
            for rid in idle:
                client.post(f"/confirm/{rid}/deny", headers=auth(tokens.approver2))
            assert {w.result(timeout=10).json()["status"] for w in waits} == {"denied"}
    store.close()


def test_a_client_that_leaves_frees_its_slot_at_once(tmp_path: Path) -> None:
    db = str(tmp_path / "confirm.db")
    store = ConfirmationStore(db, daemon_settings(db, max_waits_per_token=1))
    tokens = make_tokens(store)
    with (
        running(store.settings, store) as server,
        httpx.Client(base_url=server.base_url, timeout=30) as client,
    ):
        rid = _pending(client, tokens.agent, 1)[0]

        def wait(seconds: float) -> int:
            return client.get(
                f"/confirm/{rid}", params={"wait": seconds}, headers=auth(tokens.agent)
            ).status_code

        assert wait(0.2) == 200
        with socket.create_connection(("127.0.0.1", server.port)) as sock:
            sock.sendall(
                f"GET /confirm/{rid}?wait=30 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {tokens.agent}\r\n\r\n".encode()
            )
            time.sleep(0.3)  # (a probe sent before it arrived would take the one slot itself)
            # The slot is held: a second wait by the same token is refused.
            assert wait(0.01) == 429
        # The client hung up 30 s early: its slot is free again within moments, not 30 s.
        deadline = time.monotonic() + 3
        while (code := wait(0.01)) == 429:
            assert time.monotonic() < deadline, "the slot was still held"
            time.sleep(0.05)
        assert code == 200
    store.close()


def test_sigterm_does_not_wait_for_idle_long_polls(tmp_path: Path) -> None:
    db = str(tmp_path / "confirm.db")
    store = ConfirmationStore(db, ConfirmSettings(db=db))
    tokens = make_tokens(store)
    daemon = DaemonProcess(db).start()
    try:
        with (
            httpx.Client(base_url=daemon.url, timeout=90) as client,
            concurrent.futures.ThreadPoolExecutor(4) as pool,
        ):
            ids = _pending(client, tokens.agent, 4)
            waits = [
                pool.submit(client.get, f"/confirm/{rid}?wait=60", headers=auth(tokens.agent)) for rid in ids
            ]
            time.sleep(0.5)  # the waits are open
            assert not any(w.done() for w in waits)
            assert daemon.proc is not None
            stopped = time.monotonic()
            daemon.proc.terminate()
            daemon.proc.wait(20)
            # It stopped at once, and every waiter got an answer: still pending, ask again.
            assert time.monotonic() - stopped < 10
            assert {w.result(timeout=5).json()["status"] for w in waits} == {"pending"}
    finally:
        daemon.stop()
        store.close()


def test_a_decision_on_another_daemon_wakes_the_waiter(tmp_path: Path) -> None:
    db = str(tmp_path / "confirm.db")
    store = ConfirmationStore(db, ConfirmSettings(db=db))
    tokens = make_tokens(store)
    first, second = DaemonProcess(db).launch(), DaemonProcess(db).launch()
    first.start()
    second.start()
    try:
        with httpx.Client(timeout=30) as client, concurrent.futures.ThreadPoolExecutor(1) as pool:
            rid = client.post(
                f"{first.url}/confirm", json={"action": "a", "description": "d"}, headers=auth(tokens.agent)
            ).json()["id"]
            waiting = pool.submit(
                client.get, f"{second.url}/confirm/{rid}?wait=30", headers=auth(tokens.agent)
            )
            time.sleep(0.3)
            assert (
                client.post(f"{first.url}/confirm/{rid}/approve", headers=auth(tokens.approver)).status_code
                == 200
            )
            decided = time.monotonic()
            assert waiting.result(timeout=10).json()["status"] == "approved"
            assert time.monotonic() - decided < 5  # the watch runs every poll interval (1 s)
    finally:
        first.stop()
        second.stop()
        store.close()


def _two_stores_and_an_agent(tmp_path: Path) -> tuple[ConfirmationStore, ConfirmationStore, Identity]:
    """Two stores on one database (two daemons' worth) and an agent token's identity on the first."""
    db = str(tmp_path / "confirm.db")
    store = ConfirmationStore(db, ConfirmSettings(db=db))
    other = ConfirmationStore(db, ConfirmSettings(db=db))
    agent = store.authenticate(store.create_token("agent", "bot")[1])
    assert agent is not None
    return store, other, agent


def test_a_failed_write_is_undone_alone_and_ends_its_transaction(tmp_path: Path) -> None:
    store, other, agent = _two_stores_and_an_agent(tmp_path)
    barrier = threading.Barrier(9)
    failures: list[BaseException] = []

    def write(i: int) -> None:
        barrier.wait()
        try:
            if i % 3 == 0:
                with store._write() as conn:  # writes, then fails: undone, the others stay
                    conn.execute(sa.text("DELETE FROM confirm_tokens"))
                    raise ConfirmError("changed my mind")
            store.submit(action=f"a{i}", description="d", identity=agent)
        except ConfirmError as exc:
            failures.append(exc)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(9)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(failures) == 3
    assert store.counts()["pending"] == 6 and len(store.list_tokens()) == 1
    # The write lock is free for another process at once (a lone failed block still ends its
    # transaction), and the chain holds.
    other.create_token("agent", "bot2")
    assert store.verify_audit().ok
    store.close()
    other.close()


def test_writes_from_the_event_loop_share_commits_and_fail_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio

    from kindling.confirm.batching import GroupCommit

    store, other, agent = _two_stores_and_an_agent(tmp_path)
    commits = []
    real_commit = GroupCommit._commit

    def counted(self: GroupCommit[object]) -> None:
        commits.append(1)
        real_commit(self)

    monkeypatch.setattr(GroupCommit, "_commit", counted)

    def failing() -> None:
        with store._write() as conn:  # writes, then fails: undone alone
            conn.execute(sa.text("DELETE FROM confirm_tokens"))
            raise ConfirmError("changed my mind")

    async def main() -> list[object]:
        calls = [
            failing
            if i % 4 == 0
            else (lambda i=i: store.submit(action=f"a{i}", description="d", identity=agent))
            for i in range(20)
        ]
        return await asyncio.gather(*(store.writes.run(call) for call in calls), return_exceptions=True)

    results = asyncio.run(main())
    assert [isinstance(r, ConfirmError) for r in results] == [i % 4 == 0 for i in range(20)]
    assert store.counts()["pending"] == 15 and len(store.list_tokens()) == 1
    assert len(commits) < 10  # queued together, committed together
    # Each answer came after its commit: another process sees every request, the lock is free.
    assert other.counts()["pending"] == 15
    other.create_token("agent", "bot2")
    assert store.verify_audit().ok

    # A commit that fails fails every write it held, and only those; a write that raised keeps
    # its own error.
    def lost_commit(self: GroupCommit[object], number: int) -> None:
        raise StoreError("Cannot write database: disk I/O error", path=str(tmp_path / "confirm.db"))

    monkeypatch.setattr(GroupCommit, "_wait_for_commit", lost_commit)
    outcomes = store._group.run_together(
        [lambda: store.submit(action="late", description="d", identity=agent), failing]
    )
    assert outcomes[0][0] is False and isinstance(outcomes[0][1], StoreError)
    assert outcomes[1][0] is False and isinstance(outcomes[1][1], ConfirmError)
    monkeypatch.undo()
    store.close()
    other.close()


def _traced(store: ConfirmationStore) -> list[str]:
    """Every statement the store's SQLite connections run from now on, as SQLite ran them."""
    seen: list[str] = []

    def trace(dbapi_connection: object, _record: object) -> None:
        dbapi_connection.set_trace_callback(seen.append)  # type: ignore[attr-defined]

    sa.event.listen(store.engine, "connect", trace)
    store._group.close()  # the kept connection was opened before the listener
    store.engine.dispose()
    return seen


def test_a_batch_runs_without_savepoints_until_a_block_fails(tmp_path: Path) -> None:
    db = str(tmp_path / "confirm.db")
    store = ConfirmationStore(db, ConfirmSettings(db=db))
    agent = store.authenticate(store.create_token("agent", "bot")[1])
    approver = store.authenticate(store.create_token("approver", "alice")[1])
    assert agent is not None and approver is not None
    seen = _traced(store)

    def submit(i: int) -> object:
        return lambda: store.submit(action=f"a{i}", description="d", identity=agent)

    outcomes = store._group.run_together([submit(i) for i in range(6)])
    assert all(ok for ok, _ in outcomes)
    assert not [sql for sql in seen if "SAVEPOINT" in sql]
    assert sum(sql.startswith("INSERT INTO confirm_requests") for sql in seen) == 6
    assert sum(sql == "COMMIT" for sql in seen) == 1

    # A block that fails after writing: the run's writes are rolled back and its calls run again
    # under a savepoint each, so the failure is undone alone; the calls after it keep savepoints.
    ids = [out.request.id for _, out in outcomes]  # type: ignore[attr-defined]
    seen.clear()

    def failing() -> None:
        with store._write() as conn:
            conn.execute(sa.text("DELETE FROM confirm_tokens"))
            raise ConfirmError("changed my mind")

    def own() -> object:  # the asking agent deciding its own request: refused inside the block
        return store.decide(ids[1], "approved", identity=agent)

    calls = [
        submit(10),
        lambda: store.decide(ids[0], "approved", identity=approver),
        failing,
        submit(11),
        own,
        lambda: store.decide(ids[2], "denied", identity=approver),
    ]
    outcomes = store._group.run_together(calls)
    assert [ok for ok, _ in outcomes] == [True, True, False, True, False, True]
    assert str(outcomes[2][1]) == "changed my mind"
    assert isinstance(outcomes[4][1], ConfirmError) and outcomes[4][1].status_code == 403
    assert sum(sql == "ROLLBACK" for sql in seen) == 1
    assert sum(sql.startswith("SAVEPOINT") for sql in seen) == 6  # the replay: one a call
    assert sum(sql.startswith("ROLLBACK TO SAVEPOINT") for sql in seen) == 2
    assert len(store.list_tokens()) == 2
    assert [store.get(i).status for i in ids[:3]] == ["approved", "pending", "denied"]
    assert store.counts() == {**store.counts(), "pending": 6, "approved": 1, "denied": 1}
    report = store.verify_audit()
    assert report.ok and report.rows == 12  # 2 tokens, 8 submits, 2 decisions
    store.close()


def test_an_optimistic_run_joining_another_threads_transaction_undoes_only_its_own(tmp_path: Path) -> None:
    db = str(tmp_path / "confirm.db")
    store = ConfirmationStore(db, ConfirmSettings(db=db))
    agent = store.authenticate(store.create_token("agent", "bot")[1])
    assert agent is not None
    seen = _traced(store)
    in_block = threading.Event()
    go_on = threading.Event()

    def other_thread() -> None:  # opens the transaction and holds it until the run waits for it
        with store._write():
            store._audit(None, "token_revoked", None, "test", {"name": "nobody"})  # type: ignore[arg-type]
            in_block.set()
            go_on.wait(10)

    def failing() -> None:
        with store._write() as conn:
            conn.execute(sa.text("DELETE FROM confirm_tokens"))
            raise ConfirmError("changed my mind")

    first = threading.Thread(target=other_thread)
    first.start()
    assert in_block.wait(10)
    result: list[list[tuple[bool, object]]] = []
    run = threading.Thread(
        target=lambda: result.append(
            store._group.run_together(
                [lambda: store.submit(action="a", description="d", identity=agent), failing]
            )
        )
    )
    run.start()
    deadline = time.monotonic() + 10
    while not store._group._conn_lock._waiters:  # the run waits for the open transaction
        assert time.monotonic() < deadline
        time.sleep(0.001)
    go_on.set()
    first.join(10)
    run.join(10)
    assert [ok for ok, _ in result[0]] == [True, False]
    assert sum(sql == "SAVEPOINT kindling_run" for sql in seen) == 1
    assert sum(sql == "ROLLBACK TO SAVEPOINT kindling_run" for sql in seen) == 1
    assert "ROLLBACK" not in seen  # the other thread's write was not rolled back
    assert store.counts()["pending"] == 1 and len(store.list_tokens()) == 1
    assert [e.event for e in store.audit_events(limit=2)] == ["submitted", "token_revoked"]
    assert store.verify_audit().ok
    store.close()


def test_a_database_from_before_gets_the_fast_paths(tmp_path: Path) -> None:
    from kindling.confirm import tables
    from kindling.db import apply_migrations, create_engine

    db = str(tmp_path / "confirm.db")
    engine = create_engine(db)
    older = tables.MIGRATIONS[: tables.MIGRATIONS.index(tables.m005_fast_paths)]
    apply_migrations(engine, "confirm", older)
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO confirm_requests (id, action, description, details, digest, requester, requester_token, "
            "status, timeout_seconds, created_at, expires_at) VALUES "
            f"('cr_old', 'Restart-Worker', 'd', '{{}}', 'x', 'bot', 'tok_a', 'pending', 300, {time.time()}, "
            f"{time.time() + 300})"
        )
    engine.dispose()
    store = ConfirmationStore(db, ConfirmSettings(db=db, rate_limit=1))
    with store.engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT action_key FROM confirm_requests").scalar() == "restart_worker"
    # The old request counts against its agent's budget for the folded action.
    from kindling.confirm.policy import Identity

    outcome = store.submit(
        action="restart_worker", description="d", identity=Identity("tok_a", "bot", "agent")
    )
    assert outcome.kind == "rate_limited"
    store.close()


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The store's clock, set by the test: ``clock[0]`` is what ``time.time()`` returns."""
    from kindling.confirm import store as store_module

    now = [1_000_000.0]
    monkeypatch.setattr(store_module.time, "time", lambda: now[0])
    return now


def test_rate_limits_look_back_limit_places_in_the_window(tmp_path: Path, clock: list[float]) -> None:
    # A limit is one look-up of the request ``limit`` places back (issue 14): it must count exactly
    # what the window holds, let requests age out, and keep the two limits apart.
    from kindling.confirm.policy import Identity

    db = str(tmp_path / "confirm.db")
    store = ConfirmationStore(db, ConfirmSettings(db=db, rate_limit=3, token_rate_limit=5, rate_window=100))
    bot = Identity("tok_a", "bot", "agent")

    def submit(action: str) -> tuple[str, int, str]:
        outcome = store.submit(action=action, description="d", identity=bot)
        return outcome.kind, outcome.retry_after, outcome.limit

    for _ in range(3):
        assert submit("deploy")[0] == "pending"
        clock[0] += 10
    # Three in the window for the action: the first, made 30 s ago, ages out in 70 s.
    assert submit("Deploy") == ("rate_limited", 70, "action")
    assert submit("migrate")[0] == "pending"
    assert submit("migrate")[0] == "pending"
    # Five for the token in all: the token's limit now, whatever the action.
    assert submit("restart") == ("rate_limited", 70, "token")
    clock[0] += 71  # the first deploy has left the window: one more of each fits
    assert submit("deploy")[0] == "pending"
    assert submit("deploy") == ("rate_limited", 9, "action")  # the second ages out at 110
    store.close()


def test_a_database_from_before_numbers_its_requests(tmp_path: Path) -> None:
    from kindling.confirm import tables
    from kindling.confirm.policy import Identity
    from kindling.db import apply_migrations, create_engine

    db = str(tmp_path / "confirm.db")
    engine = create_engine(db)
    apply_migrations(
        engine, "confirm", tables.MIGRATIONS[: tables.MIGRATIONS.index(tables.m008_rate_sequences)]
    )
    now = time.time()
    with engine.begin() as conn:
        for n, (token, action) in enumerate(
            [("tok_a", "deploy"), ("tok_b", "deploy"), ("tok_a", "migrate"), ("tok_a", "deploy")]
        ):
            conn.exec_driver_sql(
                "INSERT INTO confirm_requests (id, action, description, details, digest, requester, "
                "requester_token, status, timeout_seconds, created_at, expires_at, action_key) VALUES "
                f"('cr_{n}', '{action}', 'd', '{{}}', 'x', 'bot', '{token}', 'pending', 300, {now - 50 + n}, "
                f"{now + 300}, '{action}')"
            )
    engine.dispose()
    store = ConfirmationStore(db, ConfirmSettings(db=db, rate_limit=2, token_rate_limit=100))
    with store.engine.connect() as conn:
        numbers = conn.exec_driver_sql(
            "SELECT id, token_seq, key_seq FROM confirm_requests ORDER BY id"
        ).all()
    assert [tuple(r) for r in numbers] == [("cr_0", 1, 1), ("cr_1", 1, 1), ("cr_2", 2, 1), ("cr_3", 3, 2)]
    # The old requests count against their agent's budgets.
    outcome = store.submit(action="deploy", description="d", identity=Identity("tok_a", "bot", "agent"))
    assert outcome.kind == "rate_limited" and outcome.limit == "action"
    outcome = store.submit(action="deploy", description="d", identity=Identity("tok_b", "bot2", "agent"))
    assert outcome.kind == "pending"
    with store.engine.connect() as conn:
        assert conn.exec_driver_sql(
            "SELECT token_seq, key_seq FROM confirm_requests WHERE id = :id", {"id": outcome.request.id}
        ).one() == (2, 2)
    store.close()


def _request_indexes(store: ConfirmationStore) -> set[str]:
    return {i["name"] for i in sa.inspect(store.engine).get_indexes("confirm_requests")}


def test_indexes_no_query_reads_are_gone(tmp_path: Path, pg_url: str) -> None:
    # Every submit writes each index of confirm_requests: the two only the old counting rate limits
    # read cost a page or two in every commit (issue 14). Dropped from old databases, never made anew.
    from kindling.confirm import tables
    from kindling.db import apply_migrations, create_engine

    unread = {
        "ix_confirm_requests_action_created",
        "ix_confirm_requests_token_key_created",
        "ix_confirm_requests_token_created",
    }
    db = str(tmp_path / "old.db")
    engine = create_engine(db)
    apply_migrations(
        engine, "confirm", tables.MIGRATIONS[: tables.MIGRATIONS.index(tables.m009_drop_unread_indexes)]
    )
    with engine.begin() as conn:
        # m001 builds the tables from today's metadata; an old database got this index from it.
        conn.exec_driver_sql(
            "CREATE INDEX ix_confirm_requests_action_created ON confirm_requests (action, created_at)"
        )
        before = {r[0] for r in conn.exec_driver_sql("SELECT name FROM sqlite_master WHERE type = 'index'")}
    engine.dispose()
    assert unread <= before
    for target in (db, str(tmp_path / "new.db"), pg_url):
        store = ConfirmationStore(target, ConfirmSettings(db=target))
        indexes = _request_indexes(store)
        assert not unread & indexes, target
        # What the rate limits, the sweeper and an agent's own list read is still there.
        assert {
            "ix_confirm_requests_status_expires",
            "ux_confirm_requests_token_seq",
            "ux_confirm_requests_key_seq",
        } <= indexes, target
        store.close()


def _old_idempotency_constraint(target: str) -> None:
    """Give a new database's requests table the unique constraint it had before m011 (and
    forget m011), as every database made before it has."""
    from kindling.confirm import tables
    from kindling.db import create_engine

    engine = create_engine(target)
    with engine.begin() as conn:
        conn.exec_driver_sql("DELETE FROM kindling_migrations WHERE name = 'm011_idempotency_index'")
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql("DROP INDEX ux_confirm_requests_idempotency")
            conn.exec_driver_sql(
                "ALTER TABLE confirm_requests ADD CONSTRAINT uq_confirm_idempotency "
                "UNIQUE (requester_token, idempotency_key)"
            )
        else:
            rows = [dict(r) for r in conn.execute(sa.select(tables.requests)).mappings()]
            conn.exec_driver_sql("DROP TABLE confirm_requests")
            old = tables.requests.to_metadata(sa.MetaData())
            old.append_constraint(
                sa.UniqueConstraint("requester_token", "idempotency_key", name="uq_confirm_idempotency")
            )
            old.create(conn)
            conn.exec_driver_sql("DROP INDEX ux_confirm_requests_idempotency")
            if rows:
                conn.execute(old.insert(), rows)
    engine.dispose()


def _idempotency_shape(store: ConfirmationStore) -> tuple[list[str], list[str]]:
    inspector = sa.inspect(store.engine)
    constraints = [c["name"] for c in inspector.get_unique_constraints("confirm_requests")]
    return constraints, [
        i["name"] for i in inspector.get_indexes("confirm_requests") if "idempotency" in i["name"]
    ]


def test_only_requests_with_an_idempotency_key_are_indexed_by_it(tmp_path: Path, pg_url: str) -> None:
    # A unique constraint on (token, key) put an index entry in for every request, most of which
    # have no key: a partial unique index does the same look-up for one entry fewer a submit
    # (issue 14). Old databases, SQLite (a rebuilt table) and PostgreSQL, keep every request.
    from kindling.confirm.policy import Identity

    bot = Identity("tok_a", "bot", "agent")
    for target in (str(tmp_path / "confirm.db"), pg_url):
        store = ConfirmationStore(target, ConfirmSettings(db=target))
        ids = [
            store.submit(action="deploy", description=f"d{n}", identity=bot, idempotency_key=key).request.id
            for n, key in enumerate([None, "k1", None, "k3"])
        ]
        store.close()
        _old_idempotency_constraint(target)
        store = ConfirmationStore(target, ConfirmSettings(db=target))
        assert _idempotency_shape(store) == ([], ["ux_confirm_requests_idempotency"]), target
        assert {r.id for r in store.list_requests(requester_token="tok_a")} == set(ids)
        # A retry with a key is the same request; a new request under a used key is refused.
        again = store.submit(action="deploy", description="d1", identity=bot, idempotency_key="k1")
        assert (again.kind, again.request.id) == ("duplicate", ids[1])
        with pytest.raises(ConfirmError) as refused:
            store.submit(action="deploy", description="other", identity=bot, idempotency_key="k3")
        assert refused.value.status_code == 422
        # The database itself refuses a second row with a token's key, and takes any number without.
        with store.engine.connect() as conn:
            row = (
                conn.execute(sa.text("SELECT * FROM confirm_requests WHERE id = :id"), {"id": ids[3]})
                .mappings()
                .one()
            )
            copy = {**row, "id": "cr_copy", "token_seq": 99, "key_seq": 99}
            insert = sa.insert(sa.table("confirm_requests", *map(sa.column, copy)))
            with pytest.raises(sa.exc.IntegrityError):
                conn.execute(insert, copy)
            conn.rollback()
            conn.execute(insert, {**copy, "idempotency_key": None})
            conn.execute(
                insert, {**copy, "id": "cr_copy2", "idempotency_key": None, "token_seq": 100, "key_seq": 100}
            )
            conn.commit()
            if "postgresql" not in target:
                plan = " ".join(
                    str(r[-1])
                    for r in conn.exec_driver_sql(
                        "EXPLAIN QUERY PLAN SELECT id FROM confirm_requests "
                        "WHERE requester_token = 'tok_a' AND idempotency_key = 'k1'"
                    )
                )
                assert "ux_confirm_requests_idempotency" in plan, plan
        store.close()


def test_a_retry_with_an_idempotency_key_returns_the_stored_request_whole(
    tmp_path: Path, pg_url: str
) -> None:
    # kindling's own client sends a key with every submit, so the look-up is read on the DBAPI
    # cursor (issue 14): what a retry returns is the request as stored, every field, before and
    # after its decision, on both databases.
    for target in (str(tmp_path / "confirm.db"), pg_url):
        store = ConfirmationStore(target, ConfirmSettings(db=target))
        agent = store.authenticate(store.create_token("agent", "bot")[1])
        approver = store.authenticate(store.create_token("approver", "human")[1])
        assert agent is not None and approver is not None
        asked = {
            "action": "deploy",
            "description": "ship it",
            "details": {"env": "prod", "n": [1, 2.5, None], "ok": True},
            "requester": "bot on host-1",
            "session_key": "s-1",
            "timeout_seconds": 120,
            "identity": agent,
            "idempotency_key": "retry-1",
        }
        first = store.submit(**asked)
        assert first.kind == "pending"
        again = store.submit(**asked)
        assert again.kind == "duplicate"
        assert again.request == first.request == store.get(first.request.id), target
        store.decide(first.request.id, "approved", identity=approver, reason="fine")
        decided = store.submit(**asked)
        assert decided.kind == "duplicate"
        assert decided.request == store.get(first.request.id), target
        assert decided.request.status == "approved" and decided.request.reason == "fine"
        # The same key from another token is another request.
        other = store.authenticate(store.create_token("agent", "bot2")[1])
        assert other is not None
        assert store.submit(**{**asked, "identity": other}).request.id != first.request.id
        store.close()


def test_a_failed_rebuild_of_the_requests_table_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # SQLite rebuilds the table to drop the constraint: a failure after the old table was dropped
    # must leave the old table, its rows and its migration record as they were.
    from kindling.confirm.policy import Identity

    db = str(tmp_path / "confirm.db")
    store = ConfirmationStore(db, ConfirmSettings(db=db))
    bot = Identity("tok_a", "bot", "agent")
    ids = {store.submit(action="deploy", description=f"d{n}", identity=bot).request.id for n in range(3)}
    store.close()
    _old_idempotency_constraint(db)

    def broken(self: sa.Index, bind: object, checkfirst: bool = False) -> None:
        raise sa.exc.OperationalError("CREATE INDEX", {}, sqlite3.OperationalError("disk I/O error"))

    monkeypatch.setattr(sa.Index, "create", broken)
    with pytest.raises(StoreError, match="disk I/O error"):
        ConfirmationStore(db, ConfirmSettings(db=db))
    monkeypatch.undo()
    with sqlite3.connect(db) as conn:
        assert (
            "uq_confirm_idempotency"
            in conn.execute("SELECT sql FROM sqlite_master WHERE name = 'confirm_requests'").fetchone()[0]
        )
        assert not conn.execute(
            "SELECT name FROM sqlite_master WHERE name = 'confirm_requests_new'"
        ).fetchall()
        assert {r[0] for r in conn.execute("SELECT id FROM confirm_requests")} == ids
    store = ConfirmationStore(db, ConfirmSettings(db=db))
    assert _idempotency_shape(store) == ([], ["ux_confirm_requests_idempotency"])
    assert {r.id for r in store.list_requests(requester_token="tok_a")} == ids
    store.close()


def test_an_agents_list_is_newest_first_through_the_rate_limits_index(
    tmp_path: Path, clock: list[float]
) -> None:
    # No index by (token, created_at) any more: one token's requests are listed in the order they
    # were numbered, which is commit order even when a clock steps back between two submits.
    from kindling.confirm.policy import Identity

    db = str(tmp_path / "confirm.db")
    store = ConfirmationStore(db, ConfirmSettings(db=db))
    bot, other = Identity("tok_a", "bot", "agent"), Identity("tok_b", "bot2", "agent")
    ids = []
    for step in (0, 10, -5, 1):  # the third submit's clock is behind the second's
        clock[0] += step
        ids.append(store.submit(action="deploy", description="d", identity=bot).request.id)
        store.submit(action="deploy", description="d", identity=other)
    assert [r.id for r in store.list_requests(requester_token="tok_a")] == ids[::-1]
    assert [r.id for r in store.list_requests(requester_token="tok_a", newest_first=False, limit=2)] == ids[
        :2
    ]
    assert [r.id for r in store.list_requests(requester_token="tok_a", status="pending", limit=1)] == ids[-1:]
    with store.engine.connect() as conn:
        plan = " ".join(
            str(row[-1])
            for row in conn.exec_driver_sql(
                "EXPLAIN QUERY PLAN SELECT id FROM confirm_requests WHERE requester_token = 'tok_a' "
                "ORDER BY token_seq DESC LIMIT 50"
            )
        )
    assert "ux_confirm_requests_token_seq" in plan and "TEMP B-TREE" not in plan, plan
    store.close()


# -- the C HTTP parser and the libuv loop (issue 14) -----------------------------------------------
def test_daemons_run_on_httptools_and_uvloop_when_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from kindling import serving

    config = serving.server_config(object(), "127.0.0.1", 0, "warning")
    assert (config.http, config.loop) == ("httptools", "uvloop")
    # Without them (uvloop has no Windows build) uvicorn's pure-Python parser and asyncio serve.
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name in ("httptools", "uvloop") else real(name, *a),
    )
    config = serving.server_config(object(), "127.0.0.1", 0, "warning")
    assert (config.http, config.loop) == ("h11", "asyncio")


# -- submit, approve and deny skip the framework's routing -----------------------------------------
def test_the_edge_answers_exactly_as_the_routes_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio
    from collections.abc import AsyncIterator

    from kindling.confirm.app import create_app
    from kindling.confirm.calls import EdgeRoutes
    from kindling.confirm.routes import confirmations
    from kindling.confirm.routes.confirmations import approve_call, deny_call, router, submit_call

    through_routes: list[object] = []
    real_route = confirmations.answer_route

    async def counted_route(request: object, answer: object, **params: object) -> object:
        through_routes.append(answer)
        return await real_route(request, answer, **params)  # type: ignore[arg-type]

    monkeypatch.setattr(confirmations, "answer_route", counted_route)

    # The edge's routes are the router's: the same templates, matched as the router matches them.
    edge_routes = EdgeRoutes(router.routes)
    assert sorted(edge_routes.templates()) == [
        "/confirm",
        "/confirm/{request_id}/approve",
        "/confirm/{request_id}/deny",
    ]
    assert edge_routes.find("/confirm") == ("/confirm", submit_call, {})
    assert edge_routes.find("/confirm/cr_1/deny") == (
        "/confirm/{request_id}/deny",
        deny_call,
        {"request_id": "cr_1"},
    )
    assert edge_routes.find("/confirm/cr_1/approve")[1] is approve_call  # type: ignore[index]
    for other in ("/confirm/", "/confirm//approve", "/confirm/cr_1/approve/", "/confirm/cr_1", "/audit"):
        assert edge_routes.find(other) is None, other
    # Whatever the path, the edge finds a route exactly when the router's own pattern matches it.
    marked = [
        r for r in router.routes if getattr(r, "path", "") in edge_routes.templates() and "POST" in r.methods
    ]
    for path in (
        "/confirm",
        "/confirm/x/approve",
        "/confirm/x/deny",
        "/confirm/x/y/approve",
        "//x/approve",
        "/confirm/x/approvE",
        "/Confirm/x/deny",
        "/confirm/ü:%20/deny",
        "/confirm/x/deny/",
        "confirm/x/deny",
        "/confirm/x//deny",
        "/confirm/ /approve",
        "/",
        "",
        "/confirm/x/approve?x=1",
    ):
        routed = next((r for r in marked if r.path_regex.match(path)), None)
        answered = edge_routes.find(path)
        assert (answered is None) == (routed is None), path
        if answered is not None and routed is not None:
            assert answered.template == routed.path
            assert answered.params == routed.path_regex.match(path).groupdict()

    async def streamed(chunks: int) -> AsyncIterator[bytes]:  # no Content-Length: chunked
        for _ in range(chunks):
            yield b'{"a":"' + b"x" * 2000

    async def exchange(name: str, hot: bool) -> list[tuple[int, object, str]]:
        # Each on a database of its own (the rate limit counts what came before), the same calls.
        db = str(tmp_path / f"{name}.db")
        store = ConfirmationStore(db, daemon_settings(db, max_body_bytes=4096, rate_limit=2))
        tokens = make_tokens(store)
        app = create_app(store.settings, store, background=False)
        # Mounted under a prefix, the app answers through its routes (the framework); else at its edge.
        prefix = "" if hot else "/mounted"
        transport = httpx.ASGITransport(app=app, root_path=prefix)  # type: ignore[arg-type]
        answers: list[tuple[int, object, str]] = []
        async with httpx.AsyncClient(transport=transport, base_url="http://test" + prefix) as client:

            async def call(path: str, token: str | None, **kw: object) -> dict[str, object]:
                headers = {**(auth(token) if token else {}), **kw.pop("headers", {})}  # type: ignore[dict-item]
                r = await client.post(path, headers=headers, **kw)  # type: ignore[arg-type]
                # The same bytes, but for the new requests' ids and the times: the headers in their
                # order, the body's keys in theirs.
                text = re.sub(r"cr_[0-9a-f]{32}", "cr_X", r.text)
                text = re.sub(r"[0-9]{10}\.[0-9]+", "T", text)
                head = [(k, v) for k, v in r.headers.raw if k.lower() != b"content-length"]
                answers.append((r.status_code, head, text))
                return r.json()  # type: ignore[no-any-return]

            await call("/confirm", None, json={"action": "a", "description": "d"})
            await call("/confirm", "kct_unknown", json={"action": "a", "description": "d"})
            await call("/confirm", tokens.approver, json={"action": "a", "description": "d"})
            await call(
                "/confirm", tokens.agent, content=b"{not json", headers={"content-type": "application/json"}
            )
            await call("/confirm", tokens.agent, content=b"[1]")
            await call("/confirm", tokens.agent, json={"action": "a"})
            await call("/confirm", None, content=b"x" * 5000)  # past the limit: 413 before the token
            await call("/confirm", None, content=streamed(3))  # no length: the token first
            await call("/confirm", tokens.agent, content=streamed(3))  # then 413 as it grows
            made = await call("/confirm", tokens.agent, json={"action": "deploy_x", "description": "d"})
            key = {"Idempotency-Key": "k1"}
            await call("/confirm", tokens.agent, json={"action": "b", "description": "d"}, headers=key)
            await call("/confirm", tokens.agent, json={"action": "b", "description": "d"}, headers=key)
            await call("/confirm", tokens.agent, json={"action": "b", "description": "e"}, headers=key)
            await call(
                "/confirm",
                tokens.agent,
                json={"action": "b", "description": "d"},
                headers={"Idempotency-Key": "k" * 201},
            )
            await call("/confirm", tokens.agent, json={"action": "b", "description": "f"})
            await call("/confirm", tokens.agent, json={"action": "b", "description": "g"})  # 429
            await call(f"/confirm/{made['id']}/approve", tokens.agent, json={})  # an agent never decides
            await call("/confirm/cr_unknown/deny", tokens.approver, json={})
            await call(f"/confirm/{made['id']}/approve", tokens.approver, json={"digest": "0" * 64})
            await call(f"/confirm/{made['id']}/deny", tokens.approver, content=b"[]")
            await call(f"/confirm/{made['id']}/approve", tokens.approver, json={"reason": "ok"})
            await call(f"/confirm/{made['id']}/deny", tokens.approver, json={})
            again = await call("/confirm", tokens.agent2, json={"action": "c", "description": "d"})
            await call(f"/confirm/{again['id']}/deny", tokens.approver, content=b"")
        store.close()
        return answers

    through_app = asyncio.run(exchange("app", hot=False))
    routed = len(through_routes)
    assert asyncio.run(exchange("hot", hot=True)) == through_app
    assert routed >= 20 and len(through_routes) == routed, "the routes answered the first run only"
    statuses = [status for status, _, _ in through_app]
    assert statuses[:16] == [401, 401, 403, 400, 400, 400, 413, 401, 413, 202, 202, 202, 422, 400, 202, 429]
    assert statuses[16:] == [403, 404, 412, 400, 200, 409, 202, 200]
    assert (b"www-authenticate", b"Bearer") in through_app[0][1]
    assert (b"retry-after", b"3600") in through_app[15][1]


def test_answers_are_encoded_byte_for_byte_as_before() -> None:
    from fastapi.responses import JSONResponse

    from kindling.confirm.routes.confirmations import JSONAnswer

    values: list[object] = [
        {"a": 1, "t": 1763852222.123456, "f": [0.0, -0.0, 1e-4, 1.5e15, 1e16, 123.25]},
        {"small": 1e-05, "tiny": [5e-324], "neg": -0.00001234},
        {"big": 2**70, "neg_big": -(2**64)},
        {"text": 'é \u2028 \x00\x1f \\ " \U0001f600', "nested": [{"k": None, "b": True}]},
        {"nan": float("nan")},
        {"inf": [float("inf")]},
        {1: "int key"},
        {"lone": "\ud800"},
    ]
    for value in values:
        try:
            expected: object = JSONResponse(value).body
        except Exception as exc:  # the same error, then
            expected = type(exc)
        try:
            got: object = JSONAnswer(value).body
        except Exception as exc:
            got = type(exc)
        assert got == expected, value


_JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.floats(min_value=-1e-3, max_value=1e-3)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4)
        | st.tuples(children, children)
        | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=20,
)


def _standard(value: object) -> object:
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except Exception as exc:  # the same error, then
        return type(exc)


def _canonical(value: object) -> object:
    from kindling.confirm.policy import canonical_json

    try:
        return canonical_json(value)
    except Exception as exc:
        return type(exc)


@settings(max_examples=600, deadline=None)
@given(_JSON_VALUES)
def test_canonical_json_is_the_standard_encoders_text(value: object) -> None:
    # Every audit row's hash and every request's digest hashes this text: a daemon of any version
    # must write exactly what the standard encoder writes, or old chains stop verifying (issue 14
    # has orjson write it where it agrees).
    assert _canonical(value) == _standard(value)


@dataclasses.dataclass
class _Point:
    x: int


class _Colour(enum.IntEnum):
    RED = 1


class _Name(str):
    pass


@pytest.mark.parametrize(
    "value",
    [
        {"lone": "\ud800", "pair": "\U0001f600"},
        {"b": 1, "a": {"é": 1, "Z": 2, "\uffff": 3, "\U0001f600": 4}},
        {1: "int key"},
        {"nan": float("nan"), "inf": [float("-inf")]},
        [1e16, 1.5e15, 1e-4, 9.99e-5, 5e-324, -0.0, 0.0],
        {"text": '\u2028 \x00\x1f\x7f \\ " \t\n'},
        _Point(1),
        {"p": _Point(1)},
        [_Colour.RED],
        {_Name("k"): _Name("v")},
    ],
)
def test_canonical_json_agrees_on_what_orjson_writes_otherwise(value: object) -> None:
    assert _canonical(value) == _standard(value)


def test_a_response_head_goes_out_with_its_body_in_one_write() -> None:
    import asyncio

    from kindling.serving import _JoinedWrites

    class Transport:
        def __init__(self) -> None:
            self.writes: list[bytes] = []

        def write(self, data: bytes) -> None:
            self.writes.append(data)

        def is_closing(self) -> bool:
            return False

        def get_extra_info(self, name: str) -> str:
            return name

    class Cycle:
        response_started = False

    async def main() -> None:
        # A 100-continue goes at once; the head waits for the body and leaves with it.
        transport, cycle = Transport(), Cycle()
        joined = _JoinedWrites(transport, cycle)  # type: ignore[arg-type]
        joined.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        cycle.response_started = True
        joined.write(b"HEAD")
        assert transport.writes == [b"HTTP/1.1 100 Continue\r\n\r\n"]
        joined.write(b"body")
        joined.write(b"more")
        assert transport.writes[1:] == [b"HEADbody", b"more"]
        assert joined.get_extra_info("peername") == "peername"
        # A head whose body is not written in the same turn of the loop (a HEAD request, a
        # stream still waiting for its first chunk) is not held past that turn.
        transport, cycle = Transport(), Cycle()
        joined = _JoinedWrites(transport, cycle)  # type: ignore[arg-type]
        cycle.response_started = True
        joined.write(b"HEAD")
        assert transport.writes == []
        await asyncio.sleep(0)
        assert transport.writes == [b"HEAD"]
        joined.write(b"chunk")
        assert transport.writes == [b"HEAD", b"chunk"]

    asyncio.run(main())


def test_a_served_request_leaves_no_garbage_for_the_collector(tmp_path: Path) -> None:
    # Each answered request's objects go with reference counting: a loop among them (the response
    # cycle and the transport that joins its writes held each other) left every request's cycle,
    # scope and events to the collector, which then ran more often and for longer, on the event
    # loop, in the middle of other requests.
    import gc

    from uvicorn.protocols.http.httptools_impl import RequestResponseCycle

    from kindling.serving import _DirectCycle

    db = str(tmp_path / "confirm.db")
    store = ConfirmationStore(db, daemon_settings(db, rate_limit=1000, token_rate_limit=1000))
    tokens = make_tokens(store)
    with running(store.settings, store) as server, httpx.Client(base_url=server.base_url) as client:
        assert client.get("/health").status_code == 200
        gc.collect()
        gc.disable()
        try:
            for _ in range(40):
                made = client.post(
                    "/confirm", headers=auth(tokens.agent), json={"action": "a", "description": "d"}
                )
                assert made.status_code == 202
                decided = client.post(f"/confirm/{made.json()['id']}/deny", headers=auth(tokens.approver))
                assert decided.status_code == 200
                assert client.get("/health").status_code == 200
            # The connection's protocol keeps its last request's cycle; nothing else is left.
            # (Submit and deny are answered on the connection, without an ASGI cycle.)
            left = sum(isinstance(o, RequestResponseCycle | _DirectCycle) for o in gc.get_objects())
        finally:
            gc.enable()
    assert left <= 2, left
    store.close()


def _store_and_agent(db: Path) -> tuple[ConfirmationStore, Identity]:
    store = ConfirmationStore(str(db), daemon_settings(str(db), rate_limit=1000, token_rate_limit=1000))
    agent = store.authenticate(make_tokens(store).agent)
    assert agent is not None
    return store, agent


def _submit_together(store: ConfirmationStore, agent: Identity, n: int) -> None:
    """Submit ``n`` requests from the event loop at once, through the store's writer thread."""
    import asyncio

    async def submit() -> None:
        calls = [
            functools.partial(store.submit, action="act", description=f"d{i}", identity=agent)
            for i in range(n)
        ]
        await asyncio.gather(*(store.writes.run(call) for call in calls))

    asyncio.run(submit())


def test_the_writer_checkpoints_the_wal_between_batches(tmp_path: Path) -> None:
    # SQLite copies the WAL into the database file in the commit that takes the WAL past 1,000
    # pages, and every request of that batch waited for it; the writer does it when it has
    # nothing to write instead. Seen from outside: the database file holds the new requests
    # long before the WAL reaches 1,000 pages (the writer's connection, kept open, would not
    # checkpoint on close either).
    import sqlite3

    db = tmp_path / "confirm.db"
    store, agent = _store_and_agent(db)

    def in_file() -> int:
        # The database file alone, without its WAL: a copy of it opened on its own.
        copy = tmp_path / "copy.db"
        copy.write_bytes(db.read_bytes())
        with sqlite3.connect(copy) as conn:
            try:
                return int(conn.execute("SELECT count(*) FROM confirm_requests").fetchone()[0])
            except sqlite3.DatabaseError:  # not even the tables yet (or a copy taken mid-write)
                return 0

    _submit_together(store, agent, 250)  # past the 200 writes it waits for, some 750 pages
    deadline = time.monotonic() + 10
    while in_file() < 250 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert in_file() == 250
    assert store.verify_audit().ok
    store.close()


def test_request_ids_start_with_their_creation_time(tmp_path: Path) -> None:
    # cr_ and 32 hex digits as before; the first 11 are the millisecond the request was made, so
    # ids sort by creation (within a millisecond by chance); the other 21 are random.
    store, agent = _store_and_agent(tmp_path / "confirm.db")
    made = []
    for i in range(40):
        outcome = store.submit(action="act", description=f"d{i}", identity=agent)
        assert outcome.request is not None
        made.append(outcome.request)
        time.sleep(0.001 if i % 4 == 0 else 0)
    ids = [r.id for r in made]
    assert all(re.fullmatch(r"cr_[0-9a-f]{32}", i) for i in ids)
    assert len(set(ids)) == len(ids)
    assert [int(i[3:14], 16) for i in ids] == [int(r.created_at * 1000) for r in made]
    assert [i[3:14] for i in ids] == sorted(i[3:14] for i in ids)
    assert len({i[14:] for i in ids}) == len(ids)
    store.close()


def test_a_batch_into_a_large_table_writes_few_index_pages(tmp_path: Path) -> None:
    # Why ids start with their time: a batch of new requests writes its primary-key entries to
    # the same few index pages, where random ids gave each request a page of its own, in the WAL
    # of every commit and again in every checkpoint. 20,000 earlier requests (with random ids, as
    # before) make an index of some 300 pages; 100 new ones written together then put fewer pages
    # in the WAL than they are requests (45-49 here; random ids: 127-136).
    import secrets
    import sqlite3

    db = tmp_path / "confirm.db"
    store, agent = _store_and_agent(db)
    with sqlite3.connect(db) as conn:
        conn.executemany(
            "INSERT INTO confirm_requests (id, action, description, details, digest, requester, "
            "requester_token, status, timeout_seconds, created_at, expires_at) "
            "VALUES (?, 'old', 'old', '{}', 'x', 'old', 'old-token', 'approved', 60, 1.0, 61.0)",
            [("cr_" + secrets.token_hex(16),) for _ in range(20_000)],
        )
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    _submit_together(store, agent, 100)
    with sqlite3.connect(db) as conn:
        _busy, frames, _copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    assert 0 < frames < 100
    assert len(store.list_requests(requester_token=agent.token_id, limit=200)) == 100
    store.close()


def test_a_kept_connection_the_server_ended_is_replaced(pg_url: str) -> None:
    store = ConfirmationStore(pg_url, ConfirmSettings(db=pg_url))
    agent = store.authenticate(store.create_token("agent", "bot")[1])
    assert agent is not None
    kept = store._group._idle
    assert kept is not None  # the writers kept their connection after the commit
    pid = kept.connection.driver_connection.info.backend_pid  # type: ignore[union-attr]
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    # The next write begins on a new connection instead of failing.
    store.submit(action="a", description="d", identity=agent)
    assert store.counts()["pending"] == 1 and store.verify_audit().ok
    store.close()


@pytest.mark.parametrize("returning", [True, False])
def test_a_decision_in_one_statement_refuses_as_the_two_did(tmp_path: Path, returning: bool) -> None:
    # UPDATE ... RETURNING decides the common case; whatever it leaves out is told apart as before
    # (and on a SQLite without RETURNING the two statements run): the same answers either way.
    db = str(tmp_path / "confirm.db")
    store = ConfirmationStore(db, ConfirmSettings(db=db, min_timeout=1))
    store._returning = returning
    admin = store.authenticate(store.create_token("admin", "root")[1])
    assert admin is not None
    agent = store.authenticate(store.create_token("agent", "bot", minted_by=admin.token_id)[1])
    approver = store.authenticate(store.create_token("approver", "alice")[1])
    assert agent is not None and approver is not None
    seen = _traced(store)

    def submit(timeout: int = 300) -> Confirmation:
        out = store.submit(action="act", description="d", identity=agent, timeout_seconds=timeout)
        assert out.request is not None
        return out.request

    def refused(request_id: str, who: object, **kw: object) -> int:
        try:
            store.decide(request_id, "approved", identity=who, **kw)  # type: ignore[arg-type]
        except ConfirmError as exc:
            return exc.status_code
        except NotFoundError:
            return 404
        return 200

    first = submit()
    seen.clear()
    decided = store.decide(first.id, "approved", identity=approver, reason="ok", digest=first.digest)
    assert (decided.status, decided.decided_by, decided.reason) == ("approved", "alice", "ok")
    assert dataclasses.replace(decided, status="pending", decided_at=None, decided_by=None, reason=None) == (
        dataclasses.replace(first, details=first.details)
    )
    decisions = [sql for sql in seen if "confirm_requests" in sql]
    assert len(decisions) == (1 if returning else 2)
    assert decisions[-1].startswith("UPDATE")
    assert store.get(first.id) == decided
    assert refused(first.id, approver) == 409
    pending = submit()
    assert refused(pending.id, agent) == 403  # the asking agent can never approve
    assert refused(pending.id, admin) == 403  # it minted the asking agent: undone, still pending
    assert refused(pending.id, approver, digest="0" * 64) == 412
    assert refused("cr_nope", approver) == 404
    assert store.get(pending.id).status == "pending"
    late = submit(timeout=1)
    time.sleep(1.05)
    assert refused(late.id, approver) == 409
    assert store.get(late.id).status == "expired"
    events = [e.event for e in reversed(store.audit_events(limit=20))]
    assert events[-5:] == ["submitted", "approved", "submitted", "submitted", "expired"]
    assert store.verify_audit().ok
    store.close()


@settings(max_examples=400, deadline=None)
@given(st.text(), st.text(), _JSON_VALUES)
def test_a_digest_put_together_around_the_stored_details_is_the_same(
    action: str, description: str, details: object
) -> None:
    # A submit hashes the details' text it stores instead of writing them again: the same digest,
    # or the same error, as hashing the whole value.
    from kindling.confirm.policy import canonical_json, request_digest

    def digest(*args: object) -> object:
        try:
            return request_digest(*args)  # type: ignore[arg-type]
        except Exception as exc:
            return type(exc)

    whole = digest(action, description, details)
    try:
        stored = canonical_json(details)
    except Exception as exc:
        assert whole is type(exc)
        return
    assert digest(action, description, details, stored) == whole


@settings(max_examples=300, deadline=None)
@given(
    st.integers(min_value=1, max_value=2**62),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(),
    st.none() | st.text(),
    st.none() | st.text(),
    st.text(),
)
def test_an_audit_rows_hash_is_the_standard_encoders(
    seq: int, at: float, event: str, request_id: str | None, actor: str | None, data: str
) -> None:
    # Written by orjson without the check for what it might write otherwise (integers and strings
    # only; a lone surrogate falls back): every chain ever written still verifies.
    import hashlib

    from kindling.confirm.policy import audit_hash

    body = json.dumps(
        [seq, repr(float(at)), event, request_id, actor, data],
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    prev = "0" * 64
    expected = hashlib.sha256(f"{prev}\n{body}".encode("utf-8", "surrogatepass")).hexdigest()
    try:
        got = audit_hash(prev, seq, at, event, request_id, actor, data)
    except UnicodeEncodeError:  # a lone surrogate cannot be stored as UTF-8 by either
        assert any("\ud800" <= c <= "\udfff" for c in body)
        return
    assert got == expected


def test_a_staged_write_hands_its_result_over_before_its_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio

    from kindling.confirm.batching import GroupCommit

    store, other, agent = _two_stores_and_an_agent(tmp_path)
    syncing = threading.Event()
    release = threading.Event()

    def held_commit(_conn: object) -> None:  # the commit waits here, as for a slow disk
        syncing.set()
        assert release.wait(30)

    sa.event.listen(store.engine, "commit", held_commit)

    def submit(action: str) -> object:
        return store.submit(action=action, description="d", identity=agent)

    async def main() -> None:
        outcome, committed = await store.writes.run_staged(lambda: submit("staged"))
        # The result is here while its commit is still held: the loop can prepare the answer. (The
        # writer hands the result over before it starts the commit: on a loaded machine the loop
        # may run first, so the commit's start is waited for, not assumed.)
        assert not committed.done()
        assert await asyncio.to_thread(syncing.wait, 30)
        assert not committed.done()
        assert outcome.request is not None and outcome.request.action == "staged"
        assert other.counts()["pending"] == 0  # not stored yet: nothing may be answered
        release.set()
        await committed
        assert other.counts()["pending"] == 1
        # A write that raises raises once its batch's commit is done, as run() raises it.
        with pytest.raises(NotFoundError):
            await store.writes.run_staged(lambda: store.decide("cr_none", "approved", identity=agent))

    asyncio.run(main())
    sa.event.remove(store.engine, "commit", held_commit)

    # A commit that fails after the result was handed over fails the future the answer waits for.
    def lost_commit(self: GroupCommit[object], number: int) -> None:
        raise StoreError("Cannot write database: disk I/O error", path=str(tmp_path / "confirm.db"))

    monkeypatch.setattr(GroupCommit, "_wait_for_commit", lost_commit)

    async def lost() -> None:
        outcome, committed = await store.writes.run_staged(lambda: submit("lost"))
        assert outcome.request is not None
        with pytest.raises(StoreError):
            await committed

    asyncio.run(lost())
    monkeypatch.undo()
    store.close()
    other.close()
