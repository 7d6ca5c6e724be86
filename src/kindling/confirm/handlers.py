"""Every error becomes an HTTP response here, in one place, as ``{"error": "<sentence>"}``.

A database failure is answered 503 with a sentence that names no database, user, host or port
(the details go to the daemon's log only); a value the database refuses to store (PostgreSQL and
NUL characters) is the client's fault and answered 400.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DataError
from starlette.exceptions import HTTPException as StarletteHTTPException

from kindling.errors import (
    ConfigError,
    ConfirmError,
    InvalidNameError,
    KindlingError,
    NotFoundError,
    StoreError,
)

log = logging.getLogger("kindling.confirm")


STORE_UNAVAILABLE = "The confirmation database is unavailable; the daemon's log has the details."
BAD_VALUE = "The request holds a value the database cannot store (such as a NUL character)."


def _refused_value(exc: BaseException) -> bool:
    # A DataError is raised for the value sent (NUL in text, a number out of range), not an outage.
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, DataError):
            return True
        seen = seen.__cause__
    return False


def status_for(exc: KindlingError) -> int:
    """Return the HTTP status a kindling error maps to."""
    if isinstance(exc, StoreError) and _refused_value(exc):
        return 400
    if isinstance(exc, ConfirmError) and exc.status_code:
        return exc.status_code
    if isinstance(exc, NotFoundError):
        return 404
    if isinstance(exc, InvalidNameError):
        return 400
    if isinstance(exc, StoreError):
        return 503
    if isinstance(exc, ConfigError):
        return 500
    return 400


def _headers(status: int) -> dict[str, str] | None:
    return {"WWW-Authenticate": "Bearer"} if status == 401 else None


def client_message(exc: KindlingError) -> str:
    """Return the sentence a client may read for ``exc``: never a database's address or user."""
    if isinstance(exc, StoreError):
        return BAD_VALUE if _refused_value(exc) else STORE_UNAVAILABLE
    return str(exc)


def error_response(exc: KindlingError | StarletteHTTPException) -> JSONResponse:
    """Return the JSON answer for ``exc`` (logging database failures): what the app's handlers send,
    and what the daemon's edge (``app.ConfirmApp``) sends for the errors its answers raise."""
    if isinstance(exc, StarletteHTTPException):
        return JSONResponse({"error": str(exc.detail)}, status_code=exc.status_code, headers=exc.headers)
    status = status_for(exc)
    if status >= 500 or isinstance(exc, StoreError):
        log.error("request failed: %s", exc)
    return JSONResponse({"error": client_message(exc)}, status_code=status, headers=_headers(status))


async def _kindling_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, KindlingError)
    return error_response(exc)


async def _validation_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    problems = []
    for err in exc.errors()[:5]:
        where = ".".join(str(p) for p in err.get("loc", ()) if p not in ("body", "query", "path"))
        problems.append(f"{where or 'request'}: {err.get('msg', 'invalid')}")
    return JSONResponse({"error": "; ".join(problems) or "Invalid request."}, status_code=400)


async def _http_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    return error_response(exc)


def install(app: FastAPI) -> None:
    """Register the handlers that turn errors into JSON responses."""
    app.add_exception_handler(KindlingError, _kindling_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
