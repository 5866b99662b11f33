"""Shared tools of the dashboard tests: dead letters made through the store, forms read
back from pages, live tails called on the app as a server calls it."""

from __future__ import annotations

import asyncio
import re
from collections.abc import MutableMapping, Sequence
from typing import Any

from starlette.types import ASGIApp

from a2pg import Claimed, NewEvent, Target
from a2pg.store import Store

from ..worker.helpers import bounded

HOSTILE = "<script>alert('pwned')</script><img src=x onerror=\"alert('img')\">"
"""A payload text that would run script if a page ever printed it as markup."""

_CSRF = re.compile(r'name="csrf_token" value="([0-9a-f]+)"')


def csrf_token(html: str) -> str:
    found = _CSRF.search(html)
    assert found is not None, "the page has no CSRF token"
    return found.group(1)


async def dead_letter(
    store: Store,
    session_id: str,
    *,
    consumer: str = "c",
    lane: str | None = "l",
    error: str = "boom: it broke",
    payload: object = None,
) -> int:
    """Appends one event for ``consumer`` (on ``lane``), claims it and fails it once with
    ``max_failures=1``: a dead letter. Returns its index."""
    appended = await store.append(
        session_id, [NewEvent("job", payload, targets=[Target(consumer, lane)])]
    )
    index = appended.events[0].index
    claimed = await store.claim_available(session_id, holder="tester", ttl=30)
    assert isinstance(claimed, Claimed)
    [head] = [h for h in claimed.heads if h.index == index and h.consumer == consumer]
    failed = await store.fail_attempt(
        session_id,
        consumer=consumer,
        lane=lane,
        index=index,
        attempt=head.attempt,
        error=error,
        max_failures=1,
    )
    assert failed.outcome == "dead_lettered"
    return index


async def append_plain(store: Store, session_id: str, payloads: Sequence[object]) -> None:
    await store.append(session_id, [NewEvent("note", p) for p in payloads])


class RawTail:
    """One ``GET /session/stream`` called on the app as uvicorn calls it (ASGI 2.3), since
    httpx's ASGI transport returns only once a response ends (a tail never does).

    A client that does not ``read`` takes the response head and the first chunk, then
    never another: its ``send`` blocks, as a server's does once the socket is full."""

    def __init__(self, app: ASGIApp, query: str, *, read: bool = True, keep: bool = True) -> None:
        self.app = app
        self.query = query
        self.read = read
        self.keep = keep
        """Whether the body is kept (else only counted: a witness of many big events)."""
        self.status: int | None = None
        self.headers: dict[str, str] = {}
        self.chunks: list[bytes] = []
        self.events = 0
        self._gone = asyncio.Event()
        self._requested = False
        self.task: asyncio.Task[None] | None = None

    def start(self) -> RawTail:
        self.task = asyncio.create_task(self._call())
        return self

    async def _call(self) -> None:
        await self.app(self._scope(), self._receive, self._send)

    def body(self) -> bytes:
        return b"".join(self.chunks)

    async def close(self) -> None:
        """The client goes away; returns once the app's call has ended."""
        self._gone.set()
        assert self.task is not None
        await bounded(self.task)

    def _scope(self) -> dict[str, Any]:
        return {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},  # what uvicorn says it speaks
            "http_version": "1.1",
            "method": "GET",
            "scheme": "http",
            "path": "/session/stream",
            "raw_path": b"/session/stream",
            "root_path": "",
            "query_string": self.query.encode(),
            "headers": [(b"host", b"dashboard.test")],
            "client": ("127.0.0.1", 1),
            "server": ("dashboard.test", 80),
            "state": {},
        }

    async def _receive(self) -> dict[str, Any]:
        if not self._requested:
            self._requested = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await self._gone.wait()
        return {"type": "http.disconnect"}

    async def _send(self, message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            self.headers = {k.decode(): v.decode() for k, v in message["headers"]}
            return
        body: bytes = message.get("body", b"")
        if not self.read and self.chunks and self.status == 200:
            await asyncio.Event().wait()  # never: this client does not read
        self.events += body.count(b"event: a2event")
        self.chunks.append(body if self.keep else body[:0])
