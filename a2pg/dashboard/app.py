"""``create_app(store, ...)``: the dashboard as a Starlette ASGI app on any ``Store``.

Every read goes through the Store protocol (the same operations, and so the same
named SQL, as the CLI), so the dashboard runs on ``MemoryStore`` as on PostgreSQL or
SQLite; an outage of the store's database is a 503 on each (``outages.py``).
``/healthz`` and ``/readyz`` answer probes ahead of authentication (``probes.py``).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from importlib import resources

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ..errors import A2Error
from ..store import Store
from .outages import UNAVAILABLE, Outages
from .pages.actions import pause_consumer, redrive_many, redrive_one, resume_consumer
from .pages.activity import activity_page
from .pages.audit import audit_page
from .pages.confirmations import confirm_pause, confirm_redrive
from .pages.dead_letters import confirm_page, dead_letters_page
from .pages.overview import overview_page
from .pages.selection import confirm_selected
from .pages.sessions import session_page, sessions_page
from .pages.tail import tail_stream
from .pages.work import cancel_many, confirm_cancel, head_page, work_page
from .probes import Probes, Readiness
from .render import Pages
from .security import Auth, Csrf, NoSniff, RequireAuth
from .state import Dashboard, dashboard_of
from .throughput import SAMPLE_SECONDS, sampling

log = logging.getLogger("a2pg.dashboard")

REFRESH_SECONDS = 5.0
MAX_BODY_BYTES = 1 << 20
"""The largest form accepted (a bulk confirmation of 500 keys is well below)."""


def create_app(
    store: Store,
    *,
    read_only: bool = False,
    auth: Auth | None = None,
    csrf_secret: bytes | None = None,
    refresh_seconds: float = REFRESH_SECONDS,
    sample_seconds: float = SAMPLE_SECONDS,
) -> Starlette:
    """The dashboard over ``store`` (which the caller opens and closes).

    ``read_only`` hides every action and refuses every POST; ``auth`` (default: none)
    is what each request must carry (``Auth.from_env()`` reads the environment);
    ``csrf_secret`` signs the forms' tokens (default: random, per process). Throughput
    is sampled from worker heartbeats every ``sample_seconds`` while the app runs
    (its lifespan).
    """
    dashboard = Dashboard(
        store=store,
        pages=Pages(Csrf(csrf_secret), read_only=read_only, refresh_seconds=refresh_seconds),
        read_only=read_only,
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with sampling(store, dashboard.throughput, sample_seconds):
            yield

    static = resources.files("a2pg.dashboard") / "static"
    routes = [
        Route("/", overview_page, name="overview"),
        Route("/sessions", sessions_page, name="sessions"),
        Route("/session", session_page, name="session"),
        Route("/session/stream", tail_stream, name="tail"),
        Route("/dead-letters", dead_letters_page, name="dead_letters"),
        Route("/work", work_page, name="work"),
        Route("/work/confirm", confirm_cancel, methods=["POST"], name="confirm_cancel"),
        Route("/work/cancel", cancel_many, methods=["POST"], name="cancel_many"),
        Route("/sessions/{rest:path}", head_page, name="head"),
        Route("/audit", audit_page, name="audit"),
        Route("/activity", activity_page, name="activity"),
        Route("/dead-letters/confirm", confirm_page, name="confirm"),
        Route("/dead-letters/confirm", confirm_selected, methods=["POST"], name="confirm_selected"),
        Route("/redrive/confirm", confirm_redrive, name="confirm_redrive"),
        Route("/consumers/pause/confirm", confirm_pause, name="confirm_pause"),
        Route("/redrive", redrive_one, methods=["POST"], name="redrive"),
        Route("/redrive/many", redrive_many, methods=["POST"], name="redrive_many"),
        Route("/consumers/pause", pause_consumer, methods=["POST"], name="pause_consumer"),
        Route("/consumers/resume", resume_consumer, methods=["POST"], name="resume_consumer"),
        Mount("/static", StaticFiles(directory=str(static)), name="static"),
    ]
    app = Starlette(
        routes=routes,
        middleware=[
            Middleware(NoSniff),
            Middleware(Probes, readiness=Readiness(store, stopping=lambda: dashboard.closing)),
            Middleware(RequireAuth, auth=auth or Auth()),
            Middleware(Outages, page=_database_down),
        ],
        exception_handlers={HTTPException: _http_error, A2Error: _store_error},
        lifespan=lifespan,
        max_body_size=MAX_BODY_BYTES,
    )
    app.state.dashboard = dashboard
    app.state.auth = auth or Auth()  # the audit log's actors (pages/audit.py: actor_of)
    return app


def close_tails(app: Starlette) -> None:
    """Ends the live tails of a dashboard app, so a server stopping need not wait on them."""
    dashboard: Dashboard = app.state.dashboard
    dashboard.close_tails()


def _error_page(request: Request, status: int, title: str, detail: str) -> Response:
    return dashboard_of(request).pages.render(
        request, "error.html", status_code=status, title=title, detail=detail
    )


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    titles = {400: "Bad request", 403: "Forbidden", 404: "Not found", 405: "Not allowed"}
    title = titles.get(exc.status_code, "Error")
    return _error_page(request, exc.status_code, title, str(exc.detail))


async def _store_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, A2Error)
    if exc.code == UNAVAILABLE:
        return await _database_down(request, exc)
    status = 400 if exc.code == "INVALID_ARGUMENT" else 409
    return _error_page(request, status, exc.code, exc.message)


async def _database_down(request: Request, exc: Exception) -> Response:
    log.warning("dashboard: database unavailable (%s)", type(exc).__name__)
    return _error_page(
        request, 503, "Database unavailable", "the store cannot reach its database; retry soon"
    )
