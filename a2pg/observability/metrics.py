"""A worker's Prometheus metrics: the ``WorkerHooks`` that count, and the HTTP endpoint.

Each ``WorkerMetrics`` owns a ``CollectorRegistry`` (never the global one), so several
workers, tests and an embedding application's own metrics do not collide. Labels are
bounded: the consumer name, the outcome, or the store operation; never a session id or
holder. Its own registry also has the process metrics (``process_*``, ``python_*``) and
``a2pg_build_info``, and collects no ``_created`` series (one more series per counter
and histogram child that no dashboard reads). That is done in the registry, not with
``prometheus_client.disable_created_metrics()``, which would change every registry of
the process, an application's own included. ``serve_metrics`` serves ``/metrics``,
``/healthz`` (liveness) and ``/readyz`` (readiness) from one HTTP server. Importing this
module without ``prometheus-client`` raises ``MissingExtra``.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import gzip
import logging
import platform
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import parse_qs
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from .. import __version__
from ..errors import invalid
from ..worker.beat import MIN_DEADLINE
from ..worker.health import describe, refused
from ..worker.hooks import OUTCOMES, Outcome, WorkerHooks
from ..worker.settings import check_timeout
from .extras import MissingExtra

try:
    from prometheus_client import (
        CollectorRegistry,
        Counter,
        Gauge,
        GCCollector,
        Histogram,
        Info,
        PlatformCollector,
        ProcessCollector,
    )
    from prometheus_client.exposition import ThreadingWSGIServer, choose_encoder, gzip_accepted
    from prometheus_client.metrics_core import Metric
    from prometheus_client.registry import Collector, RestrictedRegistry
except ImportError as exc:  # pragma: no cover - exercised in a subprocess without the extra
    raise MissingExtra("metrics", "a2pg metrics") from exc

if TYPE_CHECKING:
    from wsgiref.types import StartResponse, WSGIEnvironment

    from ..models import Head
    from ..worker.attempt import Attempt, WorkerStats

log = logging.getLogger("a2pg.metrics")

Clock = Callable[[], float]

DURATION_BUCKETS = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
    120.0, 300.0,
)  # fmt: skip
"""Seconds: from a no-op handler's millisecond to a long job's minutes."""

WAIT_BUCKETS = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
    120.0, 300.0, 600.0, 1800.0, 3600.0,
)  # fmt: skip
"""Seconds an event waits for its handler: a notified claim's milliseconds to an hour's
backlog (an SLO threshold such as 1s or 30s falls on a bucket boundary)."""

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

DURATION_OUTCOMES: tuple[str, ...] = (*OUTCOMES, "timed_out")
"""The ``outcome`` label of ``a2pg_attempt_duration_seconds``: the attempt's ``Outcome``,
but ``timed_out`` for one failed or dead-lettered because its handler ran past its
timeout (``a2pg_attempts_failed``/``_dead_lettered`` count it as before)."""

DEFAULT_BEAT_WITHIN = 10.0
"""Seconds between heartbeats assumed until the worker's first beat says its own
(``WorkerSettings.heartbeat_interval``'s default)."""

MISSED_BEATS = 3
"""Heartbeats missed before ``/healthz`` says the worker is not alive, as the store's
``WorkerInfo.stale`` does; and beats' worth of time without any store answer before
``/readyz`` says it is not ready."""


def duration_outcome(attempt: Attempt) -> str:
    """The ``outcome`` label of an attempt's duration (see ``DURATION_OUTCOMES``)."""
    outcome: Outcome = attempt.outcome or "abandoned"
    if attempt.timed_out and outcome in ("failed", "dead_lettered"):
        return "timed_out"
    return outcome


def wait_seconds(attempt: Attempt, now: float) -> float | None:
    """Seconds the attempt waited for this handler to start, at loop time ``now``: from
    when its head became claimable to the claim by the store's clock (``last_ready_at`` to
    ``last_claimed_at``: an append, a delay's or a backoff's end, a release, a lapsed
    lease), plus the claim's answer to the handler's start by the worker's (``claimed_at``
    to ``now``): no two clocks are compared. None when the store gave no ready time."""
    dispatch = attempt.head.dispatch
    claimed, ready = dispatch.last_claimed_at, dispatch.last_ready_at
    if claimed is None or ready is None:
        return None
    queued = (claimed - ready).total_seconds()
    return max(0.0, queued) + max(0.0, now - attempt.claimed_at)


@dataclass(frozen=True, slots=True)
class Verdict:
    """A probe's answer: ``ok`` (HTTP 200, else 503) and one line saying why."""

    ok: bool
    reason: str


class WorkerProbe:
    """What ``/healthz`` and ``/readyz`` say about a worker, from what its hooks saw.

    ``WorkerMetrics`` feeds it: the worker's start and stop, each heartbeat (the loop
    runs), each store call's answer or failure (judged as ``StoreHealth`` judges them: an
    ``A2Error`` is an answer, but ``STORE_UNAVAILABLE``). The HTTP server reads it from its
    own threads; each field is one reference, written by the worker's loop.

    Live: not stopped, and a heartbeat within ``MISSED_BEATS`` heartbeat periods (the
    period each beat announces, ``DEFAULT_BEAT_WITHIN`` before the first) of now, or
    ``live_within`` seconds when given; before the worker starts (it waits for its
    database) it is alive. Ready: started and not stopped, the last store call that
    ended was answered, and one was within as long (``ready_within``).
    """

    def __init__(
        self,
        *,
        live_within: float | None = None,
        ready_within: float | None = None,
        clock: Clock = time.monotonic,
    ) -> None:
        self._live_within = check_timeout(live_within, "live_within")
        self._ready_within = check_timeout(ready_within, "ready_within")
        self._clock = clock
        self._started_at: float | None = None
        self._stopped = False
        self._beat_at: float | None = None
        self._beat_within = DEFAULT_BEAT_WITHIN
        self._answered_at: float | None = None
        self._failing_since: float | None = None
        self._last_error = ""

    # ---------------------------------------------------- fed by the worker's loop

    def started(self) -> None:
        self._started_at, self._stopped = self._clock(), False

    def stopped(self) -> None:
        self._stopped = True

    def beat(self, within: float) -> None:
        self._beat_within = max(within, MIN_DEADLINE)
        self._beat_at = self._clock()

    def answered(self) -> None:
        self._answered_at, self._failing_since = self._clock(), None

    def failed(self, op: str, error: BaseException) -> None:
        self._last_error = f"{op}: {describe(error)}"
        if self._failing_since is None:
            self._failing_since = self._clock()

    # ------------------------------------------------------ read by the HTTP server

    def _bound(self, given: float | None) -> float:
        return given if given is not None else MISSED_BEATS * self._beat_within

    def live(self) -> Verdict:
        if self._stopped:
            return Verdict(False, "the worker stopped")
        started = self._started_at
        if started is None:
            return Verdict(True, "starting: the worker has not begun serving")
        last = self._beat_at if self._beat_at is not None else started
        ago, bound = self._clock() - last, self._bound(self._live_within)
        if ago > bound:
            return Verdict(False, f"no heartbeat for {ago:.1f}s (bound {bound:g}s)")
        return Verdict(True, f"alive: last heartbeat {ago:.1f}s ago")

    def ready(self) -> Verdict:
        if self._stopped:
            return Verdict(False, "the worker stopped")
        if self._started_at is None:
            return Verdict(False, "not started: the worker has not begun serving")
        now = self._clock()
        failing = self._failing_since
        if failing is not None:
            return Verdict(
                False, f"the store fails, for {now - failing:.1f}s (last: {self._last_error})"
            )
        answered, bound = self._answered_at, self._bound(self._ready_within)
        if answered is None:
            return Verdict(False, "no answer from the store yet")
        if now - answered > bound:
            return Verdict(
                False, f"no answer from the store for {now - answered:.1f}s (bound {bound:g}s)"
            )
        return Verdict(True, f"ready: the store answered {now - answered:.1f}s ago")


def without_created(metrics: Iterable[Metric]) -> Iterator[Metric]:
    """``metrics`` without their ``_created`` samples (counters, histograms, summaries)."""
    for metric in metrics:
        created = metric.name + "_created"
        if not any(sample.name == created for sample in metric.samples):
            yield metric
            continue
        kept = copy.copy(metric)
        kept.samples = [sample for sample in metric.samples if sample.name != created]
        yield kept


class WorkerRegistry(CollectorRegistry):
    """A worker's own registry: what it collects has no ``_created`` series, and it carries
    the worker's ``probe``, so ``serve_metrics(registry, ...)`` answers ``/healthz`` and
    ``/readyz`` for that worker too."""

    def __init__(self, probe: WorkerProbe) -> None:
        super().__init__(auto_describe=True)
        self.probe = probe

    def collect(self) -> Iterator[Metric]:
        return without_created(super().collect())


class WorkerMetrics(WorkerHooks):
    """Counts what a worker does, in ``registry`` (a ``WorkerRegistry`` of its own unless
    given), and feeds its ``probe``.

    Pass it to ``Worker(..., hooks=metrics)`` and serve ``metrics.registry`` (see
    ``serve_metrics``), or collect it into your own exposition. ``process_metrics`` (the
    ``process_*`` and ``python_*`` collectors) defaults to True for its own registry and
    False for one given (the global registry has them already). ``live_within`` and
    ``ready_within`` bound the probes (see ``WorkerProbe``).
    """

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        process_metrics: bool | None = None,
        live_within: float | None = None,
        ready_within: float | None = None,
    ) -> None:
        if process_metrics is not None and not isinstance(process_metrics, bool):
            raise invalid(f"process_metrics must be True, False or None, got {process_metrics!r}")
        if registry is not None and not isinstance(registry, CollectorRegistry):
            raise invalid(f"registry must be a CollectorRegistry, got {type(registry).__name__}")
        self.probe = WorkerProbe(live_within=live_within, ready_within=ready_within)
        own = registry is None
        self.registry = WorkerRegistry(self.probe) if registry is None else registry
        r = self.registry
        if process_metrics if process_metrics is not None else own:
            ProcessCollector(registry=r)
            PlatformCollector(registry=r)
            GCCollector(registry=r)
        Info("a2pg_build", "The a2pg and Python versions this worker runs", registry=r).info(
            {"version": __version__, "python": platform.python_version()}
        )
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
            "Seconds from claim to settlement (handler and completion), per attempt, by how "
            "it ended (timed_out: failed or dead-lettered past its timeout)",
            ["consumer", "outcome"],
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.wait = Histogram(
            "a2pg_attempt_wait_seconds",
            "Seconds from when a head became claimable (appended, due, backed off, released "
            "or lapsed) to its handler's start, per attempt",
            ["consumer"],
            buckets=WAIT_BUCKETS,
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
            for outcome in DURATION_OUTCOMES:
                self.duration.labels(name, outcome)
            self.wait.labels(name)
            self.renewals.labels(name)
            self.lapses.labels(name)
        self.probe.started()

    def stopped(self, stats: WorkerStats) -> None:
        self.probe.stopped()

    def beat(self, within: float) -> None:
        self.probe.beat(within)

    @contextlib.contextmanager
    def attempt(self, attempt: Attempt) -> Iterator[None]:
        consumer = attempt.head.consumer
        self.started_attempts.labels(consumer).inc()
        # The attempt's task starts here, its handler next: O(1), one datetime difference.
        waited = wait_seconds(attempt, asyncio.get_running_loop().time())
        if waited is not None:
            self.wait.labels(consumer).observe(waited)
        in_flight = self.in_flight.labels(consumer)
        in_flight.inc()
        try:
            yield
        finally:
            in_flight.dec()
            self.ended[attempt.outcome or "abandoned"].labels(consumer).inc()
            self.duration.labels(consumer, duration_outcome(attempt)).observe(attempt.elapsed())

    def dead_lettered_on_claim(self, head: Head) -> None:
        self.ended["dead_lettered"].labels(head.consumer).inc()

    @contextlib.contextmanager
    def store_call(self, op: str) -> Iterator[None]:
        timer = self.store_calls.labels(op).time()
        try:
            with timer:
                yield
        except Exception as error:
            if refused(error):  # an A2Error is the store's answer, but STORE_UNAVAILABLE
                self.probe.answered()
            else:
                self.store_errors.labels(op).inc()
                self.probe.failed(op, error)
            raise
        self.probe.answered()

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


# ------------------------------------------------------------------- the endpoint


@dataclass(frozen=True, slots=True)
class MetricsEndpoint:
    """A running HTTP server (``/metrics``, ``/healthz``, ``/readyz``) and where it listens."""

    host: str
    port: int
    server: WSGIServer
    thread: threading.Thread

    @property
    def url(self) -> str:
        return self.at("/metrics")

    def at(self, path: str) -> str:
        """The URL of ``path`` on this server (``/healthz``, ``/readyz``)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{path}"


class _Exposition(Collector):
    """A registry as served: without ``_created`` series, whatever registry it is."""

    def __init__(self, source: Collector | RestrictedRegistry) -> None:
        self._source = source

    def collect(self) -> Iterator[Metric]:
        return without_created(self._source.collect())


@dataclass(frozen=True, slots=True)
class MetricsApp:
    """The WSGI app: ``/metrics`` (the text or OpenMetrics format, by ``Accept``; gzip when
    accepted; ``name[]`` selects series), ``/healthz`` and ``/readyz`` (200 or 503 and one
    line; 200 "no worker" without a probe), anything else 404; GET and HEAD only."""

    registry: CollectorRegistry
    probe: WorkerProbe | None = None

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> list[bytes]:
        method, path = environ.get("REQUEST_METHOD", "GET"), environ.get("PATH_INFO", "")
        if method not in ("GET", "HEAD"):
            status, headers, body = _text("405 Method Not Allowed", f"{method}: use GET")
            headers.append(("Allow", "GET, HEAD"))
        elif path == "/metrics":
            status, headers, body = self._metrics(environ)
        elif path in ("/healthz", "/readyz"):
            status, headers, body = self._probe(path)
        else:
            status, headers, body = _text(
                "404 Not Found", f"no {path}: /metrics, /healthz, /readyz"
            )
        start_response(status, headers)
        return [b""] if method == "HEAD" else [body]

    def _metrics(self, environ: WSGIEnvironment) -> tuple[str, list[tuple[str, str]], bytes]:
        encoder, content_type = choose_encoder(environ.get("HTTP_ACCEPT", ""))
        source: Collector | RestrictedRegistry = self.registry
        names = parse_qs(environ.get("QUERY_STRING", "")).get("name[]")
        if names:
            source = self.registry.restricted_registry(names)
        body = encoder(_Exposition(source))
        headers = [("Content-Type", content_type)]
        if gzip_accepted(environ.get("HTTP_ACCEPT_ENCODING", "")):
            body = gzip.compress(body)
            headers.append(("Content-Encoding", "gzip"))
        return "200 OK", headers, body

    def _probe(self, path: str) -> tuple[str, list[tuple[str, str]], bytes]:
        probe = self.probe
        if probe is None:
            verdict = Verdict(True, "serving (no worker in this process)")
        else:
            verdict = probe.live() if path == "/healthz" else probe.ready()
        status = "200 OK" if verdict.ok else "503 Service Unavailable"
        return _text(status, ("ok: " if verdict.ok else "not ok: ") + verdict.reason)


def _text(status: str, line: str) -> tuple[str, list[tuple[str, str]], bytes]:
    body = (line + "\n").encode()
    return status, [("Content-Type", "text/plain; charset=utf-8")], body


class _Quiet(WSGIRequestHandler):
    """Logs no request line (a scrape every few seconds is no news)."""

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextlib.contextmanager
def serve_metrics(
    registry: CollectorRegistry, host: str, port: int, *, probe: WorkerProbe | None = None
) -> Iterator[MetricsEndpoint]:
    """Serves ``registry`` at ``http://host:port/metrics``, and the ``probe`` (default: a
    ``WorkerRegistry``'s own) at ``/healthz`` and ``/readyz``, from a daemon thread while
    the block runs; port 0 picks a free one (see the endpoint's ``port``)."""
    if probe is None and isinstance(registry, WorkerRegistry):
        probe = registry.probe
    family, address = _family(host, port)

    class Server(ThreadingWSGIServer):
        address_family = family

    server = make_server(address, port, MetricsApp(registry, probe), Server, handler_class=_Quiet)
    thread = threading.Thread(target=server.serve_forever, name="a2pg-metrics", daemon=True)
    thread.start()
    endpoint = MetricsEndpoint(host, server.server_port, server, thread)
    try:
        yield endpoint
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def _family(host: str, port: int) -> tuple[socket.AddressFamily, str]:
    """The address family ``host`` needs (IPv6 for ``::1``) and the address to bind."""
    info = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, _, _, _, address = info[0]
    return family, str(address[0])


__all__ = [
    "MetricsApp",
    "MetricsEndpoint",
    "Verdict",
    "WorkerMetrics",
    "WorkerProbe",
    "WorkerRegistry",
    "serve_metrics",
    "without_created",
]
