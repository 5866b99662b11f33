"""In this folder ``store`` is a PostgresStore on a fresh database, not the parametrized one."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from a2pg.postgres import PostgresStore
from tests.postgres.support import POLL_INTERVAL


@pytest.fixture
async def store(postgres_dsn: str) -> AsyncIterator[PostgresStore]:
    opened = await PostgresStore.open(postgres_dsn, poll_interval=POLL_INTERVAL)
    try:
        yield opened
    finally:
        await opened.close()
