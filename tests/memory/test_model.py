"""MemoryStore's own decisions: copies, all-or-nothing batches, readiness order, snapshots."""

from __future__ import annotations

import pytest

from a2pg import (
    A2Error,
    Claimed,
    Completed,
    Completion,
    Consumer,
    LogSpec,
    NewEvent,
    SnapshotWrite,
    Store,
    Superseded,
    Target,
)
from a2pg.ids import FakeClock
from a2pg.memory import MemoryStore


def job(to: str = "w", *, id: str | None = None, lane: str | None = None) -> NewEvent:
    return NewEvent("job", {"n": [1]}, id=id, targets=(Target(to, lane),))


async def claim(store: MemoryStore, session_id: str = "s") -> Claimed:
    result = await store.claim_available(session_id, holder="h", ttl=30)
    assert isinstance(result, Claimed)
    return result


def test_it_satisfies_the_store_protocol() -> None:
    store: Store = MemoryStore()
    assert isinstance(store, Store)


async def test_payloads_are_copied_in_and_out(store: MemoryStore) -> None:
    payload = {"list": [1, 2]}
    [stored] = (await store.append("s", [NewEvent("t", payload)])).events
    payload["list"].append(3)
    stored.payload["list"].append(4)
    [read] = await store.read("s")
    assert read.payload == {"list": [1, 2]}


async def test_a_failing_batch_of_completions_leaves_nothing(
    store: MemoryStore, clock: FakeClock
) -> None:
    await store.append("s", [job(), job()])
    first, second = (await claim(store)).heads
    before = (await store.read("s"), await store.cursors("s"))
    stream = store.stream("s", after=2)
    batch = [
        Completion("s", "w", None, first.index, first.attempt, [NewEvent("r", id="x")]),
        Completion("s", "w", None, second.index, second.attempt, [NewEvent("r", id="x")]),
    ]
    with pytest.raises(A2Error) as error:
        await store.complete_attempts(batch)
    assert error.value.code == "PARTIAL_DUPLICATE_BATCH"
    assert (await store.read("s"), await store.cursors("s")) == before
    assert await store.complete_attempts(batch[:1]) == [Completed(await store.read("s", after=2))]
    [event] = [await anext(stream)]
    assert event.id == "x"
    await stream.aclose()  # type: ignore[attr-defined]
    clock.advance(31)  # the restored lease of the second head lapses: claim_any finds it
    [again] = await store.claim_any(holder="h", ttl=30)
    assert (again.index, again.attempt) == (second.index, second.attempt + 1)


async def test_a_generated_id_colliding_with_a_live_one_writes_nothing(
    store: MemoryStore,
) -> None:
    with pytest.raises(A2Error) as error:
        await store.append("s", [NewEvent("t", id="id-00000001"), NewEvent("t")])
    assert error.value.code == "PARTIAL_DUPLICATE_BATCH"
    assert await store.sessions() == []


async def test_claim_any_takes_the_oldest_ready_head_first(
    store: MemoryStore, clock: FakeClock
) -> None:
    await store.append("a", [job()])
    [held] = await store.claim_any(holder="h", ttl=10)
    clock.advance(5)
    await store.append("b", [job()])
    clock.advance(10)  # a's lease ended at 10s, b became ready at 5s
    await store.append("c", [job()])
    heads = await store.claim_any(holder="h", ttl=10, limit=2)
    assert [head.session_id for head in heads] == ["b", "a"]
    assert heads[1].attempt == held.attempt + 1 and heads[1].failure_count == 1


async def test_a_target_repeated_in_one_event_counts_once(store: MemoryStore) -> None:
    event = NewEvent("job", targets=(Target("w", "x"), Target("w", "x")))
    await store.append("s", [event])
    [head] = (await claim(store)).heads
    await store.complete_attempt("s", consumer="w", lane="x", index=1, attempt=head.attempt)
    [cursor] = await store.cursors("s")
    assert (cursor.position, cursor.head) == (1, None)


async def test_an_older_pinned_snapshot_is_kept_below_the_head(store: MemoryStore) -> None:
    await store.append("s", [job(), job(), job()])
    heads = (await claim(store)).heads
    pin = heads[0].ref
    await store.put_snapshots("s", "r", [SnapshotWrite(3, "three")])
    await store.put_snapshots("s", "r", [SnapshotWrite(1, "one", pins=[pin])])
    assert (await store.read_state("s", "r", through=2)).state == "one"
    assert (await store.read_state("s", "r")).state == "three"
    await store.complete_attempt("s", consumer="w", lane=None, index=1, attempt=1)
    read = await store.read_state("s", "r", through=2)
    assert (read.snapshot_index, [e.index for e in read.events]) == (0, [1, 2])


async def test_a_snapshot_past_the_head_is_refused(store: MemoryStore) -> None:
    await store.append("s", [job()])
    with pytest.raises(A2Error) as error:
        await store.put_snapshots("s", "r", [SnapshotWrite(1, 1), SnapshotWrite(2, 2)])
    assert error.value.code == "INVALID_ARGUMENT"
    assert (await store.read_state("s", "r")).snapshot_index == 0


async def test_registering_new_types_reaches_existing_log_cursors(store: MemoryStore) -> None:
    old = Consumer("f", LogSpec(types=("a",)))
    await store.append("s", [NewEvent("a"), NewEvent("b")], consumers=[old])
    await store.register_consumers([Consumer("f", LogSpec(types=("a", "b")))])
    [head] = (await claim(store)).heads
    await store.complete_attempt("s", consumer="f", lane="log", index=1, attempt=head.attempt)
    [cursor] = await store.cursors("s")
    assert cursor.head == 2


async def test_wake_log_refuses_what_is_not_a_log_consumer(store: MemoryStore) -> None:
    await store.append("s", [job("f", lane="log")])
    bad: list[object] = ["f", Consumer("f"), Consumer("f", LogSpec())]
    for consumer in bad:
        with pytest.raises(A2Error) as error:
            await store.wake_log("s", consumer)  # type: ignore[arg-type]
        assert error.value.code == "INVALID_ARGUMENT"


async def test_malformed_collections_are_invalid(store: MemoryStore) -> None:
    calls = [
        store.read("s", types="job"),
        store.unregister_consumers("f"),
        store.complete_attempts(Completion("s", "w", None, 1, 1)),  # type: ignore[arg-type]
        store.presence.write("ns", "p", ["x"], at=FakeClock()(), seen=None, ttl=1),  # type: ignore[arg-type]
    ]
    for call in calls:
        with pytest.raises(A2Error) as error:
            await call
        assert error.value.code == "INVALID_ARGUMENT"


async def test_a_completion_after_a_redrive_skip_is_superseded(store: MemoryStore) -> None:
    await store.append("s", [job()])
    [head] = (await claim(store)).heads
    await store.fail_attempt(
        "s", consumer="w", lane=None, index=1, attempt=head.attempt, error="x", max_failures=1
    )
    await store.redrive("s", consumer="w", index=1, action="skip")
    result = await store.complete_attempt("s", consumer="w", lane=None, index=1, attempt=1)
    assert result == Superseded()
    renewed = await store.renew_claims("s", holder="h", claims=[head.attempt_ref], ttl=30)
    assert renewed.superseded == [head.ref]
    assert (await store.redrive("nowhere", consumer="w", index=1, action="retry")).redriven is False
    nowhere = await store.renew_claims("nowhere", holder="h", claims=[head.attempt_ref], ttl=30)
    assert (nowhere.renewed, nowhere.superseded) == ([], [])


async def test_no_snapshots_in_an_unknown_session(store: MemoryStore) -> None:
    await store.put_snapshots("nowhere", "r", [])
    assert await store.sessions() == []


async def test_the_readiness_queue_sheds_stale_entries(store: MemoryStore) -> None:
    for _ in range(6):
        await store.append("s", [job() for _ in range(400)])
        for head in (await claim(store)).heads:
            await store.complete_attempt(
                "s", consumer="w", lane=None, index=head.index, attempt=head.attempt
            )
    assert len(store._ready._heap) <= 2 * 1024
    sessions = [f"t{n:04}" for n in range(2100)]  # compactions run while they are created
    for session_id in sessions:
        await store.append(session_id, [job()])
    heads = await store.claim_any(holder="h", ttl=30, limit=5000)
    assert [head.session_id for head in heads] == sessions
