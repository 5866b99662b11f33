"""In-process dashboard clients: the ASGI app called through httpx, on the test's store."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from a2pg.dashboard import create_app
from a2pg.store import Store

Client = Callable[..., httpx.AsyncClient]


@pytest.fixture
async def client_for() -> AsyncIterator[Client]:
    """``client_for(store, read_only=..., auth=...)``: an httpx client of a dashboard app
    over ``store``, running in the test's event loop (where the store's connections are)."""
    opened: list[httpx.AsyncClient] = []

    def make(store: Store, **options: Any) -> httpx.AsyncClient:
        app = create_app(store, **options)
        client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://dashboard.test"
        )
        opened.append(client)
        return client

    yield make
    for client in opened:
        await client.aclose()


@pytest.fixture
async def client(store: Store, client_for: Client) -> httpx.AsyncClient:
    """A dashboard with actions, no authentication, over the backend under test."""
    return client_for(store)
