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

from ..models import StoredEvent
from .security import Csrf

COLLAPSE_CHARS = 400
COLLAPSE_LINES = 12
"""A pretty-printed payload longer than either is collapsed behind its first line."""
PREVIEW_CHARS = 120
PAYLOAD_SHOWN_BYTES = 16 * 1024
"""UTF-8 bytes of a payload's pretty JSON a page or the live tail shows at most; the rest
is cut, with a marker giving the payload's whole size (``a2pg tail`` prints it whole).
A session page of 50 events so holds at most 50 x 16 KiB of payload text."""

_PRETTY = json.JSONEncoder(indent=2, ensure_ascii=False, sort_keys=False, default=str)


@dataclass(frozen=True, slots=True)
class Payload:
    """A payload as a page shows it: pretty JSON (cut to ``PAYLOAD_SHOWN_BYTES``), and a
    one-line preview when collapsed."""

    text: str
    preview: str
    collapsed: bool


def payload_view(value: Any) -> Payload:
    compact = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    text, cut = _pretty(value, PAYLOAD_SHOWN_BYTES)
    if cut:
        size = len(compact.encode("utf-8"))  # as the store measures a payload
        text += f"\n… (truncated: {size} bytes in all)"
    collapsed = cut or len(text) > COLLAPSE_CHARS or text.count("\n") >= COLLAPSE_LINES
    preview = compact if len(compact) <= PREVIEW_CHARS else compact[: PREVIEW_CHARS - 1] + "…"
    return Payload(text, preview, collapsed)


def _pretty(value: Any, limit: int) -> tuple[str, bool]:
    """``value`` as indented JSON, at most ``limit`` UTF-8 bytes of it, and whether it was
    cut. Encodes lazily and stops once past the limit: a 1 MiB payload (several MiB
    indented) costs its first ``limit`` bytes, not the whole."""
    parts: list[str] = []
    chars = 0
    cut = False
    for chunk in _PRETTY.iterencode(value):
        parts.append(chunk)
        chars += len(chunk)
        if chars > limit:
            cut = True
            break
    text = "".join(parts)
    if not cut and chars * 4 <= limit:  # too short to be over, whatever its characters
        return text, False
    encoded = text.encode("utf-8")
    if len(encoded) <= limit and not cut:
        return text, False
    # Cut at a character boundary at most ``limit`` bytes in.
    return encoded[:limit].decode("utf-8", errors="ignore"), True


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
        response.headers["X-Content-Type-Options"] = "nosniff"  # as NoSniff adds anyway
        response.headers["Referrer-Policy"] = "same-origin"
        response.headers["X-Frame-Options"] = "DENY"
        response.headers["Cache-Control"] = "no-store"
        if new_cookie is not None:
            Csrf.set_cookie(response, request, new_cookie, root=root)
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
