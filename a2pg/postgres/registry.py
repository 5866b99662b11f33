"""The consumer registry on PostgreSQL: log consumers' specs in ``a2_consumers``, cached briefly."""

from __future__ import annotations

from collections.abc import Sequence

from ..contract.registry_cache import RegistryCache
from ..models import Consumer
from . import codec
from .database import Database
from .writes import columns, push


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
        table = columns("names", "lanes", "types", "backfills")
        for consumer in consumers:
            assert consumer.log is not None
            log = consumer.log
            push(table, consumer.name, log.lane, codec.types_json(log.types), log.backfill)
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
