"""What a kindling HTTP service does with a request before any handler runs: read its head once and
hold its body to one limit.

The confirmation daemon reads every request's head here, whether it arrives through its ASGI entry
or on the connection itself (``kindling.serving``), and every body it reads is held to one
``BodyLimit``; the proxy and the MCP server can take the same two. This module imports nothing of
kindling's, so any layer may use it.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable

from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect
from starlette.types import Message, Receive

# An incoming X-Request-ID is kept (for the logs) only when it is short and plain.
_REQUEST_ID_CHARS = frozenset(b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-_.:")
MAX_REQUEST_ID = 64


class Head:
    """The headers of one request a kindling service reads: each the first of its name, as
    Starlette's ``Headers.get`` reads it, decoded as latin-1 (None when absent).

    ``framed`` is False when the body's length is not simply declared (``Transfer-Encoding`` or
    ``Expect`` present): such a request is left to the ASGI server's full handling. A head is also
    its request's log context (``observe.logs``): its request id, and its ``tenant`` once the
    service knows the caller.
    """

    __slots__ = (
        "authorization",
        "content_length",
        "framed",
        "idempotency_key",
        "request_id",
        "tenant",
        "traceparent",
    )

    def __init__(self) -> None:
        self.authorization: str | None = None
        self.content_length: str | None = None
        self.idempotency_key: str | None = None
        self.request_id: str | None = None
        self.traceparent: str | None = None
        self.tenant: str | None = None
        self.framed = True

    def id(self) -> str:
        """Return the request id: the client's ``X-Request-ID``, else one made (16 hex digits) the
        first time it is asked for."""
        if self.request_id is None:
            self.request_id = secrets.token_hex(8)
        return self.request_id


def read_head(headers: Iterable[tuple[bytes, bytes]]) -> Head:
    """Return the ``Head`` of a request from its raw headers (lowercase names, as an ASGI scope and
    uvicorn's parser hold them), in one pass."""
    head = Head()
    for name, value in headers:
        if name == b"authorization":
            if head.authorization is None:
                head.authorization = value.decode("latin-1")
        elif name == b"content-length":
            if head.content_length is None:
                head.content_length = value.decode("latin-1")
        elif name == b"idempotency-key":
            if head.idempotency_key is None:
                head.idempotency_key = value.decode("latin-1")
        elif name == b"x-request-id":
            if (
                head.request_id is None
                and len(value) <= MAX_REQUEST_ID
                and _REQUEST_ID_CHARS.issuperset(value)
            ):
                head.request_id = value.decode("ascii") or None
        elif name == b"traceparent":
            if head.traceparent is None:
                head.traceparent = value.decode("latin-1")
        elif name == b"transfer-encoding" or name == b"expect":
            head.framed = False
    return head


class BodyTooLarge(HTTPException):
    """A request body past the service's limit: answered 413 with ``detail`` as its sentence.

    An ``HTTPException``, so a framework that parses a form passes it on instead of calling it a 400.
    """

    def __init__(self, max_bytes: int) -> None:
        super().__init__(413, f"Body is larger than {max_bytes} bytes.")
        self.max_bytes = max_bytes


class BodyLimit:
    """One service's limit on request bodies, in bytes.

    A declared ``Content-Length`` past it is refused before anything is read or authenticated
    (``declared_past``); a body without one is read up to the limit and no further (``read``,
    ``counting``), so a client cannot make the service hold more than that in memory.
    """

    __slots__ = ("max_bytes",)

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes

    def declared_past(self, content_length: str | bytes | None) -> bool:
        """True when ``content_length`` (a header's value) declares a body past the limit."""
        return (
            content_length is not None and content_length.isdigit() and int(content_length) > self.max_bytes
        )

    def too_large(self) -> BodyTooLarge:
        """Return the error a body past the limit is answered with."""
        return BodyTooLarge(self.max_bytes)

    async def read(self, receive: Receive) -> bytes:
        """Return the whole body from an ASGI receive channel.

        Raises BodyTooLarge as soon as it passes the limit, ClientDisconnect if the client leaves.
        """
        raw = b""
        while True:
            message = await receive()
            if message["type"] != "http.request":
                raise ClientDisconnect()
            raw += message.get("body", b"")
            if len(raw) > self.max_bytes:
                raise self.too_large()
            if not message.get("more_body", False):
                return raw

    def counting(self, receive: Receive) -> Receive:
        """Return ``receive`` counting body bytes: it raises BodyTooLarge once they pass the limit."""
        seen = 0
        max_bytes = self.max_bytes

        async def limited() -> Message:
            nonlocal seen
            received = await receive()
            if received["type"] == "http.request":
                seen += len(received.get("body", b""))
                if seen > max_bytes:
                    raise BodyTooLarge(max_bytes)
            return received

        return limited
