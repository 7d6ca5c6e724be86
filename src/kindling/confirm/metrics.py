"""The daemon's own Prometheus metrics, beside the request counts every service has.

Counted by this process as things happen: decisions by outcome, requests expired by its sweeper,
notification deliveries by result. Read from the database at each scrape (so they are the same on
every daemon sharing it): pending requests, the notification outbox by status, the audit chain's
length; and from this process, the long polls it holds open.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from kindling.confirm.store import STATUSES, ConfirmationStore
from kindling.errors import KindlingError

log = logging.getLogger("kindling.confirm")

OUTCOMES = ("approved", "denied", "auto_approved")
OUTBOX_STATUSES = ("pending", "sent", "dead")


class ConfirmMetrics:
    """The daemon's counters, and the collector that reads its database at each scrape."""

    def __init__(
        self, registry: CollectorRegistry, store: ConfirmationStore, long_polls: Callable[[], int]
    ) -> None:
        self.decisions = Counter(
            "kindling_confirm_decisions",
            "Requests decided by this daemon, by outcome (approved, denied, auto_approved).",
            ("outcome",),
            registry=registry,
        )
        self.timeouts = Counter(
            "kindling_confirm_timeouts",
            "Pending requests this daemon's sweeper expired (a timeout denies).",
            registry=registry,
        )
        self.notifications = Counter(
            "kindling_confirm_notifications",
            "Notification deliveries this daemon attempted, by result (sent, failed).",
            ("result",),
            registry=registry,
        )
        self._decided = {outcome: self.decisions.labels(outcome) for outcome in OUTCOMES}
        self._delivered = {
            True: self.notifications.labels("sent"),
            False: self.notifications.labels("failed"),
        }
        registry.register(StoreCollector(store, long_polls))

    def decided(self, outcome: str) -> None:
        """Count one decision (``approved``, ``denied`` or ``auto_approved``)."""
        counter = self._decided.get(outcome)
        if counter is not None:
            counter.inc()

    def expired(self, request_ids: list[str]) -> None:
        """Count the requests a sweep expired."""
        if request_ids:
            self.timeouts.inc(len(request_ids))

    def delivered(self, ok: bool) -> None:
        """Count one notification delivery attempt."""
        self._delivered[ok].inc()


class StoreCollector(Collector):
    """Reads the gauges that live in the database when Prometheus scrapes (off the event loop)."""

    def __init__(self, store: ConfirmationStore, long_polls: Callable[[], int]) -> None:
        self.store = store
        self.long_polls = long_polls

    def collect(self) -> Iterator[GaugeMetricFamily]:
        """Yield the database's gauges, and ``kindling_confirm_store_up`` (0 when it cannot be read)."""
        up = GaugeMetricFamily("kindling_confirm_store_up", "1 when the database answered this scrape.")
        polls = GaugeMetricFamily("kindling_confirm_long_polls_open", "Long polls this daemon holds open.")
        polls.add_metric([], self.long_polls())
        try:
            summary = self.store.summary()
        except KindlingError as exc:
            log.error("metrics could not read the database: %s", exc)
            up.add_metric([], 0)
            yield from (up, polls)
            return
        up.add_metric([], 1)
        requests = GaugeMetricFamily(
            "kindling_confirm_requests", "Requests in the database, by status.", labels=["status"]
        )
        for status in STATUSES:
            requests.add_metric([status], summary["requests"].get(status, 0))
        pending = GaugeMetricFamily("kindling_confirm_pending_requests", "Requests waiting for a decision.")
        pending.add_metric([], summary["requests"].get("pending", 0))
        outbox = GaugeMetricFamily(
            "kindling_confirm_outbox",
            "Notifications in the outbox, by status (pending: the depth still to send; dead: given up).",
            labels=["status"],
        )
        for status in sorted({*OUTBOX_STATUSES, *summary["outbox"]}):
            outbox.add_metric([status], summary["outbox"].get(status, 0))
        audit = GaugeMetricFamily(
            "kindling_confirm_audit_chain_length", "Events in the hash-chained audit log."
        )
        audit.add_metric([], summary["audit_events"])
        yield from (up, polls, requests, pending, outbox, audit)
