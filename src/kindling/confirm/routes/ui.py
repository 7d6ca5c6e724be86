"""``/ui``: the approvers' web page, server-rendered with Jinja2.

Sign in with an approver (or admin) token, or with a ``/ui/login#token=...`` link (the page's script
posts the form, unless the browser is signed in already). The cookie never holds the token itself: it holds the
token's id, an expiry (12 hours), a nonce naming the sign-in on the server and an HMAC under the
database's secret, HttpOnly and SameSite=Strict; every page load checks the token is still live and
the sign-in was not ended, so revoking the token or signing out ends it on every daemon. Every form
post carries a CSRF token (an HMAC of the sign-in cookie; the sign-in form's own is bound to a
pre-sign-in cookie), and a post without it is refused.

The page never moves under the pointer. It polls ``/ui/pending`` for the ids of the pending
requests only (204 when nothing changed); a request that appears is announced in a banner and
shown when the approver clicks it, a request that expires or is decided elsewhere is greyed out in
place. A card's buttons work only once it has been on screen for ``ui_min_view_seconds``, and the
server refuses a decision posted sooner after the card was rendered (each form carries a signed
render time), so a card that has just appeared or moved cannot catch a click meant for another.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates
from markupsafe import Markup, escape
from starlette.concurrency import run_in_threadpool

from kindling.confirm import policy
from kindling.confirm.bodies import displayable_details
from kindling.confirm.deps import SettingsDep, StoreDep
from kindling.confirm.handlers import client_message, status_for
from kindling.confirm.settings import ConfirmSettings
from kindling.confirm.spoofing import marked_segments, text_warnings
from kindling.confirm.store import Confirmation, ConfirmationStore
from kindling.confirm.web import TEMPLATES_DIR
from kindling.errors import KindlingError

router = APIRouter(prefix="/ui", include_in_schema=False)
templates = Jinja2Templates(directory=str(TEMPLATES_DIR))
COOKIE = "kindling_confirm"
LOGIN_COOKIE = "kindling_confirm_login"
MAX_CARDS = 50
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


def _pretty(value: Any) -> str:
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)
    except (RecursionError, ValueError, TypeError):
        # A row stored before submit bounded the depth: show it flat rather than fail the page.
        return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _marked(text: str) -> Markup:
    """``text`` escaped, with every misleading character wrapped in a visible, titled mark."""
    out = []
    for piece, kind in marked_segments(text):
        if kind is None:
            out.append(str(escape(piece)))
            continue
        code = f"U+{ord(piece):04X}"
        shown = escape(piece) if kind == "lookalike" else f"[{code}]"
        out.append(f'<mark class="suspicious {kind}" title="{code} {kind}">{shown}</mark>')
    return Markup("".join(out))


templates.env.filters["utc"] = _utc
templates.env.filters["pretty"] = _pretty
templates.env.filters["marked"] = _marked


def _render(request: Request, name: str, context: dict[str, Any], status_code: int = 200) -> HTMLResponse:
    response = templates.TemplateResponse(request, name, context, status_code=status_code)
    response.headers.update(SECURITY_HEADERS)
    return response


@dataclass(frozen=True)
class WebSession:
    """A signed-in browser: who it is, the cookie its CSRF token is bound to, and its nonce."""

    identity: policy.Identity
    cookie: str
    nonce: str

    def csrf(self, secret: str) -> str:
        """Return the CSRF token the forms of this session must carry."""
        return policy.csrf_token(secret, self.cookie)


def _session(request: Request, store: ConfirmationStore) -> WebSession | None:
    cookie = request.cookies.get(COOKIE) or ""
    found = policy.read_session(store.secret(), cookie, time.time())
    if found is None:
        return None
    token_id, nonce = found
    identity = store.identity_by_id(token_id)
    if identity is None or not identity.can("decide") or not store.web_session_live(nonce, token_id):
        return None
    return WebSession(identity, cookie, nonce)


def _shown_mac(secret: str, cookie: str, request_id: str, digest: str, at_ms: int) -> str:
    signed = f"shown:{cookie}:{request_id}:{digest}:{at_ms}".encode()
    return hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()


def shown_token(secret: str, cookie: str, request_id: str, digest: str, at_ms: int) -> str:
    """Return the signed render time a card's form carries: ``<ms>.<hmac>``."""
    return f"{at_ms}.{_shown_mac(secret, cookie, request_id, digest, at_ms)}"


def shown_at(secret: str, cookie: str, request_id: str, digest: str, token: str) -> float | None:
    """Return when (epoch seconds) the card named by a form's ``shown`` token was rendered, or None."""
    at, _, mac = token.partition(".")
    if not (at.isascii() and at.isdigit()) or len(at) > 15:
        return None
    if not policy.same_secret(_shown_mac(secret, cookie, request_id, digest, int(at)), mac):
        return None
    return int(at) / 1000


def _card(
    record: Confirmation, secret: str, session: WebSession, high_risk: frozenset[str]
) -> dict[str, Any]:
    now_ms = int(time.time() * 1000)
    return {
        "r": record,
        # The daemon's own high-risk list (the one no whitelist rule can approve), folded as submit folds,
        # or the asking agent's own mark on a command its danger check flagged.
        "high_risk": policy.marked_high_risk(record.action, record.details, high_risk),
        "details": displayable_details(record.details),
        "warnings": text_warnings(record.description, record.details, record.action),
        "shown": shown_token(secret, session.cookie, record.id, record.digest, now_ms),
    }


def _pending_context(store: ConfirmationStore, session: WebSession, min_view: float) -> dict[str, Any]:
    pending = store.list_requests(status="pending", limit=500, newest_first=False)
    secret = store.secret()
    return {
        "cards": [_card(r, secret, session, store.settings.high_risk) for r in pending],
        "version": _version([r.id for r in pending]),
        "csrf": session.csrf(secret),
        "identity": session.identity,
        "now": time.time(),
        "min_view_ms": int(min_view * 1000),
    }


def _version(ids: list[str]) -> str:
    return hashlib.sha256(",".join(ids).encode()).hexdigest()[:16]


@router.get("/login", response_class=HTMLResponse)
async def login_page(request: Request, store: StoreDep) -> HTMLResponse:
    """The sign-in form, with a CSRF token bound to a fresh pre-sign-in cookie; it names who this
    browser is signed in as, if anyone (a sign-in link then fills the form but does not switch)."""
    nonce = secrets.token_hex(16)
    csrf = policy.login_csrf_token(await run_in_threadpool(store.secret), nonce)
    session = await run_in_threadpool(_session, request, store)
    signed_in = session.identity.name if session is not None else None
    response = _render(request, "login.html", {"error": None, "csrf": csrf, "signed_in": signed_in})
    response.set_cookie(
        LOGIN_COOKIE,
        nonce,
        max_age=3600,
        httponly=True,
        samesite="strict",
        path="/ui",
        # Secure when this request came over TLS. The nonce is no credential (it only ties the form's
        # post to this browser), so a daemon reached over plain http still lets people sign in.
        secure=request.url.scheme == "https",
    )
    return response


def _secure(request: Request, settings: ConfirmSettings) -> bool:
    # Behind a TLS-terminating proxy the request itself may look like plain http.
    return request.url.scheme == "https" or str(settings.base_url).startswith("https://")


@router.post("/login")
async def login(
    request: Request,
    store: StoreDep,
    settings: SettingsDep,
    token: Annotated[str, Form()] = "",
    csrf: Annotated[str, Form()] = "",
) -> Response:
    """Sign in with a token; agents are refused (they may never decide), and so is a post without
    the sign-in form's CSRF token (a forged sign-in into the attacker's account)."""
    secret = await run_in_threadpool(store.secret)
    nonce = request.cookies.get(LOGIN_COOKIE) or ""
    if not nonce or not policy.same_secret(policy.login_csrf_token(secret, nonce), csrf):
        return _render(
            request,
            "login.html",
            {"error": "The sign-in form was stale or not from this page; try again.", "csrf": None},
            status_code=403,
        )
    identity = await run_in_threadpool(store.authenticate, token.strip())
    if identity is None or not identity.can("decide"):
        message = (
            "That token is unknown or revoked." if identity is None else "Agent tokens cannot sign in here."
        )
        fresh = policy.login_csrf_token(secret, nonce)
        return _render(request, "login.html", {"error": message, "csrf": fresh}, status_code=401)
    expires = int(time.time()) + policy.SESSION_SECONDS
    session_nonce = await run_in_threadpool(store.open_web_session, identity.token_id, float(expires))
    cookie = policy.session_cookie(secret, identity.token_id, expires, session_nonce)
    response = RedirectResponse("/ui", status_code=303)
    response.set_cookie(
        COOKIE,
        cookie,
        max_age=policy.SESSION_SECONDS,
        httponly=True,
        samesite="strict",
        path="/ui",
        secure=_secure(request, settings),
    )
    response.delete_cookie(LOGIN_COOKIE, path="/ui")
    return response


@router.post("/logout")
async def logout(request: Request, store: StoreDep, csrf: Annotated[str, Form()] = "") -> Response:
    """Sign out (CSRF-checked): the sign-in ends on the server, so its cookie stops working."""
    session = await run_in_threadpool(_session, request, store)
    if session is not None:
        if not policy.check_csrf(store.secret(), session.cookie, csrf):
            return _render(request, "error.html", {"error": "Missing or wrong CSRF token."}, status_code=403)
        await run_in_threadpool(store.end_web_session, session.nonce)
    response = RedirectResponse("/ui/login", status_code=303)
    response.delete_cookie(COOKIE, path="/ui")
    return response


@router.get("", response_class=HTMLResponse)
async def index(
    request: Request, store: StoreDep, settings: SettingsDep, decided: str | None = None
) -> Response:
    """Pending requests in full, and the recent history; ``decided`` names the request just decided."""
    session = await run_in_threadpool(_session, request, store)
    if session is None:
        return RedirectResponse("/ui/login", status_code=303)

    def load() -> dict[str, Any]:
        context = _pending_context(store, session, settings.ui_min_view_seconds)
        history = [r for r in store.list_requests(limit=100) if r.status != "pending"]
        # The notice is built from the stored request, never echoed from the URL (no spoofed text).
        just = next((r for r in history if r.id == decided), None) if decided else None
        msg = f"{just.action} {just.status} by {just.decided_by}" if just else None
        return {**context, "history": history, "msg": msg}

    return _render(request, "index.html", await run_in_threadpool(load))


@router.get("/pending")
async def pending_ids(
    request: Request,
    store: StoreDep,
    known: Annotated[str, Query(max_length=64)] = "",
) -> Response:
    """The ids of the pending requests, oldest first, and a version; 204 when ``known`` is current.

    The page polls this each second: a few bytes, never the requests themselves.
    """
    session = await run_in_threadpool(_session, request, store)
    if session is None:
        return JSONResponse({"error": "Sign in first."}, status_code=401)
    ids = await run_in_threadpool(store.pending_ids)
    version = _version(ids)
    if policy.same_secret(version, known):
        return Response(status_code=204, headers={"Cache-Control": "no-store"})
    return JSONResponse({"version": version, "ids": ids}, headers={"Cache-Control": "no-store"})


@router.get("/cards", response_class=HTMLResponse)
async def cards(
    request: Request,
    store: StoreDep,
    settings: SettingsDep,
    ids: Annotated[str, Query(max_length=MAX_CARDS * 40)] = "",
) -> Response:
    """The cards of the named pending requests (those the approver chose to show), oldest first."""
    session = await run_in_threadpool(_session, request, store)
    if session is None:
        return HTMLResponse("", status_code=401)
    wanted = [i for i in ids.split(",") if i][:MAX_CARDS]

    def load() -> dict[str, Any]:
        secret = store.secret()
        found = []
        for request_id in wanted:
            try:
                record = store.get(request_id)
            except KindlingError:
                continue
            if record.status == "pending":
                found.append(record)
        found.sort(key=lambda r: r.created_at)
        return {
            "cards": [_card(r, secret, session, store.settings.high_risk) for r in found],
            "csrf": session.csrf(secret),
            "now": time.time(),
            "min_view_ms": int(settings.ui_min_view_seconds * 1000),
        }

    return _render(request, "_cards.html", await run_in_threadpool(load))


@router.post("/decide/{request_id}")
async def decide(
    request_id: str,
    request: Request,
    store: StoreDep,
    settings: SettingsDep,
    decision: Annotated[str, Form()] = "",
    reason: Annotated[str, Form()] = "",
    digest: Annotated[str, Form()] = "",
    csrf: Annotated[str, Form()] = "",
    shown: Annotated[str, Form()] = "",
) -> Response:
    """Approve or deny from the page; refused without the CSRF token, the digest that was shown,
    or when the card was rendered less than ``ui_min_view_seconds`` ago."""
    session = await run_in_threadpool(_session, request, store)
    if session is None:
        return _render(request, "error.html", {"error": "Sign in first."}, status_code=401)
    identity = session.identity
    secret = store.secret()
    if not policy.check_csrf(secret, session.cookie, csrf):
        return _render(request, "error.html", {"error": "Missing or wrong CSRF token."}, status_code=403)
    if decision not in ("approve", "deny") or not digest:
        return _render(request, "error.html", {"error": "Choose approve or deny."}, status_code=400)
    rendered = shown_at(secret, session.cookie, request_id, digest, shown)
    if rendered is None:
        return _render(
            request, "error.html", {"error": "The form is not one this page showed; reload."}, status_code=400
        )
    if time.time() - rendered < settings.ui_min_view_seconds:
        return _render(
            request,
            "error.html",
            {"error": "That card had only just appeared; read it, then decide again."},
            status_code=409,
        )
    verdict: Literal["approved", "denied"] = "approved" if decision == "approve" else "denied"
    try:
        record: Confirmation = await run_in_threadpool(
            lambda: store.decide(
                request_id, verdict, identity=identity, reason=reason.strip() or None, digest=digest
            )
        )
    except KindlingError as exc:
        return _render(request, "error.html", {"error": client_message(exc)}, status_code=status_for(exc))
    request.app.state.decision_signal.fire(record)
    return RedirectResponse(f"/ui?decided={record.id}", status_code=303)
