"""Registry backfill: a log consumer registered with ``backfill`` reaches existing sessions."""

from __future__ import annotations

import pytest

from a2pg import BackfillProgress, InvalidArgument, Target
from a2pg.ids import FakeClock
from a2pg.store import Store

from .helpers import (
    HOLDER,
    TTL,
    append,
    assert_code,
    claim_one,
    completed,
    cursor_view,
    ev,
    fingerprint,
    log_consumer,
)

AUDIT = log_consumer("audit", types=["user.message"], backfill=True)


async def run_backfill(store: Store, name: str, *, limit: int = 2) -> list[BackfillProgress]:
    """Calls ``backfill`` until it reports done; every progress seen, in order."""
    seen: list[BackfillProgress] = []
    for _ in range(100):
        progress = await store.backfill(name, limit=limit)
        assert progress is not None
        seen.append(progress)
        if progress.done_at is not None:
            return seen
    raise AssertionError(f"backfill of {name} never finished: {seen[-3:]}")


async def test_registering_with_backfill_brings_existing_sessions_cursors(
    store: Store, clock: FakeClock
) -> None:
    for session in ("a", "b", "c", "d", "e"):
        await append(store, session, ev("user.message"), ev("note"))
    await store.register_consumers([AUDIT])
    started = clock()
    clock.advance(1)
    seen = await run_backfill(store, "audit", limit=2)
    assert [p.sessions for p in seen] == [2, 4, 5]
    assert [p.after for p in seen] == ["b", "d", "e"]
    assert seen[-1].started_at == started and seen[-1].done_at == clock()
    for session in ("a", "b", "c", "d", "e"):
        assert cursor_view(await store.cursors(session)) == [("audit", "log", "log", 0, 1)]
    [head, *_] = await store.claim_any(holder=HOLDER, ttl=TTL, limit=10, consumers=[AUDIT])
    assert head.event.type == "user.message"


async def test_a_finished_backfill_stays_finished_and_a_repeat_registration_keeps_it(
    store: Store,
) -> None:
    await append(store, "a", ev("user.message"))
    await store.register_consumers([AUDIT])
    done = (await run_backfill(store, "audit"))[-1]
    await store.register_consumers([AUDIT])
    assert await store.backfill("audit") == done


async def test_changed_types_restart_the_backfill(store: Store, clock: FakeClock) -> None:
    await append(store, "a", ev("note"))
    await store.register_consumers([AUDIT])
    await run_backfill(store, "audit")
    [cursor] = await store.cursors("a")
    assert (cursor.head, cursor.position) == (None, 0)
    clock.advance(5)
    wider = log_consumer("audit", types=["user.message", "note"], backfill=True)
    await store.register_consumers([wider])
    progress = await store.backfill("audit")
    assert progress is not None and progress.started_at == clock() and progress.sessions == 1
    [cursor] = await store.cursors("a")
    assert cursor.head == 1


async def test_without_backfill_there_is_nothing_to_run(store: Store) -> None:
    await append(store, "a", ev("user.message"))
    await store.register_consumers([log_consumer("audit", backfill=False)])
    assert await store.backfill("audit") is None
    assert await store.backfill("never-registered") is None
    assert await store.cursors("a") == []
    # Turning backfill off ends one that was running.
    await store.register_consumers([AUDIT])
    assert await store.backfill("audit", limit=1) is not None
    await store.register_consumers([log_consumer("audit", types=["user.message"])])
    assert await store.backfill("audit") is None


async def test_unregistering_drops_the_backfill(store: Store) -> None:
    await append(store, "a", ev("user.message"))
    await store.register_consumers([AUDIT])
    await store.unregister_consumers(["audit"])
    assert await store.backfill("audit") is None


async def test_a_session_where_the_lane_is_targeted_is_passed_over(store: Store) -> None:
    await append(store, "a", ev("user.message", to=[Target("audit", "log")]))
    await append(store, "b", ev("user.message"))
    await store.register_consumers([AUDIT])
    await run_backfill(store, "audit")
    assert [c.kind for c in await store.cursors("a")] == ["lane"]
    assert [c.kind for c in await store.cursors("b")] == ["log"]


async def test_each_batch_goes_on_after_the_last_recorded_session(store: Store) -> None:
    for session in ("a", "b", "c"):
        await append(store, session, ev("user.message"))
    await store.register_consumers([AUDIT])
    first = await store.backfill("audit", limit=2)
    assert first is not None and first.sessions == 2
    second = await store.backfill("audit", limit=2)
    assert second is not None and (second.sessions, second.after) == (3, "c")
    assert second.done_at is not None


async def test_backfilled_cursors_run_and_later_events_follow(store: Store) -> None:
    await append(store, "a", ev("user.message"))
    await store.register_consumers([AUDIT])
    await run_backfill(store, "audit")
    head = await claim_one(store, "a", consumers=[AUDIT])
    await completed(store, head)
    await append(store, "a", ev("user.message"))
    again = await claim_one(store, "a", consumers=[AUDIT])
    assert again.index == 2


@pytest.mark.parametrize(
    ("consumer", "limit", "fragments"),
    [
        ("", 10, ("consumer name",)),
        (None, 10, ("consumer name",)),
        ("audit", 0, ("limit",)),
        ("audit", True, ("limit",)),
        ("audit", 1.5, ("limit",)),
        ("audit", 10**9, ("max_page_size",)),
    ],
)
async def test_bad_arguments_are_refused_and_write_nothing(
    store: Store, consumer: object, limit: object, fragments: tuple[str, ...]
) -> None:
    await append(store, "a", ev("user.message"))
    await store.register_consumers([AUDIT])
    before = await fingerprint(store, "a")
    with pytest.raises(InvalidArgument) as error:
        await store.backfill(consumer, limit=limit)  # type: ignore[arg-type]
    assert_code(error, "INVALID_ARGUMENT", *fragments)
    assert await fingerprint(store, "a") == before
