"""The App of the process tests: ``a2pg worker --sqlite FILE tests.sqlite.jobs:app``."""

from __future__ import annotations

import asyncio
import os

from a2pg.models import Head, NewEvent
from a2pg.worker.app import App

STALL_ENV = "A2PG_TEST_STALL"
"""Set to 1: every handler holds its attempt until the process dies (a worker to kill)."""

JOB = "job"
RESULT = "job.done"

app = App()


@app.consumer(JOB)
async def job(head: Head) -> list[NewEvent]:
    """Returns one result naming the attempt and the process that completed it."""
    if os.environ.get(STALL_ENV) == "1":
        await asyncio.Event().wait()  # never set: the attempt is in flight until SIGKILL
    payload = {"of": head.index, "attempt": head.attempt, "failures": head.failure_count}
    return [NewEvent(RESULT, {**payload, "pid": os.getpid()})]
