"""A session's live tail: server-sent events fed by ``Store.stream``.

A browser's ``EventSource`` reconnects by itself and sends the last ``id:`` it saw as
``Last-Event-ID``; each event's id is its index, so a reconnect resumes the stream
exactly where it broke, with no gap and no duplicate.

A process serves at most ``MAX_STREAMS`` tails (more get 503); each holds at most about
1 MiB its client has not read (``tails.Tail``), each event's payload cut to
``PAYLOAD_SHOWN_BYTES``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Coroutine
from typing import Any

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from ...models import StoredEvent
from ...store import Store
from ..params import integer, text
from ..render import event_cause, payload_view, when
from ..state import dashboard_of
from ..tails import Tail

KEEPALIVE_SECONDS = 15.0
"""A comment line this often keeps proxies from closing an idle stream."""
RECONNECT_MS = 2000
RETRY_AFTER_SECONDS = 5
"""What a 503 (every tail taken) tells the client to wait."""
PREAMBLE = f"retry: {RECONNECT_MS}\n: tailing\n\n".encode()
KEEPALIVE = b": keepalive\n\n"
BROKEN = b"event: a2error\ndata: the stream broke; reconnecting\n\n"


def event_data(event: StoredEvent) -> dict[str, Any]:
    """What the tail's script shows of one event: text only, which it sets as text."""
    shown = payload_view(event.payload)
    return {
        "index": event.index,
        "id": event.id,
        "type": event.type,
        "created_at": when(event.created_at),
        "cause": event_cause(event),
        "payload": shown.text,
        "preview": shown.preview,
        "collapsed": shown.collapsed,
    }


def sse(event: StoredEvent) -> str:
    data = json.dumps(event_data(event), ensure_ascii=False)
    return f"id: {event.index}\nevent: a2event\ndata: {data}\n\n"


async def _close(stream: AsyncIterator[StoredEvent]) -> None:
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        with contextlib.suppress(Exception):
            await aclose()


async def _feed(
    store: Store, tail: Tail, first: AsyncIterator[StoredEvent], session_id: str, after: int
) -> None:
    """Renders the session's events into ``tail`` as frames. Once the tail is full it
    closes the store's stream (what that had read goes with it) and, once half is sent,
    opens another after the last event rendered: no gap, no duplicate."""
    stream: AsyncIterator[StoredEvent] | None = first
    last = after
    try:
        while True:
            if stream is None:
                stream = store.stream(session_id, after=last)
            try:
                async for event in stream:
                    tail.put(sse(event).encode("utf-8"))
                    last = event.index
                    if tail.full:
                        break
                else:  # the store is closing: so is the tail
                    tail.end()
                    return
            finally:
                await _close(stream)
                stream = None
            await tail.room()
    except Exception:  # handed to the client, whose stream ends (and reconnects)
        tail.end(BROKEN)


async def _frames(tail: Tail) -> AsyncGenerator[bytes, None]:
    """The tail's frames, with keepalive comments while it is quiet."""
    yield PREAMBLE
    while True:
        frame = await tail.next(KEEPALIVE_SECONDS, KEEPALIVE)
        if frame is None:  # ended: the store broke or closed, or the server is stopping
            return
        yield frame


class TailResponse(StreamingResponse):
    """The stream of one tail, whose place is given back and whose feeder is stopped
    when the response ends, however it ends (a client gone while its send was blocked
    leaves the body suspended at a ``yield``, where no ``finally`` of its runs)."""

    def __init__(self, tail: Tail, feed: Callable[[], Coroutine[Any, Any, None]]) -> None:
        self.tail = tail
        self._feed = feed
        self._body = _frames(tail)
        super().__init__(
            self._body,
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            self.tail.feeder = asyncio.create_task(self._feed(), name="a2pg-dashboard-tail")
            await super().__call__(scope, receive, send)
        finally:
            self.tail.release()
            await self._body.aclose()


async def tail_stream(request: Request) -> Response:
    dash = dashboard_of(request)
    q = request.query_params
    session_id = text(q, "id", required=True)
    assert session_id is not None
    after = integer({"after": request.headers.get("last-event-id")}, "after")
    if after is None:
        after = integer(q, "after") or 0
    # Checks the arguments now: a bad id is a 400 here, not a broken stream later.
    stream = dash.store.stream(session_id, after=after)
    tail = dash.claim_tail()  # counted and taken at once: the cap holds
    if tail is None:
        await _close(stream)
        return PlainTextResponse(
            "too many live tails open; retry later\n",
            status_code=503,
            headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
        )
    return TailResponse(tail, functools.partial(_feed, dash.store, tail, stream, session_id, after))
