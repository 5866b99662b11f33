"""complete_attempts on PostgreSQL: each completion of a batch is fenced on its own, and
rolled-back fast paths leave the connection's prepared statements usable."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from a2pg import Claimed, Completed, Completion, Consumer, LogSpec, NewEvent, Superseded, Target
from a2pg.contract.args import CompletionArgs, CompletionItem
from a2pg.postgres import PostgresStore
from a2pg.postgres.completions import fits_fast_path
from tests.postgres.support import work

pytestmark = pytest.mark.postgres


async def test_a_batch_fences_each_completion_on_its_own(store: PostgresStore) -> None:
    await store.append("a", work(2), consumers=[])
    await store.append("b", work(1), consumers=[])
    heads = await store.claim_any(holder="h", ttl=30, limit=10)
    completions = [Completion(h.session_id, h.consumer, h.lane, h.index, h.attempt) for h in heads]
    stale = Completion("a", "worker", None, 1, heads[0].attempt + 1)
    results = await store.complete_attempts([*completions, stale, completions[0]])
    assert results[:3] == [Completed([]), Completed([]), Completed([])]
    assert results[3] == Superseded()
    assert results[4] == Completed([])
    assert await store.claim_any(holder="h", ttl=30) == []


async def test_failed_transactions_leave_prepared_statements_consistent(
    postgres_dsn: str,
) -> None:
    """One connection, many rolled-back fast paths between successes: psycopg prepares
    statements after a few runs, and a rollback must not leave it naming dropped ones."""
    store = await PostgresStore.open(postgres_dsn, max_size=1, min_size=1)
    try:
        for round_ in range(12):
            await store.append("s", work(), consumers=[])
            [head] = await store.claim_any(holder="h", ttl=30)
            stale = Completion("s", head.consumer, None, head.index, head.attempt + 1)
            assert await store.complete_attempts([stale]) == [Superseded()], round_
            done = Completion("s", head.consumer, None, head.index, head.attempt)
            assert await store.complete_attempts([done]) == [Completed([])], round_
            assert await store.complete_attempts([done]) == [Completed([])], round_
    finally:
        await store.close()


def follower(*types: str) -> Consumer:
    return Consumer("f", LogSpec(types=types))


def item(session_id: str, lane: str | None, *, wake: Sequence[Consumer] = ()) -> CompletionItem:
    consumer = "f" if lane == "log" else "c"
    return CompletionItem(CompletionArgs(Completion(session_id, consumer, lane, 1, 1), []), wake)


def test_the_fast_path_takes_what_workers_send() -> None:
    """Completions of many sessions, each declaring the registered log consumers: one
    round trip, whatever their cursors. So are two of a session declaring the same types
    after the log cursor moved by them."""
    wake = [follower("a")]
    batch = [item(f"s{n}", lane, wake=wake) for n, lane in enumerate(["log", "x", None, "log"])]
    assert fits_fast_path(batch)
    assert fits_fast_path([item("s", "log", wake=wake), item("s", "x", wake=wake)])
    assert fits_fast_path([item("s", "log"), item("s", "x")])  # nothing declared


def test_the_fast_path_leaves_batches_whose_order_matters_to_judging() -> None:
    """A log cursor moved before a later completion of its session declares its consumer
    with other types, or with types the move may not have had."""
    moved = item("s", "log", wake=[follower("a")])
    assert not fits_fast_path([moved, item("s", None, wake=[follower("a", "b")])])
    assert not fits_fast_path([item("s", "log"), item("s", None, wake=[follower("a")])])
    assert fits_fast_path([item("s", None, wake=[follower("a", "b")]), item("s", "log")])


async def test_a_batch_cut_in_order_still_commits_as_one(store: PostgresStore) -> None:
    """A log cursor completed first goes idle; a later completion of its session returns
    an event it takes and wakes it: written one after the other, in one transaction."""
    f = follower("a")
    await store.append(
        "s", [NewEvent("a", 1), NewEvent("x", 2, targets=[Target("c")])], consumers=[f]
    )
    result = await store.claim_available("s", holder="h", ttl=30, consumers=[f, Consumer("c")])
    assert isinstance(result, Claimed)
    heads = {h.consumer: h for h in result.heads}
    returned = NewEvent("a", 3, id="r")
    batch = [
        Completion("s", "f", "log", 1, heads["f"].attempt, (), [f]),
        Completion("s", "c", None, 2, heads["c"].attempt, [returned], [f]),
    ]
    outcomes = await store.complete_attempts(batch)
    assert [type(o) for o in outcomes] == [Completed, Completed]
    [cursor] = await store.cursors("s")
    assert (cursor.consumer, cursor.position, cursor.head) == ("f", 1, 3)
    [head] = await store.claim_any(holder="h", ttl=30, consumers=[f])
    assert (head.consumer, head.index, head.event.id) == ("f", 3, "r")
