"""What every route of one dashboard shares: the store, its settings, the renderer."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request

from ..store import Store
from .render import Pages
from .throughput import Throughput

SESSIONS_PAGE = 50
EVENTS_PAGE = 50
DEAD_LETTERS_PAGE = 50
BULK_LIMIT = 500
"""Dead letters one bulk action redrives at most (the confirmation lists each)."""
MAX_STREAMS = 64
"""Live tails one dashboard process serves at once; more get 503."""


@dataclass
class Dashboard:
    store: Store
    pages: Pages
    read_only: bool
    throughput: Throughput = field(default_factory=Throughput)
    tails: set[asyncio.Queue[Any]] = field(default_factory=set)
    """The queues of the live tails open now."""
    closing: bool = False

    def close_tails(self) -> None:
        """Ends every live tail (the server is stopping: they would hold it up)."""
        self.closing = True
        for queue in self.tails:
            while queue.full():
                queue.get_nowait()
            queue.put_nowait(None)


def dashboard_of(request: Request) -> Dashboard:
    found: Dashboard = request.app.state.dashboard
    return found
