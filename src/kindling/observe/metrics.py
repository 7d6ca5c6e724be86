"""Prometheus metrics of one service, with ``prometheus-client``, in a registry of the service's own.

A registry per service (not the library's global one), so two services in one process, or a test's
many apps, never count into each other. ``HttpMetrics`` counts requests by route, method and status
and times them; a service adds its own metrics to the same ``registry``.
"""

from __future__ import annotations

import bisect
import hmac
from collections.abc import Iterator, Sequence

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

# Request latency buckets, in seconds: a confirmation is answered in milliseconds, a long poll
# waits up to a minute, an upstream model call up to several.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

#: The route label of a request no route matched (one label for all, so a scan of made-up paths
#: cannot grow the series without bound).
UNMATCHED = "unmatched"


class HttpMetrics(Collector):
    """``kindling_http_requests_total{route,method,status}`` and
    ``kindling_http_request_duration_seconds{route,method}``, where ``route`` is the route's
    template (``/confirm/{request_id}/approve``), never the path asked for.

    ``observe`` is called on every request, on the service's event loop: it adds to plain counts
    (a request's cost there is a dictionary look-up and three additions, where prometheus-client's
    ``Counter`` and ``Histogram`` take a lock per number, several times the whole cost), and
    prometheus-client turns them into its metric families when the registry is collected.
    ``observe`` must be called from one thread (the event loop's); collecting may run on another.
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        # Per (route, method, status): the count in each latency bucket (not cumulative; the last
        # is +Inf), then the sum of the latencies. The request count is the buckets' total.
        self._counts: dict[tuple[str, str, int], list[float]] = {}
        self._bounds = LATENCY_BUCKETS
        registry.register(self)

    def observe(self, route: str, method: str, status: int, seconds: float) -> None:
        """Count one answered request and its latency."""
        counts = self._counts.get((route, method, status))
        if counts is None:
            counts = self._counts[(route, method, status)] = [0.0] * (len(self._bounds) + 2)
        counts[bisect.bisect_left(self._bounds, seconds)] += 1
        counts[-1] += seconds

    def collect(self) -> Iterator[Metric]:
        """Yield the request counter and the latency histogram, as prometheus-client's families."""
        requests = CounterMetricFamily(
            "kindling_http_requests",
            "HTTP requests answered, by route template, method and status.",
            labels=["route", "method", "status"],
        )
        latencies: dict[tuple[str, str], list[float]] = {}
        for (route, method, status), counts in list(self._counts.items()):
            snapshot = list(counts)
            requests.add_metric([route, method, str(status)], sum(snapshot[:-1]))
            merged = latencies.setdefault((route, method), [0.0] * len(snapshot))
            for i, value in enumerate(snapshot):
                merged[i] += value
        latency = HistogramMetricFamily(
            "kindling_http_request_duration_seconds",
            "Time from a request's head to its answer, by route template and method.",
            labels=["route", "method"],
        )
        for (route, method), merged in latencies.items():
            add_counts(latency, [route, method], self._bounds, merged)
        yield requests
        yield latency


def add_counts(
    family: HistogramMetricFamily, labels: list[str], bounds: Sequence[float], counts: list[float]
) -> None:
    """Add one labelled histogram to ``family`` from plain counts: the count in each bucket of
    ``bounds`` (not cumulative; then +Inf), then the sum of the observations."""
    cumulative, total = [], 0.0
    for bound, count in zip([*map(floatToGoString, bounds), "+Inf"], counts[:-1], strict=True):
        total += count
        cumulative.append((bound, total))
    family.add_metric(labels, cumulative, counts[-1])


class Counts:
    """A labelled histogram kept as plain counts (``HttpMetrics``'s way: one look-up and three
    additions an observation, no lock), turned into a prometheus-client family when collected.

    ``observe`` must be called from one thread; collecting may run on another.
    """

    __slots__ = ("bounds", "counts")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(bounds)
        self.counts: dict[tuple[str, ...], list[float]] = {}

    def observe(self, labels: tuple[str, ...], value: float) -> None:
        """Count one observation of ``value`` under ``labels``."""
        counts = self.counts.get(labels)
        if counts is None:
            counts = self.counts[labels] = [0.0] * (len(self.bounds) + 2)
        counts[bisect.bisect_left(self.bounds, value)] += 1
        counts[-1] += value

    def family(self, name: str, documentation: str, labels: Sequence[str]) -> HistogramMetricFamily:
        """Return the histogram as prometheus-client's family ``name``."""
        family = HistogramMetricFamily(name, documentation, labels=list(labels))
        for key, counts in list(self.counts.items()):
            add_counts(family, list(key), self.bounds, list(counts))
        return family


def render(registry: CollectorRegistry) -> tuple[bytes, str]:
    """Return the registry's metrics in the Prometheus text format, and its content type.

    Runs every collector, some of which may read a database: call it off the event loop.
    """
    return generate_latest(registry), CONTENT_TYPE_LATEST


def bearer_token(authorization: str | None) -> str | None:
    """Return the token of an ``Authorization: Bearer <token>`` header, else None."""
    if not authorization:
        return None
    scheme, _, token = authorization.partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


def token_matches(expected: str, authorization: str | None) -> bool:
    """True when ``authorization`` carries ``expected`` as its bearer token (compared in constant
    time); never for an empty ``expected``."""
    given = bearer_token(authorization)
    return bool(expected) and given is not None and hmac.compare_digest(given.encode(), expected.encode())
