"""Shared tools of the dashboard tests: dead letters made through the store, forms read
back from pages."""

from __future__ import annotations

import re
from collections.abc import Sequence

from a2pg import Claimed, NewEvent, Target
from a2pg.store import Store

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
