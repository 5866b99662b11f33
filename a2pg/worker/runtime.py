"""The worker runtime: claims an App's heads and runs its handlers, via the Store protocol."""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
import os
import signal
import socket
from collections.abc import Sequence
from datetime import UTC, datetime
from types import TracebackType
from typing import Any

from ..backoff import Backoff
from ..contract.limits import DEFAULT_LIMITS, Limits
from ..models import Consumer, Head, WorkerBeat
from ..store import Store
from ..wakeups import Subscription
from .app import App, Registration
from .attempt import Attempt, AttemptRunner, HeadKey, WorkerStats
from .attempt_log import AttemptLog, fields
from .backfill import run_backfill
from .batch import CompletionBatcher
from .beat import Heartbeat, package_version
from .claim_news import news_for
from .health import StoreHealth
from .hooks import WorkerHooks, combine
from .lease import LeaseRenewer
from .settings import WorkerSettings
from .shares import Shares

log = logging.getLogger("a2pg.worker")

NEXT_DUE_MARGIN = 0.001
"""Seconds an idle worker waits past a head's due time, so its claim finds it due."""


class HandlersStillRunning(RuntimeError):
    """A worker stopped while sync handlers still ran in its threads, past the grace.

    A thread cannot be stopped, so their claims were not handed back (another worker
    would run those heads beside them): each lease lapses ``ttl`` seconds after its last
    renewal, and the next claim of the head counts a failure, as after a crash. Everything
    else was drained or released, and the worker stopped. End the process now (``a2pg
    worker`` exits 6), or let the threads finish before their leases lapse. ``heads`` are
    their heads, ``attempts`` their descriptions (``session:consumer/lane@index#attempt``).
    """

    def __init__(self, attempts: Sequence[Attempt], ttl: float) -> None:
        self.heads: tuple[Head, ...] = tuple(a.head for a in attempts)
        self.attempts: tuple[str, ...] = tuple(a.describe() for a in attempts)
        self.ttl = ttl
        super().__init__(
            f"{len(self.attempts)} sync handlers still run in their threads after the "
            f"shutdown ({', '.join(self.attempts)}): their claims were kept, not released, "
            f"and lapse {ttl:g}s after their last renewal"
        )


class Worker:
    """Runs an ``App``'s handlers against any ``Store``: claim, run, renew, complete or fail.

    Per process: at most ``concurrency`` handlers running (finished attempts waiting
    for their batch do not count, up to another ``concurrency`` of them), claimed at
    most ``claim_batch`` at a time with ``claim_any``; leases renewed every
    ``renew_interval`` (ttl/3) seconds; completions sent in batches of up to
    ``flush_size`` or after ``flush_interval`` seconds; failures retried after
    ``backoff`` until ``max_failures`` dead-letters the head. Returned events without
    an id get one derived from the attempt and position (``returned_event_id``), so a
    re-sent completion replays instead of appending twice.

    When ``claim_any`` finds nothing the worker sleeps until ``store.wakeups()`` says
    work may have appeared, ``poll_interval`` passes (covers missed notifications and
    other holders' lapsed leases), or one of its own backoffs ends, whichever first.

    While the store cannot be reached the worker keeps its attempts: completions and
    failures are re-sent until the store answers (replays, never a second append),
    failed renewals are tried again next pass (a lease that outlives the outage costs
    nothing), and ``health`` logs a WARNING at least every ``poll_interval`` saying for
    how long and what waits, then one when the database answers again.

    Entry points: ``await run()`` (until ``stop()``), ``run_with_signals()`` (SIGTERM /
    SIGINT stop gracefully; a second signal forces), ``async with worker:`` (runs in
    the background for the block), ``run_until_idle()`` (tests, demos). Each raises
    ``HandlersStillRunning`` once stopped if sync handlers still ran in their threads
    past the grace: their claims are kept (never released while a handler runs), and
    the caller decides whether to end the process (``a2pg worker`` does, exit code 6).

    A handler runs at most ``attempt_timeout`` seconds (or its consumer's ``timeout``):
    see ``App``. One head never runs two handlers at once in a worker: a head claimed
    again while an earlier attempt of it still runs here (its lease lapsed) waits for it.

    The knobs are ``settings`` (a ``WorkerSettings``), or its fields given as keywords
    (``Worker(store, app, concurrency=20)``), not both; each reads as an attribute too.

    ``consumers`` (names) makes the worker serve only those of the app's consumers: it
    claims only their heads, registers only those of them that are log consumers, and its
    heartbeat names only them; another worker (process) serves the rest. Anything but a
    non-empty sequence of distinct names the app declares is ``INVALID_ARGUMENT``, raised
    here, before anything is written.

    Isolation: when a served consumer sets ``concurrency`` or ``priority`` (``App``),
    each cycle's free slots are shared by weight instead of going to the oldest ready
    heads of all: no more than its ``concurrency`` handlers of a consumer run at once,
    and among consumers with ready work each gets slots in proportion to its
    ``priority`` (unset: 1), with one claim per group of consumers; what one leaves goes
    to the others in the same cycle. It is starvation-free, not a strict priority:
    ``a2pg.worker.shares`` gives the exact rule. Without either, a cycle is one claim.

    ``hooks`` (a ``WorkerHooks`` or several) observe the worker: metrics and tracing from
    ``a2pg.observability`` (``WorkerMetrics``, ``WorkerTracing``). Every worker also logs
    each claim and each attempt's end at DEBUG (logger ``a2pg.worker.attempts``).
    """

    def __init__(
        self,
        store: Store,
        app: App,
        settings: WorkerSettings | None = None,
        *,
        hooks: WorkerHooks | Sequence[WorkerHooks] | None = None,
        consumers: Sequence[str] | None = None,
        **knobs: Any,
    ) -> None:
        if len(app) == 0:
            raise ValueError("the app declares no consumers: nothing to work on")
        served = app.served(consumers)  # INVALID_ARGUMENT before anything else
        if settings is not None and knobs:
            raise TypeError("give Worker either settings or keyword settings, not both")
        self.settings = settings if settings is not None else WorkerSettings(**knobs)
        self.settings.refuse_past(_limits_of(store))
        self.store = store
        self.app = app
        self.stats = WorkerStats()
        self.hooks = combine(AttemptLog(), hooks, guarded=True)
        self.health = StoreHealth(self.settings.poll_interval, hooks=self.hooks)
        self._consumers: list[Consumer] = served
        self._shares = Shares.of([_registered(app, c.name) for c in served])
        """How cycles share slots among consumers; None: one claim of them all."""
        self._inflight: dict[tuple[object, ...], Attempt] = {}
        self._handling: dict[HeadKey, Attempt] = {}
        """Attempts whose handler runs or is yet to, by head; kept across runs, so a head
        whose thread a shutdown left running is not run beside it by the next run."""
        self._left_running: list[Attempt] = []
        """What the last shutdown left running in threads (``HandlersStillRunning``)."""
        self._wake = asyncio.Event()
        self._slot = asyncio.Event()
        self._force = asyncio.Event()
        self._stop = asyncio.Event()
        self._idle_changed = asyncio.Event()
        self._claims_started = 0
        self._idle_seq = 0
        self._news = news_for(store, self._consumers)
        self._notified_at: float | None = None
        """When the first notification since this worker's last claim arrived."""
        self._woken_otherwise = False
        """Whether something but a notification woke the claim loop since its last claim."""
        self._retry_times: list[float] = []
        self._started = False
        self._claiming = False
        self._services: dict[str, asyncio.Task[None]] = {}
        self._run_task: asyncio.Task[None] | None = None
        self._runner: AttemptRunner | None = None
        self._renewer: LeaseRenewer | None = None
        self._batcher: CompletionBatcher | None = None
        self._claims_paused = False
        """The claim loop waits for a wakeup or a retry, not for a slot: it will not take
        the queued completions along soon (``_will_take_completions``)."""
        self._wakeups: Subscription | None = None
        self._heartbeat: Heartbeat | None = None
        self._started_at = datetime.now(UTC)

    # ------------------------------------------------------- knobs, from settings

    @property
    def concurrency(self) -> int:
        return self.settings.concurrency

    @property
    def claim_batch(self) -> int:
        return self.settings.claim_batch

    @property
    def ttl(self) -> float:
        return self.settings.ttl

    @property
    def max_failures(self) -> int:
        return self.settings.max_failures

    @property
    def backoff(self) -> Backoff:
        return self.settings.backoff

    @property
    def flush_interval(self) -> float:
        return self.settings.flush_interval

    @property
    def flush_size(self) -> int:
        return self.settings.flush_size

    @property
    def poll_interval(self) -> float:
        return self.settings.poll_interval

    @property
    def holder(self) -> str:
        return self.settings.holder

    @property
    def shutdown_grace(self) -> float:
        return self.settings.shutdown_grace

    @property
    def renew_interval(self) -> float:
        return self.settings.renew_interval

    @property
    def cleanup_timeout(self) -> float:
        return self.settings.cleanup_timeout

    @property
    def heartbeat_interval(self) -> float:
        return self.settings.heartbeat_interval

    @property
    def attempt_timeout(self) -> float | None:
        return self.settings.attempt_timeout

    # ----------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        """Registers the log consumers, subscribes to wakeups (so none sent from now on is
        missed by the first claim) and starts the flusher, renewer and wakeup listener."""
        if self._started:
            return
        self._bind_events()
        log_consumers = [c for c in self._consumers if c.log is not None]
        if log_consumers:
            async with self.health.call("register_consumers"):
                await self.store.register_consumers(log_consumers)
        wakeups = self._wakeups = self.store.wakeups()
        batcher = CompletionBatcher(
            self.store,
            size=self.flush_size,
            interval=self.flush_interval,
            on_batch=self._count_flush,
            health=self.health,
            claimer_will_take=self._will_take_completions,
        )
        batcher.start()
        self._batcher = batcher
        self._runner = AttemptRunner(
            self.store,
            self.app,
            batcher,
            holder=self.holder,
            max_failures=self.max_failures,
            backoff=self.backoff,
            concurrency=self.concurrency,
            stats=self.stats,
            on_retry=self._note_retry,
            on_handler_done=self._handler_done,
            health=self.health,
            hooks=self.hooks,
            default_timeout=self.settings.attempt_timeout,
            handling=self._handling,
        )
        self._renewer = LeaseRenewer(
            self.store, self._runner, self.settings, self.health, hooks=self.hooks
        )
        self._started_at = datetime.now(UTC)
        self._heartbeat = Heartbeat(
            self.store,
            self.describe,
            interval=self.heartbeat_interval,
            health=self.health,
            stats=self.stats,
            hooks=self.hooks,
        )
        await self._heartbeat.start()
        self._services = {
            "renewer": asyncio.create_task(self._renew_loop(), name="a2pg-worker-renewer"),
            "listener": asyncio.create_task(self._listen(wakeups), name="a2pg-worker-wakeups"),
            "health": asyncio.create_task(self.health.watch(), name="a2pg-worker-health"),
        }
        for consumer in log_consumers:  # each backfill runs beside the claims (backfill.py)
            if consumer.log is not None and consumer.log.backfill:
                self._services[f"backfill:{consumer.name}"] = asyncio.create_task(
                    run_backfill(
                        self.store,
                        consumer.name,
                        health=self.health,
                        retry_after=self.poll_interval,
                    ),
                    name=f"a2pg-worker-backfill-{consumer.name}",
                )
        self._started = True
        self.hooks.started(self.holder, [c.name for c in self._consumers])

    def _bind_events(self) -> None:
        """Fresh events for this run's loop (a worker may be run again under another loop)."""
        stop, force = self._stop.is_set(), self._force.is_set()
        self._wake, self._slot, self._idle_changed = (
            asyncio.Event(),
            asyncio.Event(),
            asyncio.Event(),
        )
        self._stop, self._force = asyncio.Event(), asyncio.Event()
        if stop:
            self._stop.set()
        if force:
            self._force.set()

    def stop(self, *, force: bool = False) -> None:
        """Stops claiming; in-flight attempts get ``shutdown_grace`` seconds (none if forced),
        then async handlers are cancelled and their claims released: another worker takes
        them, no failure counted. A sync handler still in its thread keeps its claim (the
        run then raises ``HandlersStillRunning``)."""
        self._stop.set()
        self._wake.set()
        self._slot.set()
        if force:
            self._force.set()

    @property
    def consumers(self) -> list[Consumer]:
        """The consumers this worker serves (``consumers``, else all the app's)."""
        return list(self._consumers)

    @property
    def shares(self) -> Shares | None:
        """How its cycles share slots (``priority``, ``concurrency``); None: they do not."""
        return self._shares

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    @property
    def in_flight(self) -> int:
        """Attempts claimed and not yet settled (running, or waiting for their batch)."""
        return len(self._inflight)

    def describe(self) -> WorkerBeat:
        """What this worker's heartbeat tells the store about it now."""
        return WorkerBeat(
            holder=self.holder,
            host=socket.gethostname() or "unknown",
            pid=os.getpid(),
            consumers=tuple(consumer.name for consumer in self._consumers),
            concurrency=self.concurrency,
            started_at=self._started_at,
            in_flight=self.in_flight,
            version=package_version(),
            interval=self.heartbeat_interval,
            completed=self.stats.completed,
            failed=self.stats.failed + self.stats.dead_lettered,
        )

    @property
    def queued_completions(self) -> int:
        """Finished attempts whose completion waits for the next batch."""
        return 0 if self._runner is None else self._runner.batcher.queued

    async def run(self) -> None:
        """Claims and runs work until ``stop()``; then drains and stops cleanly. Raises
        ``HandlersStillRunning`` when it stopped with sync handlers still running."""
        if self._claiming:
            raise RuntimeError("this worker is already running")
        await self.start()
        log.info(
            "worker %s serving %s (concurrency %d)",
            self.holder,
            ", ".join(c.name for c in self._consumers),
            self.concurrency,
        )
        try:
            await self._claim_loop(until_idle=False)
        except asyncio.CancelledError:
            self._force.set()
            raise
        finally:
            await self._shutdown()
        self._raise_if_left_running()

    async def run_with_signals(self) -> None:
        """``run()``, stopping gracefully on SIGTERM or SIGINT; a second signal forces."""
        loop = asyncio.get_running_loop()
        installed: list[signal.Signals] = []

        def on_signal(signum: signal.Signals) -> None:
            forced = self.stopping
            log.warning("%s: %s", signum.name, "stopping now" if forced else "draining")
            self.stop(force=forced)

        for signum in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(signum, on_signal, signum)
            except (NotImplementedError, RuntimeError, ValueError):  # not the main thread
                continue
            installed.append(signum)
        try:
            await self.run()
        finally:
            for signum in installed:
                loop.remove_signal_handler(signum)

    async def run_until_idle(self) -> None:
        """Works until ``claim_any`` finds nothing and nothing is in flight.

        Heads backing off after a failure are not waited for: move the clock and call
        again. Inside ``async with worker:`` this waits for the background run to idle.
        """
        if self._run_task is not None or self._claiming:
            await self.wait_idle()
            return
        await self.start()
        try:
            await self._claim_loop(until_idle=True)
        except asyncio.CancelledError:
            self._force.set()  # cancelled (a timeout?): release, do not wait out the grace
            raise
        finally:
            await self._shutdown()
        self._raise_if_left_running()

    def _raise_if_left_running(self) -> None:
        left, self._left_running = self._left_running, []
        if left:
            raise HandlersStillRunning(left, self.ttl)

    async def wait_idle(self) -> None:
        """Waits until a claim begun after this call found nothing, with nothing in flight."""
        want = self._claims_started + 1
        self._wake_claims()
        while self._idle_seq < want:
            self._idle_changed.clear()
            waiters: list[asyncio.Future[Any]] = [asyncio.ensure_future(self._idle_changed.wait())]
            if self._run_task is not None:
                waiters.append(self._run_task)
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
            waiters[0].cancel()
            if self._run_task is not None and self._run_task.done():
                self._run_task.result()
                raise RuntimeError("the worker stopped before it was idle")

    async def __aenter__(self) -> Worker:
        await self.start()
        self._run_task = asyncio.create_task(self.run(), name="a2pg-worker")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop(force=exc is not None)  # a failing block should not wait out the grace
        task, self._run_task = self._run_task, None
        if task is not None:
            try:
                await task
            except HandlersStillRunning:
                if exc is None:
                    raise  # else the block's own error goes on; the log named the threads

    # ------------------------------------------------------------------ claiming

    async def _claim_loop(self, *, until_idle: bool) -> None:
        self._claiming = True
        try:
            while not self._stop.is_set():
                free = self._free()
                if free <= 0:
                    self._slot.clear()
                    await _wait_any(self._slot)
                    continue
                self._wake.clear()
                self._slot.clear()
                self._notified_at, self._woken_otherwise = None, False
                limit = min(self.claim_batch, free)
                self._claims_started += 1
                seq = self._claims_started
                began = asyncio.get_running_loop().time()
                shared, room_bound = self._shares is not None, False
                heads = None if shared else await self._complete_and_claim(limit)
                try:
                    if shared:  # one call per group of consumers (see Shares)
                        claimed, room_bound = await self._claim_shared(limit, began)
                    elif heads is None:
                        async with self.health.call("claim_any"):
                            heads = await self.store.claim_any(
                                holder=self.holder,
                                ttl=self.ttl,
                                consumers=self._consumers,
                                limit=limit,
                                max_failures=self.max_failures,
                            )
                except Exception:
                    if until_idle:
                        raise
                    self.stats.store_errors += 1  # the health logs it, once per poll interval
                    log.debug("claim_any failed", exc_info=True)
                    self._claims_paused = True
                    try:
                        await _wait_any(self._stop, within=self.poll_interval)
                    finally:
                        self._claims_paused = False
                    continue
                if heads is not None:
                    self.hooks.claimed(len(heads), limit)
                    self._news.claimed(began, len(heads), limit)
                    self._begin(heads)
                    claimed = len(heads)
                if claimed >= limit:
                    continue
                if room_bound:  # a consumer at its concurrency may have more: a slot says
                    await _wait_any(self._slot, self._wake, within=self._idle_timeout())
                    continue
                # A wake during the claim (an attempt finished, a notification) may
                # be work the claim's snapshot predates: not idle, claim again.
                if not self._inflight and not self._wake.is_set():
                    self._idle_seq = seq
                    self._idle_changed.set()
                    if until_idle:
                        return
                if until_idle:
                    await _wait_any(self._slot, self._wake)
                else:
                    self._claims_paused = True  # no claim before a wakeup: the batcher sends
                    try:
                        await self._wait_for_work()
                    finally:
                        self._claims_paused = False
                    if not self._wake.is_set():
                        self.hooks.poll()
        finally:
            self._claiming = False

    async def _next_due_in(self) -> float:
        """Seconds until a held-back head of its consumers may be claimable (a delayed
        target's due time, a backoff's, a lease's end: ``Store.next_due_in``), so an idle
        worker claims delayed work when it is due; the poll interval when none is, or the
        store cannot say."""
        try:
            async with self.health.call("next_due_in"):
                due = await self.store.next_due_in(consumers=self._consumers)
        except Exception:
            log.debug("next_due_in failed", exc_info=True)
            return self.poll_interval
        return self.poll_interval if due is None else max(0.0, due) + NEXT_DUE_MARGIN

    async def _wait_for_work(self) -> None:
        """Waits for a wakeup, or the poll interval or a backoff to end. A wakeup that was
        only notifications, all taken by a claim another worker of this process began
        after them (``claim_news``), is let go: waiting goes on."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + min(self._idle_timeout(), await self._next_due_in())
        while True:
            await _wait_any(self._wake, within=max(0.0, deadline - loop.time()))
            notified = self._notified_at
            if (
                not self._wake.is_set()
                or self._woken_otherwise
                or self._stop.is_set()
                or notified is None
                or not self._news.taken_since(notified)
            ):
                return
            self._wake.clear()
            self._notified_at = None

    def _wake_claims(self) -> None:
        """Wakes the claim loop for something other than a notification: it claims."""
        self._woken_otherwise = True
        self._wake.set()

    async def _claim_shared(self, limit: int, began: float) -> tuple[int, bool]:
        """One cycle of shared claims (``Shares``): ``limit`` slots dealt among the groups,
        one call per group dealt any, each carrying the completions then waiting; the
        heads claimed and whether a consumer at its ``concurrency`` held the cycle back."""
        shares, runner = self._shares, self._runner
        assert shares is not None and runner is not None

        async def claim(consumers: tuple[Consumer, ...], count: int) -> int:
            heads = await self._complete_and_claim(count, consumers)
            if heads is None:
                async with self.health.call("claim_any"):
                    heads = await self.store.claim_any(
                        holder=self.holder,
                        ttl=self.ttl,
                        consumers=consumers,
                        limit=count,
                        max_failures=self.max_failures,
                    )
            self.hooks.claimed(len(heads), count)
            self._begin(heads)
            return len(heads)

        cycle = await shares.cycle(limit, runner.running_of, claim)
        # Short only when nothing any served consumer could take was left (claim_news).
        drained = cycle.claimed < limit and not cycle.room_bound
        self._news.claimed(began, cycle.claimed, limit if drained else cycle.claimed)
        return cycle.claimed, cycle.room_bound

    async def _complete_and_claim(
        self, limit: int, consumers: Sequence[Consumer] | None = None
    ) -> list[Head] | None:
        """Sends the finished attempts waiting for their batch with this claim, in one call;
        None when none wait, or when that call failed (they go back to the batcher, which
        sends them its own way, and the claim goes alone). It claims heads of ``consumers``
        (default: every one served)."""
        batcher = self._batcher
        taken = [] if batcher is None else batcher.take(self.flush_size)
        if batcher is None or not taken:
            return None
        try:
            async with self.health.call("complete_and_claim"):
                result = await self.store.complete_and_claim(
                    [entry.completion for entry in taken],
                    holder=self.holder,
                    ttl=self.ttl,
                    consumers=self._consumers if consumers is None else consumers,
                    limit=limit,
                    max_failures=self.max_failures,
                )
            batcher.deliver(taken, result.completed)
        except Exception as error:
            batcher.give_back(taken)
            log.debug("complete_and_claim failed (%r); completing and claiming apart", error)
            return None
        return result.heads

    def _will_take_completions(self) -> bool:
        """Whether the claim loop will soon claim, taking the queued completions along: it
        runs, has a free slot, and waits for one (a finished handler sets it), not for a
        wakeup alone. The batcher then leaves the completions to it."""
        return self._claiming and not self._claims_paused and self._free() > 0

    def _free(self) -> int:
        """How many more heads to claim now.

        ``concurrency`` bounds running handlers. Finished attempts waiting for their
        batch do not hold a slot, so the next claim overlaps the previous completion's
        round trip; they are capped at another ``concurrency`` for back-pressure.
        """
        running = 0 if self._runner is None else self._runner.running
        return min(self.concurrency - running, 2 * self.concurrency - len(self._inflight))

    def _begin(self, heads: list[Head]) -> None:
        assert self._runner is not None
        inflight = self._inflight
        for attempt in self._runner.begin(heads, on_done=self._finish):
            inflight[attempt.key] = attempt

    def _handler_done(self) -> None:
        self._slot.set()

    def _finish(self, attempt: Attempt) -> None:
        self._inflight.pop(attempt.key, None)
        self._slot.set()
        if not self._inflight:
            self._wake_claims()  # confirm idleness (or find what our completions created)

    def _note_retry(self, retry_after: float) -> None:
        heapq.heappush(self._retry_times, asyncio.get_running_loop().time() + retry_after)

    def _idle_timeout(self) -> float:
        now = asyncio.get_running_loop().time()
        while self._retry_times and self._retry_times[0] <= now:
            heapq.heappop(self._retry_times)
        if not self._retry_times:
            return self.poll_interval
        return min(self.poll_interval, self._retry_times[0] - now + 0.001)

    def _count_flush(self, size: int) -> None:
        self.stats.flushes += 1
        self.hooks.completions_sent(size)

    # ------------------------------------------------------- leases and wakeups

    async def _renew_loop(self) -> None:
        while True:
            await asyncio.sleep(self.renew_interval)
            await self.renew_leases()

    async def renew_leases(self, *, force: bool = False) -> None:
        """One renewal pass: extends the leases that are due (all if forced).

        Attempts the store reports superseded are cancelled and their results dropped.
        """
        if self._renewer is not None:
            errors = await self._renewer.renew_due(self._inflight.values(), force=force)
            self.stats.store_errors += errors  # read the counter after the await

    async def _listen(self, wakeups: Subscription) -> None:
        """Wakes the claim loop on each wakeup. If the subscription fails or ends, the claim
        loop polls for a ``poll_interval``, then subscribes again."""
        while True:
            try:
                async for _session_id in wakeups:
                    self.hooks.wakeup()
                    if self._notified_at is None:
                        self._notified_at = asyncio.get_running_loop().time()
                    self._wake.set()
            except Exception as error:
                self.stats.store_errors += 1
                log.warning("wakeup listener failed (%r); polling meanwhile", error)
            self._wakeups = None
            await _unsubscribe(wakeups)
            await asyncio.sleep(self.poll_interval)
            wakeups = self._wakeups = self.store.wakeups()
            self._wake_claims()  # anything may have happened while we were not listening

    # ------------------------------------------------------------------ shutdown

    async def _shutdown(self) -> None:
        """Drains for the grace, then cuts short what still runs and hands its claims back,
        except the heads whose sync handler still runs in a thread: those are left running,
        their claims kept until they lapse (``_left_running``), never released."""
        if not self._started:
            return
        self.stop()
        runner = self._runner
        assert runner is not None
        tasks = [a.task for a in self._inflight.values() if a.task is not None]
        if tasks and not self._force.is_set():
            log.info("draining %d attempts (grace %.1fs)", len(tasks), self.shutdown_grace)
            drained = asyncio.ensure_future(asyncio.wait(tasks))
            forced = asyncio.ensure_future(self._force.wait())
            await asyncio.wait(
                [drained, forced], timeout=self.shutdown_grace, return_when=asyncio.FIRST_COMPLETED
            )
            drained.cancel()
            forced.cancel()
        attempts = list(self._inflight.values())
        for attempt in attempts:
            runner.release(attempt)
        pinned = [a for a in attempts if runner.pinned(a)]
        for attempt in pinned:
            log.warning(
                "%s: its sync handler still runs in its thread; its claim is kept, not "
                "released (a thread cannot be stopped)",
                attempt.describe(),
                extra=fields(attempt.head, "its sync handler still runs at shutdown"),
            )
        given_up = await self._settle(runner, [a for a in attempts if a not in pinned])
        freed = [a for a in pinned if not runner.pinned(a)]  # returned meanwhile: settle too
        given_up += await self._settle(runner, freed)
        left = [a for a in pinned if runner.pinned(a)]
        cut_short = [a for a in attempts if a.stage == "released"]
        if self._renewer is not None:  # handed back: another worker takes them at once
            errors = await self._renewer.release(cut_short + given_up, within=self.cleanup_timeout)
            self.stats.store_errors += errors
        await _abandon(left)
        await runner.batcher.close()
        heartbeat, self._heartbeat = self._heartbeat, None
        if heartbeat is not None:  # gone from workers() once its work is handed back
            await heartbeat.close(self.holder, within=self.cleanup_timeout)
        for task in self._services.values():
            task.cancel()
        await asyncio.gather(*self._services.values(), return_exceptions=True)
        self._services = {}
        wakeups, self._wakeups = self._wakeups, None
        if wakeups is not None:
            await _unsubscribe(wakeups)
        runner.close()
        self._runner = None
        self._renewer = None
        self._inflight.clear()
        self._started = False
        self._stop.clear()
        self._force.clear()
        self._left_running = left
        if left:
            log.error(
                "worker %s stopped with %d sync handlers still running in their threads "
                "(%s): their leases lapse %gs after their last renewal, and the next claim "
                "of each counts a failure: %s",
                self.holder,
                len(left),
                ", ".join(a.describe() for a in left),
                self.ttl,
                self.stats,
            )
        else:
            log.info("worker %s stopped: %s", self.holder, self.stats)
        self.hooks.stopped(self.stats)

    async def _settle(self, runner: AttemptRunner, attempts: list[Attempt]) -> list[Attempt]:
        """Waits ``cleanup_timeout`` for ``attempts`` to settle; returns the ones given up on
        (their tasks are cancelled), which still hold claims unless superseded."""
        tasks = [a.task for a in attempts if a.task is not None and not a.task.done()]
        if not tasks:
            return []
        _done, pending = await asyncio.wait(tasks, timeout=self.cleanup_timeout)
        if not pending:
            return []
        given_up = [a for a in attempts if a.task in pending and not a.superseded]
        log.error("%d attempts did not settle; releasing their claims", len(pending))
        runner.batcher.abort()
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        return given_up


def _registered(app: App, name: str) -> Registration:
    """The registration of one of ``app``'s consumers (``App.served`` checked the name)."""
    registration = app.registration(name)
    assert registration is not None
    return registration


def _limits_of(store: Store) -> Limits:
    """The limits ``store`` checks calls with: an a2pg store's own (a wrapper that forwards
    its attributes passes them on), else the defaults."""
    limits = getattr(store, "_limits", None)
    return limits if isinstance(limits, Limits) else DEFAULT_LIMITS


async def serve(store: Store, app: App, **options: Any) -> WorkerStats:
    """Runs a worker until SIGTERM/SIGINT (the ``a2pg worker MODULE:APP`` entry point).

    The caller owns the store: open it before, close it after. Raises
    ``HandlersStillRunning`` when sync handlers still ran after the grace.
    """
    worker = Worker(store, app, **options)
    await worker.run_with_signals()
    return worker.stats


async def _wait_any(*events: asyncio.Event, within: float | None = None) -> None:
    """Returns when one of ``events`` is set or ``within`` seconds pass."""
    if any(event.is_set() for event in events):
        return
    if len(events) == 1:  # the claim loop's every cycle: no task, no asyncio.wait
        if within is None:
            await events[0].wait()
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(within):
                await events[0].wait()
        return
    waiters = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(waiters, timeout=within, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()


async def _abandon(attempts: list[Attempt]) -> None:
    """Ends the tasks of attempts whose sync handler still runs: the thread goes on alone,
    its result unread, its claim left to lapse."""
    for attempt in attempts:
        attempt.outcome = "abandoned"
        if attempt.task is not None:
            attempt.task.cancel()
    await asyncio.gather(*(a.task for a in attempts if a.task is not None), return_exceptions=True)


async def _unsubscribe(wakeups: Subscription) -> None:
    """Closes ``wakeups``; a store that fails to is no reason to fail the worker."""
    with contextlib.suppress(Exception):
        await wakeups.aclose()
