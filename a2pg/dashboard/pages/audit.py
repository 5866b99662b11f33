"""The audit log: who did what from here (and from the command line), and the page listing it.

Every action handler records one entry once the store has run its action (a redrive
that found the head no longer dead-lettered included, with ``outcome`` saying so); a
refused request (read-only, no CSRF token, a bad form) or a failed store call records
nothing. The actor is the identity the dashboard authenticated: the basic-auth login,
``token`` for the bearer token, ``anonymous`` only when authentication is off.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response

from ...models import JSON, AuditAction, AuditEntry, RedriveAction
from ..params import text
from ..security import Auth
from ..state import dashboard_of

AUDIT_PAGE = 50
"""Entries one page lists."""

ACTOR_CHARS = 128
"""At most this much of a login is kept as the actor: within every store's default name
limit, so recording never refuses an action that already ran."""

ANONYMOUS = "anonymous"
TOKEN = "token"
"""The actor of a request that passed with ``A2PG_DASHBOARD_TOKEN`` (a token has no name)."""


def actor_of(request: Request) -> str:
    """Who sent ``request``, as the dashboard authenticated it (``RequireAuth`` let it in):
    the login of the basic credentials it carries, ``token`` for the bearer token, and
    ``anonymous`` when the dashboard asks for no credentials (then a header proves nothing)."""
    auth: Auth = getattr(request.app.state, "auth", None) or Auth()
    if not auth.required:
        return ANONYMOUS
    header = request.headers.get("authorization")
    scheme = (header or "").strip().partition(" ")[0].lower()
    if scheme == "basic" and auth.basic is not None and auth.allows(header):
        login = auth.basic[0][:ACTOR_CHARS]
        return login.encode("utf-8", "backslashreplace").decode()
    if scheme == "bearer" and auth.token is not None and auth.allows(header):
        return TOKEN
    return ANONYMOUS  # unreachable behind RequireAuth


async def record(
    request: Request,
    action: AuditAction,
    *,
    session_id: str | None = None,
    consumer: str | None = None,
    lane: str | None = None,
    index: int | None = None,
    **detail: JSON,
) -> None:
    """Records that this request's user ran ``action`` (call it once the store has)."""
    entry = AuditEntry(actor_of(request), action, session_id, consumer, lane, index, detail)
    await dashboard_of(request).store.record_audit(entry)


def redrive_action(action: RedriveAction) -> AuditAction:
    return "redrive.retry" if action == "retry" else "redrive.skip"


async def record_redrive(
    request: Request,
    action: RedriveAction,
    *,
    session_id: str,
    consumer: str,
    lane: str | None,
    index: int,
    redriven: bool,
) -> None:
    """One head: ``outcome`` ``redriven``, or ``not_found`` (no longer dead-lettered)."""
    await record(
        request,
        redrive_action(action),
        session_id=session_id,
        consumer=consumer,
        lane=lane,
        index=index,
        outcome="redriven" if redriven else "not_found",
        cursor="event" if lane is None else "lane",
    )


async def record_bulk(
    request: Request, action: RedriveAction, *, selected: int, redriven: int
) -> None:
    """A confirmed selection: one entry, its counts (``gone``: no longer dead-lettered)."""
    await record(
        request,
        redrive_action(action),
        selected=selected,
        redriven=redriven,
        gone=selected - redriven,
        outcome="redriven" if redriven else "nothing",
    )


# -- the page --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AuditRow:
    entry: AuditEntry
    detail: str
    """The detail as compact JSON."""


async def audit_page(request: Request) -> Response:
    """The newest entries first, a keyset page at a time (``after``: the last id shown)."""
    dash = dashboard_of(request)
    after = text(request.query_params, "after")
    entries = await dash.store.audit_log(after=after, limit=AUDIT_PAGE)
    rows = [
        AuditRow(e, json.dumps(e.detail, ensure_ascii=False, separators=(",", ":")))
        for e in entries
    ]
    next_after = entries[-1].id if len(entries) == AUDIT_PAGE else None
    return dash.pages.render(request, "audit.html", rows=rows, after=after, next_after=next_after)
