"""PostgresStore: the production backend of the store contract, on psycopg 3 and PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

from psycopg import AsyncConnection
from psycopg.errors import SerializationFailure
from psycopg_pool import AsyncConnectionPool

from .. import validation as check
from ..errors import A2Error, invalid
from ..ids import Clock, IdGenerator
from ..models import (
    CLEAR_EVENT_TYPE,
    AppendResult,
    AttemptRef,
    ClearResult,
    Consumer,
    Cursor,
    LogSpec,
    NewEvent,
    ReclaimResult,
    SessionInfo,
    StoredEvent,
    WakeLogResult,
)
from ..validation import DEFAULT_LIMITS, CheckedEvent, Limits
from ..wakeups import Wakeups
from . import codec
from .attempts import AttemptsMixin, names_of
from .base import Committed, Conn, Finish, execute, finished
from .completions import fence, replay
from .connect import check_pool_connection, configure_connection, to_libpq_dsn
from .layout import check_schema, ensure_layout
from .presence import PostgresPresence
from .queries import query
from .snapshots import SnapshotsMixin
from .writes import SessionHead, columns, push

RECLAIM_BATCH = 256
"""Events ``reclaim`` deletes per call, so no call holds the session for long."""

_CLEAR_MARKER = CheckedEvent(NewEvent(CLEAR_EVENT_TYPE, None), "null")


class PostgresStore(AttemptsMixin, SnapshotsMixin):
    """The store contract (SPEC.md section 2) on PostgreSQL.

    Every write is one short transaction that locks the session row first (so index
    allocation is serialized per session and readers never see N+1 before N), then
    cursor rows. Single statements run on autocommit connections; transactions are
    pipelined so their reads cost one round trip and their writes ride with the
    commit. Times come from the database server unless a ``clock`` is injected.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._presence = PostgresPresence(self._read, self._clock, self._limits)

    @classmethod
    async def open(
        cls,
        dsn: str | AsyncConnectionPool[Any],
        *,
        schema: str = "public",
        clock: Clock | None = None,
        ids: IdGenerator | None = None,
        limits: Limits = DEFAULT_LIMITS,
        min_size: int = 1,
        max_size: int = 10,
        registry_ttl: float = 1.0,
        poll_interval: float = 1.0,
        listen_dsn: str | None = None,
    ) -> PostgresStore:
        """Opens a pool on ``dsn`` (or uses ``dsn`` if it is a pool already) and checks that
        ``schema`` holds the current a2pg layout (``STORE_NOT_CONFIGURED`` otherwise).

        A pool of your own must hand out autocommit connections configured with
        :func:`configure_connection`; the store leaves it open on ``close()``.
        ``registry_ttl`` bounds how long a registration made by another process takes
        to reach this store's writes; ``poll_interval`` is how often streams and
        wakeups look for what notifications may have missed. Streams and wakeups use
        one extra connection of their own, to ``listen_dsn`` (default: the pool's DSN).
        """
        check_schema(schema)
        configure = configure_connection(schema)
        conn_kwargs: dict[str, Any] = {}
        if isinstance(dsn, AsyncConnectionPool):
            pool, owns_pool = dsn, False
            conninfo = listen_dsn or pool.conninfo
            if not isinstance(conninfo, str):
                raise invalid("a pool with a callable conninfo needs listen_dsn= for its LISTEN")
            if isinstance(pool.kwargs, dict):
                conn_kwargs.update(pool.kwargs)
        else:
            conninfo, owns_pool = to_libpq_dsn(listen_dsn or dsn), True
            pool = AsyncConnectionPool(
                to_libpq_dsn(dsn),
                min_size=min_size,
                max_size=max_size,
                kwargs={"autocommit": True},
                configure=configure,
                open=False,
                name=f"a2pg[{schema}]",
            )
            await pool.open(wait=True)
        conn_kwargs["autocommit"] = True

        async def connect() -> Conn:
            conn = await AsyncConnection.connect(to_libpq_dsn(conninfo), **conn_kwargs)
            await configure(conn)
            return conn

        store = cls(
            pool,
            schema=schema,
            owns_pool=owns_pool,
            connect=connect,
            clock=clock,
            ids=ids,
            limits=limits,
            registry_ttl=registry_ttl,
            poll_interval=poll_interval,
        )
        try:
            async with pool.connection() as conn:
                await ensure_layout(conn, schema)
                if not owns_pool:
                    await check_pool_connection(conn, schema)
        except BaseException:
            await store.close()
            raise
        return store

    async def close(self) -> None:
        """Ends streams and wakeups, closes the LISTEN connection and the pool (if owned)."""
        await self._listener.close()
        if self._pool_check is not None:
            self._pool_check.cancel()
        if self._owns_pool:
            await self._pool.close()

    @property
    def presence(self) -> PostgresPresence:
        return self._presence

    # -- the log ---------------------------------------------------------------------------

    async def append(
        self,
        session_id: str,
        events: Sequence[NewEvent],
        *,
        consumers: Sequence[Consumer] | None = None,
        origin_index: int | None = None,
    ) -> AppendResult:
        """Appends a batch atomically in one transaction of two round trips; a batch of
        only stored ids replays them."""
        check.check_session_id(session_id, self._limits)
        consumers = self._checked_consumers(consumers)
        wake = await self._wake_set(consumers)
        names = check.log_consumer_names(wake)
        checked = check.check_events(events, self._limits, log_consumers=names)
        if origin_index is not None:
            check.check_index(origin_index, "origin_index")
        supplied = [item.event.id for item in checked if item.event.id is not None]
        if len(set(supplied)) != len(supplied):
            raise A2Error(
                "PARTIAL_DUPLICATE_BATCH", "batch contains the same event id more than once"
            )
        pending = {"session_id": session_id, "names": names_of(consumers)}
        if not checked:
            rows = await self._read("has_pending", pending)
            return AppendResult([], bool(rows[0]["has_pending"]))
        causes = [item.event.cause for item in checked if item.event.cause is not None]

        async def body(conn: Conn, committed: Committed) -> Finish[AppendResult]:
            locked = await self._lock(conn, [session_id], ensure=True)
            ids = {"session_ids": [session_id] * len(supplied), "event_ids": supplied}
            owners = await execute(conn, query("select_events_by_ids"), ids) if supplied else None
            keys = columns("session_ids", "consumers", "keys")
            for cause in causes:
                push(keys, session_id, cause.consumer, codec.cursor_key(cause.lane, cause.index))
            fences = await execute(conn, query("select_cursors"), keys) if causes else None
            sessions, now = await locked.result()
            session = sessions[session_id]
            stored = [] if owners is None else [codec.event(r) for r in await owners.fetchall()]
            live = [event for event in stored if event.index >= session.clear_index]
            if live and len(live) == len(checked):
                replayed = replay(checked, live)
                has_pending = await execute(conn, query("has_pending"), pending)
                return self._appended(replayed, has_pending)
            if live:
                raise A2Error(
                    "PARTIAL_DUPLICATE_BATCH",
                    f"batch mixes {len(live)} already-appended and "
                    f"{len(checked) - len(live)} fresh events",
                )
            if origin_index is not None and origin_index <= session.clear_index:
                raise A2Error(
                    "SESSION_CLEARED",
                    f"scheduled work from event {origin_index} was cleared "
                    f"in session '{session_id}'",
                )
            rows = [] if fences is None else await fences.fetchall()
            cursors = {(r["consumer"], r["cursor_key"]): r for r in rows}
            for cause in causes:
                fence(session_id, session, cursors, cause)
            plan = self._plan(now, sessions)
            inserted = plan.add_batch(session_id, checked, wake=wake)
            committed.plan = plan
            committed.notify = await plan.apply(conn, channel=self._channel)
            has_pending = await execute(conn, query("has_pending"), pending)
            return self._appended(inserted, has_pending)

        return await self._write(body, idempotent=len(supplied) == len(checked))

    @staticmethod
    def _appended(events: list[StoredEvent], pending: Any) -> Finish[AppendResult]:
        async def finish() -> AppendResult:
            row = await pending.fetchone()
            return AppendResult(events, bool(row and row["has_pending"]))

        return finish

    async def read(
        self,
        session_id: str,
        *,
        after: int | None = None,
        through: int | None = None,
        types: Sequence[str] | None = None,
        limit: int | None = None,
    ) -> list[StoredEvent]:
        args = check.check_read(
            session_id,
            after=after,
            through=through,
            types=types,
            limit=limit,
            limits=self._limits,
        )
        wanted = None if args.types is None else list(args.types)
        return await self._events_after(
            session_id, after=args.after, through=args.through, types=wanted, limit=args.limit
        )

    async def wake_log(self, session_id: str, consumer: Consumer) -> WakeLogResult:
        """Brings a log consumer's cursor up to date, creating it as an append would; a
        session with nothing after its clear marker and no cursor gets an idle, unstored
        cursor at the marker."""
        check.check_session_id(session_id, self._limits)
        log = self._log_spec(consumer)
        key = codec.cursor_key(log.lane, 0)
        keys = {"session_ids": [session_id], "consumers": [consumer.name], "keys": [key]}

        async def body(conn: Conn, committed: Committed) -> Finish[WakeLogResult]:
            locked = await self._lock(conn, [session_id])
            found = await execute(conn, query("select_cursors"), keys)
            sessions, now = await locked.result()
            row = await found.fetchone()
            session = sessions.get(session_id)
            if session is None or (row is None and session.head == session.clear_index):
                marker = 0 if session is None else session.clear_index
                idle = Cursor(consumer.name, log.lane, "log", marker, None)
                return finished(WakeLogResult(idle, marker))
            if row is not None and row["kind"] != "log":
                raise invalid(
                    f"consumer '{consumer.name}' has a {row['kind']} cursor on lane '{log.lane}'"
                )
            plan = self._plan(now, sessions)
            plan.wake(session_id, consumer, session.clear_index if log.backfill else session.head)
            committed.plan = plan
            committed.notify = await plan.apply(conn, channel=self._channel)
            woken = await execute(conn, query("select_cursors"), keys)

            async def finish() -> WakeLogResult:
                row = await woken.fetchone()
                assert row is not None
                return WakeLogResult(codec.cursor(row), session.head)

            return finish

        return await self._write(body, idempotent=True)

    def _log_spec(self, consumer: object) -> LogSpec:
        if not isinstance(consumer, Consumer):
            raise invalid(f"consumer must be a Consumer, not {type(consumer).__name__}")
        check.check_name(consumer.name, "consumer name", self._limits)
        if consumer.log is None:
            raise invalid(f"consumer '{consumer.name}' is not a log consumer")
        return check.check_log_spec(consumer.log, self._limits)

    async def cursors(self, session_id: str) -> list[Cursor]:
        check.check_session_id(session_id, self._limits)
        rows = await self._read("list_cursors", {"session_id": session_id})
        return [codec.cursor(row) for row in rows]

    # -- clear and reclaim -----------------------------------------------------------------

    async def clear(
        self,
        session_id: str,
        *,
        if_last_index: int | None = None,
        cause: AttemptRef | None = None,
    ) -> ClearResult:
        """Appends the ``a2.cleared`` marker (stored without a cause) and hides what is below:
        log cursors restart at the marker, other heads and every pin are dropped."""
        check.check_session_id(session_id, self._limits)
        if_last_index = check.check_optional_bound(if_last_index, "if_last_index")
        if cause is not None:
            check.check_attempt_ref(cause, "clear cause", self._limits)
        keys = columns("session_ids", "consumers", "keys")
        if cause is not None:
            push(keys, session_id, cause.consumer, codec.cursor_key(cause.lane, cause.index))
        marker_params = {"session_id": session_id}

        async def body(conn: Conn, committed: Committed) -> Finish[ClearResult]:
            locked = await self._lock(conn, [session_id])
            fences = await execute(conn, query("select_cursors"), keys) if cause else None
            sessions, now = await locked.result()
            session = sessions.get(session_id) or SessionHead(session_id, 0, 0)
            if cause is not None:
                assert fences is not None
                rows = {(r["consumer"], r["cursor_key"]): r for r in await fences.fetchall()}
                fence(session_id, session, rows, cause)
            if if_last_index is not None and session.clear_index == if_last_index + 1:
                return finished(ClearResult(True, session.head, session.clear_index))
            if if_last_index is not None and session.head != if_last_index:
                return finished(ClearResult(False, session.head, session.clear_index))
            if session_id not in sessions:
                # First write of this session: create its row, then judge again under it.
                sessions, _ = await (await self._lock(conn, [session_id], ensure=True)).result()
                if sessions[session_id].head != session.head:
                    raise SerializationFailure("session created concurrently; retry the clear")
            plan = self._plan(now, sessions)
            (marker,) = plan.add_batch(session_id, [_CLEAR_MARKER], wake=())
            committed.plan = plan
            await plan.apply(conn, channel=self._channel, notify=False)
            params = {**marker_params, "marker": marker.index}
            for name in ("mark_cleared", "restart_log_cursors", "park_cursors", "drop_pins"):
                await execute(conn, query(name), params)
            return finished(ClearResult(True, marker.index, marker.index))

        # A clear with if_last_index is idempotent; without, a retry would clear again.
        return await self._write(body, idempotent=if_last_index is not None)

    async def reclaim(self, session_id: str) -> ReclaimResult:
        """Deletes up to ``RECLAIM_BATCH`` events below the clear marker; once none remain,
        the dead cursors, snapshots, history and pins below it go too."""
        check.check_session_id(session_id, self._limits)

        async def body(conn: Conn, committed: Committed) -> Finish[ReclaimResult]:
            sessions, _ = await (await self._lock(conn, [session_id])).result()
            session = sessions.get(session_id)
            if session is None or session.clear_index <= 1:
                return finished(ReclaimResult(0, True))
            params = {
                "session_id": session_id,
                "clear_index": session.clear_index,
                "batch": RECLAIM_BATCH,
            }
            batch = await execute(conn, query("reclaim_batch"), params)
            row = await batch.fetchone()
            assert row is not None
            done = bool(row["done"])
            if done:
                await execute(conn, query("reclaim_finish"), params)
            return finished(ReclaimResult(int(row["deleted"]), done))

        return await self._write(body, idempotent=True)

    # -- live feeds ------------------------------------------------------------------------

    def stream(self, session_id: str, *, after: int = 0) -> AsyncIterator[StoredEvent]:
        """Stored events after ``after``, then live ones as they commit, read from the table
        in index order: no gaps, no duplicates.

        It starts at the clear marker at the latest; from there it delivers every event,
        so events committed before a clear it has not caught up with still come, then
        the marker (unless reclaim deleted them first).
        """
        check.check_session_id(session_id, self._limits)
        start = check.check_optional_bound(after, "after") or 0
        started = False

        async def read_after(last: int) -> list[StoredEvent]:
            nonlocal started
            batch = await self._stream_batch(session_id, last, visible=not started)
            started = True
            return batch

        return self._listener.stream(session_id, start, read_after)

    def wakeups(self) -> Wakeups:
        """Session ids where claimable work may have appeared (None when unknown): from
        NOTIFY, this store's own writes, and a poll every ``poll_interval``."""
        return self._listener.wakeups()

    # -- registry and listings -------------------------------------------------------------

    async def register_consumers(self, consumers: Sequence[Consumer]) -> None:
        """Stores each log consumer's spec (targeted ones are ignored). Cursors take a new
        spec's types at their session's next write naming no consumers."""
        checked = check.check_consumers(consumers, self._limits) or []
        logs = [consumer for consumer in checked if consumer.log is not None]
        if not logs:
            return
        table = columns("names", "lanes", "types", "backfills")
        for consumer in logs:
            assert consumer.log is not None
            log = consumer.log
            push(table, consumer.name, log.lane, codec.types_json(log.types), log.backfill)
        self._forget_registry()
        await self._read("register_consumers", {**table, "now": self._now_param()}, idempotent=True)
        self._forget_registry()

    async def unregister_consumers(self, names: Sequence[str]) -> None:
        """Stops waking these consumers; their cursors stay."""
        if isinstance(names, str) or not isinstance(names, Sequence):
            raise invalid("names must be a sequence of consumer names")
        checked = [check.check_name(name, "consumer name", self._limits) for name in names]
        self._forget_registry()
        await self._read("unregister_consumers", {"names": checked}, idempotent=True)
        self._forget_registry()

    async def registered_consumers(self) -> list[Consumer]:
        rows = await self._read("registered_consumers", {})
        return [codec.consumer(row) for row in rows]

    async def sessions(self, *, after: str | None = None, limit: int = 100) -> list[SessionInfo]:
        if after is not None:
            check.check_session_id(after, self._limits)
        check.check_positive_count(limit, "limit")
        rows = await self._read("sessions_page", {"after": after or "", "limit": limit})
        return [
            SessionInfo(
                row["session_id"],
                int(row["head"]),
                int(row["clear_index"]),
                int(row["pending"]),
                int(row["dead_letters"]),
            )
            for row in rows
        ]
