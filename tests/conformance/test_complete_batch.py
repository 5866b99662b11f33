"""complete_attempts: many completions judged one by one, in order, all or nothing on errors."""

from __future__ import annotations

import pytest

from a2pg import A2Error, AttemptRef, Completed, Completion, Superseded
from a2pg.ids import FakeClock
from a2pg.store import Store

from .helpers import (
    TTL,
    append,
    assert_code,
    claim,
    claim_one,
    completed,
    completion,
    cursor_view,
    ev,
    fingerprint,
    log_consumer,
)


async def test_an_empty_batch_does_nothing(store: Store) -> None:
    assert await store.complete_attempts([]) == []


async def test_a_batch_across_sessions_completes_each(store: Store) -> None:
    await append(store, "s1", ev(to=["c"]))
    await append(store, "s2", ev(to=["c"]), ev(to=["d"]))
    a = await claim_one(store, "s1")
    b, c = await claim(store, "s2")
    results = await store.complete_attempts(
        [completion(b, ev("rb", id="rb")), completion(a), completion(c, ev("rc", id="rc"))]
    )
    assert [type(r) for r in results] == [Completed, Completed, Completed]
    rb, ra, rc = results
    assert isinstance(rb, Completed) and isinstance(rc, Completed)
    assert ra == Completed([])
    assert [(e.session_id, e.index, e.cause) for e in rb.events] == [
        ("s2", 3, AttemptRef("c", None, 1, 1))
    ]
    assert [(e.session_id, e.index, e.cause) for e in rc.events] == [
        ("s2", 4, AttemptRef("d", None, 2, 1))
    ]
    assert await store.cursors("s1") == []
    assert await store.cursors("s2") == []


async def test_outcomes_come_back_in_order(store: Store, clock: FakeClock) -> None:
    await append(store, "s", ev(to=["stale"]), ev(to=["done"]), ev(to=["fresh"]))
    stale, done, fresh = await claim(store, "s")
    [done_event] = await completed(store, done, ev("d", id="d"))
    clock.advance(TTL)
    await claim(store, "s", exclude=[done.ref, fresh.ref])
    results = await store.complete_attempts(
        [
            completion(fresh, ev("f", id="f")),
            completion(stale),
            completion(done, ev("d", id="d")),
        ]
    )
    assert isinstance(results[0], Completed)
    assert [e.id for e in results[0].events] == ["f"]
    assert results[1:] == [Superseded(), Completed([done_event])]


async def test_each_completion_is_judged_like_complete_attempt(store: Store) -> None:
    await append(store, "s", ev(to=["c"]), ev(to=["c"]))
    one, two = await claim(store, "s")
    results = await store.complete_attempts(
        [completion(one, attempt=one.attempt + 1), completion(two)]
    )
    assert results == [Superseded(), Completed([])]
    assert cursor_view(await store.cursors("s")) == [("c", None, "event", 0, 1)]


async def test_returned_events_start_work_and_wake_log_consumers(store: Store) -> None:
    await append(store, "s", ev(to=["c"]))
    head = await claim_one(store, "s")
    audit = log_consumer("audit", types=["r"])
    batch = [Completion("s", "c", None, 1, head.attempt, (ev("r", id="r", to=["d"]),), (audit,))]
    await store.complete_attempts(batch)
    assert cursor_view(await store.cursors("s")) == [
        ("audit", "log", "log", 1, 2),
        ("d", None, "event", 1, 2),
    ]


async def test_an_error_in_one_completion_writes_nothing(store: Store) -> None:
    await append(store, "s", ev(to=["a"]), ev(to=["b"]))
    a, b = await claim(store, "s")
    await completed(store, b, ev("r", id="r1"))
    before = await fingerprint(store, "s")
    with pytest.raises(A2Error) as error:
        await store.complete_attempts(
            [completion(a, ev("x", id="x")), completion(b, ev("r", id="other"))]
        )
    assert_code(error, "PARTIAL_DUPLICATE_BATCH")
    assert await fingerprint(store, "s") == before
    assert [e.id for e in await completed(store, a, ev("x", id="x"))] == ["x"]


async def test_an_index_without_an_event_fails_the_whole_batch(store: Store) -> None:
    await append(store, "s", ev(to=["a"]))
    a = await claim_one(store, "s")
    before = await fingerprint(store, "s")
    with pytest.raises(A2Error) as error:
        await store.complete_attempts(
            [completion(a, ev("x", id="x")), Completion("s", "a", None, 9, 1)]
        )
    assert_code(error, "INVALID_ARGUMENT")
    assert await fingerprint(store, "s") == before


async def test_bad_input_anywhere_fails_the_whole_batch(store: Store) -> None:
    await append(store, "s", ev(to=["a"]), ev(to=["b"]))
    a, b = await claim(store, "s")
    before = await fingerprint(store, "s")
    with pytest.raises(A2Error) as error:
        await store.complete_attempts([completion(a, ev("x", id="x")), completion(b, ev("y"))])
    assert_code(error, "INVALID_ARGUMENT", "id")
    assert await fingerprint(store, "s") == before


async def test_two_completions_in_one_session_append_in_order(store: Store) -> None:
    await append(store, "s", ev(to=["c"]), ev(to=["c"]))
    one, two = await claim(store, "s")
    results = await store.complete_attempts(
        [completion(two, ev("t", id="t")), completion(one, ev("o", id="o"))]
    )
    events = [e for r in results if isinstance(r, Completed) for e in r.events]
    assert [(e.id, e.index) for e in events] == [("t", 3), ("o", 4)]
    assert await store.read("s", after=2) == events


async def test_a_retried_batch_returns_the_same_outcomes(store: Store) -> None:
    await append(store, "s1", ev(to=["c"]))
    await append(store, "s2", ev(to=["c"]))
    batch = [
        completion(await claim_one(store, "s1"), ev("r", id="r")),
        completion(await claim_one(store, "s2")),
    ]
    first = await store.complete_attempts(batch)
    before = await fingerprint(store, "s1", "s2")
    assert await store.complete_attempts(batch) == first
    assert await fingerprint(store, "s1", "s2") == before
