"""An App of three consumers for ``a2pg worker --consumers`` run in two processes: each
handler returns an event saying which process ran it."""

from __future__ import annotations

import os

from a2pg.models import Head, LogSpec, NewEvent
from a2pg.worker.app import App

HANDLED = "handled"
ORDER = "order.placed"

app = App()


def _handled(head: Head) -> list[NewEvent]:
    return [NewEvent(HANDLED, {"consumer": head.consumer, "by": os.getpid()})]


@app.consumer("replies", priority=4)
async def replies(head: Head) -> list[NewEvent]:
    return _handled(head)


@app.consumer("backfill", concurrency=2)
async def backfill(head: Head) -> list[NewEvent]:
    return _handled(head)


@app.consumer("audit", log=LogSpec(types=(ORDER,)))
async def audit(head: Head) -> list[NewEvent]:
    return _handled(head)
