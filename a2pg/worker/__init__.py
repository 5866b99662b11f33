"""The worker runtime: runs an ``App``'s handlers against any ``Store``, in many processes."""

from __future__ import annotations

from ..backoff import Backoff
from .app import App, Handler, HandlerResult
from .attempt import WorkerStats
from .hooks import Outcome, WorkerHooks
from .runtime import Worker, serve
from .settings import WorkerSettings

__all__ = [
    "App",
    "Backoff",
    "Handler",
    "HandlerResult",
    "Outcome",
    "Worker",
    "WorkerHooks",
    "WorkerSettings",
    "WorkerStats",
    "serve",
]
