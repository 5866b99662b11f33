"""The overview shows what ``Store.consumer_stats()`` and ``Store.workers()`` say."""

from __future__ import annotations

import re
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import httpx

from a2pg import Claimed, Consumer, LogSpec, NewEvent, Target, WorkerBeat
from a2pg.dashboard import create_app
from a2pg.dashboard.throughput import Throughput, sampling
from a2pg.store import Store
from tests.worker.helpers import until

from .conftest import Client
from .helpers import csrf_token, dead_letter

FIELDS = (
    "ready",
    "claimed",
    "backing_off",
    "scheduled",
    "dead_letters",
    "blocked_lanes",
    "blocked",
)


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
    """Ready, claimed, backing off, scheduled, dead-lettered and blocked heads, over two
    consumers."""
    await store.append("s-ready", [NewEvent("job", n, targets=[Target("alpha")]) for n in range(3)])
    later = Target("beta", not_before=timedelta(hours=1))
    await store.append("s-later", [NewEvent("job", 1, targets=[later])])
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
    assert expected["beta"]["scheduled"] == 1
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


def row_of(html: str, consumer: str) -> str:
    [body] = re.findall(rf'<tr data-consumer="{consumer}">(.*?)</tr>', html, re.S)
    return str(body)


def cell(row: str, field: str) -> str:
    [text] = re.findall(rf'data-field="{field}">(.*?)</td>', row, re.S)
    return re.sub(r"<[^>]+>", "", text).strip()


async def test_every_served_paused_or_backfilling_consumer_has_a_row(
    store: Store, client: httpx.AsyncClient
) -> None:
    """ghost: only a live worker names it, shown with zeros; alpha: paused, with a lane
    blocked behind a dead letter; audit: registered, backfilling."""
    await store.heartbeat(beat("w-1", 0))  # serves alpha and beta
    await store.heartbeat(replace(beat("w-2", 0), consumers=("ghost", "alpha")))
    await dead_letter(store, "s-dead", consumer="alpha", lane="turns")
    await store.append("s-dead", [NewEvent("job", 2, targets=[Target("alpha", "turns")])])
    await store.pause_consumers(["alpha"])
    await store.register_consumers([Consumer("audit", LogSpec(backfill=True))])
    page = (await client.get("/", params={"part": "live"})).text
    numbers = overview_numbers(page)
    assert sorted(numbers) == ["alpha", "audit", "beta", "ghost"]
    assert numbers["ghost"] == dict.fromkeys(FIELDS, 0)
    ghost, alpha, audit = row_of(page, "ghost"), row_of(page, "alpha"), row_of(page, "audit")
    assert (cell(ghost, "served_by"), cell(alpha, "served_by"), cell(audit, "served_by")) == (
        "1",
        "2",
        "0",
    )
    assert (cell(alpha, "blocked"), cell(alpha, "paused"), cell(ghost, "paused")) == (
        "1",
        "paused",
        "",
    )
    assert cell(alpha, "oldest_blocked_age").endswith(" ms")  # dead-lettered just now
    assert cell(ghost, "oldest_blocked_age") == ""
    assert cell(audit, "backfill") == "running 0 sessions"
    assert (cell(audit, "registered"), cell(ghost, "registered")) == ("yes", "no")


PAUSE_LINK = (
    '<a class="button secondary pause" '
    'href="/consumers/pause/confirm?consumer={}&amp;next=%2F">Pause…</a>'
)


async def test_each_consumer_row_has_a_pause_link_or_a_resume_form(
    store: Store, client: httpx.AsyncClient
) -> None:
    """Pause (it holds work back) leads to its confirmation page; Resume is one POST."""
    await store.append("s", [NewEvent("job", 1, targets=[Target("alpha"), Target("beta")])])
    await store.pause_consumers(["beta"])
    page = (await client.get("/")).text
    token = csrf_token(page)
    alpha = row_of(page, "alpha")
    assert PAUSE_LINK.format("alpha") in alpha
    assert '<form method="post"' not in alpha
    [form] = re.findall(r'<form method="post".*?</form>', row_of(page, "beta"), re.S)
    assert 'action="/consumers/resume"' in form
    assert f'<input type="hidden" name="csrf_token" value="{token}">' in form
    assert '<input type="hidden" name="consumer" value="beta">' in form
    assert '<input type="hidden" name="next" value="/">' in form
    assert re.search(r"<button[^>]*>Resume</button>", form)
    live = (await client.get("/", params={"part": "live"})).text
    assert PAUSE_LINK.format("alpha") in row_of(live, "alpha")  # next is the page, not the part


async def test_a_read_only_overview_has_no_pause_form(store: Store, client_for: Client) -> None:
    await store.append("s", [NewEvent("job", 1, targets=[Target("alpha")])])
    page = (await client_for(store, read_only=True).get("/")).text
    assert "data-consumer" in page
    assert 'method="post"' not in page and "Pause</button>" not in page


async def test_the_legend_says_what_registered_and_blocked_mean(
    store: Store, client: httpx.AsyncClient
) -> None:
    await store.append("s", [NewEvent("job", 1, targets=[Target("alpha")])])
    page = (await client.get("/")).text
    [legend] = re.findall(
        r'<details class="legend" id="consumer-legend">(.*?)</details>', page, re.S
    )
    for term in ("registered", "scheduled", "blocked for", "paused", "backfill", "workers"):
        assert term in legend, term
    assert "naming no consumers wakes it" in legend
