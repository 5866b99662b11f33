"""The confirmation step of the one-row destructive actions: skipping a dead letter and
pausing a consumer.

A row's Skip and Pause are links to these pages (GET: they change nothing), which show
what would change and hold the one button that does it: a CSRF-checked POST to the
action's own route (``/redrive``, ``/consumers/pause``), whose contract is unchanged. So
no click on a list page skips or pauses anything by itself, with or without script.
Retry and Resume undo nothing and stay one click. Bulk actions have their own
confirmation (``dead_letters.confirm_page``, ``selection.confirm_selected``).
"""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from ...models import Head
from ..params import bad_request, integer, local_path, text
from ..state import Dashboard, dashboard_of
from .actions import action_of


def writable(request: Request) -> Dashboard:
    """The dashboard of a page that leads to an action: 403 when read-only, as the action."""
    dash = dashboard_of(request)
    if dash.read_only:
        raise HTTPException(403, "this dashboard is read-only")
    return dash


async def confirm_redrive(request: Request) -> Response:
    """``GET /redrive/confirm`` with ``/redrive``'s fields (``session``, ``consumer``,
    ``cursor``, ``lane``, ``index``, ``action``, ``next``): the dead letter as it is now,
    and the button that redrives it. A head no longer dead-lettered is said so, with no
    button."""
    dash = writable(request)
    q = request.query_params
    session_id = text(q, "session", required=True)
    consumer = text(q, "consumer", required=True)
    index = integer(q, "index", minimum=1, required=True)
    assert session_id is not None and consumer is not None and index is not None
    on_lane = text(q, "cursor") == "lane"
    lane = text(q, "lane") if on_lane else None
    if on_lane and lane is None:
        raise bad_request("missing lane")
    action = action_of(q)
    back = local_path(text(q, "next"), "/dead-letters")
    head = _find(await dash.store.dead_letters(session_id), consumer, lane, index)
    fields = [("session", session_id), ("consumer", consumer), ("index", str(index))]
    fields += [("cursor", "lane"), ("lane", lane)] if lane is not None else [("cursor", "event")]
    fields.append(("action", action))
    skip = action == "skip"
    return dash.pages.render(
        request,
        "confirm_one.html",
        question=f"{'Skip' if skip else 'Retry'} this dead letter?",
        warning=(
            "Skipping finishes the head without running it: its work is not done, and "
            "its lane moves on to the next event."
            if skip
            else None
        ),
        head=head,
        verb="Skip it" if skip else "Retry it",
        danger=skip,
        post_to="/redrive",
        fields=fields if head is not None else None,
        back=back,
    )


def _find(heads: list[Head], consumer: str, lane: str | None, index: int) -> Head | None:
    for head in heads:
        if head.consumer == consumer and head.lane == lane and head.index == index:
            return head
    return None


async def confirm_pause(request: Request) -> Response:
    """``GET /consumers/pause/confirm?consumer=NAME&next=PATH``: the consumer's work and
    workers now, and the button that pauses it."""
    dash = writable(request)
    q = request.query_params
    consumer = text(q, "consumer", required=True)
    assert consumer is not None
    back = local_path(text(q, "next"), "/")
    stats = next((s for s in await dash.store.consumer_stats() if s.consumer == consumer), None)
    return dash.pages.render(
        request,
        "confirm_one.html",
        question=f"Pause {consumer}?",
        warning=(
            "While paused, no worker claims its heads: its work waits, and its lag grows, "
            "until it is resumed. Running attempts finish."
        ),
        stats=stats,
        verb="Pause it",
        danger=True,
        post_to="/consumers/pause",
        fields=[("consumer", consumer)],
        back=back,
    )
