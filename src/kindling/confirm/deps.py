"""FastAPI dependencies: settings, the store, and the caller's identity from its bearer token.

Tests override ``get_settings`` and ``get_store`` through ``app.dependency_overrides``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool

from kindling.confirm.policy import Identity
from kindling.confirm.settings import ConfirmSettings
from kindling.confirm.store import ConfirmationStore
from kindling.errors import ConfirmError

bearer = HTTPBearer(auto_error=False, description="A kindling confirm token (agent, approver or admin).")


# Async although they do no I/O: FastAPI runs a plain ``def`` dependency on a worker thread, a
# thread hop per dependency per request.
async def get_settings(request: Request) -> ConfirmSettings:
    """Return the settings the app was built with."""
    settings: ConfirmSettings = request.app.state.settings
    return settings


async def get_store(request: Request) -> ConfirmationStore:
    """Return the app's confirmation store."""
    store: ConfirmationStore = request.app.state.store
    return store


SettingsDep = Annotated[ConfirmSettings, Depends(get_settings)]
StoreDep = Annotated[ConfirmationStore, Depends(get_store)]


async def get_identity(
    store: StoreDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Identity:
    """Return the caller's identity. Raises ConfirmError 401 when the token is missing or unknown."""
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise ConfirmError("A bearer token is required (Authorization: Bearer <token>).", status_code=401)
    # A token seen since the last check of the token change counter needs no query (and no
    # thread); anything else is looked up in the database.
    identity = store.cached_identity(credentials.credentials)
    if identity is None:
        identity = await run_in_threadpool(store.authenticate, credentials.credentials)
    if identity is None:
        raise ConfirmError("The bearer token is unknown or revoked.", status_code=401)
    return identity


IdentityDep = Annotated[Identity, Depends(get_identity)]


def require(*permissions: str) -> Callable[..., Any]:
    """A dependency returning the identity when its role has any of ``permissions``; else 403."""

    async def check(identity: IdentityDep) -> Identity:
        if not any(identity.can(p) for p in permissions):
            raise ConfirmError(
                f"Role {identity.role!r} may not do this (needs {' or '.join(permissions)}).", status_code=403
            )
        return identity

    return check
