"""The proxy's own Prometheus metrics, beside the request counts every service has.

Counted on the event loop as requests pass (plain counts, ``observe.metrics.Counts``: an
observation is a look-up and three additions): how long the upstream takes to answer and to send
a stream's first chunk, the upstream's errors by status, the size of each warm-up inserted. Read
at each scrape from what the proxy keeps anyway (nothing on the request path): conversations
started, continued and warmed, replies recorded, the recording queue's depth, writes and drops,
template builds.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from kindling.observe.metrics import LATENCY_BUCKETS, Counts

if TYPE_CHECKING:
    from kindling.proxy.builder import TemplateBuilder
    from kindling.proxy.conversations import Conversations
    from kindling.proxy.recorder import Recorder

# Warm-up sizes, in (estimated) tokens.
WARMUP_BUCKETS = (100.0, 250.0, 500.0, 1000.0, 2000.0, 4000.0, 8000.0, 16000.0, 32000.0)

#: The ``status`` of an upstream error with no HTTP status: it timed out, could not be reached,
#: or broke off its answer.
TIMEOUT, UNREACHABLE, BROKEN = "timeout", "unreachable", "broken"

#: What ``conversations.counts`` holds, as the counters they become.
_CONVERSATION_COUNTERS = (
    ("conversations", "kindling_proxy_conversations", "Conversations this proxy started recording."),
    ("warmed", "kindling_proxy_conversations_warmed", "Conversations this proxy started with a warm-up."),
    ("continued", "kindling_proxy_turns_continued", "Requests that continued a recorded conversation."),
    ("branches", "kindling_proxy_branches", "Conversations recorded as a branch of another."),
    ("replies", "kindling_proxy_replies_recorded", "Upstream replies recorded."),
)


class ProxyMetrics(Collector):
    """The proxy's metrics: ``upstream_answered``, ``first_chunk``, ``upstream_failed`` and
    ``warmed`` are called on the event loop; ``collect`` (a scrape) reads the rest."""

    def __init__(
        self,
        registry: CollectorRegistry,
        conversations: Conversations,
        recorder: Recorder,
        builder: TemplateBuilder,
    ) -> None:
        self.conversations = conversations
        self.recorder = recorder
        self.builder = builder
        self.upstream = Counts(LATENCY_BUCKETS)
        self.first_chunks = Counts(LATENCY_BUCKETS)
        self.warmups = Counts(WARMUP_BUCKETS)
        self.errors: dict[tuple[str, str], int] = {}
        registry.register(self)

    def upstream_answered(self, endpoint: str, status: int, seconds: float) -> None:
        """Count the upstream's answer (its head) to a call to ``endpoint``, and its errors."""
        self.upstream.observe((endpoint,), seconds)
        if status >= 400:
            self.upstream_failed(endpoint, str(status))

    def upstream_failed(self, endpoint: str, status: str) -> None:
        """Count an upstream error: an HTTP status, or ``TIMEOUT``, ``UNREACHABLE``, ``BROKEN``."""
        key = (endpoint, status)
        self.errors[key] = self.errors.get(key, 0) + 1

    def first_chunk(self, endpoint: str, seconds: float) -> None:
        """Count the time from sending a call to its stream's first chunk."""
        self.first_chunks.observe((endpoint,), seconds)

    def warmed(self, tokens: int) -> None:
        """Count one warm-up inserted, of ``tokens`` (estimated) tokens."""
        self.warmups.observe((), float(tokens))

    def collect(self) -> Iterator[Metric]:
        """Yield every family: the counted ones, then those read from the proxy's parts."""
        yield self.upstream.family(
            "kindling_proxy_upstream_duration_seconds",
            "Time from sending a call upstream to the upstream's answer (its head), by endpoint.",
            ["endpoint"],
        )
        yield self.first_chunks.family(
            "kindling_proxy_upstream_first_chunk_seconds",
            "Time from sending a call upstream to its stream's first chunk, by endpoint.",
            ["endpoint"],
        )
        errors = CounterMetricFamily(
            "kindling_proxy_upstream_errors",
            "Upstream calls that failed, by endpoint and status (an HTTP status of 400 or more, "
            "timeout, unreachable, broken).",
            labels=["endpoint", "status"],
        )
        for (endpoint, status), count in list(self.errors.items()):
            errors.add_metric([endpoint, status], count)
        yield errors
        yield self.warmups.family(
            "kindling_proxy_warmup_tokens", "The size of each warm-up inserted, in estimated tokens.", []
        )
        counts = dict(self.conversations.counts)
        for key, name, documentation in _CONVERSATION_COUNTERS:
            counter = CounterMetricFamily(name, documentation)
            counter.add_metric([], counts.get(key, 0))
            yield counter
        queue = self.recorder.status()
        depth = GaugeMetricFamily("kindling_proxy_recording_queue_depth", "Writes waiting to be recorded.")
        depth.add_metric([], queue["pending"])
        yield depth
        for key, name, documentation in (
            ("written", "kindling_proxy_recording_writes", "Writes recorded in the store."),
            ("dropped", "kindling_proxy_recording_dropped", "Writes dropped because the queue was full."),
            ("rejected", "kindling_proxy_recording_rejected", "Writes the store refused (bad rows)."),
        ):
            counter = CounterMetricFamily(name, documentation)
            counter.add_metric([], queue[key])
            yield counter
        up = GaugeMetricFamily(
            "kindling_proxy_store_up", "0 while the recording store is known to be unreachable, else 1."
        )
        up.add_metric([], 1 if self.recorder.store_up else 0)
        yield up
        built, failed = self.builder.build_counts()
        builds = CounterMetricFamily(
            "kindling_proxy_template_builds",
            "Background template builds, by result (built, failed).",
            labels=["result"],
        )
        builds.add_metric(["built"], built)
        builds.add_metric(["failed"], failed)
        yield builds
