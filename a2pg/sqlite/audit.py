"""The operators' audit log on SQLite: a write transaction to record, a read to page."""

from __future__ import annotations

import json
import sqlite3

from ..contract.args import AuditArgs, AuditLogArgs
from ..models import AuditEntry
from . import codec
from .database import Tx, rows


def record(tx: Tx, args: AuditArgs) -> AuditEntry:
    """Inserts the entry at the transaction's time, under a new id."""
    entry = args.entry
    params = {
        "id": tx.new_id(),
        "now": tx.now_us,
        "actor": entry.actor,
        "action": entry.action,
        "session_id": entry.session_id,
        "consumer": entry.consumer,
        "lane": entry.lane,
        "idx": entry.index,
        "detail": args.detail_json,
    }
    [row] = tx.rows("record_audit", params)  # fetched whole: the statement ends here
    return _entry(row)


def page(conn: sqlite3.Connection, args: AuditLogArgs) -> list[AuditEntry]:
    """Newest first, after the entry ``args.after`` when given."""
    if args.after is None:
        found = rows(conn, "audit_log_first", {"limit": args.limit})
    else:
        found = rows(conn, "audit_log_after", {"after": args.after, "limit": args.limit})
    return [_entry(row) for row in found]


def _entry(row: sqlite3.Row) -> AuditEntry:
    return AuditEntry(
        actor=row["actor"],
        action=row["action"],
        session_id=row["session_id"],
        consumer=row["consumer"],
        lane=row["lane"],
        index=row["idx"],
        detail=json.loads(row["detail"]),
        id=row["id"],
        at=codec.time_of(row["at"]),
    )
