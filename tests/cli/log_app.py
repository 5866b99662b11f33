"""An App with a targeted and a log consumer, for ``a2pg workers`` and ``a2pg consumers``."""

from __future__ import annotations

from a2pg.models import Head, LogSpec
from a2pg.worker.app import App

app = App()


@app.consumer("echo")
async def echo(head: Head) -> None:
    return None


@app.consumer("journal", log=LogSpec(lane="journal", types=("order.placed",)))
async def journal(head: Head) -> None:
    return None
