"""What the model compares after every step: everything a caller can read back from a store."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Any

from a2pg import DeadLetterQuery
from a2pg.store import Store

from .pair import Outcome, outcome
from .universe import NAMESPACE, SESSIONS

OBSERVED = frozenset(
    {
        "read",
        "cursors",
        "dead_letters",
        "read_state",
        "sessions",
        "consumer_stats",
        "find_dead_letters",
        "registered_consumers",
        "workers",
        "presence.read",
    }
)
"""The Store members ``observe`` reads after every step (``tests/test_surface.py`` checks
this against the names of the parts it returns)."""


@dataclass(frozen=True, slots=True)
class Folds:
    """A reducer whose snapshots a session was given, and the ``through`` bounds to read its
    state at (None: the head)."""

    session_id: str
    reducer: str
    bounds: tuple[int | None, ...]


async def observe(store: Store, folds: Sequence[Folds]) -> dict[str, Outcome[Any]]:
    """Every observable part of the store, by name: per session its log, cursors, dead
    letters and folded states; the session list (which shows any session a call created
    by mistake), every consumer's counts and dead letters, the registry, the workers'
    rows and presence. The calls run concurrently."""
    calls: dict[str, Awaitable[Any]] = {}
    for session_id in SESSIONS:
        calls[f"read({session_id})"] = store.read(session_id)
        calls[f"cursors({session_id})"] = store.cursors(session_id)
        calls[f"dead_letters({session_id})"] = store.dead_letters(session_id)
    for fold in folds:
        for bound in fold.bounds:
            name = f"read_state({fold.session_id}, {fold.reducer}, through={bound})"
            calls[name] = store.read_state(fold.session_id, fold.reducer, through=bound)
    calls["sessions()"] = store.sessions()
    calls["consumer_stats()"] = store.consumer_stats()
    calls["find_dead_letters()"] = store.find_dead_letters(DeadLetterQuery())
    calls["registered_consumers()"] = store.registered_consumers()
    calls["workers()"] = store.workers()
    calls[f"presence.read({NAMESPACE})"] = store.presence.read(NAMESPACE)
    results = await asyncio.gather(*(outcome(call) for call in calls.values()))
    return dict(zip(calls, results, strict=True))
