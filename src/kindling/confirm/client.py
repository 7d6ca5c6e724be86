"""A Python client of the confirmation daemon (httpx): submit, wait, decide, request_confirmation.

``request_confirmation`` is what an agent calls before a risky action: it submits the request and
blocks, long-polling, until a human decides or the request times out (a timeout denies)::

    client = ConfirmClient("http://127.0.0.1:6000", token)
    decision = client.request_confirmation("deploy_production", "Deploy v2.3 to prod", {"sha": "abc"})
    if decision.approved: ...
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import httpx

from kindling.errors import ConfirmError

DEFAULT_URL = "http://127.0.0.1:6000"


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
    """Talks to one daemon with one bearer token. Every failure raises ConfirmError (``.status_code``)."""

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
        self.retries = retries
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        # Long polls hold a response for up to 60 s, so the read timeout leaves room for them.
        try:
            self._http = httpx.Client(
                base_url=self.base_url,
                headers=headers,
                transport=transport,
                timeout=httpx.Timeout(timeout, read=timeout + 65.0),
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
    ) -> httpx.Response:
        attempts = self.retries + 1 if retry else 1
        for attempt in range(attempts):
            try:
                response = self._http.request(method, path, json=json, params=params, headers=headers)
            except (TypeError, ValueError) as exc:
                # Not JSON (NaN, sets, objects): refuse here rather than send something else.
                raise ConfirmError(f"The request cannot be sent as JSON: {exc}.", status_code=400) from None
            except httpx.HTTPError as exc:
                if attempt + 1 < attempts:
                    time.sleep(0.2 * (attempt + 1))
                    continue
                raise ConfirmError(f"Cannot reach the confirm daemon at {self.base_url}: {exc}.") from exc
            if response.status_code >= 400:
                try:
                    message = str(response.json().get("error") or response.text)
                except ValueError:
                    message = response.text.strip()[:200] or response.reason_phrase
                raise ConfirmError(
                    f"Confirm daemon refused ({response.status_code}): {message}",
                    status_code=response.status_code,
                )
            return response
        raise AssertionError("unreachable")  # pragma: no cover

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
    ) -> dict[str, Any]:
        """Submit a request; return the daemon's answer (``status`` pending or auto_approved).

        Retries on connection errors with the same Idempotency-Key, so a retry never duplicates.
        Raises ConfirmError (429 when rate limited, 400 for a bad request, 401/403 for the token).
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
        response = self._call("POST", "/confirm", json=body, headers={"Idempotency-Key": key}, retry=True)
        result: dict[str, Any] = response.json()
        return result

    def get(self, request_id: str, *, wait: float = 0) -> dict[str, Any]:
        """Return a request; ``wait`` > 0 long-polls up to that many seconds (the daemon caps 60)."""
        params = {"wait": f"{wait:g}"} if wait > 0 else None
        result: dict[str, Any] = self._call("GET", f"/confirm/{request_id}", params=params, retry=True).json()
        return result

    def list_requests(self, *, status: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
        """Return requests newest first (an agent token sees only its own); ``status`` filters."""
        params: dict[str, Any] = {"limit": limit}
        if status:
            params["status"] = status
        result: list[dict[str, Any]] = self._call("GET", "/confirm", params=params, retry=True).json()[
            "requests"
        ]
        return result

    def wait(self, request_id: str, timeout: float) -> dict[str, Any]:
        """Block until the request is decided or ``timeout`` seconds pass; return it as last seen."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            try:
                record = self.get(request_id, wait=max(0.0, min(remaining, 60.0)))
            except ConfirmError as exc:
                # 429: the daemon holds as many long polls as it allows; back off, then ask again.
                if exc.status_code != 429 or remaining <= 0:
                    raise
                time.sleep(min(1.0, max(0.0, remaining)))
                continue
            if record.get("status") != "pending" or deadline - time.monotonic() <= 0:
                return record

    def approve(
        self, request_id: str, *, reason: str | None = None, digest: str | None = None
    ) -> dict[str, Any]:
        """Approve (approver or admin token). Raises ConfirmError 409 when already decided."""
        return self._decide(request_id, "approve", reason, digest)

    def _decide(self, request_id: str, verb: str, reason: str | None, digest: str | None) -> dict[str, Any]:
        body = {k: v for k, v in (("reason", reason), ("digest", digest)) if v is not None}
        result: dict[str, Any] = self._call("POST", f"/confirm/{request_id}/{verb}", json=body).json()
        return result

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

        Raises ConfirmError when the daemon cannot be reached or refuses the request.
        """
        submitted = self.submit(
            action,
            description,
            details,
            requester=requester,
            session_key=session_key,
            timeout_seconds=timeout_seconds,
        )
        record = submitted
        if submitted.get("status") == "pending":
            # Wait a little past the request's own timeout so the daemon's expiry is what we see.
            budget = float(submitted.get("timeout_seconds") or 300) + 5.0
            record = self.wait(str(submitted["id"]), budget)
        status = str(record.get("status"))
        return Decision(
            approved=status in ("approved", "auto_approved"),
            status=status,
            request_id=record.get("id"),
            reason=record.get("reason"),
            decided_by=record.get("decided_by"),
            request=record,
        )
