"""One claimed head's life in a worker: run the handler, then complete, fail, or let it go."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import logging
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from types import CoroutineType
from typing import Any, Literal, TypeAlias

from ..backoff import Backoff
from ..contract.limits import DEFAULT_LIMITS
from ..contract.values import _slot_setters
from ..errors import A2Error
from ..models import Completed, Completion, Head, NewEvent, Superseded
from ..store import Store
from .app import App, Registration, completion_events
from .batch import SEND_RETRY_BASE, CompletionBatcher, PendingCompletion
from .health import StoreHealth
from .hooks import Outcome, WorkerHooks

log = logging.getLogger("a2pg.worker")

Stage = Literal["running", "queued", "settling", "released"]

AttemptKey: TypeAlias = tuple[str, str, str | None, int, int]
"""An attempt's session id, consumer, lane, index and attempt number."""


@dataclass(slots=True)
class WorkerStats:
    """Counters for demos, benchmarks and health checks.

    ``failed`` counts failures that will be retried; ``dead_lettered`` heads this
    worker dead-lettered (by a failure, or by claiming a head whose lapsed leases
    reached ``max_failures``); ``released`` attempts cut short by a shutdown and handed
    back with ``release_claims`` (no failure counted).
    """

    claimed: int = 0
    completed: int = 0
    failed: int = 0
    dead_lettered: int = 0
    superseded: int = 0
    released: int = 0
    flushes: int = 0
    store_errors: int = 0


@dataclass(eq=False, slots=True)
class Attempt:
    """An attempt in flight: its head, where it is, and how to stop it."""

    head: Head
    registration: Registration
    key: AttemptKey
    """Its key among the worker's attempts in flight, and the fields its completion names."""
    leased_at: float
    claimed_at: float = 0.0
    stage: Stage = "running"
    outcome: Outcome | None = None
    """How it ended (see ``hooks.Outcome``); None while it runs."""
    error: BaseException | None = None
    """What failed it, when it failed."""
    entry: PendingCompletion | None = None
    superseded: bool = False
    releasing: bool = False
    task: asyncio.Task[None] | None = None
    """The attempt's one task: its handler runs in it, then its settlement."""
    in_handler: bool = False
    """Its task is inside the handler now: cancelling the task stops the handler."""
    cancels: int = 0
    """Cancellations of its task that ``supersede`` or ``release`` asked for (undone with
    ``Task.uncancel`` once the handler is left, so only a caller's cancellation remains)."""

    def describe(self) -> str:
        session_id, consumer, lane, index, attempt = self.key
        lane = "" if lane is None else f"/{lane}"
        return f"{session_id}:{consumer}{lane}@{index}#{attempt}"

    def elapsed(self) -> float:
        """Seconds since it was claimed (by the event loop's clock)."""
        return asyncio.get_running_loop().time() - self.claimed_at


class AttemptRunner:
    """Runs handlers and settles their attempts with the store.

    An attempt ends exactly one way: completed (its returned events appended by a
    batched ``complete_attempts``), failed (``fail_attempt`` with a backoff; it may
    dead-letter), superseded (the store no longer knows this attempt: its result is
    dropped), or released (shutdown cut it short: its stage becomes ``released`` and the
    worker hands the claim back with ``release_claims``, so another worker takes it at
    once and no failure is counted). The store failing on the way (a lost connection)
    does not end the attempt: its completion or failure is sent again until the store
    answers, its lease renewed meanwhile; only a shutdown gives up on it (the lease then
    lapses, and the next claim counts a failure).
    """

    def __init__(
        self,
        store: Store,
        app: App,
        batcher: CompletionBatcher,
        *,
        holder: str,
        max_failures: int,
        backoff: Backoff,
        concurrency: int,
        stats: WorkerStats,
        on_retry: Callable[[float], None],
        on_handler_done: Callable[[], None],
        health: StoreHealth | None = None,
        hooks: WorkerHooks | None = None,
    ) -> None:
        self.store = store
        self._health = health or StoreHealth(1.0)
        self._hooks = hooks or WorkerHooks()
        self._app = app
        self.batcher = batcher
        self.holder = holder
        self.max_failures = max_failures
        self.backoff = backoff
        self.stats = stats
        self._concurrency = concurrency
        self._on_retry = on_retry
        self._on_handler_done = on_handler_done
        self._running_handlers = 0
        self._executor: ThreadPoolExecutor | None = None

    def begin(self, heads: list[Head], *, on_done: Callable[[Attempt], None]) -> list[Attempt]:
        """Starts an attempt for each head a claim returned; a head the claim dead-lettered
        is only counted. Whether observers watch attempts is asked once for the batch."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        watched = self._hooks.watches_attempts()
        registrations = self._app.registration
        attempts = []
        for head in heads:
            if head.dead_lettered:
                self.stats.dead_lettered += 1
                self._hooks.dead_lettered_on_claim(head)
                log.warning("%s:%s@%d dead-lettered (leases lapsed)", *_where(head))
                continue
            registration = registrations(head.consumer)
            if registration is None:  # claim_any was told our consumers: a store bug
                log.error("claimed %s:%s@%d, a consumer this app does not serve", *_where(head))
                continue
            self.stats.claimed += 1
            event = head.event
            key = (
                event.session_id,
                head.consumer,
                head.lane,
                event.index,
                head.dispatch.attempt_count,
            )
            attempt = Attempt(head, registration, key, now, now)
            self._running_handlers += 1  # counted now: the claimer reads it before the task runs
            run = self._watched(attempt, on_done) if watched else self._run(attempt, on_done)
            attempt.task = loop.create_task(run, name=f"a2pg-attempt {attempt.describe()}")
            attempts.append(attempt)
        return attempts

    def supersede(self, attempt: Attempt) -> None:
        """The store says this attempt is stale: stop its handler or withdraw its completion."""
        if attempt.superseded:
            return
        if attempt.stage == "running":
            attempt.superseded = True
            _cut_short(attempt)
        elif (
            attempt.stage == "queued"
            and attempt.entry is not None
            and self.batcher.withdraw(attempt.entry)
        ):
            attempt.superseded = True
            attempt.entry.future.set_result(Superseded())
        # already sent or failing: the store's answer to that call decides

    def release(self, attempt: Attempt) -> None:
        """Shutdown: cut a running handler short; the worker then hands its claim back."""
        if attempt.stage == "running" and not attempt.superseded:
            attempt.releasing = True
            _cut_short(attempt)

    @property
    def running(self) -> int:
        """Handlers running now (claimed attempts whose handler has not returned)."""
        return self._running_handlers

    def close(self) -> None:
        executor, self._executor = self._executor, None
        if executor is not None:  # threads still running a cut-short sync handler finish alone
            executor.shutdown(wait=False, cancel_futures=True)

    # ------------------------------------------------------------------ the run

    async def _watched(self, attempt: Attempt, on_done: Callable[[Attempt], None]) -> None:
        """The task of an attempt observers watch: ``hooks.attempt`` wraps its run (the
        handler runs inside: tracing spans)."""
        try:
            with self._hooks.attempt(attempt):
                await self._run(attempt, None)
        finally:
            on_done(attempt)

    async def _run(self, attempt: Attempt, on_done: Callable[[Attempt], None] | None) -> None:
        """Runs the handler in this task, then completes the attempt (its completion queued
        for the next batch, this task waiting for the store's answer) or fails it; the task
        of an attempt no observer watches (then ``on_done`` ends it), or ``_watched``'s."""
        try:
            head = attempt.head
            try:
                try:
                    if attempt.releasing:  # cut short before it started: the handler never runs
                        raise asyncio.CancelledError
                    registration = attempt.registration
                    attempt.in_handler = True
                    if registration.is_async:
                        result: Any = registration.handler(head)
                    else:
                        result = await self._call_sync(registration, head)
                    if type(result) is CoroutineType or inspect.isawaitable(result):
                        result = await result
                finally:
                    attempt.in_handler = False
                    if attempt.cancels:  # ours, now delivered: only a caller's remains
                        _uncancel(attempt)
                    self._running_handlers -= 1
                    if self._running_handlers == 0:
                        self.batcher.flush_now()  # nothing else could join the batch
                    self._on_handler_done()
            except asyncio.CancelledError as error:
                if _being_cancelled():
                    raise
                if attempt.superseded:
                    self.stats.superseded += 1
                    attempt.outcome = "superseded"
                    log.info("%s superseded; its handler was cancelled", attempt.describe())
                elif attempt.releasing:
                    attempt.stage = "released"
                    attempt.outcome = "released"
                    log.info("%s cut short by the shutdown; to be released", attempt.describe())
                else:  # the handler raised CancelledError itself: a failure like any other
                    await self._fail(attempt, error, describe_error(error))
                return
            except Exception as error:
                await self._fail(attempt, error, describe_error(error))
                return
            if attempt.superseded:  # the renewal said so while the result was on its way
                self.stats.superseded += 1
                attempt.outcome = "superseded"
                return
            # () when it returned none: the store's checks take that completion as it is
            events: Sequence[NewEvent] = ()
            if result is not None:
                try:  # bad events are the store's to judge: a refused batch is sent one by one
                    events = completion_events(head, result) or ()
                except Exception as error:
                    await self._fail(attempt, error, describe_error(error))
                    return
            attempt.stage = "queued"
            entry = attempt.entry = self.batcher.enqueue(_completion(attempt.key, events))
            if self._running_handlers == 0:
                self.batcher.flush_now()
            try:
                outcome = await entry.future
            except asyncio.CancelledError:
                if _being_cancelled():
                    raise
                attempt.outcome = "abandoned"
                log.warning("%s: completion not sent before shutdown", attempt.describe())
                return
            except A2Error as error:  # refused on its own: e.g. returned ids clash with stored ones
                await self._fail(attempt, error, f"completion refused: {error}")
                return
            except Exception as error:
                self.stats.store_errors += 1
                attempt.outcome, attempt.error = "abandoned", error
                log.error("%s: completion not acknowledged (%r)", attempt.describe(), error)
                return
            if isinstance(outcome, Completed):
                self.stats.completed += 1
                attempt.outcome = "completed"
            else:
                self.stats.superseded += 1
                attempt.outcome = "superseded"
                log.info("%s superseded; its result was discarded", attempt.describe())
        except Exception as error:
            self.stats.store_errors += 1
            attempt.outcome, attempt.error = "abandoned", error
            log.exception("attempt %s ended in error; its lease will lapse", attempt.describe())
        finally:
            if on_done is not None:
                on_done(attempt)

    async def _call_sync(self, registration: Registration, head: Head) -> Any:
        """A sync handler, in a thread of the worker's pool (with this task's context)."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(
                max_workers=self._concurrency, thread_name_prefix="a2pg-handler"
            )
        call = functools.partial(contextvars.copy_context().run, registration.handler, head)
        return await asyncio.get_running_loop().run_in_executor(self._executor, call)

    async def _fail(self, attempt: Attempt, error: BaseException, text: str) -> None:
        head = attempt.head
        attempt.stage = "settling"
        attempt.error = error
        retry_after = self.backoff.delay(head.failure_count + 1)
        delay = SEND_RETRY_BASE
        while True:  # the same call again is idempotent: repeat it until the store answers
            try:
                async with self._health.call("fail_attempt"):
                    result = await self.store.fail_attempt(
                        head.session_id,
                        consumer=head.consumer,
                        lane=head.lane,
                        index=head.index,
                        attempt=head.attempt,
                        error=text,
                        max_failures=self.max_failures,
                        retry_after=retry_after,
                    )
                break
            except A2Error:
                raise
            except Exception as lost:
                log.info("%s: recording the failure failed (%r); again", attempt.describe(), lost)
                await asyncio.sleep(delay)
                delay = min(delay * 2, self._health.every)
        attempt.outcome = result.outcome
        if result.outcome == "failed":
            self.stats.failed += 1
            self._on_retry(retry_after)
            log.warning(
                "%s failed (%d of %d), retry in %.2fs: %r",
                attempt.describe(),
                result.failure_count,
                self.max_failures,
                retry_after,
                error,
                exc_info=error,
            )
        elif result.outcome == "dead_lettered":
            self.stats.dead_lettered += 1
            log.error(
                "%s dead-lettered after %d failures", attempt.describe(), result.failure_count
            )
        else:
            self.stats.superseded += 1


def _make_completion() -> Callable[[AttemptKey, Sequence[NewEvent]], Completion]:
    """``Completion(*key, events)``, built as ``contract.values`` builds events: a frozen
    dataclass's ``__init__`` sets each field through ``object.__setattr__``, and setting
    the slots of ``object.__new__(Completion)`` makes the same value in about half the
    time (one per attempt). A ``Completion`` of another shape gets its ``__init__``."""
    names = ("session_id", "consumer", "lane", "index", "attempt", "events", "consumers")
    setters = _slot_setters(Completion, names)
    if not setters:
        return lambda key, events: Completion(*key, events)
    set_sid, set_consumer, set_lane, set_index, set_attempt, set_events, set_consumers = setters
    new = object.__new__

    def completion(key: AttemptKey, events: Sequence[NewEvent]) -> Completion:
        session_id, consumer, lane, index, attempt = key
        made = new(Completion)
        set_sid(made, session_id)
        set_consumer(made, consumer)
        set_lane(made, lane)
        set_index(made, index)
        set_attempt(made, attempt)
        set_events(made, events)
        set_consumers(made, None)
        return made

    return completion


_completion = _make_completion()


def describe_error(error: BaseException, limit: int = DEFAULT_LIMITS.max_error_length) -> str:
    """The traceback as error text; when too long, its end (where the error is) is kept."""
    text = "".join(traceback.format_exception(error))
    if len(text) <= limit:
        return text
    return "...\n" + text[-(limit - 4) :]


def _cut_short(attempt: Attempt) -> None:
    """Cancels the attempt's task while its handler runs in it (a task not yet started
    sees ``releasing`` or ``superseded`` when it starts)."""
    task = attempt.task
    if attempt.in_handler and task is not None and task.cancel():
        attempt.cancels += 1


def _uncancel(attempt: Attempt) -> None:
    """Takes back the cancellations ``_cut_short`` asked of the current task."""
    task = asyncio.current_task()
    if task is not None:
        for _ in range(attempt.cancels):
            task.uncancel()
    attempt.cancels = 0


def _being_cancelled() -> bool:
    """Whether the current task itself is being cancelled (not just something it awaited)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _where(head: Head) -> tuple[str, str, int]:
    return head.session_id, head.consumer, head.index
