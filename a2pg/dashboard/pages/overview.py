"""The overview: per consumer what waits, runs, backs off and is dead; live workers;
throughput. The page reloads its live part every few seconds (``?part=live``)."""

from __future__ import annotations

import asyncio
import time

from starlette.requests import Request
from starlette.responses import Response

from ..state import dashboard_of
from ..throughput import BUCKET_SECONDS

RATE_WINDOWS = (60.0, 300.0, 600.0)


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
        workers=workers,
        rates=rates,
        buckets=buckets,
        bucket_seconds=BUCKET_SECONDS,
        peak=max(buckets, default=0.0),
        sampling=dash.throughput.started_at is not None,
    )
