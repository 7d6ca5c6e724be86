"""The confirmation daemon as a FastAPI app: ``create_app(settings)``.

Routers: ``routes/confirmations.py`` (/confirm, /audit), ``routes/admin.py`` (/tokens, /whitelist),
``routes/health.py`` (/health, /ready, /metrics), ``routes/ui.py`` (/ui, the approvers' web page).
The expiry sweeper, the notification outbox worker, the token checks and the decision watch start
and stop in ``lifespan``. ``ConfirmApp`` is the daemon's edge: see its docstring.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable

from fastapi import FastAPI
from fastapi.responses import JSONResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles
from prometheus_client import CollectorRegistry
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect
from starlette.types import Receive, Scope, Send

from kindling.confirm import handlers
from kindling.confirm.calls import Call, EdgeRoutes, Found
from kindling.confirm.metrics import ConfirmMetrics
from kindling.confirm.routes import admin, confirmations, health, ui
from kindling.confirm.settings import ConfirmSettings
from kindling.confirm.store import TOKEN_CHECK_SECONDS, ConfirmationStore
from kindling.confirm.web import STATIC_DIR
from kindling.confirm.workers import run_decision_watch, run_outbox, run_sweeper, run_token_checks
from kindling.edge import BodyLimit, Head, read_head
from kindling.errors import KindlingError
from kindling.observe.asgi import observe_call, route_template
from kindling.observe.logs import CURRENT
from kindling.observe.metrics import HttpMetrics
from kindling.observe.tracing import Spans, start_tracing
from kindling.version import kindling_version

#: The status an edge request is counted with when its client left before it was answered
#: (nothing is sent; nginx's number for it).
CLIENT_LEFT = 499


class ConfirmApp(FastAPI):
    """The daemon's app, whose ASGI entry is the daemon's one edge: every request's head is read
    once (``edge.read_head``), a declared body past the limit is refused before anything else
    (``edge.BodyLimit``, one for every route), every request is counted and timed by route and
    status and, with tracing on, spanned.

    Submit, approve and deny (the routes marked ``@calls.edge``, found by ``calls.EdgeRoutes``
    from the router's own routes) are answered here: the body straight from the receive channel,
    the answer as the two ASGI messages Starlette's ``JSONResponse`` sends, with the same bytes.
    The server's direct protocol (``kindling.serving.Direct``) asks ``find_route`` and ``respond`` and
    answers the same requests on the connection itself, with the same bytes again. Everything else
    goes through the framework, with its body held to the same limit.
    """

    edge_routes: EdgeRoutes
    body_limit: BodyLimit
    http_metrics: HttpMetrics | None = None
    spans: Spans | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer an edge request here; pass anything else (lifespan included) to the framework."""
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return
        head = read_head(scope["headers"])
        if scope["method"] == "POST" and not scope.get("root_path"):
            found = self.edge_routes.find(scope["path"])
            if found is not None:
                await self._edge(found, head, scope, receive, send)
                return
        await self._framework(head, scope, receive, send)

    async def _edge(self, found: Found, head: Head, scope: Scope, receive: Receive, send: Send) -> None:
        limit = self.body_limit
        if limit.declared_past(head.content_length):
            await self._refuse(found.template, head, scope, receive, send)
            return
        status, headers, content = await self.respond(found, head, lambda: limit.read(receive))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": content})

    async def _refuse(self, template: str, head: Head, scope: Scope, receive: Receive, send: Send) -> None:
        # A declared body past the limit, before the token or anything else is read.
        started = time.perf_counter()
        await JSONResponse({"error": self.body_limit.too_large().detail}, status_code=413)(
            scope, receive, send
        )
        if self.http_metrics is not None:
            self.http_metrics.observe(template, scope["method"], 413, time.perf_counter() - started)

    async def _framework(self, head: Head, scope: Scope, receive: Receive, send: Send) -> None:
        if self.body_limit.declared_past(head.content_length):
            await self._refuse(route_template(scope, self.router.routes), head, scope, receive, send)
            return
        await observe_call(
            super().__call__,
            head,
            scope,
            self.body_limit.counting(receive),
            send,
            metrics=self.http_metrics,
            spans=self.spans,
        )

    # What ``serving.Direct`` asks: the daemon's server answers the edge requests on the connection
    # itself when they are plain (see ``kindling.serving._direct``), with the same bytes.
    @property
    def limit(self) -> BodyLimit:
        """The body limit (a request declaring more goes through the app's 413)."""
        return self.body_limit

    def find_route(self, path: str) -> Found | None:
        """What answers ``POST path`` at the edge (``calls.EdgeRoutes.find``), or None."""
        return self.edge_routes.find(path)

    async def respond(
        self, found: Found, head: Head, body: Callable[[], Awaitable[bytes]]
    ) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        """Answer an edge request: status, headers (as ``JSONResponse`` sends them) and body,
        counted, timed and spanned. The errors the app answers are answered as it answers them;
        anything else is raised (a 500)."""
        metrics = self.http_metrics
        started = time.perf_counter() if metrics is not None else 0.0
        spans = self.spans
        span = None
        if spans is not None:
            span = spans.start(
                f"POST {found.template}",
                {"http.request.method": "POST", "http.route": found.template},
                traceparent=head.traceparent,
            )
        status = 500
        try:
            CURRENT.set(head)  # the head is the request's log context
            call = Call(self.state, head, body, head, span)
            try:
                result = await found.answer(call, **found.params)
            except (KindlingError, StarletteHTTPException) as exc:
                response = handlers.error_response(exc)
                status = response.status_code
                return status, response.raw_headers, bytes(response.body)
            except ClientDisconnect:
                status = CLIENT_LEFT
                raise
            status = result.status
            headers = [
                (b"content-length", str(len(result.body)).encode("latin-1")),
                (b"content-type", b"application/json"),
            ]
            if result.headers:
                headers[:0] = [
                    (k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in result.headers.items()
                ]
            return status, headers, result.body
        finally:
            if metrics is not None:
                metrics.observe(found.template, "POST", status, time.perf_counter() - started)
            if span is not None:
                span.set_attribute("http.response.status_code", status)
                span.end()


def create_app(
    settings: ConfirmSettings | None = None,
    store: ConfirmationStore | None = None,
    *,
    background: bool = True,
    spans: Spans | None = None,
) -> ConfirmApp:
    """Build the daemon app. ``store`` defaults to the database named by ``settings``.

    ``background=False`` leaves out the sweeper and outbox loops (for schema-only uses). Metrics
    are kept unless ``settings.metrics`` is off. ``spans`` traces its requests; by default tracing
    follows the ``OTEL_*`` variables (``observe.tracing``). Raises StoreError when the database
    cannot be opened or migrated.
    """
    settings = settings or ConfirmSettings.from_env()
    owns_store = store is None
    the_store = store or ConfirmationStore(settings.database, settings)
    owns_spans = spans is None
    the_spans = spans if spans is not None else start_tracing("confirm")

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        stop = asyncio.Event()
        tasks: list[asyncio.Task[None]] = []
        if background:

            def expired(request_ids: list[str]) -> None:
                signal.fire_ids(request_ids)
                if metrics is not None:
                    metrics.expired(request_ids)

            delivered = metrics.delivered if metrics is not None else None
            tasks.append(
                asyncio.create_task(run_sweeper(the_store, settings.sweep_interval, stop, on_expired=expired))
            )
            tasks.append(
                asyncio.create_task(
                    run_outbox(the_store, settings.outbox_interval, stop, on_delivered=delivered)
                )
            )
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
            if owns_spans and the_spans is not None:
                the_spans.close()

    app = ConfirmApp(
        title="kindling confirm",
        version=kindling_version(),
        description="An agent asks, a human decides: durable, authenticated confirmation of risky actions.",
        lifespan=lifespan,
        # Swagger UI and ReDoc load their scripts from a CDN; on the origin of the approvers' page
        # such a script could read and post its forms. The schema stays at /openapi.json.
        docs_url=None,
        redoc_url=None,
    )
    app.body_limit = app.state.body_limit = BodyLimit(settings.max_body_bytes)
    app.state.settings = settings
    app.state.store = the_store
    slots = app.state.wait_slots = confirmations.WaitSlots(settings.max_waits_per_token, settings.max_waits)
    signal = app.state.decision_signal = confirmations.DecisionSignal()
    metrics: ConfirmMetrics | None = None
    app.state.registry = None
    if settings.metrics:
        registry = app.state.registry = CollectorRegistry(auto_describe=True)
        app.http_metrics = HttpMetrics(registry)
        metrics = ConfirmMetrics(registry, the_store, lambda: sum(slots.held.values()))
    app.state.metrics = metrics
    app.spans = the_spans
    handlers.install(app)
    app.include_router(confirmations.router)
    app.include_router(admin.router)
    app.include_router(health.service_router(the_store))
    app.include_router(ui.router)
    app.mount("/ui/static", StaticFiles(directory=STATIC_DIR), name="static")
    # The edge routes, from the router that declares them (included without a prefix).
    app.edge_routes = EdgeRoutes(confirmations.router.routes)

    @app.get("/", include_in_schema=False)
    async def root() -> RedirectResponse:
        return RedirectResponse("/ui", status_code=307)

    return app
