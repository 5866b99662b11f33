"""complete_attempt: returned events with their cause, cursor advance, idempotent retries."""

from __future__ import annotations

import pytest

from a2pg import A2Error, AttemptRef, Completed, Superseded, Target
from a2pg.ids import FakeClock
from a2pg.store import Store

from .helpers import (
    TTL,
    append,
    assert_code,
    assert_settled,
    claim,
    claim_one,
    complete,
    completed,
    ev,
    fingerprint,
    refs,
)


async def test_returned_events_are_appended_with_the_attempt_as_cause(
    store: Store, clock: FakeClock
) -> None:
    await append(store, "s", ev(to=["c"]), ev())
    head = await claim_one(store, "s")
    clock.advance(3)
    events = await completed(store, head, ev("r1", 1, id="r1"), ev("r2", 2, id="r2"))
    cause = AttemptRef("c", None, 1, 1)
    assert [(e.index, e.id, e.type, e.payload, e.cause) for e in events] == [
        (3, "r1", "r1", 1, cause),
        (4, "r2", "r2", 2, cause),
    ]
    assert all(e.created_at == clock() for e in events)
    assert await store.read("s", after=2) == events


async def test_an_event_cursor_goes_idle_when_completed(store: Store) -> None:
    await append(store, "s", ev(to=["c"]))
    head = await claim_one(store, "s")
    assert await completed(store, head) == []
    assert await store.cursors("s") == []
    await assert_settled(store, "s")
    assert (await store.append("s", [])).has_pending is False


async def test_returned_targets_start_new_work(store: Store) -> None:
    await append(store, "s", ev(to=["c"]))
    head = await claim_one(store, "s")
    await completed(store, head, ev("next", id="n", to=["d", Target("e", "x")]))
    heads = {(c.consumer, c.lane, c.head) for c in await store.cursors("s")}
    assert heads == {("d", None, 2), ("e", "x", 2)}
    assert refs(await claim(store, "s")) == [("s", "d", None, 2), ("s", "e", "x", 2)]


async def test_completion_reports_nothing_when_the_claim_was_never_made(store: Store) -> None:
    await append(store, "s", ev(to=["c"]))
    result = await store.complete_attempt(
        "s", consumer="c", lane=None, index=1, attempt=1, events=[]
    )
    assert result == Superseded()
    assert len(await store.cursors("s")) == 1


async def test_retry_of_a_committed_completion_returns_the_stored_events(
    store: Store, clock: FakeClock
) -> None:
    await append(store, "s", ev(to=["c"]))
    head = await claim_one(store, "s")
    first = await completed(store, head, ev("r", {"a": 1}, id="r1"), ev("r", 2, id="r2"))
    clock.advance(TTL * 3)
    before = await fingerprint(store, "s")
    again = await complete(store, head, ev("r", {"a": 1}, id="r1"), ev("r", 2, id="r2"))
    assert again == Completed(first)
    assert await fingerprint(store, "s") == before


async def test_retry_of_an_empty_completion_is_completed(store: Store) -> None:
    await append(store, "s", ev(to=["c"]))
    head = await claim_one(store, "s")
    await completed(store, head)
    assert await complete(store, head) == Completed([])


@pytest.mark.parametrize(
    "retry",
    [
        [ev("r", id="r2"), ev("r", id="r1")],
        [ev("r", id="r1")],
        [ev("r", id="r1"), ev("r", id="r2"), ev("r", id="r3")],
        [ev("r", id="other1"), ev("r", id="other2")],
        [],
    ],
    ids=["reordered", "fewer", "more", "different", "none"],
)
async def test_retry_with_other_ids_is_a_partial_duplicate(
    store: Store, retry: list[object]
) -> None:
    await append(store, "s", ev(to=["c"]))
    head = await claim_one(store, "s")
    await completed(store, head, ev("r", id="r1"), ev("r", id="r2"))
    before = await fingerprint(store, "s")
    with pytest.raises(A2Error) as error:
        await complete(store, head, *retry)  # type: ignore[arg-type]
    assert_code(error, "PARTIAL_DUPLICATE_BATCH")
    assert await fingerprint(store, "s") == before


async def test_retry_of_an_empty_completion_with_events_is_a_partial_duplicate(
    store: Store,
) -> None:
    await append(store, "s", ev(to=["c"]))
    head = await claim_one(store, "s")
    await completed(store, head)
    with pytest.raises(A2Error) as error:
        await complete(store, head, ev("r", id="late"))
    assert_code(error, "PARTIAL_DUPLICATE_BATCH")
    assert [e.index for e in await store.read("s")] == [1]


async def test_retry_from_another_attempt_is_superseded(store: Store, clock: FakeClock) -> None:
    await append(store, "s", ev(to=["c"]))
    head = await claim_one(store, "s")
    await completed(store, head, ev("r", id="r1"))
    assert await complete(store, head, ev("r", id="r1"), attempt=2) == Superseded()


async def test_returning_an_id_already_stored_writes_nothing(store: Store) -> None:
    await append(store, "s", ev("x", id="taken"), ev(to=["c"]))
    head = await claim_one(store, "s")
    before = await fingerprint(store, "s")
    with pytest.raises(A2Error) as error:
        await complete(store, head, ev("x", id="taken"))
    assert_code(error, "PARTIAL_DUPLICATE_BATCH")
    assert await fingerprint(store, "s") == before
    assert [e.id for e in await completed(store, head, ev("x", id="fresh"))] == ["fresh"]


async def test_returning_the_same_id_twice_writes_nothing(store: Store) -> None:
    await append(store, "s", ev(to=["c"]))
    head = await claim_one(store, "s")
    before = await fingerprint(store, "s")
    with pytest.raises(A2Error) as error:
        await complete(store, head, ev("x", id="twice"), ev("y", id="twice"))
    assert_code(error, "PARTIAL_DUPLICATE_BATCH")
    assert await fingerprint(store, "s") == before


async def test_returned_ids_used_in_another_session_are_fresh(store: Store) -> None:
    await append(store, "elsewhere", ev("x", id="r1"))
    await append(store, "s", ev(to=["c"]))
    head = await claim_one(store, "s")
    [event] = await completed(store, head, ev("x", id="r1"))
    assert (event.session_id, event.index) == ("s", 2)


async def test_completing_one_consumer_leaves_the_others(store: Store) -> None:
    await append(store, "s", ev(to=["a", "b"]))
    a, b = await claim(store, "s")
    await completed(store, a)
    [rest] = await store.cursors("s")
    assert (rest.consumer, rest.head, rest.dispatch) == ("b", 1, b.dispatch)
    assert await completed(store, b) == []
