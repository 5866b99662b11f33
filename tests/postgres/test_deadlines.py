"""Every store call has a deadline: a connection gone silent fails the call in bounded time.

Through ``FaultProxy.partition``, which silences every current connection for good (no
reset, sockets left open, as when a partition or a dead load balancer lost their state)
and holds new connections for a while: a single call fails within ``call_timeout`` with
``CallTimeout`` (an outage), a call waiting for the pool too, and once new connections get
through the store works again on fresh ones. A call stuck on a lock of a live server is
cancelled on the server too. Then a real worker process, silenced mid-work: it says so
within the bound, and finishes everything exactly once once the network is back (before
call deadlines, it waited on the dead sockets for good).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable
from datetime import datetime

import psycopg
import pytest

from a2pg import A2Error
from a2pg.postgres import CallTimeout, PostgresStore
from a2pg.postgres.backend import outage
from a2pg.postgres.connect import KEEPALIVES, with_keepalives
from a2pg.testing import PgBouncer
from tests.postgres.fault_app import GATE_SIGNAL
from tests.postgres.fault_proxy import FaultProxy
from tests.postgres.support import work
from tests.postgres.test_fault_proxy import (
    exactly_once,
    first_attempts_only,
    proxy,
    resumed_within,
    stop_all,
)
from tests.postgres.test_faults import Workers, add, has_done, opened, wait_until, workers

__all__ = ["proxy", "workers"]  # the fixtures, shared with test_fault_proxy and test_faults

pytestmark = pytest.mark.postgres

CALL = 1.0
"""The stores' ``call_timeout`` here: short, so each wait is short."""
SLACK = 1.5
"""Seconds a loaded 2-core machine may add to any bound."""
GUARD = 20.0
"""A call still running after this long hangs: the test fails instead of waiting on."""


async def within_guard(call: Awaitable[object]) -> float:
    """Seconds until ``call`` failed with ``CallTimeout`` (a hang fails the test)."""
    started = time.monotonic()
    with pytest.raises(CallTimeout) as caught:
        async with asyncio.timeout(GUARD):
            await call
    error = outage(caught.value, "the proxy")
    assert error is not None and error.code == "STORE_UNAVAILABLE"
    assert "call_timeout" in error.message
    return time.monotonic() - started


Call = Callable[[PostgresStore], Awaitable[object]]
CALLS: dict[str, Call] = {
    "read (one statement)": lambda store: store.read("s"),
    "append (one writing statement)": lambda store: store.append("s", work(), consumers=[]),
    "claim (a transaction)": lambda store: store.claim_available("s", holder="h", ttl=30),
}


@pytest.mark.parametrize("name", list(CALLS))
async def test_a_call_on_a_silenced_connection_fails_within_its_deadline(
    postgres_dsn: str, proxy: FaultProxy, name: str
) -> None:
    store = await PostgresStore.open(
        proxy.dsn(postgres_dsn), call_timeout=CALL, max_size=1, poll_interval=0.2
    )
    try:
        await store.append("s", work(2), consumers=[])
        hold = 3 * CALL + SLACK
        assert proxy.partition(hold) > 0
        silenced = time.monotonic()
        took = await within_guard(CALLS[name](store))
        assert CALL * 0.9 <= took < CALL + SLACK
        # Its connection is gone; the next call waits for the pool, whose new
        # connection is held: it too ends at its deadline.
        took = await within_guard(store.read("s"))
        assert CALL * 0.9 <= took < CALL + SLACK
        await wait_until(lambda: not proxy.blackholed, "new connections to get through")
        healed = time.monotonic()
        async with asyncio.timeout(GUARD):
            events = await store.read("s")  # on a fresh connection
        assert len(events) >= 2
        assert time.monotonic() - healed < CALL + SLACK
        assert healed - silenced < hold + SLACK
    finally:
        await store.close()


@pytest.mark.parametrize("path", ["direct", "pgbouncer-transaction"])
async def test_a_call_blocked_on_a_lock_is_cancelled_on_the_server(
    postgres_dsn: str, request: pytest.FixtureRequest, path: str
) -> None:
    """A live server that is only slow: the call ends at its deadline and its statement
    stops waiting (the cancel request), so it queues behind the lock no longer. Behind
    PgBouncer in transaction mode too: nothing of it is connection state."""
    if path == "direct":
        store = await PostgresStore.open(postgres_dsn, call_timeout=CALL, max_size=1)
    else:
        bouncer: Callable[[str], PgBouncer] = request.getfixturevalue("pgbouncer")
        store = await PostgresStore.open(
            bouncer("transaction").dsn(postgres_dsn),
            pooler="transaction",
            call_timeout=CALL,
            max_size=1,
        )
    try:
        await store.append("s", work(), consumers=[])
        async with await psycopg.AsyncConnection.connect(postgres_dsn) as holder:
            await holder.execute("lock table a2_sessions in access exclusive mode")
            took = await within_guard(store.read("s"))
            assert CALL * 0.9 <= took < CALL + SLACK

            async def waiters() -> int:
                async with await psycopg.AsyncConnection.connect(
                    postgres_dsn, autocommit=True
                ) as conn:
                    cur = await conn.execute(
                        "select count(*) from pg_catalog.pg_locks"
                        " where not granted and relation = 'a2_sessions'::regclass"
                    )
                    row = await cur.fetchone()
                    assert row is not None
                    return int(row[0])

            await wait_until(lambda: waiters_gone(waiters), "the cancelled statement", within=5.0)
            await holder.rollback()
        async with asyncio.timeout(GUARD):
            assert [e.index for e in await store.read("s")] == [1]
    finally:
        await store.close()


async def waiters_gone(count: Callable[[], Awaitable[int]]) -> bool:
    return await count() == 0


@pytest.mark.parametrize("value", [0, -1.0, math.inf, math.nan, None, True, "30"])
async def test_call_timeout_must_be_a_positive_finite_number(
    postgres_dsn: str, value: object
) -> None:
    with pytest.raises(A2Error) as error:
        await PostgresStore.open(postgres_dsn, call_timeout=value)  # type: ignore[arg-type]
    assert error.value.code == "INVALID_ARGUMENT"
    assert "call_timeout" in error.value.message


async def test_the_stores_connections_use_tcp_keepalives(postgres_dsn: str) -> None:
    store = await PostgresStore.open(postgres_dsn)
    try:
        async with store.pool.connection() as conn:
            given = conn.info.get_parameters()
        assert {key: given.get(key) for key in KEEPALIVES} == {
            key: str(value) for key, value in KEEPALIVES.items()
        }
    finally:
        await store.close()
    # A DSN's own setting wins; the others are added.
    mine = with_keepalives("host=db keepalives_idle=60")
    assert "keepalives_idle=60" in mine and "keepalives_interval=5" in mine
    assert with_keepalives(mine) == mine


# --- a worker process -----------------------------------------------------------------------

WORKER_CALL = 1.0
HOLD = 4.0
"""Seconds new connections are held: the network is away for that long."""
TTL = 20.0
"""Longer than the outage: no lease lapses, so every head runs once, with no failure."""
STORE = {"poll_interval": 0.5, "call_timeout": WORKER_CALL}
WORKER = {
    "ttl": TTL,
    "renew_interval": 0.5,
    "poll_interval": 0.5,
    "shutdown_grace": 5.0,
    "cleanup_timeout": 5.0,
    "heartbeat_interval": 1.0,
}


def first_line_after(path_text: str, start: datetime, needle: str) -> datetime | None:
    """When the worker first logged a line holding ``needle`` after ``start``."""
    for line in path_text.splitlines():
        stamp, _, rest = line.partition(" a2pg.")
        try:
            when = datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f")
        except ValueError:
            continue
        if when >= start and needle in rest:
            return when
    return None


async def test_a_silenced_worker_says_so_within_the_bound_and_recovers(
    postgres_dsn: str, proxy: FaultProxy, workers: Workers
) -> None:
    """Handlers finish while every connection of the worker is silent for good: its calls
    (completions, renewals, claims, heartbeats, the LISTEN poll) fail at their deadline
    instead of waiting on the dead sockets, it logs so at once, and once new connections
    get through it completes everything, exactly once and with no failure."""
    worker = workers.start(proxy.dsn(postgres_dsn), "silenced", store=STORE, worker=WORKER)
    async with opened(postgres_dsn) as store:
        warm = await add(store, "p")
        await wait_until(lambda: has_done(store, "p", warm), "warm-up", context=workers.logs)
        gated = [await add(store, "p", gated=True) for _ in range(3)]
        await wait_until(lambda: len(workers.of("start")) == 4, "the gated handlers")
        began = datetime.now()
        silenced = time.monotonic()
        assert proxy.partition(HOLD) > 0
        worker.send(GATE_SIGNAL)  # they finish now: their completions meet the dead sockets
        during = await add(store, "p")
        await wait_until(lambda: not proxy.blackholed, "the end of the outage")
        await wait_until(
            lambda: has_done(store, "p", *gated, during), "the work of the outage",
            within=3 * WORKER_CALL + 2 * SLACK, context=workers.logs,
        )  # fmt: skip
        recovered = time.monotonic() - silenced
        indexes = [warm, *gated, during]
        later = await resumed_within(store, "p", workers, indexes)
        await stop_all(worker)
        await exactly_once(store, "p", indexes)
    first_attempts_only(workers)
    log = worker.err.read_text(errors="replace")
    noticed = first_line_after(log, began, "call_timeout")
    assert noticed is not None, worker.log()
    assert (noticed - began).total_seconds() < WORKER_CALL + SLACK, worker.log()
    assert "CallTimeout" in log and "the database answers again" in log, worker.log()
    assert recovered < HOLD + 3 * WORKER_CALL + SLACK, worker.log()
    assert later < 1.0 + SLACK, worker.log()
