"""Running a uvicorn server on a background thread: the start-and-wait both daemons share.

A leaf module: the confirmation daemon and the proxy each wrap it with their own error and their own
settings, and neither imports the other.
"""

from __future__ import annotations

import asyncio
import importlib.util
import threading
import time
from typing import Any

import uvicorn


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


class _Config(uvicorn.Config):
    def load(self) -> None:
        super().load()
        if self.http == "httptools":
            self.http_protocol_class = _joined_writes(self.http_protocol_class)


def server_config(app: Any, host: str, port: int, log_level: str) -> uvicorn.Config:
    """The uvicorn settings both daemons run with: no access log, lifespan hooks on, the C parser
    and libuv loop where installed (see ``fast_paths``), each response's head and body sent in one
    write (see ``_JoinedWrites``)."""
    http, loop = fast_paths()
    return _Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        access_log=False,
        lifespan="on",
        http=http,
        loop=loop,
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
