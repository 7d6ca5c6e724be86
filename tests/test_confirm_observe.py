"""The daemon watched as a service: /metrics scraped with prometheus-client's own parser after known
traffic, /metrics refused without its token, OpenTelemetry spans in an in-memory exporter (ids, never
content), JSON log lines, /health and /ready."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from kindling.confirm.server import ServerThread
from kindling.confirm.store import ConfirmationStore
from kindling.observe.tracing import start_tracing
from metrics_support import Samples, moved, requests_of, samples_of
from test_confirm_support import DaemonProcess, Tokens, auth, daemon_settings, make_tokens

METRICS_TOKEN = "metrics-token-0123456789"


def scrape(client: httpx.Client, token: str = METRICS_TOKEN) -> Samples:
    """Every sample of /metrics, parsed by prometheus-client, keyed by name and sorted labels."""
    response = client.get("/metrics", headers=auth(token))
    return samples_of(response)


def latency_count(route: str, method: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    return ("kindling_http_request_duration_seconds_count", (("method", method), ("route", route)))


@pytest.fixture()
def daemon(tmp_path: Path) -> Iterator[tuple[ServerThread, Tokens, ConfirmationStore]]:
    db = str(tmp_path / "observed.db")
    store = ConfirmationStore(db, daemon_settings(db, metrics_token=METRICS_TOKEN))
    tokens = make_tokens(store)
    server = ServerThread(store.settings, store).start()
    try:
        yield server, tokens, store
    finally:
        server.stop()
        store.close()


def until(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_metrics_move_by_exactly_the_traffic_sent(
    daemon: tuple[ServerThread, Tokens, ConfirmationStore],
) -> None:
    server, tokens, store = daemon
    with httpx.Client(base_url=server.base_url, timeout=10) as client:
        before = scrape(client)
        made = []
        for n in range(3):  # plain submits: answered on the connection itself
            r = client.post(
                "/confirm", json={"action": f"act_{n}", "description": "d"}, headers=auth(tokens.agent)
            )
            assert r.status_code == 202
            made.append(r.json()["id"])

        def chunked() -> Iterator[bytes]:  # no length: answered by the ASGI edge
            yield json.dumps({"action": "act_c", "description": "d"}).encode()

        r = client.post("/confirm", content=chunked(), headers=auth(tokens.agent))
        assert r.status_code == 202
        assert client.post("/confirm", json={"action": "a", "description": "d"}).status_code == 401
        assert (
            client.post(f"/confirm/{made[0]}/approve", json={}, headers=auth(tokens.approver)).status_code
            == 200
        )
        assert (
            client.post(f"/confirm/{made[1]}/deny", json={}, headers=auth(tokens.approver)).status_code == 200
        )
        assert (
            client.post(f"/confirm/{made[1]}/approve", json={}, headers=auth(tokens.approver)).status_code
            == 409
        )
        for _ in range(2):
            assert client.get(f"/confirm/{made[2]}", headers=auth(tokens.approver)).status_code == 200
        assert client.get("/no/such/path").status_code == 404
        assert client.get("/health").status_code == 200
        after = scrape(client)
    change = moved(before, after)
    assert change[requests_of("/confirm", "POST", 202)] == 4
    assert change[requests_of("/confirm", "POST", 401)] == 1
    assert change[requests_of("/confirm/{request_id}/approve", "POST", 200)] == 1
    assert change[requests_of("/confirm/{request_id}/approve", "POST", 409)] == 1
    assert change[requests_of("/confirm/{request_id}/deny", "POST", 200)] == 1
    assert change[requests_of("/confirm/{request_id}", "GET", 200)] == 2
    assert change[requests_of("unmatched", "GET", 404)] == 1
    assert change[requests_of("/health", "GET", 200)] == 1
    assert change[requests_of("/metrics", "GET", 200)] == 1  # the first scrape
    # The histograms: one observation per request, in the buckets' counts as in _count.
    assert change[latency_count("/confirm", "POST")] == 5
    assert change[latency_count("/confirm/{request_id}/approve", "POST")] == 2
    assert change[latency_count("/confirm/{request_id}", "GET")] == 2
    inf_bucket = (
        "kindling_http_request_duration_seconds_bucket",
        (("le", "+Inf"), ("method", "POST"), ("route", "/confirm")),
    )
    assert change[inf_bucket] == 5
    assert (
        change[("kindling_http_request_duration_seconds_sum", (("method", "POST"), ("route", "/confirm")))]
        > 0
    )
    # Nothing else counted a request.
    counted = {k: v for k, v in change.items() if k[0] == "kindling_http_requests_total"}
    assert sum(counted.values()) == 13
    # The daemon's own: decisions, and what the database holds at the scrape.
    assert change[("kindling_confirm_decisions_total", (("outcome", "approved"),))] == 1
    assert change[("kindling_confirm_decisions_total", (("outcome", "denied"),))] == 1
    assert after[("kindling_confirm_pending_requests", ())] == 2
    assert after[("kindling_confirm_requests", (("status", "approved"),))] == 1
    assert after[("kindling_confirm_audit_chain_length", ())] == store.verify_audit().rows
    assert after[("kindling_confirm_store_up", ())] == 1
    assert after[("kindling_confirm_long_polls_open", ())] == 0


def test_timeouts_notifications_and_auto_approvals_are_counted(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a port nobody listens on: every delivery fails
        sock.bind(("127.0.0.1", 0))
        dead = sock.getsockname()[1]
    db = str(tmp_path / "counted.db")
    settings = daemon_settings(
        db, metrics_token=METRICS_TOKEN, notify_urls=(f"json://127.0.0.1:{dead}/hook",), notify_max_attempts=1
    )
    store = ConfirmationStore(db, settings)
    tokens = make_tokens(store)
    store.add_rule("read_logs")
    with (
        ServerThread(settings, store) as server,
        httpx.Client(base_url=server.base_url, timeout=10) as client,
    ):
        before = scrape(client)
        r = client.post(
            "/confirm",
            json={"action": "slow", "description": "d", "timeout_seconds": 1},
            headers=auth(tokens.agent),
        )
        assert r.status_code == 202
        r = client.post(
            "/confirm", json={"action": "read_logs", "description": "d"}, headers=auth(tokens.agent)
        )
        assert r.json()["status"] == "auto_approved"

        def settled() -> bool:
            change = moved(before, scrape(client))
            return (
                change.get(("kindling_confirm_timeouts_total", ()), 0) == 1
                and change.get(("kindling_confirm_notifications_total", (("result", "failed"),)), 0) >= 1
            )

        until(settled)
        after = scrape(client)
    change = moved(before, after)
    assert change[("kindling_confirm_decisions_total", (("outcome", "auto_approved"),))] == 1
    assert ("kindling_confirm_notifications_total", (("result", "sent"),)) not in change
    failed = change[("kindling_confirm_notifications_total", (("result", "failed"),))]
    assert after[("kindling_confirm_outbox", (("status", "dead"),))] == failed
    store.close()


@pytest.mark.parametrize("host", ["0.0.0.0", "127.0.0.1"])
def test_metrics_need_a_token_on_or_off_loopback(tmp_path: Path, host: str) -> None:
    db = str(tmp_path / "guarded.db")
    store = ConfirmationStore(db, daemon_settings(db, host=host, metrics_token=METRICS_TOKEN))
    tokens = make_tokens(store)
    with (
        ServerThread(store.settings, store) as server,
        httpx.Client(base_url=f"http://127.0.0.1:{server.port}", timeout=10) as client,
    ):
        refused = client.get("/metrics")
        assert refused.status_code == 401 and "kindling_" not in refused.text
        assert client.get("/metrics", headers=auth("not-the-metrics-token-at-all")).status_code == 401
        assert client.get("/metrics", headers=auth(tokens.agent)).status_code == 403
        for token in (METRICS_TOKEN, tokens.approver, tokens.admin):
            assert "kindling_http_requests_total" in client.get("/metrics", headers=auth(token)).text
        # The metrics token is good for nothing else.
        assert client.get("/confirm", headers=auth(METRICS_TOKEN)).status_code == 401
    store.close()


def test_with_metrics_off_nothing_is_counted_or_answered(tmp_path: Path) -> None:
    db = str(tmp_path / "quiet.db")
    store = ConfirmationStore(db, daemon_settings(db, metrics=False))
    tokens = make_tokens(store)
    with ServerThread(store.settings, store) as server, httpx.Client(base_url=server.base_url) as client:
        assert server.app.state.registry is None and server.app.http_metrics is None
        r = client.post("/confirm", json={"action": "a", "description": "d"}, headers=auth(tokens.agent))
        assert r.status_code == 202
        off = client.get("/metrics", headers=auth(tokens.admin))
        assert off.status_code == 404 and "--no-metrics" in off.json()["error"]
    store.close()


def test_spans_carry_ids_and_never_content(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    spans = start_tracing("confirm", exporter=exporter)
    assert spans is not None
    db = str(tmp_path / "traced.db")
    store = ConfirmationStore(db, daemon_settings(db))
    tokens = make_tokens(store)
    secret = "SECRET-WORDS-OF-THE-REQUEST"
    caller_trace = "4bf92f3577b34da6a3ce929d0e0e4736"
    with (
        ServerThread(store.settings, store, spans=spans) as server,
        httpx.Client(base_url=server.base_url, timeout=10) as client,
    ):
        r = client.post(
            "/confirm",
            json={
                "action": "deploy_x",
                "description": secret,
                "details": {"k": secret},
                "session_key": "sess-42",
            },
            headers={**auth(tokens.agent), "traceparent": f"00-{caller_trace}-00f067aa0ba902b7-01"},
        )
        rid = r.json()["id"]
        client.post(f"/confirm/{rid}/approve", json={"reason": secret}, headers=auth(tokens.approver))
        client.get(f"/confirm/{rid}", headers=auth(tokens.approver))
    spans.close()
    finished = {span.name: span for span in exporter.get_finished_spans()}
    submit = finished["POST /confirm"]
    approve = finished["POST /confirm/{request_id}/approve"]
    read = finished["GET /confirm/{request_id}"]
    assert submit.attributes["kindling.session_id"] == "sess-42"
    assert submit.attributes["kindling.confirm.request_id"] == rid
    assert submit.attributes["http.response.status_code"] == 202
    assert format(submit.context.trace_id, "032x") == caller_trace  # a child of the caller's span
    assert approve.attributes["kindling.session_id"] == "sess-42"
    assert approve.attributes["http.route"] == "/confirm/{request_id}/approve"
    assert approve.attributes["http.response.status_code"] == 200
    assert read.attributes["http.route"] == "/confirm/{request_id}"
    for span in exporter.get_finished_spans():
        assert secret not in repr(dict(span.attributes or {})) and secret not in span.name
        assert rid not in span.name  # the route's template, never the path asked for
    store.close()


def test_tracing_is_off_unless_the_environment_asks() -> None:
    from kindling.observe.tracing import tracing_requested

    assert not tracing_requested({})
    assert tracing_requested({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"})
    assert tracing_requested({"OTEL_TRACES_EXPORTER": "console"})
    assert not tracing_requested({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"})
    assert not tracing_requested({"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"})
    assert start_tracing("confirm", environ={}) is None


def test_ready_names_a_schema_that_is_not_current(tmp_path: Path) -> None:
    db = str(tmp_path / "schema.db")
    store = ConfirmationStore(db, daemon_settings(db))
    with ServerThread(store.settings, store) as server, httpx.Client(base_url=server.base_url) as client:
        assert client.get("/ready").json() == {"status": "ready"}
        with store.engine.begin() as conn:
            last = conn.execute(
                sa.text("SELECT name FROM kindling_migrations WHERE component = 'confirm' ORDER BY name DESC")
            ).scalar()
            conn.execute(sa.text("DELETE FROM kindling_migrations WHERE name = :n"), {"n": last})
            conn.execute(
                sa.text(
                    "INSERT INTO kindling_migrations (component, name, applied_at) "
                    "VALUES ('confirm', 'm999_from_the_future', 'now')"
                )
            )
        problems = client.get("/ready")
        assert problems.status_code == 503
        text = " ".join(problems.json()["problems"])
        assert last in text and "m999_from_the_future" in text and "newer kindling" in text
        assert client.get("/health").json() == {"status": "ok", "database": "sqlite"}
    store.close()


def test_serve_logs_json_lines(tmp_path: Path) -> None:
    db = str(tmp_path / "logged.db")
    daemon = DaemonProcess(db, args=["--log-format", "json", "--log-level", "info"]).start()
    try:
        store = ConfirmationStore(db, daemon_settings(db))
        agent = store.create_token("agent", "json-bot")[1]
        # Break the database under the daemon: the submit's failure is logged, with its request id.
        with store.engine.begin() as conn:
            conn.exec_driver_sql("ALTER TABLE confirm_requests RENAME TO confirm_requests_gone")
        r = httpx.post(
            daemon.url + "/confirm",
            json={"action": "a", "description": "d"},
            headers={**auth(agent), "X-Request-ID": "req-abc-123"},
        )
        assert r.status_code in (400, 503)
        until(lambda: "req-abc-123" in daemon.log())
    finally:
        daemon.stop()
        store.close()
    lines = [json.loads(line) for line in daemon.log().splitlines() if line.strip()]
    assert lines, "every line is one JSON object"
    for line in lines:
        assert {"time", "level", "event", "request_id", "tenant"} <= set(line)
    failed = next(line for line in lines if line["request_id"] == "req-abc-123")
    assert failed["level"] == "error" and failed["tenant"] == "json-bot"
    assert any(line["logger"].startswith("uvicorn") for line in lines)  # uvicorn's own lines too


def test_serve_refuses_an_unknown_log_format() -> None:
    from typer.testing import CliRunner

    from kindling.cli.main import app

    result = CliRunner().invoke(app, ["confirm", "serve", "--log-format", "xml"])
    assert result.exit_code == 2 and "--log-format" in result.output
