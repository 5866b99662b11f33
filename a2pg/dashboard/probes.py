"""``/healthz`` and ``/readyz``: what an orchestrator (Kubernetes, compose) asks.

Liveness (``/healthz``) is 200 while the process serves requests: restarting the
dashboard cures no database outage, so it never looks at the store. Readiness
(``/readyz``) is 200 when the store answered a cheap read (``registered_consumers``)
in the last ``FRESH_SECONDS``, or answers one now within ``DEADLINE_SECONDS``; else 503
with a short reason, so a load balancer sends browsers elsewhere while the database is
away.

Both are answered ahead of authentication (a probe carries no credentials) and say
nothing of the store's data: a fixed word or reason, no cookie, ``Cache-Control:
no-store``. At most one store read runs for readiness at a time, and a success is kept
``FRESH_SECONDS``, so however often they are asked the database sees about one call per
``FRESH_SECONDS``: an unauthenticated route cannot be made to load it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from ..store import Store
from .outages import is_outage

log = logging.getLogger("a2pg.dashboard")

HEALTH_PATH = "/healthz"
READY_PATH = "/readyz"
FRESH_SECONDS = 5.0
"""How long a store answer counts as proof of readiness."""
DEADLINE_SECONDS = 0.8
"""How long ``/readyz`` waits for the store to answer: under Kubernetes' default probe
timeout (1 s), so a slow store gets a 503 with its reason, not a timed-out probe."""


class Readiness:
    """Whether the store answers, asked at most once at a time and then kept a while."""

    def __init__(
        self,
        store: Store,
        *,
        fresh: float = FRESH_SECONDS,
        deadline: float = DEADLINE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        stopping: Callable[[], bool] = lambda: False,
    ) -> None:
        self.store = store
        self.fresh = fresh
        self.deadline = deadline
        self.clock = clock
        self.answered_at: float | None = None
        """When the store last answered (``clock``), None before it has."""
        self.stopping = stopping
        """True once the server stops: not ready then, whatever the store says."""
        self._check: asyncio.Task[str | None] | None = None

    async def reason(self) -> str | None:
        """None when ready; else why not, in a few words."""
        if self.stopping():
            return "shutting down"
        now = self.clock()
        if self.answered_at is not None and now - self.answered_at < self.fresh:
            return None
        if self._check is None or self._check.done():
            self._check = asyncio.create_task(self._ask(), name="a2pg-dashboard-readiness")
        # Shielded: a probe that gives up (or whose client goes) leaves the one read
        # running for the next probe, rather than cancelling into the store.
        done, _ = await asyncio.wait({self._check}, timeout=self.deadline)
        if not done:
            return f"the store did not answer within {self.deadline:g}s"
        return self._check.result()

    async def _ask(self) -> str | None:
        try:
            await self.store.registered_consumers()
        except Exception as exc:
            if is_outage(exc):
                return "database unavailable"
            log.exception("dashboard: readiness check failed")
            return "store check failed"
        self.answered_at = self.clock()
        return None


class Probes:
    """ASGI middleware answering ``GET``/``HEAD`` ``/healthz`` and ``/readyz`` (under the
    root path) itself, ahead of authentication; every other request passes on."""

    def __init__(self, app: ASGIApp, readiness: Readiness) -> None:
        self.app = app
        self.readiness = readiness

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = _route_path(scope) if scope["type"] == "http" else None
        if path not in (HEALTH_PATH, READY_PATH):
            await self.app(scope, receive, send)
            return
        method = scope["method"]
        if method not in ("GET", "HEAD"):
            status, body, extra = 405, "GET or HEAD only\n", {"Allow": "GET, HEAD"}
        elif path == HEALTH_PATH:
            status, body, extra = 200, "ok\n", {}
        else:
            reason = await self.readiness.reason()
            status = 200 if reason is None else 503
            body = "ready\n" if reason is None else f"not ready: {reason}\n"
            extra = {}
        response = PlainTextResponse(
            "" if method == "HEAD" else body,
            status_code=status,
            headers={"Cache-Control": "no-store", **extra},
        )
        await response(scope, receive, send)


def _route_path(scope: Scope) -> str:
    """The request's path inside the dashboard: a server given a root path may pass it in
    ``path`` too (uvicorn does), a mount strips it."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if root and (path == root or path.startswith(root + "/")):
        return path[len(root) :] or "/"
    return path
