"""Fidelity to the seeds (the JavaScript stores in ``shared/seeds``): where a2pg was found
to answer otherwise than they do (issue 18, item 8), one test each, on every backend.

Seed 000 is the SQLite store, seed 001 the in-memory one. Each test's docstring says
what the seeds do; where the two disagree it says which one a2pg follows, and
``docs/differences.md`` says so too.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from a2pg import A2Error, Completed, Completion, Consumer, FailResult, Head, Superseded, Target
from a2pg.ids import FakeClock
from a2pg.store import Store

from .helpers import (
    HOLDER,
    TTL,
    append,
    assert_code,
    claim,
    claim_one,
    complete,
    completed,
    ev,
    fail,
    fingerprint,
    log_consumer,
)

# -- fail_attempt after a dead-lettering claim (F4) -------------------------------------


async def test_failing_the_attempt_a_dead_lettering_claim_made_says_dead_lettered(
    store: Store, clock: FakeClock
) -> None:
    """Seed 000's ``failAttempt``: a claim that finds a lapsed lease at ``max_failures``
    dead-letters the head at a new attempt number, and failing that attempt answers
    ``dead_lettered`` with the count, recording nothing (seed 001 says ``superseded``).
    The lapsed attempt before it stays superseded."""
    await append(store, "s", ev(to=["c"]))
    lapsed = await claim_one(store, "s")
    clock.advance(TTL)
    dead = await claim_one(store, "s", max_failures=1)
    assert (dead.dead_lettered, dead.attempt, dead.failure_count) == (True, 2, 1)
    listed = await store.dead_letters("s")
    clock.advance(1)
    assert await fail(store, dead, max_failures=1) == FailResult("dead_lettered", 1)
    assert await fail(store, dead, max_failures=5) == FailResult("dead_lettered", 1)
    assert await fail(store, lapsed, max_failures=1) == FailResult("superseded", 1)
    assert await store.dead_letters("s") == listed


async def test_a_redriven_head_no_attempt_holds_cannot_fail(store: Store, clock: FakeClock) -> None:
    """Seed 000: once the dead head is retried, the dead-lettering claim's attempt holds no
    claim and never failed: ``superseded``, as for any released attempt."""
    await append(store, "s", ev(to=["c"]))
    await claim_one(store, "s")
    clock.advance(TTL)
    dead = await claim_one(store, "s", max_failures=1)
    await store.redrive("s", consumer="c", index=1, action="retry")
    assert await fail(store, dead) == FailResult("superseded", 0)


# -- complete_attempt: the order of its checks (F5, D6) ----------------------------------


async def test_a_completion_naming_no_cursor_is_superseded_whatever_it_returns(
    store: Store,
) -> None:
    """Both seeds' ``completeAttempt`` look the cursor up first: a completion of a cursor
    that does not exist is ``superseded`` before its returned ids are looked at, so the
    same id twice is no error there."""
    await append(store, "s", ev(to=["c"]))
    before = await fingerprint(store, "s")
    twice = [ev("x", id="twice"), ev("y", id="twice")]
    for consumer, lane in [("d", None), ("c", "x")]:
        result = await store.complete_attempt(
            "s", consumer=consumer, lane=lane, index=1, attempt=1, events=twice
        )
        assert result == Superseded()
    assert await fingerprint(store, "s") == before


async def test_a_stale_completion_of_an_existing_cursor_with_an_id_twice_is_refused(
    store: Store, clock: FakeClock
) -> None:
    """Seed 000 checks the returned ids once the cursor is found, before it judges the
    attempt: the same id twice is ``PARTIAL_DUPLICATE_BATCH`` even from a stale attempt
    (seed 001 answers ``superseded`` there). Nothing is written."""
    await append(store, "s", ev(to=["c"]))
    stale = await claim_one(store, "s")
    clock.advance(TTL)
    await claim_one(store, "s")
    before = await fingerprint(store, "s")
    with pytest.raises(A2Error) as error:
        await complete(store, stale, ev("x", id="twice"), ev("y", id="twice"))
    assert_code(error, "PARTIAL_DUPLICATE_BATCH", "more than once")
    assert await fingerprint(store, "s") == before


_OLD = log_consumer("f", types=["a"])
_NEW = log_consumer("f", types=["a", "b"])


async def _log_behind(store: Store) -> dict[str, Head]:
    """Session "s": log consumer "f" (of type "a") at its head 1, event 2 ("b") for "c",
    event 3 ("a"); both heads claimed. Returns the heads by consumer."""
    await append(store, "s", ev("a"), ev("b", to=["c"]), ev("a"), consumers=[_OLD])
    return {h.consumer: h for h in await claim(store, "s", consumers=[_OLD, Consumer("c")])}


async def _log_cursor_moves_to(store: Store, heads: dict[str, Head]) -> int | None:
    """Completes "f"'s head naming no consumers (no refresh): where it goes shows the types
    its cursor holds (2 when it takes "b", 3 when it still takes only "a")."""
    await completed(store, heads["f"], consumers=[])
    [cursor] = [c for c in await store.cursors("s") if c.consumer == "f"]
    return cursor.head


async def test_a_superseded_completion_records_the_types_it_declares(
    store: Store, clock: FakeClock
) -> None:
    """Both seeds call ``refreshLogTypes`` once the completion's cursor is found, before
    judging the attempt: a superseded completion of an existing cursor still records
    the log types its ``consumers`` declare."""
    heads = await _log_behind(store)
    c = heads["c"]
    result = await store.complete_attempt(
        "s", consumer="c", lane=None, index=2, attempt=c.attempt + 1, consumers=[_NEW]
    )
    assert result == Superseded()
    assert await _log_cursor_moves_to(store, heads) == 2


async def test_a_replayed_completion_records_the_types_it_declares(store: Store) -> None:
    """Both seeds: a retry of a committed completion (its cursor exists, idle) refreshes
    the declared log types before it replays."""
    heads = await _log_behind(store)
    c = heads["c"]
    await completed(store, c, ev("r", id="r1"), consumers=[])
    again = await complete(store, c, ev("r", id="r1"), consumers=[_NEW])
    assert isinstance(again, Completed) and [e.id for e in again.events] == ["r1"]
    assert await _log_cursor_moves_to(store, heads) == 2


async def test_a_completion_naming_no_cursor_records_no_types(store: Store) -> None:
    """Both seeds answer a completion of a cursor that does not exist before they refresh
    types: its declared types are not recorded."""
    heads = await _log_behind(store)
    result = await store.complete_attempt(
        "s", consumer="nobody", lane=None, index=2, attempt=1, consumers=[_NEW]
    )
    assert result == Superseded()
    assert await _log_cursor_moves_to(store, heads) == 3


async def test_a_batch_orders_a_superseded_completions_types_after_earlier_moves(
    store: Store,
) -> None:
    """``complete_attempts`` judges in order: the log cursor's completion moves it by the
    types it had; the types a later, superseded completion declares come after."""
    heads = await _log_behind(store)
    f, c = heads["f"], heads["c"]
    batch = [
        Completion("s", "f", "log", 1, f.attempt, (), []),
        Completion("s", "c", None, 2, c.attempt + 1, (), [_NEW]),
    ]
    assert await store.complete_attempts(batch) == [Completed([]), Superseded()]
    [cursor] = [cur for cur in await store.cursors("s") if cur.consumer == "f"]
    assert (cursor.position, cursor.head) == (1, 3)


async def test_a_cursor_an_earlier_completion_of_the_batch_made_is_found(store: Store) -> None:
    """``complete_attempts`` judges each completion after the ones before it: a cursor the
    first one's returned event made exists for the second, which is judged on it (the same
    id twice refused) rather than superseded as naming no cursor; nothing is written."""
    await append(store, "s", ev(to=["c"]))
    head = await claim_one(store, "s")
    before = await fingerprint(store, "s")
    batch = [
        Completion("s", "c", None, 1, head.attempt, [ev("r", id="r1", to=["d"])], []),
        Completion("s", "d", None, 2, 1, [ev("x", id="twice"), ev("y", id="twice")], []),
    ]
    with pytest.raises(A2Error) as error:
        await store.complete_attempts(batch)
    assert_code(error, "PARTIAL_DUPLICATE_BATCH", "more than once")
    assert await fingerprint(store, "s") == before


# -- a log wake over a targeted lane (F6) ------------------------------------------------


async def test_an_append_waking_a_log_consumer_over_its_targeted_lane_is_refused(
    store: Store,
) -> None:
    """The contract: a consumer is either targeted or a log consumer, never both. A write
    that would wake "c" as a log consumer on lane "log", where "c" has a targeted lane
    cursor, is ``INVALID_ARGUMENT`` and writes nothing (the seeds turned the lane cursor
    into a log cursor's head). A batch "c" takes nothing of wakes nothing: no error."""
    await append(store, "s", ev(to=[Target("c", "log")]))
    before = await fingerprint(store, "s")
    for events in ([ev("x")], [ev("x", id="given")], [ev("y", to=["d"]), ev("x")]):
        with pytest.raises(A2Error) as error:
            await store.append("s", events, consumers=[log_consumer("c")])
        assert_code(error, "INVALID_ARGUMENT", "'c'", "'log'")
        assert await fingerprint(store, "s") == before
    [other] = await append(store, "s", ev("y"), consumers=[log_consumer("c", types=["x"])])
    assert other.index == 2


async def test_a_completion_waking_a_log_consumer_over_its_targeted_lane_is_refused(
    store: Store,
) -> None:
    """The same refusal for the events a completion returns, alone or in a batch: nothing
    of the batch is written, and the attempt still completes without that wake."""
    await append(store, "s", ev(to=[Target("c", "log")]), ev(to=["d"]), ev(to=["e"]))
    served = [Consumer("d"), Consumer("e")]
    heads = {h.consumer: h for h in await claim(store, "s", consumers=served)}
    d, e = heads["d"], heads["e"]
    before = await fingerprint(store, "s")
    with pytest.raises(A2Error) as error:
        await complete(store, d, ev("x", id="r1"), consumers=[log_consumer("c")])
    assert_code(error, "INVALID_ARGUMENT", "'c'", "'log'")
    batch = [
        Completion("s", "e", None, 3, e.attempt, (), []),
        Completion("s", "d", None, 2, d.attempt, [ev("x", id="r1")], [log_consumer("c")]),
    ]
    with pytest.raises(A2Error) as error:
        await store.complete_attempts(batch)
    assert_code(error, "INVALID_ARGUMENT", "'c'", "'log'")
    assert await fingerprint(store, "s") == before
    assert [r.index for r in await completed(store, d, ev("x", id="r1"), consumers=[])] == [4]


# -- departures kept on purpose (docs/differences.md) -----------------------------------


async def test_times_keep_their_microseconds(store: Store, clock: FakeClock) -> None:
    """The seeds kept times in integer milliseconds; every a2pg backend keeps the
    microseconds of its clock (Python's datetime, PostgreSQL's timestamptz)."""
    clock.set(datetime(2026, 1, 1, 0, 0, 0, 123_456, tzinfo=UTC))
    [event] = await append(store, "s", ev(to=["c"]))
    assert event.created_at == clock()
    assert (await store.read("s"))[0].created_at == clock()
    head = await claim_one(store, "s")
    assert head.dispatch.claim_expires_at == clock() + timedelta(seconds=TTL)
    clock.advance(0.000_001)
    assert await fail(store, head) == FailResult("failed", 1)
    [cursor] = await store.cursors("s")
    assert cursor.dispatch.last_failed_at == datetime(2026, 1, 1, 0, 0, 0, 123_457, tzinfo=UTC)


@pytest.mark.parametrize("operation", ["complete", "fail"])
async def test_an_index_past_the_head_is_invalid_even_where_a_lane_cursor_is(
    store: Store, operation: str
) -> None:
    """Both seeds answered an attempt at an index with no event ``superseded`` when a
    cursor was found under its key (a lane's is one per lane), and threw a ``TypeError``
    only when none was: a2pg says ``INVALID_ARGUMENT`` for any index past the head."""
    await append(store, "s", ev(to=[Target("c", "x")]))
    await claim_one(store, "s")
    before = await fingerprint(store, "s")
    with pytest.raises(A2Error) as error:
        if operation == "complete":
            await store.complete_attempt("s", consumer="c", lane="x", index=7, attempt=1)
        else:
            await store.fail_attempt(
                "s", consumer="c", lane="x", index=7, attempt=1, error="e", max_failures=3
            )
    assert_code(error, "INVALID_ARGUMENT", "7")
    assert await fingerprint(store, "s") == before


async def test_heads_of_one_consumer_at_one_index_come_by_lane(store: Store) -> None:
    """The seeds ordered heads by index, then consumer, and left two lanes of one consumer
    at one index in no set order: a2pg orders them by lane, the event cursor first, in
    claims, renewals and dead letters alike."""
    await append(store, "s", ev(to=[Target("c", "y"), Target("c"), Target("c", "x")]))
    heads = await claim(store, "s")
    assert [h.lane for h in heads] == [None, "x", "y"]
    refs_back = [h.attempt_ref for h in reversed(heads)]
    renewed = await store.renew_claims("s", holder=HOLDER, claims=refs_back, ttl=TTL)
    assert [ref.lane for ref in renewed.renewed] == [None, "x", "y"]
    for head in heads[::-1]:
        await fail(store, head, max_failures=1)
    assert [h.lane for h in await store.dead_letters("s")] == [None, "x", "y"]
