"""Run the proxy: in the foreground (``serve``) or on a background thread (``ProxyServer``).

``ProxyServer`` embeds a real uvicorn server on loopback inside another program (tests, the
benchmark); port 0 picks a free port and ``base_url`` reports the one chosen.
"""

from __future__ import annotations

import gc
import logging
import threading
from types import TracebackType

import uvicorn

from kindling.errors import ConfigError
from kindling.proxy.app import create_app
from kindling.proxy.recorder import ProxyStore
from kindling.proxy.settings import ProxySettings
from kindling.serving import server_config, start_in_thread

__all__ = ["ProxyServer", "serve"]


def _log_to_stderr(level: int = logging.INFO) -> None:
    logger = logging.getLogger("kindling.proxy")
    if not logger.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("kindling proxy: %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(level)
        logger.propagate = False


def serve(settings: ProxySettings, *, log_level: str = "info") -> None:
    """Run the proxy in the foreground until interrupted. Raises StoreError for a malformed store URL."""
    _log_to_stderr()
    app = create_app(settings)
    # Everything loaded so far lives as long as the process: keep the collector from walking it.
    gc.collect()
    gc.freeze()
    # The upstream's own Server and Date headers pass through; uvicorn's would repeat them.
    uvicorn.run(
        app,
        host=settings.host,
        port=settings.port,
        log_level=log_level,
        access_log=False,
        server_header=False,
        date_header=False,
    )


class ProxyServer:
    """The proxy running on a background thread; a context manager, or ``start``/``stop``."""

    def __init__(
        self, settings: ProxySettings, store: ProxyStore | None = None, *, log_level: str = "warning"
    ) -> None:
        self.settings = settings
        self.app = create_app(settings, store=store)
        self.server = uvicorn.Server(server_config(self.app, settings.host, settings.port, log_level))
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
