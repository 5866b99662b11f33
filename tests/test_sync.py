"""``a2pg.sync``: the blocking facade over the async stores, on every backend.

The facade holds no store logic, so these tests check what it adds: that it offers
every operation of ``CheckedStore`` with the same parameters (or lists it in
``EXCLUDED``), that answers and errors come through unchanged, that many threads may
call it at once, that its deadline cancels a call that does not answer, that it is
closed with its store, and that the calls that cannot work (from an event loop, from
its own loop, in a forked child) are refused rather than left to hang.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import threading
import time
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from a2pg import (
    A2Error,
    CancelResult,
    Consumer,
    DeadLetterQuery,
    InvalidArgument,
    MemoryStore,
    NewEvent,
    PartialDuplicateBatch,
    SnapshotWrite,
    StoreNotConfigured,
    StoreUnavailable,
    Target,
)
from a2pg.contract import Limits
from a2pg.contract.args import ReadArgs
from a2pg.front import CheckedStore, StoreProxy
from a2pg.ids import FakeClock, SequentialIds
from a2pg.models import AuditEntry, HeadQuery, StoredEvent
from a2pg.store import Presence
from a2pg.sync import (
    DEFAULT_TIMEOUT,
    EXCLUDED,
    FORKED,
    IN_A_LOOP,
    IN_ITS_LOOP,
    LIVE_FEEDS,
    WORKER_ONLY,
    SyncMisuse,
    SyncPresence,
    SyncStore,
)
from a2pg.sync import open as open_sync_store
from tests.backends import Backend, SqliteTemplate
from tests.conformance.helpers import ev, log_consumer

THREAD_NAME = "a2pg sync store"
AUDIT = log_consumer("audit", types=["user.message"])

Wrap = Callable[[CheckedStore], CheckedStore]
OpenSync = Callable[..., SyncStore]


@pytest.fixture
def open_sync(
    backend: Backend,
    request: pytest.FixtureRequest,
    clock: FakeClock,
    ids: SequentialIds,
    limits: Limits,
) -> Iterator[OpenSync]:
    """``open_sync(timeout=..., wrap=...)``: a facade over one more client of the test's
    storage (``wrap`` puts a proxy around it); every one closed after the test."""
    storage = backend.storage(request)
    opened: list[SyncStore] = []

    def make(*, timeout: float = DEFAULT_TIMEOUT, wrap: Wrap | None = None) -> SyncStore:
        async def factory() -> CheckedStore:
            store = await backend.open(storage, clock, ids, limits)
            assert isinstance(store, CheckedStore)
            return store if wrap is None else wrap(store)

        facade = SyncStore(factory, timeout=timeout)
        opened.append(facade)
        return facade

    yield make
    for facade in reversed(opened):
        facade.close()


@pytest.fixture
def sync_store(open_sync: OpenSync) -> SyncStore:
    return open_sync()


def loop_threads() -> int:
    """Facade loop threads alive in this process."""
    return sum(1 for thread in threading.enumerate() if thread.name == THREAD_NAME)


# -- the surface ----------------------------------------------------------------------------


def public(cls: type) -> set[str]:
    return {name for name in dir(cls) if not name.startswith("_")}


def mismatches(sync_cls: type, async_cls: type, excluded: frozenset[str]) -> list[str]:
    """How ``sync_cls`` falls short of being ``async_cls`` made blocking: a public member
    neither offered nor excluded, one both, an excluded name that is no member, a method
    still async, or a signature (parameters, defaults, annotations, answer) not the same."""
    problems: list[str] = []
    for name in sorted(public(async_cls)):
        offered = hasattr(sync_cls, name)
        if name in excluded:
            if offered:
                problems.append(f"{name}: in the exclusion set, yet offered")
            continue
        if not offered:
            problems.append(f"{name}: neither wrapped nor in the exclusion set")
            continue
        theirs = inspect.getattr_static(async_cls, name)
        ours = inspect.getattr_static(sync_cls, name)
        if isinstance(theirs, property) or isinstance(ours, property):
            if not (isinstance(theirs, property) and isinstance(ours, property)):
                problems.append(f"{name}: a property on one side only")
            continue
        if inspect.iscoroutinefunction(ours):
            problems.append(f"{name}: still async")
        expected = inspect.signature(theirs, eval_str=True)
        found = inspect.signature(ours, eval_str=True)
        if found != expected:
            problems.append(f"{name}: {found} is not {expected}")
    for name in sorted(excluded - public(async_cls)):
        problems.append(f"{name}: in the exclusion set, but no such member")
    return problems


def test_the_facade_offers_every_store_operation_or_excludes_it() -> None:
    """A new operation of ``CheckedStore`` fails here until ``SyncStore`` wraps it (same
    signature, blocking) or ``a2pg.sync.EXCLUDED`` names it."""
    assert mismatches(SyncStore, CheckedStore, EXCLUDED) == []
    assert mismatches(SyncPresence, Presence, frozenset()) == []


def test_the_facade_adds_nothing_but_its_own_settings() -> None:
    extras = public(SyncStore) - public(CheckedStore)
    assert extras == {"entering", "timeout", "closed"}
    assert EXCLUDED == WORKER_ONLY | LIVE_FEEDS
    assert not WORKER_ONLY & LIVE_FEEDS


class _Async(ABC):
    @abstractmethod
    async def op(self, x: int, *, y: str = "a") -> int: ...

    @abstractmethod
    async def typed(self, x: int) -> int: ...

    @abstractmethod
    async def gone(self) -> None: ...

    @abstractmethod
    async def left_out(self) -> None: ...

    @abstractmethod
    async def same(self, x: int) -> None: ...


class _Sync:
    def op(self, x: int, *, y: str = "b") -> int:
        return x

    def typed(self, x: str) -> int:
        return 0

    async def same(self, x: int) -> None:
        return None

    def left_out(self) -> None:
        return None


def test_the_surface_check_sees_every_kind_of_drift() -> None:
    """The checker itself: a test that cannot fail is a defect."""
    problems = mismatches(_Sync, _Async, frozenset({"left_out", "no_such"}))
    assert [p.partition(":")[0] for p in problems] == [
        "gone",
        "left_out",
        "op",
        "same",
        "typed",
        "no_such",
    ]
    assert "still async" in problems[3]


# -- the operations, on every backend ------------------------------------------------------


def test_every_operation_answers_as_the_store_does(sync_store: SyncStore, clock: FakeClock) -> None:
    store = sync_store
    store.register_consumers([AUDIT])
    assert store.registered_consumers() == [AUDIT]
    appended = store.append(
        "s",
        [
            ev("user.message", {"n": 1}, to=[Target("c", "l")]),
            ev("note", {"n": 2}),
            ev("user.message", {"n": 3}),
        ],
        consumers=[AUDIT],
    )
    assert [e.index for e in appended.events] == [1, 2, 3]
    assert appended.has_pending
    assert all(isinstance(e, StoredEvent) for e in appended.events)
    # Every parameter reaches the store: each one changes the answer.
    assert [e.index for e in store.read("s")] == [1, 2, 3]
    assert [e.index for e in store.read("s", after=1)] == [2, 3]
    assert [e.index for e in store.read("s", through=2)] == [1, 2]
    assert [e.index for e in store.read("s", types=["note"])] == [2]
    assert [e.index for e in store.read("s", limit=1)] == [1]
    assert {(c.consumer, c.lane) for c in store.cursors("s")} == {("audit", "log"), ("c", "l")}
    assert store.wake_log("s", AUDIT).head == 3
    assert [info.session_id for info in store.sessions()] == ["s"]
    assert store.sessions(after="s") == []
    store.append("t", [ev()])
    assert [info.session_id for info in store.sessions(limit=1)] == ["s"]

    store.put_snapshots("s", "sum", [SnapshotWrite(2, {"sum": 3})])
    state = store.read_state("s", "sum")
    assert (state.snapshot_index, state.state, [e.index for e in state.events]) == (
        2,
        {"sum": 3},
        [3],
    )
    assert store.read_state("s", "sum", through=1).snapshot_index == 0

    cancelled = store.cancel_head("s", consumer="c", lane="l", index=1, action="dead_letter")
    assert cancelled == CancelResult(True, None, cancelled.has_pending)
    assert [h.index for h in store.dead_letters("s")] == [1]
    assert [h.session_id for h in store.find_dead_letters(DeadLetterQuery(consumer="c"))] == ["s"]
    assert store.find_dead_letters(DeadLetterQuery(consumer="nobody")) == []
    assert store.redrive("s", consumer="c", index=1, action="skip", lane="l").redriven
    assert store.dead_letters("s") == []
    assert not store.redrive("s", consumer="c", index=1, action="retry").redriven

    store.pause_consumers(["audit"])
    assert {s.consumer: s.paused for s in store.consumer_stats()}["audit"]
    store.resume_consumers(["audit"])
    assert not {s.consumer: s.paused for s in store.consumer_stats()}["audit"]
    assert store.backfill("audit") is None  # registered without backfill
    store.register_consumers([log_consumer("audit", types=["user.message"], backfill=True)])
    progress = store.backfill("audit", limit=1)
    assert progress is not None and progress.sessions == 1 and progress.after == "s"

    store.append("later", [ev(to=[Target("c", "l", not_before=timedelta(seconds=90))])])
    assert store.next_due_in() == 90
    assert store.next_due_in(consumers=[Consumer("other")]) is None
    assert store.workers() == []
    store.forget_workers(["nobody"])

    when = clock()
    assert store.presence.write("room", "ann", {"typing": True}, at=when, seen=1, ttl=30) == {
        "typing": True
    }
    [row] = store.presence.read("room")
    assert (row.participant, row.field, row.value, row.seen) == ("ann", "typing", True, 1)

    cleared = store.clear("s", if_last_index=3)
    assert (cleared.cleared, cleared.index, cleared.clear_index) == (True, 4, 4)
    assert not store.clear("s", if_last_index=99).cleared
    reclaimed = store.reclaim("s")
    assert reclaimed.deleted == 3 and reclaimed.done
    store.unregister_consumers(["audit"])
    assert store.registered_consumers() == []


def reference_error(call: Callable[[MemoryStore], Any]) -> A2Error:
    """What the async store itself raises for the call, on a fresh MemoryStore."""

    async def run() -> A2Error:
        store = MemoryStore()
        try:
            await call(store)
        except A2Error as exc:
            return exc
        finally:
            await store.close()
        raise AssertionError("the async store accepted it")

    return asyncio.run(run())


BAD_CALLS: list[tuple[str, Callable[[Any], Any]]] = [
    ("empty session id", lambda s: s.append("", [ev()])),
    ("reserved type", lambda s: s.append("s", [ev("a2.cleared")])),
    ("events not a list", lambda s: s.append("s", "not events")),
    ("negative after", lambda s: s.read("s", after=-1)),
    ("zero limit", lambda s: s.sessions(limit=0)),
    ("unknown action", lambda s: s.redrive("s", consumer="c", index=1, action="again")),
    ("snapshot past the head", lambda s: s.put_snapshots("s", "r", [SnapshotWrite(5, 1)])),
    (
        "presence ttl",
        lambda s: s.presence.write("ns", "p", {"f": 1}, at=datetime.now(UTC), seen=1, ttl=-1),
    ),
]


@pytest.mark.parametrize(("what", "call"), BAD_CALLS, ids=[what for what, _ in BAD_CALLS])
def test_bad_arguments_come_through_unchanged_and_write_nothing(
    sync_store: SyncStore, what: str, call: Callable[[Any], Any]
) -> None:
    expected = reference_error(call)
    with pytest.raises(InvalidArgument) as caught:
        call(sync_store)
    assert type(caught.value) is type(expected) is InvalidArgument
    assert (caught.value.code, caught.value.message) == (expected.code, expected.message)
    assert sync_store.sessions() == []
    assert sync_store.read("s") == []
    assert sync_store.presence.read("ns") == []


def test_contract_errors_come_through_unchanged(sync_store: SyncStore) -> None:
    sync_store.append("s", [ev(id="a")])
    with pytest.raises(PartialDuplicateBatch) as caught:
        sync_store.append("s", [ev(id="a"), ev(id="b")])
    assert caught.value.code == "PARTIAL_DUPLICATE_BATCH"
    assert [e.id for e in sync_store.read("s")] == ["a"]


def test_many_threads_may_call_at_once(sync_store: SyncStore) -> None:
    threads, each = 4, 8

    def work(worker: int) -> None:
        for n in range(each):
            sync_store.append("shared", [NewEvent("note", {"worker": worker, "n": n})])
            sync_store.append(f"own-{worker}", [NewEvent("note", n)])

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(work, range(threads)))
    shared = sync_store.read("shared")
    assert [e.index for e in shared] == list(range(1, threads * each + 1))
    for worker in range(threads):
        mine = [e.payload["n"] for e in shared if e.payload["worker"] == worker]
        assert mine == list(range(each))  # each thread's calls in its own order
        assert [e.payload for e in sync_store.read(f"own-{worker}")] == list(range(each))


# -- deadlines ----------------------------------------------------------------------------


class Stalled(StoreProxy):
    """A store whose reads never answer (a database gone silent, on any backend): the
    facade's deadline must cancel them. Every other call is the store's own."""

    def __init__(self, inner: CheckedStore) -> None:
        super().__init__(inner)
        self.cancelled = threading.Event()

    async def _read(self, args: ReadArgs) -> list[StoredEvent]:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        raise AssertionError("slept an hour")


def test_a_call_past_the_deadline_is_cancelled_and_raises(open_sync: OpenSync) -> None:
    stalled: list[Stalled] = []

    def wrap(store: CheckedStore) -> CheckedStore:
        stalled.append(Stalled(store))
        return stalled[0]

    facade = open_sync(timeout=0.2, wrap=wrap)
    assert facade.timeout == 0.2
    facade.append("s", [ev()])
    started = time.monotonic()
    with pytest.raises(StoreUnavailable) as caught:
        facade.read("s")
    assert time.monotonic() - started < 30  # it ended at the deadline, not after an hour
    assert caught.value.code == "STORE_UNAVAILABLE"
    assert "within 0.2s" in caught.value.message and "cancelled" in caught.value.message
    assert stalled[0].cancelled.wait(10), "the stalled coroutine was not cancelled"
    assert facade.append("s", [ev()]).events[0].index == 2  # the facade goes on


@pytest.mark.parametrize("timeout", [0, -1, float("nan"), float("inf"), True, "60", None])
def test_a_bad_timeout_is_refused_before_anything_opens(timeout: Any) -> None:
    opened: list[MemoryStore] = []

    async def factory() -> CheckedStore:
        opened.append(MemoryStore())
        return opened[-1]

    threads = loop_threads()
    with pytest.raises(InvalidArgument, match="timeout must be a positive number"):
        SyncStore(factory, timeout=timeout)
    with pytest.raises(InvalidArgument, match="timeout must be a positive number"):
        open_sync_store("never.db", timeout=timeout)
    assert opened == [] and loop_threads() == threads


# -- closing ------------------------------------------------------------------------------

CALLS: dict[str, Callable[[SyncStore], Any]] = {
    "append": lambda s: s.append("s", [ev()]),
    "read": lambda s: s.read("s"),
    "wake_log": lambda s: s.wake_log("s", AUDIT),
    "cursors": lambda s: s.cursors("s"),
    "sessions": lambda s: s.sessions(),
    "dead_letters": lambda s: s.dead_letters("s"),
    "redrive": lambda s: s.redrive("s", consumer="c", index=1, action="retry"),
    "cancel_head": lambda s: s.cancel_head("s", consumer="c", index=1, action="skip"),
    "attempts": lambda s: s.attempts("s", consumer="c", index=1),
    "prune_attempts": lambda s: s.prune_attempts(before=datetime(2000, 1, 1, tzinfo=UTC)),
    "activity": lambda s: s.activity(since=datetime(2000, 1, 1, tzinfo=UTC)),
    "read_state": lambda s: s.read_state("s", "r"),
    "put_snapshots": lambda s: s.put_snapshots("s", "r", [SnapshotWrite(1, 1)]),
    "clear": lambda s: s.clear("s"),
    "reclaim": lambda s: s.reclaim("s"),
    "register_consumers": lambda s: s.register_consumers([AUDIT]),
    "unregister_consumers": lambda s: s.unregister_consumers(["audit"]),
    "pause_consumers": lambda s: s.pause_consumers(["c"]),
    "resume_consumers": lambda s: s.resume_consumers(["c"]),
    "registered_consumers": lambda s: s.registered_consumers(),
    "backfill": lambda s: s.backfill("audit"),
    "find_dead_letters": lambda s: s.find_dead_letters(DeadLetterQuery()),
    "find_heads": lambda s: s.find_heads(HeadQuery()),
    "consumer_stats": lambda s: s.consumer_stats(),
    "next_due_in": lambda s: s.next_due_in(),
    "workers": lambda s: s.workers(),
    "forget_workers": lambda s: s.forget_workers(["w"]),
    "record_audit": lambda s: s.record_audit(AuditEntry("ops", "pause", consumer="c")),
    "audit_log": lambda s: s.audit_log(),
}
"""One call of each operation the facade offers (``close`` and ``presence`` aside)."""


def test_every_offered_operation_has_a_call_here() -> None:
    offered = public(CheckedStore) - EXCLUDED - {"close", "presence"}
    assert set(CALLS) == offered


def test_close_closes_the_store_and_every_later_call_is_refused(open_sync: OpenSync) -> None:
    inner: list[CheckedStore] = []

    def keep(store: CheckedStore) -> CheckedStore:
        inner.append(store)
        return store

    threads = loop_threads()
    facade = open_sync(wrap=keep)
    assert loop_threads() == threads + 1 and not facade.closed
    facade.append("s", [ev()])
    facade.close()
    facade.close()  # again: nothing
    assert facade.closed and loop_threads() == threads
    for name, call in CALLS.items():
        with pytest.raises(StoreUnavailable, match="closed"):
            call(facade)
        assert name
    with pytest.raises(StoreUnavailable, match="closed"):
        facade.presence.read("ns")
    # The async store was closed with it.
    with pytest.raises(StoreUnavailable, match="closed"):
        asyncio.run(inner[0].read("s"))


def test_the_context_manager_closes(open_sync: OpenSync) -> None:
    with open_sync() as facade:
        facade.append("s", [ev()])
    assert facade.closed
    with pytest.raises(StoreUnavailable):
        facade.read("s")


def test_a_factory_that_fails_raises_its_error_and_leaves_no_thread() -> None:
    threads = loop_threads()

    async def refuse() -> CheckedStore:
        raise StoreNotConfigured(message="no layout here")

    with pytest.raises(StoreNotConfigured, match="no layout here"):
        SyncStore(refuse)

    async def not_a_store() -> Any:
        return object()

    with pytest.raises(TypeError, match="a SyncStore wraps an a2pg store, not object"):
        SyncStore(not_a_store)
    assert loop_threads() == threads


# -- hazards ------------------------------------------------------------------------------


async def test_a_call_from_a_running_event_loop_is_refused(sync_store: SyncStore) -> None:
    with pytest.raises(SyncMisuse) as caught:
        sync_store.append("s", [ev()])
    assert str(caught.value) == IN_A_LOOP and "await the async store" in IN_A_LOOP
    with pytest.raises(SyncMisuse):
        sync_store.presence.read("ns")
    with pytest.raises(SyncMisuse):
        sync_store.close()
    opened: list[MemoryStore] = []

    async def factory() -> CheckedStore:
        opened.append(MemoryStore())
        return opened[-1]

    threads = loop_threads()
    with pytest.raises(SyncMisuse):
        SyncStore(factory)
    assert opened == [] and loop_threads() == threads
    # From a thread of its own, async code may call it (nothing was written before).
    assert await asyncio.to_thread(sync_store.read, "s") == []
    assert not sync_store.closed


def test_a_call_from_the_facades_own_loop_is_refused() -> None:
    """A clock (or any store callback) calling the facade would wait for its own loop."""
    facades: list[SyncStore] = []

    def clock() -> datetime:
        if facades:
            facades[0].sessions()
        return datetime.now(UTC)

    async def factory() -> CheckedStore:
        return MemoryStore(clock=clock)

    with SyncStore(factory, timeout=10) as facade:
        facades.append(facade)
        with pytest.raises(SyncMisuse) as caught:
            facade.append("s", [ev()])
        assert str(caught.value) == IN_ITS_LOOP
        facades.clear()
        assert facade.append("s", [ev()]).events[0].index == 1


def test_a_forked_child_is_refused_and_leaves_the_parent_working(sync_store: SyncStore) -> None:
    sync_store.append("s", [ev()])
    read_end, write_end = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads (3.12 on)
        pid = os.fork()
    if pid == 0:  # the child: report, then leave without pytest's teardown
        code = 1
        try:
            os.close(read_end)
            try:
                sync_store.read("s")
                outcome = "answered"
            except BaseException as exc:
                outcome = f"{type(exc).__name__}: {exc}"
            sync_store.close()  # only this copy: never the parent's connections
            outcome += f"\nclosed={sync_store.closed}"
            os.write(write_end, outcome.encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        report = pipe.read().decode()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, report
    assert report == f"SyncMisuse: {FORKED}\nclosed=True"
    # The parent's facade and its store's connections are untouched.
    assert not sync_store.closed
    assert sync_store.append("s", [ev()]).events[0].index == 2
    assert [e.index for e in sync_store.read("s")] == [1, 2]


# -- opening from a DSN or a path ---------------------------------------------------------


def test_open_opens_a_sqlite_file_by_path_or_string(
    sqlite_template: SqliteTemplate, tmp_path: Path
) -> None:
    path = sqlite_template.copy(tmp_path)
    with open_sync_store(path) as facade:
        facade.append("s", [ev("note", {"n": 1})])
    with open_sync_store(str(path), timeout=5) as again:
        assert again.timeout == 5
        assert [e.payload for e in again.read("s")] == [{"n": 1}]


def test_open_opens_a_postgres_dsn(postgres_dsn: str, postgres_schema: str) -> None:
    with open_sync_store(postgres_dsn, schema=postgres_schema) as facade:
        facade.append("s", [ev("note", {"n": 1})])
    with open_sync_store(postgres_dsn, schema=postgres_schema, prepare=False) as again:
        assert [e.payload for e in again.read("s")] == [{"n": 1}]


def test_open_refuses_an_unmigrated_file_and_leaves_no_thread(tmp_path: Path) -> None:
    threads = loop_threads()
    with pytest.raises(StoreNotConfigured, match="a2pg migrate"):
        open_sync_store(tmp_path / "none.db")
    assert loop_threads() == threads


@pytest.mark.parametrize(
    ("target", "options", "message"),
    [
        ("", {}, "needs a PostgreSQL DSN or a SQLite file"),
        ("  ", {}, "needs a PostgreSQL DSN or a SQLite file"),
        (7, {}, "needs a PostgreSQL DSN or a SQLite file"),
        ("a\x00.db", {}, "needs a PostgreSQL DSN or a SQLite file"),
        ("a2.db", {"schema": "a2"}, "schema: PostgreSQL settings"),
        (Path("a2.db"), {"pooler": "none", "prepare": False}, "pooler, prepare: PostgreSQL"),
        ("postgresql://u:p@ss@host/db", {}, "malformed DSN"),
        ("postgresql://u@host/db", {"pooler": "sometimes"}, "pooler"),
    ],
)
def test_open_refuses_bad_targets_before_anything_connects(
    target: Any, options: dict[str, Any], message: str
) -> None:
    threads = loop_threads()
    with pytest.raises(InvalidArgument, match=message) as caught:
        open_sync_store(target, **options)
    assert "p@ss" not in str(caught.value)  # a DSN's password is never shown
    assert loop_threads() == threads


def test_a_store_error_at_the_deadline_is_not_taken_for_the_deadline() -> None:
    """A store's own TimeoutError (it is ``concurrent.futures.TimeoutError`` too) comes
    through as it was raised, not as the facade's deadline."""

    class Impatient(StoreProxy):
        async def _read(self, args: ReadArgs) -> list[StoredEvent]:
            raise TimeoutError("the store's own")

    async def factory() -> CheckedStore:
        return Impatient(MemoryStore())

    with SyncStore(factory) as facade, pytest.raises(TimeoutError, match="the store's own"):
        facade.read("s")


def test_the_store_runs_on_its_own_clock(open_sync: OpenSync, clock: FakeClock) -> None:
    """The store runs on its own clock in the facade's loop: advancing a FakeClock from the
    caller's thread is seen by the next call."""
    facade = open_sync()
    first = facade.append("s", [ev()]).events[0].created_at
    clock.advance(60)
    second = facade.append("s", [ev()]).events[0].created_at
    assert second - first == timedelta(seconds=60)


def test_a_call_runs_in_the_callers_context(sync_store: SyncStore) -> None:
    """What the caller's thread carries (its trace context) reaches the store: an append
    stores the caller's traceparent, not the loop thread's nothing."""
    from a2pg import NewEvent
    from a2pg.contract.propagation import carry

    traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    with carry(traceparent):
        [event] = sync_store.append("ctx", [NewEvent("a")]).events
    assert event.trace_parent == traceparent
    [plain] = sync_store.append("ctx", [NewEvent("b")]).events
    assert plain.trace_parent is None
