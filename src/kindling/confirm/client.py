"""A Python client of the confirmation daemon (httpx): submit, wait, decide, request_confirmation.

``request_confirmation`` is what an agent calls before a risky action: it submits the request and
blocks, long-polling, until a human decides or the request times out (a timeout denies)::

    client = ConfirmClient("http://127.0.0.1:6000", token)
    decision = client.request_confirmation("deploy_production", "Deploy v2.3", {"sha": "abc"})
    if decision.approved: ...

The client trusts only a well-formed answer about the request it asked about: a 2xx JSON object
with the request's id and a known status. Anything else (a redirect, which it never follows, any
other status, a body that is not a JSON object, a missing or different id, an unknown status, a
different action) raises ConfirmError, so a caller that treats ConfirmError as "not approved"
fails closed. Every call has one deadline covering its retries and every read of the answer,
enforced on the socket, so a daemon that answers slowly, or a byte at a time, cannot hold the
caller past it.
"""

from __future__ import annotations

import contextvars
import ssl
import time
import uuid
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import httpcore
import httpx

from kindling.errors import ConfirmError

__all__ = [
    "DEADLINE_MARGIN",
    "DEFAULT_URL",
    "LAST_ANSWER",
    "STATUSES",
    "ConfirmClient",
    "Decision",
    "decision_of",
    "request_timeout",
]

DEFAULT_URL = "http://127.0.0.1:6000"
#: Every status a request can have (the daemon's ``kindling.confirm.store.STATUSES``).
STATUSES: frozenset[str] = frozenset({"pending", "approved", "denied", "expired", "auto_approved"})
APPROVED: frozenset[str] = frozenset({"approved", "auto_approved"})
#: Seconds past a request's own timeout that a wait for it may last, submitting and the last
#: long poll's answer included: past it the wait ends with ConfirmError, whatever the daemon does.
DEADLINE_MARGIN = 5.0
#: Seconds before the deadline that waiting stops asking, so the last long poll can answer.
LAST_ANSWER = 1.0
# The daemon holds a long poll up to this many seconds.
_MAX_POLL = 60.0


@dataclass(frozen=True)
class Decision:
    """The outcome of ``request_confirmation``: approved or not, and the request as last seen."""

    approved: bool
    status: str
    request_id: str | None
    reason: str | None
    decided_by: str | None
    request: dict[str, Any]


class ConfirmClient:
    """Talks to one daemon with one bearer token. Every failure raises ConfirmError (``.status_code``).

    ``timeout`` is the seconds one exchange may take (connect, send, answer); a long poll adds its
    wait. ``status_code`` is None on a ConfirmError when no answer came at all (nothing listening,
    a timeout, the deadline), else the status of the answer that was refused.
    """

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        token: str = "",
        *,
        timeout: float = 10.0,
        retries: int = 2,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.retries = retries
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        try:
            self._http = httpx.Client(
                base_url=self.base_url,
                headers=headers,
                transport=transport or _deadline_transport(),
                # Long polls hold a response for up to 60 s; every read is also cut at the call's deadline.
                timeout=httpx.Timeout(timeout, read=timeout + _MAX_POLL + 5.0),
                follow_redirects=False,
            )
        except httpx.InvalidURL as exc:
            raise ConfirmError(f"{base_url!r} is not a usable daemon URL: {exc}.") from None

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def __enter__(self) -> ConfirmClient:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _call(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        retry: bool = False,
        deadline: float | None = None,
        wait: float = 0.0,
    ) -> httpx.Response:
        """Send one request (retried on transport errors when ``retry``); return a 2xx answer.

        ``deadline`` (``time.monotonic()`` seconds; default: ``timeout`` plus ``wait`` from now)
        bounds every attempt, the pauses between them and every read of the answer. Raises
        ConfirmError for anything else.
        """
        if deadline is None:
            deadline = time.monotonic() + self.timeout + wait
        attempts = self.retries + 1 if retry else 1
        for attempt in range(attempts):
            left = deadline - time.monotonic()
            if left <= 0:
                raise self._late()
            bound = _DEADLINE.set(deadline)
            try:
                response = self._http.request(method, path, json=json, params=params, headers=headers)
            except (TypeError, ValueError) as exc:
                # Not JSON (NaN, sets, objects): refuse here rather than send something else.
                raise ConfirmError(f"The request cannot be sent as JSON: {exc}.", status_code=400) from None
            except httpx.HTTPError as exc:
                pause = 0.2 * (attempt + 1)
                if attempt + 1 < attempts and time.monotonic() + pause < deadline:
                    time.sleep(pause)
                    continue
                if isinstance(exc, httpx.TimeoutException):
                    raise self._late() from None
                raise ConfirmError(f"Cannot reach the confirm daemon at {self.base_url}: {exc}.") from exc
            finally:
                _DEADLINE.reset(bound)
            _check_status(response, self.base_url)
            return response
        raise AssertionError("unreachable")  # pragma: no cover

    def _late(self) -> ConfirmError:
        return ConfirmError(f"The confirm daemon at {self.base_url} did not answer in time.")

    def submit(
        self,
        action: str,
        description: str,
        details: Any = None,
        *,
        requester: str | None = None,
        session_key: str | None = None,
        timeout_seconds: int | None = None,
        idempotency_key: str | None = None,
        deadline: float | None = None,
    ) -> dict[str, Any]:
        """Submit a request; return the daemon's answer (``status`` pending or auto_approved).

        Retries on connection errors with the same Idempotency-Key, so a retry never duplicates;
        ``deadline`` (``time.monotonic()`` seconds) bounds it all. Raises ConfirmError (429 when rate
        limited, 400 for a bad request, 401/403 for the token; any status for an answer that is not
        a request record for ``action``).
        """
        body: dict[str, Any] = {"action": action, "description": description}
        for key, value in (
            ("details", details),
            ("requester", requester),
            ("session_key", session_key),
            ("timeout_seconds", timeout_seconds),
        ):
            if value is not None:
                body[key] = value
        key = idempotency_key or uuid.uuid4().hex
        response = self._call(
            "POST", "/confirm", json=body, headers={"Idempotency-Key": key}, retry=True, deadline=deadline
        )
        record = _record(response, "the submitted request", action=action)
        if idempotency_key is None and record["status"] not in ("pending", "auto_approved"):
            # A new request is pending or approved by a whitelist rule; a human cannot have
            # decided it yet, so any other status is not about this request.
            raise ConfirmError(
                f"The confirm daemon answered a new request with status {record['status']!r}.",
                status_code=response.status_code,
            )
        return record

    def get(self, request_id: str, *, wait: float = 0, deadline: float | None = None) -> dict[str, Any]:
        """Return a request; ``wait`` > 0 long-polls up to that many seconds (the daemon caps 60).

        Raises ConfirmError when the answer is not that request's record.
        """
        params = {"wait": f"{wait:g}"} if wait > 0 else None
        response = self._call(
            "GET", f"/confirm/{request_id}", params=params, retry=True, deadline=deadline, wait=wait
        )
        return _record(response, f"request {request_id!r}", request_id=request_id)

    def list_requests(self, *, status: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
        """Return requests newest first (an agent token sees only its own); ``status`` filters.

        Raises ConfirmError when the answer is not a list of request records.
        """
        params: dict[str, Any] = {"limit": limit}
        if status:
            params["status"] = status
        response = self._call("GET", "/confirm", params=params, retry=True)
        requests = _json_object(response, "the request list").get("requests")
        if not isinstance(requests, list) or not all(isinstance(r, dict) for r in requests):
            raise ConfirmError(
                "The confirm daemon's answer about the request list holds no list of requests.",
                status_code=response.status_code,
            )
        return requests

    def wait(self, request_id: str, timeout: float, *, deadline: float | None = None) -> dict[str, Any]:
        """Block until the request is decided or ``timeout`` seconds pass; return it as last seen.

        ``deadline`` (``time.monotonic()`` seconds; default: ``timeout`` plus ``DEADLINE_MARGIN``
        from now) is when waiting ends with ConfirmError if the daemon has not answered by then.
        Raises ConfirmError when an answer is not this request's record.
        """
        started = time.monotonic()
        until = started + max(0.0, timeout)
        hard = deadline if deadline is not None else until + DEADLINE_MARGIN
        while True:
            remaining = until - time.monotonic()
            try:
                record = self.get(request_id, wait=max(0.0, min(remaining, _MAX_POLL)), deadline=hard)
            except ConfirmError as exc:
                # 429: the daemon holds as many long polls as it allows; back off, then ask again.
                if exc.status_code != 429 or remaining <= 0:
                    raise
                time.sleep(min(1.0, max(0.0, remaining)))
                continue
            if record["status"] != "pending" or until - time.monotonic() <= 0:
                return record

    def approve(
        self, request_id: str, *, reason: str | None = None, digest: str | None = None
    ) -> dict[str, Any]:
        """Approve (approver or admin token). Raises ConfirmError 409 when already decided."""
        return self._decide(request_id, "approve", reason, digest)

    def _decide(self, request_id: str, verb: str, reason: str | None, digest: str | None) -> dict[str, Any]:
        body = {k: v for k, v in (("reason", reason), ("digest", digest)) if v is not None}
        response = self._call("POST", f"/confirm/{request_id}/{verb}", json=body)
        return _record(response, f"request {request_id!r}", request_id=request_id)

    def deny(
        self, request_id: str, *, reason: str | None = None, digest: str | None = None
    ) -> dict[str, Any]:
        """Deny (approver or admin token). Raises ConfirmError 409 when already decided."""
        return self._decide(request_id, "deny", reason, digest)

    def request_confirmation(
        self,
        action: str,
        description: str,
        details: Any = None,
        *,
        requester: str | None = None,
        session_key: str | None = None,
        timeout_seconds: int | None = None,
    ) -> Decision:
        """Submit, then wait for the human: return the Decision (a timeout comes back as ``expired``).

        The whole call lasts at most the request's timeout (``timeout_seconds``, else the one the
        daemon gives it) plus ``DEADLINE_MARGIN`` seconds. Raises ConfirmError when the daemon
        cannot be reached, refuses the request, answers with anything but this request's record, or
        does not answer by the deadline.
        """
        started = time.monotonic()
        deadline = started + timeout_seconds + DEADLINE_MARGIN if timeout_seconds is not None else None
        submitted = self.submit(
            action,
            description,
            details,
            requester=requester,
            session_key=session_key,
            timeout_seconds=timeout_seconds,
            deadline=deadline,
        )
        record = submitted
        if submitted["status"] == "pending":
            if deadline is None:
                deadline = started + request_timeout(submitted) + DEADLINE_MARGIN
            # Past the request's own timeout, so the daemon's expiry is what we see; the last
            # long poll has a second to answer before the deadline.
            record = self.wait(submitted["id"], deadline - LAST_ANSWER - time.monotonic(), deadline=deadline)
        return decision_of(record)


def decision_of(record: dict[str, Any]) -> Decision:
    """Return the Decision a request record (as ``get`` returns it) stands for."""
    status = str(record["status"])
    return Decision(
        approved=status in APPROVED,
        status=status,
        request_id=record.get("id"),
        reason=_text(record.get("reason")),
        decided_by=_text(record.get("decided_by")),
        request=record,
    )


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def request_timeout(record: dict[str, Any]) -> float:
    """Return the seconds a request record says it waits for a human (300 when it does not say)."""
    value = record.get("timeout_seconds")
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(value)
    return 300.0


def _check_status(response: httpx.Response, base_url: str) -> None:
    """Raise ConfirmError unless ``response`` is a 2xx answer (redirects are refused, never followed)."""
    code = response.status_code
    if 200 <= code < 300:
        return
    if 300 <= code < 400:
        where = response.headers.get("location") or "elsewhere"
        raise ConfirmError(
            f"The confirm daemon at {base_url} answered with a redirect ({code} to {where[:200]}); "
            "redirects are not followed.",
            status_code=code,
        )
    message = ""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        message = body["error"]
    message = message or response.text.strip()[:200] or response.reason_phrase
    raise ConfirmError(f"Confirm daemon refused ({code}): {message}", status_code=code)


def _json_object(response: httpx.Response, what: str) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        kind = response.headers.get("content-type", "no content type").split(";")[0]
        raise ConfirmError(
            f"The confirm daemon's answer about {what} is not JSON ({kind}).",
            status_code=response.status_code,
        ) from None
    if not isinstance(body, dict):
        raise ConfirmError(
            f"The confirm daemon's answer about {what} is not a JSON object (a {type(body).__name__}).",
            status_code=response.status_code,
        )
    return body


def _record(
    response: httpx.Response, what: str, *, request_id: str | None = None, action: str | None = None
) -> dict[str, Any]:
    """Return the request record in ``response``; raise ConfirmError unless it is one about what was asked."""
    record = _json_object(response, what)
    code = response.status_code
    found = record.get("id")
    if not isinstance(found, str) or not found:
        raise ConfirmError(
            f"The confirm daemon's answer about {what} carries no request id.", status_code=code
        )
    if request_id is not None and found != request_id:
        raise ConfirmError(
            f"The confirm daemon answered about request {found[:80]!r} when asked about {request_id!r}.",
            status_code=code,
        )
    status = record.get("status")
    if status not in STATUSES:
        raise ConfirmError(
            f"The confirm daemon's answer about {what} has an unknown status {str(status)[:40]!r}.",
            status_code=code,
        )
    if action is not None and record.get("action") != action:
        raise ConfirmError(
            f"The confirm daemon's answer about {what} is for another action "
            f"({str(record.get('action'))[:80]!r}, not {action!r}).",
            status_code=code,
        )
    return record


# -- one deadline per call, enforced on the socket -------------------------------------------------
# httpx's timeouts are per read: a daemon that sends a byte every few seconds never trips them. The
# client's connections go through a network backend that cuts every connect, read and write at the
# deadline of the call in progress (a context variable, so each thread's call has its own).

_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "kindling_confirm_deadline", default=None
)


def _bounded(timeout: float | None, late: type[Exception]) -> float | None:
    deadline = _DEADLINE.get()
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise late("the confirm client's deadline passed")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    def __init__(self, stream: httpcore.NetworkStream) -> None:
        self._stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, _bounded(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, _bounded(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        bounded = _bounded(timeout, httpcore.ConnectTimeout)
        return _DeadlineStream(self._stream.start_tls(ssl_context, server_hostname, bounded))

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    def __init__(self) -> None:
        self._backend = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> httpcore.NetworkStream:
        bounded = _bounded(timeout, httpcore.ConnectTimeout)
        return _DeadlineStream(self._backend.connect_tcp(host, port, bounded, local_address, socket_options))

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Any = None
    ) -> httpcore.NetworkStream:
        bounded = _bounded(timeout, httpcore.ConnectTimeout)
        return _DeadlineStream(self._backend.connect_unix_socket(path, bounded, socket_options))

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


def _deadline_transport() -> httpx.HTTPTransport:
    transport = httpx.HTTPTransport()
    # httpx builds its pool without a way to name the network backend: swap in one that has ours.
    # (A test trickles an answer a byte at a time and fails if this stops taking effect.)
    transport._pool = httpcore.ConnectionPool(
        ssl_context=httpx.create_ssl_context(),
        max_connections=10,
        max_keepalive_connections=5,
        keepalive_expiry=5.0,
        network_backend=_DeadlineBackend(),
    )
    return transport
