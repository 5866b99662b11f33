"""Payloads through jsonb: numbers come back with their Python type and exact value."""

from __future__ import annotations

import pytest

from a2pg import NewEvent
from a2pg.postgres import PostgresStore

pytestmark = pytest.mark.postgres


async def test_big_integers_and_floats_keep_their_type(store: PostgresStore) -> None:
    payload = {"big": 2**70, "neg": -(2**64), "float": 1e300, "tiny": 5e-324}
    [appended] = (await store.append("s", [NewEvent("t", payload)], consumers=[])).events
    [read] = await store.read("s")
    assert read.payload == appended.payload == payload
    assert type(read.payload["float"]) is float and type(read.payload["big"]) is int
