"""FastAPI dependencies: settings, the store, and the caller's identity from its bearer token.

Tests override ``get_settings`` and ``get_store`` through ``app.dependency_overrides``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi.security.utils import get_authorization_scheme_param
from starlette.concurrency import run_in_threadpool

from kindling.confirm.policy import Identity
from kindling.confirm.settings import ConfirmSettings
from kindling.confirm.store import ConfirmationStore
from kindling.errors import ConfirmError

bearer = HTTPBearer(auto_error=False, description="A kindling confirm token (agent, approver or admin).")
# What a route that checks the token itself (``authorize``) declares in the OpenAPI schema: the
# same scheme the dependency-based routes get from ``bearer``.
BEARER_SECURITY: dict[str, Any] = {"security": [{"HTTPBearer": []}]}


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


async def _identify(store: ConfirmationStore, raw: str | None) -> Identity:
    if not raw:
        raise ConfirmError("A bearer token is required (Authorization: Bearer <token>).", status_code=401)
    # A token seen since the last check of the token change counter needs no query (and no
    # thread); anything else is looked up in the database.
    identity = store.cached_identity(raw)
    if identity is None:
        identity = await run_in_threadpool(store.authenticate, raw)
    if identity is None:
        raise ConfirmError("The bearer token is unknown or revoked.", status_code=401)
    return identity


def _permit(identity: Identity, permissions: tuple[str, ...]) -> Identity:
    if not any(identity.can(p) for p in permissions):
        raise ConfirmError(
            f"Role {identity.role!r} may not do this (needs {' or '.join(permissions)}).", status_code=403
        )
    return identity


async def get_identity(
    store: StoreDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Identity:
    """Return the caller's identity. Raises ConfirmError 401 when the token is missing or unknown."""
    return await _identify(store, credentials.credentials if credentials else None)


IdentityDep = Annotated[Identity, Depends(get_identity)]


def require(*permissions: str) -> Callable[..., Any]:
    """A dependency returning the identity when its role has any of ``permissions``; else 403."""

    async def check(identity: IdentityDep) -> Identity:
        return _permit(identity, permissions)

    return check


async def authorize(request: Request, *permissions: str) -> Identity:
    """Return the caller's identity when its role has any of ``permissions``: ``require`` as a call.

    Reads the bearer token as ``bearer`` does; see ``authorize_header``. Raises ConfirmError 401
    (no, unknown or revoked token) or 403 (the role may not).
    """
    store: ConfirmationStore = request.app.state.store
    return await authorize_header(store, request.headers.get("authorization"), *permissions)


async def authorize_header(
    store: ConfirmationStore, authorization: str | None, *permissions: str
) -> Identity:
    """Return the identity behind an ``Authorization`` header's bearer token when its role has any
    of ``permissions``.

    For the routes every agent and approver hits on each request (submit, approve, deny, read):
    FastAPI's resolution of the dependency chain cost more per request than the check itself.
    Raises ConfirmError 401 (no, unknown or revoked token) or 403 (the role may not).
    """
    scheme, raw = get_authorization_scheme_param(authorization)
    return _permit(await _identify(store, raw if scheme.lower() == "bearer" else None), permissions)
