"""The overview shows what ``Store.consumer_stats()`` and ``Store.workers()`` say."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime

import httpx

from a2pg import Claimed, NewEvent, Target, WorkerBeat
from a2pg.dashboard import create_app
from a2pg.dashboard.throughput import Throughput, sampling
from a2pg.store import Store
from tests.worker.helpers import until

from .helpers import dead_letter

FIELDS = ("ready", "claimed", "backing_off", "dead_letters", "blocked_lanes", "blocked")


def overview_numbers(html: str) -> dict[str, dict[str, int]]:
    """Each consumer row's counts, as the page shows them."""
    rows: dict[str, dict[str, int]] = {}
    for consumer, body in re.findall(r'<tr data-consumer="([^"]*)">(.*?)</tr>', html, re.S):
        cells = dict(re.findall(r'data-field="(\w+)">\s*(?:<a [^>]*>)?\s*([^<\s]*)', body))
        rows[consumer] = {name: int(cells[name]) for name in FIELDS}
    return rows


async def store_numbers(store: Store) -> dict[str, dict[str, int]]:
    return {
        s.consumer: {name: getattr(s, name) for name in FIELDS}
        for s in await store.consumer_stats()
    }


async def make_every_state(store: Store) -> None:
    """Ready, claimed, backing off, dead-lettered and blocked heads, over two consumers."""
    await store.append("s-ready", [NewEvent("job", n, targets=[Target("alpha")]) for n in range(3)])
    await store.append("s-held", [NewEvent("job", 1, targets=[Target("beta")])])
    claimed = await store.claim_available("s-held", holder="w1", ttl=60)
    assert isinstance(claimed, Claimed)
    await store.append("s-back", [NewEvent("job", 1, targets=[Target("beta")])])
    back = await store.claim_available("s-back", holder="w1", ttl=60)
    assert isinstance(back, Claimed)
    head = back.heads[0]
    await store.fail_attempt(
        "s-back",
        consumer="beta",
        lane=None,
        index=head.index,
        attempt=head.attempt,
        error="later",
        max_failures=5,
        retry_after=600,
    )
    await dead_letter(store, "s-dead", consumer="alpha", lane="turns")
    await store.append("s-dead", [NewEvent("job", 2, targets=[Target("alpha", "turns")])] * 1)


async def test_overview_numbers_equal_the_store(store: Store, client: httpx.AsyncClient) -> None:
    await make_every_state(store)
    expected = await store_numbers(store)
    assert expected["alpha"]["ready"] == 3 and expected["alpha"]["dead_letters"] == 1
    assert expected["beta"]["claimed"] == 1 and expected["beta"]["backing_off"] == 1
    page = await client.get("/")
    assert page.status_code == 200
    assert overview_numbers(page.text) == expected
    live = await client.get("/", params={"part": "live"})
    assert "<html" not in live.text
    assert overview_numbers(live.text) == expected


async def test_an_empty_store_says_so(store: Store, client: httpx.AsyncClient) -> None:
    page = await client.get("/")
    assert "No consumer has registered" in page.text
    assert 'id="workers"' not in page.text  # hidden until workers send heartbeats


def beat(holder: str, completed: int) -> WorkerBeat:
    return WorkerBeat(
        holder=holder,
        host="host-1",
        pid=4242,
        consumers=("alpha", "beta"),
        concurrency=8,
        started_at=datetime(2026, 1, 1, tzinfo=UTC),
        in_flight=3,
        version="0.1.0",
        interval=5.0,
        completed=completed,
    )


async def test_workers_and_throughput_from_heartbeats(store: Store) -> None:
    app = create_app(store)
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://d.test")
    throughput = app.state.dashboard.throughput
    await store.heartbeat(beat("w-1", 100))
    now = time.monotonic()
    throughput.observe(await store.workers(), now - 20)
    await store.heartbeat(beat("w-1", 140))
    throughput.observe(await store.workers(), now)
    async with client:
        page = (await client.get("/")).text
    workers = page[page.index('id="workers"') :]
    assert "w-1" in workers and "host-1" in workers and "alpha, beta" in workers
    assert '<td class="num">140</td>' in workers
    assert "<strong>2.0</strong> completions/s" in page  # 40 in 20 s


async def test_the_sampler_reads_heartbeats_while_the_app_runs(store: Store) -> None:
    await store.heartbeat(beat("w-1", 5))
    throughput = Throughput()
    async with sampling(store, throughput, every=0.01):
        await until(lambda: throughput.started_at is not None and bool(throughput.samples))
    assert throughput.samples[0].completed == 0
