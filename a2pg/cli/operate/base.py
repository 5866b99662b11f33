"""What the operator commands share: how they open the store, walk sessions, read durations."""

from __future__ import annotations

import argparse
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from ...contract.limits import MAX_SECONDS
from ...front import CheckedStore, store_time
from ...models import ANY_LANE, AnyLane, SessionInfo
from ..common import open_cli_store

if TYPE_CHECKING:
    from ...store import Store

SESSION_PAGE = 100
"""Sessions per ``Store.sessions`` call when a command walks all of them."""


@asynccontextmanager
async def opened(args: argparse.Namespace) -> AsyncIterator[CheckedStore]:
    """The store of ``--sqlite`` or ``--dsn``/``--schema``/``--pooler``/``--prepare``,
    closed on exit (``common.open_cli_store``)."""
    async with open_cli_store(args) as store:
        yield store


async def all_sessions(store: Store) -> AsyncIterator[SessionInfo]:
    """Every session by id, a page at a time."""
    after: str | None = None
    while True:
        page = await store.sessions(after=after, limit=SESSION_PAGE)
        for info in page:
            yield info
        if len(page) < SESSION_PAGE:
            return
        after = page[-1].session_id


_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86_400}


def duration(text: str) -> float:
    """``30d``, ``12h``, ``90m``, ``45s`` (a number then one unit) as seconds, above 0."""
    found = _DURATION.fullmatch(text.strip())
    if found is None:
        raise argparse.ArgumentTypeError(
            f"expected a duration like 30d, 12h, 90m or 45s, got {text!r}"
        )
    seconds = float(found[1]) * _UNIT_SECONDS[found[2]]
    if not 0 < seconds <= MAX_SECONDS:
        raise argparse.ArgumentTypeError(f"must be above 0 and at most 100 years, got {text!r}")
    return seconds


async def idle_since(store: CheckedStore, older_than: float) -> datetime:
    """The cutoff of ``--older-than``: sessions whose last event is before it are idle. By
    the store's clock, the one its events' times are by (``front.store_time``): the
    machine running the command may keep another time than the database server."""
    return await store_time(store) - timedelta(seconds=older_than)


def is_idle(info: SessionInfo, cutoff: datetime | None) -> bool:
    """Whether the session's newest event (a clear marker counts) is older than ``cutoff``;
    every session when there is no cutoff."""
    if cutoff is None:
        return True
    return info.last_event_at is not None and info.last_event_at < cutoff


def cursor_lane(args: argparse.Namespace) -> str | AnyLane | None:
    """``--lane LANE``: that lane; ``--event-cursor``: None; neither: ``ANY_LANE``."""
    if args.event_cursor:
        return None
    lane: str | None = args.lane
    return ANY_LANE if lane is None else lane


def cursor_words(lane: str | AnyLane | None) -> str:
    """How a message names the cursor ``cursor_lane`` picked (nothing for ``ANY_LANE``)."""
    if isinstance(lane, AnyLane):
        return ""
    return " on its event cursor" if lane is None else f" on lane '{lane}'"
