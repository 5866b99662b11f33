"""Batches a worker's completions into ``complete_attempts`` calls (by count or after a few ms)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass

from ..models import CompleteResult, Completion
from ..store import Store
from .health import StoreHealth, refused

log = logging.getLogger("a2pg.worker")

SEND_RETRY_BASE = 0.05
"""Seconds before the first re-send; doubles each time up to the health's report interval.
A batch is re-sent until the store answers (or the worker's shutdown gives up on it):
completions are idempotent replays, and a dropped one would be a failure counted later."""


@dataclass(eq=False, slots=True)
class PendingCompletion:
    """One completion waiting for its batch; ``future`` gets the store's verdict on it."""

    completion: Completion
    future: asyncio.Future[CompleteResult]
    sent: bool = False
    given_back: bool = False
    """Its ``complete_and_claim`` failed: the batcher sends it, never the claim loop again."""


@dataclass(slots=True)
class BatchStats:
    batches: int = 0
    completions: int = 0
    largest: int = 0
    resends: int = 0
    split_batches: int = 0


class CompletionBatcher:
    """Collects completions and sends them in batches from one background task.

    A batch leaves when ``size`` completions wait, when ``flush_now`` is called (the
    worker calls it when no handler is running, so nothing more could join), or
    ``interval`` seconds after its first completion arrived. While one batch is in
    the store, the next one fills up, so batches grow with load on their own.

    ``complete_attempts`` rejects a whole batch when one completion in it is bad
    (``INVALID_ARGUMENT``, ``PARTIAL_DUPLICATE_BATCH``...); the batcher then sends
    each completion alone, so only the culprit's future gets the error. Any other
    failure (a lost connection, a lost reply to a commit) re-sends the batch, with
    backoff, until the store answers: a replay of what committed, the rest completed.
    """

    def __init__(
        self,
        store: Store,
        *,
        size: int,
        interval: float,
        on_batch: Callable[[int], None] | None = None,
        health: StoreHealth | None = None,
        claimer_will_take: Callable[[], bool] | None = None,
    ) -> None:
        self._store = store
        self._health = health or StoreHealth(1.0)
        self._size = size
        self._interval = interval
        self._on_batch = on_batch
        self._claimer_will_take = claimer_will_take
        self._queue: list[PendingCompletion] = []
        self._has_work = asyncio.Event()
        self._go = asyncio.Event()
        self._closing = False
        self._task: asyncio.Task[None] | None = None
        self.stats = BatchStats()

    @property
    def queued(self) -> int:
        return len(self._queue)

    def start(self) -> None:
        if self._task is None:
            self._closing = False
            self._task = asyncio.create_task(self._run(), name="a2pg-worker-flusher")

    def enqueue(self, completion: Completion) -> PendingCompletion:
        entry = PendingCompletion(completion, asyncio.get_running_loop().create_future())
        self._queue.append(entry)
        self._has_work.set()
        if len(self._queue) >= self._size:
            self._go.set()
        return entry

    def withdraw(self, entry: PendingCompletion) -> bool:
        """Takes back a completion not yet sent (its attempt was superseded)."""
        if entry.sent:
            return False
        try:
            self._queue.remove(entry)
        except ValueError:
            return False
        return True

    def take(self, limit: int) -> list[PendingCompletion]:
        """Hands up to ``limit`` queued completions to the claim loop, which sends them with
        its next claim (``complete_and_claim``: one round trip and one commit for both).
        It answers them with ``deliver``, or hands them back with ``give_back``."""
        if self._closing or not self._queue or self._queue[0].given_back:
            return []
        batch, self._queue = self._queue[:limit], self._queue[limit:]
        if len(self._queue) < self._size:
            self._go.clear()
        for entry in batch:
            entry.sent = True
        return batch

    def deliver(self, batch: list[PendingCompletion], outcomes: list[CompleteResult]) -> None:
        """The store's answers to completions ``take`` handed out."""
        if len(outcomes) != len(batch):
            raise RuntimeError(f"{len(outcomes)} outcomes for {len(batch)} completions")
        self._record(len(batch))
        for entry, outcome in zip(batch, outcomes, strict=True):
            if not entry.future.done():
                entry.future.set_result(outcome)

    def give_back(self, batch: list[PendingCompletion]) -> None:
        """Completions ``take`` handed out whose call failed: sent again the batcher's own
        way (alone if one is refused, re-sent until answered), first in line."""
        for entry in batch:
            entry.sent = False
            entry.given_back = True
        self._queue[:0] = batch
        self._has_work.set()
        self._go.set()

    def flush_now(self) -> None:
        """Sends what waits without waiting for the interval."""
        if self._queue:
            self._go.set()

    async def close(self) -> None:
        """Sends everything still queued, then stops the background task."""
        self._closing = True
        self._has_work.set()
        self._go.set()
        task, self._task = self._task, None
        if task is not None:
            await task

    def abort(self) -> None:
        """Stops at once: queued completions are not sent (their leases lapse)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
        for entry in self._queue:
            entry.future.cancel()
        self._queue.clear()

    async def _run(self) -> None:
        while True:
            if not self._queue:
                if self._closing:
                    return
                self._has_work.clear()
                await self._has_work.wait()
                continue
            if len(self._queue) < self._size and not self._closing and not self._go.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._go.wait(), self._interval)
            if not self._queue:  # the claim loop took them meanwhile
                continue
            if self._left_to_claimer():
                await asyncio.sleep(self._interval)
                continue
            batch, self._queue = self._queue[: self._size], self._queue[self._size :]
            if len(self._queue) < self._size:
                self._go.clear()
            for entry in batch:
                entry.sent = True
            try:
                await self._send(batch)
            except Exception as error:  # a store answering nonsense must not kill the flusher
                log.exception("completing a batch failed unexpectedly")
                for entry in batch:
                    _settle(entry, error=error)

    def _left_to_claimer(self) -> bool:
        """The worker's claim loop is about to claim and will take the queue with it (see
        ``take``); checked again every ``interval`` until it has, or no longer will."""
        return (
            not self._closing
            and self._claimer_will_take is not None
            and not self._queue[0].given_back
            and self._claimer_will_take()
        )

    async def _send(self, batch: list[PendingCompletion]) -> None:
        delay = SEND_RETRY_BASE
        while True:
            try:
                async with self._health.call("complete_attempts"):
                    outcomes = await self._store.complete_attempts([e.completion for e in batch])
            except Exception as error:
                if refused(error):  # the store's answer, not an outage (STORE_UNAVAILABLE)
                    if len(batch) == 1:
                        _settle(batch[0], error=error)
                        return
                    self.stats.split_batches += 1
                    log.info(
                        "batch of %d completions refused (%s); sending each alone",
                        len(batch),
                        error,
                    )
                    for entry in batch:
                        await self._send([entry])
                    return
                self.stats.resends += 1
                log.info("sending %d completions failed (%r); re-sending", len(batch), error)
                await asyncio.sleep(delay)
                delay = min(delay * 2, self._health.every)
                continue
            self.deliver(batch, outcomes)
            return

    def _record(self, size: int) -> None:
        self.stats.batches += 1
        self.stats.completions += size
        self.stats.largest = max(self.stats.largest, size)
        if self._on_batch is not None:
            self._on_batch(size)


def _settle(entry: PendingCompletion, *, error: BaseException) -> None:
    if not entry.future.done():
        entry.future.set_exception(error)
