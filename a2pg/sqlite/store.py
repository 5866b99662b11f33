"""SqliteStore: the store contract on one SQLite file, for a single machine without a server."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

from ..contract.args import (
    CompletionArgs,
    check_append,
    check_claim_any,
    check_claim_available,
    check_clear,
    check_complete_and_claim,
    check_complete_attempts,
    check_fail_attempt,
    check_find_dead_letters,
    check_forget_workers,
    check_heartbeat,
    check_put_snapshots,
    check_read,
    check_read_state,
    check_redrive,
    check_register_consumers,
    check_release_claims,
    check_renew_claims,
    check_session,
    check_sessions,
    check_stream,
    check_unregister_consumers,
    check_wake_log,
)
from ..contract.limits import DEFAULT_LIMITS, Limits
from ..contract.rules import refuse_log_targets
from ..ids import Clock, IdGenerator, system_clock, uuid7
from ..models import (
    ANY_LANE,
    AnyLane,
    AppendResult,
    AttemptRef,
    ClaimRef,
    ClaimResult,
    ClearResult,
    CompletedAndClaimed,
    CompleteResult,
    Completion,
    Consumer,
    ConsumerStats,
    Cursor,
    DeadLetterQuery,
    FailResult,
    Head,
    NewEvent,
    ReclaimResult,
    RedriveAction,
    RedriveResult,
    ReleaseResult,
    RenewResult,
    SessionInfo,
    SnapshotWrite,
    StateRead,
    StoredEvent,
    WakeLogResult,
    WorkerBeat,
    WorkerInfo,
)
from ..wakeups import Wakeups
from . import claims as claiming
from . import clear, log, monitoring, snapshots
from . import completions as outcomes
from .connection import (
    BUSY_TIMEOUT,
    Connection,
    Synchronous,
    check_interval,
    check_path,
    check_synchronous,
    connect,
    use_wal,
)
from .database import Database
from .layout import LayoutStatus, inspect_connection
from .migrate import upgrade
from .presence import SqlitePresence
from .registry import Registry
from .streams import CHANGE_INTERVAL, Watcher


class SqliteStore:
    """The store contract (SPEC.md section 2) on one SQLite file, in WAL mode.

    Per process, one writer connection runs every write as one ``BEGIN IMMEDIATE``
    transaction (the file's write lock, held from the first statement to the commit:
    processes take turns, and each sees what the others committed before it); one
    reader connection serves reads, which in WAL mode never wait for writers. Each
    connection has a thread of its own, so nothing blocks the event loop. Times come
    from ``clock`` (the system's by default: every process on the machine shares it).

    Streams and wakeups hear this store's own writes at once and other processes'
    within ``change_interval`` (see ``streams``). Build one with :meth:`open`.
    """

    def __init__(
        self,
        writer: Connection,
        reader: Connection,
        *,
        path: Path,
        clock: Clock | None = None,
        ids: IdGenerator | None = None,
        limits: Limits = DEFAULT_LIMITS,
        registry_ttl: float = 1.0,
        poll_interval: float = 1.0,
        change_interval: float = CHANGE_INTERVAL,
    ) -> None:
        self._path = path
        self._limits = limits
        self._db = Database(
            writer,
            reader,
            clock=clock or system_clock,
            new_id=ids or uuid7,
            announce=self._announce,
        )
        self._watcher = Watcher(
            self._db,
            clock=self._db.clock,
            change_interval=change_interval,
            poll_interval=poll_interval,
        )
        self._registry = Registry(self._db, ttl=registry_ttl)
        self._presence = SqlitePresence(self._db, limits)

    @classmethod
    async def open(
        cls,
        path: str | Path,
        *,
        clock: Clock | None = None,
        ids: IdGenerator | None = None,
        limits: Limits = DEFAULT_LIMITS,
        busy_timeout: float = BUSY_TIMEOUT,
        synchronous: Synchronous = "normal",
        registry_ttl: float = 1.0,
        poll_interval: float = 1.0,
        change_interval: float = CHANGE_INTERVAL,
        migrate: bool = False,
    ) -> SqliteStore:
        """Opens the database file at ``path`` and checks that it holds the current a2pg
        layout (``STORE_NOT_CONFIGURED`` otherwise, naming ``a2pg migrate --sqlite``);
        opening never creates the file. ``migrate=True`` runs the migrations first
        (creating the file), for local development and tests.

        ``busy_timeout``: seconds a write waits for another process's write lock;
        ``synchronous``: ``"normal"`` (a commit survives a crash of the process; a power
        loss may undo the last ones) or ``"full"`` (each commit is synced to disk);
        ``registry_ttl``: how long a registration made by another process may take to
        reach this store's writes; ``change_interval``: how often streams and wakeups
        look for other processes' commits; ``poll_interval``: how often they look
        anyway (lease and backoff expiries commit nothing).
        """
        file = check_path(path)
        level = check_synchronous(synchronous)
        busy_timeout = check_interval(busy_timeout, "busy_timeout")
        registry_ttl = check_interval(registry_ttl, "registry_ttl", zero=True)
        poll_interval = check_interval(poll_interval, "poll_interval")
        change_interval = check_interval(change_interval, "change_interval")
        if migrate:
            await asyncio.to_thread(upgrade, file, busy_timeout=busy_timeout)

        def open_checked() -> sqlite3.Connection:
            try:
                conn = connect(file, busy_timeout=busy_timeout, synchronous=level)
            except sqlite3.OperationalError:
                if not file.exists():
                    raise LayoutStatus("missing", str(file), None).error() from None
                raise
            try:
                status = inspect_connection(conn, file)
                if not status.is_current:
                    raise status.error()
                use_wal(conn, busy_timeout=busy_timeout)
            except BaseException:
                conn.close()
                raise
            return conn

        def open_plain() -> sqlite3.Connection:
            return connect(file, busy_timeout=busy_timeout, synchronous=level)

        writer = await Connection.open("a2pg-sqlite-writer", open_checked)
        try:
            reader = await Connection.open("a2pg-sqlite-reader", open_plain)
        except BaseException:
            await writer.close()
            raise
        return cls(
            writer,
            reader,
            path=file,
            clock=clock,
            ids=ids,
            limits=limits,
            registry_ttl=registry_ttl,
            poll_interval=poll_interval,
            change_interval=change_interval,
        )

    async def close(self) -> None:
        """Ends streams and wakeups, then closes both connections (queued calls finish)."""
        await self._watcher.close()
        await self._db.close()

    @property
    def path(self) -> Path:
        return self._path

    @property
    def presence(self) -> SqlitePresence:
        return self._presence

    def _announce(self, appended: Sequence[str], work: Sequence[str]) -> None:
        """What a commit of this store did, told to its own streams and wakeups at once."""
        for session_id in appended:
            self._watcher.committed(session_id)
        for session_id in work:
            self._watcher.work(session_id)

    # -- the log ---------------------------------------------------------------------------

    async def append(
        self,
        session_id: str,
        events: Sequence[NewEvent],
        *,
        consumers: Sequence[Consumer] | None = None,
        origin_index: int | None = None,
    ) -> AppendResult:
        """Appends a batch atomically in one transaction; a batch of only stored ids
        replays them."""
        args = check_append(
            session_id, events, consumers=consumers, origin_index=origin_index, limits=self._limits
        )
        wake = await self._registry.wake_set(args.consumers)
        refuse_log_targets(args.events, wake)
        if not args.events:
            return AppendResult(
                [],
                await self._db.read(lambda c: log.pending_now(c, args.session_id, args.consumers)),
            )
        return await self._db.write(lambda tx: log.append(tx, args, wake))

    async def read(
        self,
        session_id: str,
        *,
        after: int | None = None,
        through: int | None = None,
        types: Sequence[str] | None = None,
        limit: int | None = None,
    ) -> list[StoredEvent]:
        args = check_read(
            session_id, after=after, through=through, types=types, limit=limit, limits=self._limits
        )
        return await self._db.read(lambda conn: log.read(conn, args))

    async def wake_log(self, session_id: str, consumer: Consumer) -> WakeLogResult:
        """Brings a log consumer's cursor up to date, creating it as an append would; a
        session with nothing after its clear marker and no cursor gets an idle, unstored
        cursor at the marker."""
        args = check_wake_log(session_id, consumer, limits=self._limits)
        return await self._db.write(lambda tx: log.wake_log(tx, args))

    async def cursors(self, session_id: str) -> list[Cursor]:
        sid = check_session(session_id, limits=self._limits)
        return await self._db.read(lambda conn: log.list_cursors(conn, sid))

    async def sessions(self, *, after: str | None = None, limit: int = 100) -> list[SessionInfo]:
        """Sessions by id after ``after``, for listings."""
        args = check_sessions(after=after, limit=limit, limits=self._limits)
        return await self._db.read(lambda conn: log.list_sessions(conn, args))

    # -- claims ----------------------------------------------------------------------------

    async def claim_available(
        self,
        session_id: str,
        *,
        holder: str,
        ttl: float,
        exclude: Sequence[ClaimRef] = (),
        consumers: Sequence[Consumer] | None = None,
        max_failures: int | None = None,
        through: int | None = None,
    ) -> ClaimResult:
        args = check_claim_available(
            session_id,
            holder=holder,
            ttl=ttl,
            exclude=exclude,
            consumers=consumers,
            max_failures=max_failures,
            through=through,
            limits=self._limits,
        )
        wake = await self._registry.wake_set(args.consumers)
        return await self._db.write(lambda tx: claiming.claim_available(tx, args, wake))

    async def claim_any(
        self,
        *,
        holder: str,
        ttl: float,
        consumers: Sequence[Consumer] | None = None,
        limit: int = 10,
        max_failures: int | None = None,
    ) -> list[Head]:
        """The oldest ready heads of every session, claimed in one write transaction: what
        another process claims meanwhile waits for it, then sees these claimed."""
        args = check_claim_any(
            holder=holder,
            ttl=ttl,
            consumers=consumers,
            limit=limit,
            max_failures=max_failures,
            limits=self._limits,
        )
        return await self._db.write(lambda tx: claiming.claim_any(tx, args))

    async def renew_claims(
        self, session_id: str, *, holder: str, claims: Sequence[AttemptRef], ttl: float
    ) -> RenewResult:
        args = check_renew_claims(
            session_id, holder=holder, claims=claims, ttl=ttl, limits=self._limits
        )
        return await self._db.write(lambda tx: claiming.renew_claims(tx, args))

    async def release_claims(
        self, session_id: str, *, holder: str, claims: Sequence[AttemptRef]
    ) -> ReleaseResult:
        """Hands claims back (a worker shutting down): claimable again at once, with no
        failure counted; the released attempt is fenced out like a lapsed one."""
        args = check_release_claims(session_id, holder=holder, claims=claims, limits=self._limits)
        return await self._db.write(lambda tx: claiming.release_claims(tx, args))

    # -- outcomes of attempts --------------------------------------------------------------

    async def complete_attempt(
        self,
        session_id: str,
        *,
        consumer: str,
        lane: str | None,
        index: int,
        attempt: int,
        events: Sequence[NewEvent] = (),
        consumers: Sequence[Consumer] | None = None,
    ) -> CompleteResult:
        completion = Completion(session_id, consumer, lane, index, attempt, events, consumers)
        return (await self.complete_attempts([completion]))[0]

    async def complete_attempts(self, completions: Sequence[Completion]) -> list[CompleteResult]:
        """Judges each completion like ``complete_attempt``, all in one transaction: any
        error leaves nothing written."""
        checked = check_complete_attempts(completions, limits=self._limits)
        items = await self._items(checked)
        if not items:
            return []
        return await self._db.write(lambda tx: outcomes.complete_all(tx, items))

    async def complete_and_claim(
        self,
        completions: Sequence[Completion],
        *,
        holder: str,
        ttl: float,
        consumers: Sequence[Consumer] | None = None,
        limit: int = 10,
        max_failures: int | None = None,
    ) -> CompletedAndClaimed:
        """``complete_attempts`` then ``claim_any`` in one transaction and one commit; work
        the completions make ready and the claim takes wakes nobody."""
        args = check_complete_and_claim(
            completions,
            holder=holder,
            ttl=ttl,
            consumers=consumers,
            limit=limit,
            max_failures=max_failures,
            limits=self._limits,
        )
        items = await self._items(args.completions)
        return await self._db.write(lambda tx: outcomes.complete_and_claim(tx, items, args.claim))

    async def _items(self, checked: list[CompletionArgs]) -> list[outcomes.Item]:
        """Each checked completion with its wake set; log targets among them refused (all
        before anything is written)."""
        items = []
        for args in checked:
            wake = await self._registry.wake_set(args.completion.consumers)
            refuse_log_targets(args.events, wake)
            items.append(outcomes.Item(args, wake))
        return items

    async def fail_attempt(
        self,
        session_id: str,
        *,
        consumer: str,
        lane: str | None,
        index: int,
        attempt: int,
        error: str,
        max_failures: int,
        retry_after: float | None = None,
    ) -> FailResult:
        """Records a failure; ``retry_after`` holds the head back meanwhile. Repeating the
        same call answers as the first did."""
        args = check_fail_attempt(
            session_id,
            consumer=consumer,
            lane=lane,
            index=index,
            attempt=attempt,
            error=error,
            max_failures=max_failures,
            retry_after=retry_after,
            limits=self._limits,
        )
        return await self._db.write(lambda tx: outcomes.fail_attempt(tx, args))

    async def dead_letters(self, session_id: str) -> list[Head]:
        sid = check_session(session_id, limits=self._limits)
        return await self._db.read(lambda conn: outcomes.dead_letters(conn, sid))

    async def redrive(
        self,
        session_id: str,
        *,
        consumer: str,
        index: int,
        action: RedriveAction,
        consumers: Sequence[Consumer] | None = None,
        lane: str | AnyLane | None = ANY_LANE,
    ) -> RedriveResult:
        """Retries or skips a dead-lettered head (False when there is none above the clear):
        the consumer's at ``index`` on ``lane`` (``None``: its event cursor), or when no
        ``lane`` is given the one ``dead_letters`` lists first."""
        args = check_redrive(
            session_id,
            consumer=consumer,
            index=index,
            action=action,
            consumers=consumers,
            lane=lane,
            limits=self._limits,
        )
        wake = await self._registry.wake_set(args.consumers)
        return await self._db.write(lambda tx: outcomes.redrive(tx, args, wake))

    # -- state snapshots -------------------------------------------------------------------

    async def read_state(
        self, session_id: str, reducer: str, *, through: int | None = None
    ) -> StateRead:
        args = check_read_state(session_id, reducer, through=through, limits=self._limits)
        return await self._db.read(lambda conn: snapshots.read_state(conn, args))

    async def put_snapshots(
        self, session_id: str, reducer: str, writes: Sequence[SnapshotWrite]
    ) -> None:
        args = check_put_snapshots(session_id, reducer, writes, limits=self._limits)
        if args.writes:
            await self._db.write(lambda tx: snapshots.put_snapshots(tx, args))

    # -- clear and reclaim -----------------------------------------------------------------

    async def clear(
        self,
        session_id: str,
        *,
        if_last_index: int | None = None,
        cause: AttemptRef | None = None,
    ) -> ClearResult:
        args = check_clear(
            session_id, if_last_index=if_last_index, cause=cause, limits=self._limits
        )
        return await self._db.write(lambda tx: clear.clear(tx, args))

    async def reclaim(self, session_id: str) -> ReclaimResult:
        sid = check_session(session_id, limits=self._limits)
        return await self._db.write(lambda tx: clear.reclaim(tx, sid))

    # -- live feeds ------------------------------------------------------------------------

    def stream(self, session_id: str, *, after: int = 0) -> AsyncIterator[StoredEvent]:
        """Stored events after ``after``, then live ones as they commit, read from the table
        in index order: no gaps, no duplicates. It starts at the clear marker at the
        latest; from there it delivers every event not reclaimed yet."""
        args = check_stream(session_id, after=after, limits=self._limits)
        started = False

        async def read_after(last: int) -> list[StoredEvent]:
            nonlocal started
            visible = not started

            def batch(conn: sqlite3.Connection) -> list[StoredEvent]:
                return log.events_after(
                    conn, args.session_id, after=last, limit=log.STREAM_BATCH, visible=visible
                )

            found = await self._db.read(batch)
            started = True
            return found

        return self._watcher.stream(args.session_id, args.after, read_after)

    def wakeups(self) -> Wakeups:
        """Session ids where claimable work may have appeared (None when unknown): from this
        store's own writes, other processes' commits (``change_interval``) and a look
        every ``poll_interval``."""
        return self._watcher.wakeups()

    # -- consumer registry -----------------------------------------------------------------

    async def register_consumers(self, consumers: Sequence[Consumer]) -> None:
        """Stores each log consumer's spec (targeted ones are ignored). Cursors take a new
        spec's types at their session's next write naming no consumers."""
        await self._registry.register(check_register_consumers(consumers, limits=self._limits))

    async def unregister_consumers(self, names: Sequence[str]) -> None:
        """Stops waking these consumers; their cursors stay."""
        await self._registry.unregister(check_unregister_consumers(names, limits=self._limits))

    async def registered_consumers(self) -> list[Consumer]:
        return await self._registry.registered()

    # -- monitoring ------------------------------------------------------------------------

    async def find_dead_letters(self, query: DeadLetterQuery) -> list[Head]:
        """Dead-lettered heads of every session matching ``query``, one keyset page."""
        checked = check_find_dead_letters(query, limits=self._limits)
        return await self._db.read(lambda conn: monitoring.find_dead_letters(conn, checked))

    async def consumer_stats(self) -> list[ConsumerStats]:
        """Per consumer (registered or holding heads), by name: what monitoring shows. The
        time is read with the rows (on the reader's thread, once the read's turn comes): a
        head handed back while the read waited is ready, not backing off."""
        return await self._db.read(lambda conn: monitoring.consumer_stats(conn, self._db.now()))

    async def heartbeat(self, beat: WorkerBeat) -> None:
        """Records that ``beat.holder`` is alive now (insert or replace its row)."""
        checked = check_heartbeat(beat, limits=self._limits)
        await self._db.write(lambda tx: monitoring.heartbeat(tx, checked))

    async def forget_workers(self, holders: Sequence[str]) -> None:
        """Drops these workers' rows (a worker forgets itself when it stops cleanly)."""
        checked = check_forget_workers(holders, limits=self._limits)
        if checked:
            await self._db.write(lambda tx: monitoring.forget_workers(tx, checked))

    async def workers(self) -> list[WorkerInfo]:
        """Every worker row by holder, stale ones included (see ``WorkerInfo.stale``)."""
        return await self._db.read(lambda conn: monitoring.workers(conn, self._db.now()))
