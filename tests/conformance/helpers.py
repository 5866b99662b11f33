"""Small builders and checks shared by the conformance modules (Store protocol only)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from datetime import datetime, timedelta
from typing import Any, TypeVar

import pytest

from a2pg import (
    A2Error,
    Busy,
    Claimed,
    Completed,
    CompleteResult,
    Completion,
    Consumer,
    Cursor,
    FailResult,
    Head,
    IdempotencyConflict,
    InvalidArgument,
    LogSpec,
    NewEvent,
    PartialDuplicateBatch,
    SessionCleared,
    SessionInfo,
    Settled,
    StoredEvent,
    StoreUnavailable,
    SupersededAttempt,
    Target,
)
from a2pg.models import Cause, ClaimResult
from a2pg.store import Store

from ..backends import MakeStore as MakeStore

HOLDER = "worker-1"
OTHER_HOLDER = "worker-2"
TTL = 30.0
MAX_FAILURES = 3
TIMEOUT = 10.0
"""Guard for anything awaited on live delivery: a broken stream fails instead of hanging."""

T = TypeVar("T")


def ev(
    type_: str = "note",
    payload: Any = None,
    *,
    id: str | None = None,
    to: Sequence[Target | str] = (),
    cause: Cause | None = None,
) -> NewEvent:
    """A NewEvent; ``to`` names targets as ``Target`` or a bare consumer name (event cursor)."""
    targets = tuple(t if isinstance(t, Target) else Target(t) for t in to)
    return NewEvent(type_, payload, id=id, cause=cause, targets=targets)


def log_consumer(
    name: str, *, types: Sequence[str] | None = None, backfill: bool = False, lane: str = "log"
) -> Consumer:
    return Consumer(name, LogSpec(lane, None if types is None else tuple(types), backfill))


def at(start: datetime, seconds: float) -> datetime:
    return start + timedelta(seconds=seconds)


async def append(
    store: Store,
    session_id: str,
    *events: NewEvent,
    consumers: Sequence[Consumer] | None = None,
) -> list[StoredEvent]:
    result = await store.append(session_id, list(events), consumers=consumers)
    return result.events


async def claim(
    store: Store,
    session_id: str,
    *,
    holder: str = HOLDER,
    ttl: float = TTL,
    **options: Any,
) -> list[Head]:
    """Claims and insists something was claimed."""
    result = await store.claim_available(session_id, holder=holder, ttl=ttl, **options)
    assert isinstance(result, Claimed), f"expected Claimed, got {result!r}"
    return result.heads


async def claim_one(store: Store, session_id: str, **options: Any) -> Head:
    heads = await claim(store, session_id, **options)
    assert len(heads) == 1, f"expected one head, got {[h.ref for h in heads]}"
    return heads[0]


async def claim_result(store: Store, session_id: str, **options: Any) -> ClaimResult:
    options.setdefault("holder", HOLDER)
    options.setdefault("ttl", TTL)
    return await store.claim_available(session_id, **options)


async def assert_settled(store: Store, session_id: str, **options: Any) -> None:
    result = await claim_result(store, session_id, **options)
    assert isinstance(result, Settled), f"expected Settled, got {result!r}"


async def assert_busy(store: Store, session_id: str, retry_at: datetime, **options: Any) -> None:
    result = await claim_result(store, session_id, **options)
    assert result == Busy(retry_at), f"expected Busy({retry_at}), got {result!r}"


async def complete(
    store: Store,
    head: Head,
    *events: NewEvent,
    attempt: int | None = None,
    consumers: Sequence[Consumer] | None = None,
) -> CompleteResult:
    return await store.complete_attempt(
        head.session_id,
        consumer=head.consumer,
        lane=head.lane,
        index=head.index,
        attempt=head.attempt if attempt is None else attempt,
        events=list(events),
        consumers=consumers,
    )


async def completed(
    store: Store, head: Head, *events: NewEvent, **options: Any
) -> list[StoredEvent]:
    result = await complete(store, head, *events, **options)
    assert isinstance(result, Completed), f"expected Completed, got {result!r}"
    return result.events


async def fail(
    store: Store,
    head: Head,
    *,
    error: str = "boom",
    max_failures: int = MAX_FAILURES,
    retry_after: float | None = None,
    attempt: int | None = None,
) -> FailResult:
    return await store.fail_attempt(
        head.session_id,
        consumer=head.consumer,
        lane=head.lane,
        index=head.index,
        attempt=head.attempt if attempt is None else attempt,
        error=error,
        max_failures=max_failures,
        retry_after=retry_after,
    )


def refs(heads: Sequence[Head]) -> list[tuple[str, str, str | None, int]]:
    """(session, consumer, lane, index) of each head, in the order given."""
    return [(h.session_id, h.consumer, h.lane, h.index) for h in heads]


def cursor_view(cursors: Sequence[Cursor]) -> list[tuple[str, str | None, str, int, int | None]]:
    """(consumer, lane, kind, position, head) of each cursor, in the order given."""
    return [(c.consumer, c.lane, c.kind, c.position, c.head) for c in cursors]


async def cursor_of(store: Store, session_id: str, consumer: str, lane: str | None) -> Cursor:
    found = [
        c for c in await store.cursors(session_id) if c.consumer == consumer and c.lane == lane
    ]
    assert len(found) == 1, f"expected one cursor {consumer}/{lane}, got {found}"
    return found[0]


async def fingerprint(store: Store, *session_ids: str) -> tuple[object, ...]:
    """Everything observable about these sessions and the store, to prove nothing was written."""
    per_session = []
    for session_id in session_ids:
        per_session.append(
            (
                await store.read(session_id),
                await store.cursors(session_id),
                await store.dead_letters(session_id),
            )
        )
    sessions: list[SessionInfo] = await store.sessions()
    registered = sorted(await store.registered_consumers(), key=lambda c: c.name)
    monitored = (await store.consumer_stats(), await store.workers())
    return (tuple(per_session), sessions, registered, monitored)


ERROR_CLASSES: dict[str, type[A2Error]] = {
    "INVALID_ARGUMENT": InvalidArgument,
    "PARTIAL_DUPLICATE_BATCH": PartialDuplicateBatch,
    "IDEMPOTENCY_CONFLICT": IdempotencyConflict,
    "SESSION_CLEARED": SessionCleared,
    "SUPERSEDED_ATTEMPT": SupersededAttempt,
    "STORE_UNAVAILABLE": StoreUnavailable,
}


def assert_code(error: pytest.ExceptionInfo[A2Error], code: str, *fragments: str) -> None:
    """The error has ``code``, is of its subclass (so callers can ``except`` by kind), and its
    text names each fragment."""
    assert error.value.code == code, f"expected {code}, got {error.value.code}: {error.value}"
    assert isinstance(error.value, ERROR_CLASSES[code]), type(error.value)
    for fragment in fragments:
        assert fragment in str(error.value), f"{fragment!r} not in {error.value}"


async def next_within(iterator: AsyncIterator[T], seconds: float = TIMEOUT) -> T:
    return await asyncio.wait_for(anext(iterator), seconds)


async def take(iterator: AsyncIterator[T], count: int, seconds: float = TIMEOUT) -> list[T]:
    """The next ``count`` items, all within ``seconds``."""

    async def collect() -> list[T]:
        return [await anext(iterator) for _ in range(count)]

    return await asyncio.wait_for(collect(), seconds)


async def close(iterator: AsyncIterator[Any]) -> None:
    aclose = getattr(iterator, "aclose", None)
    if aclose is not None:
        await aclose()


async def cancel(task: asyncio.Future[Any] | None) -> None:
    """Cancels a helper task and waits until it has let go of its iterator."""
    if task is not None and not task.done():
        task.cancel()
    if task is not None:
        await asyncio.gather(task, return_exceptions=True)


async def let_run() -> None:
    """Lets started tasks run up to their first real wait (no time passes)."""
    for _ in range(5):
        await asyncio.sleep(0)


def completion(head: Head, *events: NewEvent, attempt: int | None = None) -> Completion:
    """The Completion of ``head`` (at its attempt unless given) returning ``events``."""
    return Completion(
        head.session_id,
        head.consumer,
        head.lane,
        head.index,
        head.attempt if attempt is None else attempt,
        events,
    )


async def woken_by(store: Store, action: Callable[[], Awaitable[object]]) -> list[str | None]:
    """The sessions ``store``'s wakeups name while ``action`` runs: subscribed (proved by a
    warm-up append), then ``action``, then an append to session "marker" whose wakeup
    closes the window. Appends target consumer "w"; leave it out of what you claim."""
    wakeups = store.wakeups()
    seen: list[str | None] = []

    async def until(session_id: str) -> None:
        while (woken := await anext(wakeups)) != session_id:
            seen.append(woken)

    waiting: asyncio.Future[None] | None = None
    try:
        waiting = asyncio.ensure_future(until("warm-up"))
        await let_run()
        await append(store, "warm-up", ev(to=["w"]))
        await asyncio.wait_for(waiting, TIMEOUT)
        seen.clear()
        waiting = asyncio.ensure_future(until("marker"))
        await let_run()
        await action()
        await append(store, "marker", ev(to=["w"]))
        await asyncio.wait_for(waiting, TIMEOUT)
    finally:
        await cancel(waiting)
        await close(wakeups)
    return seen
