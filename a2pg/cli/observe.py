"""``a2pg worker``'s observability: its log format, its metrics endpoint, its spans."""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
from collections.abc import Iterator

from ..observability.extras import MissingExtra, available
from ..observability.logs import LOG_FORMATS, LogFormat, configure_logging
from ..worker.hooks import WorkerHooks
from .common import EXIT_USAGE, fail

log = logging.getLogger("a2pg.worker")

DEFAULT_METRICS_HOST = "0.0.0.0"
"""Every interface: a Prometheus server (or a container network) scrapes from elsewhere."""


def port(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port from 0 to 65535, got {value}")
    return value


def add_worker_observability_options(worker: argparse.ArgumentParser) -> None:
    """``--log-format``, ``--metrics-port``, ``--metrics-host`` (``--log-level`` is beside)."""
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
        help="serve Prometheus metrics at http://HOST:PORT/metrics (0 picks a free port, "
        "logged at INFO); needs pip install 'a2pg[metrics]'",
    )
    worker.add_argument(
        "--metrics-host",
        default=DEFAULT_METRICS_HOST,
        metavar="HOST",
        help="the address --metrics-port listens on",
    )


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


@contextlib.contextmanager
def worker_hooks(args: argparse.Namespace) -> Iterator[list[WorkerHooks]]:
    """The worker's observers while the block runs: spans when OpenTelemetry's API is
    installed (no-ops until an SDK is configured), and with ``--metrics-port`` the metrics,
    served over HTTP. A missing extra or a port that cannot be bound is a usage error,
    said before anything connects to the database."""
    hooks: list[WorkerHooks] = []
    if available("opentelemetry.trace"):
        from ..observability.tracing import WorkerTracing

        hooks.append(WorkerTracing())
    if args.metrics_port is None:
        yield hooks
        return
    try:
        from ..observability.metrics import WorkerMetrics, serve_metrics
    except MissingExtra as exc:
        fail(EXIT_USAGE, f"--metrics-port: {exc}")
    metrics = WorkerMetrics()
    with contextlib.ExitStack() as stack:
        try:
            endpoint = stack.enter_context(
                serve_metrics(metrics.registry, args.metrics_host, args.metrics_port)
            )
        except OSError as exc:
            where = f"{args.metrics_host}:{args.metrics_port}"
            fail(EXIT_USAGE, f"cannot serve metrics on {where}: {exc.strerror or exc}")
        log.info("metrics at %s", endpoint.url)
        yield [*hooks, metrics]
