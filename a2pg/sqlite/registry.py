"""The consumer registry on SQLite: log consumers' specs in ``a2_consumers``, cached briefly,
and the consumers an operator paused (``a2_consumer_pauses``, read by every claim itself)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from ..contract.registry_cache import RegistryCache
from ..contract.rules import backfill_restarts
from ..models import BackfillProgress, Consumer
from . import codec
from .database import Database, Tx, one, rows

RESUME_READY_LIMIT = 1000
"""Oldest ready heads of the resumed consumers a resume looks at for sessions to announce
(as a wakeups look reads its oldest ready heads): the next look finds any beyond them."""


def registered(conn: sqlite3.Connection) -> list[Consumer]:
    """The registry as stored now, by name."""
    return [codec.consumer(row) for row in rows(conn, "registered_consumers")]


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
        return await self._db.read(registered)

    async def register(self, consumers: Sequence[Consumer]) -> None:
        """Stores each log consumer's spec; cursors take a new spec's types at their
        session's next write naming no consumers."""
        if not consumers:
            return

        def body(tx: Tx) -> None:
            stored = {consumer.name: consumer for consumer in registered(tx.conn)}
            for consumer in consumers:
                log = consumer.log
                assert log is not None
                params = {
                    "name": consumer.name,
                    "lane": log.lane,
                    "types": codec.types_json(log.types),
                    "backfill": int(log.backfill),
                    "restart": int(backfill_restarts(stored.get(consumer.name), consumer)),
                    "now": tx.now_us,
                }
                stored[consumer.name] = consumer
                tx.run("register_consumer", params)

        self._cache.changed()
        await self._db.write(body)
        self._cache.changed()

    async def unregister(self, names: Sequence[str]) -> None:
        """Stops waking these consumers; their cursors stay."""

        def body(tx: Tx) -> None:
            for name in names:
                tx.run("unregister_consumer", {"name": name})

        self._cache.changed()
        await self._db.write(body)
        self._cache.changed()

    async def backfill_state(self, name: str) -> tuple[Consumer, BackfillProgress] | None:
        row = await self._db.read(lambda conn: one(conn, "backfill_state", {"name": name}))
        return None if row is None else _backfill_of(row)

    async def record_backfill(
        self, name: str, seen: BackfillProgress, *, after: str | None, sessions: int, done: bool
    ) -> BackfillProgress | None:
        """Records a batch over ``seen``; the progress as it is then."""

        def body(tx: Tx) -> sqlite3.Row | None:
            params = {
                "name": name,
                "after": after,
                "sessions": sessions,
                "done": int(done),
                "now": tx.now_us,
                "seen_started_at": codec.micros(seen.started_at),
                "seen_after": seen.after,
            }
            tx.run("record_backfill", params)
            return tx.one("backfill_state", {"name": name})

        row = await self._db.write(body)
        return None if row is None else _backfill_of(row)[1]

    async def pause(self, names: Sequence[str]) -> None:
        """Pauses these consumers at the store's time; a paused one keeps its first time.
        No cache: each claim reads the pauses itself, so every process sees one at its
        next claim."""

        def body(tx: Tx) -> None:
            for name in names:
                tx.run("pause_consumer", {"name": name, "now": tx.now_us})

        await self._db.write(body)

    async def resume(self, names: Sequence[str]) -> None:
        """Ends these consumers' pauses; the sessions where one of them has a head claimable
        now are announced to this store's wakeups after the commit, and other processes'
        watchers see the commit change the file and look for themselves."""

        def body(tx: Tx) -> None:
            resumed = [name for name in names if tx.run("resume_consumer", {"name": name})]
            if not resumed:
                return
            params = {"names": json.dumps(resumed), "now": tx.now_us}
            ready = tx.rows("resumed_ready_sessions", {**params, "limit": RESUME_READY_LIMIT})
            tx.work.update(row["session_id"] for row in ready)

        await self._db.write(body)


def _backfill_of(row: sqlite3.Row) -> tuple[Consumer, BackfillProgress]:
    progress = BackfillProgress(
        codec.time_of(int(row["backfill_started_at"])),
        int(row["backfill_sessions"]),
        row["backfill_after"],
        codec.maybe_time(row["backfill_done_at"]),
    )
    return codec.consumer(row), progress
