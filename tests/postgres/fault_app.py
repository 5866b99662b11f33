"""A worker process for the fault tests: handlers that journal, block and wait as events ask."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
from dataclasses import asdict
from typing import Any

from psycopg.conninfo import make_conninfo
from psycopg_pool import AsyncConnectionPool

from a2pg.models import Head, NewEvent
from a2pg.postgres import PostgresStore, configure_connection
from a2pg.worker import App, serve

CONSUMER = "fault"
JOURNAL_ENV = "A2PG_FAULT_JOURNAL"
GATE_SIGNAL = signal.SIGUSR1
"""Opens the gate that gated handlers wait behind (sent by the test)."""

app = App()
gate = asyncio.Event()


def pool_name(holder: str) -> str:
    """The application_name of a worker's pool connections."""
    return f"fault-pool-{holder}"


def listen_name(holder: str) -> str:
    """The application_name of a worker's LISTEN connection (the fault tests kill it)."""
    return f"fault-listen-{holder}"


def journal(what: str, head: Head) -> None:
    """Appends one JSON line to the journal; a single O_APPEND write survives kill -9."""
    entry = {
        "what": what,
        "session": head.session_id,
        "index": head.index,
        "attempt": head.attempt,
        "failure_count": head.failure_count,
        "pid": os.getpid(),
    }
    fd = os.open(os.environ[JOURNAL_ENV], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(entry) + "\n").encode())
    finally:
        os.close(fd)


@app.consumer(CONSUMER)
async def handle(head: Head) -> list[NewEvent]:
    """Payload ``{"block_attempts": n}`` blocks attempts up to n until cancelled;
    ``{"gated": true}`` waits for ``GATE_SIGNAL``. Returns one ``done`` event."""
    spec: dict[str, Any] = head.event.payload if isinstance(head.event.payload, dict) else {}
    journal("start", head)
    try:
        if head.attempt <= int(spec.get("block_attempts", 0)):
            await asyncio.Event().wait()
        if spec.get("gated"):
            await gate.wait()
    except asyncio.CancelledError:
        journal("cancelled", head)
        raise
    journal("finish", head)
    return [NewEvent("done", {"index": head.index, "attempt": head.attempt})]


async def main(config: dict[str, Any]) -> None:
    """Serves ``app`` until SIGTERM, then prints the worker's stats as one JSON line."""
    holder = config["holder"]
    dsn = config["dsn"]
    asyncio.get_running_loop().add_signal_handler(GATE_SIGNAL, gate.set)
    pool = AsyncConnectionPool(
        make_conninfo(dsn, application_name=pool_name(holder)),
        min_size=1,
        max_size=4,
        kwargs={"autocommit": True},
        configure=configure_connection("public"),
        open=False,
    )
    await pool.open(wait=True)
    try:
        store = await PostgresStore.open(
            pool,
            listen_dsn=make_conninfo(dsn, application_name=listen_name(holder)),
            **config.get("store", {}),
        )
        try:
            stats = await serve(store, app, holder=holder, **config.get("worker", {}))
        finally:
            await store.close()
    finally:
        await pool.close()
    print(json.dumps(asdict(stats)), flush=True)


if __name__ == "__main__":
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(message)s"
    )
    asyncio.run(main(json.loads(sys.argv[1])))
