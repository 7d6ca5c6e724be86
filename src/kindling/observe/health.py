"""``/health`` and ``/ready`` for a FastAPI service: cheap enough to poll every second.

``/health`` is liveness: the process answers, and it touches nothing else (a database outage must
not get a healthy process restarted). ``/ready`` runs the service's own checks (its store answers,
its schema is current, its upstream answers) and is 503 with the problems when any fails.
Neither needs a token or changes anything.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse

#: A readiness check: returns the problems found, each one sentence (an empty list: ready).
ReadyCheck = Callable[[], Awaitable[list[str]]]


def health_router(ready: ReadyCheck, *, info: Callable[[], dict[str, Any]] | None = None) -> APIRouter:
    """Return a router answering ``GET /health`` (200 ``{"status": "ok", **info()}``) and
    ``GET /ready`` (200 ``{"status": "ready"}``, or 503 ``{"status": "not ready", "problems": [...]}``)."""
    router = APIRouter(tags=["health"])

    @router.get("/health", summary="Liveness: the process answers (touches nothing else)")
    async def health() -> dict[str, Any]:
        return {"status": "ok", **(info() if info is not None else {})}

    @router.get(
        "/ready",
        summary="Readiness: what the service needs answers",
        responses={503: {"description": "Not ready: the problems, one sentence each"}},
    )
    async def ready_route() -> JSONResponse:
        problems = await ready()
        if problems:
            return JSONResponse({"status": "not ready", "problems": problems}, status_code=503)
        return JSONResponse({"status": "ready"})

    return router
