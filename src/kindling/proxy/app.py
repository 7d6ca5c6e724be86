"""The proxy's FastAPI app: chat completions, Anthropic messages and OpenAI responses (recorded,
warmed), everything else under /v1 forwarded.

Requests are forwarded with one shared ``httpx.AsyncClient``. Responses go back with the upstream's
status, headers and body; event streams are passed on chunk by chunk as they arrive. kindling's own
work (recognising the conversation, warm-up, recording) never decides whether a call succeeds: when
it fails the client's bytes go upstream unchanged and one line is logged.

Before any of that, a request must be one no browser forged (``kindling.httpguard``: its Host, its
Origin, a JSON body) and carry a token the proxy accepts, which names its tenant
(``kindling.proxy.tenants``).

Watching it (``kindling.observe``): ``ProxyApp``'s entry counts, times and (with tracing on) spans
every request by route and status and gives it its log context; the upstream calls, their first
chunks and the warm-ups are counted (``proxy.metrics``) and spanned in the routes. ``/health`` and
``/ready`` need no token; ``/metrics`` needs the metrics token or the default tenant's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from contextvars import ContextVar
from typing import Any

import httpx
import orjson
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from prometheus_client import CollectorRegistry
from starlette.requests import ClientDisconnect
from starlette.types import Receive, Scope, Send

from kindling.edge import read_head
from kindling.errors import ConfigError
from kindling.httpguard import allowed_hosts, check_request, has_dot_segments
from kindling.observe.asgi import SPAN_KEY, observe_call
from kindling.observe.health import CachedReady, health_router
from kindling.observe.logs import CURRENT
from kindling.observe.metrics import HttpMetrics, render, token_matches
from kindling.observe.tracing import Spans, start_tracing
from kindling.proxy import responses
from kindling.proxy.anthropic import StreamedMessage, reply_of_message
from kindling.proxy.builder import TemplateBuilder
from kindling.proxy.conversations import CHAT, MESSAGES, RESPONSES, Conversations, Turn, WarmChoice
from kindling.proxy.metrics import BROKEN, TIMEOUT, UNREACHABLE, ProxyMetrics
from kindling.proxy.recorder import ProxyStore, Recorder
from kindling.proxy.reply import StreamedReply, reply_of_response
from kindling.proxy.responses import StreamedResponse
from kindling.proxy.settings import ProxySettings, is_loopback
from kindling.proxy.tenants import DEFAULT_TENANT, TOKEN_HEADER, Refusal, TenantAuth, TenantTokens

__all__ = ["TOKEN_HEADER", "ProxyApp", "create_app"]

log = logging.getLogger("kindling.proxy")

# Hop-by-hop headers (RFC 9110 7.6.1) and the ones httpx sets itself never pass through.
_REQUEST_DROP = frozenset(
    {
        "host",
        "content-length",
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
_RESPONSE_DROP = frozenset({"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade"})

#: The endpoint label of a call forwarded as it came (``/v1/models``, ``/v1/embeddings``, ...).
OTHER = "other"

# The warm-up inserted while a request's conversation began (name, tokens), for its span.
_WARMED: ContextVar[tuple[str | None, int] | None] = ContextVar("kindling_proxy_warmed", default=None)


class ProxyApp(FastAPI):
    """The proxy's app, whose ASGI entry observes every HTTP request (``observe.asgi.observe_call``):
    counted and timed by route template and status when metrics are on, spanned when tracing is,
    and given its log context (request id, then tenant) either way."""

    http_metrics: HttpMetrics | None = None
    spans: Spans | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Observe an HTTP request on its way to the routes; pass anything else (lifespan) on."""
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return
        await observe_call(
            super().__call__,
            read_head(scope["headers"]),
            scope,
            receive,
            send,
            metrics=self.http_metrics,
            spans=self.spans,
        )


def create_app(
    settings: ProxySettings,
    *,
    store: ProxyStore | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    spans: Spans | None = None,
) -> ProxyApp:
    """Build the proxy app for ``settings``. Raises StoreError when the store URL is malformed.

    A store that is merely down does not stop the app: recordings queue until it is back. Raises
    ConfigError for a non-loopback address without a token, however the settings were built.
    Metrics are kept unless ``settings.metrics`` is off; ``spans`` traces the proxy's work (by
    default tracing follows the ``OTEL_*`` variables, ``observe.tracing``).
    """
    if not is_loopback(settings.host) and not settings.token:
        raise ConfigError(
            f"Refusing to serve on {settings.host} without a token: the proxy is never an open relay."
        )
    proxy_store = store or ProxyStore(settings.db)
    recorder = Recorder(proxy_store, capacity=settings.queue_size)
    conversations = Conversations(
        recorder,
        warm=settings.warm,
        template=settings.template,
        templates=settings.templates,
        budget=settings.budget,
        lessons=settings.lessons,
    )
    auth = TenantAuth(
        TenantTokens(proxy_store), token=settings.token, upstream_key=settings.upstream_key is not None
    )
    builder = TemplateBuilder(
        recorder,
        templates=settings.templates,
        every=settings.build_every,
        interval=settings.build_interval,
        gap=settings.build_gap,
        on_built=conversations.templates_changed,
    )
    conversations.on_conversation = builder.conversation_started
    hosts = allowed_hosts(settings.host, settings.allow_hosts)
    shown_upstream = settings.shown_upstream
    owns_spans = spans is None
    the_spans = spans if spans is not None else start_tracing("proxy")
    registry: CollectorRegistry | None = None
    http_metrics: HttpMetrics | None = None
    proxy_metrics: ProxyMetrics | None = None
    if settings.metrics:
        registry = CollectorRegistry(auto_describe=True)
        http_metrics = HttpMetrics(registry)
        proxy_metrics = ProxyMetrics(registry, conversations, recorder, builder)
    if proxy_metrics is not None or the_spans is not None:

        def warmed(choice: WarmChoice) -> None:
            from kindling.warmup.tokens import estimate_tokens

            tokens = estimate_tokens((choice.block or b"").decode("utf-8", "replace"))
            if proxy_metrics is not None:
                proxy_metrics.warmed(tokens)
            if the_spans is not None:
                _WARMED.set((choice.template, tokens))

        conversations.on_warmed = warmed

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        recorder.start()
        app.state.client = httpx.AsyncClient(
            timeout=httpx.Timeout(None, connect=settings.connect_timeout),
            limits=httpx.Limits(max_connections=1000, max_keepalive_connections=200),
            transport=transport,
        )
        # Who may ask is known before the first request is answered.
        await asyncio.to_thread(auth.read)
        refresher = asyncio.ensure_future(auth.refresh_forever())
        builder.start()
        try:
            yield
        finally:
            refresher.cancel()
            builder.stop()
            await app.state.client.aclose()
            recorder.stop()
            proxy_store.close()
            if owns_spans and the_spans is not None:
                the_spans.close()

    app = ProxyApp(
        title="kindling proxy",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    app.state.settings = settings
    app.state.recorder = recorder
    app.state.conversations = conversations
    app.state.auth = auth
    app.state.builder = builder
    app.state.registry = registry
    app.state.metrics = proxy_metrics
    app.http_metrics = http_metrics
    app.spans = the_spans

    # Checked in each route rather than in a middleware, which would sit in every streamed chunk's path.
    async def admitted(request: Request, *, forms: bool = False) -> str | Response:
        """The request's tenant, or the response refusing it."""
        headers = _judged_headers(request.scope["headers"])
        forged = check_request(request.method, headers, hosts, forms=forms)
        if forged is not None:
            status_code, reason = forged
            return _error(status_code, f"kindling proxy: {reason}.")
        try:
            tenant = await auth.tenant_of(headers)
        except Refusal as refusal:
            return _error(refusal.status, str(refusal))
        context = CURRENT.get()
        if context is not None:
            context.tenant = tenant  # for the request's log lines
        return tenant

    async def ready() -> list[str]:
        problems = await asyncio.to_thread(store_problems, proxy_store)
        try:
            await app.state.client.get(f"{settings.upstream}/models", timeout=READY_TIMEOUT)
        except httpx.HTTPError as exc:
            log.error(
                "readiness: the upstream %s does not answer: %s",
                shown_upstream,
                _hidden(_one_line(exc), settings),
            )
            # No address here: /ready answers without a token (the log has it).
            problems.append(f"The upstream does not answer ({type(exc).__name__}).")
        return problems

    app.include_router(health_router(CachedReady(ready), info=lambda: {"service": "proxy"}))

    @app.get("/metrics")
    async def metrics(request: Request) -> Response:
        if registry is None:
            return _error(404, "kindling proxy: metrics are off (it runs with --no-metrics).")
        if not (
            settings.metrics_token
            and token_matches(settings.metrics_token, request.headers.get("authorization"))
        ):
            tenant = await admitted(request)
            if isinstance(tenant, Response):
                return tenant
            if tenant != DEFAULT_TENANT:
                return _error(
                    403,
                    "kindling proxy: a tenant's token does not read the proxy's metrics; use the "
                    "metrics token (KINDLING_PROXY_METRICS_TOKEN) or the proxy's own.",
                )
        body, content_type = await asyncio.to_thread(render, registry)
        return Response(body, media_type=content_type)

    @app.get("/kindling/status")
    async def status(request: Request) -> Any:
        tenant = await admitted(request)
        if isinstance(tenant, Response):
            return tenant
        return {
            "upstream": shown_upstream,
            "warm": settings.warm,
            "tenant": tenant,
            "conversations_cached": len(conversations.cache),
            **conversations.counts,
            "template": builder.status(tenant, conversations.tenant_counts(tenant)),
            "recorder": recorder.status(),
        }

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        return await _conversation(request, "chat/completions", CHAT)

    @app.post("/v1/messages")
    async def messages(request: Request) -> Response:
        return await _conversation(request, "messages", MESSAGES)

    @app.post("/v1/responses")
    async def create_response(request: Request) -> Response:
        return await _conversation(request, "responses", RESPONSES)

    async def _conversation(request: Request, path: str, api: str) -> Response:
        tenant = await admitted(request)
        if isinstance(tenant, Response):
            return tenant
        try:
            raw = await _body(request, settings.max_body_bytes)
        except ClientDisconnect:
            return _gone()
        if raw is None:
            return _too_large(settings)
        turn: Turn | None = None
        began = time.time_ns() if the_spans is not None else 0
        try:
            turn = await conversations.begin(raw, request.headers, api, tenant)
        except Exception as exc:
            log.warning("could not record or warm a request, forwarding it unchanged: %s", _one_line(exc))
        if the_spans is not None:
            _span_conversation(the_spans, request.scope.get(SPAN_KEY), turn, tenant, began)
        body = turn.upstream_body if turn is not None and turn.upstream_body is not None else raw
        headers = _upstream_headers(request, settings, api)
        headers["accept-encoding"] = "identity"  # the proxy reads the reply to record it
        return await _forward(request, app.state.client, settings, path, body, headers, turn, path)

    @app.api_route("/v1/{path:path}", methods=["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"])
    async def passthrough(path: str, request: Request) -> Response:
        tenant = await admitted(request, forms=True)
        if isinstance(tenant, Response):
            return tenant
        if has_dot_segments(request.scope.get("raw_path", b"").decode("latin-1")) or has_dot_segments(path):
            return _error(400, "kindling proxy: paths with '.' or '..' segments are not forwarded.")
        try:
            body = await _body(request, settings.max_body_bytes)
        except ClientDisconnect:
            return _gone()
        if body is None:
            return _too_large(settings)
        headers = _upstream_headers(request, settings, MESSAGES if path.startswith("messages") else CHAT)
        return await _forward(request, app.state.client, settings, path, body, headers, None, OTHER)

    async def _forward(
        request: Request,
        client: httpx.AsyncClient,
        settings: ProxySettings,
        path: str,
        body: bytes,
        headers: dict[str, str],
        turn: Turn | None,
        endpoint: str,
    ) -> Response:
        url = f"{settings.upstream}/{path}"
        if request.url.query:
            url += "?" + request.url.query
        span = None
        if the_spans is not None:
            span = the_spans.start(
                f"{request.method} upstream /{endpoint}",
                {"http.request.method": request.method, "kindling.proxy.endpoint": endpoint},
                client=True,
                parent=request.scope.get(SPAN_KEY),
            )
            # A traced upstream (LiteLLM, a collector in front of it) continues the same trace.
            parent = the_spans.traceparent(span)
            if parent:
                headers["traceparent"] = parent
        upstream_request = client.build_request(request.method, url, content=body, headers=headers)
        sent = time.perf_counter()
        try:
            upstream = await client.send(upstream_request, stream=True)
        except httpx.TimeoutException as exc:
            _failed(endpoint, TIMEOUT, span)
            return _error(504, f"kindling proxy: the upstream timed out: {_hidden(_one_line(exc), settings)}")
        except httpx.HTTPError as exc:
            _failed(endpoint, UNREACHABLE, span)
            return _error(
                502,
                f"kindling proxy: cannot reach the upstream {shown_upstream}: {_hidden(_one_line(exc), settings)}",
            )
        if proxy_metrics is not None:
            proxy_metrics.upstream_answered(endpoint, upstream.status_code, time.perf_counter() - sent)
        if span is not None:
            span.set_attribute("http.response.status_code", upstream.status_code)
        response_headers = {k: v for k, v in upstream.headers.items() if k.lower() not in _RESPONSE_DROP}
        if upstream.headers.get("content-type", "").startswith("text/event-stream"):
            response_headers.pop("content-length", None)
            return StreamingResponse(
                _relay(upstream, turn, endpoint, sent, span),
                status_code=upstream.status_code,
                headers=response_headers,
            )
        try:
            content = b"".join([chunk async for chunk in upstream.aiter_raw()])
        except httpx.HTTPError as exc:
            _failed(endpoint, BROKEN, span)
            span = None
            return _error(
                502, f"kindling proxy: the upstream broke off its answer: {_hidden(_one_line(exc), settings)}"
            )
        finally:
            await upstream.aclose()
            if span is not None:
                span.end()
        if turn is not None and upstream.status_code == 200 and "content-encoding" not in upstream.headers:
            # Before answering, so the conversation's next request is recognised however fast it comes.
            _record_whole(turn, content)
        return Response(content, status_code=upstream.status_code, headers=response_headers)

    def _failed(endpoint: str, status: str, span: Any) -> None:
        if proxy_metrics is not None:
            proxy_metrics.upstream_failed(endpoint, status)
        if span is not None:
            span.set_attribute("error.type", status)
            span.end()

    async def _relay(
        upstream: httpx.Response, turn: Turn | None, endpoint: str, sent: float, span: Any
    ) -> AsyncIterator[bytes]:
        reply: StreamedReply | StreamedMessage | StreamedResponse | None = None
        if turn is not None and upstream.status_code == 200:
            if turn.api == MESSAGES:
                reply = StreamedMessage()
            elif turn.api == RESPONSES:
                reply = StreamedResponse()
            else:
                reply = StreamedReply()
        first_chunk_ms: float | None = None
        waiting = True  # for the stream's first chunk
        try:
            async for chunk in upstream.aiter_raw():
                if waiting:
                    waiting = False
                    if proxy_metrics is not None:
                        proxy_metrics.first_chunk(endpoint, time.perf_counter() - sent)
                if reply is not None and turn is not None:
                    # Followed before the chunk goes on, so the reply is known (and the next request
                    # of the conversation recognised) by the time the client has the last chunk.
                    if first_chunk_ms is None:
                        first_chunk_ms = (time.perf_counter() - turn.started) * 1000
                    try:
                        reply.feed(chunk)
                        if reply.done:
                            conversations.finish(
                                turn,
                                reply.message(),
                                model=reply.model,
                                finish_reason=reply.finish_reason,
                                first_chunk_ms=first_chunk_ms,
                                response_id=reply.response_id
                                if isinstance(reply, StreamedResponse)
                                else None,
                            )
                            reply = None
                    except Exception as exc:
                        log.warning("could not record a streamed reply: %s", _one_line(exc))
                        reply = None
                yield chunk
        except httpx.HTTPError:
            if proxy_metrics is not None:
                proxy_metrics.upstream_failed(endpoint, BROKEN)
            if span is not None:
                span.set_attribute("error.type", BROKEN)
            raise
        finally:
            await upstream.aclose()
            if span is not None:
                span.end()

    def _record_whole(turn: Turn, content: bytes) -> None:
        try:
            data = orjson.loads(content)
            response_id = None
            if turn.api == MESSAGES:
                found = reply_of_message(data)
            elif turn.api == RESPONSES:
                found = responses.reply_of_response(data)
                response_id = data.get("id") if found is not None else None
            else:
                found = reply_of_response(data)
            if found is None:
                log.warning("an upstream reply had no assistant message; not recorded")
                return
            message, model, finish_reason = found
            conversations.finish(
                turn,
                message,
                model=model,
                finish_reason=finish_reason,
                response_id=response_id if isinstance(response_id, str) else None,
            )
        except Exception as exc:
            log.warning("could not record a reply: %s", _one_line(exc))

    return app


#: Seconds /ready waits for the upstream to answer.
READY_TIMEOUT = 3.0


def store_problems(store: ProxyStore) -> list[str]:
    """What keeps the recording store from serving, one sentence each: it does not answer, or its
    schema is not this kindling's. Migrations it lacks are applied first (as the first write
    would). Blocking: a few small queries."""
    from kindling.db import schema_problems
    from kindling.proxy.recorder import COMPONENT, MIGRATIONS

    try:
        with store.engine.connect() as conn:
            problems = schema_problems(conn, COMPONENT, MIGRATIONS)
        if problems and not any("newer kindling" in problem for problem in problems):
            store.ensure_ready()
            with store.engine.connect() as conn:
                problems = schema_problems(conn, COMPONENT, MIGRATIONS)
    except Exception as exc:
        log.error("readiness: the store %s does not answer: %s", store.shown, _one_line(exc))
        return ["The recording store does not answer."]
    return problems


def _span_conversation(spans: Spans, span: Any, turn: Turn | None, tenant: str, began: int) -> None:
    """Name the request's conversation on its span, and span the warm-up inserted (from ``began``,
    in nanoseconds, to now): ids, the template's name and sizes, never a message."""
    warmed = _WARMED.get()
    if span is not None:
        span.set_attribute("kindling.tenant", tenant)
        if turn is not None:
            span.set_attribute("kindling.session_id", turn.conversation.session_id)
    if warmed is None:
        return
    _WARMED.set(None)
    template, tokens = warmed
    attributes: dict[str, Any] = {"kindling.warmup.tokens": tokens, "kindling.tenant": tenant}
    if template:
        attributes["kindling.warmup.template"] = template
    if turn is not None:
        attributes["kindling.session_id"] = turn.conversation.session_id
    spans.start("warm-up", attributes, parent=span, start_time=began, internal=True).end()


_JUDGED = frozenset(
    {
        b"host",
        b"origin",
        b"content-type",
        b"content-length",
        b"transfer-encoding",
        b"authorization",
        b"x-api-key",
        TOKEN_HEADER.encode(),
    }
)


def _judged_headers(raw: list[tuple[bytes, bytes]]) -> dict[str, str]:
    """The headers admission reads, in one pass (a Headers lookup scans them all each time); the
    first of a repeated header counts, as Starlette's ``get`` has it."""
    found: dict[str, str] = {}
    for name, value in raw:
        if name in _JUDGED:
            found.setdefault(name.decode("latin-1"), value.decode("latin-1"))
    return found


def _upstream_headers(request: Request, settings: ProxySettings, api: str = CHAT) -> dict[str, str]:
    headers = {
        k: v for k, v in request.headers.items() if k not in _REQUEST_DROP and not k.startswith("x-kindling-")
    }
    if settings.upstream_key:
        # Anthropic's API takes its key in x-api-key; OpenAI-compatible ones as a bearer token.
        if api == MESSAGES:
            headers.pop("authorization", None)
            headers["x-api-key"] = settings.upstream_key
        else:
            headers.pop("x-api-key", None)
            headers["authorization"] = f"Bearer {settings.upstream_key}"
    return headers


async def _body(request: Request, limit: int) -> bytes | None:
    """The request's body, or None when it is larger than ``limit`` bytes.

    A declared Content-Length past the limit is refused before anything is read (the HTTP parser
    never delivers more than the length declared); a chunked body is read up to the limit and no
    further, so a client cannot make the proxy hold more than that in memory. Raises
    ClientDisconnect when the client leaves (or is cut off at the read deadline) first.
    """
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit():
        return None if int(declared) > limit else await request.body()
    parts: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        parts.append(chunk)
    return b"".join(parts)


def _too_large(settings: ProxySettings) -> JSONResponse:
    return _error(
        413,
        f"kindling proxy: the request body is larger than {settings.max_body_bytes} bytes "
        "(raise it with --max-body-mb).",
    )


def _gone() -> Response:
    # The client left before its body arrived: nothing goes upstream, and nobody reads this.
    return Response(status_code=400)


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": "kindling_proxy_error"}}, status_code=status)


def _hidden(text: str, settings: ProxySettings) -> str:
    """``text`` without the credentials the upstream URL carries, should an error quote it."""
    parts = httpx.URL(settings.upstream)
    for secret in (parts.password, parts.username):
        if secret:
            text = text.replace(secret, "***")
    return text


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
