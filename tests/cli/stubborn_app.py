"""``a2pg worker tests.cli.stubborn_app:app``: a sync handler that ignores shutdown.

Its first attempt of a head sleeps ``A2PG_TEST_SLEEP`` seconds in its thread (SIGTERM
never reaches a thread); later attempts return at once. Each start and end is a line
of ``A2PG_TEST_MARKS``: time, pid, attempt, failure count, what.
"""

from __future__ import annotations

import os
import time

from a2pg.models import Head, NewEvent
from a2pg.worker.app import App

MARKS_ENV = "A2PG_TEST_MARKS"
SLEEP_ENV = "A2PG_TEST_SLEEP"
CONSUMER = "stubborn"
RESULT = "stubborn.done"

app = App()


def mark(head: Head, what: str) -> None:
    with open(os.environ[MARKS_ENV], "a", encoding="utf-8") as marks:
        marks.write(f"{time.time()} {os.getpid()} {head.attempt} {head.failure_count} {what}\n")


@app.consumer(CONSUMER)
def stubborn(head: Head) -> list[NewEvent]:
    mark(head, "start")
    if head.attempt == 1:
        time.sleep(float(os.environ.get(SLEEP_ENV, "60")))
    mark(head, "end")
    return [NewEvent(RESULT, {"attempt": head.attempt, "pid": os.getpid()})]
