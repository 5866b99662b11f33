"""The attempt history: every finished attempt of a head, recorded where it ends."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from a2pg import AttemptRecord, Completion, InvalidArgument, Target
from a2pg.ids import FakeClock
from a2pg.store import Store

from .helpers import (
    HOLDER,
    OTHER_HOLDER,
    TTL,
    append,
    assert_code,
    at,
    claim_one,
    completed,
    ev,
    fail,
    fingerprint,
)


def outcomes(records: list[AttemptRecord]) -> list[tuple[int, str, str | None]]:
    return [(r.attempt, r.outcome, r.holder) for r in records]


async def test_a_failure_then_a_completion_are_both_recorded(
    store: Store, clock: FakeClock
) -> None:
    await append(store, "s", ev(to=["c"]))
    first = await claim_one(store, "s")
    clock.advance(2)
    await fail(store, first, error="boom: a traceback", retry_after=None)
    second = await claim_one(store, "s", holder=OTHER_HOLDER)
    started = clock()
    clock.advance(3)
    await completed(store, second)
    history = await store.attempts("s", consumer="c", index=1)
    assert outcomes(history) == [(1, "failed", HOLDER), (2, "completed", OTHER_HOLDER)]
    assert history[0].error == "boom: a traceback" and history[1].error is None
    assert (history[1].started_at, history[1].ended_at) == (started, clock())
    assert history[1].duration == 3.0
    assert history[0].lane is None and history[0].index == 1


async def test_each_attempt_records_when_its_head_became_claimable(
    store: Store, clock: FakeClock
) -> None:
    """An attempt's wait runs from its head's ready time: the append, a backoff's end, a
    lapsed lease's end, a release; the completion path of claim_any records it too."""
    appended = clock()
    await append(store, "s", ev(to=["c"]), ev(to=["d"]))
    clock.advance(5)
    first = await claim_one(store, "s", through=1)
    assert first.dispatch.last_ready_at == appended
    clock.advance(2)
    await fail(store, first, retry_after=10)
    backoff_end = clock() + timedelta(seconds=10)
    clock.advance(12)
    second = await claim_one(store, "s", through=1, ttl=5)
    assert second.dispatch.last_ready_at == backoff_end
    clock.advance(6)
    third = await claim_one(store, "s", through=1, holder=OTHER_HOLDER)
    assert third.dispatch.last_ready_at == at(second.dispatch.last_claimed_at or clock(), 5)
    await completed(store, third)
    history = await store.attempts("s", consumer="c", index=1)
    assert [(r.outcome, r.wait) for r in history] == [
        ("failed", 5.0),
        ("lapsed", 2.0),
        ("completed", 1.0),
    ]
    clock.advance(1)
    [d_head] = await store.claim_any(holder=HOLDER, ttl=TTL, limit=5)
    await completed(store, d_head)
    [d_attempt] = await store.attempts("s", consumer="d", index=2)
    assert d_attempt.ready_at == appended and d_attempt.wait == 26.0
    points = {p.consumer: p for p in await store.activity(since=appended, bucket=86_400)}
    assert points["c"].mean_wait == pytest.approx(8 / 3) and points["c"].max_wait == 5.0
    assert (points["d"].mean_wait, points["d"].max_wait) == (26.0, 26.0)


async def test_lapsed_released_and_dead_lettered_attempts(store: Store, clock: FakeClock) -> None:
    await append(store, "s", ev("a", to=[Target("c", "l")]))
    first = await claim_one(store, "s", ttl=5)
    clock.advance(6)  # the lease lapses; the next claim finds it
    second = await claim_one(store, "s", holder=OTHER_HOLDER)
    await store.release_claims("s", holder=OTHER_HOLDER, claims=[second.attempt_ref])
    third = await claim_one(store, "s")
    await fail(store, third, max_failures=2, error="last straw")
    history = await store.attempts("s", consumer="c", index=1, lane="l")
    assert outcomes(history) == [
        (first.attempt, "lapsed", HOLDER),
        (second.attempt, "released", OTHER_HOLDER),
        (third.attempt, "dead_lettered", HOLDER),
    ]
    assert history[0].ended_at == at(history[0].started_at or clock(), 6)
    assert await store.attempts("s", consumer="c", index=1, lane=None) == []


async def test_a_lapse_that_dead_letters_is_recorded_so(store: Store, clock: FakeClock) -> None:
    await append(store, "s", ev(to=["c"]))
    await claim_one(store, "s", ttl=5)
    clock.advance(6)
    result = await store.claim_available("s", holder=OTHER_HOLDER, ttl=TTL, max_failures=1)
    [head] = result.heads  # type: ignore[union-attr]
    assert head.dispatch.failed_at is not None
    assert outcomes(await store.attempts("s", consumer="c", index=1)) == [
        (1, "dead_lettered", HOLDER)
    ]


async def test_claim_any_and_complete_and_claim_record_too(store: Store, clock: FakeClock) -> None:
    await append(store, "s", ev(to=["c"]), ev(to=["c"]))
    heads = await store.claim_any(holder=HOLDER, ttl=5, limit=1)
    clock.advance(6)
    again = await store.claim_any(holder=OTHER_HOLDER, ttl=TTL, limit=10)
    assert sorted(h.index for h in again) == [1, 2]
    done = [Completion("s", h.consumer, h.lane, h.index, h.attempt) for h in again]
    await store.complete_and_claim(done, holder=OTHER_HOLDER, ttl=TTL)
    assert outcomes(await store.attempts("s", consumer="c", index=heads[0].index)) == [
        (1, "lapsed", HOLDER),
        (2, "completed", OTHER_HOLDER),
    ]
    [second] = await store.attempts("s", consumer="c", index=2)
    assert outcomes([second]) == [(1, "completed", OTHER_HOLDER)]
    assert second.wait == 6.0  # appended, then claimed 6 s later


async def test_a_cancelled_running_attempt_is_recorded(store: Store) -> None:
    await append(store, "s", ev(to=["c"]))
    await claim_one(store, "s")
    await store.cancel_head("s", consumer="c", index=1, action="skip")
    assert outcomes(await store.attempts("s", consumer="c", index=1)) == [(1, "cancelled", HOLDER)]


async def test_a_repeated_failure_is_recorded_once(store: Store) -> None:
    await append(store, "s", ev(to=["c"]))
    head = await claim_one(store, "s")
    await fail(store, head, retry_after=60)
    await fail(store, head, retry_after=60)
    assert len(await store.attempts("s", consumer="c", index=1)) == 1


async def test_pruning_drops_the_oldest_attempts_first(store: Store, clock: FakeClock) -> None:
    for n in range(3):
        await append(store, f"s{n}", ev(to=["c"]))
        await completed(store, await claim_one(store, f"s{n}"))
        clock.advance(60)
    assert await store.prune_attempts(before=clock() - timedelta(seconds=90), limit=10) == 2
    assert await store.attempts("s0", consumer="c", index=1) == []
    assert len(await store.attempts("s2", consumer="c", index=1)) == 1
    assert await store.prune_attempts(before=clock(), limit=10) == 1


@pytest.mark.parametrize(
    ("call", "fragments"),
    [
        ({"consumer": "", "index": 1}, ("consumer name",)),
        ({"consumer": "c", "index": 0}, ("index",)),
        ({"consumer": "c", "index": 1, "lane": ""}, ("lane",)),
    ],
)
async def test_bad_attempts_arguments(
    store: Store, call: dict[str, object], fragments: tuple[str, ...]
) -> None:
    with pytest.raises(InvalidArgument) as error:
        await store.attempts("s", **call)  # type: ignore[arg-type]
    assert_code(error, "INVALID_ARGUMENT", *fragments)


@pytest.mark.parametrize(
    ("call", "fragments"),
    [
        ({"before": datetime(2030, 1, 1)}, ("naive",)),
        ({"before": "yesterday"}, ("before",)),
        ({"before": datetime(2030, 1, 1, tzinfo=UTC), "limit": 0}, ("limit",)),
        ({"before": datetime(2030, 1, 1, tzinfo=UTC), "limit": 10**9}, ("limit",)),
    ],
)
async def test_bad_prune_arguments_delete_nothing(
    store: Store, call: dict[str, object], fragments: tuple[str, ...]
) -> None:
    await append(store, "s", ev(to=["c"]))
    await completed(store, await claim_one(store, "s"))
    before = await fingerprint(store, "s")
    with pytest.raises(InvalidArgument) as error:
        await store.prune_attempts(**call)  # type: ignore[arg-type]
    assert_code(error, "INVALID_ARGUMENT", *fragments)
    assert await fingerprint(store, "s") == before
    assert len(await store.attempts("s", consumer="c", index=1)) == 1


async def test_activity_counts_attempts_per_consumer_and_bucket(
    store: Store, clock: FakeClock
) -> None:
    start = clock()
    await append(store, "s", ev(to=["c"]), ev(to=["c"]), ev(to=["d"]))
    first = await claim_one(store, "s", through=1)
    clock.advance(2)
    await fail(store, first, retry_after=None)
    again = await claim_one(store, "s", through=1)
    clock.advance(4)
    await completed(store, again)
    clock.advance(120)
    heads = await store.claim_any(holder=HOLDER, ttl=TTL, limit=5)
    assert sorted(h.consumer for h in heads) == ["c", "d"]
    for head in heads:
        await completed(store, head)
    points = await store.activity(since=start, bucket=3600)
    hour = datetime.fromtimestamp(start.timestamp() - start.timestamp() % 3600, UTC)
    by_consumer = {p.consumer: p for p in points}
    assert set(by_consumer) == {"c", "d"} and all(p.at == hour for p in points)
    c = by_consumer["c"]
    assert (c.completed, c.failed, c.dead_lettered, c.other) == (2, 1, 0, 0)
    assert c.max_duration == pytest.approx(4.0) and c.mean_duration == pytest.approx(2.0)
    minutes = await store.activity(since=start, bucket=60)
    assert [p.completed + p.failed for p in minutes if p.consumer == "c"] == [2, 1]
    assert await store.activity(since=clock() + timedelta(seconds=1)) == []


async def test_activity_buckets_are_whole_microseconds(store: Store, clock: FakeClock) -> None:
    """A bucket a hair over an hour still starts its buckets on the hour, on every backend
    (a float floor put the attempt in the previous hour on one and this hour on another)."""
    await append(store, "s", ev(to=["c"]))
    clock.advance(3600 - clock().timestamp() % 3600)
    on_the_hour = clock()
    await completed(store, await claim_one(store, "s"))
    points = await store.activity(since=on_the_hour, bucket=3600.0000000000005)
    assert [(p.at, p.completed) for p in points] == [(on_the_hour, 1)]


@pytest.mark.parametrize(
    ("call", "fragments"),
    [
        ({"since": datetime(2030, 1, 1)}, ("naive",)),
        ({"since": datetime(2030, 1, 1, tzinfo=UTC), "bucket": 0}, ("bucket",)),
        ({"since": datetime(2030, 1, 1, tzinfo=UTC), "bucket": 10**6}, ("bucket",)),
        ({"since": datetime(2030, 1, 1, tzinfo=UTC), "bucket": "60"}, ("bucket",)),
        ({"since": datetime(2030, 1, 1, tzinfo=UTC), "bucket": float("nan")}, ("bucket",)),
    ],
)
async def test_bad_activity_arguments(
    store: Store, call: dict[str, object], fragments: tuple[str, ...]
) -> None:
    with pytest.raises(InvalidArgument) as error:
        await store.activity(**call)  # type: ignore[arg-type]
    assert_code(error, "INVALID_ARGUMENT", *fragments)


async def test_pruning_mixes_event_and_lane_cursors(store: Store, clock: FakeClock) -> None:
    await append(store, "s", ev(to=["c", Target("c", "l")]))
    for head in await store.claim_any(holder=HOLDER, ttl=TTL, limit=5):
        await completed(store, head)
    clock.advance(1)
    assert await store.prune_attempts(before=clock(), limit=10) == 2
