"""Builders shared by the PostgresStore modules of this folder."""

from __future__ import annotations

from a2pg import Claimed, Head, NewEvent, Target
from a2pg.postgres import PostgresStore

TIMEOUT = 10.0
"""Bound on every wait for a notification or a live event."""

POLL_INTERVAL = 0.2
"""Short, so a feed that lost its LISTEN connection catches up within a test's wait."""


def work(count: int = 1) -> list[NewEvent]:
    """``count`` events for the consumer ``worker``."""
    return [NewEvent("work", {"n": n}, targets=[Target("worker")]) for n in range(count)]


async def claim(store: PostgresStore, holder: str, session_id: str = "s") -> Head:
    """Claims the session's one ready head for ``holder``."""
    result = await store.claim_available(session_id, holder=holder, ttl=30)
    assert isinstance(result, Claimed), result
    [head] = result.heads
    return head
