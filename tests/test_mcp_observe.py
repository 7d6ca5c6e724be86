"""``kindling mcp --http`` watched as a service: /metrics scraped with prometheus-client's own parser
after known traffic from the official MCP client, /metrics refused without a token off loopback,
/health and /ready, a span per tool call (ids, never arguments or results), JSON log lines."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
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
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from kindling.integrations.mcp import McpSettings, http_app
from kindling.observe.tracing import start_tracing
from kindling.sessions import generate_sample_db
from kindling.templates import build_template
from metrics_support import Samples, moved, samples_of, wait_healthy
from test_confirm_support import SRC, free_port

TOKEN = "mcp-bearer-token-0123456789"
METRICS_TOKEN = "mcp-metrics-token-0123456789"
SECRET = "SECRET-FACT-OF-THE-USER"


class Served:
    """An MCP HTTP app served on ``host`` (a free port); yields the root URL to reach it by."""

    def __init__(self, asgi: Any, host: str = "127.0.0.1") -> None:
        self.server = uvicorn.Server(uvicorn.Config(asgi, host=host, port=0, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 15
        while not self.server.started:
            assert self.thread.is_alive() and time.monotonic() < deadline, "the MCP server did not start"
            time.sleep(0.02)
        return f"http://127.0.0.1:{self.server.servers[0].sockets[0].getsockname()[1]}"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture
def source(tmp_path: Path) -> Iterator[Path]:
    source = generate_sample_db(tmp_path / "state.db", sessions=30, seed=3)
    build_template("coding", [source], min_messages=5)
    yield source


def scrape(root: str, token: str = METRICS_TOKEN) -> Samples:
    response = httpx.get(f"{root}/metrics", headers={"Authorization": f"Bearer {token}"}, timeout=10)
    return samples_of(response)


def calls_of(tool: str, outcome: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    return ("kindling_mcp_tool_calls_total", (("outcome", outcome), ("tool", tool)))


def requests_of(route: str, method: str, status: int) -> tuple[str, tuple[tuple[str, str], ...]]:
    return ("kindling_http_requests_total", (("method", method), ("route", route), ("status", str(status))))


async def _session(root: str, sent: Counter[tuple[str, int]], exporter: bool = False) -> str | None:
    """Drive the server as an MCP host would; count every HTTP answer the client got in ``sent``."""

    async def seen(response: httpx2.Response) -> None:
        sent[(response.request.method, response.status_code)] += 1

    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60, event_hooks={"response": [seen]}
    )
    async with http, Client(streamable_http_client(f"{root}/mcp", http_client=http)) as client:
        assert (
            await client.call_tool("memory", {"action": "add", "target": "user", "content": SECRET})
        ).structured_content
        assert not (await client.call_tool("memory", {"action": "read", "target": "user"})).is_error
        assert not (await client.call_tool("skills", {"action": "list"})).is_error
        missing = await client.call_tool("warm_session", {"action": "load", "name": "nope", "task": SECRET})
        assert missing.is_error
        invalid = await client.call_tool("memory", {"action": "shout", "content": SECRET})
        assert invalid.is_error
        unknown = await client.call_tool("no_such_tool", {"x": SECRET})
        assert unknown.is_error
    return None


def test_metrics_move_by_exactly_the_traffic_sent(source: Path) -> None:
    app = http_app(McpSettings(sources=(str(source),)), token=TOKEN, metrics_token=METRICS_TOKEN)
    sent: Counter[tuple[str, int]] = Counter()
    with Served(app) as root:
        before = scrape(root)
        anyio.run(_session, root, sent)

        def counted() -> Samples:
            return {
                k: v
                for k, v in moved(before, scrape(root)).items()
                if k[0] == "kindling_http_requests_total" and ("route", "/mcp") in k[1]
            }

        # The client's last request (its DELETE, or a stream it held) may end a moment after it left.
        deadline = time.monotonic() + 10
        while sum(counted().values()) != sum(sent.values()):
            assert time.monotonic() < deadline, (counted(), sent)
            time.sleep(0.05)
        after = scrape(root)
    change = moved(before, after)
    for (method, status), count in sent.items():
        assert change[requests_of("/mcp", method, status)] == count
    assert change[requests_of("/metrics", "GET", 200)] >= 1
    assert change[calls_of("memory", "ok")] == 2
    assert change[calls_of("skills", "ok")] == 1
    assert change[calls_of("warm_session", "error")] == 1
    assert change[calls_of("memory", "invalid")] == 1
    assert change[calls_of("unknown", "unknown_tool")] == 1
    assert sum(v for k, v in change.items() if k[0] == "kindling_mcp_tool_calls_total") == 6
    duration = ("kindling_mcp_tool_call_duration_seconds_count", (("tool", "memory"),))
    assert change[duration] == 3


@pytest.mark.parametrize("host", ["0.0.0.0", "127.0.0.1"])
def test_metrics_need_a_token_on_or_off_loopback(source: Path, host: str) -> None:
    app = http_app(McpSettings(sources=(str(source),)), host=host, token=TOKEN, metrics_token=METRICS_TOKEN)
    with Served(app, host) as root:
        refused = httpx.get(f"{root}/metrics")
        assert refused.status_code == 401 and "kindling_http" not in refused.text
        assert (
            httpx.get(
                f"{root}/metrics", headers={"Authorization": "Bearer wrong-token-0123456789"}
            ).status_code
            == 401
        )
        for token in (METRICS_TOKEN, TOKEN):
            assert (
                "kindling_mcp_tool_calls"
                in httpx.get(f"{root}/metrics", headers={"Authorization": f"Bearer {token}"}).text
            )
        # The metrics token is good for nothing else.
        mcp = httpx.post(
            f"{root}/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"Authorization": f"Bearer {METRICS_TOKEN}"},
        )
        assert mcp.status_code == 401
        # Health and readiness need no token.
        assert httpx.get(f"{root}/health").json() == {"status": "ok", "service": "mcp"}
        assert httpx.get(f"{root}/ready").json() == {"status": "ready"}
        # A browser's page cannot read them either (the forgery guard holds for them too).
        assert (
            httpx.get(
                f"{root}/metrics",
                headers={"Origin": "http://evil.example", "Authorization": f"Bearer {TOKEN}"},
            ).status_code
            == 403
        )


def test_metrics_off_and_a_short_metrics_token(source: Path) -> None:
    from kindling.errors import ConfigError

    with pytest.raises(ConfigError, match="16 characters"):
        http_app(McpSettings(), metrics_token="short")
    with Served(http_app(McpSettings(sources=(str(source),)), metrics=False)) as root:
        off = httpx.get(f"{root}/metrics")
        assert off.status_code == 404 and "--no-metrics" in off.text


def test_ready_names_a_missing_source(tmp_path: Path) -> None:
    gone = tmp_path / "gone.db"
    with Served(http_app(McpSettings(sources=(str(gone),)))) as root:
        ready = httpx.get(f"{root}/ready")
        assert ready.status_code == 503
        assert ready.json()["problems"] == [f"The session source {gone} does not exist."]
        assert httpx.get(f"{root}/health").status_code == 200


def test_a_span_per_tool_call_with_ids_and_never_content(source: Path) -> None:
    exporter = InMemorySpanExporter()
    spans = start_tracing("mcp", exporter=exporter)
    assert spans is not None
    app = http_app(McpSettings(sources=(str(source),)), token=TOKEN, spans=spans)
    with Served(app) as root:
        anyio.run(_session, root, Counter())
    spans.close()
    finished = exporter.get_finished_spans()
    tools = [span for span in finished if span.name.startswith("tools/call ")]
    assert sorted(span.name for span in tools) == [
        "tools/call memory",
        "tools/call memory",
        "tools/call memory",
        "tools/call skills",
        "tools/call unknown",
        "tools/call warm_session",
    ]
    outcomes = Counter(
        (span.attributes["gen_ai.tool.name"], span.attributes["kindling.mcp.outcome"]) for span in tools
    )
    assert outcomes == Counter(
        {
            ("memory", "ok"): 2,
            ("memory", "invalid"): 1,
            ("skills", "ok"): 1,
            ("warm_session", "error"): 1,
            ("unknown", "unknown_tool"): 1,
        }
    )
    # Each call's JSON-RPC id (the protocol this client speaks has no session id to carry).
    assert len({span.attributes["jsonrpc.request.id"] for span in tools}) == len(tools)
    assert any(span.name == "POST /mcp" for span in finished)  # and a span per request
    for span in finished:
        shown = repr(dict(span.attributes or {})) + span.name + repr([e.attributes for e in span.events])
        assert SECRET not in shown and "no_such_tool" not in shown


def test_http_logs_json_lines(source: Path) -> None:
    port = free_port()
    log = tempfile.TemporaryFile()  # noqa: SIM115 - closed below
    command = [
        sys.executable,
        "-m",
        "kindling",
        "mcp",
        "--http",
        "--port",
        str(port),
        "--source",
        str(source),
    ]
    command += ["--log-format", "json", "--log-level", "info"]
    proc = subprocess.Popen(
        command, env={**os.environ, "PYTHONPATH": str(SRC)}, stdout=subprocess.DEVNULL, stderr=log
    )
    try:
        wait_healthy(f"http://127.0.0.1:{port}", proc, "server")
    finally:
        proc.terminate()
        proc.wait(10)
    log.seek(0)
    lines = [json.loads(line) for line in log.read().splitlines() if line.strip()]
    log.close()
    assert lines, "every line is one JSON object"
    for line in lines:
        assert {"time", "level", "event", "request_id", "tenant"} <= set(line)
    assert any(line["logger"].startswith("uvicorn") for line in lines)


def test_mcp_refuses_an_unknown_log_format() -> None:
    from typer.testing import CliRunner

    from kindling.cli.main import app

    result = CliRunner().invoke(app, ["mcp", "--http", "--log-format", "xml"])
    assert result.exit_code == 2 and "--log-format" in result.output
