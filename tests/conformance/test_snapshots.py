"""State snapshots: the newest usable fold, and pins that keep history for retried attempts."""

from __future__ import annotations

from a2pg import Head, SnapshotWrite, StateRead
from a2pg.ids import FakeClock
from a2pg.store import Store

from .helpers import (
    TTL,
    append,
    claim_one,
    completed,
    ev,
    fail,
)

R = "counter"


async def indexes_of(read: StateRead) -> list[int]:
    return [e.index for e in read.events]


async def test_an_unknown_session_has_no_state(store: Store) -> None:
    assert await store.read_state("s", R) == StateRead(0, None, [], 0, 0)


async def test_without_snapshots_every_event_is_returned(store: Store) -> None:
    events = await append(store, "s", ev("a"), ev("b"))
    assert await store.read_state("s", R) == StateRead(0, None, events, 2, 0)


async def test_a_snapshot_replaces_the_events_it_folds(store: Store) -> None:
    events = await append(store, "s", ev(), ev(), ev())
    await store.put_snapshots("s", R, [SnapshotWrite(2, {"count": 2})])
    assert await store.read_state("s", R) == StateRead(2, {"count": 2}, events[2:], 3, 0)


async def test_through_bounds_the_snapshot_and_the_events(store: Store) -> None:
    events = await append(store, "s", ev(), ev(), ev(), ev())
    await store.put_snapshots("s", R, [SnapshotWrite(3, "three")])
    assert await store.read_state("s", R, through=2) == StateRead(0, None, events[:2], 4, 0)
    assert await store.read_state("s", R, through=3) == StateRead(3, "three", [], 4, 0)
    assert await store.read_state("s", R, through=4) == StateRead(3, "three", events[3:], 4, 0)


async def test_the_newest_write_becomes_the_head_snapshot(store: Store) -> None:
    await append(store, "s", ev(), ev(), ev())
    await store.put_snapshots("s", R, [SnapshotWrite(2, "two"), SnapshotWrite(1, "one")])
    read = await store.read_state("s", R)
    assert (read.snapshot_index, read.state) == (2, "two")
    await store.put_snapshots("s", R, [SnapshotWrite(3, "three")])
    read = await store.read_state("s", R)
    assert (read.snapshot_index, read.state, read.events) == (3, "three", [])


async def test_an_unpinned_older_snapshot_is_not_kept(store: Store) -> None:
    await append(store, "s", ev(), ev(), ev())
    await store.put_snapshots("s", R, [SnapshotWrite(1, "one")])
    await store.put_snapshots("s", R, [SnapshotWrite(3, "three")])
    read = await store.read_state("s", R, through=2)
    assert (read.snapshot_index, read.state, await indexes_of(read)) == (0, None, [1, 2])


async def test_reducers_are_separate(store: Store) -> None:
    await append(store, "s", ev(), ev())
    await store.put_snapshots("s", R, [SnapshotWrite(2, {"r": 1})])
    other = await store.read_state("s", "other")
    assert (other.snapshot_index, await indexes_of(other)) == (0, [1, 2])


async def test_sessions_are_separate(store: Store) -> None:
    await append(store, "s", ev(), ev())
    await append(store, "t", ev(), ev())
    await store.put_snapshots("s", R, [SnapshotWrite(2, 2)])
    assert (await store.read_state("t", R)).snapshot_index == 0


async def test_no_writes_write_nothing(store: Store) -> None:
    await store.put_snapshots("nobody", R, [])
    assert await store.sessions() == []
    assert await store.read_state("nobody", R) == StateRead(0, None, [], 0, 0)


async def test_state_is_any_json(store: Store) -> None:
    await append(store, "s", ev())
    state = {"list": [1, 2.5, None, True], "nested": {"é": "✓"}}
    await store.put_snapshots("s", R, [SnapshotWrite(1, state)])
    assert (await store.read_state("s", R)).state == state


async def pinned_scenario(store: Store) -> Head:
    """A worker folds through its head at 3 and pins that fold; newer folds follow."""
    await append(store, "s", ev(), ev(), ev(to=["c"]))
    head = await claim_one(store, "s")
    await store.put_snapshots("s", R, [SnapshotWrite(3, "s3", pins=[head.ref])])
    await append(store, "s", ev(), ev())
    await store.put_snapshots("s", R, [SnapshotWrite(5, "s5")])
    return head


async def test_a_pin_keeps_history_so_a_retry_reads_the_same_state(
    store: Store, clock: FakeClock
) -> None:
    head = await pinned_scenario(store)
    assert (await store.read_state("s", R)).snapshot_index == 5
    clock.advance(TTL)
    retry = await claim_one(store, "s")
    assert retry.attempt == head.attempt + 1
    assert await store.read_state("s", R, through=3) == StateRead(3, "s3", [], 5, 0)


async def test_a_pinned_write_older_than_the_head_is_kept(store: Store) -> None:
    await append(store, "s", ev(), ev(), ev(to=["c"]), ev(), ev())
    await store.put_snapshots("s", R, [SnapshotWrite(5, "s5")])
    head = await claim_one(store, "s")
    await store.put_snapshots("s", R, [SnapshotWrite(3, "s3", pins=[head.ref])])
    assert (await store.read_state("s", R)).snapshot_index == 5
    read = await store.read_state("s", R, through=4)
    assert (read.snapshot_index, read.state, await indexes_of(read)) == (3, "s3", [4])
    await completed(store, head)
    assert (await store.read_state("s", R, through=4)).snapshot_index == 0


async def test_an_unpinned_write_older_than_the_head_is_dropped(store: Store) -> None:
    await append(store, "s", ev(), ev(), ev())
    await store.put_snapshots("s", R, [SnapshotWrite(3, "s3")])
    await store.put_snapshots("s", R, [SnapshotWrite(2, "s2")])
    assert (await store.read_state("s", R, through=2)).snapshot_index == 0
    assert (await store.read_state("s", R)).state == "s3"


async def test_completion_releases_the_pin_and_its_history(store: Store) -> None:
    head = await pinned_scenario(store)
    await completed(store, head)
    read = await store.read_state("s", R, through=3)
    assert (read.snapshot_index, await indexes_of(read)) == (0, [1, 2, 3])
    assert (await store.read_state("s", R)).snapshot_index == 5


async def test_a_dead_letter_releases_the_pin(store: Store) -> None:
    head = await pinned_scenario(store)
    await fail(store, head, max_failures=1)
    assert (await store.read_state("s", R, through=3)).snapshot_index == 0


async def test_a_plain_failure_keeps_the_pin(store: Store) -> None:
    head = await pinned_scenario(store)
    await fail(store, head)
    assert (await store.read_state("s", R, through=4)).snapshot_index == 3


async def test_a_skip_releases_the_pin(store: Store) -> None:
    head = await pinned_scenario(store)
    await fail(store, head, max_failures=1)
    await store.redrive("s", consumer="c", index=3, action="skip")
    assert (await store.read_state("s", R, through=3)).snapshot_index == 0


async def test_a_pin_on_a_finished_head_keeps_nothing(store: Store) -> None:
    await append(store, "s", ev(), ev(), ev(to=["c"]))
    head = await claim_one(store, "s")
    await completed(store, head)
    await store.put_snapshots("s", R, [SnapshotWrite(3, "s3", pins=[head.ref])])
    await append(store, "s", ev())
    await store.put_snapshots("s", R, [SnapshotWrite(4, "s4")])
    assert (await store.read_state("s", R, through=3)).snapshot_index == 0


async def test_a_snapshot_below_the_clear_is_not_used(store: Store) -> None:
    await append(store, "s", ev(), ev())
    await store.put_snapshots("s", R, [SnapshotWrite(2, "two")])
    await store.clear("s")
    [marker] = await store.read("s")
    assert await store.read_state("s", R) == StateRead(0, None, [marker], 3, 3)


async def test_a_snapshot_at_the_clear_marker_is_used(store: Store) -> None:
    await append(store, "s", ev(), ev())
    await store.clear("s")
    [after] = await append(store, "s", ev())
    await store.put_snapshots("s", R, [SnapshotWrite(3, "fresh")])
    assert await store.read_state("s", R) == StateRead(3, "fresh", [after], 4, 3)


async def test_writes_below_the_clear_are_ignored(store: Store) -> None:
    await append(store, "s", ev(), ev())
    await store.clear("s")
    await store.put_snapshots("s", R, [SnapshotWrite(2, "stale")])
    read = await store.read_state("s", R)
    assert (read.snapshot_index, read.state, read.clear_index) == (0, None, 3)


async def test_reclaim_keeps_snapshots_above_the_marker(store: Store) -> None:
    await append(store, "s", ev(), ev())
    await store.put_snapshots("s", R, [SnapshotWrite(2, "old")])
    await store.clear("s")
    await append(store, "s", ev())
    await store.put_snapshots("s", R, [SnapshotWrite(4, "new")])
    assert (await store.reclaim("s")).done
    assert await store.read_state("s", R) == StateRead(4, "new", [], 4, 3)
