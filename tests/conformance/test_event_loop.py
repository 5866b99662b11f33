"""A call at the per-call byte limit leaves the event loop free while it is checked.

Walking and encoding 16 MiB of JSON (``Limits.max_call_bytes``) takes seconds: it once ran
on the loop thread, so every other task of the process (a worker's lease renewals, its
heartbeat, a web server's requests) stood still for up to 7.7 s. A task that ticks on the
loop while such a call runs must keep ticking.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from a2pg import NewEvent, SnapshotWrite
from a2pg.contract import DEFAULT_LIMITS, Limits
from a2pg.store import Store

from .helpers import ev

TICK = 0.01
"""How often the ticker asks for the loop."""

MAX_SHARE = 0.5
"""The longest the ticker may wait, as a share of the call's own time. Relative, so a
loaded machine slows both alike: with the check on the loop the ticker waited for
nearly the whole call (1.1 to 2 s here, up to 7.7 s on a loaded machine). What still
runs on the loop is the backends' own work on the values: decoding the payloads a
result returns (MemoryStore, PostgreSQL) and the C encoder, which holds the GIL for one
value (8 MiB at most): about 0.3 to 0.45 s of calls of 2.5 s or more here."""


def zeros(max_bytes: int) -> list[int]:
    """``[0,0,...]`` of at most ``max_bytes`` bytes: an item every two bytes makes it slow to
    check (about 80 ms a MiB here) and quick to decode (about 17 ms a MiB)."""
    return [0] * ((max_bytes - 1) // 2)


SCALE = 8
LIMITS = dataclasses.replace(
    DEFAULT_LIMITS,
    max_call_bytes=DEFAULT_LIMITS.max_call_bytes // SCALE,
    max_payload_bytes=DEFAULT_LIMITS.max_payload_bytes // SCALE,
    max_state_bytes=DEFAULT_LIMITS.max_state_bytes // SCALE,
)
"""The byte limits an eighth of the defaults, their shape kept (a call of 16 full payloads
or 2 full states): every value still far above what a check encodes on the loop
(``LOOP_CHECK_BYTES``), and a run on each backend a second or two rather than up to 40
(at the defaults the test took minutes of CI in all)."""
PAYLOAD = zeros(LIMITS.max_payload_bytes)
EVENTS = LIMITS.max_call_bytes // LIMITS.max_payload_bytes
"""Events of a full payload each that one call carries, at its byte limit (16)."""
STATE = zeros(LIMITS.max_state_bytes)
STATES = LIMITS.max_call_bytes // LIMITS.max_state_bytes


@pytest.fixture
def limits() -> Limits:
    return LIMITS


async def longest_gap(call: Awaitable[Any]) -> tuple[float, Any]:
    """``call``'s answer, and the longest the loop kept a ticking task waiting meanwhile
    as a share of the call's time."""
    loop = asyncio.get_running_loop()
    gaps: list[float] = []

    async def tick() -> None:
        last = loop.time()
        while True:
            await asyncio.sleep(TICK)
            now = loop.time()
            gaps.append(now - last)
            last = now

    ticker = asyncio.create_task(tick())
    await asyncio.sleep(3 * TICK)
    try:
        started = loop.time()
        answer = await call
        took = loop.time() - started
        await asyncio.sleep(3 * TICK)  # the ticker's wait through the call's last step
    finally:
        ticker.cancel()
    return max(gaps) / took, answer


async def _append(store: Store) -> Any:
    events = [NewEvent("big", PAYLOAD) for _ in range(EVENTS)]
    gap, result = await longest_gap(store.append("s", events))
    assert len(result.events) == EVENTS
    return gap


async def _snapshots(store: Store) -> Any:
    await store.append("s", [ev() for _ in range(STATES)])
    writes = [SnapshotWrite(index, STATE) for index in range(1, STATES + 1)]
    gap, _ = await longest_gap(store.put_snapshots("s", "r", writes))
    read = await store.read_state("s", "r")
    assert read.snapshot_index == STATES
    return gap


CALLS: dict[str, Callable[[Store], Awaitable[float]]] = {
    "append": _append,
    "put_snapshots": _snapshots,
}


@pytest.mark.parametrize("call", list(CALLS))
async def test_a_call_at_the_byte_limit_leaves_the_loop_free(store: Store, call: str) -> None:
    share = await CALLS[call](store)
    assert share < MAX_SHARE, f"the loop stood still for {share:.0%} of the call"
