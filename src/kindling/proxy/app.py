"""The proxy's FastAPI app: chat completions, Anthropic messages and OpenAI responses (recorded,
warmed), everything else under /v1 forwarded.

Requests are forwarded with one shared ``httpx.AsyncClient``. Responses go back with the upstream's
status, headers and body; event streams are passed on chunk by chunk as they arrive. kindling's own
work (recognising the conversation, warm-up, recording) never decides whether a call succeeds: when
it fails the client's bytes go upstream unchanged and one line is logged.

Before any of that, a request must be one no browser forged (``kindling.httpguard``: its Host, its
Origin, a JSON body) and carry a token the proxy accepts, which names its tenant
(``kindling.proxy.tenants``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.requests import ClientDisconnect

from kindling.errors import ConfigError
from kindling.httpguard import allowed_hosts, check_request, has_dot_segments
from kindling.proxy import responses
from kindling.proxy.anthropic import StreamedMessage, reply_of_message
from kindling.proxy.builder import TemplateBuilder
from kindling.proxy.conversations import CHAT, MESSAGES, RESPONSES, Conversations, Turn
from kindling.proxy.recorder import ProxyStore, Recorder
from kindling.proxy.reply import StreamedReply, reply_of_response
from kindling.proxy.responses import StreamedResponse
from kindling.proxy.settings import ProxySettings, is_loopback
from kindling.proxy.tenants import TOKEN_HEADER, Refusal, TenantAuth, TenantTokens

__all__ = ["TOKEN_HEADER", "create_app"]

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


def create_app(
    settings: ProxySettings,
    *,
    store: ProxyStore | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> FastAPI:
    """Build the proxy app for ``settings``. Raises StoreError when the store URL is malformed.

    A store that is merely down does not stop the app: recordings queue until it is back. Raises
    ConfigError for a non-loopback address without a token, however the settings were built.
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

    app = FastAPI(
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

    # Checked in each route rather than in a middleware, which would sit in every streamed chunk's path.
    async def admitted(request: Request, *, forms: bool = False) -> str | Response:
        """The request's tenant, or the response refusing it."""
        headers = _judged_headers(request.scope["headers"])
        forged = check_request(request.method, headers, hosts, forms=forms)
        if forged is not None:
            status_code, reason = forged
            return _error(status_code, f"kindling proxy: {reason}.")
        try:
            return await auth.tenant_of(headers)
        except Refusal as refusal:
            return _error(refusal.status, str(refusal))

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
        try:
            turn = await conversations.begin(raw, request.headers, api, tenant)
        except Exception as exc:
            log.warning("could not record or warm a request, forwarding it unchanged: %s", _one_line(exc))
        body = turn.upstream_body if turn is not None and turn.upstream_body is not None else raw
        headers = _upstream_headers(request, settings, api)
        headers["accept-encoding"] = "identity"  # the proxy reads the reply to record it
        return await _forward(request, app.state.client, settings, path, body, headers, turn)

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
        return await _forward(request, app.state.client, settings, path, body, headers, None)

    async def _forward(
        request: Request,
        client: httpx.AsyncClient,
        settings: ProxySettings,
        path: str,
        body: bytes,
        headers: dict[str, str],
        turn: Turn | None,
    ) -> Response:
        url = f"{settings.upstream}/{path}"
        if request.url.query:
            url += "?" + request.url.query
        upstream_request = client.build_request(request.method, url, content=body, headers=headers)
        try:
            upstream = await client.send(upstream_request, stream=True)
        except httpx.TimeoutException as exc:
            return _error(504, f"kindling proxy: the upstream timed out: {_hidden(_one_line(exc), settings)}")
        except httpx.HTTPError as exc:
            return _error(
                502,
                f"kindling proxy: cannot reach the upstream {shown_upstream}: {_hidden(_one_line(exc), settings)}",
            )
        response_headers = {k: v for k, v in upstream.headers.items() if k.lower() not in _RESPONSE_DROP}
        if upstream.headers.get("content-type", "").startswith("text/event-stream"):
            response_headers.pop("content-length", None)
            return StreamingResponse(
                _relay(upstream, turn), status_code=upstream.status_code, headers=response_headers
            )
        try:
            content = b"".join([chunk async for chunk in upstream.aiter_raw()])
        except httpx.HTTPError as exc:
            return _error(
                502, f"kindling proxy: the upstream broke off its answer: {_hidden(_one_line(exc), settings)}"
            )
        finally:
            await upstream.aclose()
        if turn is not None and upstream.status_code == 200 and "content-encoding" not in upstream.headers:
            # Before answering, so the conversation's next request is recognised however fast it comes.
            _record_whole(turn, content)
        return Response(content, status_code=upstream.status_code, headers=response_headers)

    async def _relay(upstream: httpx.Response, turn: Turn | None) -> AsyncIterator[bytes]:
        reply: StreamedReply | StreamedMessage | StreamedResponse | None = None
        if turn is not None and upstream.status_code == 200:
            if turn.api == MESSAGES:
                reply = StreamedMessage()
            elif turn.api == RESPONSES:
                reply = StreamedResponse()
            else:
                reply = StreamedReply()
        first_chunk_ms: float | None = None
        try:
            async for chunk in upstream.aiter_raw():
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
        finally:
            await upstream.aclose()

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
