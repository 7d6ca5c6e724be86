"""Counting, timing, tracing and log context for the requests an ASGI app answers.

``ObservedApp(app, metrics=..., spans=...)`` wraps a Starlette or FastAPI app: each HTTP request is
counted and timed by its route's template (``HttpMetrics``), spanned when tracing is on (``Spans``)
and given its log context (``logs.begin_request``). A service whose entry does more (the confirmation
daemon's edge) calls ``observe_call`` for the requests it hands to its framework.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from kindling.edge import Head, read_head
from kindling.observe.logs import CURRENT
from kindling.observe.metrics import UNMATCHED, HttpMetrics
from kindling.observe.tracing import Spans

#: Where ``observe_call`` keeps a request's span in its ASGI scope (absent when tracing is off).
SPAN_KEY = "kindling.span"


def route_template(scope: Scope, routes: Sequence[BaseRoute] = ()) -> str:
    """Return the template of the route that answers ``scope``: FastAPI's matched route once the
    router has run, a mount's prefix (static files), else the first of ``routes`` that matches in
    full (for a request refused before routing), else ``UNMATCHED``."""
    route = scope.get("route")
    if route is None and "endpoint" not in scope:
        for candidate in routes:
            match, child = candidate.matches(scope)
            if match is Match.FULL:
                route = child.get("route", candidate)
                break
    path = getattr(route, "path", None)
    if path:
        return str(path)
    if "endpoint" in scope and scope.get("root_path"):
        return str(scope["root_path"])
    return UNMATCHED


async def observe_call(
    app: ASGIApp,
    head: Head,
    scope: Scope,
    receive: Receive,
    send: Send,
    *,
    metrics: HttpMetrics | None,
    spans: Spans | None,
    route: str | None = None,
) -> None:
    """Call ``app`` for one HTTP request, counted, timed and spanned by its route's template
    (``route`` when the caller knows it, else ``route_template``).

    With tracing on, the request's span is in ``scope[SPAN_KEY]`` while ``app`` runs, for the
    spans of the work it does (an upstream call) and the ids it learns (a session id)."""
    CURRENT.set(head)  # the head is the request's log context
    if metrics is None and spans is None:
        await app(scope, receive, send)
        return
    started = time.perf_counter()
    status = 500  # what an app that raises before answering answers, through the server

    async def sending(message: Message) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        await send(message)

    method = scope["method"]
    span = None
    if spans is not None:
        span = scope[SPAN_KEY] = spans.start(
            method, {"http.request.method": method}, traceparent=head.traceparent
        )
    try:
        await app(scope, receive, sending)
    finally:
        template = route or route_template(scope)
        if metrics is not None:
            metrics.observe(template, method, status, time.perf_counter() - started)
        if span is not None:
            span.update_name(f"{method} {template}")
            span.set_attribute("http.route", template)
            span.set_attribute("http.response.status_code", status)
            span.end()


class ObservedApp:
    """An ASGI app whose HTTP requests are observed (``observe_call``); anything else passes through."""

    def __init__(
        self, app: ASGIApp, *, metrics: HttpMetrics | None = None, spans: Spans | None = None
    ) -> None:
        self.app = app
        self.metrics = metrics
        self.spans = spans

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Observe an HTTP request; pass anything else (lifespan, websockets) on."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await observe_call(
            self.app,
            read_head(scope["headers"]),
            scope,
            receive,
            send,
            metrics=self.metrics,
            spans=self.spans,
        )
