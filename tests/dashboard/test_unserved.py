"""The overview's "unserved" badge: a consumer with work (ready, claimed, backing off,
scheduled, dead or blocked) that no live worker serves. 1 ready head and minutes of lag
look like a slow consumer; the badge says nothing will ever run it."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import timedelta
from typing import Any

import httpx
import pytest

from a2pg import Claimed, Consumer, LogSpec, NewEvent, Target
from a2pg.dashboard.pages.overview import unserved
from a2pg.ids import FakeClock
from a2pg.models import ConsumerStats
from a2pg.store import Store

from .helpers import dead_letter
from .test_overview import FIELDS, beat, overview_numbers, row_of

BADGE = '<span class="badge unserved" data-unserved'


def badged(page: str) -> set[str]:
    """The consumers whose row carries the badge."""
    rows = re.findall(r'<tr data-consumer="([^"]*)">(.*?)</tr>', page, re.S)
    return {consumer for consumer, body in rows if BADGE in body}


def summary(page: str) -> str | None:
    found = re.search(r'<p class="warn" id="unserved" role="status">(.*?)</p>', page, re.S)
    return found.group(1) if found else None


async def live_part(client: httpx.AsyncClient) -> str:
    return (await client.get("/", params={"part": "live"})).text


async def test_work_nobody_serves_is_badged_and_summed_up(
    store: Store, client: httpx.AsyncClient, clock: FakeClock
) -> None:
    """billing: 1 ready head, lagging 4 min, no worker; alpha: the same, with a worker."""
    await store.append("s-1", [NewEvent("job", 1, targets=[Target("billing"), Target("alpha")])])
    await store.heartbeat(replace(beat("w-1", 0), consumers=("alpha",), interval=120.0))
    clock.advance(240)
    page = await live_part(client)
    assert badged(page) == {"billing"}
    assert summary(page) == "1 consumer with work and no live worker serving it: billing."
    assert "unserved" not in row_of(page, "alpha")
    full = (await client.get("/")).text
    assert badged(full) == {"billing"}
    assert "<dt>unserved</dt>" in full  # the legend says what it means


async def test_each_kind_of_work_counts(
    store: Store, client: httpx.AsyncClient, clock: FakeClock
) -> None:
    await store.append("s-ready", [NewEvent("job", 1, targets=[Target("ready")])])
    later = Target("later", not_before=timedelta(hours=1))
    await store.append("s-later", [NewEvent("job", 1, targets=[later])])
    await store.append("s-held", [NewEvent("job", 1, targets=[Target("held")])])
    claimed = await store.claim_available("s-held", holder="gone-worker", ttl=600)
    assert isinstance(claimed, Claimed)
    await store.append("s-back", [NewEvent("job", 1, targets=[Target("back")])])
    back = await store.claim_available("s-back", holder="gone-worker", ttl=600)
    assert isinstance(back, Claimed)
    [head] = back.heads
    await store.fail_attempt(
        "s-back",
        consumer="back",
        lane=None,
        index=head.index,
        attempt=head.attempt,
        error="later",
        max_failures=5,
        retry_after=600,
    )
    await dead_letter(store, "s-dead", consumer="dead", lane="l")
    page = await live_part(client)
    assert badged(page) == {"ready", "later", "held", "back", "dead"}
    numbers = overview_numbers(page)
    assert numbers["later"]["scheduled"] == 1 and numbers["held"]["claimed"] == 1
    assert numbers["back"]["backing_off"] == 1 and numbers["dead"]["dead_letters"] == 1
    text = summary(page)
    assert text is not None and text.startswith("5 consumers with work and no live worker")


async def test_served_idle_paused_or_registered_consumers_without_work_are_not_badged(
    store: Store, client: httpx.AsyncClient
) -> None:
    """A live worker's consumer shows with zeros; a paused or registered one with no work
    has nothing waiting."""
    await store.heartbeat(replace(beat("w-1", 0), consumers=("ghost",)))
    await store.pause_consumers(["quiet"])
    await store.register_consumers([Consumer("audit", LogSpec())])
    page = await live_part(client)
    numbers = overview_numbers(page)
    assert sorted(numbers) == ["audit", "ghost", "quiet"]
    assert numbers["ghost"] == dict.fromkeys(FIELDS, 0)
    assert badged(page) == set() and summary(page) is None


async def test_a_stale_workers_consumer_is_unserved_again(
    store: Store, client: httpx.AsyncClient, clock: FakeClock
) -> None:
    await store.append("s-1", [NewEvent("job", 1, targets=[Target("mailer")])])
    await store.heartbeat(replace(beat("w-1", 0), consumers=("mailer",), interval=5.0))
    assert badged(await live_part(client)) == set()
    clock.advance(16)  # three missed beats and more: stale, serving nothing
    assert badged(await live_part(client)) == {"mailer"}


def stats(**counts: Any) -> ConsumerStats:
    none = ConsumerStats("c", 0, 0, 0, 0, 0, 0, oldest_ready_age=None, registered=False)
    return replace(none, **counts)


@pytest.mark.parametrize(
    ("counts", "expected"),
    [
        ({}, False),
        ({"ready": 1}, True),
        ({"claimed": 1}, True),
        ({"backing_off": 1}, True),
        ({"scheduled": 1}, True),
        ({"dead_letters": 1}, True),
        ({"blocked": 3}, True),
        ({"ready": 1, "served_by": 1}, False),
        ({"served_by": 2}, False),
    ],
)
def test_the_rule(counts: dict[str, int], expected: bool) -> None:
    assert unserved(stats(**counts)) is expected
