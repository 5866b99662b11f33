"""The App the browser tests run with ``a2pg worker tests.dashboard.worker_app:app``.

``dash-reply`` answers turns on a lane; a turn marked ``poison`` fails its first
attempt (with ``--max-failures 1``: a dead letter that blocks the lane) and succeeds
when retried, so a redrive visibly moves the lane on. ``dash-score`` scores turns
concurrently (event cursors).
"""

from __future__ import annotations

from a2pg.models import Head, NewEvent
from a2pg.worker.app import App

REPLY = "dash-reply"
SCORE = "dash-score"
LANE = "turns"

app = App()


class Poisoned(RuntimeError):
    """The first attempt of a poison turn."""


@app.consumer(REPLY)
async def reply(head: Head) -> list[NewEvent]:
    payload = head.event.payload
    if payload.get("poison") and head.attempt == 1:
        raise Poisoned(f"poisoned turn {payload['turn']}: the model crashed")
    return [NewEvent("reply", {"turn": payload["turn"]}, id=f"reply-{head.index}")]


@app.consumer(SCORE)
async def score(head: Head) -> list[NewEvent]:
    return [NewEvent("score", {"turn": head.event.payload["turn"]}, id=f"score-{head.index}")]
