"""The consumer registry on SQLite: log consumers' specs in ``a2_consumers``, cached briefly."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from ..contract.registry_cache import RegistryCache
from ..models import Consumer
from . import codec
from .database import Database, Tx, rows


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
            for consumer in consumers:
                log = consumer.log
                assert log is not None
                params = {
                    "name": consumer.name,
                    "lane": log.lane,
                    "types": codec.types_json(log.types),
                    "backfill": int(log.backfill),
                    "now": tx.now_us,
                }
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
