"""Run the proxy: in the foreground (``serve``) or on a background thread (``ProxyServer``).

``ProxyServer`` embeds a real uvicorn server on loopback inside another program (tests, the
benchmark); port 0 picks a free port and ``base_url`` reports the one chosen.
"""

from __future__ import annotations

import gc
import logging
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any

import uvicorn

from kindling.errors import ConfigError
from kindling.httpguard import bind_socket, with_request_deadline
from kindling.observe.logs import configure_logging
from kindling.observe.tracing import Spans
from kindling.proxy.app import create_app
from kindling.proxy.recorder import ProxyStore
from kindling.proxy.settings import ProxySettings
from kindling.serving import server_config, start_in_thread

__all__ = ["ProxyServer", "serve", "startup_line"]


def _log_to_stderr(level: int = logging.INFO) -> None:
    logger = logging.getLogger("kindling.proxy")
    if not logger.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("kindling proxy: %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(level)
        logger.propagate = False


def _config(
    app: Any, settings: ProxySettings, log_level: str, *, uvicorn_logging: bool = True
) -> uvicorn.Config:
    """uvicorn's settings for the proxy: the shared ones, a read deadline per request, and none of
    uvicorn's own Server and Date headers (the upstream's pass through; uvicorn's would repeat them)."""
    config = server_config(app, settings.host, settings.port, log_level, uvicorn_logging=uvicorn_logging)
    config.server_header = False
    config.date_header = False
    config.load()
    config.http_protocol_class = with_request_deadline(config.http_protocol_class, settings.read_timeout)
    return config


def startup_line(settings: ProxySettings, app: Any) -> str:
    """What the proxy says when it starts: where it listens and forwards, where it records, and
    what warms (the default tenant's template, as the background builder knows it)."""
    from kindling.db import redact_url
    from kindling.proxy.tenants import DEFAULT_TENANT

    if not settings.warm:
        warm = "warm-up off"
    elif settings.template:
        warm = f"warm-up on from template {settings.template}"
    else:
        warm = "warm-up on: " + app.state.builder.status(DEFAULT_TENANT, {})["summary"]
    return (
        f"kindling proxy on {settings.base_url} -> {settings.shown_upstream}; recording to "
        f"{redact_url(settings.db)}; {warm}"
    )


def serve(
    settings: ProxySettings,
    *,
    log_level: str = "info",
    log_format: str = "human",
    announce: Callable[[str], None] | None = None,
) -> None:
    """Run the proxy in the foreground until interrupted; ``announce`` gets the start-up line once
    the port is bound. Its log lines go to stderr, human-readable or (``log_format="json"``) one
    JSON object a line, uvicorn's included. Raises ConfigError when the port is taken (before
    announcing anything) or for an unknown log format, StoreError for a malformed store URL."""
    sock = bind_socket(settings.host, settings.port)
    settings = settings.with_(port=sock.getsockname()[1])  # the port chosen, for --port 0
    try:
        if log_format == "human":
            _log_to_stderr()
        else:
            configure_logging(log_level, log_format)
        app = create_app(settings)
        app.state.builder.load()
        if announce is not None:
            announce(startup_line(settings, app))
        server = uvicorn.Server(_config(app, settings, log_level, uvicorn_logging=log_format == "human"))
        # Everything loaded so far lives as long as the process: keep the collector from walking it.
        gc.collect()
        gc.freeze()
        server.run(sockets=[sock])
    finally:
        sock.close()


class ProxyServer:
    """The proxy running on a background thread; a context manager, or ``start``/``stop``."""

    def __init__(
        self,
        settings: ProxySettings,
        store: ProxyStore | None = None,
        *,
        log_level: str = "warning",
        spans: Spans | None = None,
    ) -> None:
        self.settings = settings
        self.app = create_app(settings, store=store, spans=spans)
        self.server = uvicorn.Server(_config(self.app, settings, log_level))
        self._thread: threading.Thread | None = None
        self.port = settings.port

    @property
    def base_url(self) -> str:
        """The OpenAI base URL the running proxy answers on (``http://host:port/v1``)."""
        return self.settings.with_(port=self.port).base_url

    def start(self, timeout: float = 15.0) -> ProxyServer:
        """Start serving and wait until the socket accepts. Raises ConfigError when it does not."""
        failure = ConfigError(f"The proxy did not start on {self.settings.host}:{self.settings.port}.")
        self._thread, port = start_in_thread(
            self.server, name="kindling-proxy", timeout=timeout, failure=failure
        )
        self.port = port or self.port
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Ask the server to finish (it writes what is queued) and wait for its thread."""
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)

    def __enter__(self) -> ProxyServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
