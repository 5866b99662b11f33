"""A store after ``close()``: every call is ``STORE_UNAVAILABLE`` naming the close, alike on
every backend (MemoryStore once kept working, SqliteStore raised ``sqlite3``'s
``ProgrammingError``, PostgresStore psycopg_pool's ``PoolClosed``); streams and wakeups
end; closing again does nothing."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from a2pg import A2Error, AttemptRef, Completion, DeadLetterQuery, SnapshotWrite, WorkerBeat
from a2pg.store import Store

from .helpers import HOLDER, TTL, MakeStore, append, assert_code, ev, log_consumer

BEAT = WorkerBeat(
    holder="w-1",
    host="box",
    pid=42,
    consumers=("c",),
    concurrency=1,
    started_at=datetime(2026, 1, 1, tzinfo=UTC),
    in_flight=0,
    version="0.1.0",
    interval=5.0,
)

CALLS: dict[str, Callable[[Store], Awaitable[Any]]] = {
    "append": lambda s: s.append("s", [ev()]),
    "read": lambda s: s.read("s"),
    "wake_log": lambda s: s.wake_log("s", log_consumer("audit")),
    "cursors": lambda s: s.cursors("s"),
    "sessions": lambda s: s.sessions(),
    "claim_available": lambda s: s.claim_available("s", holder=HOLDER, ttl=TTL),
    "claim_any": lambda s: s.claim_any(holder=HOLDER, ttl=TTL),
    "renew_claims": lambda s: s.renew_claims(
        "s", holder=HOLDER, claims=[AttemptRef("c", None, 1, 1)], ttl=TTL
    ),
    "release_claims": lambda s: s.release_claims(
        "s", holder=HOLDER, claims=[AttemptRef("c", None, 1, 1)]
    ),
    "complete_attempt": lambda s: s.complete_attempt(
        "s", consumer="c", lane=None, index=1, attempt=1
    ),
    "complete_attempts": lambda s: s.complete_attempts([Completion("s", "c", None, 1, 1)]),
    "complete_and_claim": lambda s: s.complete_and_claim([], holder=HOLDER, ttl=TTL),
    "fail_attempt": lambda s: s.fail_attempt(
        "s", consumer="c", lane=None, index=1, attempt=1, error="e", max_failures=3
    ),
    "dead_letters": lambda s: s.dead_letters("s"),
    "redrive": lambda s: s.redrive("s", consumer="c", index=1, action="skip"),
    "read_state": lambda s: s.read_state("s", "r"),
    "put_snapshots": lambda s: s.put_snapshots("s", "r", [SnapshotWrite(1, {})]),
    "clear": lambda s: s.clear("s"),
    "reclaim": lambda s: s.reclaim("s"),
    "register_consumers": lambda s: s.register_consumers([log_consumer("audit")]),
    "unregister_consumers": lambda s: s.unregister_consumers(["audit"]),
    "registered_consumers": lambda s: s.registered_consumers(),
    "find_dead_letters": lambda s: s.find_dead_letters(DeadLetterQuery()),
    "consumer_stats": lambda s: s.consumer_stats(),
    "heartbeat": lambda s: s.heartbeat(BEAT),
    "forget_workers": lambda s: s.forget_workers(["w-1"]),
    "workers": lambda s: s.workers(),
    "presence.write": lambda s: s.presence.write(
        "room", "ann", {"f": 1}, at=datetime(2026, 1, 1, tzinfo=UTC), seen=None, ttl=60
    ),
    "presence.read": lambda s: s.presence.read("room"),
}


@pytest.mark.parametrize("call", list(CALLS))
async def test_a_call_after_close_is_store_unavailable(make_store: MakeStore, call: str) -> None:
    store = await make_store()
    await append(store, "s", ev(to=["c"]))
    await store.close()
    with pytest.raises(A2Error) as error:
        await CALLS[call](store)
    assert_code(error, "STORE_UNAVAILABLE", "closed")


async def test_closing_twice_does_nothing_and_feeds_end_at_once(make_store: MakeStore) -> None:
    store = await make_store()
    await store.close()
    await store.close()
    assert [event async for event in store.stream("s")] == []
    assert [session async for session in store.wakeups()] == []
