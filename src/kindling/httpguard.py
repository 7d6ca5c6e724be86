"""What kindling's HTTP surfaces (the proxy, MCP over HTTP) refuse because a browser could forge it,
and the deadlines that keep slow clients from holding connections.

A leaf module: the proxy and the MCP server both use it, and neither imports the other.

- ``check_request``: the ``Host`` must be one of the allowed names (the loopback names, the address
  the server listens on, and what ``--allow-host`` adds), so a DNS-rebinding page cannot reach the
  server under its own name; an ``Origin``, when sent, must be the server's own (a browser sends
  one with every cross-site request); a body must be JSON (``application/json``), which a page can
  only send cross-site after a preflight the servers never grant. ``ForgeryGuard`` applies it to a
  whole ASGI app.
- ``has_dot_segments``: a path with ``..`` or ``.`` segments, raw or percent-encoded, which a
  forwarder would otherwise resolve outside its base path.
- ``with_request_deadline``: uvicorn's protocol with one deadline for a request's headers and body
  from its first byte (and for the first byte itself), so trickling clients are cut off.
- ``bind_socket``: the listening socket, bound before anything is printed, with one clear error
  when the port is taken.
- ``redact_userinfo``: a URL with its ``user:password@`` hidden, wherever it is shown.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import socket
import urllib.parse
from collections.abc import Collection, Iterable, Mapping
from typing import Any

import h11

from kindling.errors import ConfigError

__all__ = [
    "LOOPBACK_NAMES",
    "ForgeryGuard",
    "allowed_hosts",
    "bind_socket",
    "check_request",
    "has_dot_segments",
    "redact_userinfo",
    "with_request_deadline",
]

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
#: Seconds a request's headers and body may take to arrive, from its first byte.
DEFAULT_REQUEST_SECONDS = 20.0


def host_name(host: str) -> str:
    """The name in a ``Host`` header or a listen address: lower case, no port, no brackets."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host[1:]
    if host.count(":") == 1:
        host = host.split(":", 1)[0]
    return host.rstrip(".")


def allowed_hosts(listen: str, extra: Iterable[str] = ()) -> frozenset[str]:
    """The ``Host`` names a server listening on ``listen`` answers: the loopback names, ``listen``
    itself (as the operator wrote it, in any case) and ``extra`` (``--allow-host``)."""
    names = set(LOOPBACK_NAMES)
    names.add(host_name(listen))
    names.update(host_name(name) for name in extra if name.strip())
    names.discard("")
    return frozenset(names)


def _allowed(name: str, allowed: Collection[str]) -> bool:
    if name in allowed:
        return True
    try:
        # Any loopback address (127.0.0.2 ...) is this machine, and an address is no name a page
        # could rebind: a browser sends it only to the address itself.
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def check_request(
    method: str,
    headers: Mapping[str, str],
    allowed: Collection[str],
    *,
    forms: bool = False,
) -> tuple[int, str] | None:
    """Return (status, reason) when a request is one a browser could have forged, else None.

    421 for a ``Host`` not in ``allowed``, 403 for an ``Origin`` other than the server's own, 415
    for a body that is not JSON (``forms`` also lets ``multipart/form-data`` through, for uploads).
    """
    host = headers.get("host")
    if not host or not _allowed(host_name(host), allowed):
        return 421, f"the Host header {host!r} is not one this server answers to (see --allow-host)"
    origin = headers.get("origin")
    if origin is not None and not _same_origin(origin, host):
        return 403, f"requests from the web page at {origin!r} are refused"
    if method in ("POST", "PUT", "PATCH") and _has_body(headers):
        kind = headers.get("content-type", "").split(";", 1)[0].strip().lower()
        json_body = kind == "application/json" or (kind.startswith("application/") and kind.endswith("+json"))
        if not json_body and not (forms and kind == "multipart/form-data"):
            return 415, f"a request body must be application/json, not {kind or 'untyped'}"
    return None


def _has_body(headers: Mapping[str, str]) -> bool:
    length = headers.get("content-length")
    if length is not None:
        return length.strip() != "0"
    return "transfer-encoding" in headers


def _same_origin(origin: str, host: str) -> bool:
    parsed = urllib.parse.urlsplit(origin.strip().lower())
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        return False  # "null" (a sandboxed or local page), or anything else
    return parsed.netloc == host.strip().lower()


def has_dot_segments(path: str) -> bool:
    """True when ``path`` (raw or decoded, any number of times) has a ``.`` or ``..`` segment."""
    seen = path
    for _ in range(4):
        if any(segment in (".", "..") for segment in seen.replace("\\", "/").split("/")):
            return True
        decoded = urllib.parse.unquote(seen)
        if decoded == seen:
            return False
        seen = decoded
    return True  # encoded more deeply than any client needs: refused too


class ForgeryGuard:
    """An ASGI wrapper answering requests ``check_request`` refuses, before ``app`` sees them.

    A pure ASGI wrapper: it reads the scope only, so it adds nothing to a streamed response.
    """

    def __init__(self, app: Any, allowed: Collection[str]) -> None:
        self.app = app
        self.allowed = allowed

    async def __call__(self, scope: Mapping[str, Any], receive: Any, send: Any) -> None:
        """Refuse or pass on one request."""
        if scope.get("type") == "http":
            headers = {
                k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or ()
            }
            refused = check_request(str(scope.get("method", "GET")), headers, self.allowed)
            if refused is None and has_dot_segments(scope.get("raw_path", b"").decode("latin-1")):
                refused = (400, "paths with '.' or '..' segments are refused")
            if refused is not None:
                status, reason = refused
                body = json.dumps({"error": reason}).encode()
                await send(
                    {
                        "type": "http.response.start",
                        "status": status,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def with_request_deadline(protocol_class: type, seconds: float) -> type:
    """``protocol_class`` (uvicorn's httptools or h11 protocol) with a deadline per request.

    The deadline runs from a connection's start, and on a kept-alive connection from the end of
    each response, until the request's headers and body have all arrived; a connection still
    receiving one then is closed. A request being answered (a long streamed reply) is not timed.
    """

    class DeadlineProtocol(protocol_class):
        _deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def on_message_complete(self) -> None:  # httptools: the body has arrived
            self._disarm()
            super().on_message_complete()

        def handle_events(self) -> None:  # h11: the body has arrived when the client's side is done
            super().handle_events()
            if self.conn.their_state in (h11.DONE, h11.MUST_CLOSE, h11.CLOSED):
                self._disarm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()

        def _arm(self) -> None:
            self._disarm()
            self._deadline = asyncio.get_running_loop().call_later(seconds, self._expire)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _expire(self) -> None:
            self._deadline = None
            if not self.transport.is_closing():
                self.transport.close()

    if not hasattr(protocol_class, "handle_events"):
        del DeadlineProtocol.handle_events
    if not hasattr(protocol_class, "on_message_complete"):
        del DeadlineProtocol.on_message_complete
    DeadlineProtocol.__name__ = f"Deadline{protocol_class.__name__}"
    return DeadlineProtocol


def bind_socket(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` and listening. Raises ConfigError when the port is taken or
    the address cannot be used, so a server says so before printing anything."""
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host.strip("[]"), port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        if exc.errno in (98, 48, 10048):  # EADDRINUSE on Linux, macOS, Windows
            raise ConfigError(
                f"Port {port} on {host} is taken by another program: stop it, or choose another with --port."
            ) from exc
        raise ConfigError(f"Cannot listen on {host}:{port}: {exc.strerror or exc}.") from exc
    sock.set_inheritable(True)
    return sock


def redact_userinfo(url: str) -> str:
    """``url`` with any ``user:password@`` replaced by ``***@``."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return "<unparseable URL>"
    if "@" not in parts.netloc:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    return urllib.parse.urlunsplit(parts._replace(netloc=f"***@{host}"))
