"""``a2pg migrate`` behind an open transaction: it gives up within its lock timeout.

A transaction that wrote to ``a2_cursors`` and stays open holds a lock the next
revision's DDL (``create index ... on a2_cursors``) conflicts with. Without a bound,
the migration would queue its lock for as long as that transaction lives, and every
worker's write to ``a2_cursors`` would queue behind it. With one, each try waits at most
``lock_timeout``, the whole migration rolls back, and after its tries it fails naming
the session that holds the lock and what to do: nothing is written, and a worker's
write waits at most about one ``lock_timeout``.
"""

from __future__ import annotations

import io
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import psycopg
import pytest

from a2pg.cli import main
from a2pg.postgres import migrate
from a2pg.postgres.layout import HEAD_REVISION, inspect_layout
from a2pg.testing import scratch_database

pytestmark = pytest.mark.postgres

BEFORE = "0003"
"""The revision the database starts at: the next one (0004) indexes ``a2_cursors``."""
LOCK = 0.5
SLACK = 1.5
"""Seconds a loaded 2-core machine may add to a bound."""
GUARD = 30.0
"""A migration still waiting after this long waits unbounded: the test fails."""
WORKER_WRITE = "update a2_cursors set claim_holder = claim_holder where false"
"""What a worker's claim or completion needs of ``a2_cursors``: a ROW EXCLUSIVE lock."""


@pytest.fixture
def db(postgres_server_dsn: str) -> Iterator[str]:
    with scratch_database(postgres_server_dsn, "a2pg_mig_lock") as dsn:
        migrate.upgrade(dsn, revision=BEFORE)
        yield dsn


def revision(dsn: str) -> tuple[str, list[str]]:
    """What ``a2_meta`` and ``a2_alembic_version`` say."""
    with psycopg.connect(dsn) as conn:
        meta = conn.execute("select value from a2_meta where key = 'revision'").fetchone()
        assert meta is not None
        rows = conn.execute("select version_num from a2_alembic_version").fetchall()
    return str(meta[0]), [str(v) for (v,) in rows]


def worker_stalls(dsn: str, running: threading.Event) -> list[float]:
    """Seconds each of a stream of worker-like writes to ``a2_cursors`` waited, while
    ``running`` is set (each gives up after ``GUARD`` seconds rather than hang)."""
    waits: list[float] = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"set lock_timeout = '{int(GUARD * 1000)}ms'")
        while running.is_set():
            started = time.monotonic()
            conn.execute(WORKER_WRITE)
            waits.append(time.monotonic() - started)
            time.sleep(0.05)
    return waits


@dataclass
class Blocked:
    """How a call went while an open transaction held its lock."""

    outcome: object
    took: float
    holder_pid: int
    stalls: list[float]


def behind_an_open_transaction(dsn: str, call: Callable[[], object]) -> Blocked:
    """Runs ``call`` in a thread while an open transaction holds a lock on
    ``a2_cursors``, and a stream of worker-like writes goes on; fails the test if it
    is still waiting after ``GUARD`` seconds (then ends the transaction to let it go)."""
    with psycopg.connect(dsn) as holder:
        holder.execute(WORKER_WRITE)  # an open transaction that wrote to a2_cursors
        holder_pid = holder.info.backend_pid
        outcome: list[object] = []

        def run() -> None:
            try:
                outcome.append(call())
            except BaseException as exc:
                outcome.append(exc)

        running = threading.Event()
        running.set()
        stalls: list[float] = []
        writer = threading.Thread(target=lambda: stalls.extend(worker_stalls(dsn, running)))
        thread = threading.Thread(target=run)
        started = time.monotonic()
        thread.start()
        writer.start()
        thread.join(GUARD)
        took = time.monotonic() - started
        running.clear()
        stuck = thread.is_alive()
        holder.rollback()  # lets a stuck migration finish
        thread.join()
        writer.join()
    if stuck:
        pytest.fail(f"the migration waited on its lock for over {GUARD}s")
    [result] = outcome
    return Blocked(result, took, holder_pid, stalls)


def tries_take() -> float:
    """The least time every try takes: ``LOCK`` each, and the delays between them."""
    tries = migrate.LOCK_ATTEMPTS
    delays = sum(migrate.LOCK_RETRY_DELAY * 2.0**n for n in range(tries - 1))
    return tries * LOCK + delays


def test_a_migration_behind_an_open_transaction_fails_within_its_bound_and_writes_nothing(
    db: str,
) -> None:
    blocked = behind_an_open_transaction(db, lambda: migrate.upgrade(db, lock_timeout=LOCK))
    error = blocked.outcome
    assert isinstance(error, migrate.MigrationLockTimeout), repr(error)
    message = str(error)
    assert "Nothing was changed" in message
    assert f"pid {blocked.holder_pid} (idle in transaction" in message
    assert "--lock-timeout" in message and "a2pg migrate" in message
    assert tries_take() <= blocked.took < tries_take() + SLACK
    assert revision(db) == (BEFORE, [BEFORE])  # every try rolled back
    # Workers waited one bound at most, each time the migration queued its lock.
    assert blocked.stalls and max(blocked.stalls) < LOCK + SLACK, blocked.stalls

    migrate.upgrade(db, lock_timeout=LOCK)  # the transaction gone, it goes through
    assert revision(db) == (HEAD_REVISION, [HEAD_REVISION])
    assert inspect_layout(db).is_current


def test_a2pg_migrate_lock_timeout_exits_1_naming_what_to_do(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["migrate", "--dsn", db, "--lock-timeout", str(LOCK)]
    blocked = behind_an_open_transaction(db, lambda: main(argv, stdout=io.StringIO()))
    err = capsys.readouterr().err
    assert blocked.outcome == 1, err
    assert "a2pg migrate gave up" in err and "Nothing was changed" in err
    assert "idle in transaction" in err and "--lock-timeout SECONDS" in err
    assert blocked.took < tries_take() + SLACK
    assert revision(db) == (BEFORE, [BEFORE])
    assert main(["migrate", "--dsn", db], stdout=io.StringIO()) == 0
    assert revision(db) == (HEAD_REVISION, [HEAD_REVISION])


@pytest.mark.parametrize("value", [0, -1.0, float("inf"), True])
def test_lock_timeout_must_be_a_positive_number(db: str, value: float) -> None:
    with pytest.raises(Exception, match="lock_timeout must be a positive number"):
        migrate.upgrade(db, lock_timeout=value)
    assert revision(db) == (BEFORE, [BEFORE])
