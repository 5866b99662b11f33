"""PostgresStore: the production backend of the store contract, on psycopg 3 and PostgreSQL."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar

import psycopg
from psycopg import errors as pg
from psycopg_pool import AsyncConnectionPool

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
from ..errors import invalid
from ..front import CheckedStore
from ..ids import Clock, IdGenerator, uuid7
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
from . import audit, caller, clear, codec, log, monitoring, queries, snapshots
from . import claims as claiming
from . import completions as outcomes
from .connect import CONNECT_TIMEOUT, Pooler, Reach, ScrubPassword, check_pooler, pool_log
from .database import Database, Finish, Tx
from .deadlines import CALL_TIMEOUT, check_call_timeout
from .layout import DEFAULT_SCHEMA, check_schema
from .poolers import settle
from .presence import PostgresPresence
from .registry import Registry
from .shards import Node, Shards, parse_nodes
from .streams import Connect, Listener, Scrub, channel_name

logger = logging.getLogger("a2pg.postgres")

T = TypeVar("T")


class PostgresStore(CheckedStore):
    """The store contract (docs/concepts/contract.md) on PostgreSQL.

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

    The front (``a2pg.front``) checks each call; each hook here runs its area's
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
        self._feed = self._listener.feed
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
        call_timeout: float = CALL_TIMEOUT,
        claim_nodes: str | None = None,
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
        with ``prepared statement "_pg3_..." does not exist``. Off, it sets
        ``prepare_threshold=None`` on every connection the store uses, a pool passed in
        included.

        Told nothing (or ``"session"``), the store looks for itself
        (``a2pg.postgres.poolers.probe``): behind a transaction-mode pooler it refuses
        to open (``INVALID_ARGUMENT``, one line naming ``--pooler transaction``) if it
        would prepare statements there, since those of two connections would mix, and
        runs as if told ``"transaction"`` (with a WARNING) if it prepares nothing
        (``prepare=False``) or the pooler keeps each client's prepared statements
        (PgBouncer 1.21+ with ``max_prepared_statements`` above 0). Whatever it saw, its
        connections name their prepared statements apart, so a statement of one is
        never run by another.

        ``connect_timeout`` bounds each new connection and each statement of this
        startup (the layout check, under a ``statement_timeout`` set for its
        transaction only): an unreachable server fails ``open()`` within it, with a
        ``psycopg.OperationalError`` that quotes no password. It also bounds a new
        pooled connection's first statement behind a pooler (one whose server
        connections are all taken keeps it waiting) and, for the store's own pool,
        the wait for a free connection (``psycopg_pool.PoolTimeout``): either means
        the pool or the pooler ran out of connections, an outage.

        ``call_timeout`` (default 30 s; a positive, finite number: every call has a
        deadline) bounds each store call: the wait for a pooled connection, its
        retries and every round trip. Past it the call's statement is cancelled, its
        connection dropped (a silent socket is never reused) and the call raises
        ``a2pg.postgres.CallTimeout``, a ``psycopg.OperationalError`` (an outage, like
        a lost connection: whether a commit in flight happened is unknown). It also
        bounds how long the LISTEN connection's poll may take. Raise it for calls that
        legitimately run long (clearing a huge session). The store's own connections
        also use TCP keepalives and ``tcp_user_timeout`` (unless the DSN sets them),
        so a dead peer is noticed within about 30 s even on an idle connection.

        ``claim_nodes`` (on Citus only: ``"host:port,host:port"``, as ``pg_dist_node``
        names the worker nodes): claims go round the shard groups of those nodes only,
        so a worker beside a node claims from its node's shards alone; every group must
        be some worker's. Elsewhere, or naming no node that holds a shard, the store
        refuses to open (``INVALID_ARGUMENT``).
        """
        check_schema(schema)
        nodes = None if claim_nodes is None else parse_nodes(claim_nodes, "claim_nodes")
        pooler = check_pooler(pooler)
        call_timeout = check_call_timeout(call_timeout)
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
        try:
            if reach.route is None:  # a pool passed in: probed on one of its connections
                await reach.probe_pool()
            undeclared = settle(reach.route, pooler, prepare=prepare)
        except BaseException:
            reach.forget()
            raise
        if undeclared:
            logger.warning(
                "a2pg store on schema %r: PostgreSQL is reached through a transaction-mode "
                "pooler; working as with --pooler transaction%s (pass it to say so)",
                schema,
                " --prepare, as the pooler keeps prepared statements" if prepare else "",
            )
            pooler = "transaction"
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
        store._db.call_timeout = store._listener.call_timeout = call_timeout
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
        try:
            if reach.layout is not None and reach.layout.distributed:
                await store._distributed(reach.conninfo, reach.conn_kwargs, nodes)
            elif nodes is not None:
                raise invalid(f"claim_nodes is for a store on Citus; schema {schema!r} is not")
        except BaseException:
            await store.close()
            raise
        return store

    async def _distributed(
        self, conninfo: str, kwargs: dict[str, Any], nodes: frozenset[Node] | None
    ) -> None:
        """The schema's tables are Citus's: run the statements' Citus variants, and the
        claims shard group by shard group where each is (``shards``), on ``nodes``."""
        statements = queries.statements(self._schema, "citus")
        self._db.statements = statements
        self._listener.statements = statements
        shards = Shards(self._schema, conninfo, kwargs, nodes)
        async with self._db.pool.connection() as conn:
            await shards.load(conn)
        if not shards.claimable:
            held = sorted({f"{host}:{port}" for host, port in (g.node for g in shards.groups)})
            await shards.close()
            raise invalid(
                f"claim_nodes names no node holding a shard of schema {self._schema!r}; "
                f"these do: {', '.join(held)}"
            )
        self._db.shards = shards
        self._listener.on_shard = shards.woke

    @property
    def distributed(self) -> bool:
        """Whether the store runs on Citus (its tables distributed, ``a2pg/postgres/citus.py``)."""
        return self._db.statements.dialect == "citus"

    async def close(self) -> None:
        """Ends streams and wakeups, closes the LISTEN connection and the pool (if owned);
        later calls are refused, even on a pool the store does not own."""
        self._closed = True
        await self._feed.close()  # and the LISTEN connection, its source
        self._db.close()
        if self._db.shards is not None:
            await self._db.shards.close()
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
        self._check_open()
        return self._presence

    async def _now(self) -> datetime:
        """The injected clock's time, else the server's (what its writes record)."""
        injected = self._db.now_param()
        if injected is not None:
            return injected
        [row] = await self._db.run(self._db.query("server_now"), {})
        return codec.utc(row["now"])

    def _announce(self, appended: Sequence[str], work: Sequence[str]) -> None:
        """What a commit of this store did, told to its own streams and wakeups at once."""
        self._feed.announce(appended, work)

    async def _wake_set(self, consumers: Sequence[Consumer] | None) -> Sequence[Consumer]:
        return await self._registry.wake_set(consumers)

    # -- the log ---------------------------------------------------------------------------

    async def _append(self, args: AppendArgs, wake: Sequence[Consumer]) -> AppendResult:
        """One statement in one round trip for fresh events (``log.append_fresh``), else
        one transaction of two round trips (a batch of only stored ids replays them; a
        cause is fenced; reused ids of a cleared session)."""
        if not args.events:
            return AppendResult(
                [], await log.pending_now(self._db, args.session_id, args.consumers)
            )
        ids = log.event_ids(args, self._db.new_id)
        if log.fits_one_statement(args):
            done = await log.append_fresh(self._db, args, wake, ids)
            if done is not None:
                return done

        async def body(tx: Tx) -> Finish[AppendResult]:
            return await log.append(tx, args, wake, ids)

        idempotent = len(args.supplied_ids) == len(args.events)
        return await self._db.write(body, idempotent=idempotent, session=args.session_id)

    async def _read(self, args: ReadArgs) -> list[StoredEvent]:
        return await log.read(self._db, args)

    async def _wake_log(self, args: WakeLogArgs) -> WakeLogResult:
        return await self._db.write(
            lambda tx: log.wake_log(tx, args), idempotent=True, session=args.session_id
        )

    async def _list_cursors(self, session_id: str) -> list[Cursor]:
        return await log.cursors(self._db, session_id)

    async def _list_sessions(self, args: SessionsArgs) -> list[SessionInfo]:
        return await log.sessions(self._db, args)

    async def _stream_batch(
        self, session_id: str, after: int, *, visible: bool
    ) -> list[StoredEvent]:
        return await log.stream_batch(self._db, session_id, after, visible=visible)

    # -- claims ----------------------------------------------------------------------------

    async def _claim_available(self, args: ClaimArgs, wake: Sequence[Consumer]) -> ClaimResult:
        return await self._db.write(
            lambda tx: claiming.claim_available(tx, args, wake),
            idempotent=False,
            session=args.session_id,
        )

    async def _claim_any(self, args: ClaimAnyArgs) -> list[Head]:
        return await claiming.claim_any(self._db, args)

    async def _next_due_in(self, consumers: Sequence[Consumer] | None) -> float | None:
        params = {"now": self._db.now_param(), "names": log.names_of(consumers)}
        [row] = await self._db.run(self._db.query("next_due"), params)
        return None if row["due_in"] is None else float(row["due_in"])

    async def _renew_claims(self, args: HeldClaimsArgs) -> RenewResult:
        return await self._db.write(lambda tx: claiming.renew_claims(tx, args), idempotent=True)

    async def _release_claims(self, args: HeldClaimsArgs) -> ReleaseResult:
        return await self._db.write(lambda tx: claiming.release_claims(tx, args), idempotent=True)

    # -- outcomes of attempts --------------------------------------------------------------

    async def _complete_attempts(self, items: list[CompletionItem]) -> list[CompleteResult]:
        """One transaction: one round trip when every completion is fresh and returns
        nothing, else two (see ``completions``)."""

        async def complete(tx: Tx, fenced: bool) -> Finish[list[CompleteResult]]:
            return await outcomes.complete(tx, items, fenced=fenced)

        return await self._fenced_first(items, complete, idempotent=True)

    async def _complete_and_claim(
        self, items: list[CompletionItem], claim: ClaimAnyArgs
    ) -> CompletedAndClaimed:
        """Completions of event cursors returning nothing, each fresh, go with the claim
        in one statement and no session lock (``completions.complete_and_claim_one``);
        other fresh ones returning nothing in one transaction of one round trip; the rest
        in two. Not retried after a lost connection (like ``claim_any``: a claim whose
        commit went unanswered lapses and counts a failure)."""
        if self._db.shards is not None:  # Citus: the cycle runs where each shard group is
            return await outcomes.complete_and_claim_on_shards(
                self._db, self._db.shards, items, claim, self._complete_attempts
            )
        if outcomes.fits_one_statement(items):
            done = await outcomes.complete_and_claim_one(self._db, items, claim)
            if done is not None:
                return done

        async def cycle(tx: Tx, fenced: bool) -> Finish[CompletedAndClaimed]:
            return await outcomes.complete_and_claim(tx, items, claim, fenced=fenced)

        return await self._fenced_first(items, cycle, idempotent=False)

    async def _fenced_first(
        self,
        items: list[CompletionItem],
        body: Callable[[Tx, bool], Awaitable[Finish[T]]],
        *,
        idempotent: bool,
    ) -> T:
        """Runs ``body(tx, fenced)`` as one write: fenced (one round trip) when the batch
        fits the fast path, again judged when a completion missed its fence (the fenced
        try wrote nothing), judged at once otherwise."""
        session = None  # on Citus, a batch of one session runs on its node
        if self._db.shards is not None:
            sessions = {item.args.completion.session_id for item in items}
            session = next(iter(sessions)) if len(sessions) == 1 else None
        if items and outcomes.fits_fast_path(items):
            try:
                return await self._db.write(
                    lambda tx: body(tx, True), idempotent=idempotent, session=session
                )
            except pg.InvalidTextRepresentation as exc:
                if not outcomes.missed_fence(exc):
                    raise
        return await self._db.write(
            lambda tx: body(tx, False), idempotent=idempotent, session=session
        )

    async def _fail_attempt(self, args: FailArgs) -> FailResult:
        return await self._db.write(
            lambda tx: outcomes.fail_attempt(tx, args), idempotent=True, session=args.session_id
        )

    async def _dead_letters(self, session_id: str) -> list[Head]:
        return await outcomes.dead_letters(self._db, session_id)

    async def _redrive(self, args: RedriveArgs, wake: Sequence[Consumer]) -> RedriveResult:
        return await self._db.write(lambda tx: outcomes.redrive(tx, args, wake), idempotent=False)

    async def _attempts(self, args: AttemptsArgs) -> list[AttemptRecord]:
        return await history.attempts(self._db, args)

    async def _prune_attempts(self, args: PruneAttemptsArgs) -> int:
        return await history.prune(self._db, args)

    async def _activity(self, args: ActivityArgs) -> list[ActivityPoint]:
        return await history.activity(self._db, args)

    async def _cancel_head(self, args: CancelArgs, wake: Sequence[Consumer]) -> CancelResult:
        return await self._db.write(
            lambda tx: outcomes.cancel_head(tx, args, wake), idempotent=False
        )

    # -- state snapshots -------------------------------------------------------------------

    async def _read_state(self, args: ReadStateArgs) -> StateRead:
        return await snapshots.read_state(self._db, args)

    async def _put_snapshots(self, args: PutSnapshotsArgs) -> None:
        await self._db.write(
            lambda tx: snapshots.put_snapshots(tx, args), idempotent=True, session=args.session_id
        )

    # -- clear and reclaim -----------------------------------------------------------------

    async def _clear(self, args: ClearArgs) -> ClearResult:
        # A clear with if_last_index is idempotent; without, a retry would clear again.
        return await self._db.write(
            lambda tx: clear.clear(tx, args), idempotent=args.if_last_index is not None
        )

    async def _reclaim(self, session_id: str) -> ReclaimResult:
        return await self._db.write(lambda tx: clear.reclaim(tx, session_id), idempotent=True)

    # -- consumer registry -----------------------------------------------------------------

    async def _register_consumers(self, consumers: list[Consumer]) -> None:
        await self._registry.register(consumers)

    async def _unregister_consumers(self, names: list[str]) -> None:
        await self._registry.unregister(names)

    async def _pause_consumers(self, names: list[str]) -> None:
        await self._registry.pause(names)

    async def _resume_consumers(self, names: list[str]) -> None:
        self._announce((), await self._registry.resume(names))

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
    # Each is one statement on indexes that hold only the rows it reads (see monitoring.sql).

    async def _find_dead_letters(self, query: DeadLetterQuery) -> list[Head]:
        return await monitoring.find_dead_letters(self._db, query)

    async def _find_heads(self, query: HeadQuery) -> list[FoundHead]:
        return await monitoring.find_heads(self._db, query)

    async def _consumer_stats(self) -> list[ConsumerStats]:
        return await monitoring.consumer_stats(self._db)

    async def _heartbeat(self, beat: WorkerBeat) -> None:
        """Records the beat at the database's time (the injected clock's, if any)."""
        await monitoring.heartbeat(self._db, beat)

    async def _forget_workers(self, holders: list[str]) -> None:
        await monitoring.forget_workers(self._db, holders)

    async def _list_workers(self) -> list[WorkerInfo]:
        return await monitoring.workers(self._db)

    # -- appending in the caller's own transaction -----------------------------------------

    async def append_in(
        self,
        conn: psycopg.AsyncConnection[Any],
        session_id: str,
        events: Sequence[NewEvent],
        *,
        consumers: Sequence[Consumer] | None = None,
        origin_index: int | None = None,
    ) -> AppendResult:
        """``append`` on the application's own connection, inside its open transaction: the
        events commit or roll back with the application's rows, and the wakeup (NOTIFY)
        goes out only when it commits. The same checks, results and rules as ``append``.

        ``conn`` must be idle in a transaction (``async with conn.transaction():``), or
        idle and not in autocommit (the append begins the transaction; you commit it).
        Nothing is committed, prepared or set on it, and the store's pool is not
        used; ``consumers=None`` reads the registry in your transaction (naming them saves
        that round trip). The session's row stays locked until you commit: a long
        transaction holds back that session's other writes. See docs/concepts/outbox.md.
        """
        self._check_open()
        db = self._db
        on = caller.Caller(
            caller.check_connection(conn),
            statements=db.statements,
            channel=db.channel,
            clock=db.clock,
            new_id=db.new_id,
        )
        async with on:
            args, wake = await self._prepare_append(
                session_id,
                events,
                consumers=consumers,
                origin_index=origin_index,
                wake_set=on.wake_set,
            )
            return await on.append(args, wake)

    # -- the audit log ---------------------------------------------------------------------

    async def _record_audit(self, args: AuditArgs) -> AuditEntry:
        return await audit.record(self._db, args)

    async def _audit_log(self, args: AuditLogArgs) -> list[AuditEntry]:
        return await audit.page(self._db, args)
