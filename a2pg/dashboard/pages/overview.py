"""The overview: per consumer what waits, runs, backs off and is dead; live workers;
throughput. The page reloads its live part every few seconds (``?part=live``).

A consumer with work that no live worker serves is badged "unserved": its numbers alone
(1 ready, 4 min of lag) look like a slow consumer, when nothing will ever run them."""

from __future__ import annotations

import asyncio
import time

from starlette.requests import Request
from starlette.responses import Response

from ...models import ConsumerStats
from ..state import dashboard_of
from ..throughput import BUCKET_SECONDS

RATE_WINDOWS = (60.0, 300.0, 600.0)


def unserved(stats: ConsumerStats) -> bool:
    """Whether ``stats`` holds work (ready, claimed, backing off, scheduled, dead or
    blocked) that no live worker serves: a deploy that dropped it, or a name typo."""
    work = (
        stats.ready,
        stats.claimed,
        stats.backing_off,
        stats.scheduled,
        stats.dead_letters,
        stats.blocked,
    )
    return stats.served_by == 0 and any(n > 0 for n in work)


async def overview_page(request: Request) -> Response:
    dash = dashboard_of(request)
    stats, workers = await asyncio.gather(dash.store.consumer_stats(), dash.store.workers())
    now = time.monotonic()
    rates = [dash.throughput.rate(seconds, now) for seconds in RATE_WINDOWS]
    buckets = dash.throughput.buckets(now)
    live = request.query_params.get("part") == "live"
    return dash.pages.render(
        request,
        "overview_live.html" if live else "overview.html",
        stats=stats,
        unserved_names={s.consumer for s in stats if unserved(s)},
        workers=workers,
        rates=rates,
        buckets=buckets,
        bucket_seconds=BUCKET_SECONDS,
        peak=max(buckets, default=0.0),
        sampling=dash.throughput.started_at is not None,
    )
