"""Charts with history: each consumer's finished attempts, their durations and how long
they waited to be claimed (its lag), per bucket, from the database.

The points come from the attempt history (``Store.activity``), which the statements that
end attempts write, so a restarted dashboard shows the past, and every dashboard of a
deployment shows the same. Drawn as inline SVG on the server: no script, no chart library.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from starlette.requests import Request
from starlette.responses import Response

from ...front import CheckedStore, store_time
from ...models import ActivityPoint
from ..state import dashboard_of

WINDOWS = {"1h": (timedelta(hours=1), 60.0), "24h": (timedelta(hours=24), 600.0)}
"""The windows a page shows, each with its bucket in seconds."""

WIDTH, HEIGHT = 600, 120
"""The plot area of one chart, in SVG units."""


@dataclass(frozen=True, slots=True)
class Series:
    name: str
    css: str
    """The class that colours its line (dashboard.css)."""
    points: str
    """The SVG polyline's points."""
    summary: str
    """What the caption says of it: its sum, or its largest value with the unit."""


@dataclass(frozen=True, slots=True)
class Chart:
    title: str
    unit: str
    top: float
    """The value at the top of the plot (its y axis' only label but 0)."""
    series: list[Series]


@dataclass(frozen=True, slots=True)
class ConsumerCharts:
    consumer: str
    charts: list[Chart]


def polyline(values: list[float], top: float) -> str:
    """SVG points for ``values`` (one per bucket, left to right) scaled so ``top`` is the
    plot's top edge."""
    if not values:
        return ""
    step = WIDTH / max(1, len(values) - 1)
    scale = HEIGHT / top if top > 0 else 0.0
    return " ".join(
        f"{i * step:.1f},{HEIGHT - value * scale:.1f}" for i, value in enumerate(values)
    )


def counted(name: str, css: str, values: list[float], top: float) -> Series:
    """A series of counts, captioned with its sum."""
    return Series(name, css, polyline(values, top), f"{name} {sum(values):g}")


def timed(name: str, css: str, values: list[float], top: float) -> Series:
    """A series of seconds, captioned with its largest value."""
    most = max(values, default=0.0)
    return Series(name, css, polyline(values, top), f"{name} {most:.3g}s max")


def charts_of(
    points: list[ActivityPoint], *, since: datetime, until: datetime, bucket: float
) -> list[ConsumerCharts]:
    """Per consumer: attempts per bucket (completed; failed and dead-lettered), the mean
    duration, and the wait from ready to claim (the mean, and the longest: how far behind
    the consumer ran), each over every bucket of the window (0 where nothing ended)."""
    start = since.timestamp() - since.timestamp() % bucket
    count = max(1, int((until.timestamp() - start) // bucket) + 1)
    slots: dict[str, list[ActivityPoint | None]] = {}
    for point in points:
        row = slots.setdefault(point.consumer, [None] * count)
        index = int((point.at.timestamp() - start) // bucket)
        if 0 <= index < count:
            row[index] = point
    found = []
    for consumer, row in sorted(slots.items()):
        done = [float(p.completed) if p else 0.0 for p in row]
        failed = [float(p.failed) if p else 0.0 for p in row]
        dead = [float(p.dead_lettered) if p else 0.0 for p in row]
        durations = [p.mean_duration or 0.0 if p else 0.0 for p in row]
        waits = [p.mean_wait or 0.0 if p else 0.0 for p in row]
        lags = [p.max_wait or 0.0 if p else 0.0 for p in row]
        top = max([*done, *failed, *dead, 1.0])
        slowest = max([*durations, 0.001])
        longest = max([*lags, *waits, 0.001])
        found.append(
            ConsumerCharts(
                consumer,
                [
                    Chart(
                        f"attempts per {bucket / 60:g} min",
                        "",
                        top,
                        [
                            counted("completed", "s-done", done, top),
                            counted("failed", "s-failed", failed, top),
                            counted("dead-lettered", "s-dead", dead, top),
                        ],
                    ),
                    Chart(
                        "mean attempt duration",
                        "s",
                        slowest,
                        [timed("duration", "s-duration", durations, slowest)],
                    ),
                    Chart(
                        "wait from ready to claim",
                        "s",
                        longest,
                        [
                            timed("mean wait", "s-wait", waits, longest),
                            timed("longest wait", "s-lag", lags, longest),
                        ],
                    ),
                ],
            )
        )
    return found


async def activity_page(request: Request) -> Response:
    dash = dashboard_of(request)
    window = request.query_params.get("window", "1h")
    if window not in WINDOWS:
        window = "1h"
    span, bucket = WINDOWS[window]
    store = dash.store
    until = await store_time(store) if isinstance(store, CheckedStore) else datetime.now(UTC)
    since = until - span
    points = await store.activity(since=since, bucket=bucket)
    consumers = charts_of(points, since=since, until=until, bucket=bucket)
    return dash.pages.render(
        request,
        "activity.html",
        consumers=consumers,
        window=window,
        windows=list(WINDOWS),
        since=since,
        until=until,
        width=WIDTH,
        height=HEIGHT,
    )
