"""Notifications: an Apprise JSON webhook on loopback receives them; a refused one is retried and recorded."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from kindling.confirm.notify import send_notification
from kindling.confirm.store import ConfirmationStore
from test_confirm_support import auth, daemon_settings, free_port, make_tokens, running


class Hook:
    """A JSON webhook receiver on loopback that records every body it gets."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        received = self.bodies

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                received.append(json.loads(self.rfile.read(length)))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)


@pytest.fixture
def hook() -> Iterator[Hook]:
    h = Hook()
    h.thread.start()
    yield h
    h.server.shutdown()
    h.server.server_close()


def _until(predicate: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def test_outbox_delivers_and_retries_without_blocking(tmp_path: Path, hook: Hook) -> None:
    good = f"json://127.0.0.1:{hook.port}/hook"
    refused = f"json://127.0.0.1:{free_port()}/nobody-listens"
    db = str(tmp_path / "confirm.db")
    settings = daemon_settings(
        db, notify_urls=(good, refused), notify_max_attempts=3, notify_retry_seconds=0.1
    )
    store = ConfirmationStore(db, settings)
    tokens = make_tokens(store)
    with running(settings, store) as server, httpx.Client(base_url=server.base_url) as client:
        started = time.monotonic()
        r = client.post(
            "/confirm",
            json={"action": "wipe_database", "description": "Drop staging"},
            headers=auth(tokens.agent),
        )
        assert r.status_code == 202 and time.monotonic() - started < 2
        rid = r.json()["id"]
        _until(lambda: len(hook.bodies) == 1)
        assert "wipe_database" in hook.bodies[0]["title"]
        assert "Drop staging" in hook.bodies[0]["message"] and rid in hook.bodies[0]["message"]
        assert f"{server.base_url}/ui#req-{rid}" in hook.bodies[0]["message"]
        _until(lambda: any(row["status"] == "dead" for row in store.outbox()))
        rows = {row["url"].split("/")[2]: row for row in store.outbox()}
        sent = rows[f"127.0.0.1:{hook.port}"]
        dead = next(row for row in rows.values() if row is not sent)
        assert sent["status"] == "sent" and sent["attempts"] == 1
        assert dead["attempts"] == 3 and dead["last_error"]
        # Redacted: the path (where tokens live in chat URLs) never reaches the audit log.
        events = store.audit_events(request_id=rid)
        failed = [e for e in reversed(events) if e.event == "notification_failed"]
        assert [e.data["will_retry"] for e in failed] == [True, True, False]
        assert all("nobody-listens" not in json.dumps(e.data) for e in events)
        assert [e.event for e in events].count("notification_sent") == 1
        # The request itself was never held up and still works.
        assert client.post(f"/confirm/{rid}/approve", headers=auth(tokens.approver)).status_code == 200
    assert len(hook.bodies) == 1
    assert store.verify_audit().ok


def test_send_notification_reports_errors() -> None:
    assert send_notification("not a url", "t", "b") is not None
    error = send_notification(f"json://127.0.0.1:{free_port()}/x", "t", "b")
    assert error


def test_send_notification_success(hook: Hook) -> None:
    assert send_notification(f"json://127.0.0.1:{hook.port}/", "title", "body") is None
    assert hook.bodies[0]["title"] == "title"


class Hang:
    """A loopback target that accepts a notification and answers nothing until ``release``."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.got = threading.Event()
        hold = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                hold.got.set()
                hold.release.wait(30)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


def test_a_hanging_target_delays_no_other(tmp_path: Path, hook: Hook) -> None:
    hang = Hang()
    # The hanging target first: sent one after the other, the good one waited for its timeout.
    slow = f"json://127.0.0.1:{hang.port}/hangs"
    good = f"json://127.0.0.1:{hook.port}/hook"
    db = str(tmp_path / "confirm.db")
    settings = daemon_settings(db, notify_urls=(slow, good))
    store = ConfirmationStore(db, settings)
    tokens = make_tokens(store)
    try:
        with running(settings, store) as server, httpx.Client(base_url=server.base_url) as client:
            r = client.post(
                "/confirm", json={"action": "deploy", "description": "d"}, headers=auth(tokens.agent)
            )
            assert r.status_code == 202
            _until(lambda: len(hook.bodies) == 1)
            # The good target got its notification while the hanging one was still held open. The two
            # are sent side by side, so the hanging one may be reached a moment after the good one.
            _until(hang.got.is_set)
            assert not hang.release.is_set()
            slow_row = next(row for row in store.outbox() if f":{hang.port}" in row["url"])
            assert slow_row["attempts"] == 0 and slow_row["status"] == "pending"
            _until(lambda: any(row["status"] == "sent" for row in store.outbox()))
            hang.release.set()
    finally:
        hang.close()
        store.close()
