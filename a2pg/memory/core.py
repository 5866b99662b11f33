"""MemoryCore: MemoryStore's state, shared helpers, listings, registry and live feeds."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from .. import validation as check
from ..errors import invalid
from ..ids import Clock, IdGenerator, system_clock, uuid7
from ..models import Consumer, Cursor, SessionInfo, StoredEvent
from ..validation import DEFAULT_LIMITS, CheckedEvent, Limits
from .cursors import listing_order, refresh_types
from .presence import MemoryPresence
from .ready import ReadyQueue
from .state import SessionState
from .streams import Hub

STREAM_BATCH = 256
"""Events a stream reads per look at the log."""


class MemoryCore:
    """The parts of MemoryStore that read, list, register and announce; the writes of the
    log, claims and snapshots live in ``MemoryStore`` itself."""

    def __init__(
        self,
        *,
        clock: Clock | None = None,
        ids: IdGenerator | None = None,
        limits: Limits = DEFAULT_LIMITS,
    ) -> None:
        self._clock = clock or system_clock
        self._new_id = ids or uuid7
        self._limits = limits
        self._sessions: dict[str, SessionState] = {}
        self._ready = ReadyQueue(self._sessions)
        self._registry: dict[str, Consumer] = {}
        self._hub = Hub()
        self._presence = MemoryPresence(self._clock, limits)

    @property
    def presence(self) -> MemoryPresence:
        return self._presence

    def _consumers(self, consumers: Sequence[Consumer] | None) -> Sequence[Consumer] | None:
        return check.check_consumers(consumers, self._limits)

    def _wake_set(self, consumers: Sequence[Consumer] | None) -> Sequence[Consumer]:
        """The log consumers a write wakes: those named, else the registered ones."""
        return list(self._registry.values()) if consumers is None else consumers

    def _events(
        self, events: object, wake: Sequence[Consumer], *, need_ids: bool = False
    ) -> list[CheckedEvent]:
        names = check.log_consumer_names(wake)
        return check.check_events(events, self._limits, log_consumers=names, need_ids=need_ids)

    def _publish(self, session: SessionState) -> None:
        """Announces what the operation did: new events to streams, new work to wakeups."""
        if session.new_events:
            session.new_events = False
            self._hub.committed(session.session_id)
        if session.new_work:
            session.new_work = False
            self._hub.work(session.session_id)

    def _writable(self, session_id: str) -> SessionState:
        """The session to write to; a new one must be put in ``_sessions`` before its
        first row is added."""
        return self._sessions.get(session_id) or SessionState(session_id, ready=self._ready)

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
        wanted = None if args.types is None else frozenset(args.types)
        return self._read(session_id, args.after, args.through, wanted, args.limit)

    def _read(
        self,
        session_id: str,
        after: int,
        through: int | None,
        types: frozenset[str] | None,
        limit: int | None,
    ) -> list[StoredEvent]:
        session = self._sessions.get(session_id)
        if session is None:
            return []
        end = session.head if through is None else through
        if types is None:
            return [row.stored() for row in session.rows_between(after, end, limit)]
        picked = [row for row in session.rows_between(after, end) if row.type in types]
        return [row.stored() for row in picked[:limit]]

    async def cursors(self, session_id: str) -> list[Cursor]:
        check.check_session_id(session_id, self._limits)
        session = self._sessions.get(session_id)
        views = [cursor.view() for cursor in session.cursors.values()] if session else []
        return sorted(views, key=listing_order)

    async def sessions(self, *, after: str | None = None, limit: int = 100) -> list[SessionInfo]:
        if after is not None:
            check.check_session_id(after, self._limits)
        check.check_positive_count(limit, "limit")
        names = sorted(name for name in self._sessions if after is None or name > after)
        return [self._info(self._sessions[name]) for name in names[:limit]]

    @staticmethod
    def _info(session: SessionState) -> SessionInfo:
        live = [cursor for cursor in session.cursors.values() if cursor.head is not None]
        dead = sum(1 for cursor in live if cursor.dispatch.failed_at is not None)
        return SessionInfo(
            session.session_id, session.head, session.clear_index, len(live) - dead, dead
        )

    # -- consumer registry ----------------------------------------------------------------

    async def register_consumers(self, consumers: Sequence[Consumer]) -> None:
        """Stores each log consumer's spec (targeted ones are ignored). A changed spec
        reaches the consumer's existing log cursors in every session at once, as
        ``refreshLogTypes`` would on their next write."""
        checked = check.check_consumers(consumers, self._limits) or []
        logs = [consumer for consumer in checked if consumer.log is not None]
        for consumer in logs:
            self._registry[consumer.name] = consumer
        for session in self._sessions.values():
            refresh_types(session, logs)

    async def unregister_consumers(self, names: Sequence[str]) -> None:
        """Stops waking these consumers; their cursors stay."""
        if isinstance(names, str) or not isinstance(names, Sequence):
            raise invalid("names must be a sequence of consumer names")
        for name in [check.check_name(name, "consumer name", self._limits) for name in names]:
            self._registry.pop(name, None)

    async def registered_consumers(self) -> list[Consumer]:
        return [self._registry[name] for name in sorted(self._registry)]

    # -- live feeds ---------------------------------------------------------------------

    def stream(self, session_id: str, *, after: int = 0) -> AsyncIterator[StoredEvent]:
        """Stored events after ``after``, then live ones as they commit, in order; ends when
        the consumer closes it or the store closes.

        It starts at the clear marker at the latest (never below it); from there it
        delivers every event, so events committed before a clear the stream has not
        caught up with are still delivered, followed by the marker (unless reclaim
        deleted them first).
        """
        check.check_session_id(session_id, self._limits)
        start = check.check_optional_bound(after, "after") or 0
        started = False

        def read_after(last: int) -> list[StoredEvent]:
            nonlocal started
            session = self._sessions.get(session_id)
            if session is None:
                return []
            rows = session.rows_between(last, session.head, STREAM_BATCH, visible=not started)
            started = True
            return [row.stored() for row in rows]

        return self._hub.stream(session_id, start, read_after)

    def wakeups(self) -> AsyncIterator[str | None]:
        """Session ids where claimable work may have appeared: heads created by appends,
        completions and log wakes, redrives, and failures claimable at once. Lease and
        backoff expiries are not announced: workers poll (``Busy.retry_at``) for those."""
        return self._hub.wakeups()

    async def close(self) -> None:
        """Ends every stream and wakeups iterator; the data stays usable."""
        self._hub.close()
