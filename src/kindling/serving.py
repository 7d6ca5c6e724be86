"""Running a uvicorn server on a background thread: the start-and-wait both daemons share.

A leaf module: the confirmation daemon and the proxy each wrap it with their own error and their own
settings, and neither imports the other.
"""

from __future__ import annotations

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


def server_config(app: Any, host: str, port: int, log_level: str) -> uvicorn.Config:
    """The uvicorn settings both daemons run with: no access log, lifespan hooks on, the C parser
    and libuv loop where installed (see ``fast_paths``)."""
    http, loop = fast_paths()
    return uvicorn.Config(
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
