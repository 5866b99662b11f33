"""The activity page: each consumer's attempts per bucket, drawn from the attempt history."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import httpx

from a2pg import ActivityPoint, NewEvent, Target
from a2pg.dashboard.pages.activity import HEIGHT, WIDTH, charts_of, polyline
from a2pg.ids import FakeClock
from a2pg.store import Store


async def run_attempts(store: Store, clock: FakeClock) -> None:
    """billing: one failure then a completion (3 s); mailer: one completion, claimed 2 s
    after the append."""
    await store.append("s", [NewEvent("x", targets=[Target("billing"), Target("mailer")])])
    clock.advance(2)
    heads = await store.claim_any(holder="w", ttl=30, limit=5)
    billing = next(h for h in heads if h.consumer == "billing")
    mailer = next(h for h in heads if h.consumer == "mailer")
    await store.fail_attempt(
        "s", consumer="billing", lane=None, index=1, attempt=billing.attempt,
        error="boom", max_failures=5,
    )  # fmt: skip
    await store.complete_attempt("s", consumer="mailer", lane=None, index=1, attempt=mailer.attempt)
    [again] = await store.claim_any(holder="w", ttl=30, limit=5)
    clock.advance(3)
    await store.complete_attempt("s", consumer="billing", lane=None, index=1, attempt=again.attempt)


async def test_the_page_charts_each_consumer_from_the_history(
    store: Store, client: httpx.AsyncClient, clock: FakeClock
) -> None:
    await run_attempts(store, clock)
    page = await client.get("/activity")
    assert page.status_code == 200, page.text
    sections = re.findall(r'<section class="activity" data-consumer="([^"]+)"', page.text)
    assert sections == ["billing", "mailer"]
    billing = page.text.split('data-consumer="billing"')[1].split("</section>")[0]
    assert "completed 1" in billing and "failed 1" in billing and "dead-lettered 0" in billing
    assert 'data-series="duration"' in billing
    mailer = page.text.split('data-consumer="mailer"')[1].split("</section>")[0]
    assert "longest wait 2s max" in mailer and 'data-series="mean wait"' in mailer
    lines = re.findall(r'data-series="completed" points="([^"]*)"', billing)
    assert len(lines) == 1 and len(lines[0].split()) == 61  # a point per minute of the hour
    day = await client.get("/activity", params={"window": "24h"})
    assert "<strong>24h</strong>" in day.text
    assert (await client.get("/activity", params={"window": "9y"})).status_code == 200


async def test_an_empty_history_says_so(client: httpx.AsyncClient) -> None:
    page = await client.get("/activity")
    assert "No attempt ended in the last 1h." in page.text


def test_charts_put_each_point_in_its_bucket() -> None:
    since = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
    until = since + timedelta(minutes=4)
    points = [
        ActivityPoint("c", since + timedelta(minutes=1), 4, 0, 0, 0, 1.0, 2.0, 0.25, 3.0),
        ActivityPoint("c", since + timedelta(minutes=3), 2, 1, 1, 0, 0.5, 0.5, None, None),
    ]
    [charts] = charts_of(points, since=since, until=until, bucket=60)
    attempts, durations, waits = charts.charts
    assert [s.summary for s in waits.series] == ["mean wait 0.25s max", "longest wait 3s max"]
    assert waits.top == 3.0
    assert waits.series[1].points == polyline([0, 3, 0, 0, 0], 3)
    assert attempts.top == 4
    done = attempts.series[0]
    assert done.summary == "completed 6"
    assert done.points == polyline([0, 4, 0, 2, 0], 4)
    assert done.points.split()[1] == f"{WIDTH / 4:.1f},0.0"
    assert durations.series[0].points.split()[0] == f"0.0,{HEIGHT:.1f}"
