"""Finding sessions by id prefix with nothing but ``Store.sessions(after=..., limit=...)``.

The listing is a keyset walk in code-point order, so the sessions starting with a
prefix are one contiguous run of it: start just before the prefix and stop at the
first id past it. Every page is one index range scan, however many sessions exist.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..models import SessionInfo
from ..store import Store

LAST_CHAR = "\U0010ffff"
SUFFIX_ROOM = (250, 500)
"""Characters and UTF-8 bytes a prefix may have for ``just_before`` to append LAST_CHAR
and stay within the default name limits (256, 512)."""
MAX_SCAN_PAGES = 50
"""A prefix search reads at most this many listing pages for one page of results."""


def just_before(prefix: str) -> str | None:
    """An id that sorts before every id starting with ``prefix`` and after nearly every
    id that sorts before it (``None``: start at the beginning). Only ids that start
    with the returned text and sort before ``prefix`` fall in between; callers skip them.
    """
    if not prefix:
        return None
    last = ord(prefix[-1])
    if last <= 1:
        return just_before(prefix[:-1]) if len(prefix) > 1 else None
    below = last - 1
    if 0xD800 <= below <= 0xDFFF:  # surrogates are not text: step over them
        below = 0xD7FF
    before = prefix[:-1] + chr(below)
    chars, octets = SUFFIX_ROOM
    if len(prefix) <= chars and len(prefix.encode("utf-8")) <= octets:
        before += LAST_CHAR
    return before


@dataclass(frozen=True, slots=True)
class SessionPage:
    sessions: list[SessionInfo]
    next_after: str | None
    """Where the next page starts (``after``), ``None`` when this is the last."""


async def find_sessions(
    store: Store, *, prefix: str = "", after: str | None = None, limit: int
) -> SessionPage:
    """Up to ``limit`` sessions whose id starts with ``prefix``, after ``after``, by id."""
    start = just_before(prefix)
    if after is not None and (start is None or after > start):
        start = after
    found: list[SessionInfo] = []
    for _ in range(MAX_SCAN_PAGES):
        want = limit + 1 - len(found)  # one more than shown says whether a next page exists
        page = await store.sessions(after=start, limit=want)
        for info in page:
            if info.session_id.startswith(prefix):
                found.append(info)
            elif info.session_id > prefix:
                return _page(found, limit, more=False)
        if len(found) > limit:
            return _page(found, limit, more=True)
        if len(page) < want:
            return _page(found, limit, more=False)
        start = page[-1].session_id
    return _page(found, limit, more=True, resume=start)


def _page(
    found: list[SessionInfo], limit: int, *, more: bool, resume: str | None = None
) -> SessionPage:
    shown = found[:limit]
    if not more:
        return SessionPage(shown, None)
    if len(found) > limit:
        return SessionPage(shown, shown[-1].session_id)
    return SessionPage(shown, shown[-1].session_id if shown else resume)


async def session_info(store: Store, session_id: str) -> SessionInfo | None:
    """The listing row of exactly ``session_id`` (``None`` when it has none)."""
    page = await find_sessions(store, prefix=session_id, limit=1)
    if page.sessions and page.sessions[0].session_id == session_id:
        return page.sessions[0]
    return None
