"""The W3C trace context an append stores with its events (``StoredEvent.trace_parent``).

The context here is carried by the caller (``propagation.carry``), as a relay of a
``traceparent`` header would: no OpenTelemetry needed. Each shape of append (on
PostgreSQL: the one-statement append and its transaction) stores it on every event, the
append's answer and ``read`` return it, a replay keeps the first append's, and a
malformed one is ``INVALID_ARGUMENT`` with nothing written.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from a2pg import A2Error, Completed, Completion, InvalidArgument, NewEvent, Target
from a2pg.contract.propagation import carry, check_trace_parent, join, split
from a2pg.store import Store

from .helpers import (
    append,
    assert_code,
    claim_one,
    complete,
    ev,
    fingerprint,
    log_consumer,
)

TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
TRACESTATE = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"


def shapes() -> dict[str, list[NewEvent]]:
    """Batches of each shape: on PostgreSQL the first three are one statement (of three
    shapes), the last its transaction (a delayed target's due time is read in it)."""
    return {
        "untargeted": [ev("a"), ev("b")],
        "event targets": [ev("a", to=["w"]), ev("b", to=["w"])],
        "lane targets": [ev("a", to=[Target("w", "turns")]), ev("b", to=[Target("w", "turns")])],
        "delayed": [NewEvent("a", targets=(Target("w", not_before=timedelta(seconds=5)),))],
    }


@pytest.mark.parametrize("shape", list(shapes()))
async def test_each_event_of_an_append_stores_the_carried_context(store: Store, shape: str) -> None:
    with carry(TRACEPARENT):
        result = await store.append("s", shapes()[shape])
    assert [e.trace_parent for e in result.events] == [TRACEPARENT] * len(result.events)
    assert await store.read("s") == result.events


async def test_a_tracestate_travels_with_it(store: Store) -> None:
    with carry(TRACEPARENT, TRACESTATE):
        [event] = await append(store, "s", ev("a"))
    stored = f"{TRACEPARENT} {TRACESTATE}"
    assert event.trace_parent == stored
    assert [e.trace_parent for e in await store.read("s")] == [stored]


async def test_an_append_that_wakes_a_log_consumer_stores_it(store: Store) -> None:
    follower = log_consumer("follow")
    await store.register_consumers([follower])
    with carry(TRACEPARENT):
        events = await append(store, "s", ev("a"), ev("b"))
    assert [e.trace_parent for e in await store.read("s")] == [TRACEPARENT] * 2
    assert [e.trace_parent for e in events] == [TRACEPARENT] * 2


async def test_an_append_in_the_transaction_path_stores_it(store: Store) -> None:
    """An event with a cause (fenced) after a cleared session's reused id."""
    await append(store, "s", ev("job", to=["w"], id="x"))
    head = await claim_one(store, "s")
    await store.clear("s")
    with carry(TRACEPARENT):
        events = await append(store, "s", ev("b", id="x"), ev("c"))
    assert [e.trace_parent for e in events] == [TRACEPARENT] * 2
    assert head.event.trace_parent is None
    assert [e.trace_parent for e in await store.read("s")] == [None, TRACEPARENT, TRACEPARENT]


async def test_without_a_context_events_store_none(store: Store) -> None:
    events = await append(store, "s", ev("a", to=["w"]))
    assert [e.trace_parent for e in events] == [None]
    assert [e.trace_parent for e in await store.read("s")] == [None]
    await complete(store, await claim_one(store, "s"), ev("done", id="d1"))
    assert [e.trace_parent for e in await store.read("s")] == [None, None]


async def test_a_completions_events_store_the_current_context(store: Store) -> None:
    """complete_attempt takes the current context as append does (the worker's attempt
    span, so the next consumer's trace follows from the attempt that caused it)."""
    await append(store, "s", ev("job", to=["w"]), ev("job", to=["w"]))
    first, second = await store.claim_any(holder="h", ttl=30, limit=2)
    with carry(TRACEPARENT):
        await complete(store, first, ev("done", id="d1", to=["next"]))
    given = f"{TRACEPARENT} {TRACESTATE}"
    [result] = await store.complete_attempts(
        [
            Completion(
                "s", "w", None, second.index, second.attempt, (ev("done", id="d2"),),
                trace_parent=given,
            )
        ]
    )  # fmt: skip
    assert isinstance(result, Completed) and result.events[0].trace_parent == given
    assert [e.trace_parent for e in await store.read("s")] == [None, None, TRACEPARENT, given]
    follow = await claim_one(store, "s")
    assert (follow.consumer, follow.event.trace_parent) == ("next", TRACEPARENT)


async def test_a_completion_with_a_malformed_context_writes_nothing(store: Store) -> None:
    await append(store, "s", ev("job", to=["w"]))
    head = await claim_one(store, "s")
    before = await fingerprint(store, "s")
    events = (ev("x", id="x1"),)
    bad = Completion("s", "w", None, head.index, head.attempt, events, trace_parent="00-x")
    with pytest.raises(InvalidArgument) as error:
        await store.complete_attempts([bad])
    assert_code(error, "INVALID_ARGUMENT", "trace_parent")
    assert await fingerprint(store, "s") == before


async def test_a_replay_returns_the_first_appends_context(store: Store) -> None:
    with carry(TRACEPARENT):
        first = await append(store, "s", ev("a", id="e1"))
    other = "00-11111111111111111111111111111111-2222222222222222-00"
    with carry(other):
        again = await append(store, "s", ev("a", id="e1"))
    assert again == first
    assert first[0].trace_parent == TRACEPARENT


async def test_the_claimed_heads_event_carries_it(store: Store) -> None:
    with carry(TRACEPARENT):
        await append(store, "s", ev("a", to=["w"]))
    head = await claim_one(store, "s")
    assert head.event.trace_parent == TRACEPARENT


BAD_CONTEXTS = {
    "not hex": ("00-0af7651916cd43dd8448eb211c80319z-b7ad6b7169203331-01", None),
    "upper case": ("00-0AF7651916CD43DD8448EB211C80319C-B7AD6B7169203331-01", None),
    "zero trace id": (f"00-{'0' * 32}-b7ad6b7169203331-01", None),
    "zero span id": (f"00-0af7651916cd43dd8448eb211c80319c-{'0' * 16}-01", None),
    "another version": ("01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", None),
    "short": ("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-1", None),
    "garbage": ("traceparent", None),
    "empty": ("", None),
    "no space before the state": (TRACEPARENT + "x" + TRACESTATE, None),
    "a space and no state": (TRACEPARENT + " ", None),
    "a bad state member": (TRACEPARENT, "Congo=1"),
    "a state without =": (TRACEPARENT, "congo"),
    "too many members": (TRACEPARENT, ",".join(f"k{n}=v" for n in range(33))),
    "too long a state": (TRACEPARENT, "k=" + "v" * 600),
    "a NUL": (TRACEPARENT, "k=v\x00"),
}


@pytest.mark.parametrize("bad", list(BAD_CONTEXTS))
async def test_a_malformed_context_is_refused_and_nothing_is_written(
    store: Store, bad: str
) -> None:
    await append(store, "s", ev("a"))
    before = await fingerprint(store, "s")
    traceparent, tracestate = BAD_CONTEXTS[bad]
    with carry(traceparent, tracestate), pytest.raises(A2Error) as error:
        await store.append("s", [ev("b", to=["w"])])
    assert_code(error, "INVALID_ARGUMENT", "trace_parent")
    assert await fingerprint(store, "s") == before


async def test_a_context_that_is_not_a_str_is_refused(store: Store) -> None:
    with carry(123), pytest.raises(A2Error) as error:  # type: ignore[arg-type]
        await store.append("s", [ev("a")])
    assert_code(error, "INVALID_ARGUMENT", "trace_parent")
    assert await store.read("s") == []


async def test_the_longest_state_is_kept_whole(store: Store) -> None:
    members = [f"k{n}=" + "v" * 10 for n in range(32)]
    state = ",".join(members)[:512]
    state = state[: state.rfind(",")]
    with carry(TRACEPARENT, state):
        [event] = await append(store, "s", ev("a"))
    assert (await store.read("s"))[0].trace_parent == event.trace_parent == f"{TRACEPARENT} {state}"


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.none(),
        st.integers(),
        st.binary(max_size=80),
        st.text(max_size=700),
        st.builds(
            lambda ids, flags, state: f"00-{ids[:32]}-{ids[32:]}-{flags} {state}".rstrip(),
            st.text("0123456789abcdef", min_size=48, max_size=48),
            st.text("0123456789abcdef", min_size=2, max_size=2),
            st.text(max_size=40),
        ),
    )
)
def test_a_context_is_kept_whole_or_refused_as_invalid_argument(value: object) -> None:
    """Never another error, and never a changed text: what the check accepts is stored."""
    try:
        checked = check_trace_parent(value)
    except InvalidArgument:
        return
    assert checked == value
    if checked is not None:
        traceparent, tracestate = split(checked)
        assert join(traceparent, tracestate) == checked
