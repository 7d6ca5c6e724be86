"""MCP over HTTP refuses what a browser could forge on every host it binds, and a client builds only
from the sources the server was started with. The official MCP SDK client, a real server on loopback."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from typer.testing import CliRunner

from kindling.cli.main import app
from kindling.integrations.mcp import McpSettings, http_app
from kindling.sessions import generate_sample_db

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
ADD = {
    "jsonrpc": "2.0",
    "id": 2,
    "method": "tools/call",
    "params": {"name": "memory", "arguments": {"action": "add", "target": "user", "content": "Owned."}},
}


class _Served:
    """An MCP HTTP app served on ``host`` (a free port), as a context manager yielding its root URL."""

    def __init__(self, asgi: Any, host: str) -> None:
        self.host = host
        self.server = uvicorn.Server(uvicorn.Config(asgi, host=host, port=0, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> tuple[str, int]:
        self.thread.start()
        deadline = time.monotonic() + 15
        while not self.server.started:
            assert self.thread.is_alive() and time.monotonic() < deadline, "the MCP server did not start"
            time.sleep(0.02)
        return self.host, int(self.server.servers[0].sockets[0].getsockname()[1])

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture
def source(tmp_path: Path) -> Iterator[Path]:
    yield generate_sample_db(tmp_path / "state.db", sessions=30, seed=3)


def _post(address: str, port: int, headers: dict[str, str], body: Any = INIT) -> httpx.Response:
    content = json.dumps(body).encode() if not isinstance(body, bytes) else body
    base = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    return httpx.post(
        f"http://{address}:{port}/mcp", content=content, headers={**base, **headers}, timeout=10
    )


@pytest.mark.parametrize("bound", ["127.0.0.2", "LOCALHOST", "127.0.0.1"])
def test_dns_rebinding_and_cross_site_requests_are_refused_on_every_loopback_host(
    bound: str, source: Path
) -> None:
    user_md = Path(os.environ["HERMES_HOME"]) / "memories" / "USER.md"
    served_on = "127.0.0.1" if bound == "LOCALHOST" else bound
    with _Served(http_app(McpSettings(sources=(str(source),)), host=bound), served_on) as (address, port):
        for headers, expected in (
            ({"Host": "evil.example"}, 421),
            ({"Host": f"evil.example:{port}"}, 421),
            ({"Host": f"{address}:{port}", "Origin": "http://evil.example"}, 403),
            ({"Host": f"{address}:{port}", "Content-Type": "text/plain"}, 415),
        ):
            refused = _post(address, port, headers, ADD)
            assert refused.status_code == expected, (headers, refused.text)
        assert not user_md.exists() or "Owned." not in user_md.read_text()
        # Under its own name (in any case) and the loopback names, the SDK's client is served.
        names = [f"{address}:{port}", f"localhost:{port}"] + (
            [f"LOCALHOST:{port}"] if bound == "LOCALHOST" else []
        )
        for host in names:
            assert _post(address, port, {"Host": host}).status_code == 200, host

        async def main() -> None:
            http = httpx2.AsyncClient(timeout=60)
            async with (
                http,
                Client(streamable_http_client(f"http://{address}:{port}/mcp", http_client=http)) as client,
            ):
                listed = await client.call_tool("memory", {"action": "read", "target": "memory"})
                assert not listed.is_error, listed.content

        anyio.run(main)


def test_allowed_host_names_are_served(source: Path) -> None:
    asgi = http_app(McpSettings(sources=(str(source),)), host="127.0.0.1", allow_hosts=["mcp.internal"])
    with _Served(asgi, "127.0.0.1") as (address, port):
        assert _post(address, port, {"Host": f"mcp.internal:{port}"}).status_code == 200
        assert _post(address, port, {"Host": f"other.internal:{port}"}).status_code == 421
        assert _post(address, port, {"Host": f"{address}:{port}"}, b"{}").status_code != 421


def test_warm_session_builds_only_from_the_servers_sources(source: Path, tmp_path: Path) -> None:
    # Someone else's recordings: a session file the server was not started with.
    other = generate_sample_db(tmp_path / "other.db", sessions=10, seed=5)
    with _Served(http_app(McpSettings(sources=(str(source),)), host="127.0.0.1"), "127.0.0.1") as (
        address,
        port,
    ):

        async def main() -> None:
            http = httpx2.AsyncClient(timeout=60)
            async with (
                http,
                Client(streamable_http_client(f"http://{address}:{port}/mcp", http_client=http)) as client,
            ):
                for sources in (
                    [str(other)],
                    [str(source), str(other)],
                    ["postgresql://attacker.example/db"],
                ):
                    refused = await client.call_tool(
                        "warm_session",
                        {"action": "build", "name": "stolen", "sources": sources, "min_messages": 1},
                    )
                    assert refused.is_error, sources
                    assert "fixed by the server" in refused.content[0].text  # type: ignore[union-attr]
                built = await client.call_tool(
                    "warm_session", {"action": "build", "name": "mine", "min_messages": 5}
                )
                assert not built.is_error, built.content
                assert built.structured_content is not None
                assert built.structured_content["read"]["sessions"] == 30
                named = await client.call_tool(
                    "warm_session",
                    {"action": "build", "name": "mine2", "sources": [str(source)], "min_messages": 5},
                )
                assert not named.is_error, named.content

        anyio.run(main)


def test_a_taken_port_is_one_clear_error(source: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        result = CliRunner().invoke(app, ["mcp", "--http", "--port", str(port), "--source", str(source)])
    assert result.exit_code != 0
    assert result.output.strip().splitlines() == [
        f"Error: Port {port} on 127.0.0.1 is taken by another program: stop it, or choose another with --port."
    ]


def test_an_mcp_client_sees_no_other_tenants_templates(source: Path) -> None:
    from mcp.shared.exceptions import MCPError

    from kindling.mining.model import Example
    from kindling.templates import Template
    from kindling.templates.store import open_store

    store = open_store()
    example = Example(tool_name="read_file", arguments={"path": "a.py"}, context="Read a.py", result="A")
    store.save(
        Template(
            name="proxy-alice", tenant="alice", examples=[example.model_copy(update={"tenant": "alice"})]
        )
    )
    store.save(Template(name="mine", examples=[example]))
    with _Served(http_app(McpSettings(sources=(str(source),)), host="127.0.0.1"), "127.0.0.1") as (
        address,
        port,
    ):

        async def main() -> None:
            http = httpx2.AsyncClient(timeout=60)
            async with (
                http,
                Client(streamable_http_client(f"http://{address}:{port}/mcp", http_client=http)) as client,
            ):
                uris = {str(r.uri) for r in (await client.list_resources()).resources}
                assert "kindling://templates/mine" in uris and "kindling://templates/proxy-alice" not in uris
                with pytest.raises(MCPError, match="tenant"):
                    await client.read_resource("kindling://templates/proxy-alice")
                listed = await client.call_tool("warm_session", {"action": "list"})
                assert listed.structured_content is not None
                assert [t["name"] for t in listed.structured_content["templates"]] == ["mine"]
                for arguments in (
                    {"action": "load", "name": "proxy-alice", "task": "read a file"},
                    {"action": "delete", "name": "proxy-alice"},
                ):
                    refused = await client.call_tool("warm_session", arguments)
                    assert refused.is_error, arguments
                loaded = await client.call_tool("warm_session", {"action": "load", "task": "Read a.py"})
                assert not loaded.is_error and loaded.structured_content is not None
                assert loaded.structured_content["template"] == "mine"

        anyio.run(main)
    assert store.exists("proxy-alice")
