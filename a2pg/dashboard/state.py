"""What every route of one dashboard shares: the store, its settings, the renderer."""

from __future__ import annotations

from dataclasses import dataclass, field

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
    streams: int = 0
    """Live tails open now."""


def dashboard_of(request: Request) -> Dashboard:
    found: Dashboard = request.app.state.dashboard
    return found
