"""Notifications from the outbox table through Apprise (Telegram, Discord, Slack, JSON webhooks, ...).

A submit writes one outbox row per configured URL in the same transaction as the request, so a
notification is never lost; the worker here leases due rows, sends them, and records each attempt
(sent, or failed with the error and a retry time) in the outbox and the audit log. Sending never
blocks a request: it happens on the worker, never on the submit path. Each row is sent on its own
thread, so a target that hangs until its timeout delays no other target.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
from collections.abc import Callable

from kindling.confirm.store import ConfirmationStore, OutboxItem

log = logging.getLogger("kindling.confirm.notify")

Sender = Callable[[str, str, str], "str | None"]


def send_notification(url: str, title: str, body: str) -> str | None:
    """Send one notification through Apprise; return None on success, else the error text."""
    import apprise  # lazy: apprise loads many plugins

    notifier = apprise.Apprise()
    try:
        if not notifier.add(url):
            return "Apprise does not understand this notification URL."
        with apprise.LogCapture(level=logging.WARNING) as captured:
            ok = notifier.notify(title=title, body=body)
        if ok:
            return None
        detail = " ".join(line.split(" - ", 2)[-1] for line in captured.getvalue().splitlines()[-3:])
        return detail.strip() or "Apprise reported a failed delivery."
    except Exception as exc:  # apprise plugins raise anything; one bad URL must not stop the worker
        return f"{type(exc).__name__}: {exc}"


class Deliveries:
    """Sends due outbox rows, each on its own worker thread, at most ``max_in_flight`` at once;
    ``on_delivered`` (if given) is told each attempt's result (True: sent).

    ``dispatch`` leases only as many rows as there are free threads and returns at once; each send
    records its own outcome when it ends. A dead target holds one thread until its timeout, never
    the others, and never the next ``dispatch``.
    """

    def __init__(
        self,
        store: ConfirmationStore,
        *,
        max_in_flight: int = 16,
        send: Sender | None = None,
        on_delivered: Callable[[bool], None] | None = None,
    ) -> None:
        self.store = store
        self.on_delivered = on_delivered
        self.max_in_flight = max_in_flight
        self._send = send or send_notification
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_in_flight, thread_name_prefix="kindling-notify"
        )
        self._lock = threading.Lock()
        self._in_flight: set[concurrent.futures.Future[bool]] = set()

    def dispatch(self) -> list[concurrent.futures.Future[bool]]:
        """Lease the due rows there is room for and start sending each; return their futures (True: sent)."""
        with self._lock:
            room = self.max_in_flight - len(self._in_flight)
        if room <= 0:
            return []
        started = []
        for item in self.store.claim_outbox(limit=room):
            future = self._pool.submit(self._deliver, item)
            with self._lock:
                self._in_flight.add(future)
            future.add_done_callback(self._done)
            started.append(future)
        return started

    def _done(self, future: concurrent.futures.Future[bool]) -> None:
        with self._lock:
            self._in_flight.discard(future)

    def _deliver(self, item: OutboxItem) -> bool:
        error = self._send(item.url, item.title, item.body)
        if self.on_delivered is not None:
            self.on_delivered(error is None)
        try:
            self.store.finish_outbox(item, ok=error is None, error=error)
        except Exception:
            # The lease runs out and the row is tried again; say so rather than lose the reason.
            log.exception("could not record the delivery of notification %s", item.id)
        if error is not None:
            log.warning(
                "notification %s for %s failed (attempt %d): %s",
                item.id,
                item.request_id,
                item.attempts + 1,
                error,
            )
        return error is None

    def close(self) -> None:
        """Wait for the sends under way (each ends at its target's timeout) and stop the threads."""
        self._pool.shutdown(wait=True, cancel_futures=True)


def deliver_due(store: ConfirmationStore, *, limit: int = 20) -> tuple[int, int]:
    """Send every due outbox row once, in parallel; return (sent, failed) when all have ended.

    Blocking; call from a worker thread.
    """
    deliveries = Deliveries(store, max_in_flight=limit)
    try:
        results = [f.result() for f in deliveries.dispatch()]
    finally:
        deliveries.close()
    return results.count(True), results.count(False)
