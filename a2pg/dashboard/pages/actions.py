"""The only writes: redrive one dead letter, or a confirmed list of them, and pause or resume a
consumer (POST + CSRF).

Refused with 403 in read-only mode and without a valid CSRF token, before anything
reaches the store. After an action the browser is sent back (303) to the page it
came from, with a notice saying what happened.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from ...models import RedriveAction
from ..params import bad_request, integer, local_path, text
from ..security import CSRF_FIELD
from ..state import BULK_LIMIT, Dashboard, dashboard_of
from . import audit

ACTIONS: tuple[RedriveAction, ...] = ("retry", "skip")


@dataclass(frozen=True, slots=True)
class HeadKey:
    """One dead-lettered head: its session, cursor (``lane`` None: the event cursor), index."""

    session_id: str
    consumer: str
    lane: str | None
    index: int

    def encode(self) -> str:
        return json.dumps([self.session_id, self.consumer, self.lane, self.index])

    @classmethod
    def decode(cls, value: object) -> HeadKey:
        try:
            session_id, consumer, lane, index = json.loads(str(value))
        except (ValueError, TypeError):
            raise bad_request("malformed dead-letter key") from None
        ok = (
            isinstance(session_id, str)
            and isinstance(consumer, str)
            and (lane is None or isinstance(lane, str))
            and isinstance(index, int)
            and not isinstance(index, bool)
        )
        if not ok:
            raise bad_request("malformed dead-letter key")
        return cls(session_id, consumer, lane, index)


async def checked_form(request: Request) -> tuple[Dashboard, FormData]:
    """The form of an allowed action: 403 when read-only or without a valid CSRF token."""
    dash = dashboard_of(request)
    if dash.read_only:
        raise HTTPException(403, "this dashboard is read-only")
    form = await request.form()
    if not dash.pages.csrf.valid(request, form.get(CSRF_FIELD)):
        raise HTTPException(403, "missing or invalid CSRF token: reload the page and try again")
    return dash, form


def action_of(values: Any) -> RedriveAction:
    action = text(values, "action", required=True)
    for known in ACTIONS:
        if action == known:
            return known
    raise bad_request("action must be retry or skip")


def back(request: Request, path: str, **notice: str | int) -> RedirectResponse:
    root = request.scope.get("root_path", "")
    from urllib.parse import urlencode

    joiner = "&" if "?" in path else "?"
    return RedirectResponse(root + path + joiner + urlencode(notice), status_code=303)


async def redrive_one(request: Request) -> Response:
    dash, form = await checked_form(request)
    session_id = text(form, "session", required=True)
    consumer = text(form, "consumer", required=True)
    index = integer(form, "index", minimum=1, required=True)
    assert session_id is not None and consumer is not None and index is not None
    lane = text(form, "lane") if text(form, "cursor") == "lane" else None
    if text(form, "cursor") == "lane" and lane is None:
        raise bad_request("missing lane")
    action = action_of(form)
    result = await dash.store.redrive(
        session_id, consumer=consumer, index=index, action=action, lane=lane
    )
    await audit.record_redrive(
        request,
        action,
        session_id=session_id,
        consumer=consumer,
        lane=lane,
        index=index,
        redriven=result.redriven,
    )
    next_path = local_path(text(form, "next"), "/dead-letters")
    notice = action if result.redriven else "missing"
    return back(request, next_path, notice=notice, count=1 if result.redriven else 0)


async def redrive_many(request: Request) -> Response:
    """Redrives exactly the heads the confirmation page listed (never re-runs the filter:
    what was confirmed is what is done)."""
    dash, form = await checked_form(request)
    action = action_of(form)
    keys = [HeadKey.decode(value) for value in form.getlist("key")]
    if not keys:
        raise bad_request("no dead letters were selected")
    if len(keys) > BULK_LIMIT:
        raise bad_request(f"at most {BULK_LIMIT} dead letters at once")
    done = 0
    for key in keys:
        result = await dash.store.redrive(
            key.session_id, consumer=key.consumer, index=key.index, action=action, lane=key.lane
        )
        done += result.redriven
    await audit.record_bulk(request, action, selected=len(keys), redriven=done)
    next_path = local_path(text(form, "next"), "/dead-letters")
    return back(request, next_path, notice=f"bulk-{action}", count=done)


async def pause_consumer(request: Request) -> Response:
    """Pauses one consumer (form field ``consumer``): every worker's next claim skips it."""
    dash, form = await checked_form(request)
    consumer = text(form, "consumer", required=True)
    assert consumer is not None
    await dash.store.pause_consumers([consumer])
    await audit.record(request, "pause", consumer=consumer)
    return back(request, local_path(text(form, "next"), "/"), notice="paused", count=1)


async def resume_consumer(request: Request) -> Response:
    """Resumes one consumer (form field ``consumer``): its ready heads are claimed again,
    and waiting workers are woken for them."""
    dash, form = await checked_form(request)
    consumer = text(form, "consumer", required=True)
    assert consumer is not None
    await dash.store.resume_consumers([consumer])
    await audit.record(request, "resume", consumer=consumer)
    return back(request, local_path(text(form, "next"), "/"), notice="resumed", count=1)
