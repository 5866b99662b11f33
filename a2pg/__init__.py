"""a2pg: the production store of the A2 session runtime, on PostgreSQL."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .contract.limits import Limits
from .errors import (
    A2Error,
    IdempotencyConflict,
    InvalidArgument,
    PartialDuplicateBatch,
    SessionCleared,
    StoreNotConfigured,
    StoreUnavailable,
    SupersededAttempt,
)
from .models import (
    ANY_LANE,
    CLEAR_EVENT_TYPE,
    ActivityPoint,
    AnyLane,
    AppendResult,
    AttemptOutcome,
    AttemptRecord,
    AttemptRef,
    AuditEntry,
    BackfillProgress,
    Busy,
    CancelAction,
    CancelResult,
    Cause,
    Claimed,
    ClaimRef,
    ClaimResult,
    ClearResult,
    Completed,
    CompletedAndClaimed,
    CompleteResult,
    Completion,
    Consumer,
    ConsumerStats,
    Cursor,
    DeadLetterKey,
    DeadLetterQuery,
    Dispatch,
    FailResult,
    FoundHead,
    Head,
    HeadKey,
    HeadQuery,
    LogSpec,
    NewEvent,
    PresenceRow,
    ReclaimResult,
    RedriveResult,
    ReleaseResult,
    RenewResult,
    SessionInfo,
    Settled,
    SnapshotWrite,
    StateRead,
    StoredEvent,
    Superseded,
    Target,
    WakeLogResult,
    WorkerBeat,
    WorkerInfo,
    WorkState,
)
from .store import Presence, Store

if TYPE_CHECKING:
    from .memory import MemoryStore
    from .postgres import PostgresStore
    from .sqlite import SqliteStore
    from .worker import App, Worker, WorkerSettings

__version__ = "0.1.0"

__all__ = [
    "ANY_LANE",
    "CLEAR_EVENT_TYPE",
    "A2Error",
    "ActivityPoint",
    "AnyLane",
    "App",
    "AppendResult",
    "AttemptOutcome",
    "AttemptRecord",
    "AttemptRef",
    "AuditEntry",
    "BackfillProgress",
    "Busy",
    "CancelAction",
    "CancelResult",
    "Cause",
    "ClaimRef",
    "ClaimResult",
    "Claimed",
    "ClearResult",
    "CompleteResult",
    "Completed",
    "CompletedAndClaimed",
    "Completion",
    "Consumer",
    "ConsumerStats",
    "Cursor",
    "DeadLetterKey",
    "DeadLetterQuery",
    "Dispatch",
    "FailResult",
    "FoundHead",
    "Head",
    "HeadKey",
    "HeadQuery",
    "IdempotencyConflict",
    "InvalidArgument",
    "Limits",
    "LogSpec",
    "MemoryStore",
    "NewEvent",
    "PartialDuplicateBatch",
    "PostgresStore",
    "Presence",
    "PresenceRow",
    "ReclaimResult",
    "RedriveResult",
    "ReleaseResult",
    "RenewResult",
    "SessionCleared",
    "SessionInfo",
    "Settled",
    "SnapshotWrite",
    "SqliteStore",
    "StateRead",
    "Store",
    "StoreNotConfigured",
    "StoreUnavailable",
    "StoredEvent",
    "Superseded",
    "SupersededAttempt",
    "Target",
    "WakeLogResult",
    "WorkState",
    "Worker",
    "WorkerBeat",
    "WorkerInfo",
    "WorkerSettings",
]

_LAZY = {
    "App": ".worker",
    "MemoryStore": ".memory",
    "PostgresStore": ".postgres",
    "SqliteStore": ".sqlite",
    "Worker": ".worker",
    "WorkerSettings": ".worker",
}


def __getattr__(name: str) -> Any:
    """Backends and the worker load on first use, so importing a2pg stays cheap."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'a2pg' has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(module, __name__), name)
