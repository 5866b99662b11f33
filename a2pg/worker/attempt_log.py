"""The fields of every log line about one head or attempt, and the DEBUG line per claim and
per attempt's end.

``fields`` is the one place those fields come from: each worker line about a head or an
attempt (a claim, a failure, a retry, a timeout, a dead letter, a lost completion) passes
them as ``extra``, so they ride on the record and ``JsonFormatter`` prints them as keys
(``session_id``, ``consumer``, ``lane``, ``index``, ``attempt``, ``error``); the message
says the same for a text log. Every worker has the DEBUG hooks (``AttemptLog``).
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

LEASES_LAPSED = "leases lapsed"
"""The ``error`` of a head a claim dead-lettered: its leases lapsed ``max_failures`` times."""

VERBS: dict[Outcome, str] = {
    "completed": "completed",
    "failed": "failed (to be retried)",
    "dead_lettered": "failed and dead-lettered",
    "superseded": "superseded",
    "released": "released",
    "abandoned": "abandoned",
}


def fields(head: Head, error: BaseException | str | None = None) -> dict[str, Any]:
    """A head's identity, and what went wrong on this line, as log record attributes.

    ``error`` is one line (an exception's type and message; its traceback goes in the
    record's ``exc_info``), None when nothing failed: every line has the same keys, so a
    log query can filter on any of them. ``session`` repeats ``session_id`` for the log
    queries written before ``session_id`` was a key.
    """
    return {
        "session_id": head.session_id,
        "consumer": head.consumer,
        "lane": head.lane,
        "index": head.index,
        "attempt": head.attempt,
        "error": error_text(error),
        "session": head.session_id,
    }


def error_text(error: BaseException | str | None) -> str | None:
    """``RuntimeError: model crashed`` for an exception (its type alone when it says
    nothing), a text as it is."""
    if error is None or isinstance(error, str):
        return error
    said = str(error)
    return f"{type(error).__name__}: {said}" if said else type(error).__name__


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
                extra={
                    **fields(head, attempt.error),
                    "outcome": outcome,
                    "duration": round(duration, 6),
                },
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
                extra={**fields(head, LEASES_LAPSED), "outcome": "dead_lettered"},
            )
