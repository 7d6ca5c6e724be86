"""Run the daemon: in the foreground (``serve``) or on a background thread (``ServerThread``).

``ServerThread`` embeds a real uvicorn server on loopback inside another program (tests, the
benchmark, an agent host); port 0 picks a free port and ``base_url`` reports the one chosen.
"""

from __future__ import annotations

import gc
import threading
from types import FrameType, TracebackType
from typing import Any

import uvicorn

from kindling.confirm.app import create_app
from kindling.confirm.settings import ConfirmSettings
from kindling.confirm.store import ConfirmationStore
from kindling.errors import ConfirmError
from kindling.observe.logs import configure_logging
from kindling.observe.tracing import Spans
from kindling.serving import server_config, start_in_thread


def log_to_stderr(level: str = "info", log_format: str = "human") -> None:
    """Send the ``kindling`` loggers' records (sweeper, outbox, request errors) to stderr with levels,
    human-readable or as JSON lines (``observe.logs.configure_logging``).

    The library itself only has a NullHandler; a serving daemon must say when its database is gone.
    ``level`` is uvicorn's (``trace`` and ``debug`` both mean DEBUG). Calling it again only changes
    the level and format.
    """
    configure_logging(level, log_format)


def serve(settings: ConfirmSettings, *, log_level: str = "info", log_format: str = "human") -> None:
    """Run the daemon in the foreground until interrupted. Raises StoreError if the db fails.

    The daemon's own messages go to stderr at ``log_level``, as ``log_format`` says (see
    ``log_to_stderr``).
    """
    log_to_stderr(log_level, log_format)
    app = create_app(settings)
    # What was built to start (modules, the app, its routes and schemas) lives as long as the
    # process: out of the collector's sight, its full collections walk only what came after.
    gc.collect()
    gc.freeze()
    config = server_config(
        app, settings.host, settings.port, log_level, direct=app, uvicorn_logging=log_format == "human"
    )
    _Server(config, app).run()


class _Server(uvicorn.Server):
    """uvicorn's server, which on SIGTERM/SIGINT first ends the long polls waiting for decisions:
    uvicorn waits for open requests, and an idle long poll would hold shutdown for its whole wait."""

    def __init__(self, config: uvicorn.Config, app: Any) -> None:
        super().__init__(config)
        self._app = app

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        """End every long poll (they answer with the request as it stands), then stop as uvicorn does."""
        self._app.state.decision_signal.close()
        super().handle_exit(sig, frame)


class ServerThread:
    """A daemon running on a background thread; use as a context manager or ``start``/``stop``."""

    def __init__(
        self,
        settings: ConfirmSettings,
        store: ConfirmationStore | None = None,
        *,
        log_level: str = "warning",
        spans: Spans | None = None,
    ) -> None:
        self.settings = settings
        self.app = create_app(settings, store, spans=spans)
        self.server = _Server(
            server_config(self.app, settings.host, settings.port, log_level, direct=self.app), self.app
        )
        self._thread: threading.Thread | None = None
        self.port = settings.port

    @property
    def base_url(self) -> str:
        """The URL the running server answers on."""
        return f"http://{self.settings.host}:{self.port}"

    def start(self, timeout: float = 15.0) -> ServerThread:
        """Start serving and wait until the socket accepts. Raises ConfirmError when it does not."""
        failure = ConfirmError(f"The confirm daemon did not start on {self.settings.host}.")
        self._thread, port = start_in_thread(
            self.server, name="kindling-confirm", timeout=timeout, failure=failure
        )
        self.port = port or self.port
        # Links in responses must point at the port really chosen.
        if not self.settings.public_url:
            self.app.state.settings = self.settings.with_(port=self.port)
            store = self.app.state.store
            if store.settings.port == 0 and not store.settings.public_url:
                store.settings = store.settings.with_(port=self.port)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Ask the server to finish and wait for its thread."""
        self.app.state.decision_signal.close()
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
