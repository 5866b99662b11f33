"""The consumer registry on PostgreSQL: log consumers' specs in ``a2_consumers``, cached briefly,
and the consumers an operator paused (``a2_consumer_pauses``, read by every claim itself)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..contract.registry_cache import RegistryCache
from ..contract.rules import backfill_restarts
from ..models import BackfillProgress, Consumer
from . import codec
from .database import Database
from .writes import columns, push

RESUME_READY_LIMIT = 1000
"""Oldest ready heads of the resumed consumers a resume looks at for sessions to notify
(as a wakeups poll looks at its oldest ready heads): the poll finds any beyond them."""


class Registry:
    """Registered log consumers, read through a cache of ``ttl`` seconds: a registration
    made by another process reaches this store's writes within that bound, one made
    here at once."""

    def __init__(self, db: Database, *, ttl: float) -> None:
        self._db = db
        self._cache = RegistryCache(self.registered, ttl=ttl)

    async def consumers(self) -> list[Consumer]:
        return await self._cache.consumers()

    async def wake_set(self, consumers: Sequence[Consumer] | None) -> Sequence[Consumer]:
        """The log consumers a write wakes: those named, else the registered ones."""
        return await self.consumers() if consumers is None else consumers

    async def registered(self) -> list[Consumer]:
        """The registry as stored now (no cache), by name."""
        rows = await self._db.run(self._db.query("registered_consumers"), {})
        return [codec.consumer(row) for row in rows]

    async def register(self, consumers: Sequence[Consumer]) -> None:
        """Stores each log consumer's spec; cursors take a new spec's types at their
        session's next write naming no consumers."""
        if not consumers:
            return
        stored = {consumer.name: consumer for consumer in await self.registered()}
        table = columns("names", "lanes", "types", "backfills", "restarts")
        for consumer in consumers:
            assert consumer.log is not None
            log = consumer.log
            restart = backfill_restarts(stored.get(consumer.name), consumer)
            push(table, consumer.name, log.lane, codec.types_json(log.types), log.backfill, restart)
        self._cache.changed()
        params = {**table, "now": self._db.now_param()}
        await self._db.run(self._db.query("register_consumers"), params, idempotent=True)
        self._cache.changed()

    async def unregister(self, names: Sequence[str]) -> None:
        """Stops waking these consumers; their cursors stay."""
        self._cache.changed()
        await self._db.run(
            self._db.query("unregister_consumers"), {"names": list(names)}, idempotent=True
        )
        self._cache.changed()

    async def backfill_state(self, name: str) -> tuple[Consumer, BackfillProgress] | None:
        rows = await self._db.run(self._db.query("backfill_state"), {"name": name})
        return _backfill_of(rows[0]) if rows else None

    async def record_backfill(
        self, name: str, seen: BackfillProgress, *, after: str | None, sessions: int, done: bool
    ) -> BackfillProgress | None:
        """Records a batch over ``seen`` (a retry after a lost commit finds the progress
        moved and records nothing twice)."""
        params = {
            "name": name,
            "after": after,
            "sessions": sessions,
            "done": done,
            "now": self._db.now_param(),
            "seen_started_at": seen.started_at,
            "seen_after": seen.after,
        }
        rows = await self._db.run(self._db.query("record_backfill"), params, idempotent=True)
        return _backfill_of(rows[0])[1] if rows else None

    async def pause(self, names: Sequence[str]) -> None:
        """Pauses these consumers at the store's time; a paused one keeps its first time.
        No cache: each claim statement reads the pauses itself, so every worker sees one
        at its next claim."""
        params = {"names": list(names), "now": self._db.now_param()}
        await self._db.run(self._db.query("pause_consumers"), params, idempotent=True)

    async def resume(self, names: Sequence[str]) -> list[str]:
        """Ends these consumers' pauses and notifies (NOTIFY, as appends do) the sessions
        where one of them has a head claimable now; those sessions, for this store's own
        wakeups. A retry after a lost commit notifies nothing (nothing is paused any
        more): the wakeups poll finds the heads within its interval."""
        params = {
            "names": list(names),
            "now": self._db.now_param(),
            "channel": self._db.channel,
            "limit": RESUME_READY_LIMIT,
        }
        rows = await self._db.run(self._db.query("resume_consumers"), params, idempotent=True)
        return sorted(row["session_id"] for row in rows)


def _backfill_of(row: Any) -> tuple[Consumer, BackfillProgress]:
    progress = BackfillProgress(
        row["backfill_started_at"],
        int(row["backfill_sessions"]),
        row["backfill_after"],
        row["backfill_done_at"],
    )
    return codec.consumer(row), progress
