"""Faults with real worker processes on real PostgreSQL: kill -9, SIGTERM, lost LISTEN, restarts."""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest

from a2pg.models import AttemptRef, NewEvent, StoredEvent, Target
from a2pg.postgres import PostgresStore
from a2pg.postgres.migrate import upgrade
from a2pg.testing import EmbeddedPostgres, create_database, unique_name
from tests.postgres.fault_app import CONSUMER, GATE_SIGNAL, JOURNAL_ENV, listen_name

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

TTL = 2.0
STORE = {"poll_interval": 0.5}
WORKER = {"ttl": TTL, "poll_interval": 0.5, "shutdown_grace": 10.0}
QUIET_STORE = {"poll_interval": 120.0}
QUIET_WORKER = {**WORKER, "poll_interval": 120.0}
"""No polling within any wait of a test: only NOTIFY (or the listener's reconnect) wakes it."""

ROOT = Path(__file__).resolve().parents[2]
APP_MODULE = "tests.postgres.fault_app"
WAIT = 30.0
"""Default bound of every wait: generous, for a loaded 2-core machine."""
POLL = 0.05


# --- worker processes and their journal ------------------------------------------------------


@dataclass
class WorkerProcess:
    """One ``fault_app`` worker process; its stdout and stderr go to files."""

    holder: str
    proc: subprocess.Popen[bytes]
    out: Path
    err: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def send(self, signum: signal.Signals) -> None:
        self.proc.send_signal(signum)

    async def exit_code(self, within: float = WAIT) -> int:
        """Waits for the process to end; fails the test (with its log) if it does not."""
        deadline = time.monotonic() + within
        while self.proc.poll() is None:
            if time.monotonic() > deadline:
                pytest.fail(f"worker {self.holder} still running after {within}s\n{self.log()}")
            await asyncio.sleep(POLL)
        return self.proc.returncode

    def stats(self) -> dict[str, int]:
        """The WorkerStats the process printed on a clean exit."""
        lines = self.out.read_text().splitlines()
        assert lines, f"worker {self.holder} printed no stats\n{self.log()}"
        stats: dict[str, int] = json.loads(lines[-1])
        return stats

    def log(self, tail: int = 6000) -> str:
        return f"--- {self.holder} stderr ---\n{self.err.read_text(errors='replace')[-tail:]}"


@dataclass
class Workers:
    """Starts ``fault_app`` workers; kills the ones still running when the test ends."""

    journal: Path
    base: Path
    started: list[WorkerProcess] = field(default_factory=list)

    def start(self, dsn: str, holder: str, **options: Any) -> WorkerProcess:
        """``options``: ``store`` and ``worker`` dicts of keyword arguments."""
        config = {"dsn": dsn, "holder": holder, **options}
        out, err = self.base / f"{holder}.out", self.base / f"{holder}.err"
        env = {**os.environ, JOURNAL_ENV: str(self.journal), "PYTHONUNBUFFERED": "1"}
        with out.open("wb") as stdout, err.open("wb") as stderr:
            proc = subprocess.Popen(
                [sys.executable, "-m", APP_MODULE, json.dumps(config)],
                cwd=ROOT,
                env=env,
                stdout=stdout,
                stderr=stderr,
            )
        worker = WorkerProcess(holder, proc, out, err)
        self.started.append(worker)
        return worker

    def entries(self) -> list[dict[str, Any]]:
        """The journal: one dict per handler start, finish or cancellation, in write order."""
        if not self.journal.exists():
            return []
        return [json.loads(line) for line in self.journal.read_text().splitlines() if line]

    def of(self, what: str, **match: Any) -> list[dict[str, Any]]:
        return [
            e
            for e in self.entries()
            if e["what"] == what and all(e[k] == v for k, v in match.items())
        ]

    def logs(self) -> str:
        return "\n".join(w.log() for w in self.started)

    def reap(self) -> None:
        for worker in self.started:
            if worker.alive():
                worker.proc.kill()
            worker.proc.wait(timeout=WAIT)


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Workers]:
    spawned = Workers(journal=tmp_path / "journal.jsonl", base=tmp_path)
    try:
        yield spawned
    finally:
        spawned.reap()


async def wait_until(
    check: Callable[[], Awaitable[object] | object],
    what: str,
    *,
    within: float = WAIT,
    context: Callable[[], str] = lambda: "",
) -> None:
    """Polls ``check`` until true; fails the test naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + within
    while True:
        outcome = check()
        if inspect.isawaitable(outcome):
            outcome = await outcome
        if outcome:
            return
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {within}s waiting for {what}\n{context()}")
        await asyncio.sleep(POLL)


# --- the store side ----------------------------------------------------------------------------


def job(**spec: Any) -> NewEvent:
    return NewEvent("job", spec, targets=[Target(CONSUMER)])


@asynccontextmanager
async def opened(dsn: str) -> AsyncIterator[PostgresStore]:
    store = await PostgresStore.open(dsn, max_size=2)
    try:
        yield store
    finally:
        await store.close()


def done(events: list[StoredEvent]) -> dict[int, list[StoredEvent]]:
    """The ``done`` events by the index of the head whose completion appended them."""
    by_head: dict[int, list[StoredEvent]] = {}
    for event in events:
        if event.type == "done":
            assert event.cause is not None
            by_head.setdefault(event.cause.index, []).append(event)
    return by_head


async def done_heads(store: PostgresStore, session_id: str) -> set[int]:
    return set(done(await store.read(session_id)))


async def has_done(store: PostgresStore, session_id: str, *indexes: int) -> bool:
    return set(indexes) <= await done_heads(store, session_id)


async def serving(store: PostgresStore, *holders: str) -> bool:
    """Every one of ``holders`` has opened its store and beaten once: past ``open()``,
    where a fault would end the process instead of testing its recovery."""
    return set(holders) <= {info.beat.holder for info in await store.workers()}


async def add(store: PostgresStore, session_id: str, **spec: Any) -> int:
    """Appends one job; its index."""
    (event,) = (await store.append(session_id, [job(**spec)])).events
    return event.index


async def listen_pids(dsn: str, holder: str) -> list[int]:
    """Backends of the worker's LISTEN connection (by application_name)."""
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        cur = await conn.execute(
            "select pid from pg_stat_activity"
            " where application_name = %s and datname = current_database()",
            [listen_name(holder)],
        )
        return [pid for (pid,) in await cur.fetchall()]


async def test_kill_9_mid_attempt_is_retried_once_the_lease_lapses(
    postgres_dsn: str, workers: Workers
) -> None:
    async with opened(postgres_dsn) as store:
        await store.append("k", [job(block_attempts=1)])
        killed = workers.start(postgres_dsn, "killed", store=STORE, worker=WORKER)
        await wait_until(
            lambda: bool(workers.of("start", session="k")), "attempt 1", context=workers.logs
        )
        killed.send(signal.SIGKILL)
        assert await killed.exit_code() == -signal.SIGKILL

        second = workers.start(postgres_dsn, "second", store=STORE, worker=WORKER)
        await wait_until(
            lambda: has_done(store, "k", 1), "the retry to complete", context=workers.logs
        )
        second.send(signal.SIGTERM)
        assert await second.exit_code() == 0, second.log()
        events = await store.read("k")

    assert [e.cause for e in done(events)[1]] == [AttemptRef(CONSUMER, None, 1, 2)]
    starts = [(e["pid"], e["attempt"], e["failure_count"]) for e in workers.of("start")]
    assert starts == [(killed.pid, 1, 0), (second.pid, 2, 1)]  # the lapsed claim is a failure
    assert [(e["pid"], e["attempt"]) for e in workers.of("finish")] == [(second.pid, 2)]
    assert second.stats()["completed"] == 1


async def test_sigterm_drains_then_a_second_worker_finishes_the_released_heads(
    postgres_dsn: str, workers: Workers
) -> None:
    grace = 3.0
    async with opened(postgres_dsn) as store:
        await store.append("t", [job(gated=True) for _ in range(3)])
        await store.append("t", [job(block_attempts=1) for _ in range(3)])
        first = workers.start(
            postgres_dsn,
            "drained",
            store=STORE,
            worker={**WORKER, "concurrency": 8, "shutdown_grace": grace},
        )
        await wait_until(
            lambda: len(workers.of("start")) == 6, "six handlers running", context=workers.logs
        )
        first.send(signal.SIGTERM)
        await wait_until(lambda: "draining 6" in first.log(), "the drain", context=first.log)
        first.send(GATE_SIGNAL)  # the gated handlers finish during the drain; the others never do
        assert await first.exit_code() == 0, first.log()
        stats = first.stats()
        assert (stats["completed"], stats["released"]) == (3, 3), first.log()
        assert await done_heads(store, "t") == {1, 2, 3}
        released = {c.head: c.dispatch for c in await store.cursors("t")}
        assert set(released) == {4, 5, 6}
        for dispatch in released.values():  # released now, not left to lapse, and no failure
            assert (dispatch.claim_holder, dispatch.failure_count) == (None, 0)
            assert (dispatch.attempt_count, dispatch.last_error) == (1, None)

        second = workers.start(postgres_dsn, "second", store=STORE, worker=WORKER)
        await wait_until(
            lambda: has_done(store, "t", *range(1, 7)), "every head", context=workers.logs
        )
        second.send(signal.SIGTERM)
        assert await second.exit_code() == 0, second.log()
        by_head = done(await store.read("t"))

    assert {i: [e.cause.attempt for e in es if e.cause] for i, es in by_head.items()} == {
        1: [1],
        2: [1],
        3: [1],
        4: [2],
        5: [2],
        6: [2],
    }
    cancelled = workers.of("cancelled", pid=first.pid)
    assert sorted(e["index"] for e in cancelled) == [4, 5, 6]
    retried = workers.of("start", pid=second.pid)
    assert sorted((e["index"], e["attempt"], e["failure_count"]) for e in retried) == [
        (4, 2, 0),
        (5, 2, 0),
        (6, 2, 0),
    ]


async def test_worker_survives_its_listen_connection_being_terminated(
    postgres_dsn: str, workers: Workers
) -> None:
    worker = workers.start(postgres_dsn, "listening", store=QUIET_STORE, worker=QUIET_WORKER)
    pids: list[int] = []

    async def listening() -> bool:
        pids[:] = await listen_pids(postgres_dsn, "listening")
        return len(pids) == 1

    await wait_until(listening, "the LISTEN connection", context=workers.logs)
    first_pid = pids[0]
    async with opened(postgres_dsn) as store:
        first = await add(store, "l")
        await wait_until(lambda: has_done(store, "l", first), "NOTIFY", context=workers.logs)

        async with await psycopg.AsyncConnection.connect(postgres_dsn, autocommit=True) as conn:
            cur = await conn.execute("select pg_terminate_backend(%s)", [first_pid])
            assert await cur.fetchone() == (True,)

        async def relistening() -> bool:
            return await listening() and pids[0] != first_pid

        await wait_until(relistening, "a new LISTEN connection", context=workers.logs)
        second = await add(store, "l")
        await wait_until(
            lambda: has_done(store, "l", second), "NOTIFY after the reconnect",
            context=workers.logs,
        )  # fmt: skip
        assert worker.alive()
        worker.send(signal.SIGTERM)
        assert await worker.exit_code() == 0, worker.log()
        assert await done_heads(store, "l") == {first, second}


async def test_superseded_attempt_is_cancelled_and_appends_nothing(
    postgres_dsn: str, workers: Workers
) -> None:
    worker = workers.start(postgres_dsn, "superseded", store=STORE, worker=WORKER)
    async with opened(postgres_dsn) as store:
        await store.append("s", [job(block_attempts=99)])
        await wait_until(lambda: bool(workers.of("start")), "the handler", context=workers.logs)
        cleared = await store.clear("s")
        assert cleared.cleared
        await wait_until(
            lambda: bool(workers.of("cancelled")),
            "the renewal to cancel the superseded handler",
            context=workers.logs,
        )
        worker.send(signal.SIGTERM)
        assert await worker.exit_code() == 0, worker.log()
        async with await psycopg.AsyncConnection.connect(postgres_dsn, autocommit=True) as conn:
            cur = await conn.execute("select count(*) from a2_events where cause_index is not null")
            assert await cur.fetchone() == (0,)
        assert [e.type for e in await store.read("s")] == ["a2.cleared"]

    assert [e["what"] for e in workers.entries()] == ["start", "cancelled"]
    stats = worker.stats()
    assert (stats["superseded"], stats["released"], stats["completed"]) == (1, 0, 0)


async def test_worker_keeps_working_across_a_server_restart(
    private_postgres: EmbeddedPostgres, workers: Workers
) -> None:
    dsn = create_database(private_postgres.dsn(), unique_name("a2pg_faults"))
    upgrade(dsn)
    worker = workers.start(dsn, "restarted", store=STORE, worker=WORKER)
    async with opened(dsn) as store:
        before = await add(store, "r")
        await wait_until(lambda: has_done(store, "r", before), "a head", context=workers.logs)
        spanning = await add(store, "r", gated=True)
        await wait_until(
            lambda: bool(workers.of("start", index=spanning)), "a handler in flight",
            context=workers.logs,
        )  # fmt: skip

    private_postgres.stop("fast")
    private_postgres.start()
    worker.send(GATE_SIGNAL)  # the in-flight handler finishes after the restart

    async with opened(dsn) as store:
        after = await add(store, "r")
        await wait_until(
            lambda: has_done(store, "r", spanning, after), "the heads after the restart",
            within=60.0, context=workers.logs,
        )  # fmt: skip
        await wait_until(
            lambda: listen_pids(dsn, "restarted"), "the LISTEN connection back",
            context=workers.logs,
        )  # fmt: skip
        assert worker.alive()
        worker.send(signal.SIGTERM)
        assert await worker.exit_code() == 0, worker.log()
        by_head = done(await store.read("r"))
    assert {index: len(events) for index, events in by_head.items()} == {
        before: 1,
        spanning: 1,
        after: 1,
    }
