"""A service's log lines: human-readable by default, or one JSON object a line (``--log-format json``).

A JSON line holds ``time`` (UTC, ISO 8601), ``level``, ``event`` (the message), ``logger``,
``request_id`` and ``tenant`` (null outside a request, or when the service knows no tenant), and
``error`` with the traceback when there is one. The request id is the client's ``X-Request-ID``
when it sent a plain one, else one made for the request the first time a line needs it.
"""

from __future__ import annotations

import logging
import secrets
import sys
from contextvars import ContextVar
from datetime import datetime, timezone
from typing import Any, Literal, Protocol

import orjson

from kindling.errors import ConfigError

LogFormat = Literal["human", "json"]
LOG_FORMATS: tuple[str, ...] = ("human", "json")

_LEVELS = {
    "critical": logging.CRITICAL,
    "error": logging.ERROR,
    "warning": logging.WARNING,
    "info": logging.INFO,
}

#: The loggers a service's lines come from: kindling's own and its HTTP server's.
SERVICE_LOGGERS = ("kindling", "uvicorn", "uvicorn.error", "uvicorn.access")


class LogContext(Protocol):
    """What the log lines written while a request is answered say about it: its id and tenant
    (``RequestLog``, or the request's ``edge.Head``)."""

    tenant: str | None

    def id(self) -> str:
        """Return the request id."""
        ...


class RequestLog:
    """A request's log context: its id (made when first needed) and tenant."""

    __slots__ = ("request_id", "tenant")

    def __init__(self, request_id: str | None = None, tenant: str | None = None) -> None:
        self.request_id = request_id
        self.tenant = tenant

    def id(self) -> str:
        """Return the request id, making one (16 hex digits) the first time it is asked for."""
        if self.request_id is None:
            self.request_id = secrets.token_hex(8)
        return self.request_id


#: The request being answered in this task (or thread it handed work to), if any.
CURRENT: ContextVar[LogContext | None] = ContextVar("kindling_request_log", default=None)


def begin_request(request_id: str | None) -> RequestLog:
    """Start the log context of a request in the current task; return it (set ``tenant`` on it
    once the caller is known). A service that has read the request's ``edge.Head`` sets the head
    itself instead (``CURRENT.set(head)``), one object fewer a request."""
    entry = RequestLog(request_id)
    CURRENT.set(entry)
    return entry


class JsonFormatter(logging.Formatter):
    """One JSON object a line; see the module's docstring for its fields."""

    def format(self, record: logging.LogRecord) -> str:
        """Return ``record`` as one line of JSON."""
        entry = CURRENT.get()
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, tz=timezone.utc).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname.lower(),
            "event": record.getMessage(),
            "logger": record.name,
            "request_id": entry.id() if entry is not None else None,
            "tenant": entry.tenant if entry is not None else None,
        }
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        return orjson.dumps(line, default=str).decode()


def level_of(name: str) -> int:
    """Return the logging level of a uvicorn level name (``trace`` and ``debug`` both mean DEBUG)."""
    return _LEVELS.get(name.lower(), logging.DEBUG)


def configure_logging(level: str = "info", log_format: str = "human") -> None:
    """Send the service's log lines to stderr at ``level``, human-readable or as JSON.

    Human: kindling's own lines (``time LEVEL logger: message``) beside uvicorn's, as uvicorn prints
    them. JSON: every service logger (``SERVICE_LOGGERS``) writes JSON lines and uvicorn's own log
    set-up must be left out (``serving.server_config(log_config=None)``). Calling it again changes
    the level and format. Raises ConfigError for an unknown format.
    """
    if log_format not in LOG_FORMATS:
        raise ConfigError(f"Unknown log format {log_format!r}; use {' or '.join(LOG_FORMATS)}.")
    numeric = level_of(level)
    kindling = logging.getLogger("kindling")
    for name in SERVICE_LOGGERS:
        logger = logging.getLogger(name)
        for handler in [h for h in logger.handlers if getattr(h, "kindling_stderr", False)]:
            logger.removeHandler(handler)
    if log_format == "human":
        _attach(kindling, logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        kindling.setLevel(numeric)
        logging.getLogger("uvicorn").setLevel(logging.NOTSET)  # uvicorn sets up its own loggers
        return
    for name in ("kindling", "uvicorn"):
        logger = logging.getLogger(name)
        _attach(logger, JsonFormatter())
        logger.setLevel(numeric)
    for name in ("uvicorn.error", "uvicorn.access"):
        # Their lines reach "uvicorn"'s handler; any handler of their own (a set-up run earlier) goes.
        logger = logging.getLogger(name)
        logger.handlers.clear()
        logger.propagate = True
        logger.setLevel(logging.NOTSET)


def _attach(logger: logging.Logger, formatter: logging.Formatter) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter)
    handler.kindling_stderr = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
