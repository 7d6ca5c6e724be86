"""Submit, approve and deny answered on the connection itself (``kindling.serving._direct``): the same
bytes as through the ASGI app, on the same connection semantics (keep-alive, pipelining, a closing
request, a body in pieces, a client that leaves, a 500)."""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvicorn

from kindling import serving
from kindling.confirm.app import create_app
from kindling.confirm.calls import AnswerFunction, Found
from kindling.confirm.routes import confirmations
from kindling.confirm.store import ConfirmationStore
from kindling.serving import direct_supported, server_config, start_in_thread
from test_confirm_support import Tokens, daemon_settings, make_tokens

LIMIT = 200_000  # past uvicorn's 64 KiB high-water mark, so a large body pauses reading


class Raw:
    """A keep-alive connection that writes raw bytes and reads Content-Length answers."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.buf = b""

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def answer(self) -> bytes:
        while b"\r\n\r\n" not in self.buf:
            self._more()
        head, _, rest = self.buf.partition(b"\r\n\r\n")
        length = int(re.search(rb"(?im)^content-length: *(\d+)", head).group(1))  # type: ignore[union-attr]
        while len(rest) < length:
            self._more()
            head, _, rest = self.buf.partition(b"\r\n\r\n")
        self.buf = rest[length:]
        return head + b"\r\n\r\n" + rest[:length]

    def closed(self) -> bool:
        """True when the server closed the connection (nothing more to read) within a second: sooner
        than the keep-alive timeout (5 s) would close it."""
        self.sock.settimeout(1.0)
        try:
            return self.buf == b"" and self.sock.recv(1) == b""
        except TimeoutError:
            return False

    def _more(self) -> None:
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionError("closed")
        self.buf += data

    def close(self) -> None:
        self.sock.close()


def post(path: str, token: str | None, body: bytes, *extra: str) -> bytes:
    head = [f"POST {path} HTTP/1.1", "Host: test", f"Content-Length: {len(body)}"]
    if token:
        head.append(f"Authorization: Bearer {token}")
    head.extend(extra)
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def submit(token: str | None, action: str = "a", *extra: str, description: str = "d") -> bytes:
    return post(
        "/confirm", token, json.dumps({"action": action, "description": description}).encode(), *extra
    )


def normal(answer: bytes) -> bytes:
    # The same bytes but for the new requests' ids, the times, the date header and the length
    # (the times' digits vary).
    answer = re.sub(rb"cr_[0-9a-f]{32}", b"cr_X", answer)
    answer = re.sub(rb"[0-9]{10}\.[0-9]+", b"T", answer)
    return re.sub(rb"(?m)^(date|content-length): [^\r]*\r\n", rb"\1: X\r\n", answer)


def serve(
    tmp_path: Path, name: str, direct: bool, submit_call: AnswerFunction | None = None
) -> tuple[uvicorn.Server, int, Tokens, ConfirmationStore]:
    db = str(tmp_path / f"{name}.db")
    store = ConfirmationStore(db, daemon_settings(db, max_body_bytes=LIMIT, rate_limit=3))
    tokens = make_tokens(store)
    app = create_app(store.settings, store, background=False)
    if submit_call is not None:  # what answers POST /confirm at the edge, replaced
        app.edge_routes.fixed["/confirm"] = Found("/confirm", submit_call, {})
    server = uvicorn.Server(server_config(app, "127.0.0.1", 0, "critical", direct=app if direct else None))
    _, port = start_in_thread(server, name=name, timeout=15, failure=RuntimeError("did not start"))
    assert port is not None
    return server, port, tokens, store


def exchange(port: int, tokens: Tokens) -> list[bytes]:
    answers: list[bytes] = []
    conn = Raw(port)

    def ask(data: bytes, count: int = 1) -> list[bytes]:
        conn.send(data)
        got = [conn.answer() for _ in range(count)]
        answers.extend(got)
        return got

    def made_id(answer: bytes) -> str:
        return str(json.loads(answer.partition(b"\r\n\r\n")[2])["id"])

    ask(submit(None))
    ask(submit("kct_unknown"))
    ask(submit(tokens.approver))
    ask(post("/confirm", tokens.agent, b"{not json"))
    ask(post("/confirm", tokens.agent, b"[1]"))
    ask(post("/confirm", tokens.agent, b""))
    ask(post("/confirm", tokens.agent, b'{"action": "a"}'))
    made = made_id(ask(submit(tokens.agent, "deploy_x"))[0])
    ask(submit(tokens.agent, "b", "Idempotency-Key: k1"))
    ask(submit(tokens.agent, "b", "Idempotency-Key: k1"))
    ask(submit(tokens.agent, "b", "Idempotency-Key: k1", description="e"))
    ask(submit(tokens.agent, "b", "Idempotency-Key: " + "k" * 201))
    ask(submit(tokens.agent, "b", description="f"))
    ask(submit(tokens.agent, "b", description="g"))
    ask(submit(tokens.agent, "b", description="h"))  # 429 with Retry-After
    ask(post(f"/confirm/{made}/approve", tokens.agent, b"{}"))  # an agent never decides
    ask(post("/confirm/cr_unknown/deny", tokens.approver, b"{}"))
    ask(post(f"/confirm/{made}/approve", tokens.approver, json.dumps({"digest": "0" * 64}).encode()))
    ask(post(f"/confirm/{made}/deny", tokens.approver, b"[]"))
    ask(post(f"/confirm/{made}/approve", tokens.approver, b'{"reason": "ok"}'))
    ask(post(f"/confirm/{made}/deny", tokens.approver, b"{}"))  # 409
    # Pipelined: three requests in one write, answered in order; a GET (the app's) between two.
    two = ask(submit(tokens.agent2, "p") + submit(tokens.agent2, "q"), 2)
    ask(
        post(f"/confirm/{made_id(two[0])}/deny", tokens.approver, b"{}")
        + b"GET /health HTTP/1.1\r\nHost: test\r\n\r\n"
        + post(f"/confirm/{made_id(two[1])}/approve", tokens.approver, b"{}"),
        3,
    )
    # A query string, a declared body past the limit, a chunked body: the app's paths.
    ask(post("/confirm?x=1", tokens.agent2, json.dumps({"action": "r", "description": "d"}).encode()))
    ask(post("/confirm", tokens.agent2, b"x" * (LIMIT + 1)))
    ask(
        b"POST /confirm HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n"
        + f"Authorization: Bearer {tokens.agent2}\r\n\r\n".encode()
        + b"3\r\n[1]\r\n0\r\n\r\n"
    )
    # A body in pieces, larger than the high-water mark, the rest sent a little later.
    big = json.dumps({"action": "s", "description": "d", "details": {"x": "y" * 150_000}}).encode()
    whole = post("/confirm", tokens.agent2, big)
    conn.send(whole[:70_000])
    time.sleep(0.2)
    ask(whole[70_000:])
    conn.close()
    # A request that closes its connection: answered with "connection: close", then closed.
    closing = Raw(port)
    closing.send(submit(tokens.agent2, "t", "Connection: close"))
    answers.append(closing.answer())
    assert closing.closed()
    closing.close()
    # HTTP/1.0: answered, then closed.
    old = Raw(port)
    old.send(submit(tokens.agent2, "u").replace(b"HTTP/1.1", b"HTTP/1.0", 1))
    answers.append(old.answer())
    assert old.closed()
    old.close()
    return answers


@pytest.fixture()
def counted(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[object]]:
    # Every direct request, as its cycle is made.
    made: list[object] = []
    original = serving._DirectCycle.__init__

    def init(self: serving._DirectCycle, *args: object) -> None:
        made.append(self)
        original(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(serving._DirectCycle, "__init__", init)
    yield made


def test_direct_answers_are_the_apps_bytes_on_the_same_connections(
    tmp_path: Path, counted: list[object]
) -> None:
    answers = {}
    for name, direct in (("app", False), ("direct", True)):
        server, port, tokens, store = serve(tmp_path, name, direct)
        try:
            answers[name] = [normal(a) for a in exchange(port, tokens)]
        finally:
            server.should_exit = True
            time.sleep(0.3)
            store.close()
        if not direct:
            assert counted == [], "the app alone answers without direct cycles"
    assert answers["direct"] == answers["app"]
    statuses = [int(a.split(b" ", 2)[1]) for a in answers["app"]]
    assert statuses[:15] == [401, 401, 403, 400, 400, 400, 400, 202, 202, 202, 422, 400, 202, 202, 429]
    assert statuses[15:21] == [403, 404, 412, 400, 200, 409]
    assert statuses[21:] == [202, 202, 200, 200, 200, 202, 413, 400, 202, 202, 202]
    assert b"www-authenticate: Bearer\r\n" in answers["app"][0]
    assert b"retry-after: 3600\r\n" in answers["app"][14]
    assert b"connection: close\r\n" in answers["app"][-2]
    # Every hot request but those the app must see (the one behind an unanswered request on its
    # connection, the query string, the declared 413, the chunked body, the closing ones).
    assert len(counted) == 24


def test_a_direct_request_that_fails_is_a_500_that_closes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, counted: list[object]
) -> None:
    async def broken(call: confirmations.Call) -> confirmations.Answer:
        raise RuntimeError("a bug")

    answers = {}
    for name, direct in (("app", False), ("direct", True)):
        server, port, tokens, store = serve(tmp_path, name, direct, broken)
        try:
            conn = Raw(port)
            conn.send(submit(tokens.agent))
            answers[name] = normal(conn.answer())
            assert conn.closed()
            conn.close()
        finally:
            server.should_exit = True
            time.sleep(0.3)
            store.close()
    assert answers["direct"] == answers["app"]
    assert answers["app"].startswith(b"HTTP/1.1 500 Internal Server Error\r\n")
    assert len(counted) == 1


def test_a_client_that_leaves_mid_body_leaves_the_server_serving(
    tmp_path: Path, counted: list[object]
) -> None:
    server, port, tokens, store = serve(tmp_path, "direct", True)
    try:
        gone = Raw(port)
        gone.send(submit(tokens.agent)[:-5])  # the body's last bytes never come
        time.sleep(0.2)
        gone.close()
        time.sleep(0.2)
        assert not server.server_state.tasks, "the direct request's task ended with its client"
        conn = Raw(port)
        conn.send(submit(tokens.agent))
        assert conn.answer().startswith(b"HTTP/1.1 202 Accepted\r\n")
        conn.close()
        assert len(counted) == 2
    finally:
        server.should_exit = True
        time.sleep(0.3)
        store.close()


def test_shutdown_closes_a_connection_once_its_direct_request_is_answered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, counted: list[object]
) -> None:
    # Graceful shutdown: the request being answered is answered ("connection: close"), then the
    # connection closes; an idle keep-alive connection is closed at once.
    release = threading.Event()
    slow_submit = confirmations.submit_call

    async def slow(call: confirmations.Call) -> confirmations.Answer:
        import asyncio

        while not release.is_set():
            await asyncio.sleep(0.01)
        return await slow_submit(call)

    server, port, tokens, store = serve(tmp_path, "direct", True, slow)
    try:
        idle = Raw(port)
        busy = Raw(port)
        busy.send(submit(tokens.agent))
        time.sleep(0.2)
        server.should_exit = True
        time.sleep(0.3)
        assert idle.closed()
        release.set()
        answer = busy.answer()
        assert answer.startswith(b"HTTP/1.1 202 Accepted\r\n")
        assert b"connection: close\r\n" in answer
        assert busy.closed()
        assert len(counted) == 1
    finally:
        release.set()
        server.should_exit = True
        time.sleep(0.3)
        store.close()


def test_the_direct_path_is_used_only_on_the_uvicorn_releases_it_was_tested_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = str(tmp_path / "release.db")
    store = ConfirmationStore(db, daemon_settings(db, max_body_bytes=LIMIT))
    hot = create_app(store.settings, store, background=False)

    def protocol_on(version: str) -> str:
        monkeypatch.setattr(uvicorn, "__version__", version)
        config = server_config(hot, "127.0.0.1", 0, "critical", direct=hot)
        config.load()
        return config.http_protocol_class.__name__

    assert protocol_on("0.54.0") == "DirectProtocol"
    for other in ("0.99.0", "1.0", "0.53.2", "", "dev"):
        assert protocol_on(other) != "DirectProtocol", other
        assert not direct_supported(other)
