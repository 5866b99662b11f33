"""The operators' audit log on PostgreSQL: one autocommit statement to record, one to page."""

from __future__ import annotations

from psycopg.rows import DictRow

from ..contract.args import AuditArgs, AuditLogArgs
from ..models import AuditEntry
from . import codec
from .database import Database


async def record(db: Database, args: AuditArgs) -> AuditEntry:
    """Inserts the entry at the database's time (the injected clock's, if any). Safe to
    retry: the id is made here, once, so a retried insert finds its own row."""
    entry = args.entry
    params = {
        "id": db.new_id(),
        "now": db.now_param(),
        "actor": entry.actor,
        "action": entry.action,
        "session_id": entry.session_id,
        "consumer": entry.consumer,
        "lane": entry.lane,
        "index": entry.index,
        "detail": args.detail_json,
    }
    [row] = await db.run(db.query("record_audit"), params, idempotent=True)
    return _entry(row)


async def page(db: Database, args: AuditLogArgs) -> list[AuditEntry]:
    """Newest first, after the entry ``args.after`` when given."""
    if args.after is None:
        rows = await db.run(db.query("audit_log_first"), {"limit": args.limit})
    else:
        params = {"after": args.after, "limit": args.limit}
        rows = await db.run(db.query("audit_log_after"), params)
    return [_entry(row) for row in rows]


def _entry(row: DictRow) -> AuditEntry:
    return AuditEntry(
        actor=row["actor"],
        action=row["action"],
        session_id=row["session_id"],
        consumer=row["consumer"],
        lane=row["lane"],
        index=None if row["idx"] is None else int(row["idx"]),
        detail=row["detail"],
        id=row["id"],
        at=codec.utc(row["at"]),
    )
