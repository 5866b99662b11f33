"""renew_claims: live claims extend; moved, cleared or re-attempted ones are superseded."""

from __future__ import annotations

from a2pg import AttemptRef, ClaimRef, RenewResult, Target
from a2pg.ids import FakeClock
from a2pg.store import Store

from .helpers import (
    HOLDER,
    OTHER_HOLDER,
    TTL,
    append,
    assert_busy,
    at,
    claim,
    claim_one,
    completed,
    ev,
    fail,
)


async def renew(
    store: Store, *claims: AttemptRef, holder: str = HOLDER, ttl: float = TTL
) -> RenewResult:
    return await store.renew_claims("s", holder=holder, claims=list(claims), ttl=ttl)


async def test_renewal_extends_a_live_claim(store: Store, clock: FakeClock) -> None:
    await append(store, "s", ev(to=["c"]))
    head = await claim_one(store, "s")
    clock.advance(20)
    result = await renew(store, head.attempt_ref, ttl=60)
    assert result == RenewResult(renewed=[ClaimRef("c", None, 1)], superseded=[])
    clock.advance(30)
    await assert_busy(store, "s", at(clock(), 30))
    [cursor] = await store.cursors("s")
    assert cursor.dispatch.claim_expires_at == at(clock(), 30)
    assert cursor.dispatch.attempt_count == 1


async def test_another_holder_cannot_renew(store: Store) -> None:
    await append(store, "s", ev(to=["c"]))
    head = await claim_one(store, "s")
    assert await renew(store, head.attempt_ref, holder=OTHER_HOLDER) == RenewResult([], [])
    [cursor] = await store.cursors("s")
    assert cursor.dispatch == head.dispatch


async def test_a_lapsed_claim_is_not_renewed(store: Store, clock: FakeClock) -> None:
    await append(store, "s", ev(to=["c"]))
    head = await claim_one(store, "s")
    clock.advance(TTL)
    assert await renew(store, head.attempt_ref) == RenewResult([], [])
    again = await claim_one(store, "s")
    assert again.attempt == 2


async def test_a_completed_head_is_superseded(store: Store) -> None:
    await append(store, "s", ev(to=[Target("c", "x")]), ev(to=[Target("c", "x")]))
    head = await claim_one(store, "s")
    await completed(store, head)
    result = await renew(store, head.attempt_ref)
    assert result == RenewResult([], [ClaimRef("c", "x", 1)])


async def test_a_re_attempted_head_is_superseded(store: Store, clock: FakeClock) -> None:
    await append(store, "s", ev(to=["c"]))
    first = await claim_one(store, "s")
    clock.advance(TTL)
    second = await claim_one(store, "s", holder=OTHER_HOLDER)
    assert await renew(store, first.attempt_ref) == RenewResult([], [first.ref])
    assert await renew(store, second.attempt_ref, holder=OTHER_HOLDER) == RenewResult(
        [second.ref], []
    )


async def test_a_head_not_yet_reached_is_neither(store: Store) -> None:
    await append(store, "s", ev(to=[Target("c", "x")]), ev(to=[Target("c", "x")]))
    head = await claim_one(store, "s")
    ahead = AttemptRef("c", "x", 2, 1)
    assert await renew(store, head.attempt_ref, ahead) == RenewResult([head.ref], [])


async def test_a_cleared_head_is_superseded(store: Store) -> None:
    await append(store, "s", ev(to=["c"]))
    head = await claim_one(store, "s")
    await store.clear("s")
    assert await renew(store, head.attempt_ref) == RenewResult([], [head.ref])


async def test_a_failed_attempt_is_not_renewed(store: Store) -> None:
    await append(store, "s", ev(to=["c"]))
    head = await claim_one(store, "s")
    await fail(store, head)
    assert (await renew(store, head.attempt_ref)).renewed == []


async def test_unknown_cursors_are_neither(store: Store) -> None:
    await append(store, "s", ev(to=["c"]))
    await claim_one(store, "s")
    assert await renew(store, AttemptRef("nobody", None, 1, 1)) == RenewResult([], [])


async def test_results_come_by_index_then_consumer(store: Store, clock: FakeClock) -> None:
    await append(store, "s", ev(to=["b"]), ev(to=["b", "a"]))
    heads = await claim(store, "s")
    await completed(store, heads[0])
    refs_in = [h.attempt_ref for h in reversed(heads)]
    result = await renew(store, *refs_in)
    assert result.renewed == [ClaimRef("a", None, 2), ClaimRef("b", None, 2)]
    assert result.superseded == [ClaimRef("b", None, 1)]


async def test_renewals_in_an_unknown_session_are_neither(store: Store) -> None:
    result = await store.renew_claims(
        "nobody", holder=HOLDER, claims=[AttemptRef("c", None, 1, 1)], ttl=TTL
    )
    assert result == RenewResult([], [])
