"""Leases of a worker's in-flight attempts: renew them, cancel superseded ones, hand them back."""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable, Sequence

from ..models import ClaimRef
from ..store import Store
from .attempt import Attempt, AttemptRunner
from .attempt_log import fields
from .health import StoreHealth
from .hooks import WorkerHooks
from .settings import WorkerSettings

log = logging.getLogger("a2pg.worker")

RENEW_PARALLELISM = 8
"""At most this many ``renew_claims`` or ``release_claims`` calls (one per session) at once."""

PerSession = Callable[[str, list[Attempt]], Awaitable[None]]


class LeaseRenewer:
    """Keeps a worker's in-flight attempts leased: each pass (every ``renew_interval`` seconds)
    renews the leases that are due with one ``renew_claims`` per session; at shutdown it
    hands claims back with one ``release_claims`` per session.

    What the store reports superseded (the head moved on, was cleared, or another
    attempt took over a lapsed lease) is handed to the runner, which cancels the
    handler or withdraws the queued completion.
    """

    def __init__(
        self,
        store: Store,
        runner: AttemptRunner,
        settings: WorkerSettings,
        health: StoreHealth | None = None,
        hooks: WorkerHooks | None = None,
    ) -> None:
        self._store = store
        self._health = health or StoreHealth(settings.poll_interval)
        self._hooks = hooks or WorkerHooks()
        self._runner = runner
        self._holder = settings.holder
        self._ttl = settings.ttl
        self._interval = settings.renew_interval

    async def renew_due(self, attempts: Iterable[Attempt], *, force: bool = False) -> int:
        """Renews the leases among ``attempts`` that are due (all if forced): those claimed or
        renewed half an interval ago or more; fresher ones wait for the next pass. Returns
        how many calls failed."""
        now = asyncio.get_running_loop().time()
        due = [a for a in attempts if force or now - a.leased_at >= self._interval / 2]
        if not due:
            return 0

        async def renew(session_id: str, attempts: list[Attempt]) -> None:
            await self._renew_session(session_id, attempts, now)

        return await _per_session(due, renew, "renewing leases")

    async def release(self, attempts: Sequence[Attempt], *, within: float) -> int:
        """Hands the claims of ``attempts`` (cut short or given up by a shutdown) back:
        claimable at once by any worker, with no failure counted. Returns failed calls;
        claims not released ``within`` seconds are left to lapse (a failure each, then)."""
        if not attempts:
            return 0
        try:
            async with asyncio.timeout(within):
                return await _per_session(attempts, self._release_session, "releasing claims")
        except TimeoutError:
            log.error("releasing %d claims timed out; their leases will lapse", len(attempts))
            return 1

    async def _renew_session(self, session_id: str, attempts: list[Attempt], now: float) -> None:
        newest, older = _newest(attempts)
        for attempt in older:  # our own older attempt of a head we re-claimed is stale
            self._runner.supersede(attempt)
        async with self._health.call("renew_claims"):
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
                self._hooks.lease_renewed(attempt)
            elif attempt.task is not None and not attempt.task.done():
                self._hooks.lease_lapsed(attempt)
                log.warning(
                    "lease of %s lapsed before it was renewed",
                    attempt.describe(),
                    extra=fields(attempt.head, "lease lapsed"),
                )

    async def _release_session(self, session_id: str, attempts: list[Attempt]) -> None:
        stats = self._runner.stats
        newest, older = _newest(attempts)
        stats.superseded += len(older)
        async with self._health.call("release_claims"):
            result = await self._store.release_claims(
                session_id,
                holder=self._holder,
                claims=[a.head.attempt_ref for a in newest.values()],
            )
        released, superseded = set(result.released), set(result.superseded)
        for ref, attempt in newest.items():
            if ref in released:
                stats.released += 1
                log.info("%s released for another worker", attempt.describe())
            elif ref in superseded:
                stats.superseded += 1
            else:
                log.info("%s was no longer ours to release", attempt.describe())


def _newest(attempts: Sequence[Attempt]) -> tuple[dict[ClaimRef, Attempt], list[Attempt]]:
    """The newest attempt of each head, and the older ones (stale: we re-claimed the head)."""
    newest: dict[ClaimRef, Attempt] = {}
    older: list[Attempt] = []
    for attempt in attempts:
        current = newest.get(attempt.head.ref)
        if current is None or attempt.head.attempt > current.head.attempt:
            if current is not None:
                older.append(current)
            newest[attempt.head.ref] = attempt
        else:
            older.append(attempt)
    return newest, older


async def _per_session(attempts: Sequence[Attempt], call: PerSession, what: str) -> int:
    """Runs ``call`` once per session of ``attempts``, a few at a time; returns how many
    calls failed (a failure is logged, and the next pass or the lease's lapse copes)."""
    by_session: dict[str, list[Attempt]] = defaultdict(list)
    for attempt in attempts:
        by_session[attempt.head.session_id].append(attempt)
    gate = asyncio.Semaphore(RENEW_PARALLELISM)

    async def run(session_id: str, attempts: list[Attempt]) -> None:
        async with gate:
            await call(session_id, attempts)

    results = await asyncio.gather(
        *(run(sid, attempts) for sid, attempts in by_session.items()),
        return_exceptions=True,
    )
    failures = [r for r in results if isinstance(r, Exception)]
    for result in results:
        if isinstance(result, BaseException) and not isinstance(result, Exception):
            raise result
    if failures:  # one line per pass, however many sessions: an outage fails them all
        log.warning(
            "%s failed for %d of %d sessions (%r); next pass tries again",
            what,
            len(failures),
            len(results),
            failures[0],
        )
    return len(failures)
