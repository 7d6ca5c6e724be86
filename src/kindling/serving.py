"""The uvicorn server kindling's daemons run on: its settings, each response sent in one write, the
direct protocol that answers a daemon's plainest requests on the connection itself, and the
start-and-wait of a server on a background thread.

The confirmation daemon and the proxy each wrap it with their own error and their own settings, and
neither imports the other. The direct protocol subclasses uvicorn's httptools protocol and uses its
internals, so it runs only on the uvicorn releases it was tested on (``DIRECT_UVICORN``, the ones
pyproject.toml allows).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import uvicorn
from starlette.requests import ClientDisconnect

from kindling.edge import BodyLimit, Head, read_head

# What uvicorn's C-parser protocol writes with; direct requests are answered only on it (without
# httptools, a dependency, nothing is direct).
with contextlib.suppress(ImportError):
    from uvicorn.protocols.http.httptools_impl import HEADER_RE, HEADER_VALUE_RE, STATUS_LINE


def fast_paths() -> tuple[str, str]:
    """Return the HTTP parser and event loop the daemons run on: ``("httptools", "uvloop")`` when
    both are installed (kindling depends on them), else uvicorn's pure-Python ``h11`` and/or
    ``asyncio`` (uvloop has no Windows build)."""
    http = "httptools" if importlib.util.find_spec("httptools") else "h11"
    loop = "uvloop" if importlib.util.find_spec("uvloop") else "asyncio"
    return http, loop


class _JoinedWrites:
    """The transport one response cycle writes to: its status line and headers go out with the
    body's first bytes, in one write.

    uvicorn writes the head and the body of a response separately: two ``send`` calls, two packets,
    and a client woken twice for one answer. The head is held only until the body's first write or
    the end of the event loop's current turn, whichever comes first, so a streamed response's
    headers are never held back while its body is awaited. Anything else is the real transport's.
    """

    __slots__ = ("_cycle", "_held", "_transport")

    def __init__(self, transport: asyncio.Transport, cycle: Any) -> None:
        self._transport = transport
        self._cycle = cycle  # until the head is written
        self._held: bytes | None = None

    def write(self, data: bytes) -> None:
        """Hold the response's head (the first write once the response started); send anything
        else at once, after the held head."""
        cycle = self._cycle
        if cycle is not None and cycle.response_started:
            # The cycle refers to this transport: let go of it, so the two are freed with the
            # request instead of waiting, a reference loop, for the garbage collector.
            self._cycle = None
            self._held = data
            asyncio.get_running_loop().call_soon(self.flush)
            return
        if self._held is not None:
            data, self._held = self._held + data, None
        self._transport.write(data)

    def flush(self) -> None:
        """Send a held head now."""
        if self._held is not None:
            data, self._held = self._held, None
            if not self._transport.is_closing():
                self._transport.write(data)

    def close(self) -> None:
        """Send a held head, then close."""
        self.flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


def _joined_writes(protocol: Any) -> Any:
    # uvicorn's C-parser protocol with each response sent in one write (see _JoinedWrites).
    class JoinedWritesProtocol(protocol):
        def _start_asgi_task(self, cycle: Any, app: Any) -> None:
            cycle.transport = _JoinedWrites(self.transport, cycle)
            super()._start_asgi_task(cycle, app)

    return JoinedWritesProtocol


class Direct(Protocol):
    """Requests a daemon answers on the connection itself, without an ASGI cycle (see ``_direct``).

    Only ``POST`` requests whose whole body is declared within ``limit`` come here, and only
    the paths ``find_route`` returns something for; ``respond`` answers one from its head (read by
    ``edge.read_head``, as the ASGI app reads it) with its status, headers (lowercase names) and
    body, raising what the ASGI app would let escape (a 500).
    """

    @property
    def limit(self) -> BodyLimit:
        """The body limit; a request declaring more goes to the ASGI app."""
        ...

    def find_route(self, path: str) -> Any | None:
        """What answers ``POST path`` directly, or None for the ASGI app."""
        ...

    def respond(
        self, route: Any, head: Head, body: Callable[[], Awaitable[bytes]]
    ) -> Awaitable[tuple[int, list[tuple[bytes, bytes]], bytes]]:
        """Answer one request from its head and its body."""
        ...


class Disconnected(ClientDisconnect):
    """The client left before its direct request's body arrived: nobody to answer."""


class _DirectCycle:
    """One direct request on a connection: what uvicorn's protocol keeps of a request cycle (its
    body, keep-alive and completion flags, the event its parser callbacks set), and the task that
    answers it. The answer goes out as uvicorn's cycle writes it, head and body in one write."""

    __slots__ = (
        "body",
        "disconnected",
        "head",
        "keep_alive",
        "more_body",
        "protocol",
        "response_complete",
        "response_started",
        "route",
        "waiter",
    )

    def __init__(self, protocol: Any, route: Any, head: Head) -> None:
        self.protocol = protocol
        self.route = route
        self.head = head
        self.body = bytearray()
        self.more_body = True
        self.keep_alive = True  # shutdown() turns it off: the answer then closes the connection
        self.disconnected = False
        self.response_started = False
        self.response_complete = False
        self.waiter: asyncio.Future[None] | None = None

    @property
    def message_event(self) -> _DirectCycle:
        """What the protocol sets on body bytes, the body's end and a hang-up: the cycle itself (a
        property: an attribute referring to the cycle would leave it to the garbage collector)."""
        return self

    def set(self) -> None:
        """Wake ``read_body`` (the protocol's ``message_event.set()``)."""
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def read_body(self) -> bytes:
        """Return the whole body, once it has arrived; raise Disconnected if the client left."""
        while self.more_body and not self.disconnected:
            self.protocol.flow.resume_reading()  # paused past uvicorn's high-water mark
            self.waiter = self.protocol.loop.create_future()
            await self.waiter
            self.waiter = None
        if self.disconnected:
            raise Disconnected
        return bytes(self.body)

    async def run(self, direct: Direct) -> None:
        """Answer the request, or a 500 as uvicorn sends one when the app raises."""
        protocol = self.protocol
        try:
            status, headers, body = await direct.respond(self.route, self.head, self.read_body)
        except Disconnected:
            return
        except Exception as exc:
            protocol.logger.error("Exception in ASGI application\n", exc_info=exc)
            status, body = 500, b"Internal Server Error"
            headers = [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", b"21"),
                (b"connection", b"close"),
            ]
        if protocol.flow.write_paused and not self.disconnected:
            await protocol.flow.drain()
        if self.disconnected:
            return
        content = [STATUS_LINE[status]]
        closing = False
        for name, value in protocol.server_state.default_headers:
            content.extend((name, b": ", value, b"\r\n"))
        for name, value in headers:
            if HEADER_RE.search(name) or HEADER_VALUE_RE.search(value):
                raise RuntimeError("Invalid HTTP header.")
            if name == b"connection" and b"close" in [t.lower().strip() for t in value.split(b",")]:
                self.keep_alive = False
                closing = True
            content.extend((name, b": ", value, b"\r\n"))
        if not self.keep_alive and not closing:
            content.append(b"connection: close\r\n")
        content.extend((b"\r\n", body))
        self.response_started = True
        protocol.transport.write(b"".join(content))
        self.response_complete = True
        if not self.keep_alive:
            protocol.transport.close()
        protocol.on_response_complete()


#: The uvicorn releases the direct path was tested on: it subclasses their httptools protocol and uses its
#: internals (the cycle, flow control, tasks, default headers). pyproject.toml allows only these; on any
#: other release (installed by hand) the daemons answer every request through the ASGI app (the same
#: bytes, a little more work per request).
DIRECT_UVICORN = ((0, 54),)


def direct_supported(version: str) -> bool:
    """True when uvicorn ``version`` (``"0.54.0"``) is one the direct path was tested on."""
    parts = version.split(".")
    try:
        release = (int(parts[0]), int(parts[1]))
    except (IndexError, ValueError):
        return False
    return release in DIRECT_UVICORN


def _direct(protocol: Any, direct: Direct) -> Any:
    # uvicorn's C-parser protocol answering ``direct``'s requests itself; see ``_DirectCycle``.
    class DirectProtocol(protocol):
        def on_message_begin(self) -> None:
            # The ASGI scope is built only for a request that goes to the app (on_headers_complete).
            self.url = b""
            self.expect_100_continue = False
            self.headers: list[tuple[bytes, bytes]] = []

        def on_headers_complete(self) -> None:
            found = self._direct_request()
            if found is None:
                url, headers, expect = self.url, self.headers, self.expect_100_continue
                super().on_message_begin()
                self.url, self.headers, self.expect_100_continue = url, headers, expect
                self.scope["headers"] = headers
                super().on_headers_complete()
                return
            cycle = self.cycle = _DirectCycle(self, *found)
            task = self.loop.create_task(cycle.run(direct))
            task.add_done_callback(self.tasks.discard)
            self.tasks.add(task)

        def _direct_request(self) -> tuple[Any, Head] | None:
            # A keep-alive HTTP/1.1 POST to a direct path, with a declared body within the limit and
            # no request of the connection still being answered; anything else goes to the app.
            parser = self.parser
            existing = self.cycle
            if (
                parser.get_method() != b"POST"
                or (existing is not None and not existing.response_complete)
                or parser.get_http_version() != "1.1"
                or not parser.should_keep_alive()
                or parser.should_upgrade()
                or self.root_path
                or self.limit_concurrency is not None
            ):
                return None
            url = self.url
            if not url.startswith(b"/") or not url.isascii() or b"?" in url or b"%" in url or b"#" in url:
                return None
            route = direct.find_route(url.decode("ascii"))
            if route is None:
                return None
            head = read_head(self.headers)
            if not head.framed or head.content_length is None or not head.content_length.isdigit():
                return None
            if direct.limit.declared_past(head.content_length):
                return None
            return route, head

    return DirectProtocol


class _Config(uvicorn.Config):
    def __init__(self, *args: Any, direct: Direct | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.direct = direct

    def load(self) -> None:
        super().load()
        if self.http == "httptools":
            self.http_protocol_class = _joined_writes(self.http_protocol_class)
            if self.direct is not None and direct_supported(uvicorn.__version__):
                self.http_protocol_class = _direct(self.http_protocol_class, self.direct)


def server_config(
    app: Any,
    host: str,
    port: int,
    log_level: str,
    *,
    direct: Direct | None = None,
    uvicorn_logging: bool = True,
) -> uvicorn.Config:
    """The uvicorn settings both daemons run with: no access log, lifespan hooks on, the C parser
    and libuv loop where installed (see ``fast_paths``), each response's head and body sent in one
    write (see ``_JoinedWrites``), and ``direct``'s requests answered on the connection without an
    ASGI cycle (with the C parser; see ``Direct``). ``uvicorn_logging=False`` leaves uvicorn's
    loggers as they are (set up by ``observe.logs.configure_logging`` for JSON lines)."""
    http, loop = fast_paths()
    extra: dict[str, Any] = {} if uvicorn_logging else {"log_config": None}
    return _Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        access_log=False,
        lifespan="on",
        http=http,
        loop=loop,
        direct=direct,
        **extra,
    )


def start_in_thread(
    server: uvicorn.Server, *, name: str, timeout: float, failure: Exception
) -> tuple[threading.Thread, int | None]:
    """Run ``server`` on a daemon thread and wait until its socket accepts.

    Returns the thread and the port really bound (None when uvicorn reports no socket). Raises
    ``failure`` when the thread dies or ``timeout`` seconds pass first.
    """
    thread = threading.Thread(target=server.run, name=name, daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise failure
        time.sleep(0.01)
    sockets = [s for listener in server.servers for s in listener.sockets]
    return thread, (int(sockets[0].getsockname()[1]) if sockets else None)
