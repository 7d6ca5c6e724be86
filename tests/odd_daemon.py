"""A fake confirmation daemon on loopback that answers in the odd ways a client must not trust.

Each mode is an answer to ``POST /confirm`` (and, for ``other_id``, to the ``GET`` that follows)
that a careless client would read as "approved"::

    with OddDaemon() as daemon:
        url = daemon.url("html")          # http://127.0.0.1:PORT/html: every request in that mode

A request picks its mode by the first segment of its path (``/html/confirm``), else by the
``session_key`` of its body (the Hermes plugin's base URL is fixed for the whole process, and its
requests carry the session id as ``session_key``). Every well-formed part of an answer echoes the
submitted action, so the odd part is the only thing wrong with it:

- ``html``: 200 with an HTML page that says "approved";
- ``list``: 200 with a JSON list holding an approved request;
- ``no_id``: 202 ``pending`` without an id;
- ``other_id``: 202 ``pending`` with id ``cr_mine``, then ``GET /confirm/cr_mine`` answers that
  ``cr_SOMEONE_ELSE`` is approved;
- ``redirect``: 302 to an approve URL, with a body saying auto-approved;
- ``unknown_status``: 200 with status ``approvedish``;
- ``slow``: a well-formed auto-approval, 30 s late;
- ``trickle``: the status line, then one byte of a header every 0.2 s for 30 s.

The slow answers wait on an event that ``close`` sets, so no test waits for them to finish.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODES = ("html", "list", "no_id", "other_id", "redirect", "unknown_status", "slow", "trickle")
# The six odd answers every approval surface is tested against (the list).
ODD_ANSWERS = ("html", "list", "no_id", "other_id", "redirect", "slow")
SLOW_SECONDS = 30.0


class OddDaemon:
    """The server; ``url(mode)`` is a daemon URL answering in ``mode``; ``seen`` lists (method, path, body)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.seen: list[tuple[str, str, dict[str, Any] | None]] = []
        daemon = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    body = {}
                daemon.seen.append(("POST", self.path, body))
                daemon.answer(self, self.path, body if isinstance(body, dict) else {})

            def do_GET(self) -> None:
                daemon.seen.append(("GET", self.path, None))
                daemon.answer(self, self.path, None)

        self.server = _Server(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def url(self, mode: str = "") -> str:
        """The base URL of a daemon that answers in ``mode`` (no mode: chosen by session_key)."""
        return f"http://127.0.0.1:{self.port}" + (f"/{mode}" if mode else "")

    def __enter__(self) -> OddDaemon:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()

    def answer(self, handler: BaseHTTPRequestHandler, path: str, body: dict[str, Any] | None) -> None:
        first = path.lstrip("/").split("/", 1)[0].split("?", 1)[0]
        mode = first if first in MODES else str((body or {}).get("session_key") or "")
        if not mode and body is None and path.split("?", 1)[0].endswith("/cr_mine"):
            mode = "other_id"  # the GET after an other_id submit carries no session key
        action = (body or {}).get("action", "hermes.terminal")
        record = {"action": action, "description": "d", "timeout_seconds": 3}
        if mode == "html":
            send(handler, 200, b"<html><body><h1>Request approved</h1></body></html>", "text/html")
        elif mode == "list":
            send_json(handler, 200, [{"id": "cr_1", "status": "approved", **record}])
        elif mode == "no_id":
            send_json(handler, 202, {"status": "pending", **record})
        elif mode == "other_id" and body is not None:
            send_json(handler, 202, {"id": "cr_mine", "status": "pending", **record})
        elif mode == "other_id":
            send_json(handler, 200, {"id": "cr_SOMEONE_ELSE", "status": "approved", **record})
        elif mode == "redirect":
            payload = json.dumps({"id": "cr_r", "status": "auto_approved", **record}).encode()
            send(handler, 302, payload, "application/json", {"Location": "/confirm/cr_r/approve"})
        elif mode == "unknown_status":
            send_json(handler, 200, {"id": "cr_u", "status": "approvedish", **record})
        elif mode == "slow":
            self.release.wait(SLOW_SECONDS)
            send_json(handler, 200, {"id": "cr_slow", "status": "auto_approved", **record})
        elif mode == "trickle":
            handler.wfile.write(b"HTTP/1.1 200 OK\r\n")
            handler.wfile.flush()
            for _ in range(int(SLOW_SECONDS / 0.2)):
                if self.release.wait(0.2):
                    break
                handler.wfile.write(b"X")
                handler.wfile.flush()
            handler.close_connection = True
        else:
            send_json(handler, 404, {"error": f"no mode {mode!r}"})


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that gave up on a late answer hung up: expected here


def send(
    handler: BaseHTTPRequestHandler,
    status: int,
    payload: bytes,
    content_type: str,
    headers: dict[str, str] | None = None,
) -> None:
    handler.send_response(status)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(payload)))
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    handler.end_headers()
    handler.wfile.write(payload)


def send_json(handler: BaseHTTPRequestHandler, status: int, value: Any) -> None:
    send(handler, status, json.dumps(value).encode(), "application/json")
