"""The sessions list (keyset pages, id prefix search, lag within the page) and one session."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime

from starlette.requests import Request
from starlette.responses import Response

from ...models import SessionInfo
from ...store import Store
from ..lookup import find_sessions, session_info
from ..params import integer, text
from ..state import EVENTS_PAGE, SESSIONS_PAGE, dashboard_of

SORTS = ("id", "lag")
ROWS_SHOWN = 200
"""Cursors and dead letters a session page lists at most (a session may have thousands
of event cursors)."""


@dataclass(frozen=True, slots=True)
class SessionRow:
    info: SessionInfo
    lag: float | None
    """Seconds the oldest unfinished head's event has waited (only when sorting by lag)."""


async def session_lag(store: Store, info: SessionInfo, now: datetime) -> float | None:
    """How long this session's oldest unfinished, not dead-lettered head has waited since
    its event was appended: two indexed reads (the cursors, then that one event)."""
    if info.pending == 0:
        return None
    heads = [
        c.head
        for c in await store.cursors(info.session_id)
        if c.head is not None and not c.dead_lettered
    ]
    if not heads:
        return None
    oldest = min(heads)
    events = await store.read(info.session_id, after=oldest - 1, limit=1)
    if not events:
        return None
    return max(0.0, (now - events[0].created_at).total_seconds())


async def sessions_page(request: Request) -> Response:
    dash = dashboard_of(request)
    q = request.query_params
    prefix = text(q, "q") or ""
    after = text(q, "after")
    sort = text(q, "sort") or "id"
    if sort not in SORTS:
        sort = "id"
    page = await find_sessions(dash.store, prefix=prefix, after=after, limit=SESSIONS_PAGE)
    rows = [SessionRow(info, None) for info in page.sessions]
    if sort == "lag":
        now = datetime.now(UTC)
        lags = await asyncio.gather(*(session_lag(dash.store, r.info, now) for r in rows))
        rows = [SessionRow(r.info, lag) for r, lag in zip(rows, lags, strict=True)]
        rows.sort(key=lambda r: (r.lag is None, -(r.lag or 0.0), r.info.session_id))
    return dash.pages.render(
        request,
        "sessions.html",
        rows=rows,
        prefix=prefix,
        after=after,
        sort=sort,
        next_after=page.next_after,
    )


@dataclass(frozen=True, slots=True)
class EventWindow:
    """Which events a session page shows: ``after`` through ``after + EVENTS_PAGE``."""

    after: int
    first_after: int
    last_after: int

    @property
    def older(self) -> int | None:
        return (
            max(self.first_after, self.after - EVENTS_PAGE)
            if self.after > self.first_after
            else None
        )

    @property
    def newer(self) -> int | None:
        return (
            min(self.last_after, self.after + EVENTS_PAGE) if self.after < self.last_after else None
        )


def event_window(info: SessionInfo, requested: int | None) -> EventWindow:
    """Pages by index (indexes are dense above the clear marker): no count, no offset."""
    first = max(0, info.clear_index - 1)
    last = max(first, info.head - EVENTS_PAGE)
    after = last if requested is None else min(max(requested, first), last)
    return EventWindow(after, first, last)


async def session_page(request: Request) -> Response:
    dash = dashboard_of(request)
    q = request.query_params
    session_id = text(q, "id", required=True)
    assert session_id is not None
    info = await session_info(dash.store, session_id)
    if info is None:
        return dash.pages.render(
            request, "missing.html", status_code=404, what=f"no session {session_id!r}"
        )
    window = event_window(info, integer(q, "after"))
    events, cursors, dead = await asyncio.gather(
        dash.store.read(session_id, after=window.after, limit=EVENTS_PAGE),
        dash.store.cursors(session_id),
        dash.store.dead_letters(session_id),
    )
    return dash.pages.render(
        request,
        "session.html",
        info=info,
        events=events,
        window=window,
        cursors=cursors,
        dead_letters=dead,
        now=datetime.now(UTC),
        shown=ROWS_SHOWN,
    )
