"""Presence on PostgreSQL: per-participant fields, last writer wins until expiry."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from ..contract.args import check_presence_read, check_presence_write
from ..contract.limits import Limits
from ..models import JSON, PresenceRow
from . import codec
from .database import Database


class PostgresPresence:
    """Presence values in ``a2_presence``. A write wins per field unless the stored value is
    newer (by ``at``) and still live; ``None`` is kept as a tombstone and never read.
    Each call is one autocommit statement."""

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
        encoded = write.values
        if not encoded:
            return {}
        params: dict[str, Any] = {
            "ns": write.ns,
            "participant": write.participant,
            "fields": list(encoded),
            "values": list(encoded.values()),
            "seen": write.seen_json,
            "at": write.at,
            "ttl": timedelta(seconds=write.ttl),
            "now": self._db.moment(),
        }
        rows = await self._db.run(self._db.query("presence_write"), params, idempotent=True)
        applied = {row["field"] for row in rows}
        return {field: json.loads(text) for field, text in encoded.items() if field in applied}

    async def read(self, ns: str) -> list[PresenceRow]:
        checked = check_presence_read(ns, limits=self._limits)
        rows = await self._db.run(
            self._db.query("presence_read"), {"ns": checked, "now": self._db.now_param()}
        )
        return [
            PresenceRow(
                row["participant"],
                row["field"],
                row["value"],
                row["seen"],
                codec.utc(row["at"]),
                codec.utc(row["expires_at"]),
            )
            for row in rows
        ]
