"""Watching a kindling service run: Prometheus metrics, structured logs, tracing, health.

Each part is a small module a service takes with a few lines:

- ``metrics``: a registry of the service's own with request counts and latencies by route
  (``HttpMetrics``), rendered in the Prometheus text format, and the check of a metrics token.
- ``logs``: the human log lines a service has always printed, or ``--log-format json`` (one object a
  line: time, level, event, request id, tenant); ``RequestLog`` carries the last two.
- ``tracing``: OpenTelemetry spans, one per request, when the standard ``OTEL_*`` variables ask
  for them and ``kindling-agent[otel]`` is installed; otherwise nothing at all.
- ``health``: ``/health`` (the process answers) and ``/ready`` (what it needs is reachable).
- ``asgi``: ``ObservedApp`` wraps a Starlette or FastAPI app so each request is counted, timed,
  spanned and given its log context.

A FastAPI service takes all of it in a few lines::

    registry = CollectorRegistry()
    app.include_router(health_router(ready_check))          # /health, /ready
    served = ObservedApp(app, metrics=HttpMetrics(registry), spans=start_tracing("proxy"))
    configure_logging(level, log_format)                    # and server_config(uvicorn_logging=...)

and answers ``/metrics`` with ``render(registry)`` behind its own token check (``token_matches``).
"""
