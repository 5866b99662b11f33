"""complete_and_claim: a worker's cycle (its finished attempts, then its next claim) in
one atomic call, answering exactly what complete_attempts then claim_any would."""

from __future__ import annotations

import pytest

from a2pg import (
    A2Error,
    Completed,
    CompletedAndClaimed,
    Completion,
    Consumer,
    Superseded,
    Target,
)
from a2pg.store import Store

from .helpers import (
    HOLDER,
    MAX_FAILURES,
    TTL,
    append,
    assert_code,
    claim_one,
    completion,
    ev,
    fingerprint,
    refs,
    woken_by,
)


async def cycle(
    store: Store, *completions: Completion, limit: int = 10, serving: str | None = None
) -> CompletedAndClaimed:
    return await store.complete_and_claim(
        list(completions),
        holder=HOLDER,
        ttl=TTL,
        consumers=None if serving is None else [Consumer(serving)],
        limit=limit,
        max_failures=MAX_FAILURES,
    )


async def test_it_completes_then_claims_what_the_completions_made_ready(store: Store) -> None:
    await append(store, "s", ev(to=[Target("c", "x")]), ev(to=[Target("c", "x")]))
    first = await claim_one(store, "s")
    result = await cycle(store, completion(first, ev("reply", id="r1", to=["d"])))
    [outcome] = result.completed
    assert isinstance(outcome, Completed)
    assert [(e.type, e.index) for e in outcome.events] == [("reply", 3)]
    # The lane's next event and the returned event's head, claimed in the same call.
    assert sorted(refs(result.heads)) == [("s", "c", "x", 2), ("s", "d", None, 3)]
    assert all(h.attempt == 1 for h in result.heads)


async def test_without_completions_it_is_claim_any(store: Store) -> None:
    await append(store, "a", ev(to=["c"]))
    await append(store, "b", ev(to=["c"]))
    result = await cycle(store, limit=1)
    assert result.completed == []
    assert refs(result.heads) == [("a", "c", None, 1)]
    again = await cycle(store)
    assert refs(again.heads) == [("b", "c", None, 1)]


async def test_a_superseded_completion_is_answered_and_the_claim_still_runs(store: Store) -> None:
    await append(store, "s", ev(to=["c"]))
    await append(store, "t", ev(to=["c"]))
    head = await claim_one(store, "s")
    result = await cycle(store, completion(head, attempt=head.attempt + 1))
    assert result.completed == [Superseded()]
    assert refs(result.heads) == [("t", "c", None, 1)]


async def test_a_replayed_cycle_answers_its_completions_again(store: Store) -> None:
    await append(store, "s", ev(to=["c"]))
    head = await claim_one(store, "s")
    sent = completion(head, ev("reply", id="r1"))
    first = await cycle(store, sent)
    second = await cycle(store, sent)
    assert first.completed == second.completed
    assert second.heads == []


@pytest.mark.parametrize(
    "options",
    [
        {"limit": 0},
        {"limit": True},
        {"ttl": 0},
        {"holder": ""},
        {"max_failures": 0},
        {"consumers": "c"},
    ],
)
async def test_bad_claim_arguments_refuse_the_whole_call(
    store: Store, options: dict[str, object]
) -> None:
    await append(store, "s", ev(to=["c"]), ev(to=["c"]))
    head = await claim_one(store, "s", through=1)
    before = await fingerprint(store, "s")
    arguments: dict[str, object] = {
        "holder": HOLDER,
        "ttl": TTL,
        "limit": 10,
        "max_failures": MAX_FAILURES,
    }
    arguments.update(options)
    with pytest.raises(A2Error) as error:
        await store.complete_and_claim([completion(head)], **arguments)  # type: ignore[arg-type]
    assert_code(error, "INVALID_ARGUMENT")
    assert await fingerprint(store, "s") == before


async def test_a_refused_completion_leaves_nothing_claimed(store: Store) -> None:
    await append(store, "s", ev(id="taken"), ev(to=["c"]))
    await append(store, "t", ev(to=["c"]))
    head = await claim_one(store, "s")
    before = await fingerprint(store, "s", "t")
    with pytest.raises(A2Error) as error:
        await cycle(store, completion(head, ev("reply", id="taken"), ev("reply", id="new")))
    assert_code(error, "PARTIAL_DUPLICATE_BATCH")
    assert await fingerprint(store, "s", "t") == before
    assert refs((await cycle(store)).heads) == [("t", "c", None, 1)]


async def test_work_it_claims_itself_wakes_nobody(store: Store) -> None:
    """SPEC 2.8: wakeups announce claimable work. A head the call's own claim took is not
    claimable by anyone else, so the call wakes nobody for it; a head it leaves does."""
    await append(store, "s", ev(to=[Target("c", "x")]), ev(to=[Target("c", "x")]))
    await append(store, "u", ev(to=[Target("c", "y")]), ev(to=[Target("c", "y")]))
    first_s = await claim_one(store, "s", through=1)
    first_u = await claim_one(store, "u", through=1)

    async def both_lanes_move() -> None:
        # Both lanes move to their next event, ready at the same time: the claim takes
        # the first by session id and leaves the other claimable.
        result = await cycle(store, completion(first_s), completion(first_u), limit=1, serving="c")
        assert refs(result.heads) == [("s", "c", "x", 2)]

    seen = await woken_by(store, both_lanes_move)
    assert "u" in seen
    assert "s" not in seen
