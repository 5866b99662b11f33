"""SqliteStore: the store contract on one SQLite file, for a single machine without a server."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from ..contract.args import (
    ActivityArgs,
    AppendArgs,
    AttemptsArgs,
    AuditArgs,
    AuditLogArgs,
    CancelArgs,
    ClaimAnyArgs,
    ClaimArgs,
    ClearArgs,
    CompletionItem,
    FailArgs,
    HeldClaimsArgs,
    PruneAttemptsArgs,
    PutSnapshotsArgs,
    ReadArgs,
    ReadStateArgs,
    RedriveArgs,
    SessionsArgs,
    WakeLogArgs,
)
from ..contract.limits import DEFAULT_LIMITS, Limits
from ..errors import StoreUnavailable
from ..front import CheckedStore
from ..ids import Clock, IdGenerator, system_clock, uuid7
from ..models import (
    ActivityPoint,
    AppendResult,
    AttemptRecord,
    AuditEntry,
    BackfillProgress,
    CancelResult,
    ClaimResult,
    ClearResult,
    CompletedAndClaimed,
    CompleteResult,
    Consumer,
    ConsumerStats,
    Cursor,
    DeadLetterQuery,
    FailResult,
    FoundHead,
    Head,
    HeadQuery,
    NewEvent,
    ReclaimResult,
    RedriveResult,
    ReleaseResult,
    RenewResult,
    SessionInfo,
    StateRead,
    StoredEvent,
    WakeLogResult,
    WorkerBeat,
    WorkerInfo,
)
from . import attempts as history
from . import audit, caller, clear, codec, log, monitoring, snapshots
from . import claims as claiming
from . import completions as outcomes
from .connection import (
    BUSY_TIMEOUT,
    Connection,
    Synchronous,
    check_interval,
    check_path,
    check_synchronous,
    connect,
    outage,
    use_wal,
)
from .database import Database, one
from .layout import LayoutStatus, inspect_connection
from .migrate import upgrade
from .presence import SqlitePresence
from .registry import Registry
from .streams import CHANGE_INTERVAL, Watcher


async def _migrated(file: Path, busy_timeout: float) -> None:
    """``upgrade(file)`` for ``open(migrate=True)``: a file or folder that cannot be made
    or opened is ``STORE_UNAVAILABLE``, as it is for ``open``."""
    try:
        await asyncio.to_thread(upgrade, file, busy_timeout=busy_timeout)
    except sqlite3.OperationalError as exc:
        found = outage(exc)
        if found is None:
            raise
        raise found from exc
    except OSError as exc:
        raise StoreUnavailable(
            message=f"cannot create the SQLite database {file}: {exc.strerror or exc}"
        ) from exc


class SqliteStore(CheckedStore):
    """The store contract (docs/concepts/contract.md) on one SQLite file, in WAL mode.

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
        self._feed = self._watcher.feed
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
            await _migrated(file, busy_timeout)

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
        """Ends streams and wakeups, then closes both connections (queued calls finish);
        later calls are refused."""
        self._closed = True
        await self._feed.close()  # and the watcher, its source
        await self._db.close()

    @property
    def path(self) -> Path:
        return self._path

    @property
    def presence(self) -> SqlitePresence:
        self._check_open()
        return self._presence

    async def _now(self) -> datetime:
        """The clock writes record: the machine's, shared by every process on the file."""
        return self._db.now()

    def _announce(self, appended: Sequence[str], work: Sequence[str]) -> None:
        """What a commit of this store did, told to its own streams and wakeups at once."""
        self._feed.announce(appended, work)

    async def _wake_set(self, consumers: Sequence[Consumer] | None) -> Sequence[Consumer]:
        return await self._registry.wake_set(consumers)

    # -- the log ---------------------------------------------------------------------------

    async def _append(self, args: AppendArgs, wake: Sequence[Consumer]) -> AppendResult:
        """One transaction; a batch of only stored ids replays them."""
        if not args.events:
            pending = await self._db.read(
                lambda c: log.pending_now(c, args.session_id, args.consumers)
            )
            return AppendResult([], pending)
        return await self._db.write(lambda tx: log.append(tx, args, wake))

    async def _read(self, args: ReadArgs) -> list[StoredEvent]:
        return await self._db.read(lambda conn: log.read(conn, args))

    async def _wake_log(self, args: WakeLogArgs) -> WakeLogResult:
        return await self._db.write(lambda tx: log.wake_log(tx, args))

    async def _list_cursors(self, session_id: str) -> list[Cursor]:
        return await self._db.read(lambda conn: log.list_cursors(conn, session_id))

    async def _list_sessions(self, args: SessionsArgs) -> list[SessionInfo]:
        return await self._db.read(lambda conn: log.list_sessions(conn, args))

    async def _stream_batch(
        self, session_id: str, after: int, *, visible: bool
    ) -> list[StoredEvent]:
        def batch(conn: sqlite3.Connection) -> list[StoredEvent]:
            return log.events_after(
                conn, session_id, after=after, limit=log.STREAM_BATCH, visible=visible
            )

        return await self._db.read(batch)

    # -- claims ----------------------------------------------------------------------------

    async def _claim_available(self, args: ClaimArgs, wake: Sequence[Consumer]) -> ClaimResult:
        return await self._db.write(lambda tx: claiming.claim_available(tx, args, wake))

    async def _next_due_in(self, consumers: Sequence[Consumer] | None) -> float | None:
        now = self._db.now()
        params = {"now": codec.micros(now), "names": codec.names_json(consumers)}
        row = await self._db.read(lambda conn: one(conn, "next_due", params))
        if row is None or row["due"] is None:
            return None
        return (int(row["due"]) - codec.micros(now)) / 1_000_000

    async def _claim_any(self, args: ClaimAnyArgs) -> list[Head]:
        """One write transaction: what another process claims meanwhile waits for it, then
        sees these claimed."""
        return await self._db.write(lambda tx: claiming.claim_any(tx, args))

    async def _renew_claims(self, args: HeldClaimsArgs) -> RenewResult:
        return await self._db.write(lambda tx: claiming.renew_claims(tx, args))

    async def _release_claims(self, args: HeldClaimsArgs) -> ReleaseResult:
        return await self._db.write(lambda tx: claiming.release_claims(tx, args))

    # -- outcomes of attempts --------------------------------------------------------------

    async def _complete_attempts(self, items: list[CompletionItem]) -> list[CompleteResult]:
        return await self._db.write(lambda tx: outcomes.complete_all(tx, items))

    async def _complete_and_claim(
        self, items: list[CompletionItem], claim: ClaimAnyArgs
    ) -> CompletedAndClaimed:
        return await self._db.write(lambda tx: outcomes.complete_and_claim(tx, items, claim))

    async def _fail_attempt(self, args: FailArgs) -> FailResult:
        return await self._db.write(lambda tx: outcomes.fail_attempt(tx, args))

    async def _dead_letters(self, session_id: str) -> list[Head]:
        return await self._db.read(lambda conn: outcomes.dead_letters(conn, session_id))

    async def _redrive(self, args: RedriveArgs, wake: Sequence[Consumer]) -> RedriveResult:
        return await self._db.write(lambda tx: outcomes.redrive(tx, args, wake))

    async def _attempts(self, args: AttemptsArgs) -> list[AttemptRecord]:
        return await self._db.read(lambda conn: history.attempts(conn, args))

    async def _prune_attempts(self, args: PruneAttemptsArgs) -> int:
        return await self._db.write(lambda tx: history.prune(tx, args))

    async def _activity(self, args: ActivityArgs) -> list[ActivityPoint]:
        return await self._db.read(lambda conn: history.activity(conn, args))

    async def _cancel_head(self, args: CancelArgs, wake: Sequence[Consumer]) -> CancelResult:
        return await self._db.write(lambda tx: outcomes.cancel_head(tx, args, wake))

    # -- state snapshots -------------------------------------------------------------------

    async def _read_state(self, args: ReadStateArgs) -> StateRead:
        return await self._db.read(lambda conn: snapshots.read_state(conn, args))

    async def _put_snapshots(self, args: PutSnapshotsArgs) -> None:
        await self._db.write(lambda tx: snapshots.put_snapshots(tx, args))

    # -- clear and reclaim -----------------------------------------------------------------

    async def _clear(self, args: ClearArgs) -> ClearResult:
        return await self._db.write(lambda tx: clear.clear(tx, args))

    async def _reclaim(self, session_id: str) -> ReclaimResult:
        return await self._db.write(lambda tx: clear.reclaim(tx, session_id))

    # -- consumer registry -----------------------------------------------------------------

    async def _register_consumers(self, consumers: list[Consumer]) -> None:
        await self._registry.register(consumers)

    async def _unregister_consumers(self, names: list[str]) -> None:
        await self._registry.unregister(names)

    async def _pause_consumers(self, names: list[str]) -> None:
        await self._registry.pause(names)

    async def _resume_consumers(self, names: list[str]) -> None:
        await self._registry.resume(names)

    async def _registered_consumers(self) -> list[Consumer]:
        return await self._registry.registered()

    async def _backfill_state(self, name: str) -> tuple[Consumer, BackfillProgress] | None:
        return await self._registry.backfill_state(name)

    async def _record_backfill(
        self,
        name: str,
        seen: BackfillProgress,
        *,
        after: str | None,
        sessions: int,
        done: bool,
    ) -> BackfillProgress | None:
        return await self._registry.record_backfill(
            name, seen, after=after, sessions=sessions, done=done
        )

    # -- monitoring ------------------------------------------------------------------------

    async def _find_dead_letters(self, query: DeadLetterQuery) -> list[Head]:
        return await self._db.read(lambda conn: monitoring.find_dead_letters(conn, query))

    async def _find_heads(self, query: HeadQuery) -> list[FoundHead]:
        """The time is read with the rows, as ``consumer_stats`` reads it."""
        return await self._db.read(lambda conn: monitoring.find_heads(conn, query, self._db.now()))

    async def _consumer_stats(self) -> list[ConsumerStats]:
        """The time is read with the rows (on the reader's thread, once the read's turn
        comes): a head handed back while the read waited is ready, not backing off."""
        return await self._db.read(lambda conn: monitoring.consumer_stats(conn, self._db.now()))

    async def _heartbeat(self, beat: WorkerBeat) -> None:
        await self._db.write(lambda tx: monitoring.heartbeat(tx, beat))

    async def _forget_workers(self, holders: list[str]) -> None:
        await self._db.write(lambda tx: monitoring.forget_workers(tx, holders))

    async def _list_workers(self) -> list[WorkerInfo]:
        return await self._db.read(lambda conn: monitoring.workers(conn, self._db.now()))

    # -- appending in the caller's own transaction -----------------------------------------

    async def append_in(
        self,
        conn: sqlite3.Connection,
        session_id: str,
        events: Sequence[NewEvent],
        *,
        consumers: Sequence[Consumer] | None = None,
        origin_index: int | None = None,
    ) -> AppendResult:
        """``append`` on the application's own ``sqlite3`` connection to this store's file,
        inside its open transaction: the events commit or roll back with the application's
        rows, and streams and wakeups (this store's and others') see them only once it
        commits. The same checks, results and rules as ``append``.

        ``conn`` must be in a transaction (``conn.in_transaction``), or idle in Python's
        default non-autocommit mode (the append begins one with ``BEGIN IMMEDIATE``; you
        commit it). Its statements run on the calling thread (a ``sqlite3`` connection
        belongs to its thread), nothing is committed and ``row_factory`` is left alone.
        The transaction holds the file's write lock until you commit: every other write
        to the file waits meanwhile. See docs/concepts/outbox.md.
        """
        self._check_open()
        on = caller.Caller(
            caller.check_connection(conn),
            path=self._path,
            clock=self._db.clock,
            new_id=self._db.new_id,
        )
        on.check_file()
        args, wake = await self._prepare_append(
            session_id, events, consumers=consumers, origin_index=origin_index, wake_set=on.wake_set
        )
        return on.append(args, wake)

    # -- the audit log ---------------------------------------------------------------------

    async def _record_audit(self, args: AuditArgs) -> AuditEntry:
        return await self._db.write(lambda tx: audit.record(tx, args))

    async def _audit_log(self, args: AuditLogArgs) -> list[AuditEntry]:
        return await self._db.read(lambda conn: audit.page(conn, args))
