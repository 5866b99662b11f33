"""Presence on SQLite: per-participant fields, last writer wins until expiry."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime, timedelta

from ..contract.args import check_presence_read, check_presence_write
from ..contract.limits import Limits
from ..models import JSON, PresenceRow
from . import codec
from .database import Database, Tx


class SqlitePresence:
    """Presence values in ``a2_presence``. A write wins per field unless the stored value is
    newer (by ``at``) and still live; ``None`` is kept as a tombstone and never read. A
    read sweeps the namespace's expired rows, so it is a (short) write transaction."""

    def __init__(self, db: Database, limits: Limits) -> None:
        self._db = db
        self._limits = limits

    async def write(
        self,
        ns: str,
        participant: str,
        values: Mapping[str, JSON],
        *,
        at: datetime,
        seen: JSON,
        ttl: float,
    ) -> dict[str, JSON]:
        write = check_presence_write(
            ns, participant, values, at=at, seen=seen, ttl=ttl, limits=self._limits
        )
        if not write.values:
            return {}

        def body(tx: Tx) -> set[str]:
            params = {
                "ns": write.ns,
                "participant": write.participant,
                "seen": write.seen_json,
                "at": codec.micros(write.at),
                "expires_at": codec.micros(tx.now + timedelta(seconds=write.ttl)),
                "now": tx.now_us,
            }
            applied: set[str] = set()
            for field, value in write.values.items():
                applied.update(
                    row["field"]
                    for row in tx.rows("presence_write", {**params, "field": field, "value": value})
                )
            return applied

        applied = await self._db.write(body)
        return {field: json.loads(text) for field, text in write.values.items() if field in applied}

    async def read(self, ns: str) -> list[PresenceRow]:
        checked = check_presence_read(ns, limits=self._limits)

        def body(tx: Tx) -> list[PresenceRow]:
            params = {"ns": checked, "now": tx.now_us}
            tx.run("presence_sweep", params)
            return [
                PresenceRow(
                    row["participant"],
                    row["field"],
                    json.loads(row["value"]),
                    json.loads(row["seen"]),
                    codec.time_of(row["at"]),
                    codec.time_of(row["expires_at"]),
                )
                for row in tx.rows("presence_read", params)
            ]

        return await self._db.write(body)
