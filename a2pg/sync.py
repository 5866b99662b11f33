"""A synchronous front over any a2pg store, for code that cannot await (Django, Flask,
scripts, a REPL).

A ``SyncStore`` owns one event loop, run by a daemon thread of its own. The async store
is opened in that loop (a psycopg pool binds to the loop it was made in, and so do the
stores' feeds), and every method submits the async store's matching coroutine to it
and waits for the answer, at most ``timeout`` seconds. Nothing here is store logic:
arguments, checks, answers and errors are the async store's own, passed through
unchanged, so the facade cannot drift from the contract (``tests/test_sync.py`` ties
its methods to ``CheckedStore``'s signatures).

Many threads may call one facade at once: the loop runs their calls concurrently, as it
would run many tasks of an async program. What cannot work is refused with
``SyncMisuse`` rather than left to hang: a call from a thread that runs an event loop
(it would block that loop: use the async store there), from the facade's own loop
(it would wait for itself), and in a child process after ``os.fork()`` (the loop's
thread and the store's connections are the parent's).

The worker's calls (claims, leases, completions, failures, heartbeats) and the live
feeds (``stream``, ``wakeups``) are left out on purpose: ``EXCLUDED`` lists them.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import math
import os
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import TypeVar

from . import backends
from .errors import StoreUnavailable, invalid, store_closed
from .front import CheckedStore
from .models import (
    ANY_LANE,
    JSON,
    ActivityPoint,
    AnyLane,
    AppendResult,
    AttemptRecord,
    AttemptRef,
    AuditEntry,
    BackfillProgress,
    CancelAction,
    CancelResult,
    ClearResult,
    Consumer,
    ConsumerStats,
    Cursor,
    DeadLetterQuery,
    FoundHead,
    Head,
    HeadQuery,
    NewEvent,
    PresenceRow,
    ReclaimResult,
    RedriveAction,
    RedriveResult,
    SessionInfo,
    SnapshotWrite,
    StateRead,
    StoredEvent,
    WakeLogResult,
    WorkerInfo,
)

T = TypeVar("T")

DEFAULT_TIMEOUT = 60.0
"""Seconds a facade call waits for its answer before it is cancelled (``STORE_UNAVAILABLE``).
A PostgreSQL store's own ``call_timeout`` (30 s by default) usually ends a stuck call
first; this deadline also covers what it does not (a pool wait, SQLite, a custom store)."""

WORKER_ONLY = frozenset(
    {
        *("claim_available", "claim_any", "renew_claims", "release_claims"),
        *("complete_attempt", "complete_attempts", "complete_and_claim", "fail_attempt"),
        "heartbeat",
    }
)
"""What only a worker calls: a claim lives under a lease that someone must renew and end,
which is the async worker's job (``a2pg worker``), never a request handler's."""

LIVE_FEEDS = frozenset({"stream", "wakeups"})
"""Async iterators that run until closed: a blocking front would pin a thread per feed."""

EXCLUDED = WORKER_ONLY | LIVE_FEEDS
"""Public members of ``CheckedStore`` the facade does not offer. Every other public
member (``close`` and ``presence`` included) is a method of ``SyncStore`` with the same
parameters and answer; ``tests/test_sync.py`` fails when a new store operation is in
neither."""

Opener = Callable[[], contextlib.AbstractAsyncContextManager[CheckedStore]]
"""Makes an async context manager that opens a store on entry and closes it on exit."""

Factory = Callable[[], Awaitable[CheckedStore]]
"""A coroutine function that opens a store (closed by the facade's ``close``)."""


class SyncMisuse(RuntimeError):
    """A facade called where it cannot work: from a thread running an event loop, from its
    own loop, or in a process forked after it was opened. A bug in the calling code, not
    an outage: not an ``A2Error``, so nothing retries it as one."""


IN_A_LOOP = (
    "a2pg.sync.SyncStore called from a thread that runs an event loop: the call would "
    "block that loop until the store answers. In async code, await the async store "
    "(MemoryStore, PostgresStore, SqliteStore) instead"
)
IN_ITS_LOOP = (
    "a2pg.sync.SyncStore called from its own event loop's thread (a store callback or "
    "clock calling the facade): it would wait for itself forever"
)
FORKED = (
    "a2pg.sync.SyncStore used in a child process after os.fork(): its loop thread and "
    "its store's connections belong to the parent. Open a new SyncStore in the child"
)


def check_timeout(value: object) -> float:
    """A positive, finite number of seconds (``INVALID_ARGUMENT`` otherwise)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise invalid(f"timeout must be a positive number of seconds: got {value!r}")
    seconds = float(value)
    if not math.isfinite(seconds) or seconds <= 0:
        raise invalid(f"timeout must be a positive number of seconds: got {value!r}")
    return seconds


def timed_out(seconds: float) -> StoreUnavailable:
    """What a call past the facade's deadline raises: an outage, as a PostgreSQL
    ``call_timeout`` is (``a2pg.postgres.CallTimeout`` is psycopg's, not every backend's)."""
    return StoreUnavailable(
        message=(
            f"the store did not answer within {seconds:g}s (the SyncStore's timeout): "
            "the call was cancelled, and a write it was making may or may not have committed"
        )
    )


def refuse_running_loop() -> None:
    """``SyncMisuse`` in a thread that runs an event loop: blocking there stalls it."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise SyncMisuse(IN_A_LOOP)


def _require_store(store: object) -> CheckedStore:
    if not isinstance(store, CheckedStore):
        raise TypeError(f"a SyncStore wraps an a2pg store, not {type(store).__name__}")
    return store


@contextlib.asynccontextmanager
async def _closing(factory: Factory) -> AsyncIterator[CheckedStore]:
    store = await factory()
    _require_store(store)
    try:
        yield store
    finally:
        await store.close()


class SyncStore:
    """A blocking front over one async a2pg store (see the module's docstring).

    ``SyncStore(factory)`` calls ``factory()`` (a coroutine function returning a store)
    in the facade's loop, and closes that store in ``close``: the way to wrap a
    ``MemoryStore`` or a store opened with options of your own, e.g.
    ``SyncStore(lambda: PostgresStore.open(dsn, call_timeout=5))``. ``a2pg.sync.open``
    opens a PostgreSQL DSN or a SQLite file as the CLI does.

    Each call waits at most ``timeout`` seconds; past that it is cancelled and raises
    ``STORE_UNAVAILABLE``. After ``close`` every call is ``STORE_UNAVAILABLE``, like the
    async store's.
    """

    def __init__(self, factory: Factory, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self._start(lambda: _closing(factory), timeout)

    @classmethod
    def entering(cls, opener: Opener, *, timeout: float = DEFAULT_TIMEOUT) -> SyncStore:
        """The store ``opener()`` yields on entry, in the facade's loop; ``close`` exits it.
        For async context managers that open a store (the registry's sites do)."""
        facade = cls.__new__(cls)
        facade._start(opener, timeout)
        return facade

    def _start(self, opener: Opener, timeout: float) -> None:
        self._timeout = check_timeout(timeout)
        refuse_running_loop()
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._closed = False
        self._exits = contextlib.AsyncExitStack()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run_loop, name="a2pg sync store", daemon=True)
        self._thread.start()
        self._presence = SyncPresence(self)
        try:
            self._store = self._wait(
                asyncio.run_coroutine_threadsafe(self._open(opener), self._loop)
            )
        except BaseException:
            self._closed = True
            self._stop_loop()
            raise

    async def _open(self, opener: Opener) -> CheckedStore:
        try:
            store = _require_store(await self._exits.enter_async_context(opener()))
        except BaseException:
            await self._exits.aclose()
            raise
        return store

    def _run_loop(self) -> None:
        """The loop's thread: runs until ``close`` stops it, then ends what is left."""
        loop = self._loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
        finally:
            try:
                tasks = asyncio.all_tasks(loop)
                for task in tasks:
                    task.cancel()
                loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.run_until_complete(loop.shutdown_default_executor())
            finally:
                asyncio.set_event_loop(None)
                loop.close()

    def _stop_loop(self) -> None:
        with contextlib.suppress(RuntimeError):  # the loop already closed
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(self._timeout)

    # -- calls -----------------------------------------------------------------------------

    def _refuse_misuse(self) -> None:
        """A call that cannot work here: after a fork, in the loop's thread, in a loop."""
        if os.getpid() != self._pid:
            raise SyncMisuse(FORKED)
        if self._closed:
            raise store_closed()
        if threading.get_ident() == self._thread.ident and self._thread.is_alive():
            raise SyncMisuse(IN_ITS_LOOP)
        refuse_running_loop()

    def _call(self, call: Callable[[CheckedStore], Awaitable[T]]) -> T:
        """``await call(store)`` in the facade's loop, waited for from this thread."""
        self._refuse_misuse()
        with self._lock:
            if self._closed:
                raise store_closed()
            context = contextvars.copy_context()
            future = asyncio.run_coroutine_threadsafe(self._invoke(call, context), self._loop)
        return self._wait(future)

    async def _invoke(
        self, call: Callable[[CheckedStore], Awaitable[T]], context: contextvars.Context
    ) -> T:
        """Runs the call in the caller's context (a copy), so what it carries (the current
        trace span, which ``append`` stores with the events) is the caller's thread's."""

        async def run() -> T:
            return await call(self._store)

        return await asyncio.get_running_loop().create_task(run(), context=context)

    def _wait(self, future: concurrent.futures.Future[T]) -> T:
        """The answer, or the async store's error as it raised it; past the deadline the
        call is cancelled (a call cancelled by ``close`` reads as the store closed)."""
        try:
            return future.result(self._timeout)
        except concurrent.futures.TimeoutError:
            if future.cancel():
                raise timed_out(self._timeout) from None
            if future.cancelled():
                raise store_closed() from None
            return future.result()  # it finished meanwhile, or raised TimeoutError itself
        except concurrent.futures.CancelledError:
            raise store_closed() from None
        except BaseException:  # the store's error, or an interrupt of this thread's wait
            future.cancel()
            raise

    @property
    def timeout(self) -> float:
        """Seconds each call waits for its answer."""
        return self._timeout

    @property
    def closed(self) -> bool:
        """Whether ``close`` was called on this facade (in this process)."""
        return self._closed

    def close(self) -> None:
        """Closes the async store in the loop, then stops the loop and joins its thread.
        Closing again does nothing. In a forked child it only marks this copy closed: the
        store's connections are the parent's, and closing them would end the parent's."""
        if os.getpid() != self._pid or self._closed:
            self._closed = True
            return
        self._refuse_misuse()
        with self._lock:
            if self._closed:
                return
            self._closed = True
            future = asyncio.run_coroutine_threadsafe(self._exits.aclose(), self._loop)
        try:
            self._wait(future)
        finally:
            self._stop_loop()

    def __enter__(self) -> SyncStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def presence(self) -> SyncPresence:
        """The store's presence, blocking (refused once closed, like the async one)."""
        if self._closed:
            raise store_closed()
        return self._presence

    # -- the log ---------------------------------------------------------------------------

    def append(
        self,
        session_id: str,
        events: Sequence[NewEvent],
        *,
        consumers: Sequence[Consumer] | None = None,
        origin_index: int | None = None,
    ) -> AppendResult:
        """``CheckedStore.append``, blocking."""
        return self._call(
            lambda store: store.append(
                session_id, events, consumers=consumers, origin_index=origin_index
            )
        )

    def read(
        self,
        session_id: str,
        *,
        after: int | None = None,
        through: int | None = None,
        types: Sequence[str] | None = None,
        limit: int | None = None,
    ) -> list[StoredEvent]:
        """``CheckedStore.read``, blocking."""
        return self._call(
            lambda store: store.read(
                session_id, after=after, through=through, types=types, limit=limit
            )
        )

    def wake_log(self, session_id: str, consumer: Consumer) -> WakeLogResult:
        """``CheckedStore.wake_log``, blocking."""
        return self._call(lambda store: store.wake_log(session_id, consumer))

    def cursors(self, session_id: str) -> list[Cursor]:
        """``CheckedStore.cursors``, blocking."""
        return self._call(lambda store: store.cursors(session_id))

    def sessions(self, *, after: str | None = None, limit: int = 100) -> list[SessionInfo]:
        """``CheckedStore.sessions``, blocking."""
        return self._call(lambda store: store.sessions(after=after, limit=limit))

    # -- dead letters and heads ------------------------------------------------------------

    def dead_letters(self, session_id: str) -> list[Head]:
        """``CheckedStore.dead_letters``, blocking."""
        return self._call(lambda store: store.dead_letters(session_id))

    def attempts(
        self,
        session_id: str,
        *,
        consumer: str,
        index: int,
        lane: str | AnyLane | None = ANY_LANE,
    ) -> list[AttemptRecord]:
        """``CheckedStore.attempts``, blocking."""
        return self._call(
            lambda store: store.attempts(session_id, consumer=consumer, index=index, lane=lane)
        )

    def activity(self, *, since: datetime, bucket: float = 60.0) -> list[ActivityPoint]:
        """``CheckedStore.activity``, blocking."""
        return self._call(lambda store: store.activity(since=since, bucket=bucket))

    def prune_attempts(self, *, before: datetime, limit: int = 10_000) -> int:
        """``CheckedStore.prune_attempts``, blocking."""
        return self._call(lambda store: store.prune_attempts(before=before, limit=limit))

    def redrive(
        self,
        session_id: str,
        *,
        consumer: str,
        index: int,
        action: RedriveAction,
        consumers: Sequence[Consumer] | None = None,
        lane: str | AnyLane | None = ANY_LANE,
    ) -> RedriveResult:
        """``CheckedStore.redrive``, blocking."""
        return self._call(
            lambda store: store.redrive(
                session_id,
                consumer=consumer,
                index=index,
                action=action,
                consumers=consumers,
                lane=lane,
            )
        )

    def cancel_head(
        self,
        session_id: str,
        *,
        consumer: str,
        index: int,
        action: CancelAction,
        consumers: Sequence[Consumer] | None = None,
        lane: str | AnyLane | None = ANY_LANE,
    ) -> CancelResult:
        """``CheckedStore.cancel_head``, blocking."""
        return self._call(
            lambda store: store.cancel_head(
                session_id,
                consumer=consumer,
                index=index,
                action=action,
                consumers=consumers,
                lane=lane,
            )
        )

    # -- snapshots -------------------------------------------------------------------------

    def read_state(self, session_id: str, reducer: str, *, through: int | None = None) -> StateRead:
        """``CheckedStore.read_state``, blocking."""
        return self._call(lambda store: store.read_state(session_id, reducer, through=through))

    def put_snapshots(self, session_id: str, reducer: str, writes: Sequence[SnapshotWrite]) -> None:
        """``CheckedStore.put_snapshots``, blocking."""
        self._call(lambda store: store.put_snapshots(session_id, reducer, writes))

    # -- clear and reclaim -----------------------------------------------------------------

    def clear(
        self,
        session_id: str,
        *,
        if_last_index: int | None = None,
        cause: AttemptRef | None = None,
    ) -> ClearResult:
        """``CheckedStore.clear``, blocking."""
        return self._call(
            lambda store: store.clear(session_id, if_last_index=if_last_index, cause=cause)
        )

    def reclaim(self, session_id: str) -> ReclaimResult:
        """``CheckedStore.reclaim``, blocking."""
        return self._call(lambda store: store.reclaim(session_id))

    # -- consumer registry -----------------------------------------------------------------

    def register_consumers(self, consumers: Sequence[Consumer]) -> None:
        """``CheckedStore.register_consumers``, blocking."""
        self._call(lambda store: store.register_consumers(consumers))

    def unregister_consumers(self, names: Sequence[str]) -> None:
        """``CheckedStore.unregister_consumers``, blocking."""
        self._call(lambda store: store.unregister_consumers(names))

    def pause_consumers(self, names: Sequence[str]) -> None:
        """``CheckedStore.pause_consumers``, blocking."""
        self._call(lambda store: store.pause_consumers(names))

    def resume_consumers(self, names: Sequence[str]) -> None:
        """``CheckedStore.resume_consumers``, blocking."""
        self._call(lambda store: store.resume_consumers(names))

    def registered_consumers(self) -> list[Consumer]:
        """``CheckedStore.registered_consumers``, blocking."""
        return self._call(lambda store: store.registered_consumers())

    def backfill(self, consumer: str, *, limit: int = 100) -> BackfillProgress | None:
        """``CheckedStore.backfill``, blocking (one batch per call, as there)."""
        return self._call(lambda store: store.backfill(consumer, limit=limit))

    # -- monitoring ------------------------------------------------------------------------

    def find_dead_letters(self, query: DeadLetterQuery) -> list[Head]:
        """``CheckedStore.find_dead_letters``, blocking."""
        return self._call(lambda store: store.find_dead_letters(query))

    def find_heads(self, query: HeadQuery) -> list[FoundHead]:
        """``CheckedStore.find_heads``, blocking."""
        return self._call(lambda store: store.find_heads(query))

    def consumer_stats(self) -> list[ConsumerStats]:
        """``CheckedStore.consumer_stats``, blocking."""
        return self._call(lambda store: store.consumer_stats())

    def next_due_in(self, *, consumers: Sequence[Consumer] | None = None) -> float | None:
        """``CheckedStore.next_due_in``, blocking."""
        return self._call(lambda store: store.next_due_in(consumers=consumers))

    def workers(self) -> list[WorkerInfo]:
        """``CheckedStore.workers``, blocking."""
        return self._call(lambda store: store.workers())

    def forget_workers(self, holders: Sequence[str]) -> None:
        """``CheckedStore.forget_workers``, blocking."""
        self._call(lambda store: store.forget_workers(holders))

    def record_audit(self, entry: AuditEntry) -> AuditEntry:
        """``CheckedStore.record_audit``, blocking."""
        return self._call(lambda store: store.record_audit(entry))

    def audit_log(self, *, after: str | None = None, limit: int = 100) -> list[AuditEntry]:
        """``CheckedStore.audit_log``, blocking."""
        return self._call(lambda store: store.audit_log(after=after, limit=limit))


class SyncPresence:
    """The wrapped store's ``presence``, blocking (``SyncStore.presence``)."""

    def __init__(self, facade: SyncStore) -> None:
        self._facade = facade

    def write(
        self,
        ns: str,
        participant: str,
        values: Mapping[str, JSON],
        *,
        at: datetime,
        seen: JSON,
        ttl: float,
    ) -> dict[str, JSON]:
        """``Presence.write``, blocking."""
        return self._facade._call(
            lambda store: store.presence.write(ns, participant, values, at=at, seen=seen, ttl=ttl)
        )

    def read(self, ns: str) -> list[PresenceRow]:
        """``Presence.read``, blocking."""
        return self._facade._call(lambda store: store.presence.read(ns))


# -- opening from a DSN or a path -----------------------------------------------------------

POSTGRES_SCHEMES = ("postgresql://", "postgres://", "postgresql+")
"""How a PostgreSQL URL starts (``postgresql+psycopg://`` is SQLAlchemy's spelling)."""


def target_options(
    target: str | os.PathLike[str],
    *,
    schema: str | None = None,
    pooler: str | None = None,
    prepare: bool | None = None,
) -> backends.Options:
    """Where ``target`` is, as the registry reads it: a ``Path`` (any ``os.PathLike``) is a
    SQLite file; a string is a PostgreSQL DSN when it is a ``postgres[ql]`` URL or libpq
    ``key=value`` pairs, else a SQLite file's path. ``schema``, ``pooler`` and
    ``prepare`` are PostgreSQL's (refused with a SQLite file)."""
    if isinstance(target, os.PathLike):
        return _sqlite(Path(target), schema=schema, pooler=pooler, prepare=prepare)
    if not isinstance(target, str) or not target.strip() or "\x00" in target:
        raise invalid(f"open() needs a PostgreSQL DSN or a SQLite file's path: got {target!r}")
    if target.lower().startswith(POSTGRES_SCHEMES) or "=" in target:
        return backends.Options(dsn=target, schema=schema, pooler=pooler, prepare=prepare)
    return _sqlite(Path(target), schema=schema, pooler=pooler, prepare=prepare)


def _sqlite(
    path: Path, *, schema: str | None, pooler: str | None, prepare: bool | None
) -> backends.Options:
    settings = (("schema", schema), ("pooler", pooler), ("prepare", prepare))
    given = [name for name, value in settings if value is not None]
    if given:
        raise invalid(
            f"{', '.join(given)}: PostgreSQL settings, not for the SQLite file {str(path)!r}"
        )
    return backends.Options(sqlite=True, path=path)


def open(
    target: str | os.PathLike[str],
    *,
    schema: str | None = None,
    pooler: str | None = None,
    prepare: bool | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> SyncStore:
    """A facade over the store at ``target`` (see ``target_options``), opened through the backend
    registry as ``a2pg`` commands open theirs: checked migrated (``STORE_NOT_CONFIGURED``
    otherwise), a malformed DSN ``INVALID_ARGUMENT`` before anything connects, a
    PostgreSQL pooler and prepare setting from ``A2PG_POOLER``/``A2PG_PREPARE`` when not
    given. For other settings (``call_timeout``, a pool size) open the store yourself:
    ``SyncStore(lambda: PostgresStore.open(dsn, ...))``."""
    check_timeout(timeout)
    site = backends.select(target_options(target, schema=schema, pooler=pooler, prepare=prepare))
    site.check()
    return SyncStore.entering(site.open_store, timeout=timeout)
