"""Watching a2pg in production: Prometheus metrics, OpenTelemetry spans, structured logs.

Prometheus (``pip install 'a2pg[metrics]'``) and OpenTelemetry (``pip install
'a2pg[otel]'``) are optional: this package imports without them, and the module that
needs one raises ``MissingExtra`` naming the install when it is used.

- ``metrics.WorkerMetrics``: a worker's counters and histograms (the wait before each
  handler, durations by outcome, the process's own) in a registry of its own, and the
  probe of its liveness and readiness; ``metrics.serve_metrics`` serves ``/metrics``,
  ``/healthz`` and ``/readyz`` over HTTP (``a2pg worker --metrics-port``).
- ``collector.StoreCollector``: per-consumer backlog, lag and dead letters read from the
  store, from any process (``a2pg metrics --once``).
- ``tracing.WorkerTracing``: a span per attempt and per store call.
- ``logs``: the JSON-lines and text log formats of ``a2pg worker --log-format``.
"""

from __future__ import annotations

from .extras import MissingExtra

__all__ = ["MissingExtra"]
