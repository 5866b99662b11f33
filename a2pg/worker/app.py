"""The handler registry a worker runs: which consumer names it serves, and with what code."""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TypeAlias

from ..contract.values import check_consumers
from ..errors import invalid
from ..models import Consumer, Head, LogSpec, NewEvent
from .settings import check_consumer_concurrency, check_priority, check_timeout

HandlerResult: TypeAlias = NewEvent | Sequence[NewEvent] | None
"""What a handler returns: one event, several, or none (see docs/concepts/outbox.md)."""
AsyncHandler: TypeAlias = Callable[[Head], Awaitable[HandlerResult]]
SyncHandler: TypeAlias = Callable[[Head], HandlerResult]
Handler: TypeAlias = AsyncHandler | SyncHandler

EVENT_ID_NAMESPACE = uuid.UUID("5b0c6f1e-2a7d-4c53-9d0a-a2a2a2a2a2a2")
"""The UUIDv5 namespace of the ids a worker gives returned events that have none."""


@dataclass(frozen=True, slots=True)
class Registration:
    """One served consumer: its declaration and its handler."""

    consumer: Consumer
    handler: Handler
    is_async: bool
    timeout: float | None = None
    """Seconds its handler may run (None: the worker's ``attempt_timeout``)."""
    concurrency: int | None = None
    """Handlers of this consumer running at once in one worker (None: only the worker's
    ``concurrency`` bounds them)."""
    priority: int | None = None
    """Its weight in the worker's share of free slots (None: weight 1; see ``Worker``)."""

    @property
    def shared(self) -> bool:
        """Whether it sets a ``concurrency`` or a ``priority``: a worker serving it shares
        its slots (see ``shares.Shares``)."""
        return self.concurrency is not None or self.priority is not None


class App:
    """Declares consumers and their handlers; a ``Worker`` runs them.

    Use the decorator::

        app = App()

        @app.consumer("mailer")
        async def send(head: Head) -> list[NewEvent]: ...

        @app.consumer("audit", log=LogSpec(types=("order.placed",)))
        def audit(head: Head) -> None: ...   # sync: runs in a thread

        @app.consumer("render", timeout=120)
        async def render(head: Head) -> None: ...   # fails if it runs past 120 s

        @app.consumer("backfill", concurrency=4, priority=1)
        async def backfill(head: Head) -> None: ...  # at most 4 at once per worker

    or a mapping: ``App({"mailer": send})`` (targeted consumers only; use
    ``app.add(name, handler, log=...)`` for log consumers).

    ``timeout`` bounds each attempt's handler, in seconds (positive and finite; it
    overrides the worker's ``attempt_timeout``, and may exceed the lease ``ttl``: the
    lease is renewed meanwhile). An async handler past it is cancelled and the attempt
    fails with ``AttemptTimeout``, which counts toward ``max_failures``. A sync handler's
    thread cannot be stopped: the attempt fails the same way once the thread returns,
    and until then its head stays claimed (its lease renewed), so no other attempt of
    it runs meanwhile.

    ``concurrency`` bounds the handlers of that consumer running at once in one worker
    (an int from 1 to 100,000; the worker's own ``concurrency`` still bounds them all),
    and ``priority`` is its weight when the worker shares its free slots among the
    consumers with ready work (an int from 1 to 1,000; unset weighs 1). Both are
    optional; a worker serving a consumer that sets either claims in weighted groups
    (see ``Worker``). A bad value is ``INVALID_ARGUMENT``.
    """

    def __init__(self, handlers: Mapping[str, Handler] | None = None) -> None:
        self._registrations: dict[str, Registration] = {}
        for name, handler in (handlers or {}).items():
            self.add(name, handler)

    def add(
        self,
        name: str,
        handler: Handler,
        *,
        log: LogSpec | None = None,
        timeout: float | None = None,
        concurrency: int | None = None,
        priority: int | None = None,
    ) -> None:
        """Registers ``handler`` for consumer ``name`` (a log consumer when ``log`` is given),
        its attempts bounded by ``timeout`` seconds when given (``INVALID_ARGUMENT`` unless
        positive and finite), at most ``concurrency`` of them running at once in a worker,
        weighing ``priority`` in the worker's share of its slots (see the class)."""
        if name in self._registrations:
            raise ValueError(f"consumer '{name}' already has a handler")
        if not callable(handler):
            raise TypeError(f"the handler of consumer '{name}' is not callable")
        consumer = Consumer(name, log)
        check_consumers([consumer])
        seconds, limit, weight = _check_options(name, timeout, concurrency, priority)
        self._registrations[name] = Registration(
            consumer, handler, _is_async(handler), seconds, limit, weight
        )

    def consumer(
        self,
        name: str,
        *,
        log: LogSpec | None = None,
        timeout: float | None = None,
        concurrency: int | None = None,
        priority: int | None = None,
    ) -> Callable[[Handler], Handler]:
        """Decorator form of ``add``; returns the handler unchanged."""
        _check_options(name, timeout, concurrency, priority)  # refused before the def

        def register(handler: Handler) -> Handler:
            self.add(
                name,
                handler,
                log=log,
                timeout=timeout,
                concurrency=concurrency,
                priority=priority,
            )
            return handler

        return register

    @property
    def consumers(self) -> list[Consumer]:
        """Every served consumer, in registration order."""
        return [r.consumer for r in self._registrations.values()]

    @property
    def log_consumers(self) -> list[Consumer]:
        return [c for c in self.consumers if c.log is not None]

    def registration(self, name: str) -> Registration | None:
        return self._registrations.get(name)

    def served(self, names: Sequence[str] | None = None) -> list[Consumer]:
        """The consumers a worker serving ``names`` serves, in registration order: all of
        them for None. ``INVALID_ARGUMENT``, naming the app's consumers, for anything but
        a non-empty sequence (a list, a tuple) of distinct names the app declares: a lone
        ``str`` would read as its letters, and a set has no order."""
        if names is None:
            return self.consumers
        declared = ", ".join(self._registrations) or "none"
        if isinstance(names, str | bytes) or not isinstance(names, Sequence):
            raise invalid(
                f"consumers must be a sequence of consumer names (like ['mailer']), "
                f"got {names!r}; the app's consumers: {declared}"
            )
        if not names:
            raise invalid(f"consumers must name at least one of the app's consumers: {declared}")
        wanted: set[str] = set()
        for name in names:
            if not isinstance(name, str):
                raise invalid(f"consumers must be names (str), got {name!r}")
            if name in wanted:
                raise invalid(f"consumer '{name}' is named twice in consumers")
            if name not in self._registrations:
                raise invalid(f"consumer '{name}' is not one of the app's consumers: {declared}")
            wanted.add(name)
        return [c for c in self.consumers if c.name in wanted]

    def __len__(self) -> int:
        return len(self._registrations)

    def __contains__(self, name: object) -> bool:
        return name in self._registrations


def _check_options(
    name: str, timeout: float | None, concurrency: int | None, priority: int | None
) -> tuple[float | None, int | None, int | None]:
    """A consumer's ``timeout``, ``concurrency`` and ``priority``, checked (each
    ``INVALID_ARGUMENT`` when bad)."""
    return (
        check_timeout(timeout, f"the timeout of consumer '{name}'"),
        check_consumer_concurrency(concurrency, f"the concurrency of consumer '{name}'"),
        check_priority(priority, f"the priority of consumer '{name}'"),
    )


def _is_async(handler: Handler) -> bool:
    """Coroutine functions, and callables whose ``__call__`` is one, run on the loop."""
    if inspect.iscoroutinefunction(handler):
        return True
    call = getattr(handler, "__call__", None)  # noqa: B004 - want the bound method itself
    return call is not None and inspect.iscoroutinefunction(call)


def returned_event_id(head: Head, position: int) -> str:
    """The id a returned event without one gets: the same for the same attempt and position.

    So re-sending the completion of one attempt (say, after a lost connection) is an
    idempotent replay rather than a second batch. Another attempt of the same head
    gets other ids: its first attempt never committed, or the head would have moved.
    """
    # names never hold NUL and lanes are never empty, so this key is unambiguous
    key = "\0".join(
        (head.session_id, head.consumer, head.lane or "", str(head.index), str(head.attempt))
    )
    return str(uuid.uuid5(EVENT_ID_NAMESPACE, f"{key}\0{position}"))


def completion_events(head: Head, result: object) -> list[NewEvent]:
    """The handler's return value as the events to complete with, each with an id.

    ``None`` means no events and a lone ``NewEvent`` is one. Raises ``TypeError`` for
    anything but those or an iterable of ``NewEvent``: the worker records that as the
    attempt's failure.
    """
    if result is None:
        return []
    if isinstance(result, NewEvent):
        result = [result]
    if isinstance(result, str | bytes | Mapping) or not isinstance(result, Iterable):
        raise TypeError(
            f"consumer '{head.consumer}' handler returned {type(result).__name__}; "
            "expected None or a sequence of NewEvent"
        )
    events: list[NewEvent] = []
    for position, event in enumerate(result):
        if not isinstance(event, NewEvent):
            raise TypeError(
                f"consumer '{head.consumer}' handler returned {type(event).__name__} at "
                f"position {position}; expected NewEvent"
            )
        if event.id is None:
            event = replace(event, id=returned_event_id(head, position))
        events.append(event)
    return events
