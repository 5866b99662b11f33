"""The App the probe tests run in real worker processes.

Payload ``{"block": SECONDS}`` blocks the worker's event loop that long (a handler that
calls blocking code on the loop: the heartbeat stops, the HTTP server's thread goes on);
anything else completes at once.
"""

from __future__ import annotations

import time

from a2pg.models import Head
from a2pg.worker.app import App

app = App()


@app.consumer("echo")
async def echo(head: Head) -> None:
    payload = head.event.payload
    if isinstance(payload, dict) and isinstance(payload.get("block"), int | float):
        time.sleep(float(payload["block"]))  # noqa: ASYNC251 - blocking the loop on purpose
