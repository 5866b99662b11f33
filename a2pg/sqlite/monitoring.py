"""Monitoring on SQLite: each consumer's work, dead letters across sessions, worker rows."""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime

from ..contract.params import beat_row, dead_letter_page
from ..models import ConsumerStats, DeadLetterQuery, Head, WorkerBeat, WorkerInfo
from . import codec
from .database import Tx, rows


def consumer_stats(conn: sqlite3.Connection, now: datetime) -> list[ConsumerStats]:
    """Per consumer registered or holding heads, by name (see the ``consumer_stats``
    statement); the lag is counted on the store's clock."""
    now_us = codec.micros(now)
    return [
        ConsumerStats(
            row["consumer"],
            int(row["ready"]),
            int(row["claimed"]),
            int(row["backing_off"]),
            int(row["dead_letters"]),
            int(row["blocked_lanes"]),
            int(row["blocked"]),
            None
            if row["oldest_ready"] is None
            else (now - codec.time_of(row["oldest_ready"])).total_seconds(),
            bool(row["registered"]),
        )
        for row in rows(conn, "consumer_stats", {"now": now_us})
    ]


def find_dead_letters(conn: sqlite3.Connection, query: DeadLetterQuery) -> list[Head]:
    """One keyset page of every session's dead letters."""
    params = dead_letter_page(query)
    return [codec.head(row) for row in rows(conn, "find_dead_letters", params)]


def heartbeat(tx: Tx, beat: WorkerBeat) -> None:
    """Inserts or replaces the holder's row, every time in it the store's clock's."""
    row = beat_row(beat)
    tx.run("heartbeat", {**row, "consumers": json.dumps(row["consumers"]), "now": tx.now_us})


def forget_workers(tx: Tx, holders: list[str]) -> None:
    for holder in holders:
        tx.run("forget_worker", {"holder": holder})


def workers(conn: sqlite3.Connection, now: datetime) -> list[WorkerInfo]:
    """Every worker row by holder, with how long ago it was seen (never negative)."""
    found = []
    for row in rows(conn, "list_workers"):
        seen = codec.time_of(row["last_seen"])
        beat = WorkerBeat(
            holder=row["holder"],
            host=row["host"],
            pid=int(row["pid"]),
            consumers=tuple(json.loads(row["consumers"])),
            concurrency=int(row["concurrency"]),
            started_at=codec.time_of(row["started_at"]),
            in_flight=int(row["in_flight"]),
            version=row["version"],
            interval=float(row["interval_seconds"]),
            completed=int(row["completed"]),
            failed=int(row["failed"]),
        )
        found.append(WorkerInfo(beat, seen, max(0.0, (now - seen).total_seconds())))
    return found
