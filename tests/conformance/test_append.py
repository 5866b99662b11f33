"""append: dense indexes, ids per session, idempotent retries, origin index, has_pending."""

from __future__ import annotations

from typing import Any

import pytest

from a2pg import A2Error, Consumer, NewEvent, Target
from a2pg.ids import FakeClock
from a2pg.store import Store

from .helpers import append, assert_code, claim, claim_one, ev, fingerprint


async def test_indexes_start_at_one_and_are_dense(store: Store, clock: FakeClock) -> None:
    result = await store.append("s", [ev("a"), ev("b", {"k": 1})])
    assert [(e.index, e.type, e.payload) for e in result.events] == [
        (1, "a", None),
        (2, "b", {"k": 1}),
    ]
    assert all(e.session_id == "s" and e.cause is None for e in result.events)
    assert await store.read("s") == result.events


async def test_next_batch_continues_at_head_plus_one(store: Store) -> None:
    await append(store, "s", ev(), ev())
    later = await append(store, "s", ev(), ev(), ev())
    assert [e.index for e in later] == [3, 4, 5]


async def test_one_created_at_per_batch_from_the_clock(store: Store, clock: FakeClock) -> None:
    start = clock()
    first = await append(store, "s", ev(), ev())
    clock.advance(5)
    second = await append(store, "s", ev())
    assert [e.created_at for e in first] == [start, start]
    assert second[0].created_at == clock()
    assert start.tzinfo is not None and second[0].created_at.utcoffset() == start.utcoffset()


async def test_missing_ids_come_from_the_injected_generator(store: Store) -> None:
    events = await append(store, "s", ev(), ev())
    assert events[0].id != events[1].id
    assert all(e.id.startswith("id-") for e in events)


async def test_each_generated_id_is_drawn_once_even_beside_supplied_ones_after_a_clear(
    store: Store,
) -> None:
    # PostgreSQL tries such a batch in one statement, which declines it (the cleared
    # session's old events must give up the supplied id first), then in a transaction:
    # the ids are drawn once, so the generator's next id goes to the event either way.
    await append(store, "s", ev())
    await store.clear("s")
    (marker,) = await store.read("s")  # the clear's marker: the last id drawn
    last = int(marker.id.removeprefix("id-"))
    batch = await append(store, "s", ev(), ev("b", id="e1"), ev())
    assert [e.id for e in batch] == [f"id-{last + 1:08d}", "e1", f"id-{last + 2:08d}"]
    assert [e.id for e in await append(store, "s", ev())] == [f"id-{last + 3:08d}"]


async def test_supplied_ids_are_kept(store: Store) -> None:
    events = await append(store, "s", ev(id="alpha"), ev(id="beta"))
    assert [e.id for e in events] == ["alpha", "beta"]


@pytest.mark.parametrize(
    "payload",
    [
        None,
        True,
        False,
        0,
        -17,
        2**53 + 1,
        1.5,
        "",
        "unicode é ✓ 𝄞",
        [],
        {},
        {"nested": {"list": [1, "two", None, {"deep": [True]}]}, "n": -0.25},
        ["mixed", 1, 2.5, None, {"k": []}],
    ],
    ids=lambda p: repr(p)[:30],
)
async def test_payload_round_trips(store: Store, payload: Any) -> None:
    [stored] = await append(store, "s", ev("t", payload))
    assert stored.payload == payload
    [read] = await store.read("s")
    assert read.payload == payload
    assert type(read.payload) is type(payload)


async def test_tuple_payload_reads_back_as_list(store: Store) -> None:
    await append(store, "s", ev("t", {"pair": (1, 2)}))
    [read] = await store.read("s")
    assert read.payload == {"pair": [1, 2]}


async def test_empty_batch_writes_nothing(store: Store) -> None:
    await append(store, "s", ev())
    before = await fingerprint(store, "s", "empty")
    result = await store.append("s", [])
    assert result.events == []
    assert await store.append("empty", []) == result
    assert await fingerprint(store, "s", "empty") == before


async def test_empty_batch_reports_pending_work(store: Store) -> None:
    await append(store, "s", ev(to=["c"]))
    assert (await store.append("s", [])).has_pending is True
    assert (await store.append("other", [])).has_pending is False


async def test_retry_of_a_whole_batch_returns_stored_events_in_request_order(
    store: Store, clock: FakeClock
) -> None:
    stored = await append(store, "s", ev("a", 1, id="x"), ev("b", 2, id="y"))
    clock.advance(10)
    replay = await store.append("s", [ev("b", 2, id="y"), ev("a", 1, id="x")])
    assert replay.events == [stored[1], stored[0]]
    assert [e.index for e in await store.read("s")] == [1, 2]


async def test_retry_matches_payloads_regardless_of_key_order(store: Store) -> None:
    [stored] = await append(store, "s", ev("a", {"x": 1, "y": [1, 2]}, id="k"))
    replay = await store.append("s", [ev("a", {"y": [1, 2], "x": 1}, id="k")])
    assert replay.events == [stored]


async def test_retry_reports_pending_work(store: Store) -> None:
    await append(store, "s", ev("a", id="k", to=["c"]))
    replay = await store.append("s", [ev("a", id="k", to=["c"])])
    assert replay.has_pending is True
    assert len(await store.cursors("s")) == 1


@pytest.mark.parametrize(
    "changed",
    [ev("other", 1, id="k"), ev("a", 2, id="k"), ev("a", None, id="k"), ev("a", [1], id="k")],
    ids=["type", "payload", "null-payload", "list-payload"],
)
async def test_retry_with_another_type_or_payload_conflicts(
    store: Store, changed: NewEvent
) -> None:
    await append(store, "s", ev("a", 1, id="k"))
    before = await fingerprint(store, "s")
    with pytest.raises(A2Error) as error:
        await store.append("s", [changed])
    assert_code(error, "IDEMPOTENCY_CONFLICT")
    assert await fingerprint(store, "s") == before


async def test_true_is_not_one_for_a_retry(store: Store) -> None:
    await append(store, "s", ev("a", 1, id="k"))
    with pytest.raises(A2Error) as error:
        await store.append("s", [ev("a", True, id="k")])
    assert_code(error, "IDEMPOTENCY_CONFLICT")


async def test_same_id_twice_in_a_batch_writes_nothing(store: Store) -> None:
    await append(store, "s", ev())
    before = await fingerprint(store, "s")
    with pytest.raises(A2Error) as error:
        await store.append("s", [ev(id="d"), ev(id="d")])
    assert_code(error, "PARTIAL_DUPLICATE_BATCH")
    assert await fingerprint(store, "s") == before


@pytest.mark.parametrize(
    "batch",
    [[ev(id="old"), ev(id="new")], [ev(id="new"), ev(id="old")], [ev(id="old"), ev()]],
    ids=["stored-then-fresh", "fresh-then-stored", "stored-then-generated"],
)
async def test_batch_mixing_stored_and_fresh_ids_writes_nothing(
    store: Store, batch: list[NewEvent]
) -> None:
    await append(store, "s", ev(id="old"))
    before = await fingerprint(store, "s")
    with pytest.raises(A2Error) as error:
        await store.append("s", batch)
    assert_code(error, "PARTIAL_DUPLICATE_BATCH")
    assert await fingerprint(store, "s") == before


async def test_ids_are_unique_per_session_only(store: Store) -> None:
    [first] = await append(store, "s1", ev("a", 1, id="shared"))
    [second] = await append(store, "s2", ev("b", 2, id="shared"))
    assert (second.session_id, second.index, second.type) == ("s2", 1, "b")
    assert await store.read("s1") == [first]


async def test_origin_index_above_the_clear_is_accepted(store: Store) -> None:
    await append(store, "s", ev(), ev())
    await store.clear("s")
    await append(store, "s", ev("origin"))
    [event] = (await store.append("s", [ev("later")], origin_index=4)).events
    assert event.index == 5


@pytest.mark.parametrize("origin", [1, 2, 3], ids=["below", "just-below", "at-marker"])
async def test_origin_index_at_or_below_the_clear_is_refused(store: Store, origin: int) -> None:
    await append(store, "s", ev(), ev())
    await store.clear("s")
    before = await fingerprint(store, "s")
    with pytest.raises(A2Error) as error:
        await store.append("s", [ev("late")], origin_index=origin)
    assert_code(error, "SESSION_CLEARED")
    assert await fingerprint(store, "s") == before


async def test_origin_index_on_a_never_cleared_session_is_accepted(store: Store) -> None:
    await append(store, "s", ev())
    result = await store.append("s", [ev()], origin_index=1)
    assert [e.index for e in result.events] == [2]


@pytest.mark.parametrize(
    ("consumers", "expected"),
    [
        (None, True),
        ([], False),
        ([Consumer("c")], True),
        ([Consumer("other")], False),
        ([Consumer("other"), Consumer("c")], True),
    ],
    ids=["all", "none", "served", "not-served", "among-others"],
)
async def test_has_pending_looks_at_served_consumers(
    store: Store, consumers: list[Consumer] | None, expected: bool
) -> None:
    result = await store.append("s", [ev(to=["c"])], consumers=consumers)
    assert result.has_pending is expected


async def test_has_pending_is_false_without_cursors(store: Store) -> None:
    assert (await store.append("s", [ev(), ev()])).has_pending is False


async def test_has_pending_ignores_finished_work(store: Store) -> None:
    await append(store, "s", ev(to=["c"]))
    head = await claim_one(store, "s")
    await store.complete_attempt(
        "s", consumer="c", lane=None, index=1, attempt=head.attempt, events=[]
    )
    assert (await store.append("s", [ev()])).has_pending is False


async def test_targets_start_cursor_work(store: Store) -> None:
    await append(store, "s", ev("a", to=[Target("c"), Target("d", "lane-1")]))
    kinds = {(c.consumer, c.lane, c.kind, c.head) for c in await store.cursors("s")}
    assert kinds == {("c", None, "event", 1), ("d", "lane-1", "lane", 1)}


async def test_a_target_named_twice_makes_one_cursor(store: Store) -> None:
    await append(
        store, "s", ev("a", to=[Target("c"), Target("c"), Target("d", "x"), Target("d", "x")])
    )
    views = [(c.consumer, c.lane, c.head) for c in await store.cursors("s")]
    assert views == [("c", None, 1), ("d", "x", 1)]
    heads = await claim(store, "s")
    assert [(h.consumer, h.attempt) for h in heads] == [("c", 1), ("d", 1)]


async def test_cause_of_a_live_attempt_is_stored(store: Store) -> None:
    await append(store, "s", ev(to=["c"]))
    head = await claim_one(store, "s")
    [child] = await append(store, "s", ev("child", cause=head.attempt_ref))
    assert child.cause == head.attempt_ref
    assert (await store.read("s", after=1))[0].cause == head.attempt_ref
