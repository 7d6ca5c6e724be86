"""Notifications from the outbox table through Apprise (Telegram, Discord, Slack, JSON webhooks, ...).

A submit writes one outbox row per configured URL in the same transaction as the request, so a
notification is never lost; the worker here leases due rows, sends them, and records each attempt
(sent, or failed with the error and a retry time) in the outbox and the audit log. Sending never
blocks a request: it happens on the worker, never on the submit path.
"""

from __future__ import annotations

import logging

from kindling.confirm.store import ConfirmationStore, OutboxItem

log = logging.getLogger("kindling.confirm.notify")


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


def deliver_due(store: ConfirmationStore, *, limit: int = 20) -> tuple[int, int]:
    """Send every due outbox row once; return (sent, failed). Blocking; call from a worker thread."""
    sent = failed = 0
    items: list[OutboxItem] = store.claim_outbox(limit=limit)
    for item in items:
        error = send_notification(item.url, item.title, item.body)
        store.finish_outbox(item, ok=error is None, error=error)
        if error is None:
            sent += 1
        else:
            failed += 1
            log.warning(
                "notification %s for %s failed (attempt %d): %s",
                item.id,
                item.request_id,
                item.attempts + 1,
                error,
            )
    return sent, failed
