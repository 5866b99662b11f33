"""``a2pg worker``'s observability: its log format, its metrics endpoint, its spans and
where they are exported."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..observability.extras import EXTRAS, available
from ..observability.logs import LOG_FORMATS, LogFormat, configure_logging
from ..worker.hooks import WorkerHooks
from .common import EXIT_USAGE, fail

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from ..observability.metrics import MetricsEndpoint
    from ..store import Store

log = logging.getLogger("a2pg.worker")

OTEL_EXPORTERS = ("console", "otlp")
"""Where ``--otel-exporter`` sends spans: stdout, or an OTLP collector."""

DEFAULT_METRICS_HOST = "127.0.0.1"
"""Loopback, as the dashboard: the endpoint has no authentication, so it is exposed beyond
this machine only when asked (``--metrics-host 0.0.0.0`` in a container, where the
scraper is on another host)."""


def port(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port from 0 to 65535, got {value}")
    return value


def add_worker_observability_options(worker: argparse.ArgumentParser) -> None:
    """``--log-format``, ``--metrics-port/-store/-host``, ``--otel-exporter`` (``--log-level``
    is beside)."""
    worker.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default=None,
        help="text lines, or one JSON object per line (keys ts, level, logger, msg, and "
        "session, consumer, lane, index, attempt, outcome, duration on attempt lines); "
        "for `worker`, --json means --log-format json (default: text)",
    )
    worker.add_argument(
        "--metrics-port",
        type=port,
        default=None,
        metavar="PORT",
        help="serve Prometheus metrics at http://HOST:PORT/metrics, and the probes /healthz "
        "(liveness) and /readyz (readiness) (0 picks a free port, logged at INFO); needs "
        "pip install 'a2pg[metrics]'",
    )
    worker.add_argument(
        "--metrics-store",
        action="store_true",
        help="with --metrics-port, serve the store's per-consumer gauges too (as "
        "`a2pg metrics` does), read at most every 5 seconds",
    )
    worker.add_argument(
        "--metrics-host",
        default=DEFAULT_METRICS_HOST,
        metavar="HOST",
        help="the address --metrics-port listens on (default: %(default)s, this machine "
        "only; 0.0.0.0 for a scraper elsewhere, as in a container)",
    )
    worker.add_argument(
        "--otel-exporter",
        choices=OTEL_EXPORTERS,
        default=None,
        help="export OpenTelemetry spans (attempts, the appends and store calls that do "
        "work) to stdout (console) or over OTLP (otlp: OTEL_EXPORTER_OTLP_ENDPOINT and "
        "the other OTEL_* variables); needs opentelemetry-sdk, and "
        "opentelemetry-exporter-otlp for otlp (default: spans go to the provider the app "
        "sets, if any)",
    )


def require_metrics(what: str) -> None:
    """A usage error naming the install when prometheus-client is missing."""
    if not available("prometheus_client"):
        fail(
            EXIT_USAGE,
            f"{what} needs {EXTRAS['metrics']}, which is not installed: "
            "pip install 'a2pg[metrics]'",
        )


def start_endpoint(
    stack: contextlib.ExitStack, registry: CollectorRegistry, host: str, at: int
) -> MetricsEndpoint:
    """Serves ``registry`` until ``stack`` closes; a port that cannot be bound is a usage
    error."""
    from ..observability.metrics import serve_metrics

    try:
        return stack.enter_context(serve_metrics(registry, host, at))
    except OSError as exc:
        fail(EXIT_USAGE, f"cannot serve metrics on {host}:{at}: {exc.strerror or exc}")


def log_format(args: argparse.Namespace) -> LogFormat:
    """``--log-format``; ``--json`` means ``json``, and contradicting it is a usage error."""
    wants_json = bool(getattr(args, "json", False))
    chosen: LogFormat | None = args.log_format
    if chosen is None:
        return "json" if wants_json else "text"
    if wants_json and chosen != "json":
        fail(EXIT_USAGE, f"--json means --log-format json, not --log-format {chosen}")
    return chosen


def setup_logging(args: argparse.Namespace) -> None:
    """Worker logs go to stderr at ``--log-level`` in ``--log-format``."""
    configure_logging(args.log_level, log_format(args), sys.stderr)


@dataclass
class Observers:
    """A worker's observers: ``hooks`` for ``Worker``; ``registry`` when metrics are served."""

    hooks: list[WorkerHooks] = field(default_factory=list)
    registry: CollectorRegistry | None = None
    store_gauges: bool = False

    @contextlib.contextmanager
    def watching(self, store: Store) -> Iterator[None]:
        """With ``--metrics-store``, the store's gauges are served beside the worker's
        while the block runs (read on scrape, at most every few seconds)."""
        if self.registry is None or not self.store_gauges:
            yield
            return
        from ..observability.collector import StoreCollector

        collector = StoreCollector(store, asyncio.get_running_loop())
        self.registry.register(collector)
        try:
            yield
        finally:
            self.registry.unregister(collector)  # no scrape reaches a closed store


def tracing(stack: contextlib.ExitStack, exporter: str | None) -> list[WorkerHooks]:
    """The worker's tracing hooks: none without OpenTelemetry's API; with
    ``--otel-exporter``, an SDK provider exporting there, made the global one (the
    handlers' spans and appends go there too) and flushed when ``stack`` closes; else the
    global provider's (no-ops until the app sets one). A missing package is a usage error."""
    if exporter is None:
        if not available("opentelemetry.trace"):
            return []
        from ..observability.tracing import WorkerTracing

        return [WorkerTracing()]
    if not available("opentelemetry.trace"):
        fail(
            EXIT_USAGE,
            f"--otel-exporter needs {EXTRAS['otel']} and opentelemetry-sdk, which are not "
            "installed: pip install 'a2pg[otel]' opentelemetry-sdk",
        )
    from opentelemetry import trace

    from ..observability.tracing import WorkerTracing, exporting_provider

    try:
        provider = exporting_provider("console" if exporter == "console" else "otlp")
    except ImportError as exc:
        fail(EXIT_USAGE, str(exc))
    trace.set_tracer_provider(provider)
    stack.callback(provider.shutdown)
    return [WorkerTracing(provider)]


@contextlib.contextmanager
def worker_observers(args: argparse.Namespace) -> Iterator[Observers]:
    """The worker's observers while the block runs: spans when OpenTelemetry's API is
    installed (exported where ``--otel-exporter`` says, else no-ops until an SDK is
    configured), and with ``--metrics-port`` the metrics, served over HTTP. A missing
    extra or a port that cannot be bound is a usage error, said before anything connects
    to the database."""
    observers = Observers(store_gauges=args.metrics_store)
    if args.metrics_port is None and args.metrics_store:
        fail(EXIT_USAGE, "--metrics-store needs --metrics-port")
    if args.metrics_port is not None:
        require_metrics("--metrics-port")
    with contextlib.ExitStack() as stack:
        observers.hooks.extend(tracing(stack, args.otel_exporter))
        if args.metrics_port is not None:
            from ..observability.metrics import WorkerMetrics

            metrics = WorkerMetrics()
            observers.hooks.append(metrics)
            observers.registry = metrics.registry
            endpoint = start_endpoint(stack, metrics.registry, args.metrics_host, args.metrics_port)
            log.info("metrics at %s", endpoint.url)
        yield observers
