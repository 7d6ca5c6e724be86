"""``/ui``: the approvers' web page, server-rendered with Jinja2.

Sign in with an approver (or admin) token. The cookie never holds the token itself: it holds the
token's id, an expiry (12 hours) and an HMAC under the database's secret, HttpOnly and
SameSite=Strict; every page load checks the token is still live, so revoking it signs the browser
out. Every form post carries a CSRF token (an HMAC of the sign-in cookie), and a post without it
is refused. The pending list refreshes itself by polling
``/ui/pending``, so a new request appears without a reload.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates
from starlette.concurrency import run_in_threadpool

from kindling.confirm import policy
from kindling.confirm.deps import SettingsDep, StoreDep
from kindling.confirm.store import Confirmation, ConfirmationStore
from kindling.confirm.web import TEMPLATES_DIR
from kindling.errors import KindlingError

router = APIRouter(prefix="/ui", include_in_schema=False)
templates = Jinja2Templates(directory=str(TEMPLATES_DIR))
COOKIE = "kindling_confirm"
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; form-action 'self'; frame-ancestors 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def _utc(value: float | None) -> str:
    if value is None:
        return ""
    return datetime.fromtimestamp(value, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


templates.env.filters["utc"] = _utc
templates.env.filters["pretty"] = lambda v: json.dumps(v, indent=2, ensure_ascii=False, sort_keys=True)


def _render(request: Request, name: str, context: dict[str, Any], status_code: int = 200) -> HTMLResponse:
    response = templates.TemplateResponse(request, name, context, status_code=status_code)
    response.headers.update(SECURITY_HEADERS)
    return response


@dataclass(frozen=True)
class WebSession:
    """A signed-in browser: who it is, and the cookie its CSRF token is bound to."""

    identity: policy.Identity
    cookie: str

    def csrf(self, secret: str) -> str:
        """Return the CSRF token the forms of this session must carry."""
        return policy.csrf_token(secret, self.cookie)


def _session(request: Request, store: ConfirmationStore) -> WebSession | None:
    cookie = request.cookies.get(COOKIE) or ""
    token_id = policy.read_session_cookie(store.secret(), cookie, time.time())
    identity = store.identity_by_id(token_id) if token_id else None
    if identity is None or not identity.can("decide"):
        return None
    return WebSession(identity, cookie)


def _pending_context(store: ConfirmationStore, session: WebSession) -> dict[str, Any]:
    pending = store.list_requests(status="pending", limit=500, newest_first=False)
    return {
        "pending": pending,
        "ids": ",".join(r.id for r in pending),
        "csrf": session.csrf(store.secret()),
        "identity": session.identity,
        "now": time.time(),
    }


@router.get("/login", response_class=HTMLResponse)
async def login_page(request: Request) -> HTMLResponse:
    """The sign-in form."""
    return _render(request, "login.html", {"error": None})


@router.post("/login")
async def login(
    request: Request, store: StoreDep, settings: SettingsDep, token: Annotated[str, Form()] = ""
) -> Response:
    """Sign in with a token; agents are refused (they may never decide)."""
    identity = await run_in_threadpool(store.authenticate, token.strip())
    if identity is None or not identity.can("decide"):
        message = (
            "That token is unknown or revoked." if identity is None else "Agent tokens cannot sign in here."
        )
        return _render(request, "login.html", {"error": message}, status_code=401)
    expires = int(time.time()) + policy.SESSION_SECONDS
    cookie = policy.session_cookie(await run_in_threadpool(store.secret), identity.token_id, expires)
    response = RedirectResponse("/ui", status_code=303)
    response.set_cookie(
        COOKIE,
        cookie,
        max_age=policy.SESSION_SECONDS,
        httponly=True,
        samesite="strict",
        path="/ui",
        # Behind a TLS-terminating proxy the request itself may look like plain http.
        secure=request.url.scheme == "https" or settings.base_url.startswith("https://"),
    )
    return response


@router.post("/logout")
async def logout(request: Request, store: StoreDep, csrf: Annotated[str, Form()] = "") -> Response:
    """Sign out (CSRF-checked)."""
    session = await run_in_threadpool(_session, request, store)
    if session is not None and not policy.check_csrf(store.secret(), session.cookie, csrf):
        return _render(request, "error.html", {"error": "Missing or wrong CSRF token."}, status_code=403)
    response = RedirectResponse("/ui/login", status_code=303)
    response.delete_cookie(COOKIE, path="/ui")
    return response


@router.get("", response_class=HTMLResponse)
async def index(request: Request, store: StoreDep, decided: str | None = None) -> Response:
    """Pending requests in full, and the recent history; ``decided`` names the request just decided."""
    session = await run_in_threadpool(_session, request, store)
    if session is None:
        return RedirectResponse("/ui/login", status_code=303)

    def load() -> dict[str, Any]:
        context = _pending_context(store, session)
        history = [r for r in store.list_requests(limit=100) if r.status != "pending"]
        # The notice is built from the stored request, never echoed from the URL (no spoofed text).
        just = next((r for r in history if r.id == decided), None) if decided else None
        msg = f"{just.action} {just.status} by {just.decided_by}" if just else None
        return {**context, "history": history, "msg": msg}

    return _render(request, "index.html", await run_in_threadpool(load))


@router.get("/pending", response_class=HTMLResponse)
async def pending_fragment(request: Request, store: StoreDep) -> Response:
    """The pending list alone, polled by the page to show new requests as they arrive."""
    session = await run_in_threadpool(_session, request, store)
    if session is None:
        return HTMLResponse("", status_code=401)
    return _render(request, "_pending.html", await run_in_threadpool(_pending_context, store, session))


@router.post("/decide/{request_id}")
async def decide(
    request_id: str,
    request: Request,
    store: StoreDep,
    decision: Annotated[str, Form()] = "",
    reason: Annotated[str, Form()] = "",
    digest: Annotated[str, Form()] = "",
    csrf: Annotated[str, Form()] = "",
) -> Response:
    """Approve or deny from the page; refused without the CSRF token or the digest that was shown."""
    session = await run_in_threadpool(_session, request, store)
    if session is None:
        return _render(request, "error.html", {"error": "Sign in first."}, status_code=401)
    identity = session.identity
    if not policy.check_csrf(store.secret(), session.cookie, csrf):
        return _render(request, "error.html", {"error": "Missing or wrong CSRF token."}, status_code=403)
    if decision not in ("approve", "deny") or not digest:
        return _render(request, "error.html", {"error": "Choose approve or deny."}, status_code=400)
    verdict: Literal["approved", "denied"] = "approved" if decision == "approve" else "denied"
    try:
        record: Confirmation = await run_in_threadpool(
            lambda: store.decide(
                request_id, verdict, identity=identity, reason=reason.strip() or None, digest=digest
            )
        )
    except KindlingError as exc:
        from kindling.confirm.handlers import status_for

        return _render(request, "error.html", {"error": str(exc)}, status_code=status_for(exc))
    request.app.state.decision_signal.fire(record)
    return RedirectResponse(f"/ui?decided={record.id}", status_code=303)
