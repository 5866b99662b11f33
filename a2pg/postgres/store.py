"""PostgresStore: the production backend of the store contract, on psycopg 3 and PostgreSQL."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, TypeVar

from psycopg import errors as pg
from psycopg_pool import AsyncConnectionPool

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
from ..ids import Clock, IdGenerator, uuid7
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
from . import clear, log, monitoring, queries, snapshots
from . import completions as outcomes
from .connect import CONNECT_TIMEOUT, Pooler, Reach, ScrubPassword, check_pooler, pool_log
from .database import Database, Finish, Tx
from .layout import DEFAULT_SCHEMA, check_schema
from .presence import PostgresPresence
from .registry import Registry
from .streams import Connect, Listener, Scrub, channel_name

logger = logging.getLogger("a2pg.postgres")

T = TypeVar("T")


class PostgresStore:
    """The store contract (SPEC.md section 2) on PostgreSQL.

    Every write locks the session row first (so index allocation is serialized per
    session and readers never see N+1 before N), then cursor rows; the exception is a
    worker cycle of event-cursor completions, which fences each on its row alone (an
    event cursor takes no next head). The hot writes are one autocommit statement
    each: an append of fresh events (``log.append_fresh``) and that worker cycle
    (``completions.complete_and_claim_one``); they decline, writing nothing, where
    the contract needs a read first (a replay, a missed fence), and the other writes
    are short transactions, pipelined so their reads cost one round trip and their
    writes ride with the commit. Times come from the database server unless a
    ``clock`` is injected.

    Nothing depends on a connection's state: every statement names the store's schema
    and calls ``pg_catalog`` functions, so the store works the same behind a
    connection pooler (see :meth:`open`) and whatever the search_path or TimeZone.

    Each method checks its arguments (``a2pg.contract.args``), then runs its area's
    function (``log``, ``claims``, ``completions``, ``snapshots``, ``clear``) in one
    transaction or statement. Build one with :meth:`open`; the constructor takes an
    open pool of autocommit connections and ``listen``, which opens the connection
    that streams and wakeups listen and poll on.
    """

    def __init__(
        self,
        pool: AsyncConnectionPool[Any],
        *,
        listen: Connect,
        schema: str = DEFAULT_SCHEMA,
        owns_pool: bool = False,
        clock: Clock | None = None,
        ids: IdGenerator | None = None,
        limits: Limits = DEFAULT_LIMITS,
        registry_ttl: float = 1.0,
        poll_interval: float = 1.0,
        prepare: bool = True,
        notifications: bool = True,
        scrub: Scrub = str,
    ) -> None:
        self._schema = check_schema(schema)
        self._owns_pool = owns_pool
        self._limits = limits
        self._log_filter: ScrubPassword | None = None
        statements = queries.statements(schema)
        channel = channel_name(schema)
        self._listener = Listener(
            connect=listen,
            statements=statements,
            channel=channel,
            poll_interval=poll_interval,
            clock=clock,
            max_session_id=limits.max_session_id_length,
            listen=notifications,
            scrub=scrub,
        )
        self._db = Database(
            pool,
            statements=statements,
            channel=channel,
            prepare=prepare,
            clock=clock,
            new_id=ids or uuid7,
            announce=self._announce,
        )
        self._registry = Registry(self._db, ttl=registry_ttl)
        self._presence = PostgresPresence(self._db, limits)

    @classmethod
    async def open(
        cls,
        dsn: str | AsyncConnectionPool[Any],
        *,
        schema: str = DEFAULT_SCHEMA,
        clock: Clock | None = None,
        ids: IdGenerator | None = None,
        limits: Limits = DEFAULT_LIMITS,
        min_size: int = 1,
        max_size: int = 10,
        registry_ttl: float = 1.0,
        poll_interval: float = 1.0,
        listen_dsn: str | None = None,
        prepare: bool | None = None,
        pooler: Pooler = "none",
        connect_timeout: float = CONNECT_TIMEOUT,
    ) -> PostgresStore:
        """Opens a pool on ``dsn`` (or uses ``dsn`` if it is a pool already) and checks that
        ``schema`` holds the current a2pg layout (``STORE_NOT_CONFIGURED`` otherwise).

        A pool of your own must hand out autocommit connections
        (``kwargs={"autocommit": True}``); the store leaves it open on ``close()``.
        ``registry_ttl`` bounds how long a registration made by another process takes
        to reach this store's writes; ``poll_interval`` is how often streams and
        wakeups look for what notifications may have missed. Streams and wakeups use
        one extra connection of their own, to ``listen_dsn`` (default: the pool's DSN).

        Behind a connection pooler, say which kind with ``pooler``:

        - ``"none"`` (default) or ``"session"`` (PgBouncer ``pool_mode = session``):
          streams and wakeups LISTEN for notifications, and poll.
        - ``"transaction"`` (PgBouncer ``pool_mode = transaction``): LISTEN would
          silently never fire there, so the store does not listen (it says so once at
          INFO); streams and wakeups of other processes' writes come from the poll
          alone, every ``poll_interval``, unless ``listen_dsn`` names a direct (or
          session-mode) path for the LISTEN connection. ``prepare`` defaults to False.

        ``prepare`` (default: True unless ``pooler="transaction"``): whether psycopg may
        prepare the statements it runs often. PgBouncer in transaction mode keeps
        protocol-level prepared statements from version 1.21 on when
        ``max_prepared_statements`` is above 0 (0 was its default before 1.24): there
        ``prepare=True`` works and saves planning. Older PgBouncer, or
        ``max_prepared_statements = 0``, needs ``prepare=False``, else statements fail
        with ``prepared statement "_pg3_0" already exists`` (or ``does not exist``, or
        ``bind message supplies 0 parameters``). Off, it sets ``prepare_threshold=None``
        on every connection the store uses, a pool passed in included.

        ``connect_timeout`` bounds each new connection and each statement of this
        startup (the layout check, under a ``statement_timeout`` set for its
        transaction only): an unreachable server fails ``open()`` within it, with a
        ``psycopg.OperationalError`` that quotes no password.
        """
        check_schema(schema)
        pooler = check_pooler(pooler)
        if prepare is None:
            prepare = pooler != "transaction"
        reach = await Reach.build(
            dsn,
            schema=schema,
            min_size=min_size,
            max_size=max_size,
            listen_dsn=listen_dsn,
            prepare=prepare,
            connect_timeout=connect_timeout,
        )
        store = cls(
            reach.pool,
            listen=reach.listen,
            schema=schema,
            owns_pool=reach.owns_pool,
            clock=clock,
            ids=ids,
            limits=limits,
            registry_ttl=registry_ttl,
            poll_interval=poll_interval,
            prepare=prepare,
            notifications=pooler != "transaction" or listen_dsn is not None,
            scrub=reach.scrub,
        )
        store._log_filter = reach.log_filter
        if pooler == "transaction" and listen_dsn is None:
            logger.info(
                "a2pg store on schema %r behind a transaction-mode pooler: not listening "
                "(LISTEN never fires there); streams and wakeups poll every %ss",
                schema,
                poll_interval,
            )
        try:
            await reach.start(schema)
        except BaseException:
            await store.close()
            raise
        return store

    async def close(self) -> None:
        """Ends streams and wakeups, closes the LISTEN connection and the pool (if owned)."""
        await self._listener.close()
        self._db.close()
        if self._owns_pool:
            await self._db.pool.close()
        if self._log_filter is not None:
            pool_log.removeFilter(self._log_filter)
            self._log_filter = None

    @property
    def schema(self) -> str:
        return self._schema

    @property
    def pool(self) -> AsyncConnectionPool[Any]:
        return self._db.pool

    @property
    def presence(self) -> PostgresPresence:
        return self._presence

    def _announce(self, appended: Sequence[str], work: Sequence[str]) -> None:
        """What a commit of this store did, told to its own streams and wakeups at once."""
        for session_id in appended:
            self._listener.committed(session_id)
        for session_id in work:
            self._listener.work(session_id)

    # -- the log ---------------------------------------------------------------------------

    async def append(
        self,
        session_id: str,
        events: Sequence[NewEvent],
        *,
        consumers: Sequence[Consumer] | None = None,
        origin_index: int | None = None,
    ) -> AppendResult:
        """Appends a batch atomically: one statement in one round trip for fresh events
        (``log.append_fresh``), else one transaction of two round trips (a batch of only
        stored ids replays them; a cause is fenced; reused ids of a cleared session)."""
        args = check_append(
            session_id, events, consumers=consumers, origin_index=origin_index, limits=self._limits
        )
        wake = await self._registry.wake_set(args.consumers)
        refuse_log_targets(args.events, wake)
        if not args.events:
            return AppendResult([], await log.pending_now(self._db, session_id, args.consumers))
        ids = log.event_ids(args, self._db.new_id)
        if log.fits_one_statement(args):
            done = await log.append_fresh(self._db, args, wake, ids)
            if done is not None:
                return done

        async def body(tx: Tx) -> Finish[AppendResult]:
            return await log.append(tx, args, wake, ids)

        idempotent = len(args.supplied_ids) == len(args.events)
        return await self._db.write(body, idempotent=idempotent)

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
        return await log.read(self._db, args)

    async def wake_log(self, session_id: str, consumer: Consumer) -> WakeLogResult:
        """Brings a log consumer's cursor up to date, creating it as an append would; a
        session with nothing after its clear marker and no cursor gets an idle, unstored
        cursor at the marker."""
        args = check_wake_log(session_id, consumer, limits=self._limits)
        return await self._db.write(lambda tx: log.wake_log(tx, args), idempotent=True)

    async def cursors(self, session_id: str) -> list[Cursor]:
        return await log.cursors(self._db, check_session(session_id, limits=self._limits))

    async def sessions(self, *, after: str | None = None, limit: int = 100) -> list[SessionInfo]:
        """Sessions by id after ``after``, for listings."""
        return await log.sessions(
            self._db, check_sessions(after=after, limit=limit, limits=self._limits)
        )

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
        return await self._db.write(
            lambda tx: claiming.claim_available(tx, args, wake), idempotent=False
        )

    async def claim_any(
        self,
        *,
        holder: str,
        ttl: float,
        consumers: Sequence[Consumer] | None = None,
        limit: int = 10,
        max_failures: int | None = None,
    ) -> list[Head]:
        args = check_claim_any(
            holder=holder,
            ttl=ttl,
            consumers=consumers,
            limit=limit,
            max_failures=max_failures,
            limits=self._limits,
        )
        return await claiming.claim_any(self._db, args)

    async def renew_claims(
        self, session_id: str, *, holder: str, claims: Sequence[AttemptRef], ttl: float
    ) -> RenewResult:
        args = check_renew_claims(
            session_id, holder=holder, claims=claims, ttl=ttl, limits=self._limits
        )
        return await self._db.write(lambda tx: claiming.renew_claims(tx, args), idempotent=True)

    async def release_claims(
        self, session_id: str, *, holder: str, claims: Sequence[AttemptRef]
    ) -> ReleaseResult:
        """Hands claims back (a worker shutting down): claimable again at once, with no
        failure counted; the released attempt is fenced out like a lapsed one."""
        args = check_release_claims(session_id, holder=holder, claims=claims, limits=self._limits)
        return await self._db.write(lambda tx: claiming.release_claims(tx, args), idempotent=True)

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
        """Judges each completion like ``complete_attempt``, all in one transaction: one
        round trip when every completion is fresh and returns nothing, else two (see
        ``completions``). Any error leaves nothing written."""
        checked = check_complete_attempts(completions, limits=self._limits)
        items = await self._completion_items(checked)
        if not items:
            return []

        async def complete(tx: Tx, fenced: bool) -> Finish[list[CompleteResult]]:
            return await outcomes.complete(tx, items, fenced=fenced)

        return await self._fenced_first(items, complete, idempotent=True)

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
        """``complete_attempts`` then ``claim_any`` as one commit. Completions of event
        cursors returning nothing, each fresh, go with the claim in one statement and no
        session lock (``completions.complete_and_claim_one``); other fresh ones returning
        nothing in one transaction of one round trip; the rest in two. Not retried after
        a lost connection (like ``claim_any``: a claim whose commit went unanswered lapses
        and counts a failure)."""
        args = check_complete_and_claim(
            completions,
            holder=holder,
            ttl=ttl,
            consumers=consumers,
            limit=limit,
            max_failures=max_failures,
            limits=self._limits,
        )
        items = await self._completion_items(args.completions)
        if outcomes.fits_one_statement(items):
            done = await outcomes.complete_and_claim_one(self._db, items, args.claim)
            if done is not None:
                return done

        async def cycle(tx: Tx, fenced: bool) -> Finish[CompletedAndClaimed]:
            return await outcomes.complete_and_claim(tx, items, args.claim, fenced=fenced)

        return await self._fenced_first(items, cycle, idempotent=False)

    async def _fenced_first(
        self,
        items: list[outcomes.Item],
        body: Callable[[Tx, bool], Awaitable[Finish[T]]],
        *,
        idempotent: bool,
    ) -> T:
        """Runs ``body(tx, fenced)`` as one write: fenced (one round trip) when the batch
        fits the fast path, again judged when a completion missed its fence (the fenced
        try wrote nothing), judged at once otherwise."""
        if items and outcomes.fits_fast_path(items):
            try:
                return await self._db.write(lambda tx: body(tx, True), idempotent=idempotent)
            except pg.InvalidTextRepresentation as exc:
                if not outcomes.missed_fence(exc):
                    raise
        return await self._db.write(lambda tx: body(tx, False), idempotent=idempotent)

    async def _completion_items(self, checked: list[CompletionArgs]) -> list[outcomes.Item]:
        """Each checked completion with its wake set; log targets among them refused."""
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
        return await self._db.write(lambda tx: outcomes.fail_attempt(tx, args), idempotent=True)

    async def dead_letters(self, session_id: str) -> list[Head]:
        sid = check_session(session_id, limits=self._limits)
        return await outcomes.dead_letters(self._db, sid)

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
        return await self._db.write(lambda tx: outcomes.redrive(tx, args, wake), idempotent=False)

    # -- state snapshots -------------------------------------------------------------------

    async def read_state(
        self, session_id: str, reducer: str, *, through: int | None = None
    ) -> StateRead:
        args = check_read_state(session_id, reducer, through=through, limits=self._limits)
        return await snapshots.read_state(self._db, args)

    async def put_snapshots(
        self, session_id: str, reducer: str, writes: Sequence[SnapshotWrite]
    ) -> None:
        args = check_put_snapshots(session_id, reducer, writes, limits=self._limits)
        if args.writes:
            await self._db.write(lambda tx: snapshots.put_snapshots(tx, args), idempotent=True)

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
        # A clear with if_last_index is idempotent; without, a retry would clear again.
        return await self._db.write(
            lambda tx: clear.clear(tx, args), idempotent=args.if_last_index is not None
        )

    async def reclaim(self, session_id: str) -> ReclaimResult:
        sid = check_session(session_id, limits=self._limits)
        return await self._db.write(lambda tx: clear.reclaim(tx, sid), idempotent=True)

    # -- monitoring ------------------------------------------------------------------------
    # Each is one statement on indexes that hold only the rows it reads (see monitoring.sql).

    async def find_dead_letters(self, query: DeadLetterQuery) -> list[Head]:
        checked = check_find_dead_letters(query, limits=self._limits)
        return await monitoring.find_dead_letters(self._db, checked)

    async def consumer_stats(self) -> list[ConsumerStats]:
        return await monitoring.consumer_stats(self._db)

    async def heartbeat(self, beat: WorkerBeat) -> None:
        """Records the beat at the database's time (the injected clock's, if any)."""
        await monitoring.heartbeat(self._db, check_heartbeat(beat, limits=self._limits))

    async def forget_workers(self, holders: Sequence[str]) -> None:
        checked = check_forget_workers(holders, limits=self._limits)
        await monitoring.forget_workers(self._db, checked)

    async def workers(self) -> list[WorkerInfo]:
        return await monitoring.workers(self._db)

    # -- live feeds ------------------------------------------------------------------------

    def stream(self, session_id: str, *, after: int = 0) -> AsyncIterator[StoredEvent]:
        """Stored events after ``after``, then live ones as they commit, read from the table
        in index order: no gaps, no duplicates.

        It starts at the clear marker at the latest; from there it delivers every event,
        so events committed before a clear it has not caught up with still come, then
        the marker (unless reclaim deleted them first).
        """
        args = check_stream(session_id, after=after, limits=self._limits)
        started = False

        async def read_after(last: int) -> list[StoredEvent]:
            nonlocal started
            batch = await log.stream_batch(self._db, args.session_id, last, visible=not started)
            started = True
            return batch

        return self._listener.stream(args.session_id, args.after, read_after)

    def wakeups(self) -> Wakeups:
        """Session ids where claimable work may have appeared (None when unknown): from
        NOTIFY, this store's own writes, and a poll every ``poll_interval``."""
        return self._listener.wakeups()

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
