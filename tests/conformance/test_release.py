"""release_claims: a holder hands its claims back, claimable at once and with no failure counted."""

from __future__ import annotations

from typing import Any

import pytest

from a2pg import AttemptRef, ClaimRef, Dispatch, ReleaseResult, Superseded, Target
from a2pg.contract import DEFAULT_LIMITS
from a2pg.ids import FakeClock
from a2pg.store import Store

from .helpers import (
    HOLDER,
    OTHER_HOLDER,
    TTL,
    MakeStore,
    append,
    assert_busy,
    at,
    claim,
    claim_one,
    complete,
    completed,
    cursor_of,
    ev,
    fail,
)
from .invalid_support import prepare, refused
from .test_wakeups import expect_wakeup


async def release(
    store: Store, *claims: AttemptRef, holder: str = HOLDER, session_id: str = "s"
) -> ReleaseResult:
    return await store.release_claims(session_id, holder=holder, claims=list(claims))


def handed_back(dispatch: Dispatch, before: Dispatch) -> None:
    """Only the claim went: attempts, failures and their error are as they were."""
    assert (dispatch.claim_holder, dispatch.claim_expires_at) == (None, None)
    assert dispatch.attempt_count == before.attempt_count
    assert dispatch.failure_count == before.failure_count
    assert dispatch.last_error == before.last_error
    assert dispatch.failed_at is None


async def test_a_live_claim_is_released_without_a_failure(store: Store) -> None:
    await append(store, "s", ev(to=["c"]))
    head = await claim_one(store, "s")
    assert await release(store, head.attempt_ref) == ReleaseResult([ClaimRef("c", None, 1)], [])
    cursor = await cursor_of(store, "s", "c", None)
    handed_back(cursor.dispatch, head.dispatch)
    assert (cursor.dispatch.failure_count, cursor.dispatch.last_error) == (0, None)
    again = await claim_one(store, "s", holder=OTHER_HOLDER)  # at once: no time passed
    assert (again.attempt, again.failure_count) == (2, 0)
    assert again.dispatch.claim_holder == OTHER_HOLDER


async def test_the_released_attempt_is_fenced_out(store: Store) -> None:
    await append(store, "s", ev(to=["c"]))
    head = await claim_one(store, "s")
    await release(store, head.attempt_ref)
    assert await complete(store, head, ev("late", id="late-1")) == Superseded()
    assert (await fail(store, head)).outcome == "superseded"
    again = await claim_one(store, "s", holder=OTHER_HOLDER)
    assert await complete(store, head, ev("late", id="late-2")) == Superseded()
    assert (await fail(store, head)).outcome == "superseded"
    assert again.dispatch == (await cursor_of(store, "s", "c", None)).dispatch
    await completed(store, again, ev("done", id="d"))
    assert [e.type for e in await store.read("s")] == ["note", "done"]


async def test_a_lapsed_claim_is_released_and_the_next_claim_counts_no_failure(
    store: Store, clock: FakeClock
) -> None:
    await append(store, "s", ev(to=["c"]))
    head = await claim_one(store, "s")
    clock.advance(TTL + 5)
    assert await release(store, head.attempt_ref) == ReleaseResult([head.ref], [])
    again = await claim_one(store, "s", holder=OTHER_HOLDER)
    assert (again.attempt, again.failure_count) == (2, 0)


async def test_without_a_release_the_lapsed_claim_counts_a_failure(
    store: Store, clock: FakeClock
) -> None:
    await append(store, "s", ev(to=["c"]))
    await claim_one(store, "s")
    clock.advance(TTL + 5)
    again = await claim_one(store, "s", holder=OTHER_HOLDER)
    assert (again.attempt, again.failure_count) == (2, 1)


async def test_earlier_failures_and_their_error_stay(store: Store) -> None:
    await append(store, "s", ev(to=["c"]))
    await fail(store, await claim_one(store, "s"), error="first try broke")
    head = await claim_one(store, "s")
    assert (head.attempt, head.failure_count) == (2, 1)
    assert await release(store, head.attempt_ref) == ReleaseResult([head.ref], [])
    handed_back((await cursor_of(store, "s", "c", None)).dispatch, head.dispatch)
    again = await claim_one(store, "s")
    assert (again.attempt, again.failure_count) == (3, 1)
    assert again.dispatch.last_error == "first try broke"


async def test_the_released_head_is_ready_from_the_release(store: Store, clock: FakeClock) -> None:
    await append(store, "s-old", ev(to=["c"]))
    head = await claim_one(store, "s-old")
    clock.advance(5)
    await append(store, "s-new", ev(to=["c"]))
    clock.advance(5)
    await release(store, head.attempt_ref, session_id="s-old")
    first = await store.claim_any(holder=OTHER_HOLDER, ttl=TTL, limit=1)
    assert [(h.session_id, h.attempt) for h in first] == [("s-new", 1)]
    second = await store.claim_any(holder=OTHER_HOLDER, ttl=TTL, limit=1)
    assert [(h.session_id, h.attempt, h.failure_count) for h in second] == [("s-old", 2, 0)]


async def test_another_holders_claim_is_left_alone(store: Store, clock: FakeClock) -> None:
    await append(store, "s", ev(to=["c"]))
    head = await claim_one(store, "s")
    assert await release(store, head.attempt_ref, holder=OTHER_HOLDER) == ReleaseResult([], [])
    assert (await cursor_of(store, "s", "c", None)).dispatch == head.dispatch
    await assert_busy(store, "s", at(clock(), TTL))


async def test_a_claim_already_released_or_failed_is_omitted(
    store: Store, clock: FakeClock
) -> None:
    await append(store, "s", ev(to=["c"]), ev(to=["d"]))
    first, second = await claim(store, "s")
    await release(store, first.attempt_ref)
    await fail(store, second, retry_after=60)
    before = await store.cursors("s")
    result = await release(store, first.attempt_ref, second.attempt_ref)
    assert result == ReleaseResult([], [])
    assert await store.cursors("s") == before
    assert [h.consumer for h in await claim(store, "s")] == ["c"]  # d still backs off


async def test_a_re_attempted_head_is_superseded(store: Store, clock: FakeClock) -> None:
    await append(store, "s", ev(to=["c"]))
    first = await claim_one(store, "s")
    clock.advance(TTL)
    second = await claim_one(store, "s", holder=OTHER_HOLDER)
    assert await release(store, first.attempt_ref) == ReleaseResult([], [first.ref])
    assert (await cursor_of(store, "s", "c", None)).dispatch == second.dispatch


async def test_a_head_that_moved_on_is_superseded(store: Store) -> None:
    await append(store, "s", ev(to=[Target("c", "x")]), ev(to=[Target("c", "x")]), ev(to=["e"]))
    lane, single = await claim(store, "s", through=3)
    await completed(store, lane)
    await completed(store, single)
    result = await release(store, lane.attempt_ref, single.attempt_ref)
    assert result == ReleaseResult([], [ClaimRef("c", "x", 1), ClaimRef("e", None, 3)])


async def test_a_cleared_head_is_superseded(store: Store) -> None:
    await append(store, "s", ev(to=["c"]))
    head = await claim_one(store, "s")
    await store.clear("s")
    assert await release(store, head.attempt_ref) == ReleaseResult([], [head.ref])


async def test_unknown_cursors_and_heads_not_reached_are_neither(store: Store) -> None:
    await append(store, "s", ev(to=[Target("c", "x")]), ev(to=[Target("c", "x")]))
    head = await claim_one(store, "s")
    ahead, nobody = AttemptRef("c", "x", 2, 1), AttemptRef("nobody", None, 1, 1)
    assert await release(store, ahead, nobody) == ReleaseResult([], [])
    assert (await cursor_of(store, "s", "c", "x")).dispatch == head.dispatch


async def test_an_unknown_session_releases_nothing(store: Store) -> None:
    result = await release(store, AttemptRef("c", None, 1, 1), session_id="nobody")
    assert result == ReleaseResult([], [])
    assert await store.sessions() == []


async def test_results_come_by_index_then_consumer(store: Store) -> None:
    await append(store, "s", ev(to=["b"]), ev(to=["b", "a"]))
    heads = await claim(store, "s")
    await completed(store, heads[0])
    result = await release(store, *[h.attempt_ref for h in reversed(heads)])
    assert result.released == [ClaimRef("a", None, 2), ClaimRef("b", None, 2)]
    assert result.superseded == [ClaimRef("b", None, 1)]


async def test_a_released_lane_head_keeps_the_lane_order(store: Store) -> None:
    await append(store, "s", *[ev("step", {"n": n}, to=[Target("c", "x")]) for n in (1, 2)])
    head = await claim_one(store, "s")
    await release(store, head.attempt_ref)
    again = await claim_one(store, "s", holder=OTHER_HOLDER)
    assert (again.index, again.attempt, again.failure_count) == (1, 2, 0)
    await completed(store, again)
    nxt = await claim_one(store, "s")
    assert (nxt.index, nxt.attempt) == (2, 1)


async def test_a_release_wakes_workers(store: Store, make_store: MakeStore) -> None:
    writer = await make_store()
    await append(writer, "s", ev(to=["c"]))
    head = await claim_one(writer, "s")

    async def trigger() -> object:
        return await release(writer, head.attempt_ref)

    await expect_wakeup(store, writer, "s", trigger)


def _bad_calls() -> dict[str, dict[str, Any]]:
    live = AttemptRef("c", None, 1, 1)  # the claim prepare() holds: a release would show
    return {
        "empty-session": {"session_id": "", "fragment": "session"},
        "nul-session": {"session_id": "s\x00", "fragment": "NUL"},
        "long-session": {
            "session_id": "s" * (DEFAULT_LIMITS.max_session_id_length + 1),
            "fragment": "Limits.max_session_id_length",
        },
        "empty-holder": {"holder": "", "fragment": "holder"},
        "not-an-attempt-ref": {"claims": [live, ClaimRef("c", None, 1)]},
        "zero-index": {"claims": [live, AttemptRef("c", None, 0, 1)], "fragment": "index"},
        "zero-attempt": {"claims": [live, AttemptRef("c", None, 1, 0)], "fragment": "attempt"},
        "claims-not-a-sequence": {"claims": "c"},
    }


BAD_CALLS = _bad_calls()


@pytest.mark.parametrize("name", list(BAD_CALLS))
async def test_bad_inputs_are_refused_before_anything_is_released(store: Store, name: str) -> None:
    before = await prepare(store)
    args: dict[str, Any] = {
        "session_id": "s",
        "holder": HOLDER,
        "claims": [AttemptRef("c", None, 1, 1)],
        "fragment": None,
    }
    args.update(BAD_CALLS[name])
    fragments = [args["fragment"]] if args["fragment"] else []

    async def call() -> ReleaseResult:
        return await store.release_claims(
            args["session_id"], holder=args["holder"], claims=args["claims"]
        )

    await refused(store, before, call, *fragments)
    assert (await cursor_of(store, "s", "c", None)).dispatch.claim_holder == HOLDER
