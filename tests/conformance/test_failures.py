"""fail_attempt: failure counts, backoff through retry_after, dead letters, idempotent repeats."""

from __future__ import annotations

from a2pg import Dispatch, FailResult
from a2pg.contract import DEFAULT_LIMITS
from a2pg.ids import FakeClock
from a2pg.store import Store

from .helpers import (
    TTL,
    append,
    assert_busy,
    assert_settled,
    at,
    claim,
    claim_one,
    completed,
    ev,
    fail,
)


async def test_a_failure_is_recorded_and_releases_the_claim(store: Store, clock: FakeClock) -> None:
    await append(store, "s", ev(to=["c"]))
    head = await claim_one(store, "s")
    clock.advance(2)
    assert await fail(store, head, error="kaput") == FailResult("failed", 1)
    [cursor] = await store.cursors("s")
    assert cursor.dispatch == Dispatch(
        attempt_count=1,
        first_claimed_at=head.dispatch.first_claimed_at,
        last_claimed_at=head.dispatch.last_claimed_at,
        last_ready_at=head.dispatch.last_ready_at,
        failure_count=1,
        last_failed_at=clock(),
        last_failed_attempt=1,
        last_error="kaput",
    )


async def test_a_failed_head_is_claimable_at_once(store: Store) -> None:
    await append(store, "s", ev(to=["c"]))
    await fail(store, await claim_one(store, "s"))
    again = await claim_one(store, "s")
    assert (again.attempt, again.failure_count, again.dispatch.last_error) == (2, 1, "boom")


async def test_retry_after_backs_off_the_head(store: Store, clock: FakeClock) -> None:
    await append(store, "s", ev(to=["c"]))
    head = await claim_one(store, "s")
    assert await fail(store, head, retry_after=15) == FailResult("failed", 1)
    [cursor] = await store.cursors("s")
    assert cursor.dispatch.claim_expires_at == at(clock(), 15)
    assert cursor.dispatch.claim_holder is None
    await assert_busy(store, "s", at(clock(), 15))
    clock.advance(14.5)
    await assert_busy(store, "s", at(clock(), 0.5))
    clock.advance(0.5)
    again = await claim_one(store, "s")
    assert (again.attempt, again.failure_count) == (2, 1)


async def test_a_backoff_end_is_no_lapsed_claim(store: Store, clock: FakeClock) -> None:
    await append(store, "s", ev(to=["c"]))
    await fail(store, await claim_one(store, "s"), retry_after=5, max_failures=2)
    clock.advance(5)
    again = await claim_one(store, "s", max_failures=2)
    assert (again.dead_lettered, again.failure_count) == (False, 1)


async def test_failures_accumulate_to_a_dead_letter(store: Store, clock: FakeClock) -> None:
    await append(store, "s", ev(to=["c"]))
    assert await fail(store, await claim_one(store, "s"), max_failures=2) == FailResult("failed", 1)
    clock.advance(1)
    head = await claim_one(store, "s")
    assert await fail(store, head, max_failures=2, retry_after=30) == FailResult("dead_lettered", 2)
    [cursor] = await store.cursors("s")
    assert cursor.dispatch.failed_at == clock()
    assert cursor.dispatch.claim_expires_at is None
    assert cursor.dead_lettered
    [letter] = await store.dead_letters("s")
    assert (letter.ref, letter.failure_count, letter.dispatch.last_error) == (head.ref, 2, "boom")
    await assert_settled(store, "s")


async def test_a_lapsed_claim_and_a_failure_count_together(store: Store, clock: FakeClock) -> None:
    await append(store, "s", ev(to=["c"]))
    await claim_one(store, "s")
    clock.advance(TTL)
    head = await claim_one(store, "s", max_failures=2)
    assert await fail(store, head, max_failures=2) == FailResult("dead_lettered", 2)


async def test_repeating_a_failure_is_idempotent(store: Store, clock: FakeClock) -> None:
    await append(store, "s", ev(to=["c"]))
    head = await claim_one(store, "s")
    assert await fail(store, head) == FailResult("failed", 1)
    listed = await store.cursors("s")
    clock.advance(1)
    assert await fail(store, head) == FailResult("failed", 1)
    assert await store.cursors("s") == listed


async def test_repeating_a_dead_lettering_failure_is_idempotent(store: Store) -> None:
    await append(store, "s", ev(to=["c"]))
    head = await claim_one(store, "s")
    assert await fail(store, head, max_failures=1) == FailResult("dead_lettered", 1)
    listed = await store.dead_letters("s")
    assert await fail(store, head, max_failures=1) == FailResult("dead_lettered", 1)
    assert await store.dead_letters("s") == listed


async def test_a_finished_head_cannot_fail(store: Store) -> None:
    await append(store, "s", ev(to=["c"]))
    head = await claim_one(store, "s")
    await completed(store, head)
    assert await fail(store, head) == FailResult("superseded", 0)


async def test_a_cleared_head_cannot_fail(store: Store) -> None:
    await append(store, "s", ev(to=["c"]))
    head = await claim_one(store, "s")
    await store.clear("s")
    assert await fail(store, head) == FailResult("superseded", 0)


async def test_long_error_text_is_cut_to_the_limit(store: Store) -> None:
    await append(store, "s", ev(to=["c"]))
    head = await claim_one(store, "s")
    limit = DEFAULT_LIMITS.max_error_length
    await fail(store, head, error="x" * (limit + 100))
    [cursor] = await store.cursors("s")
    assert cursor.dispatch.last_error == "x" * limit


async def test_nul_in_error_text_is_escaped(store: Store) -> None:
    await append(store, "s", ev(to=["c"]))
    head = await claim_one(store, "s")
    assert await fail(store, head, error="bad\x00byte") == FailResult("failed", 1)
    [cursor] = await store.cursors("s")
    assert cursor.dispatch.last_error == "bad\\u0000byte"


async def test_a_lone_surrogate_in_error_text_is_escaped(store: Store) -> None:
    await append(store, "s", ev(to=["c"]))
    head = await claim_one(store, "s")
    assert await fail(store, head, error="bad\ud800text") == FailResult("failed", 1)
    [cursor] = await store.cursors("s")
    assert cursor.dispatch.last_error == "bad\\ud800text"


async def test_a_dead_letter_leaves_other_work_claimable(store: Store) -> None:
    await append(store, "s", ev(to=["c", "d"]))
    c, d = await claim(store, "s")
    assert await fail(store, c, max_failures=1) == FailResult("dead_lettered", 1)
    assert await completed(store, d) == []
    [cursor] = await store.cursors("s")
    assert (cursor.consumer, cursor.dead_lettered) == ("c", True)


async def test_has_pending_ignores_dead_letters(store: Store) -> None:
    await append(store, "s", ev(to=["c"]))
    await fail(store, await claim_one(store, "s"), max_failures=1)
    assert (await store.append("s", [])).has_pending is False
    await append(store, "s", ev(to=["d"]))
    assert (await store.append("s", [])).has_pending is True
