"""The worker runtime: runs an ``App``'s handlers against any ``Store``, in many processes."""

from __future__ import annotations

from ..backoff import Backoff
from .app import App, Handler, HandlerResult
from .attempt import AttemptTimeout, WorkerStats
from .hooks import Outcome, WorkerHooks
from .runtime import HandlersStillRunning, Worker, serve
from .settings import WorkerSettings

__all__ = [
    "App",
    "AttemptTimeout",
    "Backoff",
    "Handler",
    "HandlerResult",
    "HandlersStillRunning",
    "Outcome",
    "Worker",
    "WorkerHooks",
    "WorkerSettings",
    "WorkerStats",
    "serve",
]
