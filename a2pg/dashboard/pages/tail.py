"""A session's live tail: server-sent events fed by ``Store.stream``.

A browser's ``EventSource`` reconnects by itself and sends the last ``id:`` it saw as
``Last-Event-ID``; each event's id is its index, so a reconnect resumes the stream
exactly where it broke, with no gap and no duplicate.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse

from ...models import StoredEvent
from ..params import integer, text
from ..render import event_cause, payload_view, when
from ..state import MAX_STREAMS, Dashboard, dashboard_of

KEEPALIVE_SECONDS = 15.0
"""A comment line this often keeps proxies from closing an idle stream."""
RECONNECT_MS = 2000
QUEUE_SIZE = 256


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


async def _frames(dash: Dashboard, stream: AsyncIterator[StoredEvent]) -> AsyncIterator[str]:
    """The stream's events as SSE frames, with keepalive comments while it is quiet."""
    queue: asyncio.Queue[StoredEvent | BaseException | None] = asyncio.Queue(QUEUE_SIZE)

    async def pump() -> None:
        try:
            async for event in stream:
                await queue.put(event)
        except Exception as exc:  # handed to the response, which ends the stream
            await queue.put(exc)
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(Exception):
                    await aclose()

    dash.tails.add(queue)
    task = asyncio.create_task(pump(), name="a2pg-dashboard-tail")
    try:
        yield f"retry: {RECONNECT_MS}\n: tailing\n\n"
        while True:
            try:
                item = await asyncio.wait_for(queue.get(), KEEPALIVE_SECONDS)
            except TimeoutError:
                yield ": keepalive\n\n"
                continue
            if item is None:  # the server is stopping
                return
            if isinstance(item, BaseException):
                yield "event: a2error\ndata: the stream broke; reconnecting\n\n"
                return
            yield sse(item)
    finally:
        dash.tails.discard(queue)
        task.cancel()


async def tail_stream(request: Request) -> Response:
    dash = dashboard_of(request)
    q = request.query_params
    session_id = text(q, "id", required=True)
    assert session_id is not None
    after = integer({"after": request.headers.get("last-event-id")}, "after")
    if after is None:
        after = integer(q, "after") or 0
    if len(dash.tails) >= MAX_STREAMS or dash.closing:
        return PlainTextResponse("too many live tails open\n", status_code=503)
    # Checks the arguments now: a bad id is a 400 here, not a broken stream later.
    stream = dash.store.stream(session_id, after=after)
    return StreamingResponse(
        _frames(dash, stream),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )
