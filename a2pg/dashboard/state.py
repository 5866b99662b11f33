"""What every route of one dashboard shares: the store, its settings, the renderer."""

from __future__ import annotations

from dataclasses import dataclass, field

from starlette.requests import Request

from ..store import Store
from .render import Pages
from .tails import Tail
from .throughput import Throughput

SESSIONS_PAGE = 50
EVENTS_PAGE = 50
DEAD_LETTERS_PAGE = 50
BULK_LIMIT = 500
"""Dead letters one bulk action redrives at most (the confirmation lists each)."""
MAX_STREAMS = 64
"""Live tails one dashboard process serves at once; more get 503 (with Retry-After)."""


@dataclass
class Dashboard:
    store: Store
    pages: Pages
    read_only: bool
    throughput: Throughput = field(default_factory=Throughput)
    tails: set[Tail] = field(default_factory=set)
    """The live tails open now."""
    closing: bool = False

    def claim_tail(self) -> Tail | None:
        """A place for one more live tail, or None when all ``MAX_STREAMS`` are taken (or
        the server is stopping). Counts and takes in one step, with no ``await`` between:
        tails opened at once cannot all see a free place."""
        if self.closing or len(self.tails) >= MAX_STREAMS:
            return None
        return Tail(self.tails)

    def close_tails(self) -> None:
        """Ends every live tail (the server is stopping: they would hold it up)."""
        self.closing = True
        for tail in self.tails:
            tail.stop()


def dashboard_of(request: Request) -> Dashboard:
    found: Dashboard = request.app.state.dashboard
    return found
