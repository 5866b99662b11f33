"""Log cursors: one per session walking the log in order, by type, with backfill and wake_log."""

from __future__ import annotations

from a2pg import CLEAR_EVENT_TYPE, Completed, Cursor, Dispatch, Target, WakeLogResult
from a2pg.store import Store

from .helpers import (
    append,
    assert_settled,
    claim,
    claim_one,
    complete,
    completed,
    cursor_of,
    cursor_view,
    ev,
    log_consumer,
    refs,
)

LOG = log_consumer("audit")
BACKFILL = log_consumer("audit", backfill=True)


async def test_a_batch_opens_the_cursor_at_its_first_event(store: Store) -> None:
    await append(store, "s", ev(), ev())
    await append(store, "s", ev("a"), ev("b"), consumers=[LOG])
    assert cursor_view(await store.cursors("s")) == [("audit", "log", "log", 2, 3)]
    head = await claim_one(store, "s", consumers=[LOG])
    assert (head.consumer, head.lane, head.index, head.event.type) == ("audit", "log", 3, "a")


async def test_backfill_opens_the_cursor_at_the_clear_marker(store: Store) -> None:
    await append(store, "s", ev("old"), ev("older"))
    await append(store, "s", ev("new"), consumers=[BACKFILL])
    assert cursor_view(await store.cursors("s")) == [("audit", "log", "log", 0, 1)]


async def test_backfill_after_a_clear_starts_after_the_marker(store: Store) -> None:
    await append(store, "s", ev("old"))
    await store.clear("s")
    await append(store, "s", ev("new"), consumers=[BACKFILL])
    assert cursor_view(await store.cursors("s")) == [("audit", "log", "log", 2, 3)]


async def test_types_choose_the_events_taken(store: Store) -> None:
    consumer = log_consumer("audit", types=["y"], backfill=True)
    await append(store, "s", ev("x"), ev("y"), ev("x"), ev("y"), consumers=[consumer])
    head = await claim_one(store, "s")
    assert head.index == 2
    await completed(store, head)
    cursor = await cursor_of(store, "s", "audit", "log")
    assert (cursor.position, cursor.head) == (2, 4)


async def test_a_batch_without_a_taken_type_opens_no_cursor(store: Store) -> None:
    await append(store, "s", ev("x"), consumers=[log_consumer("audit", types=["y"])])
    assert await store.cursors("s") == []
    await append(store, "s", ev("y"), consumers=[log_consumer("audit", types=["y"])])
    assert cursor_view(await store.cursors("s")) == [("audit", "log", "log", 1, 2)]


async def test_a_log_cursor_walks_every_event_in_order(store: Store) -> None:
    await append(store, "s", ev("a"), ev("b"), ev("c"), consumers=[BACKFILL])
    seen = []
    for _ in range(3):
        head = await claim_one(store, "s")
        seen.append(head.index)
        await completed(store, head)
    assert seen == [1, 2, 3]
    await assert_settled(store, "s")
    assert cursor_view(await store.cursors("s")) == [("audit", "log", "log", 3, None)]


async def test_an_idle_log_cursor_takes_the_next_appended_event(store: Store) -> None:
    await append(store, "s", ev("a"), consumers=[LOG])
    await completed(store, await claim_one(store, "s"))
    await append(store, "s", ev("b"), ev("c"), consumers=[LOG])
    assert (await claim_one(store, "s")).index == 2


async def test_appends_without_the_consumer_do_not_wake_it(store: Store) -> None:
    await append(store, "s", ev("a"), consumers=[LOG])
    await completed(store, await claim_one(store, "s"))
    await append(store, "s", ev("b"))
    await assert_settled(store, "s")
    assert cursor_view(await store.cursors("s")) == [("audit", "log", "log", 1, None)]


async def test_without_consumers_or_registrations_no_log_cursor_opens(store: Store) -> None:
    await append(store, "s", ev("a"), ev("b"))
    assert await store.cursors("s") == []


async def test_the_clear_marker_is_never_taken(store: Store) -> None:
    await append(store, "s", ev("a"), consumers=[BACKFILL])
    await store.clear("s")
    await append(store, "s", ev("b"), consumers=[BACKFILL])
    head = await claim_one(store, "s")
    assert (head.index, head.event.type) == (3, "b")
    assert head.clear_index == 2


async def test_a_log_cursor_runs_beside_targeted_work(store: Store) -> None:
    await append(store, "s", ev("a", to=["t", Target("u", "q")]), consumers=[LOG])
    heads = await claim(store, "s")
    assert refs(heads) == [
        ("s", "audit", "log", 1),
        ("s", "t", None, 1),
        ("s", "u", "q", 1),
    ]


async def test_each_log_consumer_has_its_own_cursor(store: Store) -> None:
    other = log_consumer("billing", lane="money", types=["b"])
    await append(store, "s", ev("a"), ev("b"), consumers=[LOG, other])
    assert cursor_view(await store.cursors("s")) == [
        ("audit", "log", "log", 0, 1),
        ("billing", "money", "log", 0, 2),
    ]


async def test_new_types_passed_to_a_claim_reach_the_cursor(store: Store) -> None:
    narrow = log_consumer("audit", types=["a"], backfill=True)
    wide = log_consumer("audit", types=["a", "b"], backfill=True)
    await append(store, "s", ev("a"), ev("b"), ev("a"), consumers=[narrow])
    head = await claim_one(store, "s", consumers=[wide])
    await completed(store, head)
    assert (await cursor_of(store, "s", "audit", "log")).head == 2


async def test_new_types_passed_to_a_completion_reach_the_cursor(store: Store) -> None:
    narrow = log_consumer("audit", types=["a"], backfill=True)
    wide = log_consumer("audit", types=["a", "b"], backfill=True)
    await append(store, "s", ev("a"), ev("b"), ev("a"), consumers=[narrow])
    head = await claim_one(store, "s", consumers=[narrow])
    await completed(store, head, consumers=[wide])
    assert (await cursor_of(store, "s", "audit", "log")).head == 2


async def test_a_log_completion_retries_after_the_cursor_moved_on(store: Store) -> None:
    await append(store, "s", ev("a"), ev("b"), consumers=[BACKFILL])
    head = await claim_one(store, "s")
    events = await completed(store, head, ev("r", id="r1"))
    assert await complete(store, head, ev("r", id="r1")) == Completed(events)
    assert (await cursor_of(store, "s", "audit", "log")).head == 2


async def test_wake_log_on_an_empty_session_is_an_unstored_idle_cursor(store: Store) -> None:
    result = await store.wake_log("s", LOG)
    assert result == WakeLogResult(Cursor("audit", "log", "log", 0, None, Dispatch()), 0)
    assert await store.cursors("s") == []
    assert await store.read("s") == []


async def test_wake_log_after_a_clear_with_nothing_after_it(store: Store) -> None:
    await append(store, "s", ev("a"))
    await store.clear("s")
    result = await store.wake_log("s", BACKFILL)
    assert result == WakeLogResult(Cursor("audit", "log", "log", 2, None, Dispatch()), 2)


async def test_wake_log_opens_at_the_head_without_backfill(store: Store) -> None:
    await append(store, "s", ev("a"), ev("b"))
    result = await store.wake_log("s", LOG)
    assert (result.head, result.cursor.position, result.cursor.head) == (2, 2, None)
    assert cursor_view(await store.cursors("s")) == [("audit", "log", "log", 2, None)]
    await append(store, "s", ev("c"), consumers=[LOG])
    assert (await claim_one(store, "s")).index == 3


async def test_wake_log_with_backfill_takes_the_first_event(store: Store) -> None:
    await append(store, "s", ev("a"), ev("b"))
    result = await store.wake_log("s", BACKFILL)
    assert (result.head, result.cursor.kind, result.cursor.position, result.cursor.head) == (
        2,
        "log",
        0,
        1,
    )
    assert (await claim_one(store, "s")).index == 1


async def test_wake_log_brings_an_idle_cursor_up_to_date(store: Store) -> None:
    await append(store, "s", ev("a"), consumers=[LOG])
    await completed(store, await claim_one(store, "s"))
    await append(store, "s", ev("b"), ev("c"))
    result = await store.wake_log("s", LOG)
    assert (result.head, result.cursor.position, result.cursor.head) == (3, 1, 2)


async def test_wake_log_keeps_a_claimed_head(store: Store) -> None:
    await append(store, "s", ev("a"), ev("b"), consumers=[BACKFILL])
    head = await claim_one(store, "s")
    result = await store.wake_log("s", BACKFILL)
    assert result.cursor.head == 1
    assert result.cursor.dispatch == head.dispatch


async def test_wake_log_records_new_types(store: Store) -> None:
    await append(store, "s", ev("a"), consumers=[log_consumer("audit", types=["a"])])
    await completed(store, await claim_one(store, "s"))
    await append(store, "s", ev("b"), ev("a"))
    result = await store.wake_log("s", log_consumer("audit", types=["b"]))
    assert result.cursor.head == 2
    await completed(store, await claim_one(store, "s"))
    assert (await cursor_of(store, "s", "audit", "log")).head is None


async def test_a_log_cursor_skips_clear_markers_when_walking(store: Store) -> None:
    await append(store, "s", ev("a"), consumers=[BACKFILL])
    await claim_one(store, "s")
    await store.clear("s")
    await append(store, "s", ev("b"))
    result = await store.wake_log("s", BACKFILL)
    assert (result.cursor.position, result.cursor.head) == (2, 3)
    assert result.cursor.dispatch == Dispatch()
    [event] = await store.read("s", through=2)
    assert event.type == CLEAR_EVENT_TYPE
