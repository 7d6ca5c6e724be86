"""``/health`` (liveness), ``/ready`` (the database answers at the current schema) and ``/metrics``.

``/health`` and ``/ready`` need no token and change nothing; each is one cheap call, fit to poll
every second. ``/metrics`` (Prometheus text format) needs a token like the rest of the API: the
metrics token (``KINDLING_CONFIRM_METRICS_TOKEN``, good for nothing else) or an approver's or
admin's; it answers 404 when the daemon runs with metrics off.
"""

from __future__ import annotations

import sqlalchemy as sa
from fastapi import APIRouter, Request
from fastapi.responses import Response
from sqlalchemy.exc import SQLAlchemyError
from starlette.concurrency import run_in_threadpool

from kindling.confirm import tables
from kindling.confirm.bodies import error_responses
from kindling.confirm.deps import authorize_header
from kindling.confirm.handlers import STORE_UNAVAILABLE, log
from kindling.confirm.store import COMPONENT, ConfirmationStore
from kindling.db import schema_problems, store_error
from kindling.errors import NotFoundError
from kindling.observe.health import health_router
from kindling.observe.metrics import render, token_matches


def readiness(store: ConfirmationStore) -> list[str]:
    """Return what keeps the daemon from serving (one sentence each): the database does not answer,
    or its schema is not the one this kindling expects. Blocking: two small queries."""
    try:
        with store.engine.connect() as conn:
            problems = schema_problems(conn, COMPONENT, tables.MIGRATIONS)
            conn.execute(sa.select(tables.requests.c.id).limit(1)).first()
    except SQLAlchemyError as exc:
        log.error("readiness check failed: %s", store_error(exc, store.target, "read"))
        return [STORE_UNAVAILABLE]
    return problems


def service_router(store: ConfirmationStore) -> APIRouter:
    """Return the router of ``/health``, ``/ready`` and ``/metrics`` for a daemon on ``store``."""

    async def ready() -> list[str]:
        return await run_in_threadpool(readiness, store)

    router = health_router(ready, info=lambda: {"database": store.engine.dialect.name})

    @router.get(
        "/metrics",
        summary="Prometheus metrics (the metrics token, or an approver's or admin's)",
        response_class=Response,
        responses={
            200: {"content": {"text/plain": {}}, "description": "The Prometheus text format"},
            **error_responses(401, 403, 404),
        },
    )
    async def metrics(request: Request) -> Response:
        state = request.app.state
        if state.registry is None:
            raise NotFoundError(
                "Metrics are off on this daemon (it runs with --no-metrics).", kind="route", name="/metrics"
            )
        authorization = request.headers.get("authorization")
        if not token_matches(state.settings.metrics_token, authorization):
            await authorize_header(state.store, authorization, "read")
        body, content_type = await run_in_threadpool(render, state.registry)
        return Response(body, media_type=content_type)

    return router
