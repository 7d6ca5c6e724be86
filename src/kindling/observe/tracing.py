"""OpenTelemetry tracing, optional: ``pip install kindling-agent[otel]`` and the standard ``OTEL_*`` variables.

Tracing is on when the SDK is installed and the environment asks for it: ``OTEL_TRACES_EXPORTER``
names an exporter other than ``none``, or ``OTEL_EXPORTER_OTLP_ENDPOINT`` /
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is set; ``OTEL_SDK_DISABLED=true`` turns it off. Spans go to
the OTLP exporter (HTTP/protobuf, configured by its own ``OTEL_EXPORTER_OTLP_*`` variables) or, with
``OTEL_TRACES_EXPORTER=console``, to stdout. Off, a service makes no span and pays one ``is None``
test a request.

A span carries the route, the method, the status and the ids a service adds (a session id, a
request id): never a request's or a message's content.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

log = logging.getLogger("kindling.observe")

ON_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


def tracing_requested(environ: Mapping[str, str] | None = None) -> bool:
    """True when the ``OTEL_*`` variables ask for traces (see the module's docstring)."""
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter:
        return exporter != "none"
    return any(env.get(name, "").strip() for name in ON_VARIABLES)


class Spans:
    """Makes a service's spans: ``start`` one per request (or upstream call), ``close`` at shutdown."""

    def __init__(self, tracer: Any, provider: Any) -> None:
        from opentelemetry.trace import SpanKind
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        self.tracer = tracer
        self.provider = provider
        self._server = SpanKind.SERVER
        self._client = SpanKind.CLIENT
        self._propagator = TraceContextTextMapPropagator()

    def start(
        self,
        name: str,
        attributes: dict[str, Any],
        *,
        traceparent: str | None = None,
        client: bool = False,
        parent: Any = None,
        start_time: int | None = None,
        internal: bool = False,
    ) -> Any:
        """Start and return a span (end it with ``span.end()``); a ``traceparent`` header from the
        caller makes it a child of the caller's span, ``parent`` (a span of this service) a child
        of that one. ``start_time`` is in nanoseconds since the epoch (default: now); ``client``
        marks a call this service makes, ``internal`` work inside it."""
        from opentelemetry import trace

        context: Any = None
        if parent is not None:
            context = trace.set_span_in_context(parent)
        elif traceparent:
            context = self._propagator.extract({"traceparent": traceparent})
        kind = trace.SpanKind.INTERNAL if internal else self._client if client else self._server
        return self.tracer.start_span(
            name, context=context, kind=kind, attributes=attributes, start_time=start_time
        )

    def traceparent(self, span: Any) -> str | None:
        """Return the ``traceparent`` header that makes a callee's spans children of ``span``."""
        from opentelemetry import trace

        carrier: dict[str, str] = {}
        self._propagator.inject(carrier, context=trace.set_span_in_context(span))
        return carrier.get("traceparent")

    def close(self) -> None:
        """Send the spans still buffered and stop the exporter."""
        self.provider.shutdown()


def start_tracing(
    service: str, *, exporter: Any = None, environ: Mapping[str, str] | None = None
) -> Spans | None:
    """Return the ``Spans`` of ``service`` when tracing is on, else None.

    ``exporter`` (an SDK ``SpanExporter``, such as the in-memory one in tests) turns tracing on
    whatever the environment says, and gets each span as it ends. When the variables ask for
    tracing but the SDK is not installed, logs a warning once and returns None: the service runs
    untraced rather than not at all.
    """
    env = os.environ if environ is None else environ
    if exporter is None and not tracing_requested(env):
        return None
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    except ImportError:
        log.warning(
            "OTEL_* variables ask for traces but the OpenTelemetry SDK is not installed "
            "(pip install 'kindling-agent[otel]'); running without tracing"
        )
        return None
    name = env.get("OTEL_SERVICE_NAME", "").strip() or f"kindling-{service}"
    provider = TracerProvider(resource=Resource.create({"service.name": name}))
    if exporter is not None:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    else:
        chosen = _exporter(env)
        if chosen is None:
            return None
        provider.add_span_processor(BatchSpanProcessor(chosen))
    return Spans(provider.get_tracer(f"kindling.{service}"), provider)


def _exporter(env: Mapping[str, str]) -> Any:
    kind = env.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() or "otlp"
    if kind == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    if kind != "otlp":
        log.warning("OTEL_TRACES_EXPORTER=%s is not one kindling sends to (otlp, console); no tracing", kind)
        return None
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError:
        log.warning("the OTLP exporter is not installed (pip install 'kindling-agent[otel]'); no tracing")
        return None
    return OTLPSpanExporter()
