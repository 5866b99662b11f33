"""Dead letters across sessions: filtered keyset pages, and the bulk confirmation step."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from ...models import DeadLetterKey, DeadLetterQuery, Head
from ...store import Store
from ..params import bad_request, text
from ..state import BULK_LIMIT, DEAD_LETTERS_PAGE, dashboard_of
from .actions import HeadKey, action_of


@dataclass(frozen=True, slots=True)
class Filters:
    consumer: str | None
    error: str | None
    session: str | None

    def to_query(self, *, after: DeadLetterKey | None, limit: int) -> DeadLetterQuery:
        return DeadLetterQuery(
            consumer=self.consumer,
            error=self.error,
            session_prefix=self.session,
            after=after,
            limit=limit,
        )

    def params(self) -> dict[str, str]:
        given = {"consumer": self.consumer, "error": self.error, "session": self.session}
        return {k: v for k, v in given.items() if v}

    def page(self) -> str:
        """The dead-letters page with these filters (a path inside the dashboard)."""
        query = self.params()
        return "/dead-letters" + ("?" + urlencode(query) if query else "")


def filters_of(values: Mapping[str, Any]) -> Filters:
    return Filters(text(values, "consumer"), text(values, "error"), text(values, "session"))


def key_of(head: Head) -> DeadLetterKey:
    return DeadLetterKey(head.session_id, head.consumer, head.lane or "", head.index)


def encode_key(key: DeadLetterKey) -> str:
    return json.dumps([key.session_id, key.consumer, key.lane, key.index])


def decode_key(value: str | None) -> DeadLetterKey | None:
    if value is None:
        return None
    try:
        session_id, consumer, lane, index = json.loads(value)
    except (ValueError, TypeError):
        raise bad_request("malformed page position") from None
    if not all(isinstance(v, str) for v in (session_id, consumer, lane)) or not isinstance(
        index, int
    ):
        raise bad_request("malformed page position")
    return DeadLetterKey(session_id, consumer, lane, index)


async def dead_letters_page(request: Request) -> Response:
    dash = dashboard_of(request)
    q = request.query_params
    filters = filters_of(q)
    after = decode_key(text(q, "after"))
    heads = await dash.store.find_dead_letters(
        filters.to_query(after=after, limit=DEAD_LETTERS_PAGE + 1)
    )
    more = len(heads) > DEAD_LETTERS_PAGE
    heads = heads[:DEAD_LETTERS_PAGE]
    return dash.pages.render(
        request,
        "dead_letters.html",
        heads=heads,
        filters=filters,
        next_after=encode_key(key_of(heads[-1])) if more and heads else None,
        first_page=after is None,
        key=lambda h: HeadKey(h.session_id, h.consumer, h.lane, h.index).encode(),
    )


async def matching(store: Store, filters: Filters, limit: int) -> tuple[list[Head], bool]:
    """The first ``limit`` dead letters matching ``filters``, and whether more match."""
    found: list[Head] = []
    after: DeadLetterKey | None = None
    while len(found) <= limit:
        page = await store.find_dead_letters(filters.to_query(after=after, limit=100))
        found.extend(page)
        if len(page) < 100:
            break
        after = key_of(page[-1])
    return found[:limit], len(found) > limit


async def confirm_page(request: Request) -> Response:
    """What a bulk action would redrive, listed, with the button that does it."""
    dash = dashboard_of(request)
    if dash.read_only:
        raise HTTPException(403, "this dashboard is read-only")
    q = request.query_params
    filters = filters_of(q)
    action = action_of(q)
    heads, more = await matching(dash.store, filters, BULK_LIMIT)
    return dash.pages.render(
        request,
        "confirm.html",
        heads=heads,
        more=more,
        action=action,
        filters=filters,
        back=filters.page(),
        gone=0,
        limit=BULK_LIMIT,
        key=lambda h: HeadKey(h.session_id, h.consumer, h.lane, h.index).encode(),
    )
