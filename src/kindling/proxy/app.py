"""The proxy's FastAPI app: chat completions, Anthropic messages and OpenAI responses (recorded,
warmed), everything else under /v1 forwarded.

Requests are forwarded with one shared ``httpx.AsyncClient``. Responses go back with the upstream's
status, headers and body; event streams are passed on chunk by chunk as they arrive. kindling's own
work (recognising the conversation, warm-up, recording) never decides whether a call succeeds: when
it fails the client's bytes go upstream unchanged and one line is logged.
"""

from __future__ import annotations

import contextlib
import hmac
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from kindling.errors import ConfigError
from kindling.proxy import responses
from kindling.proxy.anthropic import StreamedMessage, reply_of_message
from kindling.proxy.conversations import CHAT, MESSAGES, RESPONSES, Conversations, Turn
from kindling.proxy.recorder import ProxyStore, Recorder
from kindling.proxy.reply import StreamedReply, reply_of_response
from kindling.proxy.responses import StreamedResponse
from kindling.proxy.settings import ProxySettings, is_loopback

__all__ = ["TOKEN_HEADER", "create_app"]

log = logging.getLogger("kindling.proxy")

#: The header a client sends the proxy's token in (beside its own Authorization for the upstream).
TOKEN_HEADER = "x-kindling-token"

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
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        recorder.start()
        app.state.client = httpx.AsyncClient(
            timeout=httpx.Timeout(None, connect=settings.connect_timeout),
            limits=httpx.Limits(max_connections=1000, max_keepalive_connections=200),
            transport=transport,
        )
        try:
            yield
        finally:
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

    # Checked in each route rather than in a middleware, which would sit in every streamed chunk's path.
    def refused(request: Request) -> Response | None:
        if settings.token and not _authorized(request, settings):
            return _error(401, f"kindling proxy: send the proxy's token in the {TOKEN_HEADER} header.")
        return None

    @app.get("/kindling/status")
    async def status(request: Request) -> Any:
        if (refusal := refused(request)) is not None:
            return refusal
        return {
            "upstream": settings.upstream,
            "warm": settings.warm,
            "conversations_cached": len(conversations.cache),
            **conversations.counts,
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
        if (refusal := refused(request)) is not None:
            return refusal
        raw = await _body(request, settings.max_body_bytes)
        if raw is None:
            return _too_large(settings)
        turn: Turn | None = None
        try:
            turn = await conversations.begin(raw, request.headers, api)
        except Exception as exc:
            log.warning("could not record or warm a request, forwarding it unchanged: %s", _one_line(exc))
        body = turn.upstream_body if turn is not None and turn.upstream_body is not None else raw
        headers = _upstream_headers(request, settings, api)
        headers["accept-encoding"] = "identity"  # the proxy reads the reply to record it
        return await _forward(request, app.state.client, settings, path, body, headers, turn)

    @app.api_route("/v1/{path:path}", methods=["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"])
    async def passthrough(path: str, request: Request) -> Response:
        if (refusal := refused(request)) is not None:
            return refusal
        body = await _body(request, settings.max_body_bytes)
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
            return _error(504, f"kindling proxy: the upstream timed out: {_one_line(exc)}")
        except httpx.HTTPError as exc:
            return _error(
                502, f"kindling proxy: cannot reach the upstream {settings.upstream}: {_one_line(exc)}"
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
            return _error(502, f"kindling proxy: the upstream broke off its answer: {_one_line(exc)}")
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


def _authorized(request: Request, settings: ProxySettings) -> bool:
    token = settings.token or ""
    given = request.headers.get(TOKEN_HEADER)
    if given is not None and hmac.compare_digest(given.encode(), token.encode()):
        return True
    if settings.upstream_key:
        # The proxy holds the upstream key, so the client's API key may be the proxy token: in
        # Authorization (OpenAI clients) or in x-api-key (Anthropic clients).
        auth = request.headers.get("authorization", "")
        if auth.lower().startswith("bearer ") and hmac.compare_digest(
            auth[7:].strip().encode(), token.encode()
        ):
            return True
        key = request.headers.get("x-api-key")
        if key is not None and hmac.compare_digest(key.strip().encode(), token.encode()):
            return True
    return False


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
    further, so a client cannot make the proxy hold more than that in memory.
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


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": "kindling_proxy_error"}}, status_code=status)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
