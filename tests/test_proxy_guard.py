"""What the proxy refuses because a browser could forge it, the deadlines slow clients get, and the
credentials it never shows. A real proxy on loopback, the fake OpenAI server behind it."""

from __future__ import annotations

import http.client
import json
import select
import socket
import time
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from typer.testing import CliRunner

from fake_openai import FakeOpenAI
from kindling.cli.main import app
from kindling.httpguard import allowed_hosts, check_request, has_dot_segments, redact_userinfo
from kindling.proxy import ProxySettings
from kindling.proxy.server import startup_line
from kindling.sessions import iter_sessions
from proxy_support import running_proxy, status

BODY = {"model": "m", "messages": [{"role": "user", "content": "forged history"}]}


def _raw(
    base_url: str, method: str, path: str, headers: dict[str, str], body: bytes = b""
) -> tuple[int, bytes]:
    """A request sent byte for byte as given (no client normalizes its path or fills in headers)."""
    host, port = base_url.removeprefix("http://").split("/")[0].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        for name, value in headers.items():
            conn.putheader(name, value)
        conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def test_requests_a_browser_could_forge_are_refused_before_anything_is_recorded_or_forwarded(
    fake_openai: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UPSTREAM_KEY", "sk-upstream-secret")
    db = tmp_path / "proxy.db"
    with running_proxy(
        fake_openai.base_url, db, upstream_key_env="UPSTREAM_KEY", allow_hosts=("proxy.internal",)
    ) as proxy:
        root = proxy.base_url.removesuffix("/v1")
        here = root.removeprefix("http://")
        port = here.rsplit(":", 1)[1]
        body = json.dumps(BODY).encode()
        json_type = {"Content-Type": "application/json"}
        # What a DNS-rebinding page, a cross-site form or a cross-site fetch sends.
        for headers, expected in (
            ({"Host": f"evil.example:{port}", **json_type}, 421),
            ({"Host": "evil.example", **json_type}, 421),
            ({**json_type}, 421),  # no Host at all
            ({"Host": here, "Origin": "http://evil.example", **json_type}, 403),
            ({"Host": here, "Origin": "null", **json_type}, 403),
            ({"Host": here, "Origin": f"http://localhost:{port}", **json_type}, 403),  # another origin
            ({"Host": here, "Content-Type": "text/plain"}, 415),
            ({"Host": here, "Content-Type": "application/x-www-form-urlencoded"}, 415),
            ({"Host": here}, 415),
            (
                {
                    "Host": f"evil.example:{port}",
                    "Origin": "http://evil.example",
                    "Content-Type": "text/plain",
                },
                421,
            ),
        ):
            for path in ("/v1/chat/completions", "/v1/embeddings", "/kindling/status"):
                method = "GET" if path == "/kindling/status" else "POST"
                code, answer = _raw(proxy.base_url, method, path, headers, b"" if method == "GET" else body)
                # A GET has no body to judge: only the Host and the Origin refuse it.
                assert code == (200 if method == "GET" and expected == 415 else expected), (
                    headers,
                    path,
                    answer,
                )
        assert fake_openai.requests == []  # nothing went upstream, so neither did the key
        # What a client of the proxy sends gets through: by loopback name, address or an allowed name.
        for host in (
            here,
            f"localhost:{port}",
            f"LOCALHOST:{port}",
            f"127.0.0.2:{port}",
            f"proxy.internal:{port}",
        ):
            code, _answer = _raw(
                proxy.base_url, "POST", "/v1/chat/completions", {"Host": host, **json_type}, body
            )
            assert code == 200, host
        code, _answer = _raw(
            proxy.base_url,
            "POST",
            "/v1/chat/completions",
            {"Host": here, "Origin": f"http://{here}", "Content-Type": "application/json; charset=utf-8"},
            body,
        )
        assert code == 200
        openai.OpenAI(base_url=proxy.base_url, api_key="sk-client", max_retries=0).chat.completions.create(
            **BODY
        )
        # Uploads to passthrough paths are multipart forms.
        files = httpx.post(
            f"{proxy.base_url}/files", files={"file": ("a.jsonl", b"{}\n")}, data={"purpose": "x"}
        )
        assert files.status_code == 404  # the fake upstream's own answer: forwarded
        assert status(proxy.base_url)["recorder"]["store_state"] == "up"
    assert len(list(iter_sessions(db))) == 7  # the accepted chats only


DOTTED = (
    "/v1/%2e%2e/internal",
    "/v1/%2E%2E/internal",
    "/v1/.%2e/internal",
    "/v1/models/..%2f..%2finternal",
    "/v1/models/%252e%252e/internal",
    "/v1/../internal",
    "/v1/./models",
    "/v1/models/..\\..\\internal",
)


def test_passthrough_paths_with_dot_segments_are_refused(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    with running_proxy(fake_openai.base_url, tmp_path / "proxy.db") as proxy:
        here = proxy.base_url.removeprefix("http://").split("/")[0]
        for path in DOTTED:
            code, answer = _raw(proxy.base_url, "GET", path, {"Host": here})
            assert code in (400, 404), (path, answer)
        fine, _ = _raw(proxy.base_url, "GET", "/v1/models", {"Host": here})
    assert fine == 200
    assert [r["path"] for r in fake_openai.requests] == ["/v1/models"]  # nothing else reached the upstream


def test_dot_segments_are_found_however_they_are_written() -> None:
    for path in (
        "/a/../b",
        "/a/%2e%2e/b",
        "/a/%252E%252e/b",
        "/a/.%2E/b",
        "/a/..%5cb",
        "/a/./b",
        "/a/%25252e%25252e",
    ):
        assert has_dot_segments(path), path
    for path in (
        "/v1/chat/completions",
        "/v1/files/file-abc.jsonl",
        "/v1/models/gpt-4.1",
        "/a/..b/c",
        "/a/%20",
    ):
        assert not has_dot_segments(path), path
    hosts = allowed_hosts("0.0.0.0", ["Proxy.Internal."])
    assert {"localhost", "127.0.0.1", "::1", "0.0.0.0", "proxy.internal"} <= hosts
    assert check_request("GET", {"host": "[::1]:6100"}, hosts) is None
    assert check_request("GET", {"host": "127.9.9.9"}, hosts) is None
    assert check_request("GET", {"host": "10.0.0.9:6100"}, hosts) is not None
    assert check_request("POST", {"host": "localhost", "content-length": "0"}, hosts) is None
    assert (
        check_request(
            "POST",
            {"host": "localhost", "content-type": "application/vnd.x+json", "content-length": "2"},
            hosts,
        )
        is None
    )


def test_trickling_clients_are_cut_off_and_others_are_still_served(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    with running_proxy(fake_openai.base_url, tmp_path / "proxy.db", read_timeout=1.0) as proxy:
        host, port = proxy.base_url.removeprefix("http://").split("/")[0].split(":")
        body = json.dumps(BODY).encode()
        head = (
            f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n"
        ).encode()
        trickles: list[tuple[socket.socket, bytes]] = []
        for index in range(200):
            sock = socket.create_connection((host, int(port)), timeout=5)
            sock.setblocking(False)
            # Half of them trickle their headers, the other half their body after whole headers.
            trickles.append((sock, head + b"X-Slow: " if index % 2 else head + b"\r\n" + body[:5]))
        for sock, start in trickles:
            sock.send(start)
        started = time.monotonic()
        open_ = {sock for sock, _ in trickles}
        while open_ and time.monotonic() - started < 15:
            for sock in list(open_):
                try:
                    sock.send(b"a")  # one more byte: never the end of the headers or the body
                except OSError:
                    open_.discard(sock)
            readable, _, _ = select.select(list(open_), [], [], 0.1)
            for sock in readable:
                try:
                    if sock.recv(65536) == b"":
                        open_.discard(sock)
                except OSError:
                    open_.discard(sock)
            # A well-behaved client is answered meanwhile.
            if time.monotonic() - started > 0.5 and len(open_) == len(trickles):
                answer = httpx.post(f"{proxy.base_url}/chat/completions", json=BODY, timeout=5)
                assert answer.status_code == 200
        elapsed = time.monotonic() - started
        for sock, _ in trickles:
            sock.close()
        assert not open_, f"{len(open_)} trickling connections still held after {elapsed:.1f} s"
        # A slow upstream is not a slow client: a reply that takes longer than the deadline arrives.
        fake_openai.latency = 1.5
        slow = httpx.post(f"{proxy.base_url}/chat/completions", json=BODY, timeout=10)
        assert slow.status_code == 200
    assert fake_openai.chat_requests()[-1] == BODY


def test_credentials_in_the_upstream_url_are_never_shown(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        dead_port = closed.getsockname()[1]
    upstream = f"http://user:s3cr3t-pass@127.0.0.1:{dead_port}/v1"
    assert redact_userinfo(upstream) == f"http://***@127.0.0.1:{dead_port}/v1"
    with running_proxy(upstream, tmp_path / "proxy.db") as proxy:
        gone = httpx.post(f"{proxy.base_url}/chat/completions", json=BODY, timeout=10)
        shown = status(proxy.base_url)
        line = startup_line(proxy.settings, proxy.app)
    assert gone.status_code == 502
    for text in (gone.text, json.dumps(shown), line):
        assert "s3cr3t-pass" not in text and "user:" not in text, text
        assert f"***@127.0.0.1:{dead_port}" in text
    # The credentials are still used: the upstream gets them as HTTP basic auth.
    with running_proxy(
        f"http://user:s3cr3t-pass@127.0.0.1:{fake_openai.port}/v1", tmp_path / "b.db"
    ) as proxy:
        httpx.post(f"{proxy.base_url}/chat/completions", json=BODY, timeout=10)
    sent = {k.lower(): v for k, v in fake_openai.requests[-1]["headers"].items()}
    assert sent.get("authorization", "").startswith("Basic ")


def test_a_taken_port_is_one_clear_error_and_no_banner(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        result = CliRunner().invoke(
            app,
            [
                "proxy",
                "--upstream",
                fake_openai.base_url,
                "--port",
                str(port),
                "--db",
                str(tmp_path / "p.db"),
            ],
        )
    assert result.exit_code != 0
    lines = result.output.strip().splitlines()
    assert lines == [
        f"Error: Port {port} on 127.0.0.1 is taken by another program: stop it, or choose another with --port."
    ]
    assert "kindling proxy on" not in result.output and "Errno" not in result.output


def test_the_start_up_line_says_what_warms(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    settings: dict[str, Any] = {"templates": str(tmp_path / "templates")}
    with running_proxy(fake_openai.base_url, tmp_path / "p.db", **settings) as proxy:
        proxy.app.state.builder.load()
        line = startup_line(proxy.settings, proxy.app)
        assert line.endswith("warm-up on: no template yet (0 of 5 conversations recorded)"), line
    off = ProxySettings.resolve(fake_openai.base_url, db=tmp_path / "p.db", warm=False)
    assert startup_line(off, None).endswith("warm-up off")
    fixed = ProxySettings.resolve(fake_openai.base_url, db=tmp_path / "p.db", template="coding")
    assert startup_line(fixed, None).endswith("warm-up on from template coding")
