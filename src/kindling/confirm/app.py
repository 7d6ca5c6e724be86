"""The confirmation daemon as a FastAPI app: ``create_app(settings)``.

Routers: ``routes/confirmations.py`` (/confirm, /audit), ``routes/admin.py`` (/tokens, /whitelist),
``routes/health.py`` (/health), ``routes/ui.py`` (/ui, the approvers' web page). The expiry sweeper
and the notification outbox worker start and stop in ``lifespan``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

from fastapi import FastAPI
from fastapi.responses import JSONResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from kindling import __version__
from kindling.confirm import handlers
from kindling.confirm.routes import admin, confirmations, health, ui
from kindling.confirm.settings import ConfirmSettings
from kindling.confirm.store import TOKEN_CHECK_SECONDS, ConfirmationStore
from kindling.confirm.web import STATIC_DIR
from kindling.confirm.workers import run_decision_watch, run_outbox, run_sweeper, run_token_checks
from kindling.errors import KindlingError


class BodyLimit:
    """Refuse any request body past ``max_bytes`` with 413, before it is parsed or authenticated.

    Covers every route, the unauthenticated sign-in form included: a declared Content-Length past
    the limit is answered at once; a streamed body is cut off as soon as it passes the limit.
    (Starlette's own limiter answers in plain text; this one keeps the ``{"error": ...}`` shape.)
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on with a receive channel that counts body bytes."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        message = f"Body is larger than {self.max_bytes} bytes."
        declared = _content_length(scope)
        if declared.isdigit() and int(declared) > self.max_bytes:
            await JSONResponse({"error": message}, status_code=413)(scope, receive, send)
            return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            received = await receive()
            if received["type"] == "http.request":
                seen += len(received.get("body", b""))
                if seen > self.max_bytes:
                    # An HTTPException, so FastAPI's form parser passes it on instead of calling it a 400.
                    raise StarletteHTTPException(413, message)
            return received

        await self.app(scope, limited, send)


def _content_length(scope: Scope) -> str:
    # The first Content-Length, as ``Headers(scope=scope).get`` reads it, without building the
    # mapping on every request.
    for name, value in scope["headers"]:
        if name.lower() == b"content-length":
            return value.decode("latin-1")
    return ""


class HotPaths:
    """The daemon's ASGI entry: submit, approve and deny are answered here, the rest by ``app``.

    Every agent and approver makes these requests, and the framework spent several times what
    their handlers cost on each before reaching them (FastAPI's middleware layers and route
    matching, then Starlette's request and response objects). Here the three headers they read
    come from one pass over the scope, the body straight from the receive channel and the answer
    goes out as the two ASGI messages Starlette's ``JSONResponse`` sends, with the same bytes. What
    answers is what the routes call (``confirmations.hot_route``), so ``app`` answers these
    requests identically when called on its own and its OpenAPI schema documents them: the token
    is checked first, the body limit applies as ``BodyLimit`` applies it (a declared length past it
    before the token, a body that grows past it after), errors are answered by
    ``handlers.error_response`` and anything else is a 500, as in the app.
    """

    def __init__(self, app: FastAPI) -> None:
        self.app = app
        self.state = app.state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer a hot request here; pass anything else (lifespan included) to the app."""
        if scope["type"] == "http" and scope["method"] == "POST" and not scope.get("root_path"):
            answer = confirmations.hot_route(scope["path"])
            if answer is not None:
                await self._hot(answer, scope, receive, send)
                return
        await self.app(scope, receive, send)

    async def _hot(
        self,
        answer: Callable[[confirmations.Call], Awaitable[confirmations.Answer]],
        scope: Scope,
        receive: Receive,
        send: Send,
    ) -> None:
        # The first of each header, as Starlette's ``Headers.get`` reads it (names come lowercased).
        authorization = length = key = None
        for name, value in scope["headers"]:
            if name == b"authorization":
                if authorization is None:
                    authorization = value.decode("latin-1")
            elif name == b"content-length":
                if length is None:
                    length = value.decode("latin-1")
            elif name == b"idempotency-key" and key is None:
                key = value.decode("latin-1")
        max_bytes = self.state.settings.max_body_bytes
        too_large = f"Body is larger than {max_bytes} bytes."
        if length is not None and length.isdigit() and int(length) > max_bytes:
            await JSONResponse({"error": too_large}, status_code=413)(scope, receive, send)
            return

        async def body() -> bytes:
            # What ``Request.stream`` reads, cut off as ``BodyLimit`` cuts it off.
            raw = b""
            while True:
                message = await receive()
                if message["type"] != "http.request":
                    raise ClientDisconnect()
                raw += message.get("body", b"")
                if len(raw) > max_bytes:
                    raise StarletteHTTPException(413, too_large)
                if not message.get("more_body", False):
                    return raw

        status, headers, content = await self.respond(answer, authorization, key, body)
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": content})

    # What ``serving.Direct`` asks: the daemon's server answers these requests on the connection
    # itself when they are plain (see ``kindling.serving._direct``), with the same bytes.
    @property
    def max_body(self) -> int:
        """The body limit (a request declaring more goes through the app's 413)."""
        return int(self.state.settings.max_body_bytes)

    def route(self, path: str) -> Callable[[confirmations.Call], Awaitable[confirmations.Answer]] | None:
        """What answers ``POST path`` here (``confirmations.hot_route``), or None."""
        return confirmations.hot_route(path)

    async def respond(
        self,
        answer: Callable[[confirmations.Call], Awaitable[confirmations.Answer]],
        authorization: str | None,
        key: str | None,
        body: Callable[[], Awaitable[bytes]],
    ) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        """Answer a hot request: status, headers (as ``JSONResponse`` sends them) and body. The
        errors the app answers are answered as it answers them; anything else is raised."""
        try:
            result = await answer(confirmations.Call(self.state, authorization, key, body))
        except (KindlingError, StarletteHTTPException) as exc:
            response = handlers.error_response(exc)
            return response.status_code, response.raw_headers, bytes(response.body)
        headers = [
            (b"content-length", str(len(result.body)).encode("latin-1")),
            (b"content-type", b"application/json"),
        ]
        if result.headers:
            headers[:0] = [
                (k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in result.headers.items()
            ]
        return result.status, headers, result.body


def create_app(
    settings: ConfirmSettings | None = None,
    store: ConfirmationStore | None = None,
    *,
    background: bool = True,
) -> FastAPI:
    """Build the daemon app. ``store`` defaults to the database named by ``settings``.

    ``background=False`` leaves out the sweeper and outbox loops (for schema-only uses).
    Raises StoreError when the database cannot be opened or migrated.
    """
    settings = settings or ConfirmSettings.from_env()
    owns_store = store is None
    the_store = store or ConfirmationStore(settings.database, settings)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        stop = asyncio.Event()
        tasks: list[asyncio.Task[None]] = []
        if background:
            tasks.append(
                asyncio.create_task(
                    run_sweeper(the_store, settings.sweep_interval, stop, on_expired=signal.fire_ids)
                )
            )
            tasks.append(asyncio.create_task(run_outbox(the_store, settings.outbox_interval, stop)))
            tasks.append(asyncio.create_task(run_token_checks(the_store, TOKEN_CHECK_SECONDS, stop)))
            tasks.append(
                asyncio.create_task(
                    run_decision_watch(the_store, signal.ids, signal.fire_ids, settings.poll_interval, stop)
                )
            )
        try:
            yield
        finally:
            stop.set()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            if owns_store:
                the_store.close()

    app = FastAPI(
        title="kindling confirm",
        version=__version__,
        description="An agent asks, a human decides: durable, authenticated confirmation of risky actions.",
        lifespan=lifespan,
        # Swagger UI and ReDoc load their scripts from a CDN; on the origin of the approvers' page
        # such a script could read and post its forms. The schema stays at /openapi.json.
        docs_url=None,
        redoc_url=None,
    )
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    app.state.settings = settings
    app.state.store = the_store
    app.state.wait_slots = confirmations.WaitSlots(settings.max_waits_per_token, settings.max_waits)
    signal = app.state.decision_signal = confirmations.DecisionSignal()
    handlers.install(app)
    app.include_router(confirmations.router)
    app.include_router(admin.router)
    app.include_router(health.router)
    app.include_router(ui.router)
    app.mount("/ui/static", StaticFiles(directory=STATIC_DIR), name="static")

    @app.get("/", include_in_schema=False)
    async def root() -> RedirectResponse:
        return RedirectResponse("/ui", status_code=307)

    return app
