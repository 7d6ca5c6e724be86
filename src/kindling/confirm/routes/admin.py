"""``/tokens`` and ``/whitelist``: managed by admins only."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from kindling.confirm.bodies import RuleBody, TokenBody, error_responses, openapi_body, read_body
from kindling.confirm.deps import StoreDep, require
from kindling.confirm.policy import Identity

router = APIRouter(tags=["admin"])
Admin = Annotated[Identity, Depends(require("admin"))]


@router.post(
    "/tokens",
    status_code=201,
    summary="Create a token",
    openapi_extra=openapi_body(TokenBody),
    responses=error_responses(400, 401, 403, 409, 413),
)
async def create_token(request: Request, identity: Admin, store: StoreDep) -> JSONResponse:
    """Create a token; 201 with ``token`` (shown once), 409 when the name is taken."""
    body = await read_body(request, TokenBody)
    info, raw = await run_in_threadpool(
        lambda: store.create_token(body.role, body.name, actor=identity.name, minted_by=identity.token_id)
    )
    return JSONResponse({**info.__dict__, "token": raw}, status_code=201)


@router.get("/tokens", summary="List tokens (never their secrets)", responses=error_responses(401, 403))
async def list_tokens(identity: Admin, store: StoreDep) -> dict[str, Any]:
    """Return ``{"tokens": [...]}``."""
    return {"tokens": [t.__dict__ for t in await run_in_threadpool(store.list_tokens)]}


@router.delete("/tokens/{name}", summary="Revoke a token", responses=error_responses(400, 401, 403, 404))
async def revoke_token(name: str, identity: Admin, store: StoreDep) -> dict[str, Any]:
    """Revoke; 200 with the token, 404 when there is no live token of that name."""
    info = await run_in_threadpool(lambda: store.revoke_token(name, actor=identity.name))
    return dict(info.__dict__)


@router.post(
    "/whitelist",
    status_code=201,
    summary="Add a whitelist rule",
    openapi_extra=openapi_body(RuleBody),
    responses=error_responses(400, 401, 403, 413),
)
async def add_rule(request: Request, identity: Admin, store: StoreDep) -> JSONResponse:
    """Add a rule; 201 with it, 400 for a high-risk action (never auto-approved)."""
    body = await read_body(request, RuleBody)
    rule = await run_in_threadpool(lambda: store.add_rule(body.action, body.session_key, actor=identity.name))
    return JSONResponse(rule.__dict__, status_code=201)


@router.get("/whitelist", summary="List whitelist rules", responses=error_responses(401, 403))
async def list_rules(identity: Admin, store: StoreDep) -> dict[str, Any]:
    """Return ``{"rules": [...]}``."""
    return {"rules": [r.__dict__ for r in await run_in_threadpool(store.list_rules)]}


@router.delete(
    "/whitelist/{rule_id}", summary="Remove a whitelist rule", responses=error_responses(400, 401, 403, 404)
)
async def remove_rule(
    rule_id: Annotated[int, Path(ge=1, le=2**31 - 1)], identity: Admin, store: StoreDep
) -> dict[str, Any]:
    """Remove; 200, or 404 when there is no such rule."""
    await run_in_threadpool(lambda: store.remove_rule(rule_id, actor=identity.name))
    return {"removed": rule_id}
