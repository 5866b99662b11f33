"""Work by state across sessions (``/work``), cancelling picked live heads (confirmed
first), and one head's page (``/sessions/{session}/heads/{consumer}/{index}``).

The lists are ``Store.find_heads`` pages: ready (oldest first: the lag), held, backing
off, scheduled, filtered by consumer, event type, error text and session prefix, paged
by key (``after``: the last row's place in claim order, so a page costs the same deep
down the list). Rows are picked with the selection component (``selection.py``); the
confirmation lists the picked heads that are still live, as the store has them now, and
its one button cancels exactly those (``cancel_head``: skip, or dead-letter). A head's
page shows its event, its cursor's dispatch now and every finished attempt.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from ...front import CheckedStore, store_time
from ...models import (
    ANY_LANE,
    WORK_STATES,
    AnyLane,
    CancelAction,
    Cursor,
    FoundHead,
    HeadKey,
    HeadQuery,
    StoredEvent,
    WorkState,
)
from ...store import Store
from ..params import bad_request, integer, local_path, text
from ..state import BULK_LIMIT, dashboard_of
from . import audit
from .actions import HeadKey as RowKey
from .actions import back, checked_form
from .selection import selected_keys

WORK_PAGE = 50
"""Heads one page of a work list shows."""

CANCELS: tuple[CancelAction, ...] = ("skip", "dead_letter")

STATE_LABELS: dict[WorkState, str] = {
    "ready": "Ready",
    "held": "Held",
    "backing_off": "Backing off",
    "scheduled": "Scheduled",
}


@dataclass(frozen=True, slots=True)
class Filters:
    """A work list's state and filters, as its GET form and its links carry them."""

    state: WorkState
    consumer: str | None
    event_type: str | None
    error: str | None
    session: str | None

    def to_query(self, *, after: HeadKey | None, limit: int) -> HeadQuery:
        return HeadQuery(
            self.state, self.consumer, self.event_type, self.error, self.session, after, limit
        )

    def params(self) -> dict[str, str]:
        """The filters with a value (the state apart: each tab sets its own)."""
        given = {
            "consumer": self.consumer,
            "type": self.event_type,
            "error": self.error,
            "session": self.session,
        }
        return {k: v for k, v in given.items() if v}


def filters_of(values: Mapping[str, Any]) -> Filters:
    state = text(values, "state") or "ready"
    chosen = next((s for s in WORK_STATES if s == state), None)
    if chosen is None:
        raise bad_request(f"state must be one of {', '.join(WORK_STATES)}")
    return Filters(
        chosen,
        text(values, "consumer"),
        text(values, "type"),
        text(values, "error"),
        text(values, "session"),
    )


def encode_after(key: HeadKey) -> str:
    return json.dumps([key.ready_at.isoformat(), key.session_id, key.index, key.consumer, key.lane])


def decode_after(value: str | None) -> HeadKey | None:
    """A page position from a next-page link; a malformed one is a 400 (the store checks
    the rest: a name past its limit is its INVALID_ARGUMENT, a 400 too)."""
    if value is None:
        return None
    try:
        ready_at, session_id, index, consumer, lane = json.loads(value)
        when = datetime.fromisoformat(ready_at)
    except (ValueError, TypeError):
        raise bad_request("malformed page position") from None
    ok = (
        when.tzinfo is not None
        and all(isinstance(v, str) for v in (session_id, consumer, lane))
        and isinstance(index, int)
        and not isinstance(index, bool)
    )
    if not ok:
        raise bad_request("malformed page position")
    return HeadKey(when, session_id, index, consumer, lane)


def row_key(found: FoundHead) -> str:
    """The selection value of a listed head (what the confirmation reads back)."""
    head = found.head
    return RowKey(head.session_id, head.consumer, head.lane, head.index).encode()


async def now_of(store: Store) -> datetime:
    """The store's clock now (what its ready and lease times are by), else this machine's:
    a lease shown held or lapsed is so by the store's own judgement."""
    return await store_time(store) if isinstance(store, CheckedStore) else datetime.now(UTC)


def state_counts(stats: Sequence[Any]) -> dict[WorkState, int]:
    """Every consumer's heads in each state (the tabs' counts, unfiltered)."""
    return {
        "ready": sum(s.ready for s in stats),
        "held": sum(s.claimed for s in stats),
        "backing_off": sum(s.backing_off for s in stats),
        "scheduled": sum(s.scheduled for s in stats),
    }


async def work_page(request: Request) -> Response:
    """``GET /work?state=...&consumer=&type=&error=&session=&after=``: one page."""
    dash = dashboard_of(request)
    q = request.query_params
    filters = filters_of(q)
    after = decode_after(text(q, "after"))
    found, stats, now = await asyncio.gather(
        dash.store.find_heads(filters.to_query(after=after, limit=WORK_PAGE + 1)),
        dash.store.consumer_stats(),
        now_of(dash.store),
    )
    more = len(found) > WORK_PAGE
    found = found[:WORK_PAGE]
    return dash.pages.render(
        request,
        "work.html",
        found=found,
        filters=filters,
        states=WORK_STATES,
        labels=STATE_LABELS,
        counts=state_counts(stats),
        next_after=encode_after(found[-1].key) if more and found else None,
        first_page=after is None,
        age=functools.partial(age_of, filters.state, now),
        key=row_key,
    )


def age_of(state: WorkState, now: datetime, found: FoundHead) -> float:
    """Seconds a ready head has waited, or a held-back one has still to wait (never below
    0: the dashboard's clock and the store's may differ a little)."""
    seconds = (now - found.since if state == "ready" else found.since - now).total_seconds()
    return max(0.0, seconds)


# -- cancelling picked heads -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LiveHead:
    """A picked head that is live now: its session, its cursor (head at the index) and its
    event (None when no longer stored)."""

    session_id: str
    cursor: Cursor
    event: StoredEvent | None

    @property
    def index(self) -> int:
        return self.cursor.head or 0

    def key(self) -> str:
        c = self.cursor
        return RowKey(self.session_id, c.consumer, c.lane, self.index).encode()


def cancel_of(values: Any) -> CancelAction:
    action = text(values, "action", required=True)
    for known in CANCELS:
        if action == known:
            return known
    raise bad_request("action must be skip or dead_letter")


async def event_at(store: Store, session_id: str, index: int) -> StoredEvent | None:
    events = await store.read(session_id, after=index - 1, limit=1)
    return events[0] if events and events[0].index == index else None


def cursor_at(
    cursors: Sequence[Cursor], consumer: str, index: int, lane: str | AnyLane | None
) -> Cursor | None:
    """The consumer's cursor whose head is ``index`` on ``lane`` (``ANY_LANE``: the first
    ``cursors`` lists, as ``cancel_head`` picks it)."""
    for cursor in cursors:
        if cursor.consumer != consumer or cursor.head != index:
            continue
        if isinstance(lane, AnyLane) or cursor.lane == lane:
            return cursor
    return None


async def live_among(store: Store, keys: Sequence[RowKey]) -> tuple[list[LiveHead], int]:
    """Which of ``keys`` are live heads now (one ``cursors`` read per session, one event
    read per head), in the keys' order, and how many are not (finished, dead-lettered or
    cleared since the list was shown)."""
    by_session: dict[str, list[Cursor]] = {}
    found: list[LiveHead] = []
    for key in keys:
        if key.session_id not in by_session:
            by_session[key.session_id] = await store.cursors(key.session_id)
        cursor = cursor_at(by_session[key.session_id], key.consumer, key.index, key.lane)
        if cursor is None or cursor.dead_lettered:
            continue
        event = await event_at(store, key.session_id, key.index)
        found.append(LiveHead(key.session_id, cursor, event))
    return found, len(keys) - len(found)


async def confirm_cancel(request: Request) -> Response:
    """``POST /work/confirm`` (a selection form: ``key``..., ``action``, ``next``): the
    picked heads that are still live, and the button that cancels exactly them."""
    dash, form = await checked_form(request)
    action = cancel_of(form)
    keys = selected_keys(form, limit=BULK_LIMIT)
    heads, gone = await live_among(dash.store, keys)
    return dash.pages.render(
        request,
        "confirm_cancel.html",
        heads=heads,
        gone=gone,
        action=action,
        back=local_path(text(form, "next"), "/work"),
        state=functools.partial(work_state_at, await now_of(dash.store)),
    )


async def cancel_many(request: Request) -> Response:
    """``POST /work/cancel``: cancels exactly the heads the confirmation listed (a head
    that finished or died meanwhile is left alone: ``cancel_head`` finds no live head)."""
    dash, form = await checked_form(request)
    action = cancel_of(form)
    keys = selected_keys(form, limit=BULK_LIMIT)
    done = 0
    for key in keys:
        result = await dash.store.cancel_head(
            key.session_id, consumer=key.consumer, index=key.index, action=action, lane=key.lane
        )
        done += result.cancelled
    one = keys[0] if len(keys) == 1 else None
    await audit.record(
        request,
        "cancel.skip" if action == "skip" else "cancel.dead_letter",
        session_id=one.session_id if one else None,
        consumer=one.consumer if one else None,
        lane=one.lane if one else None,
        index=one.index if one else None,
        selected=len(keys),
        cancelled=done,
        gone=len(keys) - done,
        outcome="cancelled" if done else "nothing",
    )
    next_path = local_path(text(form, "next"), "/work")
    return back(request, next_path, notice=f"cancel-{action}", count=done)


# -- one head ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HeadPath:
    """What a head page's path names: ``/sessions/{session}/heads/{consumer}/{index}``,
    each name percent-encoded, a ``/`` in it as ``%2F`` (the ``head_href`` macro writes
    such links)."""

    session_id: str
    consumer: str
    index: int


def head_path(request: Request) -> HeadPath:
    """The path's names, read from the raw (still encoded) path so that names holding
    ``/`` are cut right; a path of another shape is a 404."""
    raw = request.scope.get("raw_path")
    path = raw.decode("latin-1") if isinstance(raw, bytes) else request.url.path
    parts = path.partition("?")[0].split("/")
    if len(parts) < 6 or parts[-5] != "sessions" or parts[-3] != "heads":
        raise not_found()
    try:
        session_id, consumer = (unquote(p, errors="strict") for p in (parts[-4], parts[-2]))
    except UnicodeDecodeError:
        raise bad_request("the path is not UTF-8") from None
    index = integer({"index": parts[-1]}, "index", minimum=1, required=True)
    if not session_id or not consumer or index is None:
        raise not_found()
    return HeadPath(session_id, consumer, index)


def not_found() -> HTTPException:
    return HTTPException(404, "no such page")


def lane_of(values: Mapping[str, Any]) -> str | AnyLane | None:
    """``?lane=NAME``: that lane's cursor; ``?cursor=event``: the event cursor; neither:
    any of the consumer's cursors at that index (``ANY_LANE``)."""
    lane = text(values, "lane")
    if lane is not None:
        return lane
    return None if text(values, "cursor") == "event" else ANY_LANE


def work_state_at(now: datetime, cursor: Cursor) -> str:
    return work_state_of(cursor, now)


def work_state_of(cursor: Cursor, now: datetime) -> str:
    """The words of the lists for a cursor's head at ``now``: ready, held, backing off or
    scheduled when live (as ``find_heads`` tells them apart), else the cursor's state."""
    d = cursor.dispatch
    if cursor.head is None or cursor.dead_lettered:
        return cursor.state(now)
    if d.claim_expires_at is None or d.claim_expires_at <= now:
        return "ready"
    if d.claim_holder is not None:
        return "held"
    return "backing off" if d.failure_count > 0 else "scheduled"


async def head_page(request: Request) -> Response:
    """``GET /sessions/{session}/heads/{consumer}/{index}[?lane=|?cursor=event]``."""
    dash = dashboard_of(request)
    where = head_path(request)
    lane = lane_of(request.query_params)
    store = dash.store
    event, cursors, attempts, now = await asyncio.gather(
        event_at(store, where.session_id, where.index),
        store.cursors(where.session_id),
        store.attempts(where.session_id, consumer=where.consumer, index=where.index, lane=lane),
        now_of(store),
    )
    cursor = cursor_at(cursors, where.consumer, where.index, lane)
    if event is None and cursor is None and not attempts:
        return dash.pages.render(
            request,
            "missing.html",
            status_code=404,
            what=f"no head {where.consumer!r} at {where.index} in session {where.session_id!r}",
        )
    live = cursor is not None and not cursor.dead_lettered
    lane_shown = (
        cursor.lane if cursor is not None else (None if isinstance(lane, AnyLane) else lane)
    )
    return dash.pages.render(
        request,
        "head.html",
        where=where,
        event=event,
        cursor=cursor,
        state=work_state_of(cursor, now) if cursor is not None else None,
        attempts=attempts,
        any_lane=isinstance(lane, AnyLane),
        live=live,
        lane=lane_shown,
        key=RowKey(where.session_id, where.consumer, lane_shown, where.index).encode(),
        now=now,
    )
