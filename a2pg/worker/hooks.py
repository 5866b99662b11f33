"""What a worker tells observers (metrics, tracing, logs): one interface, a no-op default.

The runtime calls these hooks at the points worth watching and knows nothing of what
watches: ``a2pg.observability`` implements them with Prometheus and OpenTelemetry,
which stay optional imports there. A hook must be cheap and should not raise; one that
does is logged and ignored (``Guarded``): an observer never changes what the worker does.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Literal

from ..models import Head

if TYPE_CHECKING:
    from .attempt import Attempt, WorkerStats

log = logging.getLogger("a2pg.worker.hooks")

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

    def watches_attempts(self) -> bool:
        """Whether ``attempt()`` would do anything for an attempt starting now; when not,
        the worker runs the attempt without it. True for any class that overrides
        ``attempt`` and not this; override it to say False when idle (logging disabled,
        no tracer provider...)."""
        return type(self).attempt is not WorkerHooks.attempt

    def dead_lettered_on_claim(self, head: Head) -> None:
        """A claim found ``head``'s leases lapsed ``max_failures`` times and dead-lettered it."""

    @contextlib.contextmanager
    def store_call(self, op: str) -> Iterator[None]:
        """Wraps one store call (``claim_any``, ``complete_attempts``...); an exception
        leaving it is the call's failure (an ``A2Error`` is the store's answer, but
        ``STORE_UNAVAILABLE``: see ``health.refused``)."""
        yield

    def watches_store_calls(self) -> bool:
        """Whether ``store_call()`` would do anything for a call starting now (see
        ``watches_attempts``)."""
        return type(self).store_call is not WorkerHooks.store_call

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

    def beat(self, within: float) -> None:
        """The heartbeat loop runs: a beat goes to the store now, and the next goes within
        ``within`` seconds (its interval, or a slow beat's deadline) while the worker's
        event loop runs (what a liveness probe watches)."""


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

    def watches_attempts(self) -> bool:
        return any(hook.watches_attempts() for hook in self.hooks)

    def dead_lettered_on_claim(self, head: Head) -> None:
        for hook in self.hooks:
            hook.dead_lettered_on_claim(head)

    @contextlib.contextmanager
    def store_call(self, op: str) -> Iterator[None]:
        with contextlib.ExitStack() as stack:
            for hook in self.hooks:
                stack.enter_context(hook.store_call(op))
            yield

    def watches_store_calls(self) -> bool:
        return any(hook.watches_store_calls() for hook in self.hooks)

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

    def beat(self, within: float) -> None:
        for hook in self.hooks:
            hook.beat(within)


class Guarded(WorkerHooks):
    """One observer whose exceptions are logged and dropped, so that a broken hook can
    neither stop the worker (a raise in ``claimed`` would strand the heads just claimed)
    nor pass for a store failure (a raise in ``store_call``), nor keep the observers
    after it from seeing the call. The exception a wrapped block raises (a handler's,
    a store's) still leaves it unchanged: an observer cannot swallow or replace it."""

    def __init__(self, hook: WorkerHooks) -> None:
        self.hook = hook
        self._reported: set[str] = set()

    def _failed(self, name: str) -> None:
        # The first failure of each hook with its traceback, the rest at DEBUG: a hook
        # that always raises must not flood the log once per attempt.
        level = logging.DEBUG if name in self._reported else logging.ERROR
        self._reported.add(name)
        log.log(
            level,
            "worker hook %s.%s raised; ignored",
            type(self.hook).__name__,
            name,
            exc_info=True,
        )

    def _call(self, name: str, call: Callable[[], object]) -> None:
        try:
            call()
        except Exception:
            self._failed(name)

    @contextlib.contextmanager
    def _wrap(
        self, name: str, make: Callable[[], AbstractContextManager[object]]
    ) -> Iterator[None]:
        try:
            manager = make()
            manager.__enter__()
        except Exception:
            self._failed(name)
            yield
            return
        try:
            yield
        except BaseException as error:
            try:
                manager.__exit__(type(error), error, error.__traceback__)
            except BaseException as raised:
                if raised is not error:
                    if not isinstance(raised, Exception):
                        raise
                    self._failed(name)
            raise
        try:
            manager.__exit__(None, None, None)
        except Exception:
            self._failed(name)

    def started(self, holder: str, consumers: Sequence[str]) -> None:
        self._call("started", lambda: self.hook.started(holder, consumers))

    def stopped(self, stats: WorkerStats) -> None:
        self._call("stopped", lambda: self.hook.stopped(stats))

    @contextlib.contextmanager
    def attempt(self, attempt: Attempt) -> Iterator[None]:
        with self._wrap("attempt", lambda: self.hook.attempt(attempt)):
            yield

    def watches_attempts(self) -> bool:
        try:
            return bool(self.hook.watches_attempts())
        except Exception:  # then let its attempt() run, guarded, and say for itself
            self._failed("watches_attempts")
            return True

    def dead_lettered_on_claim(self, head: Head) -> None:
        self._call("dead_lettered_on_claim", lambda: self.hook.dead_lettered_on_claim(head))

    @contextlib.contextmanager
    def store_call(self, op: str) -> Iterator[None]:
        with self._wrap("store_call", lambda: self.hook.store_call(op)):
            yield

    def watches_store_calls(self) -> bool:
        try:
            return bool(self.hook.watches_store_calls())
        except Exception:
            self._failed("watches_store_calls")
            return True

    def claimed(self, heads: int, limit: int) -> None:
        self._call("claimed", lambda: self.hook.claimed(heads, limit))

    def completions_sent(self, size: int) -> None:
        self._call("completions_sent", lambda: self.hook.completions_sent(size))

    def lease_renewed(self, attempt: Attempt) -> None:
        self._call("lease_renewed", lambda: self.hook.lease_renewed(attempt))

    def lease_lapsed(self, attempt: Attempt) -> None:
        self._call("lease_lapsed", lambda: self.hook.lease_lapsed(attempt))

    def wakeup(self) -> None:
        self._call("wakeup", self.hook.wakeup)

    def poll(self) -> None:
        self._call("poll", self.hook.poll)

    def beat(self, within: float) -> None:
        self._call("beat", lambda: self.hook.beat(within))


def combine(
    *hooks: WorkerHooks | Sequence[WorkerHooks] | None, guarded: bool = False
) -> WorkerHooks:
    """One ``WorkerHooks`` for all those given (None and empty sequences skipped); with
    ``guarded``, each is wrapped in ``Guarded`` on its own."""
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
    if guarded:
        flat = [h if isinstance(h, Guarded) else Guarded(h) for h in flat]
    if len(flat) == 1:
        return flat[0]
    return HookSet(flat)
