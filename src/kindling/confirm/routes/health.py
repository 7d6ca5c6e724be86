"""``/health``: is the daemon up and its database reachable (no token needed, no state change)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from kindling.confirm.deps import StoreDep
from kindling.confirm.handlers import STORE_UNAVAILABLE, log
from kindling.errors import StoreError

router = APIRouter(tags=["health"])


@router.get("/health", summary="Liveness and database check")
async def health(store: StoreDep) -> Any:
    """Return 200 ``{"status": "ok", ...}``, or 503 when the database cannot be read."""
    try:
        counts = await run_in_threadpool(store.counts)
    except StoreError as exc:
        log.error("health check failed: %s", exc)
        return JSONResponse({"status": "error", "error": STORE_UNAVAILABLE}, status_code=503)
    return {"status": "ok", "database": store.engine.dialect.name, "pending": counts["pending"]}
