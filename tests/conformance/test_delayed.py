"""Delayed targets: ``Target(consumer, lane, not_before=...)`` holds a head back until then."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from a2pg import Consumer, InvalidArgument, Target
from a2pg.ids import FakeClock
from a2pg.store import Store

from .helpers import (
    HOLDER,
    TTL,
    append,
    assert_busy,
    assert_code,
    at,
    claim_one,
    completed,
    ev,
    fingerprint,
)


async def test_an_event_target_is_not_claimable_before_its_time(
    store: Store, clock: FakeClock
) -> None:
    await append(store, "s", ev(to=[Target("c", not_before=timedelta(seconds=30))]))
    [cursor] = await store.cursors("s")
    assert (cursor.head, cursor.dispatch.claim_holder) == (1, None)
    assert cursor.dispatch.claim_expires_at == at(clock(), 30)
    assert cursor.dispatch.attempt_count == 0
    await assert_busy(store, "s", at(clock(), 30))
    assert await store.claim_any(holder=HOLDER, ttl=TTL, limit=10) == []
    clock.advance(29.9)
    assert await store.claim_any(holder=HOLDER, ttl=TTL, limit=10) == []
    clock.advance(0.1)
    [head] = await store.claim_any(holder=HOLDER, ttl=TTL, limit=10)
    assert (head.index, head.attempt, head.failure_count) == (1, 1, 0)


async def test_an_absolute_time_counts_and_a_past_one_is_no_delay(
    store: Store, clock: FakeClock
) -> None:
    later = (clock() + timedelta(seconds=5)).astimezone(timezone(timedelta(hours=-7)))
    await append(
        store,
        "s",
        ev(to=[Target("late", not_before=later)]),
        ev(to=[Target("now", not_before=clock() - timedelta(days=1))]),
        ev(to=[Target("zero", not_before=timedelta(0))]),
    )
    heads = await store.claim_any(holder=HOLDER, ttl=TTL, limit=10)
    assert sorted(head.consumer for head in heads) == ["now", "zero"]
    await assert_busy(store, "s", at(clock(), 5))
    clock.advance(5)
    [head] = await store.claim_any(holder=HOLDER, ttl=TTL, limit=10)
    assert head.consumer == "late"


async def test_a_delayed_lane_event_holds_the_lane_until_its_time(
    store: Store, clock: FakeClock
) -> None:
    await append(
        store,
        "s",
        ev("a", to=[Target("c", "l")]),
        ev("b", to=[Target("c", "l", not_before=timedelta(seconds=60))]),
        ev("c", to=[Target("c", "l")]),
    )
    first = await claim_one(store, "s")
    assert first.index == 1
    clock.advance(10)
    await completed(store, first)
    # The lane's head is now the delayed event: it waits 60 s from its append, and the
    # event after it waits behind it (FIFO).
    await assert_busy(store, "s", at(clock(), 50))
    assert await store.claim_any(holder=HOLDER, ttl=TTL, limit=10) == []
    clock.advance(50)
    second = await claim_one(store, "s")
    assert second.index == 2
    await completed(store, second)
    third = await claim_one(store, "s")
    assert third.index == 3


async def test_a_delay_already_past_when_the_lane_reaches_it_holds_nothing(
    store: Store, clock: FakeClock
) -> None:
    await append(
        store,
        "s",
        ev("a", to=[Target("c", "l")]),
        ev("b", to=[Target("c", "l", not_before=timedelta(seconds=5))]),
    )
    first = await claim_one(store, "s")
    clock.advance(6)
    await completed(store, first)
    second = await claim_one(store, "s")
    assert second.index == 2


async def test_a_delayed_first_lane_event_holds_the_lane_from_the_start(
    store: Store, clock: FakeClock
) -> None:
    await append(
        store,
        "s",
        ev("a", to=[Target("c", "l", not_before=timedelta(seconds=20))]),
        ev("b", to=[Target("c", "l")]),
    )
    await assert_busy(store, "s", at(clock(), 20))
    clock.advance(20)
    assert (await claim_one(store, "s")).index == 1


async def test_a_completion_can_schedule_work(store: Store, clock: FakeClock) -> None:
    await append(store, "s", ev(to=["c"]))
    head = await claim_one(store, "s")
    reminder = ev("remind", id="r1", to=[Target("d", not_before=timedelta(minutes=5))])
    await completed(store, head, reminder)
    await assert_busy(store, "s", at(clock(), 300))
    clock.advance(300)
    later = await claim_one(store, "s")
    assert (later.consumer, later.event.type) == ("d", "remind")


async def test_a_delayed_head_fails_and_backs_off_as_any_other(
    store: Store, clock: FakeClock
) -> None:
    await append(store, "s", ev(to=[Target("c", not_before=timedelta(seconds=3))]))
    clock.advance(3)
    head = await claim_one(store, "s")
    result = await store.fail_attempt(
        "s",
        consumer="c",
        lane=None,
        index=head.index,
        attempt=head.attempt,
        error="boom",
        max_failures=3,
        retry_after=7,
    )
    assert result.outcome == "failed"
    await assert_busy(store, "s", at(clock(), 7))


async def test_the_same_target_twice_with_one_delay_counts_once(
    store: Store, clock: FakeClock
) -> None:
    delay = timedelta(seconds=1)
    await append(store, "s", ev(to=[Target("c", not_before=delay), Target("c", not_before=delay)]))
    assert len(await store.cursors("s")) == 1


@pytest.mark.parametrize(
    ("not_before", "fragments"),
    [
        (datetime(2030, 1, 1), ("naive",)),
        (timedelta(seconds=-1), ("at least 0",)),
        (timedelta(days=100_000), ("max_seconds",)),
        (30, ("datetime, a timedelta or None", "int")),
        ("2030-01-01T00:00:00Z", ("datetime, a timedelta or None", "str")),
        (datetime(9999, 1, 1, tzinfo=UTC), ("before 9000",)),
    ],
)
async def test_a_bad_not_before_is_refused_and_writes_nothing(
    store: Store, not_before: object, fragments: tuple[str, ...]
) -> None:
    await append(store, "s", ev(to=["c"]))
    before = await fingerprint(store, "s")
    with pytest.raises(InvalidArgument) as error:
        await append(store, "s", ev(to=[Target("c", not_before=not_before)]))  # type: ignore[arg-type]
    assert_code(error, "INVALID_ARGUMENT", "not_before", *fragments)
    assert await fingerprint(store, "s") == before


async def test_one_cursor_named_twice_with_two_delays_is_refused(
    store: Store, clock: FakeClock
) -> None:
    before = await fingerprint(store, "s")
    targets = [
        Target("c", "l", not_before=timedelta(seconds=1)),
        Target("c", "l", not_before=timedelta(seconds=2)),
    ]
    with pytest.raises(InvalidArgument) as error:
        await append(store, "s", ev(to=targets))
    assert_code(error, "INVALID_ARGUMENT", "twice with different not_before")
    assert await fingerprint(store, "s") == before


async def test_next_due_in_tells_an_idle_worker_when_to_look_again(
    store: Store, clock: FakeClock
) -> None:
    assert await store.next_due_in() is None
    await append(
        store,
        "s",
        ev(to=[Target("c", not_before=timedelta(seconds=40))]),
        ev(to=[Target("d", not_before=timedelta(seconds=90))]),
        ev(to=["now"]),
    )
    assert await store.next_due_in() == pytest.approx(40, abs=1e-3)
    assert await store.next_due_in(consumers=[Consumer("d")]) == pytest.approx(90, abs=1e-3)
    assert await store.next_due_in(consumers=[Consumer("now")]) is None
    clock.advance(40)
    assert await store.next_due_in() == pytest.approx(50, abs=1e-3)
    # A lease's end counts too: a lapsed claim is claimable again then.
    [head] = await store.claim_any(holder=HOLDER, ttl=TTL, limit=1, consumers=[Consumer("now")])
    assert head.consumer == "now"
    assert await store.next_due_in(consumers=[Consumer("now")]) == pytest.approx(TTL, abs=1e-3)


async def test_next_due_in_refuses_bad_consumers(store: Store) -> None:
    with pytest.raises(InvalidArgument) as error:
        await store.next_due_in(consumers="c")  # type: ignore[arg-type]
    assert_code(error, "INVALID_ARGUMENT", "consumers")


async def test_next_due_in_leaves_paused_consumers_out(store: Store) -> None:
    await append(store, "s", ev(to=[Target("c", not_before=timedelta(seconds=40))]))
    await store.pause_consumers(["c"])
    assert await store.next_due_in() is None
    await store.resume_consumers(["c"])
    assert await store.next_due_in() == pytest.approx(40, abs=1e-3)
