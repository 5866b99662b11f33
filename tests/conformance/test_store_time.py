"""``front.store_time``: the store's clock, the one its writes record (here the test's
injected clock on every backend), for the layers that compare times with the store's."""

from __future__ import annotations

import pytest

from a2pg import A2Error
from a2pg.front import CheckedStore, StoreProxy, store_time
from a2pg.ids import FakeClock
from a2pg.store import Store

from .helpers import append, assert_code, ev


async def test_the_store_time_is_the_clock_its_writes_record(
    store: Store, clock: FakeClock
) -> None:
    assert isinstance(store, CheckedStore)
    clock.advance(90)
    [event] = await append(store, "s", ev())
    assert await store_time(store) == event.created_at == clock()
    clock.advance(5)
    assert await store_time(StoreProxy(store)) == clock()


async def test_a_closed_store_has_no_time(store: Store) -> None:
    assert isinstance(store, CheckedStore)
    await store.close()
    with pytest.raises(A2Error) as error:
        await store_time(store)
    assert_code(error, "STORE_UNAVAILABLE", "closed")
