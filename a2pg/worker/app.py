"""The handler registry a worker runs: which consumer names it serves, and with what code."""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TypeAlias

from ..contract.values import check_consumers
from ..models import Consumer, Head, LogSpec, NewEvent
from .settings import check_timeout

HandlerResult: TypeAlias = Sequence[NewEvent] | None
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

    or a mapping: ``App({"mailer": send})`` (targeted consumers only; use
    ``app.add(name, handler, log=...)`` for log consumers).

    ``timeout`` bounds each attempt's handler, in seconds (positive and finite; it
    overrides the worker's ``attempt_timeout``, and may exceed the lease ``ttl``: the
    lease is renewed meanwhile). An async handler past it is cancelled and the attempt
    fails with ``AttemptTimeout``, which counts toward ``max_failures``. A sync handler's
    thread cannot be stopped: the attempt fails the same way once the thread returns,
    and until then its head stays claimed (its lease renewed), so no other attempt of
    it runs meanwhile.
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
    ) -> None:
        """Registers ``handler`` for consumer ``name`` (a log consumer when ``log`` is given),
        its attempts bounded by ``timeout`` seconds when given (``INVALID_ARGUMENT`` unless
        positive and finite)."""
        if name in self._registrations:
            raise ValueError(f"consumer '{name}' already has a handler")
        if not callable(handler):
            raise TypeError(f"the handler of consumer '{name}' is not callable")
        consumer = Consumer(name, log)
        check_consumers([consumer])
        seconds = check_timeout(timeout, f"the timeout of consumer '{name}'")
        self._registrations[name] = Registration(consumer, handler, _is_async(handler), seconds)

    def consumer(
        self, name: str, *, log: LogSpec | None = None, timeout: float | None = None
    ) -> Callable[[Handler], Handler]:
        """Decorator form of ``add``; returns the handler unchanged."""
        check_timeout(timeout, f"the timeout of consumer '{name}'")  # refused before the def

        def register(handler: Handler) -> Handler:
            self.add(name, handler, log=log, timeout=timeout)
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

    def __len__(self) -> int:
        return len(self._registrations)

    def __contains__(self, name: object) -> bool:
        return name in self._registrations


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
