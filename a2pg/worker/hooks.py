"""What a worker tells observers (metrics, tracing, logs): one interface, a no-op default.

The runtime calls these hooks at the points worth watching and knows nothing of what
watches: ``a2pg.observability`` implements them with Prometheus and OpenTelemetry,
which stay optional imports there. A hook must be cheap and must not raise.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Literal

from ..models import Head

if TYPE_CHECKING:
    from .attempt import Attempt, WorkerStats

Outcome = Literal["completed", "failed", "dead_lettered", "superseded", "released", "abandoned"]
"""How an attempt ended: ``failed`` will be retried; ``released`` was cut short by a
shutdown and handed back; ``abandoned`` was given up on without an answer from the store
(its lease lapses)."""

OUTCOMES: tuple[Outcome, ...] = (
    "completed",
    "failed",
    "dead_lettered",
    "superseded",
    "released",
    "abandoned",
)


class WorkerHooks:
    """Does nothing: observers subclass it and override what they watch."""

    def started(self, holder: str, consumers: Sequence[str]) -> None:
        """The worker starts serving ``consumers`` as ``holder``."""

    def stopped(self, stats: WorkerStats) -> None:
        """The worker stopped; ``stats`` are its final counters."""

    @contextlib.contextmanager
    def attempt(self, attempt: Attempt) -> Iterator[None]:
        """Wraps one attempt from claim to settlement, inside its task: the handler runs
        within it. On exit ``attempt.outcome`` says how it ended (None when the worker
        was cancelled outright: treat as ``abandoned``), ``attempt.error`` what failed."""
        yield

    def dead_lettered_on_claim(self, head: Head) -> None:
        """A claim found ``head``'s leases lapsed ``max_failures`` times and dead-lettered it."""

    @contextlib.contextmanager
    def store_call(self, op: str) -> Iterator[None]:
        """Wraps one store call (``claim_any``, ``complete_attempts``...); an exception
        leaving it is the call's failure (an ``A2Error`` is the store's answer)."""
        yield

    def claimed(self, heads: int, limit: int) -> None:
        """One claim returned ``heads`` heads of at most ``limit``."""

    def completions_sent(self, size: int) -> None:
        """One batch of ``size`` completions was answered by the store."""

    def lease_renewed(self, attempt: Attempt) -> None:
        """``attempt``'s lease was extended."""

    def lease_lapsed(self, attempt: Attempt) -> None:
        """``attempt``'s lease ran out before it was renewed (the store no longer holds it)."""

    def wakeup(self) -> None:
        """The store's wakeups said work may have appeared."""

    def poll(self) -> None:
        """An idle worker claimed because its poll interval (or a backoff) ran out."""


class HookSet(WorkerHooks):
    """Several observers as one: each hook goes to each, in order."""

    def __init__(self, hooks: Sequence[WorkerHooks]) -> None:
        self.hooks = tuple(hooks)

    def started(self, holder: str, consumers: Sequence[str]) -> None:
        for hook in self.hooks:
            hook.started(holder, consumers)

    def stopped(self, stats: WorkerStats) -> None:
        for hook in self.hooks:
            hook.stopped(stats)

    @contextlib.contextmanager
    def attempt(self, attempt: Attempt) -> Iterator[None]:
        with contextlib.ExitStack() as stack:
            for hook in self.hooks:
                stack.enter_context(hook.attempt(attempt))
            yield

    def dead_lettered_on_claim(self, head: Head) -> None:
        for hook in self.hooks:
            hook.dead_lettered_on_claim(head)

    @contextlib.contextmanager
    def store_call(self, op: str) -> Iterator[None]:
        with contextlib.ExitStack() as stack:
            for hook in self.hooks:
                stack.enter_context(hook.store_call(op))
            yield

    def claimed(self, heads: int, limit: int) -> None:
        for hook in self.hooks:
            hook.claimed(heads, limit)

    def completions_sent(self, size: int) -> None:
        for hook in self.hooks:
            hook.completions_sent(size)

    def lease_renewed(self, attempt: Attempt) -> None:
        for hook in self.hooks:
            hook.lease_renewed(attempt)

    def lease_lapsed(self, attempt: Attempt) -> None:
        for hook in self.hooks:
            hook.lease_lapsed(attempt)

    def wakeup(self) -> None:
        for hook in self.hooks:
            hook.wakeup()

    def poll(self) -> None:
        for hook in self.hooks:
            hook.poll()


def combine(*hooks: WorkerHooks | Sequence[WorkerHooks] | None) -> WorkerHooks:
    """One ``WorkerHooks`` for all those given (None and empty sequences skipped)."""
    flat: list[WorkerHooks] = []
    for item in hooks:
        if item is None:
            continue
        if isinstance(item, WorkerHooks):
            flat.append(item)
            continue
        if not isinstance(item, Sequence):
            raise TypeError(f"hooks must be WorkerHooks, got {type(item).__name__}")
        for hook in item:
            if not isinstance(hook, WorkerHooks):
                raise TypeError(f"hooks must be WorkerHooks, got {type(hook).__name__}")
            flat.append(hook)
    if len(flat) == 1:
        return flat[0]
    return HookSet(flat)
