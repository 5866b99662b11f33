"""The attempt fence: only the current attempt of a live head completes, fails or appends."""

from __future__ import annotations

import pytest

from a2pg import A2Error, AttemptRef, Completed, FailResult, Superseded, Target
from a2pg.ids import FakeClock
from a2pg.store import Store

from .helpers import (
    OTHER_HOLDER,
    TTL,
    append,
    assert_code,
    assert_settled,
    claim,
    claim_one,
    complete,
    completed,
    ev,
    fail,
    fingerprint,
)


async def test_a_stale_attempt_is_superseded_after_a_re_claim(
    store: Store, clock: FakeClock
) -> None:
    await append(store, "s", ev(to=["c"]))
    first = await claim_one(store, "s")
    clock.advance(TTL)
    second = await claim_one(store, "s", holder=OTHER_HOLDER)
    before = await fingerprint(store, "s")
    assert await complete(store, first, ev("r", id="r")) == Superseded()
    assert await fingerprint(store, "s") == before
    assert [e.id for e in await completed(store, second, ev("r", id="r"))] == ["r"]


async def test_a_lapsed_claim_nobody_re_claimed_still_completes(
    store: Store, clock: FakeClock
) -> None:
    await append(store, "s", ev(to=["c"]))
    head = await claim_one(store, "s")
    clock.advance(TTL * 2)
    assert await complete(store, head) == Completed([])
    await assert_settled(store, "s")


async def test_re_claiming_after_a_dead_worker_counts_a_failure(
    store: Store, clock: FakeClock
) -> None:
    await append(store, "s", ev(to=["c"]))
    await claim_one(store, "s")
    clock.advance(TTL)
    again = await claim_one(store, "s", holder=OTHER_HOLDER, max_failures=5)
    assert (again.attempt, again.failure_count, again.dead_lettered) == (2, 1, False)
    assert again.dispatch.claim_holder == OTHER_HOLDER


async def test_a_failed_attempt_re_claimed_counts_no_extra_failure(store: Store) -> None:
    await append(store, "s", ev(to=["c"]))
    head = await claim_one(store, "s")
    await fail(store, head)
    again = await claim_one(store, "s")
    assert (again.attempt, again.failure_count) == (2, 1)


async def test_dead_lettering_through_lapsed_claims(store: Store, clock: FakeClock) -> None:
    await append(store, "s", ev(to=["c"]))
    await claim_one(store, "s", max_failures=2)
    clock.advance(TTL)
    second = await claim_one(store, "s", max_failures=2)
    assert (second.attempt, second.failure_count, second.dead_lettered) == (2, 1, False)
    clock.advance(TTL)
    dead = await claim_one(store, "s", max_failures=2)
    assert dead.dead_lettered
    assert dead.dispatch.failed_at == clock()
    assert (dead.attempt, dead.failure_count) == (3, 2)
    assert (dead.dispatch.claim_holder, dead.dispatch.claim_expires_at) == (None, None)
    assert [h.ref for h in await store.dead_letters("s")] == [dead.ref]
    await assert_settled(store, "s")


async def test_without_max_failures_lapsed_claims_never_dead_letter(
    store: Store, clock: FakeClock
) -> None:
    await append(store, "s", ev(to=["c"]))
    for _ in range(4):
        await claim_one(store, "s")
        clock.advance(TTL)
    head = await claim_one(store, "s")
    assert (head.attempt, head.failure_count, head.dead_lettered) == (5, 4, False)


async def test_a_dead_lettering_claim_returns_beside_live_ones(
    store: Store, clock: FakeClock
) -> None:
    await append(store, "s", ev(to=["c"]))
    await claim_one(store, "s")
    clock.advance(TTL)
    await append(store, "s", ev(to=["c"]))
    heads = await claim(store, "s", max_failures=1)
    assert [(h.index, h.dead_lettered) for h in heads] == [(1, True), (2, False)]


async def test_the_dead_worker_cannot_complete_a_dead_lettered_head(
    store: Store, clock: FakeClock
) -> None:
    await append(store, "s", ev(to=["c"]))
    first = await claim_one(store, "s")
    clock.advance(TTL)
    await claim_one(store, "s", max_failures=1)
    assert await complete(store, first) == Superseded()
    [letter] = await store.dead_letters("s")
    assert await complete(store, letter) == Superseded()


async def test_a_stale_attempt_cannot_fail(store: Store, clock: FakeClock) -> None:
    await append(store, "s", ev(to=["c"]))
    first = await claim_one(store, "s")
    clock.advance(TTL)
    await claim_one(store, "s")
    result = await fail(store, first)
    assert result == FailResult("superseded", 1)
    [cursor] = await store.cursors("s")
    assert cursor.dispatch.claim_holder is not None


async def test_an_unclaimed_head_cannot_complete_or_fail(store: Store) -> None:
    await append(store, "s", ev(to=["c"]))
    completion = await store.complete_attempt(
        "s", consumer="c", lane=None, index=1, attempt=1, events=[]
    )
    assert completion == Superseded()
    failed = await store.fail_attempt(
        "s", consumer="c", lane=None, index=1, attempt=1, error="e", max_failures=3
    )
    assert failed.outcome == "superseded"
    [cursor] = await store.cursors("s")
    assert (cursor.head, cursor.dispatch.attempt_count, cursor.dispatch.failure_count) == (1, 0, 0)


async def test_a_failed_attempt_cannot_complete(store: Store) -> None:
    await append(store, "s", ev(to=["c"]))
    head = await claim_one(store, "s")
    await fail(store, head)
    assert await complete(store, head) == Superseded()


async def test_a_cursor_of_another_consumer_or_lane_is_superseded(store: Store) -> None:
    await append(store, "s", ev(to=[Target("c", "x")]))
    head = await claim_one(store, "s")
    for consumer, lane in [("c", None), ("c", "y"), ("d", "x")]:
        result = await store.complete_attempt(
            "s", consumer=consumer, lane=lane, index=1, attempt=head.attempt, events=[]
        )
        assert result == Superseded()
    assert await complete(store, head) == Completed([])


@pytest.mark.parametrize("operation", ["complete", "fail"])
async def test_an_index_without_an_event_is_invalid(store: Store, operation: str) -> None:
    await append(store, "s", ev(to=["c"]))
    before = await fingerprint(store, "s")
    with pytest.raises(A2Error) as error:
        if operation == "complete":
            await store.complete_attempt(
                "s", consumer="c", lane=None, index=7, attempt=1, events=[]
            )
        else:
            await store.fail_attempt(
                "s", consumer="c", lane=None, index=7, attempt=1, error="e", max_failures=3
            )
    assert_code(error, "INVALID_ARGUMENT", "7")
    assert await fingerprint(store, "s") == before


async def test_a_live_cause_appends(store: Store) -> None:
    await append(store, "s", ev(to=[Target("c", "x")]))
    head = await claim_one(store, "s")
    [child] = await append(store, "s", ev("child", cause=head.attempt_ref))
    assert (child.index, child.cause) == (2, AttemptRef("c", "x", 1, 1))


async def test_a_stale_cause_is_refused(store: Store, clock: FakeClock) -> None:
    await append(store, "s", ev(to=["c"]))
    first = await claim_one(store, "s")
    clock.advance(TTL)
    await claim_one(store, "s")
    await _refused(store, first.attempt_ref)


async def test_a_cause_of_a_finished_head_is_refused(store: Store) -> None:
    await append(store, "s", ev(to=["c"]))
    head = await claim_one(store, "s")
    await completed(store, head)
    await _refused(store, head.attempt_ref)


async def test_a_cause_of_a_dead_lettered_head_is_refused(store: Store) -> None:
    await append(store, "s", ev(to=["c"]))
    head = await claim_one(store, "s")
    await fail(store, head, max_failures=1)
    await _refused(store, head.attempt_ref)


async def test_a_cause_below_the_clear_is_refused(store: Store) -> None:
    await append(store, "s", ev(to=["c"]))
    head = await claim_one(store, "s")
    await store.clear("s")
    await _refused(store, head.attempt_ref)


@pytest.mark.parametrize(
    "cause",
    [AttemptRef("c", None, 1, 2), AttemptRef("d", None, 1, 1), AttemptRef("c", "x", 1, 1)],
    ids=["future-attempt", "other-consumer", "other-lane"],
)
async def test_a_cause_naming_no_live_attempt_is_refused(store: Store, cause: AttemptRef) -> None:
    await append(store, "s", ev(to=["c"]))
    await claim_one(store, "s")
    await _refused(store, cause)


async def test_a_refused_cause_fails_the_whole_batch(store: Store) -> None:
    await append(store, "s", ev(to=["c"]))
    head = await claim_one(store, "s")
    stale = AttemptRef("c", None, 1, head.attempt + 1)
    before = await fingerprint(store, "s")
    with pytest.raises(A2Error) as error:
        await store.append("s", [ev("ok", cause=head.attempt_ref), ev("bad", cause=stale)])
    assert_code(error, "SUPERSEDED_ATTEMPT")
    assert await fingerprint(store, "s") == before


async def test_a_clear_with_a_live_cause_clears(store: Store) -> None:
    await append(store, "s", ev(to=["c"]))
    head = await claim_one(store, "s")
    result = await store.clear("s", cause=head.attempt_ref)
    assert (result.cleared, result.clear_index) == (True, 2)


async def test_a_clear_with_a_stale_cause_is_refused(store: Store, clock: FakeClock) -> None:
    await append(store, "s", ev(to=["c"]))
    first = await claim_one(store, "s")
    clock.advance(TTL)
    await claim_one(store, "s")
    before = await fingerprint(store, "s")
    with pytest.raises(A2Error) as error:
        await store.clear("s", cause=first.attempt_ref)
    assert_code(error, "SUPERSEDED_ATTEMPT")
    assert await fingerprint(store, "s") == before


async def _refused(store: Store, cause: AttemptRef) -> None:
    before = await fingerprint(store, "s")
    with pytest.raises(A2Error) as error:
        await store.append("s", [ev("child", cause=cause)])
    assert_code(error, "SUPERSEDED_ATTEMPT")
    assert await fingerprint(store, "s") == before
