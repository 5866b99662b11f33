"""Server-rendered pages: one Jinja2 environment (autoescape on) and the filters it uses.

Everything a store returns is data, never markup: templates print it through
autoescaping, and the live tail's script sets ``textContent`` only, so an event whose
payload holds ``<script>`` shows as text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from jinja2 import Environment, PackageLoader
from starlette.requests import Request
from starlette.responses import HTMLResponse

from ..models import Cursor, Dispatch, StoredEvent
from .security import Csrf

COLLAPSE_CHARS = 400
COLLAPSE_LINES = 12
"""A pretty-printed payload longer than either is collapsed behind its first line."""
PREVIEW_CHARS = 120


@dataclass(frozen=True, slots=True)
class Payload:
    """A payload as a page shows it: pretty JSON, and a one-line preview when collapsed."""

    text: str
    preview: str
    collapsed: bool


def payload_view(value: Any) -> Payload:
    text = json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str)
    compact = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    collapsed = len(text) > COLLAPSE_CHARS or text.count("\n") >= COLLAPSE_LINES
    preview = compact if len(compact) <= PREVIEW_CHARS else compact[: PREVIEW_CHARS - 1] + "…"
    return Payload(text, preview, collapsed)


def when(value: datetime | None) -> str:
    """An instant in UTC, to the millisecond."""
    if value is None:
        return ""
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def duration(seconds: float | None) -> str:
    """A short human duration: ``850 ms``, ``12.5 s``, ``4 min``, ``3.2 h``, ``2.0 d``."""
    if seconds is None:
        return ""
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def cursor_state(cursor: Cursor, now: datetime) -> str:
    """One word saying what a cursor is doing (as ``a2pg cursors`` says it)."""
    if cursor.head is None:
        return "idle"
    if cursor.blocked:
        return "BLOCKED"
    if cursor.dead_lettered:
        return "dead-letter"
    return dispatch_state(cursor.dispatch, now)


def dispatch_state(d: Dispatch, now: datetime) -> str:
    if d.failed_at is not None:
        return "dead-letter"
    if d.claim_expires_at is not None and d.claim_expires_at > now:
        return "held" if d.claim_holder is not None else "backoff"
    return "ready"


def lane_label(lane: str | None) -> str:
    return "(event)" if lane is None else lane


def event_cause(event: StoredEvent) -> str:
    c = event.cause
    if c is None:
        return ""
    lane = f"/{c.lane}" if c.lane is not None else ""
    return f"{c.consumer}{lane}@{c.index}#{c.attempt}"


def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("a2pg.dashboard", "templates"),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["when"] = when
    env.filters["duration"] = duration
    env.filters["lane"] = lane_label
    env.filters["payload"] = payload_view
    env.filters["cause"] = event_cause
    env.globals["cursor_state"] = cursor_state
    env.globals["dispatch_state"] = dispatch_state
    return env


class Pages:
    """Renders templates with what every page needs: links under the mount point, the
    CSRF token (and its cookie), whether actions are shown."""

    def __init__(self, csrf: Csrf, *, read_only: bool, refresh_seconds: float) -> None:
        self.env = _environment()
        self.csrf = csrf
        self.read_only = read_only
        self.refresh_seconds = refresh_seconds

    def render(
        self, request: Request, template: str, status_code: int = 200, **context: Any
    ) -> HTMLResponse:
        root = str(request.scope.get("root_path", ""))
        token, new_cookie = self.csrf.token_for(request)

        def link(path: str, **params: Any) -> str:
            """A path inside the dashboard, with the query parameters that have a value."""
            query = {k: v for k, v in params.items() if v is not None and v != ""}
            return path + ("?" + urlencode(query) if query else "")

        def url(path: str, **params: Any) -> str:
            """``link`` under the mount point (``--root-path``): what hrefs take."""
            return root + link(path, **params)

        html = self.env.get_template(template).render(
            request=request,
            url=url,
            link=link,
            csrf_token=token,
            read_only=self.read_only,
            refresh_seconds=self.refresh_seconds,
            here=here(request, root),
            **context,
        )
        response = HTMLResponse(html, status_code=status_code)
        response.headers["Content-Security-Policy"] = CSP
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "same-origin"
        response.headers["X-Frame-Options"] = "DENY"
        response.headers["Cache-Control"] = "no-store"
        if new_cookie is not None:
            Csrf.set_cookie(
                response, new_cookie, path=root or "/", secure=request.url.scheme == "https"
            )
        return response


NOTICE_PARAMS = ("notice", "count")


def here(request: Request, root: str) -> str:
    """This page's path and query inside the dashboard, without a previous action's notice:
    where an action's form sends the browser back to."""
    query = [(k, v) for k, v in request.query_params.multi_items() if k not in NOTICE_PARAMS]
    path = request.url.path.removeprefix(root) or "/"
    return path + ("?" + urlencode(query) if query else "")


CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
"""Only the dashboard's own files run or load: an injected inline script could not run
even if escaping ever failed."""
