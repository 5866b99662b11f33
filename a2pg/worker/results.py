"""What a worker run did, per consumer: :func:`run_until_idle` for tests of your handlers.

``result = await run_until_idle(store, app)`` runs a ``Worker`` on any store
(``MemoryStore``, ``PostgresStore``) until nothing is left to claim, retries included,
and returns what the store acknowledged, consumer by consumer::

    result["reply"].completed        # the heads whose completion the store accepted
    result["reply"].appended         # the events those completions appended
    result["bill"].dead_lettered     # the heads a failure dead-lettered
    result["bill"].failures          # every failed attempt, with its error text

It watches the worker's calls to the store (claims, completions, failures) without
changing any: every call reaches the store as it would in production.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..backoff import Backoff
from ..contract.args import ClaimAnyArgs, ClaimArgs, CompletionItem, FailArgs
from ..front import CheckedStore, StoreProxy
from ..models import (
    AttemptRef,
    Claimed,
    ClaimResult,
    Completed,
    CompletedAndClaimed,
    CompleteResult,
    Consumer,
    FailResult,
    Head,
    StoredEvent,
)
from ..store import Store
from .app import App
from .attempt import WorkerStats
from .runtime import Worker

TEST_BACKOFF = Backoff(base=0.01, cap=0.05, jitter=0.0)
"""Retries within milliseconds, so a run reaches its dead letters quickly."""
DEFAULT_TIMEOUT = 30.0
STILL_BACKING_OFF = (
    "retries were due but the store had nothing to claim: does its clock stand still "
    "(a FakeClock)? Pass retries=False and move the clock yourself"
)

HeadKey = tuple[str, str, str | None, int]
"""A head: session, consumer, lane, index."""


@dataclass(frozen=True, slots=True)
class FailedAttempt:
    """One attempt whose handler raised (or timed out), as the store recorded it."""

    head: Head
    error: str
    dead_lettered: bool
    """This failure dead-lettered the head (the consumer's ``max_failures`` reached)."""


@dataclass(slots=True)
class ConsumerWork:
    """What one consumer's handler did in the run, in the order the store answered."""

    completed: list[Head] = field(default_factory=list)
    dead_lettered: list[Head] = field(default_factory=list)
    failures: list[FailedAttempt] = field(default_factory=list)
    """Every failed attempt, those that dead-lettered included."""
    appended: list[StoredEvent] = field(default_factory=list)
    """The events its completions appended (each one's ``cause`` names the head)."""

    @property
    def completed_events(self) -> list[StoredEvent]:
        """The events of the completed heads."""
        return [head.event for head in self.completed]


@dataclass(frozen=True, slots=True)
class WorkResult:
    """Per consumer of the app, what the run did; ``result["name"]`` is a
    :class:`ConsumerWork` (empty if the consumer had nothing to do)."""

    consumers: Mapping[str, ConsumerWork]
    stats: WorkerStats

    def __getitem__(self, consumer: str) -> ConsumerWork:
        try:
            return self.consumers[consumer]
        except KeyError:
            known = ", ".join(sorted(self.consumers)) or "none"
            raise KeyError(f"the app has no consumer {consumer!r} (it has: {known})") from None

    @property
    def appended(self) -> list[StoredEvent]:
        """Every event the run's completions appended, consumer by consumer."""
        return [event for work in self.consumers.values() for event in work.appended]


class _Recorder(StoreProxy):
    """The store behind its front, keeping the heads claimed and what became of them."""

    def __init__(self, store: CheckedStore, consumers: Sequence[str]) -> None:
        super().__init__(store)
        self.work = {name: ConsumerWork() for name in consumers}
        self._claimed: dict[tuple[str, str, str | None, int, int], Head] = {}
        self._retries: dict[HeadKey, float] = {}
        """Heads whose last failure will be retried, and when (the loop's clock)."""
        self.answers = 0
        """Completions and failures the store acknowledged so far."""

    def _claim(self, heads: Sequence[Head]) -> None:
        for head in heads:
            key = (head.session_id, head.consumer, head.lane, head.index, head.attempt)
            self._claimed[key] = head

    def _head(self, session_id: str, attempt: AttemptRef) -> Head:
        a = attempt
        return self._claimed[(session_id, a.consumer, a.lane, a.index, a.attempt)]

    def _completed(self, item: CompletionItem, result: CompleteResult) -> None:
        if not isinstance(result, Completed):
            return
        self.answers += 1
        c = item.args.completion
        work = self.work.setdefault(c.consumer, ConsumerWork())
        work.completed.append(self._head(c.session_id, item.args.cause))
        work.appended.extend(result.events)
        self._retries.pop((c.session_id, c.consumer, c.lane, c.index), None)

    async def _claim_any(self, args: ClaimAnyArgs) -> list[Head]:
        heads = await super()._claim_any(args)
        self._claim(heads)
        return heads

    async def _claim_available(self, args: ClaimArgs, wake: Sequence[Consumer]) -> ClaimResult:
        result = await super()._claim_available(args, wake)
        if isinstance(result, Claimed):
            self._claim(result.heads)
        return result

    async def _complete_attempts(self, items: list[CompletionItem]) -> list[CompleteResult]:
        results = await super()._complete_attempts(items)
        for item, result in zip(items, results, strict=True):
            self._completed(item, result)
        return results

    async def _complete_and_claim(
        self, items: list[CompletionItem], claim: ClaimAnyArgs
    ) -> CompletedAndClaimed:
        result = await super()._complete_and_claim(items, claim)
        for item, outcome in zip(items, result.completed, strict=True):
            self._completed(item, outcome)
        self._claim(result.heads)
        return result

    async def _fail_attempt(self, args: FailArgs) -> FailResult:
        result = await super()._fail_attempt(args)
        if result.outcome == "superseded":
            return result
        self.answers += 1
        a = args.attempt
        head = self._head(args.session_id, a)
        dead = result.outcome == "dead_lettered"
        work = self.work.setdefault(a.consumer, ConsumerWork())
        work.failures.append(FailedAttempt(head, args.error, dead))
        key = (args.session_id, a.consumer, a.lane, a.index)
        if dead:
            work.dead_lettered.append(head)
            self._retries.pop(key, None)
        else:
            loop = asyncio.get_running_loop()
            self._retries[key] = loop.time() + float(args.retry_after or 0.0)
        return result

    def next_retry(self) -> float | None:
        """When the last pending retry is due (the loop's clock), None if none is."""
        return max(self._retries.values(), default=None)


async def run_until_idle(
    store: Store,
    app: App,
    *,
    retries: bool = True,
    within: float = DEFAULT_TIMEOUT,
    **knobs: Any,
) -> WorkResult:
    """Runs a worker for ``app`` on ``store`` until nothing is left to claim and returns
    what each consumer did (:class:`WorkResult`).

    ``retries`` (default): failed heads are retried, after ``TEST_BACKOFF`` (milliseconds)
    unless a ``backoff`` knob is given, until they complete or dead-letter. With
    ``retries=False`` the worker keeps its usual backoff (a second and more) and the run
    ends without waiting for it: a failed head stays failed. A store whose clock stands
    still (a ``FakeClock``) never makes a retry due: pass ``retries=False`` and move the
    clock yourself. ``knobs`` are ``Worker``'s (``max_failures=2``, ``concurrency=1``...).
    Raises ``TimeoutError`` if the work is not done within ``within`` seconds.
    """
    if retries and "settings" not in knobs:
        knobs.setdefault("backoff", TEST_BACKOFF)
    if not isinstance(store, CheckedStore):
        raise TypeError(f"run_until_idle runs on an a2pg store, not {type(store).__name__}")
    recorder = _Recorder(store, [consumer.name for consumer in app.consumers])
    worker = Worker(recorder, app, **knobs)
    loop = asyncio.get_running_loop()
    stuck = False
    try:
        async with asyncio.timeout(within):
            await worker.run_until_idle()
            while retries and (due := recorder.next_retry()) is not None:
                await asyncio.sleep(max(due - loop.time(), 0.0))  # until the retries are due
                before = recorder.answers
                await worker.run_until_idle()
                if recorder.answers == before:
                    stuck = True
                    break
    except TimeoutError:
        raise TimeoutError(f"the worker still had work after {within} s") from None
    if stuck:
        raise TimeoutError(STILL_BACKING_OFF)
    return WorkResult(recorder.work, worker.stats)
