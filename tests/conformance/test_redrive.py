"""Dead letters and redrive: retry clears the failure, skip finishes the head without completion."""

from __future__ import annotations

import copy
import pickle

import pytest

from a2pg import ANY_LANE, A2Error, AnyLane, ClaimRef, Consumer, Head, RedriveResult, Target
from a2pg.ids import FakeClock
from a2pg.store import Store

from .helpers import (
    TTL,
    append,
    assert_code,
    claim,
    claim_one,
    completed,
    cursor_of,
    cursor_view,
    ev,
    fail,
    fingerprint,
    log_consumer,
    refs,
)

X = Target("c", "x")


async def dead(store: Store, **claim_options: object) -> None:
    """Dead-letters the one claimable head."""
    head = await claim_one(store, "s", **claim_options)
    assert (await fail(store, head, max_failures=1)).outcome == "dead_lettered"


async def test_dead_letters_list_heads_by_index_then_consumer(store: Store) -> None:
    await append(store, "s", ev(to=["b"]), ev(to=["b", "a"]), ev(to=["ok"]))
    for head in await claim(store, "s", through=2):
        await fail(store, head, max_failures=1, error=f"{head.consumer}{head.index}")
    letters = await store.dead_letters("s")
    assert refs(letters) == [("s", "b", None, 1), ("s", "a", None, 2), ("s", "b", None, 2)]
    assert [h.dispatch.last_error for h in letters] == ["b1", "a2", "b2"]
    assert letters[1].event == (await store.read("s", after=1, through=2))[0]


async def test_no_dead_letters_in_a_healthy_session(store: Store) -> None:
    await append(store, "s", ev(to=["c"]))
    await fail(store, await claim_one(store, "s"))
    assert await store.dead_letters("s") == []
    assert await store.dead_letters("nobody") == []


async def test_retry_clears_the_failure_and_keeps_counting_attempts(store: Store) -> None:
    await append(store, "s", ev(to=["c"]))
    await dead(store)
    result = await store.redrive("s", consumer="c", index=1, action="retry")
    assert result == RedriveResult(redriven=True, has_pending=True)
    [cursor] = await store.cursors("s")
    assert (cursor.dead_lettered, cursor.dispatch.failure_count) == (False, 0)
    assert await store.dead_letters("s") == []
    again = await claim_one(store, "s")
    assert (again.attempt, again.failure_count) == (2, 0)


async def test_retry_after_a_claim_dead_letter(store: Store, clock: FakeClock) -> None:
    await append(store, "s", ev(to=["c"]))
    await claim_one(store, "s")
    clock.advance(TTL)
    [letter] = await claim(store, "s", max_failures=1)
    assert letter.dead_lettered
    await store.redrive("s", consumer="c", index=1, action="retry")
    again = await claim_one(store, "s", max_failures=1)
    assert (again.attempt, again.dead_lettered) == (3, False)


async def test_skip_finishes_an_event_head_without_completion(store: Store) -> None:
    await append(store, "s", ev(to=["c"]))
    await dead(store)
    events = await store.read("s")
    result = await store.redrive("s", consumer="c", index=1, action="skip")
    assert result == RedriveResult(redriven=True, has_pending=False)
    assert await store.cursors("s") == []
    assert await store.dead_letters("s") == []
    assert await store.read("s") == events


async def test_skip_moves_a_lane_to_its_next_event(store: Store) -> None:
    await append(store, "s", ev(to=[X]), ev(to=[X]))
    await dead(store)
    result = await store.redrive("s", consumer="c", index=1, action="skip")
    assert result == RedriveResult(redriven=True, has_pending=True)
    cursor = await cursor_of(store, "s", "c", "x")
    assert (cursor.position, cursor.head, cursor.dispatch.failure_count) == (1, 2, 0)
    assert (await claim_one(store, "s")).index == 2


async def test_retry_unblocks_a_lane_at_the_same_head(store: Store) -> None:
    await append(store, "s", ev(to=[X]), ev(to=[X]))
    await dead(store)
    await store.redrive("s", consumer="c", index=1, action="retry")
    head = await claim_one(store, "s")
    assert (head.index, head.attempt) == (1, 2)


async def test_skip_moves_a_log_cursor_to_its_next_event(store: Store) -> None:
    audit = log_consumer("audit", backfill=True, types=["a"])
    await append(store, "s", ev("a"), ev("b"), ev("a"), consumers=[audit])
    await dead(store)
    await store.redrive("s", consumer="audit", index=1, action="skip", consumers=[audit])
    assert cursor_view(await store.cursors("s")) == [("audit", "log", "log", 1, 3)]


@pytest.mark.parametrize("action", ["retry", "skip"])
async def test_a_head_that_is_not_dead_is_not_redriven(store: Store, action: str) -> None:
    await append(store, "s", ev(to=["c"]))
    await claim_one(store, "s")
    before = await fingerprint(store, "s")
    result = await store.redrive("s", consumer="c", index=1, action=action)  # type: ignore[arg-type]
    assert result == RedriveResult(redriven=False, has_pending=True)
    assert await fingerprint(store, "s") == before


@pytest.mark.parametrize(
    ("consumer", "index"), [("d", 1), ("c", 2), ("c", 99)], ids=["consumer", "index", "no-event"]
)
async def test_redrive_of_an_unknown_head_changes_nothing(
    store: Store, consumer: str, index: int
) -> None:
    await append(store, "s", ev(to=["c"]), ev(to=["d"]))
    await dead(store, through=1)
    before = await fingerprint(store, "s")
    result = await store.redrive("s", consumer=consumer, index=index, action="retry")
    assert result.redriven is False
    assert await fingerprint(store, "s") == before


async def test_redrive_in_an_unknown_session_changes_nothing(store: Store) -> None:
    result = await store.redrive("nobody", consumer="c", index=1, action="skip")
    assert result == RedriveResult(redriven=False, has_pending=False)
    assert await store.sessions() == []


async def test_a_cleared_dead_letter_is_gone(store: Store) -> None:
    await append(store, "s", ev(to=["c"]))
    await dead(store)
    await store.clear("s")
    assert await store.dead_letters("s") == []
    result = await store.redrive("s", consumer="c", index=1, action="retry")
    assert result == RedriveResult(redriven=False, has_pending=False)


async def test_redrive_reports_pending_work_of_the_served_consumers(store: Store) -> None:
    await append(store, "s", ev(to=["c"]), ev(to=["d"]))
    await dead(store, through=1)
    result = await store.redrive(
        "s", consumer="c", index=1, action="skip", consumers=[Consumer("c")]
    )
    assert result == RedriveResult(redriven=True, has_pending=False)
    assert (await store.append("s", [])).has_pending is True


async def test_a_redriven_head_completes(store: Store) -> None:
    await append(store, "s", ev(to=["c"]))
    await dead(store)
    await store.redrive("s", consumer="c", index=1, action="retry")
    head = await claim_one(store, "s")
    [event] = await completed(store, head, ev("r", id="r"))
    assert event.cause == head.attempt_ref


# -- redrive naming the cursor: lane= ---------------------------------------------------

Y = Target("c", "y")


async def dead_at_one(store: Store, *targets: Target) -> None:
    """Event 1 targets each of ``targets`` (and event 2 queues behind on lane x); every
    head at index 1 is dead-lettered."""
    await append(store, "s", ev(to=targets), ev(to=[X]))
    for head in await claim(store, "s", through=1):
        assert (await fail(store, head, max_failures=1)).outcome == "dead_lettered"


def dead_cursors(letters: list[Head]) -> list[tuple[str, str | None, int]]:
    return [(h.consumer, h.lane, h.index) for h in letters]


@pytest.mark.parametrize("lane", [None, "x", "y"], ids=["event-cursor", "lane-x", "lane-y"])
async def test_redrive_with_a_lane_takes_that_cursors_dead_head(
    store: Store, lane: str | None
) -> None:
    """The consumer's event head and two lane heads are dead at one index: ``lane`` names
    which one is redriven (None: the event cursor); the others stay dead."""
    await dead_at_one(store, Target("c"), X, Y)
    everyone = [("c", None, 1), ("c", "x", 1), ("c", "y", 1)]
    assert dead_cursors(await store.dead_letters("s")) == everyone
    result = await store.redrive("s", consumer="c", index=1, action="retry", lane=lane)
    assert result == RedriveResult(redriven=True, has_pending=True)
    left = [ref for ref in everyone if ref[1] != lane]
    assert dead_cursors(await store.dead_letters("s")) == left
    head = await claim_one(store, "s")
    assert (head.consumer, head.lane, head.index, head.attempt) == ("c", lane, 1, 2)


async def test_a_skip_with_a_lane_moves_only_that_lane(store: Store) -> None:
    await dead_at_one(store, Target("c"), X)
    result = await store.redrive("s", consumer="c", index=1, action="skip", lane="x")
    assert result == RedriveResult(redriven=True, has_pending=True)
    assert dead_cursors(await store.dead_letters("s")) == [("c", None, 1)]
    cursor = await cursor_of(store, "s", "c", "x")
    assert (cursor.position, cursor.head) == (1, 2)
    assert refs(await claim(store, "s")) == [("s", "c", "x", 2)]


async def test_redrive_with_any_lane_is_the_default(store: Store) -> None:
    """``ANY_LANE`` (the default) takes the head ``dead_letters`` lists first."""
    await dead_at_one(store, Target("c"), X)
    result = await store.redrive("s", consumer="c", index=1, action="skip", lane=ANY_LANE)
    assert result.redriven
    assert dead_cursors(await store.dead_letters("s")) == [("c", "x", 1)]


async def test_redrive_of_a_log_cursor_by_its_lane(store: Store) -> None:
    audit = log_consumer("audit", backfill=True, lane="audit-log")
    await append(store, "s", ev("a"), ev("b"), consumers=[audit])
    await dead(store, consumers=[audit], through=1)
    for lane in (None, "log"):
        before = await fingerprint(store, "s")
        result = await store.redrive("s", consumer="audit", index=1, action="skip", lane=lane)
        assert result.redriven is False
        assert await fingerprint(store, "s") == before
    result = await store.redrive(
        "s", consumer="audit", index=1, action="skip", lane="audit-log", consumers=[audit]
    )
    assert result == RedriveResult(redriven=True, has_pending=True)
    assert cursor_view(await store.cursors("s")) == [("audit", "audit-log", "log", 1, 2)]


@pytest.mark.parametrize(
    ("dead_lane", "lane"),
    [(None, "x"), ("x", None), (None, "z"), ("x", "z")],
    ids=["live-lane", "live-event-cursor", "unknown-lane", "unknown-lane-beside-dead-lane"],
)
@pytest.mark.parametrize("action", ["retry", "skip"])
async def test_redrive_of_a_lane_without_a_dead_head_there_changes_nothing(
    store: Store, dead_lane: str | None, lane: str, action: str
) -> None:
    """The consumer has a dead head at the index, but not on the cursor ``lane`` names (that
    one is live, claimed, or does not exist): nothing is redriven and nothing written."""
    await append(store, "s", ev(to=[Target("c"), X]))
    for head in await claim(store, "s"):
        if head.lane == dead_lane:
            await fail(store, head, max_failures=1)
    assert dead_cursors(await store.dead_letters("s")) == [("c", dead_lane, 1)]
    before = await fingerprint(store, "s")
    result = await store.redrive(
        "s",
        consumer="c",
        index=1,
        action=action,  # type: ignore[arg-type]
        lane=lane,
    )
    assert result == RedriveResult(redriven=False, has_pending=True)
    assert await fingerprint(store, "s") == before


@pytest.mark.parametrize(
    "lane",
    [1, "", "x\x00", b"x", ClaimRef("c", "x", 1), ["x"]],
    ids=["int", "empty", "nul", "bytes", "claim-ref", "list"],
)
async def test_a_bad_lane_is_refused_and_nothing_is_redriven(store: Store, lane: object) -> None:
    await dead_at_one(store, Target("c"), X)
    before = await fingerprint(store, "s")
    with pytest.raises(A2Error) as error:
        await store.redrive(
            "s",
            consumer="c",
            index=1,
            action="skip",
            lane=lane,  # type: ignore[arg-type]
        )
    assert_code(error, "INVALID_ARGUMENT", "lane")
    assert await fingerprint(store, "s") == before


def test_any_lane_is_one_constant() -> None:
    """``ANY_LANE`` survives copies and pickling as itself, and says what it is."""
    assert copy.deepcopy(ANY_LANE) is ANY_LANE
    assert pickle.loads(pickle.dumps(ANY_LANE)) is ANY_LANE
    assert isinstance(ANY_LANE, AnyLane)
    assert repr(ANY_LANE) == "ANY_LANE"
