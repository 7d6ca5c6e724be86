"""The confirmation daemon as a FastAPI app: ``create_app(settings)``.

Routers: ``routes/confirmations.py`` (/confirm, /audit), ``routes/admin.py`` (/tokens, /whitelist),
``routes/health.py`` (/health), ``routes/ui.py`` (/ui, the approvers' web page). The expiry sweeper
and the notification outbox worker start and stop in ``lifespan``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from fastapi import FastAPI
from fastapi.responses import RedirectResponse
from fastapi.staticfiles import StaticFiles

from kindling import __version__
from kindling.confirm import handlers
from kindling.confirm.routes import admin, confirmations, health, ui
from kindling.confirm.settings import ConfirmSettings
from kindling.confirm.store import ConfirmationStore
from kindling.confirm.web import STATIC_DIR
from kindling.confirm.workers import run_outbox, run_sweeper


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
            tasks.append(asyncio.create_task(run_sweeper(the_store, settings.sweep_interval, stop)))
            tasks.append(asyncio.create_task(run_outbox(the_store, settings.outbox_interval, stop)))
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
        # Every body, the unauthenticated sign-in form included, is cut off past the limit (413)
        # before it is parsed; the JSON routes check the same limit themselves as well.
        max_body_size=settings.max_body_bytes,
    )
    app.state.settings = settings
    app.state.store = the_store
    app.state.wait_slots = confirmations.WaitSlots(settings.max_waits_per_token, settings.max_waits)
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
