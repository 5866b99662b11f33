"""Lease renewal for a worker's in-flight attempts, and cancelling the ones found superseded."""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Sequence

from .models import ClaimRef
from .store import Store
from .worker_attempt import Attempt, AttemptRunner

log = logging.getLogger("a2pg.worker")

RENEW_PARALLELISM = 8
"""At most this many ``renew_claims`` calls (one per session) run at once."""


class LeaseRenewer:
    """Extends the leases of in-flight attempts with one ``renew_claims`` per session.

    What the store reports superseded (the head moved on, was cleared, or another
    attempt took over a lapsed lease) is handed to the runner, which cancels the
    handler or withdraws the queued completion.
    """

    def __init__(self, store: Store, runner: AttemptRunner, *, holder: str, ttl: float) -> None:
        self._store = store
        self._runner = runner
        self._holder = holder
        self._ttl = ttl

    async def renew(self, attempts: Sequence[Attempt], now: float) -> int:
        """Renews ``attempts`` (``now`` is the loop time of the pass); returns failed calls."""
        by_session: dict[str, list[Attempt]] = defaultdict(list)
        for attempt in attempts:
            by_session[attempt.head.session_id].append(attempt)
        gate = asyncio.Semaphore(RENEW_PARALLELISM)

        async def renew(session_id: str, attempts: list[Attempt]) -> None:
            async with gate:
                await self._renew_session(session_id, attempts, now)

        results = await asyncio.gather(
            *(renew(sid, attempts) for sid, attempts in by_session.items()),
            return_exceptions=True,
        )
        errors = 0
        for result in results:
            if isinstance(result, Exception):
                errors += 1
                log.warning("renewing leases failed: %r", result)
            elif isinstance(result, BaseException):
                raise result
        return errors

    async def _renew_session(self, session_id: str, attempts: list[Attempt], now: float) -> None:
        newest: dict[ClaimRef, Attempt] = {}
        for attempt in attempts:  # our own older attempt of a head we re-claimed is stale
            current = newest.get(attempt.head.ref)
            if current is None or attempt.head.attempt > current.head.attempt:
                if current is not None:
                    self._runner.supersede(current)
                newest[attempt.head.ref] = attempt
            else:
                self._runner.supersede(attempt)
        result = await self._store.renew_claims(
            session_id,
            holder=self._holder,
            claims=[a.head.attempt_ref for a in newest.values()],
            ttl=self._ttl,
        )
        renewed, superseded = set(result.renewed), set(result.superseded)
        for ref, attempt in newest.items():
            if ref in superseded:
                self._runner.supersede(attempt)
            elif ref in renewed:
                attempt.leased_at = now
            elif attempt.task is not None and not attempt.task.done():
                log.warning("lease of %s lapsed before it was renewed", attempt.describe())
