"""Edge cases where the backends were found to disagree: one minimal reproducer each.

These are minimal reproducers of differences the model-based test (``tests/model``)
found between the backends. Each asserts what the contract (docs/concepts/contract.md)
requires (its docstring cites the section of the first specification it was written
against) and now passes on every backend; they are kept as regression tests.
"""

from __future__ import annotations

from a2pg import Completion, Consumer, LogSpec, RedriveResult, Target
from a2pg.store import Store

from .helpers import (
    append,
    claim,
    claim_one,
    close,
    completed,
    ev,
    fail,
    log_consumer,
    take,
    woken_by,
)

# -- redrive ----------------------------------------------------------------------------


async def test_redrive_takes_the_dead_head_listed_first(store: Store) -> None:
    """SPEC 2.4: ``redrive(consumer, index)`` names a head by consumer and index; when the
    consumer has a dead event head and a dead lane head at that index, it must pick the
    same one on every backend: the one ``dead_letters`` lists first (by index, consumer,
    then lane, the event cursor before named lanes). A second call takes the other."""
    await append(store, "s", ev(to=[Target("c", "x"), Target("c")]))
    for head in await claim(store, "s"):
        await fail(store, head, max_failures=1)
    listed = [(h.consumer, h.lane, h.index) for h in await store.dead_letters("s")]
    assert listed == [("c", None, 1), ("c", "x", 1)]
    assert await store.redrive("s", consumer="c", index=1, action="retry") == RedriveResult(
        redriven=True, has_pending=True
    )
    assert [(h.consumer, h.lane) for h in await store.dead_letters("s")] == [("c", "x")]


async def test_a_redrive_skip_that_leaves_nothing_claimable_wakes_nobody(store: Store) -> None:
    """SPEC 5 and 2.8: wakeups (NOTIFY on PostgreSQL) go out only on transitions that create
    claimable work. Skipping the last dead head creates none, so no wakeup names the
    session before a later write that does create work elsewhere."""
    await append(store, "s", ev(to=["c"]))
    await fail(store, await claim_one(store, "s"), max_failures=1)

    async def skip() -> None:
        result = await store.redrive("s", consumer="c", index=1, action="skip")
        assert result == RedriveResult(redriven=True, has_pending=False)

    seen = await woken_by(store, skip)
    assert "s" not in seen


# -- renew and release --------------------------------------------------------------------


async def test_renew_and_release_answer_a_head_once(store: Store) -> None:
    """SPEC 2.4: renew extends "each live claim still held by holder at that attempt"; an
    attempt not reached yet is "neither" renewed nor superseded. Named twice, at its
    current attempt and at the next, a head is renewed (or released) once."""
    await append(store, "s", ev(to=["c"]))
    head = await claim_one(store, "s")
    current = head.attempt_ref
    later = current.__class__(head.consumer, head.lane, head.index, head.attempt + 1)
    renewed = await store.renew_claims("s", holder="worker-1", claims=[current, later], ttl=30)
    assert (renewed.renewed, renewed.superseded) == ([head.ref], [])
    released = await store.release_claims("s", holder="worker-1", claims=[current, later])
    assert (released.released, released.superseded) == ([head.ref], [])


# -- clear: ids below the marker ----------------------------------------------------------


async def test_reclaim_counts_rows_whose_id_was_reused(store: Store) -> None:
    """SPEC 2.6: an id stored only below the clear marker may be appended again, and
    ``reclaim`` deletes the rows below the marker: all of them, the one whose id was
    reused included (it stays below the marker until reclaimed, see 2.8 on streams)."""
    await append(store, "s", ev(id="a"), ev(id="b"))
    await store.clear("s")
    await append(store, "s", ev(id="a"))
    result = await store.reclaim("s")
    assert (result.deleted, result.done) == (2, True)


async def test_a_stream_behind_a_clear_still_gets_a_row_whose_id_was_reused(
    store: Store,
) -> None:
    """SPEC 2.8 (no gaps) and 2.6: a stream that started before a clear delivers the events
    committed before it, then the marker. Appending an id used below the marker again
    must not take the old event out of such a stream."""
    await append(store, "s", ev(id="a"))
    stream = store.stream("s")
    try:
        [first] = await take(stream, 1)
        await append(store, "s", ev(id="b"))  # committed, not read by the stream yet
        await store.clear("s")
        await append(store, "s", ev(id="b"))
        assert [e.index for e in [first, *await take(stream, 2)]] == [1, 2, 3]
    finally:
        await close(stream)


# -- wake_log after a clear ----------------------------------------------------------------


async def test_wake_log_after_a_clear_ignores_the_dropped_lane_cursor(store: Store) -> None:
    """SPEC 2.6: a clear drops every cursor but log cursors. A targeted consumer's lane
    cursor it dropped must not make ``wake_log`` of a log consumer on that lane fail as
    if the lane were still a targeted one (it is an idle cursor at the marker)."""
    await append(store, "s", ev(to=[Target("c", "x")]))
    await completed(store, await claim_one(store, "s"))
    await store.clear("s")
    woken = await store.wake_log("s", Consumer("c", LogSpec(lane="x")))
    assert (woken.cursor.kind, woken.cursor.position, woken.cursor.head, woken.head) == (
        "log",
        2,
        None,
        2,
    )


# -- the registry --------------------------------------------------------------------------


async def test_registered_types_reach_a_cursor_at_its_next_write(store: Store) -> None:
    """SPEC 2.9: a re-registered spec "reaches cursors the way refreshLogTypes does in the
    seeds": at the session's next write that wakes the consumer (one naming no
    consumers), not at once. ``claim_any`` refreshes no types, and a completion naming
    its consumers explicitly ([] here) is not such a write, so the log cursor moves on
    with the types it had."""
    await append(store, "s", ev("a"), ev("b"), consumers=[log_consumer("f", types=["a"])])
    await store.register_consumers([log_consumer("f", types=["a", "b"])])
    [head] = await store.claim_any(holder="worker-1", ttl=30)  # a claim that refreshes nothing
    await completed(store, head, consumers=[])
    [cursor] = await store.cursors("s")
    assert (cursor.position, cursor.head) == (1, None)


async def test_registered_types_come_back_as_a_tuple(store: Store) -> None:
    """SPEC 1 (``LogSpec.types`` is a sequence; the model's field is a tuple): types given
    as a list are stored and listed back as a tuple by every backend."""
    listed = Consumer("f", LogSpec(types=["a", "b"]))  # type: ignore[arg-type]
    await store.register_consumers([listed])
    assert await store.registered_consumers() == [log_consumer("f", types=("a", "b"))]


# -- complete_attempts -------------------------------------------------------------------


async def test_a_later_completion_declaring_other_types_does_not_move_an_earlier_one(
    store: Store,
) -> None:
    """SPEC 2.4: each completion of a batch "is fenced and judged on its own exactly as
    complete_attempt would", in order. The log cursor's completion comes first, with the
    types it declares; the types a later completion declares come after it has moved."""
    old, new = log_consumer("f", types=["a"]), log_consumer("f", types=["a", "b"])
    await append(store, "s", ev("a"), ev("b", to=["c"]), consumers=[old])
    heads = {h.consumer: h for h in await claim(store, "s", consumers=[old, Consumer("c")])}
    batch = [
        Completion("s", "f", "log", 1, heads["f"].attempt, (), [old]),
        Completion("s", "c", None, 2, heads["c"].attempt, (), [new]),
    ]
    await store.complete_attempts(batch)
    [cursor] = await store.cursors("s")
    assert (cursor.consumer, cursor.position, cursor.head) == ("f", 1, None)


async def test_a_later_completion_appending_an_event_does_not_move_an_earlier_one(
    store: Store,
) -> None:
    """SPEC 2.4: a batch's completions are judged in order, each "exactly as
    complete_attempt would". Completed first, the log cursor finds nothing more of its
    types and goes idle; the event a later completion returns (naming no log consumer)
    does not wake it."""
    follower = log_consumer("f", types=["a"])
    await append(store, "s", ev("a"), ev("x", to=["c"]), consumers=[follower])
    heads = {h.consumer: h for h in await claim(store, "s", consumers=[follower, Consumer("c")])}
    batch = [
        Completion("s", "f", "log", 1, heads["f"].attempt, (), [follower]),
        Completion("s", "c", None, 2, heads["c"].attempt, [ev("a", id="r")], []),
    ]
    await store.complete_attempts(batch)
    [cursor] = await store.cursors("s")
    assert (cursor.consumer, cursor.position, cursor.head) == ("f", 1, None)
