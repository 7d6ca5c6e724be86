"""``/health`` and ``/ready`` for a FastAPI service: cheap enough to poll every second.

``/health`` is liveness: the process answers, and it touches nothing else (a database outage must
not get a healthy process restarted). ``/ready`` runs the service's own checks (its store answers,
its schema is current, its upstream answers) and is 503 with the problems when any fails.
Neither needs a token or changes anything.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse

#: A readiness check: returns the problems found, each one sentence (an empty list: ready).
ReadyCheck = Callable[[], Awaitable[list[str]]]


#: Seconds a readiness answer is kept: a probe polling every second costs one real check in two.
READY_TTL = 2.0


class CachedReady:
    """A readiness check whose answer is kept ``ttl`` seconds (``READY_TTL``), for a check that
    reaches out (a database, an upstream): probes that poll every second, however many, run it at
    most once per ``ttl``, and concurrent probes wait for the one check under way."""

    def __init__(self, check: ReadyCheck, ttl: float = READY_TTL) -> None:
        self.check = check
        self.ttl = ttl
        self._answer: list[str] = []
        self._until = 0.0
        self._lock: asyncio.Lock | None = None

    async def __call__(self) -> list[str]:
        """Return the problems found by the last check, running it again once it is ``ttl`` old."""
        if time.monotonic() < self._until:
            return list(self._answer)
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if time.monotonic() >= self._until:
                self._answer = await self.check()
                self._until = time.monotonic() + self.ttl
            return list(self._answer)


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
