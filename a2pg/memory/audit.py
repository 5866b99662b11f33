"""The operators' audit log in memory: entries kept in (at, id) order, read newest first."""

from __future__ import annotations

import bisect
import json
from dataclasses import replace
from datetime import datetime

from ..contract.args import AuditArgs, AuditLogArgs
from ..ids import IdGenerator
from ..models import AuditEntry


class AuditLog:
    """Every entry recorded, oldest first by ``(at, id)`` (the order the database backends
    index), each with its detail as the JSON text it was checked to, so every entry read
    back decodes a copy of its own (a caller's dict changed later changes nothing)."""

    def __init__(self) -> None:
        self._keys: list[tuple[datetime, str]] = []
        self._entries: dict[str, tuple[AuditEntry, str]] = {}

    def record(self, args: AuditArgs, *, now: datetime, new_id: IdGenerator) -> AuditEntry:
        """Stores the entry under a new id at ``now``. An id already held (an id generator
        handing one out twice) returns the entry stored under it, as the database backends'
        insert does (there: a retry of a write whose commit went unanswered)."""
        entry_id = new_id()
        if entry_id in self._entries:
            return self._read(entry_id)
        stored = replace(args.entry, id=entry_id, at=now)
        bisect.insort(self._keys, (now, entry_id))
        self._entries[entry_id] = (stored, args.detail_json)
        return self._read(entry_id)

    def page(self, args: AuditLogArgs) -> list[AuditEntry]:
        """Newest first, below the entry ``args.after`` (none: an empty page)."""
        end = len(self._keys)
        if args.after is not None:
            found = self._entries.get(args.after)
            if found is None:
                return []
            at = found[0].at
            assert at is not None
            end = bisect.bisect_left(self._keys, (at, args.after))
        start = max(0, end - args.limit)
        return [self._read(entry_id) for _, entry_id in reversed(self._keys[start:end])]

    def _read(self, entry_id: str) -> AuditEntry:
        entry, detail_json = self._entries[entry_id]
        return replace(entry, detail=json.loads(detail_json))
