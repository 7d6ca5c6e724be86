"""The proxy watched as a service: /metrics scraped with prometheus-client's own parser after known
traffic from the official openai client, /metrics refused without its token, /health and /ready
(cached), OpenTelemetry spans in an in-memory exporter (ids, never content), JSON log lines."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import openai
import pytest
import sqlalchemy as sa
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from fake_openai import FakeOpenAI, text, tool_call
from kindling.observe.health import CachedReady
from kindling.observe.tracing import start_tracing
from kindling.proxy import ProxyServer, ProxySettings
from kindling.proxy.recorder import ProxyStore
from kindling.proxy.tenants import TenantTokens
from metrics_support import Samples, moved, requests_of, samples_of, wait_healthy
from proxy_support import TOOLS, running_proxy, save_template, wait_recorded
from test_confirm_support import SRC, free_port

METRICS_TOKEN = "proxy-metrics-token-0123456789"
PROXY_TOKEN = "proxy-token-abcdefghijklmnop"


def scrape(root: str, headers: dict[str, str] | None = None) -> Samples:
    """Every sample of /metrics, parsed by prometheus-client, keyed by name and sorted labels."""
    response = httpx.get(
        f"{root}/metrics", headers=headers or {"authorization": f"Bearer {METRICS_TOKEN}"}, timeout=10
    )
    return samples_of(response)


def by_endpoint(name: str, endpoint: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    return (name, (("endpoint", endpoint),))


def test_metrics_move_by_exactly_the_traffic_sent(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    save_template(tmp_path / "templates")
    with running_proxy(
        fake_openai.base_url,
        tmp_path / "observed.db",
        templates=str(tmp_path / "templates"),
        metrics_token=METRICS_TOKEN,
        build_every=0,
        build_interval=0.0,
    ) as proxy:
        root = proxy.base_url.removesuffix("/v1")
        client = openai.OpenAI(base_url=proxy.base_url, api_key="sk-test", max_retries=0)
        before = scrape(root)
        fake_openai.script = [
            tool_call("read_file", {"path": "src/parser.py"}),
            text("All 12 passed."),
            {"fault": "status", "status": 500},
        ]
        # A new conversation with tools, answered whole: warmed.
        client.chat.completions.create(
            model="fake-model",
            messages=[{"role": "user", "content": "Find the tokenizer bug in src/parser.py"}],
            tools=TOOLS,  # type: ignore[arg-type]
        )
        # Another, streamed: warmed, and its first chunk timed.
        stream = client.chat.completions.create(
            model="fake-model",
            messages=[{"role": "user", "content": "Run the parser tests"}],
            tools=TOOLS,  # type: ignore[arg-type]
            stream=True,
        )
        assert [chunk for chunk in stream]
        # A third without tools (nothing to warm with) that the upstream fails.
        with pytest.raises(openai.InternalServerError):
            client.chat.completions.create(
                model="fake-model", messages=[{"role": "user", "content": "Say hello"}]
            )
        assert [m.id for m in client.models.list()]  # forwarded as it came
        assert httpx.get(f"{root}/health").status_code == 200
        wait_recorded(proxy.base_url)
        after = scrape(root)
    change = moved(before, after)
    assert change[requests_of("/v1/chat/completions", "POST", 200)] == 2
    assert change[requests_of("/v1/chat/completions", "POST", 500)] == 1
    assert change[requests_of("/v1/{path:path}", "GET", 200)] == 1
    assert change[requests_of("/health", "GET", 200)] == 1
    assert change[requests_of("/metrics", "GET", 200)] == 1  # the first scrape
    counted = {k: v for k, v in change.items() if k[0] == "kindling_http_requests_total"}
    # /kindling/status is asked while waiting for the recorder: everything else is what was sent.
    assert sum(v for k, v in counted.items() if ("route", "/kindling/status") not in k[1]) == 6
    latency = (
        "kindling_http_request_duration_seconds_count",
        (("method", "POST"), ("route", "/v1/chat/completions")),
    )
    assert change[latency] == 3
    # The upstream: three calls to chat/completions (one failed with 500), one to the rest.
    assert change[by_endpoint("kindling_proxy_upstream_duration_seconds_count", "chat/completions")] == 3
    assert change[by_endpoint("kindling_proxy_upstream_duration_seconds_count", "other")] == 1
    inf = (
        "kindling_proxy_upstream_duration_seconds_bucket",
        (("endpoint", "chat/completions"), ("le", "+Inf")),
    )
    assert change[inf] == 3
    assert change[by_endpoint("kindling_proxy_upstream_first_chunk_seconds_count", "chat/completions")] == 1
    errors = ("kindling_proxy_upstream_errors_total", (("endpoint", "chat/completions"), ("status", "500")))
    assert change[errors] == 1
    assert sum(v for k, v in change.items() if k[0] == "kindling_proxy_upstream_errors_total") == 1
    # Conversations and warm-ups.
    assert change[("kindling_proxy_conversations_total", ())] == 3
    assert change[("kindling_proxy_conversations_warmed_total", ())] == 2
    assert change[("kindling_proxy_warmup_tokens_count", ())] == 2
    assert change[("kindling_proxy_warmup_tokens_sum", ())] > 0
    assert change[("kindling_proxy_replies_recorded_total", ())] == 2
    # The recording queue: drained, nothing dropped, writes made; no template built.
    assert after[("kindling_proxy_recording_queue_depth", ())] == 0
    assert change[("kindling_proxy_recording_writes_total", ())] >= 3
    assert after[("kindling_proxy_recording_dropped_total", ())] == 0
    assert after[("kindling_proxy_store_up", ())] == 1
    assert after[("kindling_proxy_template_builds_total", (("result", "built"),))] == 0


@pytest.mark.parametrize("host", ["0.0.0.0", "127.0.0.1"])
def test_metrics_need_a_token_on_or_off_loopback(fake_openai: FakeOpenAI, tmp_path: Path, host: str) -> None:
    db = tmp_path / "guarded.db"
    store = ProxyStore(db)
    tenant_token = TenantTokens(store).create("alice")[1]
    store.close()
    with running_proxy(
        fake_openai.base_url, db, host=host, token=PROXY_TOKEN, metrics_token=METRICS_TOKEN
    ) as proxy:
        root = f"http://127.0.0.1:{proxy.port}"
        refused = httpx.get(f"{root}/metrics")
        assert refused.status_code == 401 and "kindling_http" not in refused.text
        wrong = httpx.get(f"{root}/metrics", headers={"authorization": "Bearer not-the-metrics-token-at-all"})
        assert wrong.status_code == 401
        tenant = httpx.get(f"{root}/metrics", headers={"x-kindling-token": tenant_token})
        assert tenant.status_code == 403 and "metrics token" in tenant.text
        for headers in ({"authorization": f"Bearer {METRICS_TOKEN}"}, {"x-kindling-token": PROXY_TOKEN}):
            assert "kindling_http_requests_total" in httpx.get(f"{root}/metrics", headers=headers).text
        # The metrics token is good for nothing else.
        chat = httpx.post(
            f"{root}/v1/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
            headers={"authorization": f"Bearer {METRICS_TOKEN}"},
        )
        assert chat.status_code == 401
        # Health and readiness need no token and say nothing of the tenants.
        assert httpx.get(f"{root}/health").json() == {"status": "ok", "service": "proxy"}
        assert httpx.get(f"{root}/ready").json() == {"status": "ready"}


def test_a_metrics_token_is_long_enough(tmp_path: Path) -> None:
    from kindling.errors import ConfigError

    with pytest.raises(ConfigError, match="16 characters"):
        ProxySettings.resolve("http://127.0.0.1:1/v1", db=tmp_path / "x.db", metrics_token="short")


def test_with_metrics_off_nothing_is_counted_or_answered(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    with running_proxy(fake_openai.base_url, tmp_path / "quiet.db", metrics=False) as proxy:
        assert proxy.app.state.registry is None and proxy.app.http_metrics is None
        client = openai.OpenAI(base_url=proxy.base_url, api_key="sk-test", max_retries=0)
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        off = httpx.get(proxy.base_url.removesuffix("/v1") + "/metrics")
        assert off.status_code == 404 and "--no-metrics" in off.text


def test_ready_names_the_upstream_and_the_store_and_is_cached(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        dead = sock.getsockname()[1]
    with running_proxy(f"http://127.0.0.1:{dead}/v1", tmp_path / "down.db") as proxy:
        ready = httpx.get(proxy.base_url.removesuffix("/v1") + "/ready")
        assert ready.status_code == 503
        assert ready.json()["problems"] == ["The upstream does not answer (ConnectError)."]
    db = tmp_path / "schema.db"
    with running_proxy(fake_openai.base_url, db) as proxy:
        root = proxy.base_url.removesuffix("/v1")
        for _ in range(5):  # polled every few ms: the upstream is asked once
            assert httpx.get(f"{root}/ready").json() == {"status": "ready"}
        asked = [
            r for r in fake_openai.requests if r.get("method") == "GET" and r["path"].endswith("/models")
        ]
        assert len(asked) == 1
        with sa.create_engine(f"sqlite:///{db}").begin() as conn:
            conn.execute(
                sa.text(
                    "INSERT INTO kindling_migrations (component, name, applied_at) "
                    "VALUES ('proxy', 'm999_from_the_future', 'now')"
                )
            )
        time.sleep(2.1)  # the cached answer expires
        problems = httpx.get(f"{root}/ready")
        assert problems.status_code == 503
        assert "m999_from_the_future" in " ".join(problems.json()["problems"])
        assert httpx.get(f"{root}/health").status_code == 200  # liveness touches nothing


def test_cached_ready_runs_one_check_per_ttl() -> None:
    calls = []

    async def check() -> list[str]:
        calls.append(time.monotonic())
        await asyncio.sleep(0.05)
        return ["down"] if len(calls) > 1 else []

    async def main() -> None:
        ready = CachedReady(check, ttl=0.3)
        answers = await asyncio.gather(*(ready() for _ in range(10)))  # concurrent probes share one check
        assert answers == [[]] * 10 and len(calls) == 1
        assert await ready() == [] and len(calls) == 1
        await asyncio.sleep(0.35)
        assert await ready() == ["down"] and len(calls) == 2

    asyncio.run(main())


def test_spans_carry_ids_and_never_content(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    save_template(tmp_path / "templates")
    exporter = InMemorySpanExporter()
    spans = start_tracing("proxy", exporter=exporter)
    assert spans is not None
    secret = "SECRET-WORDS-OF-THE-CONVERSATION"
    caller_trace = "4bf92f3577b34da6a3ce929d0e0e4736"
    settings = ProxySettings.resolve(
        fake_openai.base_url, port=0, db=tmp_path / "traced.db", templates=str(tmp_path / "templates")
    )
    fake_openai.script = [text(f"The answer is {secret}.")]
    with ProxyServer(settings, spans=spans) as proxy:
        client = openai.OpenAI(
            base_url=proxy.base_url,
            api_key="sk-test",
            max_retries=0,
            default_headers={"traceparent": f"00-{caller_trace}-00f067aa0ba902b7-01"},
        )
        stream = client.chat.completions.create(
            model="fake-model",
            messages=[{"role": "user", "content": f"Read src/parser.py and find {secret}"}],
            tools=TOOLS,  # type: ignore[arg-type]
            stream=True,
        )
        assert [chunk for chunk in stream]
        session_id = wait_for_session(proxy)
    spans.close()
    finished = {span.name: span for span in exporter.get_finished_spans()}
    request = finished["POST /v1/chat/completions"]
    upstream = finished["POST upstream /chat/completions"]
    warm = finished["warm-up"]
    assert format(request.context.trace_id, "032x") == caller_trace  # a child of the caller's span
    assert request.attributes["kindling.session_id"] == session_id
    assert request.attributes["kindling.tenant"] == "default"
    assert request.attributes["http.response.status_code"] == 200
    assert upstream.parent.span_id == request.context.span_id
    assert upstream.attributes["http.response.status_code"] == 200
    assert upstream.kind.name == "CLIENT"
    # The upstream is told to continue the trace from the proxy's call.
    sent = [r for r in fake_openai.requests if r["path"].endswith("/chat/completions")][-1]["headers"]
    sent_parent = {k.lower(): v for k, v in sent.items()}["traceparent"]
    assert sent_parent.split("-")[1:3] == [caller_trace, format(upstream.context.span_id, "016x")]
    assert warm.parent.span_id == request.context.span_id
    assert warm.attributes["kindling.session_id"] == session_id
    assert warm.attributes["kindling.warmup.template"] == "code"
    assert warm.attributes["kindling.warmup.tokens"] > 0
    for span in exporter.get_finished_spans():
        shown = repr(dict(span.attributes or {})) + span.name + repr([e.attributes for e in span.events])
        assert secret not in shown and "parser" not in shown


def wait_for_session(proxy: ProxyServer) -> str:
    from kindling.sessions import iter_sessions

    wait_recorded(proxy.base_url)
    sessions = list(iter_sessions(proxy.settings.db))
    assert len(sessions) == 1
    return sessions[0].id


def test_proxy_logs_json_lines(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    port = free_port()
    log = tempfile.TemporaryFile()  # noqa: SIM115 - closed below
    command = [sys.executable, "-m", "kindling", "proxy", "--upstream", fake_openai.base_url]
    command += ["--port", str(port), "--db", str(tmp_path / "logged.db"), "--log-format", "json"]
    proc = subprocess.Popen(
        command, env={**os.environ, "PYTHONPATH": str(SRC)}, stdout=subprocess.DEVNULL, stderr=log
    )
    try:
        root = f"http://127.0.0.1:{port}"
        wait_healthy(root, proc, "proxy")
        # A body that is not JSON: forwarded unchanged, and one warning logged with its request id.
        httpx.post(
            f"{root}/v1/chat/completions",
            content=b"{not json",
            headers={"content-type": "application/json", "x-request-id": "req-proxy-42"},
        )
        deadline = time.monotonic() + 10
        while b"req-proxy-42" not in _read(log):
            assert time.monotonic() < deadline, _read(log)[-2000:]
            time.sleep(0.05)
    finally:
        proc.terminate()
        proc.wait(10)
    lines = [json.loads(line) for line in _read(log).splitlines() if line.strip()]
    log.close()
    assert lines, "every line is one JSON object"
    for line in lines:
        assert {"time", "level", "event", "request_id", "tenant"} <= set(line)
    warned = next(line for line in lines if line["request_id"] == "req-proxy-42")
    assert warned["level"] == "warning" and warned["tenant"] == "default"
    assert warned["logger"] == "kindling.proxy" and "forwarding it unchanged" in warned["event"]
    assert any(line["logger"].startswith("uvicorn") for line in lines)  # uvicorn's own lines too


def _read(log: tempfile._TemporaryFileWrapper[bytes] | object) -> bytes:
    log.seek(0)  # type: ignore[attr-defined]
    return log.read()  # type: ignore[attr-defined,no-any-return]


def test_proxy_refuses_an_unknown_log_format() -> None:
    from typer.testing import CliRunner

    from kindling.cli.main import app

    result = CliRunner().invoke(app, ["proxy", "--upstream", "http://127.0.0.1:1/v1", "--log-format", "xml"])
    assert result.exit_code == 2 and "--log-format" in result.output


def test_an_unreachable_upstream_is_counted_by_what_went_wrong(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        dead = sock.getsockname()[1]
    with running_proxy(
        f"http://127.0.0.1:{dead}/v1", tmp_path / "unreachable.db", metrics_token=METRICS_TOKEN
    ) as proxy:
        root = proxy.base_url.removesuffix("/v1")
        before = scrape(root)
        client = openai.OpenAI(base_url=proxy.base_url, api_key="sk-test", max_retries=0)
        for _ in range(2):
            with pytest.raises(openai.APIStatusError) as failed:
                client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
            assert failed.value.status_code == 502
        after = scrape(root)
    change = moved(before, after)
    unreachable = (
        "kindling_proxy_upstream_errors_total",
        (("endpoint", "chat/completions"), ("status", "unreachable")),
    )
    assert change[unreachable] == 2
    assert change[requests_of("/v1/chat/completions", "POST", 502)] == 2
    # No answer came, so no upstream latency was observed.
    assert by_endpoint("kindling_proxy_upstream_duration_seconds_count", "chat/completions") not in change
