"""A worker's Prometheus metrics: the ``WorkerHooks`` that count, and the HTTP endpoint.

Each ``WorkerMetrics`` owns a ``CollectorRegistry`` (never the global one), so several
workers, tests and an embedding application's own metrics do not collide. Labels are
bounded: the consumer name, or the store operation; never a session id or holder.
Importing this module without ``prometheus-client`` raises ``MissingExtra``.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING
from wsgiref.simple_server import WSGIServer

from ..worker.health import refused
from ..worker.hooks import OUTCOMES, Outcome, WorkerHooks
from .extras import MissingExtra

try:
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
except ImportError as exc:  # pragma: no cover - exercised in a subprocess without the extra
    raise MissingExtra("metrics", "a2pg metrics") from exc

if TYPE_CHECKING:
    from ..models import Head
    from ..worker.attempt import Attempt

log = logging.getLogger("a2pg.metrics")

DURATION_BUCKETS = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
    120.0, 300.0,
)  # fmt: skip
"""Seconds: from a no-op handler's millisecond to a long job's minutes."""

ROUND_TRIP_BUCKETS = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
)  # fmt: skip
"""Seconds of one store call: a local commit is about a millisecond."""

BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
"""Heads per claim, completions per batch."""

STORE_OPS = (
    "register_consumers",
    "claim_any",
    "complete_and_claim",
    "complete_attempts",
    "fail_attempt",
    "renew_claims",
    "release_claims",
    "heartbeat",
    "forget_workers",
)
"""The store calls a worker makes: their series exist from the start."""

OUTCOME_HELP: dict[Outcome, str] = {
    "completed": "attempts completed (their events appended)",
    "failed": "attempts failed and to be retried",
    "dead_lettered": "heads dead-lettered (by a failure, or by a claim after lapsed leases)",
    "superseded": "attempts the store no longer knew (their result dropped)",
    "released": "attempts cut short by a shutdown and handed back",
    "abandoned": "attempts given up on without the store's answer (their lease lapses)",
}


class WorkerMetrics(WorkerHooks):
    """Counts what a worker does, in ``registry`` (a new one unless given).

    Pass it to ``Worker(..., hooks=metrics)`` and serve ``metrics.registry`` (see
    ``serve_metrics``), or collect it into your own exposition.
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        r = self.registry
        self.started_attempts = Counter(
            "a2pg_attempts_started", "Attempts claimed and started", ["consumer"], registry=r
        )
        self.ended = {
            outcome: Counter(
                f"a2pg_attempts_{outcome}",
                OUTCOME_HELP[outcome].capitalize(),
                ["consumer"],
                registry=r,
            )
            for outcome in OUTCOMES
        }
        self.in_flight = Gauge(
            "a2pg_attempts_in_flight",
            "Attempts claimed and not yet settled",
            ["consumer"],
            registry=r,
        )
        self.duration = Histogram(
            "a2pg_attempt_duration_seconds",
            "Seconds from claim to settlement (handler and completion), per attempt",
            ["consumer"],
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.store_calls = Histogram(
            "a2pg_store_call_duration_seconds",
            "Seconds per store call: the claim and completion round trips",
            ["op"],
            buckets=ROUND_TRIP_BUCKETS,
            registry=r,
        )
        self.store_errors = Counter(
            "a2pg_store_call_errors",
            "Store calls that failed (the database unreachable, a timeout...)",
            ["op"],
            registry=r,
        )
        self.renewals = Counter("a2pg_lease_renewals", "Leases extended", ["consumer"], registry=r)
        self.lapses = Counter(
            "a2pg_lease_lapses",
            "Leases that ran out before they were renewed",
            ["consumer"],
            registry=r,
        )
        self.wakeups = Counter(
            "a2pg_wakeups", "Wakeups received from the store (NOTIFY)", registry=r
        )
        self.polls = Counter(
            "a2pg_polls", "Claims made because the poll interval or a backoff ran out", registry=r
        )
        self.claim_batch = Histogram(
            "a2pg_claim_batch_size", "Heads per claim", buckets=BATCH_BUCKETS, registry=r
        )
        self.completion_batch = Histogram(
            "a2pg_completion_batch_size",
            "Completions per batch sent to the store",
            buckets=BATCH_BUCKETS,
            registry=r,
        )

    def started(self, holder: str, consumers: Sequence[str]) -> None:
        """Every consumer's and store call's series exist from the start, at zero."""
        for op in STORE_OPS:
            self.store_calls.labels(op)
            self.store_errors.labels(op)
        for name in consumers:
            self.started_attempts.labels(name)
            for counter in self.ended.values():
                counter.labels(name)
            self.in_flight.labels(name)
            self.duration.labels(name)
            self.renewals.labels(name)
            self.lapses.labels(name)

    @contextlib.contextmanager
    def attempt(self, attempt: Attempt) -> Iterator[None]:
        consumer = attempt.head.consumer
        self.started_attempts.labels(consumer).inc()
        in_flight = self.in_flight.labels(consumer)
        in_flight.inc()
        try:
            yield
        finally:
            in_flight.dec()
            self.ended[attempt.outcome or "abandoned"].labels(consumer).inc()
            self.duration.labels(consumer).observe(attempt.elapsed())

    def dead_lettered_on_claim(self, head: Head) -> None:
        self.ended["dead_lettered"].labels(head.consumer).inc()

    @contextlib.contextmanager
    def store_call(self, op: str) -> Iterator[None]:
        timer = self.store_calls.labels(op).time()
        try:
            with timer:
                yield
        except Exception as error:
            if not refused(error):  # an A2Error is the store's answer, but STORE_UNAVAILABLE
                self.store_errors.labels(op).inc()
            raise

    def claimed(self, heads: int, limit: int) -> None:
        self.claim_batch.observe(heads)

    def completions_sent(self, size: int) -> None:
        self.completion_batch.observe(size)

    def lease_renewed(self, attempt: Attempt) -> None:
        self.renewals.labels(attempt.head.consumer).inc()

    def lease_lapsed(self, attempt: Attempt) -> None:
        self.lapses.labels(attempt.head.consumer).inc()

    def wakeup(self) -> None:
        self.wakeups.inc()

    def poll(self) -> None:
        self.polls.inc()


@dataclass(frozen=True, slots=True)
class MetricsEndpoint:
    """A running ``/metrics`` HTTP server and where it listens."""

    host: str
    port: int
    server: WSGIServer
    thread: threading.Thread

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"


@contextlib.contextmanager
def serve_metrics(registry: CollectorRegistry, host: str, port: int) -> Iterator[MetricsEndpoint]:
    """Serves ``registry`` at ``http://host:port/metrics`` (any path, in fact) from a daemon
    thread while the block runs; port 0 picks a free one (see the endpoint's ``port``)."""
    server, thread = start_http_server(port, addr=host, registry=registry)
    endpoint = MetricsEndpoint(host, server.server_port, server, thread)
    try:
        yield endpoint
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
