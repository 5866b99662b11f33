"""find_dead_letters(query): every session's dead letters, filtered by consumer, error text
and session id prefix, in keyset pages with no gap and no duplicate."""

from __future__ import annotations

from a2pg import Consumer, DeadLetterKey, DeadLetterQuery, Head, Target
from a2pg.ids import FakeClock
from a2pg.store import Store

from .helpers import TTL, append, claim_one, ev, fail, refs

SESSIONS = ("a-1", "a-2", "b-1")
ERRORS = {"c": "Traceback (most recent call last):\nTimeoutError: read timed out", "d": "boom"}


async def dead(store: Store, session_id: str, consumer: str, through: int) -> None:
    head = await claim_one(store, session_id, through=through, consumers=[Consumer(consumer)])
    await fail(store, head, error=ERRORS[consumer], max_failures=1)


async def dead_everywhere(store: Store) -> list[tuple[str, str, str | None, int]]:
    """Per session: c's event heads 1 and 3 dead, d's lane y head 2 dead (4 waits behind it),
    d's event head 5 dead, 6 live. Returns the dead heads in the order pages list them."""
    for session_id in SESSIONS:
        await append(
            store,
            session_id,
            ev(to=["c"]),
            ev(to=[Target("d", "y")]),
            ev(to=["c"]),
            ev(to=[Target("d", "y")]),
            ev(to=["d"]),
            ev(to=["c"]),
        )
        await dead(store, session_id, "c", 1)
        await dead(store, session_id, "d", 2)
        await dead(store, session_id, "c", 3)
        await dead(store, session_id, "d", 5)
    return [
        (s, consumer, lane, index)
        for s in SESSIONS
        for consumer, lane, index in (("c", None, 1), ("c", None, 3), ("d", None, 5), ("d", "y", 2))
    ]


async def every_page(store: Store, query: DeadLetterQuery) -> list[list[Head]]:
    pages: list[list[Head]] = []
    while True:
        page = await store.find_dead_letters(query)
        if not page:
            return pages
        pages.append(page)
        query = DeadLetterQuery(
            query.consumer, query.error, query.session_prefix, DeadLetterKey.of(page[-1]), 2
        )
        assert len(pages) <= 20, "paging does not end"


async def test_nothing_is_dead_in_an_empty_store(store: Store) -> None:
    assert await store.find_dead_letters(DeadLetterQuery()) == []


async def test_every_dead_head_in_key_order_as_dead_letters_lists_it(store: Store) -> None:
    expected = await dead_everywhere(store)
    found = await store.find_dead_letters(DeadLetterQuery())
    assert refs(found) == expected
    per_session = [h for s in SESSIONS for h in await store.dead_letters(s)]
    assert sorted(found, key=DeadLetterKey.of) == sorted(per_session, key=DeadLetterKey.of)
    assert [DeadLetterKey.of(h) for h in found] == sorted(DeadLetterKey.of(h) for h in found)


async def test_pages_follow_each_other_without_gap_or_duplicate(store: Store) -> None:
    expected = await dead_everywhere(store)
    pages = await every_page(store, DeadLetterQuery(limit=2))
    assert [len(page) for page in pages] == [2, 2, 2, 2, 2, 2]
    assert refs([h for page in pages for h in page]) == expected


async def test_filters_narrow_the_list_and_page_alike(store: Store) -> None:
    expected = await dead_everywhere(store)
    cases = {
        DeadLetterQuery(consumer="d"): [r for r in expected if r[1] == "d"],
        DeadLetterQuery(error="TIMEOUTerror"): [r for r in expected if r[1] == "c"],
        DeadLetterQuery(error="read timed"): [r for r in expected if r[1] == "c"],
        DeadLetterQuery(error="no such text"): [],
        DeadLetterQuery(session_prefix="a-"): [r for r in expected if r[0].startswith("a-")],
        DeadLetterQuery(session_prefix="b-1"): [r for r in expected if r[0] == "b-1"],
        DeadLetterQuery(session_prefix="b-10"): [],
        DeadLetterQuery(consumer="c", error="BOOM"): [],
        DeadLetterQuery(consumer="d", error="BOOM", session_prefix="a"): [
            r for r in expected if r[1] == "d" and r[0].startswith("a")
        ],
    }
    for query, wanted in cases.items():
        assert refs(await store.find_dead_letters(query)) == wanted, query
        paged = await every_page(store, query)
        assert refs([h for page in paged for h in page]) == wanted, query


async def test_after_starts_past_any_key_even_one_not_stored(store: Store) -> None:
    expected = await dead_everywhere(store)
    after = DeadLetterKey("a-2", "c", "", 2)  # between a-2's heads c/1 and c/3
    found = await store.find_dead_letters(DeadLetterQuery(after=after))
    assert refs(found) == expected[5:]
    lane_after = DeadLetterKey("a-1", "d", "", 9)  # past a-1's event heads of d: its lane
    found = await store.find_dead_letters(DeadLetterQuery(after=lane_after, limit=1))
    assert refs(found) == [("a-1", "d", "y", 2)]


async def test_the_heads_carry_their_event_and_failure(store: Store) -> None:
    await dead_everywhere(store)
    [head] = await store.find_dead_letters(DeadLetterQuery(session_prefix="b", limit=1))
    assert head.event == (await store.read("b-1", through=1))[0]
    assert head.dispatch.last_error == ERRORS["c"]
    assert head.dead_lettered and head.failure_count == 1


async def test_dead_letters_below_a_clear_are_gone_and_redriven_ones_too(store: Store) -> None:
    expected = await dead_everywhere(store)
    await store.clear("a-1")
    await store.redrive("b-1", consumer="d", index=2, action="skip")
    found = await store.find_dead_letters(DeadLetterQuery())
    kept = [r for r in expected if r[0] == "a-2" or (r[0] == "b-1" and r[2:] != ("y", 2))]
    assert refs(found) == kept


async def test_the_error_filter_folds_ascii_letters_only(store: Store) -> None:
    await append(store, "s", ev(to=["c"]))
    await fail(store, await claim_one(store, "s"), error="ÉCHEC: Disk Full", max_failures=1)
    assert len(await store.find_dead_letters(DeadLetterQuery(error="disk full"))) == 1
    assert len(await store.find_dead_letters(DeadLetterQuery(error="ÉCHEC"))) == 1
    assert await store.find_dead_letters(DeadLetterQuery(error="échec")) == []


async def test_a_head_dead_by_lapsed_leases_has_no_error_to_match(
    store: Store, clock: FakeClock
) -> None:
    await append(store, "s", ev(to=["c"]))
    await claim_one(store, "s")
    clock.advance(TTL + 1)
    lapsed = await claim_one(store, "s", max_failures=1)
    assert lapsed.dead_lettered and lapsed.dispatch.last_error is None
    assert refs(await store.find_dead_letters(DeadLetterQuery(consumer="c"))) == [
        ("s", "c", None, 1)
    ]
    assert await store.find_dead_letters(DeadLetterQuery(error="e")) == []
