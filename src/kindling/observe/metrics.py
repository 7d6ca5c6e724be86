"""Prometheus metrics of one service, with ``prometheus-client``, in a registry of the service's own.

A registry per service (not the library's global one), so two services in one process, or a test's
many apps, never count into each other. ``HttpMetrics`` counts requests by route, method and status
and times them; a service adds its own metrics to the same ``registry``.
"""

from __future__ import annotations

import hmac

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

# Request latency buckets, in seconds: a confirmation is answered in milliseconds, a long poll
# waits up to a minute, an upstream model call up to several.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

#: The route label of a request no route matched (one label for all, so a scan of made-up paths
#: cannot grow the series without bound).
UNMATCHED = "unmatched"


class HttpMetrics:
    """``kindling_http_requests_total{route,method,status}`` and
    ``kindling_http_request_duration_seconds{route,method}``, where ``route`` is the route's
    template (``/confirm/{request_id}/approve``), never the path asked for."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter(
            "kindling_http_requests",
            "HTTP requests answered, by route template, method and status.",
            ("route", "method", "status"),
            registry=registry,
        )
        self.latency = Histogram(
            "kindling_http_request_duration_seconds",
            "Time from a request's head to its answer, by route template and method.",
            ("route", "method"),
            registry=registry,
            buckets=LATENCY_BUCKETS,
        )
        # The labelled children, made once per combination: ``labels()`` costs more than the count.
        self._children: dict[tuple[str, str, int], tuple[Counter, Histogram]] = {}

    def observe(self, route: str, method: str, status: int, seconds: float) -> None:
        """Count one answered request and its latency."""
        key = (route, method, status)
        children = self._children.get(key)
        if children is None:
            children = self._children[key] = (
                self.requests.labels(route, method, str(status)),
                self.latency.labels(route, method),
            )
        children[0].inc()
        children[1].observe(seconds)


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
