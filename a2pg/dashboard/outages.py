"""A database outage is a 503 ("retry soon") on every backend, not a 500.

Which errors are outages only the backends know: ``a2pg.backends.classify`` reads the
driver's error as ``STORE_UNAVAILABLE`` (a refused or lost connection, a pool timeout,
a SQLite file that cannot be opened or stays locked), so the dashboard imports no driver.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..backends import classify

log = logging.getLogger("a2pg.dashboard")

UNAVAILABLE = "STORE_UNAVAILABLE"

Page = Callable[[Request, Exception], Awaitable[Response]]


def is_outage(exc: BaseException) -> bool:
    error = classify(exc)
    return error is not None and error.code == UNAVAILABLE


class Outages:
    """ASGI middleware: an exception that is an outage, raised before the response began,
    becomes ``page``'s response; any other passes on (a bug: a 500)."""

    def __init__(self, app: ASGIApp, page: Page) -> None:
        self.app = app
        self.page = page

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def sending(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except Exception as exc:
            if started or not is_outage(exc):
                raise
            response = await self.page(Request(scope, receive), exc)
            await response(scope, receive, send)
