"""Every knob of a ``Worker`` in one frozen dataclass, checked and resolved once."""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..backoff import Backoff
from ..contract.limits import MAX_ATTEMPT, MAX_SECONDS, Limits
from ..errors import invalid

MAX_BATCH = 10_000
"""The largest ``claim_batch`` and ``flush_size``: the default ``Limits`` per-call caps."""
MAX_CONCURRENCY = 100_000
MAX_PRIORITY = 1_000
"""The largest consumer ``priority``: a weight, so 1,000 to 1 is as lopsided as a share gets."""

T = TypeVar("T")

DERIVED: Any = None
"""The default of a knob derived from the others (``None`` given explicitly derives it too).
Typed ``Any`` so the field keeps the type of its resolved value."""

FLUSH_SIZE_CAP = 256
"""The derived ``flush_size`` is ``concurrency``, at most this."""


def default_holder() -> str:
    """``host:pid:random``: unique per worker, and says where a lease came from."""
    return f"{socket.gethostname()[:200]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True, slots=True)
class WorkerSettings:
    """How a ``Worker`` claims, runs, renews, completes and stops (see ``Worker``).

    Each field's ``metadata["help"]`` is its one-line description (``a2pg worker --help``
    shows it). A bad knob raises ``ValueError`` naming it (a bad ``attempt_timeout``,
    like a consumer's ``timeout``, an ``A2Error`` ``INVALID_ARGUMENT``). Derived knobs
    left out (or None) are resolved when the settings are made, so ``dataclasses.replace()`` keeps
    them as resolved: ``claim_batch`` is ``concurrency``, ``flush_size`` is
    ``concurrency`` at most 256, ``renew_interval`` is ``ttl / 3`` and ``holder`` is
    ``host:pid:random``.
    """

    concurrency: int = field(default=64, metadata={"help": "handlers running at once"})
    claim_batch: int = field(
        default=DERIVED, metadata={"help": "heads per claim; default: --concurrency"}
    )
    ttl: float = field(default=30.0, metadata={"help": "lease seconds"})
    max_failures: int = field(
        default=5, metadata={"help": "failures before a head is dead-lettered"}
    )
    backoff: Backoff = field(
        default_factory=Backoff,
        metadata={"help": "delay before a failed head's retry (--retry-base, --retry-cap)"},
    )
    flush_interval: float = field(
        default=0.005,
        metadata={"help": "seconds a finished attempt waits for its completion batch to fill"},
    )
    flush_size: int = field(
        default=DERIVED,
        metadata={"help": "completions per batch; default: --concurrency, at most 256"},
    )
    poll_interval: float = field(
        default=1.0, metadata={"help": "seconds between polls when no notification comes"}
    )
    holder: str = field(
        default=DERIVED, metadata={"help": "claim holder name; default: host:pid:random"}
    )
    shutdown_grace: float = field(
        default=30.0, metadata={"help": "seconds in-flight handlers get after SIGTERM"}
    )
    renew_interval: float = field(
        default=DERIVED, metadata={"help": "seconds between lease renewals; default: --ttl / 3"}
    )
    cleanup_timeout: float = field(
        default=10.0,
        metadata={"help": "seconds a shutdown waits for attempts to settle, then to be released"},
    )
    heartbeat_interval: float = field(
        default=10.0,
        metadata={"help": "seconds between heartbeats to the store; 3 missed: stale"},
    )
    attempt_timeout: float | None = field(
        default=None,
        metadata={
            "help": "seconds a handler may run, for consumers that set no timeout of their "
            "own; then it fails (a sync one once its thread returns); default: none"
        },
    )
    """No bound against ``ttl``: a timeout may exceed it, since the lease is renewed while
    the attempt runs (see ``check_timeout``)."""

    def __post_init__(self) -> None:
        concurrency = _count(self.concurrency, "concurrency", MAX_CONCURRENCY)
        max_failures = _count(self.max_failures, "max_failures", MAX_ATTEMPT)
        ttl = _seconds(self.ttl, "ttl")
        resolved = {
            "concurrency": concurrency,
            "max_failures": max_failures,
            "ttl": ttl,
            "flush_interval": _seconds(self.flush_interval, "flush_interval"),
            "poll_interval": _seconds(self.poll_interval, "poll_interval"),
            "shutdown_grace": _seconds(self.shutdown_grace, "shutdown_grace"),
            "claim_batch": _count(
                _derive(self.claim_batch, min(concurrency, MAX_BATCH)), "claim_batch", MAX_BATCH
            ),
            "renew_interval": _seconds(_derive(self.renew_interval, ttl / 3), "renew_interval"),
            "cleanup_timeout": _seconds(self.cleanup_timeout, "cleanup_timeout"),
            "heartbeat_interval": _seconds(self.heartbeat_interval, "heartbeat_interval"),
            "flush_size": _count(
                _derive(self.flush_size, min(concurrency, FLUSH_SIZE_CAP)), "flush_size", MAX_BATCH
            ),
            "holder": _holder(self.holder),
            "backoff": _backoff(self.backoff),
            "attempt_timeout": check_timeout(self.attempt_timeout, "attempt_timeout"),
        }
        for name, value in resolved.items():
            object.__setattr__(self, name, value)  # frozen: resolved once, here

    def refuse_past(self, limits: Limits) -> None:
        """Raises ``ValueError`` (one line) for a duration the store would refuse, past its
        ``Limits.max_seconds``: ``ttl`` (every claim and renewal), ``heartbeat_interval``
        (every beat carries it) and ``backoff.cap`` (a failure's ``retry_after``). A worker
        refused them all, once running, and kept trying. ``Worker`` checks its store's
        limits when it is made; ``a2pg worker`` the defaults, before it opens the store."""
        longest = limits.max_seconds
        for what, value in (
            ("ttl", self.ttl),
            ("heartbeat_interval", self.heartbeat_interval),
            ("Backoff.cap", self.backoff.cap),
        ):
            if value > longest:
                raise ValueError(
                    f"{what} must be at most {longest:.0f} seconds, the store's limit "
                    f"(Limits.max_seconds), got {value!r}"
                )


def _derive(value: T | None, default: T) -> T:
    return default if value is None else value


def _count(value: int, what: str, maximum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= maximum:
        raise ValueError(f"{what} must be an int from 1 to {maximum}, got {value!r}")
    return value


def _seconds(value: float, what: str) -> float:
    """Above zero and at most a century: a lease or delay past that could not be stored."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{what} must be a number of seconds, got {value!r}")
    if not (value > 0 and value <= MAX_SECONDS):  # compared before float(): no OverflowError
        raise ValueError(
            f"{what} must be above 0 and at most {MAX_SECONDS:.0f} seconds, got {value!r}"
        )
    return float(value)


def check_timeout(value: float | None, what: str) -> float | None:
    """An attempt timeout: None (none), or seconds above 0, finite, at most a century;
    anything else is ``INVALID_ARGUMENT``.

    It is not bounded by the lease ``ttl``: the lease is renewed every ``renew_interval``
    while the attempt runs, so a 10-minute timeout under a 30-second lease is fine. The
    timeout bounds the handler; the lease only says the worker is still there.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise invalid(f"{what} must be a number of seconds, got {value!r}")
    if not (value > 0 and value <= MAX_SECONDS):  # NaN and infinity fail too
        raise invalid(
            f"{what} must be above 0 and at most {MAX_SECONDS:.0f} seconds (finite), got {value!r}"
        )
    return float(value)


def check_consumer_concurrency(value: object, what: str) -> int | None:
    """A consumer's ``concurrency``: None (only the worker's bounds it), or an int from 1
    to ``MAX_CONCURRENCY``; anything else (a bool, a float, 0...) is ``INVALID_ARGUMENT``."""
    return _optional_count(value, what, MAX_CONCURRENCY)


def check_priority(value: object, what: str) -> int | None:
    """A consumer's ``priority``: None (weight 1), or an int weight from 1 to
    ``MAX_PRIORITY``. Not 0: a consumer that weighs nothing would never be served, and a
    share must starve no one. Anything else is ``INVALID_ARGUMENT``."""
    return _optional_count(value, what, MAX_PRIORITY)


def _optional_count(value: object, what: str, maximum: int) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= maximum:
        raise invalid(f"{what} must be an int from 1 to {maximum:,}, got {value!r}")
    return value


def _holder(value: str | None) -> str:
    if value is not None and not isinstance(value, str):
        raise ValueError(f"holder must be a str, got {value!r}")
    return value or default_holder()  # an empty holder gets one too


def _backoff(value: Backoff | None) -> Backoff:
    if value is not None and not isinstance(value, Backoff):
        raise ValueError(f"backoff must be a Backoff, got {value!r}")
    return Backoff() if value is None else value
