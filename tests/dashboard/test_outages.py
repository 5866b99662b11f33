"""An outage of the store's database is a 503 ("retry soon") on PostgreSQL and on SQLite
alike; any other failure stays a 500."""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, cast

import httpx
import psycopg
import pytest
from psycopg_pool import PoolTimeout

from a2pg import StoreUnavailable
from a2pg.dashboard import create_app
from a2pg.sqlite import SqliteStore
from a2pg.store import Store
from tests.cli.conftest import closed_port_dsn

from .conftest import Client
from .helpers import csrf_token, dead_letter


class Down:
    """A store whose every call fails with ``error``, as one whose database went away."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        async def fail(*args: object, **kwargs: object) -> Any:
            raise self.error

        return fail


async def refused() -> BaseException:
    """psycopg's own error for a server nothing listens for."""
    try:
        await psycopg.AsyncConnection.connect(closed_port_dsn(), connect_timeout=2)
    except psycopg.OperationalError as exc:
        return exc
    raise AssertionError("a closed port accepted a connection")


def cannot_open(folder: Path) -> BaseException:
    """sqlite3's own error for a database file that cannot be opened (here a folder)."""
    try:
        sqlite3.connect(f"{folder.as_uri()}?mode=rw", uri=True)
    except sqlite3.OperationalError as exc:
        return exc
    raise AssertionError("a folder opened as a database")


async def outages(folder: Path) -> dict[str, BaseException]:
    return {
        "postgres refused": await refused(),
        "postgres pool timeout": PoolTimeout("couldn't get a connection after 30.00 sec"),
        "sqlite cannot open": cannot_open(folder),
        "a store's STORE_UNAVAILABLE": StoreUnavailable(message="gone"),
    }


@pytest.mark.parametrize(
    "kind",
    [
        "postgres refused",
        "postgres pool timeout",
        "sqlite cannot open",
        "a store's STORE_UNAVAILABLE",
    ],
)
async def test_an_outage_on_either_backend_is_a_503(
    kind: str, tmp_path: Path, client_for: Client
) -> None:
    error = (await outages(tmp_path))[kind]
    client = client_for(cast(Store, Down(error)))
    for path in ("/", "/sessions", "/dead-letters"):
        page = await client.get(path)
        assert page.status_code == 503, (kind, path)
        assert "Database unavailable" in page.text


@pytest.mark.parametrize(
    "error",
    [RuntimeError("a bug"), sqlite3.IntegrityError("not an outage"), psycopg.DataError("nor")],
    ids=type,
)
async def test_any_other_failure_is_a_500(error: Exception) -> None:
    app = create_app(cast(Store, Down(error)))
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://dashboard.test") as client:
        page = await client.get("/sessions")
    assert page.status_code == 500


async def test_a_sqlite_file_locked_past_its_busy_timeout_is_a_503(
    tmp_path: Path, client_for: Client
) -> None:
    """A real SqliteStore: another process holds the write lock longer than the store
    waits for it, and the redrive cannot write."""
    path = tmp_path / "a2.db"
    store = await SqliteStore.open(path, migrate=True, busy_timeout=0.05)
    try:
        index = await dead_letter(store, "s")
        client = client_for(store)
        page = await client.get("/dead-letters")
        form = {
            "csrf_token": csrf_token(page.text),
            "session": "s",
            "consumer": "c",
            "index": str(index),
            "cursor": "lane",
            "lane": "l",
            "action": "skip",
            "next": "/dead-letters",
        }
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("begin immediate")
        try:
            locked = await client.post("/redrive", data=form)
        finally:
            other.execute("rollback")
            other.close()
        assert locked.status_code == 503
        assert "Database unavailable" in locked.text
        assert len(await store.dead_letters("s")) == 1  # nothing was redriven
        done = await client.post("/redrive", data=form)
        assert done.status_code == 303
        assert await store.dead_letters("s") == []
    finally:
        await store.close()
