"""Shared helpers for the confirm tests: a daemon on a thread, a daemon in a subprocess, tokens.

(No tests here; the file is named test_confirm_* because the confirm engineer owns those names.)
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from kindling.confirm.server import ServerThread
from kindling.confirm.settings import ConfirmSettings
from kindling.confirm.store import ConfirmationStore

SRC = Path(__file__).resolve().parent.parent / "src"


@dataclass
class Tokens:
    admin: str
    agent: str
    agent2: str
    approver: str
    approver2: str


def make_tokens(store: ConfirmationStore) -> Tokens:
    """Create one token of each kind (two agents and two approvers, to test ownership)."""
    return Tokens(
        admin=store.create_token("admin", "root")[1],
        agent=store.create_token("agent", "bot")[1],
        agent2=store.create_token("agent", "bot2")[1],
        approver=store.create_token("approver", "alice")[1],
        approver2=store.create_token("approver", "bob")[1],
    )


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def daemon_settings(db: str, **changes: object) -> ConfirmSettings:
    """Settings for tests: loopback, any free port, short timeouts allowed, fast loops."""
    base = ConfirmSettings(
        db=db,
        port=0,
        min_timeout=1,
        sweep_interval=0.1,
        outbox_interval=0.1,
        poll_interval=0.05,
        notify_retry_seconds=0.2,
        ui_min_view_seconds=0.2,
    )
    return base.with_(**changes)


def sign_in(web: httpx.Client, token: str) -> httpx.Response:
    """Sign in to the web page as a browser does: fetch the form (and its CSRF cookie), post it."""
    form = web.get("/ui/login")
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', form.text)
    assert found, form.text[:300]
    return web.post("/ui/login", data={"token": token, "csrf": found.group(1)})


def card_form(page: str, request_id: str) -> dict[str, str]:
    """The hidden fields of one request's decision form on the page (csrf, digest, shown)."""
    start = page.index(f'id="req-{request_id}"')
    end = page.index("</article>", start)
    card = page[start:end]
    fields = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)">', card))
    assert {"csrf", "digest", "shown"} <= set(fields), fields
    return fields


@contextmanager
def running(settings: ConfirmSettings, store: ConfirmationStore | None = None) -> Iterator[ServerThread]:
    """A real uvicorn server on loopback on a thread."""
    server = ServerThread(settings, store)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class DaemonProcess:
    """``python -m kindling confirm serve`` in a subprocess, for kill -9 and multi-process tests."""

    def __init__(
        self,
        db: str,
        *,
        port: int | None = None,
        env: dict[str, str] | None = None,
        args: list[str] | None = None,
    ) -> None:
        self.db = db
        self.args = args or ["--log-level", "warning"]
        self.port = port or free_port()
        self.env = {
            **os.environ,
            "PYTHONPATH": str(SRC),
            "KINDLING_CONFIRM_MIN_TIMEOUT": "1",
            "KINDLING_CONFIRM_SWEEP_INTERVAL": "0.2",
            **(env or {}),
        }
        self.proc: subprocess.Popen[bytes] | None = None
        # A file, not a pipe: a chatty daemon must never block on a full pipe buffer.
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the daemon
        self._out = tempfile.TemporaryFile()  # noqa: SIM115 - stdout, apart from the log

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def launch(self) -> DaemonProcess:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kindling",
                "confirm",
                "serve",
                "--port",
                str(self.port),
                "--db",
                self.db,
                *self.args,
            ],
            env=self.env,
            stdout=self._out,
            stderr=self._log,
        )
        return self

    def start(self, timeout: float = 30.0) -> DaemonProcess:
        if self.proc is None:
            self.launch()
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"daemon exited {self.proc.returncode}: {self.log()[-2000:]}")
            try:
                if httpx.get(self.url + "/health", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.kill()
        raise RuntimeError("daemon did not become healthy")

    def kill(self) -> None:
        """SIGKILL: no shutdown hooks run, exactly like a crash."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()

    def log(self) -> str:
        self._log.seek(0)
        return self._log.read().decode(errors="replace")

    def output(self) -> str:
        """What the daemon printed on stdout."""
        self._out.seek(0)
        return self._out.read().decode(errors="replace")
