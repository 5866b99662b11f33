"""Consumer isolation in one worker: ``consumers=`` subsets, per-consumer ``concurrency``,
and ``priority`` shares that starve no one, under contention (memory and PostgreSQL).

Shares are counted in heads claimed and calls made, never timed.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pytest

from a2pg import A2Error, Consumer, Head, LogSpec, NewEvent
from a2pg.store import Store
from a2pg.worker import App, Worker
from a2pg.worker.app import Handler

from ..backends import Backend, selected_backends
from .helpers import bounded, until, work

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(
    params=[
        pytest.param(b, id=b.name, marks=b.marks)
        for b in selected_backends()
        if b.name != "sqlite"  # the logic on memory, for real on PostgreSQL (and poolers)
    ]
)
def backend(request: pytest.FixtureRequest) -> Backend:
    chosen: Backend = request.param
    return chosen


# -- a store that records each claim --------------------------------------------------


@dataclass
class Call:
    """One claim call: whose heads it asked for, how many at most, whose it got."""

    op: str
    names: tuple[str, ...]
    limit: int
    got: Counter[str] = field(default_factory=Counter)

    @property
    def count(self) -> int:
        return sum(self.got.values())


class ClaimLog:
    """Delegates every call to a real store; records ``claim_any`` and ``complete_and_claim``."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.calls: list[Call] = []
        self.registered: list[list[str]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _record(self, op: str, options: dict[str, Any], heads: Sequence[Head]) -> None:
        consumers = options.get("consumers")
        names = tuple(c.name for c in consumers) if consumers is not None else ("*",)
        self.calls.append(Call(op, names, options["limit"], Counter(h.consumer for h in heads)))

    async def claim_any(self, **options: Any) -> list[Head]:
        heads = await self.inner.claim_any(**options)
        self._record("claim_any", options, heads)
        return heads

    async def complete_and_claim(self, completions: Any, **options: Any) -> Any:
        result = await self.inner.complete_and_claim(completions, **options)
        self._record("complete_and_claim", options, result.heads)
        return result

    async def register_consumers(self, consumers: Sequence[Consumer]) -> None:
        self.registered.append([c.name for c in consumers])
        await self.inner.register_consumers(consumers)

    def as_store(self) -> Store:
        return cast(Store, self)


async def backlog(store: Store, consumer: str, count: int, *, sessions: int = 4) -> None:
    """``count`` ready heads of ``consumer``, spread over a few sessions."""
    for s in range(sessions):
        share = range(s, count, sessions)
        if share:
            await store.append(f"{consumer}-{s}", [work(n, to=consumer) for n in share])


def noop() -> Handler:
    async def handle(head: Head) -> None:
        return None

    return handle


# -- bad input ---------------------------------------------------------------------------

BAD_COUNTS = [True, False, 0, -1, 1.5, 2.0, "3", 10**12, float("nan"), [2]]


@pytest.mark.parametrize("option", ["concurrency", "priority"])
@pytest.mark.parametrize("value", BAD_COUNTS, ids=repr)
def test_bad_concurrency_and_priority_are_refused_and_register_nothing(
    option: str, value: object
) -> None:
    app = App()
    with pytest.raises(A2Error) as added:
        app.add("w", noop(), **{option: value})  # type: ignore[arg-type]
    assert added.value.code == "INVALID_ARGUMENT"
    assert f"the {option} of consumer 'w' must be an int from 1 to" in added.value.message
    with pytest.raises(A2Error) as decorated:
        app.consumer("w", **{option: value})  # type: ignore[arg-type]  # before the def
    assert decorated.value.code == "INVALID_ARGUMENT"
    assert len(app) == 0 and "w" not in app


def test_the_bounds_themselves_are_taken() -> None:
    app = App()
    app.add("a", noop(), concurrency=1, priority=1)
    app.add("b", noop(), concurrency=100_000, priority=1_000)
    app.add("c", noop())
    a, b, c = (app.registration(n) for n in "abc")
    assert a is not None and (a.concurrency, a.priority, a.shared) == (1, 1, True)
    assert b is not None and (b.concurrency, b.priority) == (100_000, 1_000)
    assert c is not None and (c.concurrency, c.priority, c.shared) == (None, None, False)
    for option, past in (("concurrency", 100_001), ("priority", 1_001)):
        with pytest.raises(A2Error, match=f"must be an int from 1 to {past - 1:,}"):
            app.add("d", noop(), **{option: past})  # type: ignore[arg-type]
    assert "d" not in app


def three_consumers() -> App:
    app = App()
    app.add("replies", noop())
    app.add("backfill", noop())
    app.add("audit", noop(), log=LogSpec(types=("order.placed",)))
    return app


@pytest.mark.parametrize(
    ("consumers", "message"),
    [
        ("replies", "consumers must be a sequence of consumer names"),
        (b"replies", "consumers must be a sequence of consumer names"),
        ({"replies"}, "consumers must be a sequence of consumer names"),
        (42, "consumers must be a sequence of consumer names"),
        ([], "consumers must name at least one of the app's consumers"),
        ((), "consumers must name at least one of the app's consumers"),
        (["replies", "replies"], "consumer 'replies' is named twice"),
        (["replies", "nope"], "consumer 'nope' is not one of the app's consumers"),
        ([""], "consumer '' is not one of the app's consumers"),
        (["replies", 7], "consumers must be names (str), got 7"),
    ],
    ids=repr,
)
async def test_bad_consumer_subsets_are_refused_before_anything_is_written(
    store: Store, consumers: object, message: str
) -> None:
    log = ClaimLog(store)
    with pytest.raises(A2Error) as raised:
        Worker(log.as_store(), three_consumers(), consumers=consumers)  # type: ignore[arg-type]
    assert raised.value.code == "INVALID_ARGUMENT"
    assert message in raised.value.message, raised.value.message
    if "not one of" in message or "at least one" in message or "sequence" in message:
        assert "replies, backfill, audit" in raised.value.message  # what it could have said
    assert log.calls == [] and log.registered == []
    assert await store.workers() == []
    assert await store.registered_consumers() == []


# -- --consumers: a worker serves its subset only ----------------------------------------


async def test_a_subset_worker_claims_registers_and_beats_only_its_consumers(
    store: Store,
) -> None:
    handled: Counter[str] = Counter()
    app = App()
    for name in ("replies", "backfill"):

        async def handle(head: Head) -> None:
            handled[head.consumer] += 1

        app.add(name, handle)

    @app.consumer("audit", log=LogSpec(types=("order.placed",)))
    async def audit(head: Head) -> None:
        handled["audit"] += 1

    await backlog(store, "replies", 6)
    await backlog(store, "backfill", 6)

    first = ClaimLog(store)
    worker = Worker(first.as_store(), app, consumers=["replies"], heartbeat_interval=60)
    assert [c.name for c in worker.consumers] == ["replies"] and worker.shares is None
    assert worker.describe().consumers == ("replies",)
    await bounded(worker.run_until_idle())
    assert handled == Counter(replies=6)
    assert first.registered == []  # it serves no log consumer
    assert {c.names for c in first.calls} == {("replies",)}
    assert await store.registered_consumers() == []

    second = ClaimLog(store)
    rest = Worker(second.as_store(), app, consumers=("audit", "backfill"))
    assert [c.name for c in rest.consumers] == ["backfill", "audit"]  # the app's order
    async with rest:
        listed = await _workers_once_listed(store)
        assert [w.beat.consumers for w in listed] == [("backfill", "audit")]
        await store.append("orders", [NewEvent("order.placed", {"n": 1})])
        await until(lambda: handled["backfill"] == 6 and handled["audit"] == 1)
    assert second.registered == [["audit"]]
    assert {c.names for c in second.calls} == {("backfill", "audit")}
    assert handled == Counter(replies=6, backfill=6, audit=1)


async def _workers_once_listed(store: Store) -> list[Any]:
    async def listed() -> list[Any]:
        while not (found := await store.workers()):  # noqa: ASYNC110 - polls the store
            await asyncio.sleep(0.01)
        return found

    return cast(list[Any], await bounded(listed()))


async def test_without_priority_or_concurrency_a_cycle_is_still_one_claim(store: Store) -> None:
    """The default path: one call per cycle for every served consumer, no groups."""
    app = App({"a": noop(), "b": noop()})
    await backlog(store, "a", 25)
    await backlog(store, "b", 5)
    log = ClaimLog(store)
    worker = Worker(log.as_store(), app, concurrency=10)
    assert worker.shares is None
    await bounded(worker.run_until_idle())
    assert {c.names for c in log.calls} == {("a", "b")}
    counts = [c.count for c in log.calls]
    assert counts[:3] == [10, 10, 10] and set(counts[3:]) == {0}, counts
    assert log.calls[0].got == Counter(a=10)  # oldest first, across consumers


# -- priority: weighted shares under contention -------------------------------------------


def cycles_of(calls: list[Call], order: Sequence[str]) -> list[list[Call]]:
    """The calls split into cycles: a shared cycle claims its groups in declaration order,
    so a call to a group not after the previous call's starts a new cycle (valid while no
    group comes back short, which would start a second round)."""
    rank = {name: i for i, name in enumerate(order)}
    cycles: list[list[Call]] = []
    last = len(order)
    for call in calls:
        position = rank[call.names[0]]
        if position <= last:
            cycles.append([])
        cycles[-1].append(call)
        last = position
    return cycles


def while_both_had_work(calls: list[Call]) -> list[Call]:
    """The calls before the first that came back short (a group ran out of work)."""
    for i, call in enumerate(calls):
        if call.count < call.limit:
            return calls[:i]
    return calls


async def test_weights_4_to_1_share_the_slots_4_to_1_and_the_light_one_moves_every_cycle(
    store: Store,
) -> None:
    app = App()
    app.add("interactive", noop(), priority=4)
    app.add("bulk", noop())  # weighs 1
    await backlog(store, "bulk", 300)  # older: oldest-first would take these first
    await backlog(store, "interactive", 600)
    log = ClaimLog(store)
    worker = Worker(log.as_store(), app, concurrency=10)
    assert worker.shares is not None
    await bounded(worker.run_until_idle(), within=60)
    assert worker.stats.completed == 900

    contended = while_both_had_work(log.calls)
    cycles = cycles_of(contended, ["interactive", "bulk"])
    big = [c for c in cycles if sum(call.limit for call in c) >= 6]
    assert len(big) >= 40, f"only {len(big)} cycles of 6 slots or more: nothing measured"
    for cycle in big:  # starvation-free: one of any 6 slots at least
        assert any(call.names == ("bulk",) and call.count >= 1 for call in cycle), cycle
    got = Counter[str]()
    for call in contended:
        got.update(call.got)
    share = got["interactive"] / (got["interactive"] + got["bulk"])
    assert 0.75 <= share <= 0.85, got
    # and every head done: the bulk backlog drained once interactive had none left
    assert worker.shares.stats.claimed == {"interactive": 600, "bulk": 300}


async def test_without_weights_the_oldest_backlog_takes_every_slot(store: Store) -> None:
    """What priority is for: by default the older backlog starves the other consumer."""
    app = App({"interactive": noop(), "bulk": noop()})
    await backlog(store, "bulk", 100)
    await backlog(store, "interactive", 100)
    log = ClaimLog(store)
    await bounded(Worker(log.as_store(), app, concurrency=10).run_until_idle())
    first = log.calls[:5]
    assert all(call.got == Counter(bulk=10) for call in first), first


async def test_slots_a_group_leaves_go_to_the_others_in_the_same_cycle(store: Store) -> None:
    app = App()
    app.add("interactive", noop(), priority=4)
    app.add("bulk", noop())
    await backlog(store, "interactive", 2, sessions=2)
    await backlog(store, "bulk", 50)
    log = ClaimLog(store)
    worker = Worker(log.as_store(), app, concurrency=10)
    await bounded(worker.run_until_idle())
    first_cycle = [(c.names, c.limit, c.count) for c in log.calls[:3]]
    assert first_cycle == [
        (("interactive",), 8, 2),  # dealt 8, had 2: out for this cycle
        (("bulk",), 2, 2),
        (("bulk",), 6, 6),  # the 6 it left, claimed in the same cycle
    ]
    assert worker.stats.completed == 52


async def test_a_group_idle_for_long_banks_no_burst(store: Store) -> None:
    """A weight that had no work while another ran gets its share when work comes, not
    every slot until it has caught up."""
    app = App()
    app.add("interactive", noop(), priority=4)
    app.add("bulk", noop())
    await backlog(store, "bulk", 200)
    log = ClaimLog(store)
    worker = Worker(log.as_store(), app, concurrency=10)
    await bounded(worker.run_until_idle())  # 20 cycles of bulk alone
    log.calls.clear()
    await backlog(store, "bulk", 200)
    await backlog(store, "interactive", 200)
    await bounded(worker.run_until_idle())
    contended = while_both_had_work(log.calls)
    order: list[str] = []  # whose heads, call by call: 200 interactive first is a burst
    for call in contended:
        order.extend(call.names[0] for _ in range(call.count))
    assert len(order) >= 100
    assert 15 <= order[:100].count("bulk") <= 25, order[:100]
    for cycle in cycles_of(contended, ["interactive", "bulk"]):
        if sum(call.limit for call in cycle) >= 6:
            assert any(call.names == ("bulk",) and call.count for call in cycle), cycle


async def test_consumers_that_set_nothing_share_one_claim_and_weigh_their_count(
    store: Store,
) -> None:
    app = App()
    app.add("first", noop())
    app.add("heavy", noop(), priority=2)
    app.add("second", noop())
    for name in ("first", "heavy", "second"):
        await backlog(store, name, 100)
    log = ClaimLog(store)
    worker = Worker(log.as_store(), app, concurrency=8)
    await bounded(worker.run_until_idle())
    contended = while_both_had_work(log.calls)
    assert {c.names for c in contended} == {("first", "second"), ("heavy",)}
    cycles = cycles_of(contended, ["first", "heavy"])[:-1]  # the last may be cut short
    assert len(cycles) >= 20
    got = Counter[str]()
    for cycle in cycles:
        for call in cycle:
            got.update({"heavy" if call.names == ("heavy",) else "rest": call.count})
    assert abs(got["heavy"] - got["rest"]) <= 2, got  # 2 against 1 + 1


# -- concurrency: a per-consumer limit under contention -----------------------------------


class InFlight:
    """Handlers of each consumer running now and at most, counted from inside them."""

    def __init__(self) -> None:
        self.now: Counter[str] = Counter()
        self.peak: Counter[str] = Counter()
        self.total_peak = 0
        self.done: Counter[str] = Counter()
        self._lock = threading.Lock()

    def enter(self, consumer: str) -> None:
        with self._lock:
            self.now[consumer] += 1
            self.peak[consumer] = max(self.peak[consumer], self.now[consumer])
            self.total_peak = max(self.total_peak, sum(self.now.values()))

    def leave(self, consumer: str) -> None:
        with self._lock:
            self.now[consumer] -= 1
            self.done[consumer] += 1


def counted_app(flight: InFlight, *, limit: int, sync: bool = False) -> App:
    app = App()

    async def handle(head: Head) -> None:
        flight.enter(head.consumer)
        for _ in range(3):
            await asyncio.sleep(0)
        flight.leave(head.consumer)

    def handle_sync(head: Head) -> None:
        flight.enter(head.consumer)
        threading.Event().wait(0.001)
        flight.leave(head.consumer)

    app.add("backfill", handle_sync if sync else handle, concurrency=limit)
    app.add("replies", handle)
    return app


@pytest.mark.parametrize("sync", [False, True], ids=["async", "sync"])
async def test_a_consumer_concurrency_is_never_exceeded(store: Store, sync: bool) -> None:
    flight = InFlight()
    await backlog(store, "backfill", 60)
    await backlog(store, "replies", 60)
    log = ClaimLog(store)
    worker = Worker(log.as_store(), counted_app(flight, limit=3, sync=sync), concurrency=10)
    await bounded(worker.run_until_idle(), within=60)
    assert flight.done == Counter(backfill=60, replies=60)
    assert flight.peak["backfill"] == 3  # reached, never passed
    assert flight.total_peak <= 10
    assert max(c.limit for c in log.calls if c.names == ("backfill",)) <= 3
    # replies had the rest of the slots: more than the backfill's 3 at a time
    assert max(c.limit for c in log.calls if c.names == ("replies",)) >= 7


async def test_a_consumer_at_its_limit_is_claimed_again_as_its_handlers_end(
    store: Store,
) -> None:
    """Running, not until idle, with a poll interval far past the test's bound: each
    handler that ends lets the next head of its consumer be claimed, no poll needed."""
    flight = InFlight()
    await backlog(store, "backfill", 40)
    worker = Worker(store, counted_app(flight, limit=2), concurrency=8, poll_interval=300)
    async with worker:
        await until(lambda: flight.done["backfill"] == 40, within=30)
        await backlog(store, "replies", 10)  # a wakeup, while backfill holds no slot
        await until(lambda: flight.done["replies"] == 10, within=30)
    assert flight.peak["backfill"] == 2


async def test_priority_and_concurrency_together(store: Store) -> None:
    flight = InFlight()
    app = App()

    async def handle(head: Head) -> None:
        flight.enter(head.consumer)
        await asyncio.sleep(0)
        flight.leave(head.consumer)

    app.add("interactive", handle, priority=4, concurrency=5)
    app.add("bulk", handle)
    await backlog(store, "interactive", 100)
    await backlog(store, "bulk", 100)
    log = ClaimLog(store)
    await bounded(Worker(log.as_store(), app, concurrency=10).run_until_idle(), within=60)
    assert flight.done == Counter(interactive=100, bulk=100)
    assert flight.peak["interactive"] <= 5
    first = log.calls[:2]  # the weight would give it 8 of 10: its limit keeps it to 5
    assert [(c.names, c.limit) for c in first] == [(("interactive",), 5), (("bulk",), 5)]


# -- the docs' example ----------------------------------------------------------------------


@pytest.fixture
def isolation_example() -> str:
    """The ``# isolation.py`` block of docs/operating/workers.md."""
    page = Path(__file__).resolve().parents[2] / "docs" / "operating" / "workers.md"
    blocks = re.findall(r"```python\n# isolation\.py\n(.*?)```", page.read_text(), re.DOTALL)
    assert len(blocks) == 1, "docs/operating/workers.md lost its isolation.py example"
    block: str = blocks[0]
    return block


async def test_the_workers_page_isolation_example_runs(isolation_example: str) -> None:
    namespace: dict[str, Any] = {"__name__": "isolation"}
    exec(compile(isolation_example, "isolation.py", "exec"), namespace)
    shares: dict[str, int] = await bounded(namespace["main"]())
    assert shares == {"replies": 40, "backfill": 10}
