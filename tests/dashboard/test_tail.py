"""The live tail ends when its client goes away: no stream task or subscription is left."""

from __future__ import annotations

import asyncio
from collections.abc import MutableMapping
from typing import Any

from a2pg.dashboard import create_app
from a2pg.store import Store

from ..worker.helpers import bounded, until
from .helpers import append_plain


async def test_a_tail_whose_client_disconnects_is_closed(store: Store) -> None:
    await append_plain(store, "s1", [1, 2])
    app = create_app(store)
    dashboard = app.state.dashboard
    sent: list[MutableMapping[str, Any]] = []
    gone = asyncio.Event()
    requested = False

    async def receive() -> dict[str, Any]:
        nonlocal requested
        if not requested:
            requested = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},  # what uvicorn says it speaks
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": "/session/stream",
        "raw_path": b"/session/stream",
        "root_path": "",
        "query_string": b"id=s1&after=0",
        "headers": [(b"host", b"dashboard.test")],
        "client": ("127.0.0.1", 1),
        "server": ("dashboard.test", 80),
        "state": {},
    }
    call = asyncio.create_task(app(scope, receive, send))

    def body() -> bytes:
        return b"".join(m.get("body", b"") for m in sent)

    await bounded(until(lambda: body().count(b"event: a2event") == 2))
    assert len(dashboard.tails) == 1
    await append_plain(store, "s1", [3])
    await bounded(until(lambda: body().count(b"event: a2event") == 3))

    gone.set()
    await bounded(call)
    assert dashboard.tails == set()
    await bounded(
        until(lambda: not [t for t in asyncio.all_tasks() if t.get_name() == "a2pg-dashboard-tail"])
    )
