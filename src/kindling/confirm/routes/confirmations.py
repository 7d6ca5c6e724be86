"""``/confirm``: submit, read (with long-poll), approve and deny; ``/audit``: the event log."""

from __future__ import annotations

import asyncio
import functools
import json
from typing import Annotated, Any, Literal

import orjson
from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from kindling.confirm.bodies import (
    ApproveBody,
    DenyBody,
    SubmitBody,
    displayable_details,
    error_responses,
    openapi_body,
    parse_body,
)
from kindling.confirm.calls import Answer, Call, answer_route, edge
from kindling.confirm.deps import (
    BEARER_SECURITY,
    SettingsDep,
    StoreDep,
    authorize,
    authorize_header,
    require,
)
from kindling.confirm.policy import Identity, orjson_agrees
from kindling.confirm.settings import ConfirmSettings
from kindling.confirm.spoofing import text_warnings
from kindling.confirm.store import Confirmation, ConfirmationStore, SubmitOutcome
from kindling.errors import ConfirmError, NotFoundError

router = APIRouter(tags=["confirmations"])

# The routes every agent and approver calls on each request (submit, read one, approve, deny) take
# the bare Request and call ``authorize``, the store and the settings themselves: FastAPI's
# resolution of a dependency chain cost more per request than all they do. The others use
# dependencies.
Reader = Annotated[Identity, Depends(require("read", "read_own"))]
AuditReader = Annotated[Identity, Depends(require("read"))]


def request_view(record: Confirmation, settings: ConfirmSettings) -> dict[str, Any]:
    """Return the JSON shape of a request, with its approve/deny URLs.

    ``warnings`` lists the characters of the action, description and details that could make what an
    approver reads differ from what runs (bidi overrides, invisible characters, look-alikes).
    """
    data = record.to_dict()
    data["details"] = displayable_details(record.details)
    link = f"{settings.base_url}/confirm/{record.id}"
    data["approve_url"] = f"{link}/approve"
    data["deny_url"] = f"{link}/deny"
    data["warnings"] = text_warnings(record.description, record.details, record.action)
    return data


def encode_json(content: Any) -> bytes:
    """Return ``content`` as JSON bytes: what Starlette's ``JSONResponse`` writes, by orjson when its
    bytes are the standard library's.

    orjson writes the same bytes as Starlette's ``json.dumps`` call, several times faster, except
    for floats under 1e-4 (no exponent), NaN and infinities (null instead of an error), integers
    past 64 bits or keys that are not strings (it refuses them) and types other than JSON's own;
    those take the standard path (``policy.orjson_agrees``). Raises what ``json.dumps`` raises.
    """
    if orjson_agrees(content):
        try:
            return orjson.dumps(content)
        except orjson.JSONEncodeError:
            pass
    return json.dumps(
        content, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":")
    ).encode("utf-8")


class JSONAnswer(JSONResponse):
    """A JSON answer encoded by ``encode_json``: Starlette's bytes, by orjson where it writes them."""

    def render(self, content: Any) -> bytes:
        """Return the encoded body."""
        return encode_json(content)


def json_view(data: dict[str, Any], status_code: int = 200) -> JSONResponse:
    """Answer ``data`` as JSON, encoded directly (FastAPI's encoder recurses a few frames a level)."""
    return JSONAnswer(data, status_code=status_code)


def _submit_view(record: Confirmation, settings: ConfirmSettings) -> Answer:
    data = request_view(record, settings)
    if record.status == "pending":
        data["message"] = (
            f"Waiting for a human to approve {record.action!r}; it is denied if nobody decides "
            f"within {record.timeout_seconds}s."
        )
        return Answer(202, encode_json(data))
    data["message"] = f"{record.action!r} is {record.status.replace('_', '-')}."
    return Answer(200, encode_json(data))


async def submit_call(call: Call) -> Answer:
    """Submit as ``POST /confirm`` does; return the answer. Raises KindlingError (and 413) as the route."""
    store: ConfirmationStore = call.state.store
    settings: ConfirmSettings = call.state.settings
    identity = await authorize_header(store, call.authorization, "submit")
    call.caller(identity.name)
    body = parse_body(await call.body(), SubmitBody)
    if call.span is not None:
        call.trace(session_id=body.session_key)
    key = call.idempotency_key or None
    if key is not None and len(key) > 200:
        raise ConfirmError("Idempotency-Key is longer than 200 characters.", status_code=400)
    # The answer is put together while the commit syncs, and sent only once it is done.
    outcome, committed = await store.writes.run_staged(
        lambda: store.submit(
            action=body.action,
            description=body.description,
            details=body.details,
            requester=body.requester,
            session_key=body.session_key,
            timeout_seconds=body.timeout_seconds,
            identity=identity,
            idempotency_key=key,
        )
    )
    answer = _submit_answer(outcome, body.action, identity.name, settings)
    await committed
    if call.span is not None and outcome.request is not None:
        call.trace(request_id=outcome.request.id)
    if outcome.kind == "auto_approved" and call.state.metrics is not None:
        call.state.metrics.decided("auto_approved")
    return answer


def _submit_answer(outcome: SubmitOutcome, action: str, token_name: str, settings: ConfirmSettings) -> Answer:
    if outcome.kind == "rate_limited":
        error = (
            f"Rate limit: at most {settings.rate_limit} requests for {action!r} "
            f"from {token_name!r} every {settings.rate_window}s."
            if outcome.limit == "action"
            else f"Rate limit: at most {settings.token_rate_limit} requests from {token_name!r} "
            f"every {settings.rate_window}s."
        )
        return Answer(
            429,
            encode_json(
                {
                    "error": error,
                    "remaining": 0,
                    "window_seconds": settings.rate_window,
                    "retry_after": outcome.retry_after,
                }
            ),
            {"Retry-After": str(outcome.retry_after)},
        )
    assert outcome.request is not None
    return _submit_view(outcome.request, settings)


@router.post(
    "/confirm",
    status_code=202,
    summary="Ask a human to confirm an action",
    openapi_extra={**openapi_body(SubmitBody), **BEARER_SECURITY},
    responses={
        200: {"description": "Auto-approved by a whitelist rule"},
        **error_responses(400, 401, 403, 413, 422, 429),
    },
)
@edge(submit_call)
async def submit(request: Request) -> Response:
    """Submit a request: 202 pending, 200 auto-approved, 429 past the per-action rate limit."""
    return await answer_route(request, submit_call)


class WaitSlots:
    """Counts long polls held open, per token and in all, so waiting cannot exhaust the daemon.

    Used only from the event loop's thread, between awaits, so it needs no lock.
    """

    def __init__(self, per_token: int, total: int) -> None:
        self.per_token = per_token
        self.total = total
        self.held: dict[str, int] = {}

    def acquire(self, token_id: str) -> bool:
        """Take a slot for ``token_id``; False when it or the daemon already holds the most allowed."""
        if sum(self.held.values()) >= self.total or self.held.get(token_id, 0) >= self.per_token:
            return False
        self.held[token_id] = self.held.get(token_id, 0) + 1
        return True

    def release(self, token_id: str) -> None:
        """Give back a slot taken by ``acquire``."""
        left = self.held.get(token_id, 0) - 1
        if left > 0:
            self.held[token_id] = left
        else:
            self.held.pop(token_id, None)


class DecisionSignal:
    """The long polls waiting for a decision, by request id: a decision wakes its own request's.

    ``fire(record)`` hands the decided request to its waiters, which answer with it and read
    nothing; ``fire_ids`` wakes the waiters of requests decided elsewhere (expired by the sweeper,
    decided by another daemon: ``run_decision_watch`` finds those with one query for all waiters),
    which read their request once. ``close`` (on shutdown) ends every wait at once. Used from the
    event loop's thread, except ``close``.
    """

    def __init__(self) -> None:
        self._waiting: dict[str, set[asyncio.Future[Confirmation | None]]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self.closed = False

    def ids(self) -> list[str]:
        """Return the ids of the requests someone waits for now."""
        return list(self._waiting)

    def fire(self, record: Confirmation) -> None:
        """Wake the waiters of ``record``'s request with it (just decided or expired here)."""
        for future in self._waiting.pop(record.id, ()):
            if not future.done():
                future.set_result(record)

    def fire_ids(self, request_ids: list[str]) -> None:
        """Wake the waiters of these requests; they read their request again."""
        for request_id in request_ids:
            for future in self._waiting.pop(request_id, ()):
                if not future.done():
                    future.set_result(None)

    def close(self) -> None:
        """End every wait now and every later one at once (shutdown). Safe from any thread."""
        self.closed = True
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(lambda: self.fire_ids(self.ids()))

    async def wait(self, request_id: str, timeout: float, request: Request) -> Confirmation | None:
        """Wait for ``request_id``'s decision, ``timeout`` seconds or the client going away.

        Returns the decided request when this daemon decided it, else None (read it again).
        """
        if self.closed:
            return None
        self._loop = asyncio.get_running_loop()
        future: asyncio.Future[Confirmation | None] = self._loop.create_future()
        self._waiting.setdefault(request_id, set()).add(future)
        gone = asyncio.ensure_future(_disconnected(request))
        try:
            await asyncio.wait((future, gone), timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
            waiting = self._waiting.get(request_id)
            if waiting is not None:
                waiting.discard(future)
                if not waiting:
                    del self._waiting[request_id]
        return future.result() if future.done() and not future.cancelled() else None


async def _disconnected(request: Request) -> None:
    # The request has no body left to read: the next message is the client hanging up.
    while (await request.receive())["type"] != "http.disconnect":
        pass


def _visible(record: Confirmation, identity: Identity) -> bool:
    return identity.can("read") or record.requester_token == identity.token_id


@router.get(
    "/confirm", summary="List requests (agents see their own)", responses=error_responses(400, 401, 403)
)
async def list_requests(
    identity: Reader,
    store: StoreDep,
    settings: SettingsDep,
    status: Annotated[str | None, Query(pattern="^(pending|approved|denied|expired|auto_approved)$")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> JSONResponse:
    """Return ``{"requests": [...]}``, newest first."""
    owner = None if identity.can("read") else identity.token_id
    records = await run_in_threadpool(
        lambda: store.list_requests(status=status, requester_token=owner, limit=limit)
    )
    return json_view({"requests": [request_view(r, settings) for r in records]})


@router.get(
    "/confirm/{request_id}",
    summary="Read one request; ?wait=N long-polls for a decision",
    openapi_extra=BEARER_SECURITY,
    responses=error_responses(400, 401, 403, 404, 429),
)
async def get_request(
    request_id: str,
    request: Request,
    wait: Annotated[
        float,
        Query(ge=0, le=3600, allow_inf_nan=False, description="Seconds to wait for a decision (at most 60)."),
    ] = 0,
) -> JSONResponse:
    """Return the request; with ``wait`` hold the response until it is decided or the wait ends.

    A wait past the daemon's long-poll limits (per token, in all) is refused with 429.
    """
    identity = await authorize(request, "read", "read_own")
    store: ConfirmationStore = request.app.state.store
    settings: ConfirmSettings = request.app.state.settings
    record = await run_in_threadpool(store.get, request_id)
    if not _visible(record, identity):
        # Another agent's request: answer as if it did not exist, so ids leak nothing.
        raise NotFoundError(f"No confirmation request {request_id!r}.", kind="request", name=request_id)
    if wait <= 0 or record.status != "pending":
        return json_view(request_view(record, settings))
    slots: WaitSlots = request.app.state.wait_slots
    if not slots.acquire(identity.token_id):
        raise ConfirmError(
            f"Too many long polls open (at most {slots.per_token} per token, {slots.total} in all); "
            "retry shortly.",
            status_code=429,
        )
    try:
        signal: DecisionSignal = request.app.state.decision_signal
        # One wait, no polling: woken by this request's decision only (here or on another daemon,
        # see run_decision_watch), by the wait ending, by the client leaving, or by shutdown.
        decided = await signal.wait(request_id, min(wait, float(settings.max_wait)), request)
    finally:
        slots.release(identity.token_id)
    if decided is None:
        decided = await run_in_threadpool(store.get, request_id)
    return json_view(request_view(decided, settings))


async def decide_call(call: Call, request_id: str, verdict: Literal["approved", "denied"]) -> Answer:
    """Approve or deny as ``POST /confirm/{id}/approve|deny`` does; return the answer. Raises
    KindlingError (and 413) as the routes."""
    store: ConfirmationStore = call.state.store
    settings: ConfirmSettings = call.state.settings
    identity = await authorize_header(store, call.authorization, "decide")
    call.caller(identity.name)
    if call.span is not None:
        call.trace(request_id=request_id)
    model: type[ApproveBody | DenyBody] = ApproveBody if verdict == "approved" else DenyBody
    body = parse_body(await call.body(), model, optional=True)
    claimed = body.approver if isinstance(body, ApproveBody) else body.denier
    # The answer is put together while the commit syncs; it is sent, and the request's long polls
    # woken, only once the commit is done.
    record, committed = await store.writes.run_staged(
        lambda: store.decide(
            request_id,
            verdict,
            identity=identity,
            reason=body.reason,
            digest=body.digest,
            claimed_name=claimed,
        )
    )
    # The decision is being saved: whatever happens in showing it, the answer is not a 500.
    try:
        answer = Answer(200, encode_json(request_view(record, settings)))
    except (RecursionError, ValueError, TypeError):
        answer = Answer(
            200, encode_json({"id": record.id, "status": record.status, "decided_by": record.decided_by})
        )
    await committed
    call.state.decision_signal.fire(record)
    if call.span is not None:
        call.trace(session_id=record.session_key)
    if call.state.metrics is not None:
        call.state.metrics.decided(record.status)
    return answer


#: Approve and deny as ``POST /confirm/{id}/approve|deny`` do: ``decide_call(call, request_id)``.
approve_call = functools.partial(decide_call, verdict="approved")
deny_call = functools.partial(decide_call, verdict="denied")


@router.post(
    "/confirm/{request_id}/approve",
    summary="Approve a pending request",
    openapi_extra={**openapi_body(ApproveBody, required=False), **BEARER_SECURITY},
    responses=error_responses(400, 401, 403, 404, 409, 412, 413),
)
@edge(approve_call)
async def approve(request_id: str, request: Request) -> Response:
    """Approve: 200 with the request, 404 unknown, 409 already resolved, 403 own request, 412 digest."""
    return await answer_route(request, approve_call, request_id=request_id)


@router.post(
    "/confirm/{request_id}/deny",
    summary="Deny a pending request",
    openapi_extra={**openapi_body(DenyBody, required=False), **BEARER_SECURITY},
    responses=error_responses(400, 401, 403, 404, 409, 412, 413),
)
@edge(deny_call)
async def deny(request_id: str, request: Request) -> Response:
    """Deny: 200 with the request, 404 unknown, 409 already resolved, 403 own request, 412 digest."""
    return await answer_route(request, deny_call, request_id=request_id)


@router.get("/audit", summary="The newest audit events", responses=error_responses(400, 401, 403))
async def audit(
    identity: AuditReader, store: StoreDep, limit: Annotated[int, Query(ge=1, le=500)] = 50
) -> dict[str, Any]:
    """Return ``{"events": [...]}``, newest first (approvers and admins)."""
    events = await run_in_threadpool(lambda: store.audit_events(limit=limit))
    return {"events": [e.__dict__ for e in events]}
