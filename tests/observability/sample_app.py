"""The App the observability tests run in real worker processes: some work fails on purpose.

Payload ``{"kind": "flaky"}`` fails its first attempt, ``{"kind": "poison"}`` every one,
``{"kind": "slow"}`` runs until the worker stops; anything else completes, returning an
``echoed`` event that says which attempt did it.
"""

from __future__ import annotations

import asyncio

from a2pg.models import Head, NewEvent
from a2pg.worker.app import App

app = App()


@app.consumer("echo")
async def echo(head: Head) -> list[NewEvent]:
    kind = head.event.payload.get("kind") if isinstance(head.event.payload, dict) else None
    if kind == "poison" or (kind == "flaky" and head.attempt == 1):
        raise RuntimeError(f"{kind} on attempt {head.attempt}")
    if kind == "slow":
        await asyncio.sleep(3600)  # a shutdown cuts it short
    return [NewEvent("echoed", {"of": head.index, "attempt": head.attempt})]
