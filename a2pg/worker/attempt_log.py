"""At DEBUG, one log line per claim and per attempt's end, with its fields as ``extra``.

Every worker has these hooks. The fields (``session``, ``consumer``, ``lane``, ``index``,
``attempt``, and ``duration`` at the end) ride on the record, so a JSON formatter prints
them as keys; the message says the same for a text log.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..models import Head
from .hooks import Outcome, WorkerHooks

if TYPE_CHECKING:
    from .attempt import Attempt

log = logging.getLogger("a2pg.worker.attempts")

VERBS: dict[Outcome, str] = {
    "completed": "completed",
    "failed": "failed (to be retried)",
    "dead_lettered": "failed and dead-lettered",
    "superseded": "superseded",
    "released": "released",
    "abandoned": "abandoned",
}


def fields(head: Head) -> dict[str, Any]:
    """A head's identity as log record attributes."""
    return {
        "session": head.session_id,
        "consumer": head.consumer,
        "lane": head.lane,
        "index": head.index,
        "attempt": head.attempt,
    }


class AttemptLog(WorkerHooks):
    """Logs ``claimed ...`` when an attempt starts and ``completed ... in 0.012s`` (or
    failed, dead-lettered, superseded, released, abandoned) when it ends, at DEBUG."""

    @contextlib.contextmanager
    def attempt(self, attempt: Attempt) -> Iterator[None]:
        if not log.isEnabledFor(logging.DEBUG):
            yield
            return
        head = attempt.head
        log.debug("claimed %s", attempt.describe(), extra=fields(head))
        try:
            yield
        finally:
            outcome: Outcome = attempt.outcome or "abandoned"
            duration = attempt.elapsed()
            log.debug(
                "%s %s in %.3fs",
                VERBS[outcome],
                attempt.describe(),
                duration,
                extra={**fields(head), "outcome": outcome, "duration": round(duration, 6)},
            )

    def watches_attempts(self) -> bool:
        return log.isEnabledFor(logging.DEBUG)

    def dead_lettered_on_claim(self, head: Head) -> None:
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "dead-lettered %s:%s@%d on claim (leases lapsed)",
                head.session_id,
                head.consumer,
                head.index,
                extra={**fields(head), "outcome": "dead_lettered"},
            )
