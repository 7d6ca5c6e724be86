"""kindling.observe and kindling.edge on their own: what the proxy and the MCP server will take with
a few lines (an observed app, health routes, JSON logs, the metrics token, the head and body limit)."""

from __future__ import annotations

import asyncio
import io
import json
import logging
from collections.abc import Iterator

import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families
from starlette.requests import ClientDisconnect

from kindling.edge import BodyLimit, BodyTooLarge, read_head
from kindling.errors import ConfigError
from kindling.observe.asgi import ObservedApp
from kindling.observe.health import health_router
from kindling.observe.logs import CURRENT, JsonFormatter, RequestLog, begin_request, configure_logging
from kindling.observe.metrics import HttpMetrics, bearer_token, render, token_matches
from kindling.serving import server_config, start_in_thread


@pytest.fixture()
def observed() -> Iterator[tuple[str, CollectorRegistry, list[str]]]:
    problems: list[str] = []
    app = FastAPI()

    @app.get("/items/{item_id}")
    async def item(item_id: int) -> dict[str, int]:
        return {"id": item_id}

    async def ready() -> list[str]:
        return list(problems)

    app.include_router(health_router(ready, info=lambda: {"service": "test"}))
    registry = CollectorRegistry()
    wrapped = ObservedApp(app, metrics=HttpMetrics(registry))
    server = uvicorn.Server(server_config(wrapped, "127.0.0.1", 0, "critical"))
    _, port = start_in_thread(server, name="observed", timeout=15, failure=RuntimeError("did not start"))
    try:
        yield f"http://127.0.0.1:{port}", registry, problems
    finally:
        server.should_exit = True


def counts(registry: CollectorRegistry) -> dict[tuple[str, str, str], float]:
    body, content_type = render(registry)
    assert content_type.startswith("text/plain")
    found = {}
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            if sample.name == "kindling_http_requests_total":
                found[(sample.labels["route"], sample.labels["method"], sample.labels["status"])] = (
                    sample.value
                )
    return found


def test_an_observed_app_counts_by_route_template(observed: tuple[str, CollectorRegistry, list[str]]) -> None:
    url, registry, problems = observed
    with httpx.Client(base_url=url) as client:
        for n in range(3):
            assert client.get(f"/items/{n}").status_code == 200
        assert client.get("/items/not-a-number").status_code == 422
        assert client.get("/nowhere").status_code == 404
        assert client.get("/health").json() == {"status": "ok", "service": "test"}
        assert client.get("/ready").json() == {"status": "ready"}
        problems.append("The store does not answer.")
        refused = client.get("/ready")
        assert refused.status_code == 503
        assert refused.json() == {"status": "not ready", "problems": ["The store does not answer."]}
    assert counts(registry) == {
        ("/items/{item_id}", "GET", "200"): 3,
        ("/items/{item_id}", "GET", "422"): 1,
        ("unmatched", "GET", "404"): 1,
        ("/health", "GET", "200"): 1,
        ("/ready", "GET", "200"): 1,
        ("/ready", "GET", "503"): 1,
    }


def test_json_lines_carry_the_request_id_and_tenant() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("kindling.test_observe")
    logger.addHandler(handler)
    logger.propagate = False
    logger.setLevel(logging.WARNING)
    try:

        async def request(request_id: str | None, tenant: str) -> None:
            entry = begin_request(request_id)
            entry.tenant = tenant
            logger.warning("first %s", "line")
            try:
                raise ValueError("boom")
            except ValueError:
                logger.exception("second")

        async def both() -> None:
            await asyncio.gather(
                asyncio.create_task(request("given-1", "acme")), asyncio.create_task(request(None, "other"))
            )

        asyncio.run(both())
        logger.info("outside any request")
        logger.setLevel(logging.INFO)
        logger.info("outside any request")
    finally:
        logger.removeHandler(handler)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [line["event"] for line in lines] == [
        "first line",
        "second",
        "first line",
        "second",
        "outside any request",
    ]
    given = [line for line in lines if line["request_id"] == "given-1"]
    assert len(given) == 2 and all(line["tenant"] == "acme" for line in given)
    made = [line for line in lines if line["tenant"] == "other"]
    assert made[0]["request_id"] == made[1]["request_id"] and len(made[0]["request_id"]) == 16
    assert "ValueError: boom" in given[1]["error"] and given[1]["level"] == "error"
    assert lines[-1]["request_id"] is None and lines[-1]["tenant"] is None
    assert lines[0]["time"].endswith("+00:00")
    assert CURRENT.get() is None  # each request's context stayed in its task


def test_human_logs_stay_as_they_were_and_formats_are_checked(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("info", "human")
    logging.getLogger("kindling.test_observe_human").warning("plain words")
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.endswith(" WARNING kindling.test_observe_human: plain words") and not line.startswith("{")
    configure_logging("info", "json")
    logging.getLogger("kindling.test_observe_human").warning("as json")
    assert json.loads(capsys.readouterr().err.strip().splitlines()[-1])["event"] == "as json"
    configure_logging("warning", "human")
    assert logging.getLogger("uvicorn").level == logging.NOTSET  # uvicorn's own set-up is its own again
    with pytest.raises(ConfigError, match="log format"):
        configure_logging("info", "xml")
    assert RequestLog("x").id() == "x"


def test_the_metrics_token_is_compared_as_a_bearer_token() -> None:
    assert bearer_token("Bearer abc") == "abc" and bearer_token("bearer  abc ") == "abc"
    assert (
        bearer_token("Basic abc") is None and bearer_token("Bearer ") is None and bearer_token(None) is None
    )
    assert token_matches("s3cret-token-value", "Bearer s3cret-token-value")
    assert not token_matches("s3cret-token-value", "Bearer s3cret-token-valuE")
    assert not token_matches("", "Bearer ")
    assert not token_matches("", None)


def test_the_head_is_read_once_each_header_the_first_of_its_name() -> None:
    head = read_head(
        [
            (b"authorization", b"Bearer one"),
            (b"authorization", b"Bearer two"),
            (b"content-length", b"12"),
            (b"idempotency-key", b"k1"),
            (b"x-request-id", b"req-1.a:b_c"),
            (b"traceparent", b"00-abc-def-01"),
        ]
    )
    assert (head.authorization, head.content_length, head.idempotency_key) == ("Bearer one", "12", "k1")
    assert (head.request_id, head.traceparent, head.framed) == ("req-1.a:b_c", "00-abc-def-01", True)
    assert read_head([(b"x-request-id", b"has space")]).request_id is None
    assert read_head([(b"x-request-id", b"x" * 65)]).request_id is None
    assert not read_head([(b"transfer-encoding", b"chunked")]).framed
    assert not read_head([(b"expect", b"100-continue")]).framed


def test_one_body_limit_for_declared_and_streamed_bodies() -> None:
    limit = BodyLimit(10)
    assert limit.declared_past("11") and limit.declared_past(b"11")
    assert not limit.declared_past("10") and not limit.declared_past(None) and not limit.declared_past("x")

    def channel(*messages: dict[str, object]):  # type: ignore[no-untyped-def]
        queue = list(messages)

        async def receive() -> dict[str, object]:
            return queue.pop(0)

        return receive

    chunks = (
        {"type": "http.request", "body": b"12345", "more_body": True},
        {"type": "http.request", "body": b"678"},
    )
    assert asyncio.run(limit.read(channel(*chunks))) == b"12345678"
    too_big = (
        {"type": "http.request", "body": b"123456", "more_body": True},
        {"type": "http.request", "body": b"78901"},
    )
    with pytest.raises(BodyTooLarge) as refused:
        asyncio.run(limit.read(channel(*too_big)))
    assert refused.value.status_code == 413 and refused.value.detail == "Body is larger than 10 bytes."
    with pytest.raises(ClientDisconnect):
        asyncio.run(limit.read(channel({"type": "http.disconnect"})))

    async def drain(receive) -> None:  # type: ignore[no-untyped-def]
        while (await receive()).get("more_body"):
            pass

    asyncio.run(drain(limit.counting(channel(*chunks))))
    with pytest.raises(BodyTooLarge):
        asyncio.run(drain(limit.counting(channel(*too_big))))
