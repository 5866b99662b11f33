"""find_heads(query): every session's live heads in one state (ready, held, backing off,
scheduled), filtered by consumer, event type, error text and session id prefix, in claim
order, in keyset pages with no gap and no repeat, also while heads change between pages."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, cast

import pytest

from a2pg import ClaimRef, Consumer, DeadLetterKey, DeadLetterQuery, Target
from a2pg.ids import FakeClock
from a2pg.models import WORK_STATES, FoundHead, HeadKey, HeadQuery, WorkState
from a2pg.store import Store

from .helpers import TTL, append, at, claim_one, completed, ev, fail
from .invalid_support import LONG, prepare, refused

SESSIONS = ("a-1", "a-2", "b-1")
TIMEOUT = "Traceback (most recent call last):\nTimeoutError: read timed out"

Ref = tuple[str, str, str | None, int]
STATES: tuple[WorkState, ...] = WORK_STATES


def refs(found: list[FoundHead]) -> list[Ref]:
    return [(f.head.session_id, f.head.consumer, f.head.lane, f.head.index) for f in found]


async def work_everywhere(store: Store, clock: FakeClock) -> datetime:
    """Per session, one second apart (a-1, a-2, b-1 in turn): c's event head 1 ready; d's
    lane y head 2 held (leased for TTL); c's event head 3 backing off 60 s after a timeout;
    c's event head 4 scheduled 300 s on; d's event head 5 dead (in no state). Returns the
    time of the first append."""
    start = clock()
    for session_id in SESSIONS:
        await append(
            store,
            session_id,
            ev("order", to=["c"]),
            ev("mail", to=[Target("d", "y")]),
            ev("order", to=["c"]),
            ev("note", to=[Target("c", not_before=timedelta(seconds=300))]),
            ev("mail", to=["d"]),
        )
        clock.advance(1)
    for session_id in SESSIONS:
        await claim_one(store, session_id, through=2, consumers=[Consumer("d")])
        three = await claim_one(
            store,
            session_id,
            through=3,
            consumers=[Consumer("c")],
            exclude=[ClaimRef("c", None, 1)],
        )
        await fail(store, three, error=TIMEOUT, retry_after=60)
        five = await claim_one(
            store, session_id, consumers=[Consumer("d")], exclude=[ClaimRef("d", "y", 2)]
        )
        await fail(store, five, error="boom", max_failures=1)
        clock.advance(1)
    return start


async def every_page(store: Store, query: HeadQuery) -> list[list[FoundHead]]:
    pages: list[list[FoundHead]] = []
    while page := await store.find_heads(query):
        pages.append(page)
        query = replace(query, after=HeadKey.of(page[-1]))
        assert len(pages) <= 30, "paging does not end"
    return pages


async def test_nothing_is_found_in_an_empty_store(store: Store) -> None:
    for state in STATES:
        assert await store.find_heads(HeadQuery(state)) == []


async def test_each_state_lists_its_heads_oldest_first(store: Store, clock: FakeClock) -> None:
    start = await work_everywhere(store, clock)
    ready = await store.find_heads(HeadQuery("ready"))
    assert refs(ready) == [(s, "c", None, 1) for s in SESSIONS]
    assert [f.since for f in ready] == [at(start, n) for n in range(3)]
    held = await store.find_heads(HeadQuery("held"))
    assert refs(held) == [(s, "d", "y", 2) for s in SESSIONS]
    assert [f.since for f in held] == [at(start, 3 + n + TTL) for n in range(3)]
    assert all(f.head.dispatch.claim_holder is not None for f in held)
    backing_off = await store.find_heads(HeadQuery("backing_off"))
    assert refs(backing_off) == [(s, "c", None, 3) for s in SESSIONS]
    assert [f.since for f in backing_off] == [at(start, 3 + n + 60) for n in range(3)]
    assert all(f.head.failure_count == 1 for f in backing_off)
    scheduled = await store.find_heads(HeadQuery("scheduled"))
    assert refs(scheduled) == [(s, "c", None, 4) for s in SESSIONS]
    assert [f.since for f in scheduled] == [at(start, n + 300) for n in range(3)]
    assert all(f.head.dispatch.attempt_count == 0 for f in scheduled)


async def test_the_heads_carry_their_event_dispatch_and_clear_index(
    store: Store, clock: FakeClock
) -> None:
    await work_everywhere(store, clock)
    [found] = await store.find_heads(HeadQuery("backing_off", session_prefix="b", limit=1))
    assert found.head.event == (await store.read("b-1", after=2, through=3))[0]
    assert found.head.dispatch.last_error == TIMEOUT
    assert found.head.dispatch.claim_holder is None and not found.head.dead_lettered
    assert found.head.clear_index is None
    await store.clear("b-1")
    await append(store, "b-1", ev("order", to=["c"]))
    [found] = await store.find_heads(HeadQuery("ready", session_prefix="b"))
    assert (found.head.index, found.head.clear_index) == (7, 6)


async def test_states_follow_the_clock(store: Store, clock: FakeClock) -> None:
    """A lease that ran out is ready again from its end (the wait counts from there); a
    backoff that ran out too; a due time reached too."""
    start = await work_everywhere(store, clock)
    clock.set(at(start, 4 + TTL))  # a-1's and a-2's leases ended, b-1's not yet
    held = await store.find_heads(HeadQuery("held"))
    assert refs(held) == [("b-1", "d", "y", 2)]
    ready = await store.find_heads(HeadQuery("ready"))
    assert refs(ready) == [(s, "c", None, 1) for s in SESSIONS] + [
        ("a-1", "d", "y", 2),
        ("a-2", "d", "y", 2),
    ]
    assert ready[-1].since == at(start, 4 + TTL)  # ready_at == now counts as ready
    clock.set(at(start, 1000))
    assert await store.find_heads(HeadQuery("held")) == []
    assert await store.find_heads(HeadQuery("backing_off")) == []
    assert await store.find_heads(HeadQuery("scheduled")) == []
    assert len(await store.find_heads(HeadQuery("ready"))) == 4 * len(SESSIONS)


TIES = (("c", None, 1), ("c", "x", 1), ("c", "y", 1), ("e", None, 1), ("c", None, 2))


async def test_ties_of_time_go_by_session_index_consumer_and_lane(
    store: Store, clock: FakeClock
) -> None:
    """claim_any's order: one append's heads share their time."""
    for session_id in ("b", "a"):
        await append(
            store,
            session_id,
            ev("x", to=["e", "c", Target("c", "y"), Target("c", "x")]),
            ev("x", to=["c"]),
        )
    found = await store.find_heads(HeadQuery())
    expected: list[Ref] = [(s, c, lane, i) for s in ("a", "b") for c, lane, i in TIES]
    assert refs(found) == expected
    assert [f.key for f in found] == sorted(f.key for f in found)
    claimed = await store.claim_any(holder="w", ttl=TTL, limit=3)
    assert [(h.session_id, h.consumer, h.lane, h.index) for h in claimed] == expected[:3]


async def test_filters_narrow_the_list_and_page_alike(store: Store, clock: FakeClock) -> None:
    await work_everywhere(store, clock)
    await append(store, "a-2", ev("mail", to=["c"]))  # a ready head of another type
    everything = {state: refs(await store.find_heads(HeadQuery(state))) for state in STATES}
    cases: dict[HeadQuery, list[Ref]] = {
        HeadQuery("ready", consumer="c"): everything["ready"],
        HeadQuery("ready", consumer="d"): [],
        HeadQuery("held", consumer="d"): everything["held"],
        HeadQuery("ready", event_type="mail"): [("a-2", "c", None, 6)],
        HeadQuery("ready", event_type="order"): [(s, "c", None, 1) for s in SESSIONS],
        HeadQuery("ready", event_type="Mail"): [],
        HeadQuery("backing_off", error="TIMEOUTerror"): everything["backing_off"],
        HeadQuery("backing_off", error="read timed"): everything["backing_off"],
        HeadQuery("backing_off", error="boom"): [],
        HeadQuery("ready", error="timeout"): [],  # no last error at all
        HeadQuery("scheduled", session_prefix="a-"): [("a-1", "c", None, 4), ("a-2", "c", None, 4)],
        HeadQuery("scheduled", session_prefix="b-1"): [("b-1", "c", None, 4)],
        HeadQuery("scheduled", session_prefix="b-10"): [],
        HeadQuery("scheduled", session_prefix="%"): [],
        HeadQuery("backing_off", consumer="c", error="timeout", session_prefix="a"): [
            ("a-1", "c", None, 3),
            ("a-2", "c", None, 3),
        ],
        HeadQuery("held", consumer="c", event_type="mail"): [],
    }
    for query, wanted in cases.items():
        assert refs(await store.find_heads(query)) == wanted, query
        paged = await every_page(store, replace(query, limit=1))
        assert [f for page in paged for f in page] == await store.find_heads(query), query


async def test_pages_follow_each_other_without_gap_or_repeat(
    store: Store, clock: FakeClock
) -> None:
    for n in range(7):
        await append(store, f"s{n % 3}", ev(to=["c", Target("d", f"l{n}")]))
        if n % 2:
            clock.advance(1)
    whole = await store.find_heads(HeadQuery(limit=100))
    assert len(whole) == 14
    pages = await every_page(store, HeadQuery(limit=3))
    assert [len(page) for page in pages] == [3, 3, 3, 3, 2]
    assert [f for page in pages for f in page] == whole


async def test_heads_that_change_between_pages_leave_the_others_in_place(
    store: Store, clock: FakeClock
) -> None:
    """A page starts after the last key shown, not at an offset: heads claimed, finished
    or added meanwhile shift nothing. An untouched head is listed once, in order; a head
    that left the state is not listed; one that came (later) is listed after the rest."""
    for n in range(8):
        await append(store, f"s{n}", ev(to=["c"]))
        clock.advance(1)
    whole = await store.find_heads(HeadQuery())
    first = await store.find_heads(HeadQuery(limit=3))
    assert first == whole[:3]
    # Meanwhile: s0 (listed) and s4 (not yet) are claimed, s5 is finished, s9 is new.
    for session_id in ("s0", "s4", "s5"):
        head = await claim_one(store, session_id)
        if session_id == "s5":
            await completed(store, head)
    await append(store, "s9", ev(to=["c"]))
    rest: list[FoundHead] = []
    after = HeadKey.of(first[-1])
    while page := await store.find_heads(HeadQuery(after=after, limit=3)):
        rest.extend(page)
        after = HeadKey.of(page[-1])
    assert [f.head.session_id for f in first + rest] == ["s0", "s1", "s2", "s3", "s6", "s7", "s9"]
    held = await store.find_heads(HeadQuery("held"))
    assert [f.head.session_id for f in held] == ["s0", "s4"]


async def test_after_starts_past_any_key_even_one_not_stored(
    store: Store, clock: FakeClock
) -> None:
    start = await work_everywhere(store, clock)
    after = HeadKey(at(start, 1), "a-2", 1, "b", "")  # before a-2's head at that time
    assert refs(await store.find_heads(HeadQuery(after=after))) == [
        ("a-2", "c", None, 1),
        ("b-1", "c", None, 1),
    ]
    after = HeadKey(at(start, 1), "a-2", 1, "c", "")  # exactly a-2's head: past it
    assert refs(await store.find_heads(HeadQuery(after=after))) == [("b-1", "c", None, 1)]
    assert await store.find_heads(HeadQuery(after=HeadKey(at(start, 9), "a", 1, "c", ""))) == []
    # A key in another timezone names the same instant.
    later = at(start, 2).astimezone(timezone(timedelta(hours=5)))
    assert await store.find_heads(HeadQuery(after=HeadKey(later, "b-1", 1, "c", ""))) == []


async def test_dead_cleared_and_finished_heads_are_in_no_state(
    store: Store, clock: FakeClock
) -> None:
    await work_everywhere(store, clock)
    await store.clear("a-1")
    listed = {state: refs(await store.find_heads(HeadQuery(state))) for state in STATES}
    every = [ref for found in listed.values() for ref in found]
    assert len(every) == 4 * 2  # a-2 and b-1, four live heads each
    assert not [ref for ref in every if ref[0] == "a-1" or ref[3] == 5]
    assert await store.find_heads(HeadQuery(session_prefix="a-1")) == []
    # A redriven dead head is ready again; a cancelled one is dead.
    await store.redrive("a-2", consumer="d", index=5, action="retry")
    assert ("a-2", "d", None, 5) in refs(await store.find_heads(HeadQuery("ready")))
    await store.cancel_head("a-2", consumer="c", index=1, action="dead_letter")
    assert ("a-2", "c", None, 1) not in refs(await store.find_heads(HeadQuery("ready")))


async def test_a_paused_consumers_heads_stay_listed_as_ready(store: Store) -> None:
    """As consumer_stats counts them: ready to be claimed once resumed."""
    await append(store, "s", ev(to=["c"]))
    await store.pause_consumers(["c"])
    assert refs(await store.find_heads(HeadQuery(consumer="c"))) == [("s", "c", None, 1)]


async def test_the_lists_agree_with_consumer_stats(store: Store, clock: FakeClock) -> None:
    await work_everywhere(store, clock)
    stats = {s.consumer: s for s in await store.consumer_stats()}
    for consumer, s in stats.items():
        counts = [
            len(await store.find_heads(HeadQuery(state, consumer=consumer))) for state in STATES
        ]
        assert counts == [s.ready, s.claimed, s.backing_off, s.scheduled], consumer


KEY = HeadKey(datetime(2026, 1, 1, tzinfo=UTC), "s", 1, "c", "")

BAD_QUERIES: dict[str, Any] = {
    "not-a-query": {"state": "ready"},
    "none": None,
    "dead-letter-query": DeadLetterQuery(),
    "state-unknown": HeadQuery(cast(Any, "dead")),
    "state-case": HeadQuery(cast(Any, "READY")),
    "state-empty": HeadQuery(cast(Any, "")),
    "state-none": HeadQuery(cast(Any, None)),
    "state-not-text": HeadQuery(cast(Any, 1)),
    "limit-zero": HeadQuery(limit=0),
    "limit-negative": HeadQuery(limit=-1),
    "limit-bool": HeadQuery(limit=cast(Any, True)),
    "limit-over-page-size": HeadQuery(limit=10_001),
    "limit-float": HeadQuery(limit=cast(Any, 2.0)),
    "empty-consumer": HeadQuery(consumer=""),
    "nul-consumer": HeadQuery(consumer="c\x00"),
    "long-consumer": HeadQuery(consumer="c" * LONG),
    "empty-type": HeadQuery(event_type=""),
    "nul-type": HeadQuery(event_type="t\x00"),
    "long-type": HeadQuery(event_type="t" * LONG),
    "type-not-text": HeadQuery(event_type=cast(Any, ["a"])),
    "empty-error": HeadQuery(error=""),
    "long-error": HeadQuery(error="e" * 8_193),
    "surrogate-error": HeadQuery(error="\ud800"),
    "empty-prefix": HeadQuery(session_prefix=""),
    "long-prefix": HeadQuery(session_prefix="s" * LONG),
    "after-not-a-key": HeadQuery(after=cast(Any, (KEY.ready_at, "s", 1, "c", ""))),
    "after-dead-letter-key": HeadQuery(after=cast(Any, DeadLetterKey("s", "c", "", 1))),
    "after-naive-time": HeadQuery(after=replace(KEY, ready_at=datetime(2026, 1, 1))),
    "after-time-not-a-time": HeadQuery(after=replace(KEY, ready_at=cast(Any, 0))),
    "after-time-too-late": HeadQuery(after=replace(KEY, ready_at=datetime(9999, 1, 1, tzinfo=UTC))),
    "after-empty-session": HeadQuery(after=replace(KEY, session_id="")),
    "after-empty-consumer": HeadQuery(after=replace(KEY, consumer="")),
    "after-nul-lane": HeadQuery(after=replace(KEY, lane="x\x00")),
    "after-lane-none": HeadQuery(after=replace(KEY, lane=cast(Any, None))),
    "after-index-zero": HeadQuery(after=replace(KEY, index=0)),
    "after-index-bool": HeadQuery(after=replace(KEY, index=cast(Any, True))),
}


@pytest.mark.parametrize("name", list(BAD_QUERIES))
async def test_bad_queries_are_refused_and_write_nothing(store: Store, name: str) -> None:
    before = await prepare(store)
    await refused(store, before, lambda: store.find_heads(BAD_QUERIES[name]))


async def test_a_refusal_names_what_was_wrong(store: Store) -> None:
    before = await prepare(store)
    await refused(store, before, lambda: store.find_heads(HeadQuery(cast(Any, "dead"))), "state")
    await refused(store, before, lambda: store.find_heads(HeadQuery(limit=10_001)), "max_page_size")
    await refused(
        store, before, lambda: store.find_heads(HeadQuery(error="e" * 8_193)), "max_error_length"
    )
