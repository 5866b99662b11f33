"""One claimed head's life in a worker: run the handler, then complete, fail, or let it go."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import logging
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from types import CoroutineType
from typing import Any, Literal, TypeAlias

from ..backoff import Backoff
from ..contract import propagation
from ..contract.limits import DEFAULT_LIMITS
from ..contract.values import _slot_setters
from ..errors import A2Error
from ..models import Completed, Completion, Head, NewEvent, Superseded
from ..store import Store
from .app import App, Registration, completion_events
from .attempt_log import LEASES_LAPSED, fields
from .batch import SEND_RETRY_BASE, CompletionBatcher, PendingCompletion
from .health import StoreHealth, refused
from .hooks import Outcome, WorkerHooks

log = logging.getLogger("a2pg.worker")

Stage = Literal["running", "queued", "settling", "released"]

AttemptKey: TypeAlias = tuple[str, str, str | None, int, int]
"""An attempt's session id, consumer, lane, index and attempt number."""

HeadKey: TypeAlias = tuple[str, str, str | None, int]
"""A head's session id, consumer, lane and index: an ``AttemptKey`` without the attempt."""


class AttemptTimeout(TimeoutError):
    """What fails an attempt whose handler ran past its timeout (``App.consumer(timeout=)``,
    ``WorkerSettings.attempt_timeout``); recorded as the attempt's error, it counts toward
    ``max_failures`` like any other failure."""


@dataclass(slots=True)
class WorkerStats:
    """Counters for demos, benchmarks and health checks.

    ``failed`` counts failures that will be retried; ``dead_lettered`` heads this
    worker dead-lettered (by a failure, or by claiming a head whose lapsed leases
    reached ``max_failures``); ``released`` attempts cut short by a shutdown and handed
    back with ``release_claims`` (no failure counted); ``timed_out`` attempts whose handler
    ran past its timeout (each also counted as failed or dead-lettered).
    """

    claimed: int = 0
    completed: int = 0
    failed: int = 0
    dead_lettered: int = 0
    superseded: int = 0
    released: int = 0
    flushes: int = 0
    store_errors: int = 0
    timed_out: int = 0


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
    """Cancellations of its task that ``supersede``, ``release`` or its timeout asked for
    (undone with ``Task.uncancel`` once the handler is left, so only a caller's
    cancellation remains)."""
    timeout: float | None = None
    """Seconds its handler may run (its consumer's timeout, else the worker's)."""
    timed_out: bool = False
    """Its handler ran past ``timeout``: the attempt fails once the handler has stopped."""
    timer: asyncio.TimerHandle | None = None
    thread: Future[Any] | None = None
    """A sync handler's call in the worker's thread pool, once submitted. A thread cannot
    be stopped: while it runs, the head's claim is never handed back."""
    after: Attempt | None = None
    """An earlier attempt of the same head whose handler still ran in this worker when the
    head was claimed again (its lease had lapsed): this one's handler waits for it."""
    handled: bool = False
    """Its handler is over, or will never run (a sync one: see ``thread``)."""
    handler_end: asyncio.Future[None] | None = None
    """Made when a later attempt of the head waits for this one's handler to end."""

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

    A head runs one handler at a time in a worker: when a claim returns a head one of
    whose earlier attempts still runs here (its lease lapsed meanwhile), that attempt is
    superseded and the new one's handler starts only once the earlier handler has ended
    (``handling``, shared by the worker's runs). A sync handler's thread cannot be
    stopped: superseding it, releasing it or timing it out waits for it to return, and
    while it runs its head's claim is never released (``pinned``).
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
        default_timeout: float | None = None,
        handling: dict[HeadKey, Attempt] | None = None,
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
        self._running_of: dict[str, int] = {}
        """Handlers running now, by consumer (what a consumer's ``concurrency`` bounds)."""
        self._executor: ThreadPoolExecutor | None = None
        self._default_timeout = default_timeout
        self._handling: dict[HeadKey, Attempt] = {} if handling is None else handling
        """The attempts whose handler runs or is yet to, by head (see the class)."""

    def begin(self, heads: list[Head], *, on_done: Callable[[Attempt], None]) -> list[Attempt]:
        """Starts an attempt for each head a claim returned; a head the claim dead-lettered
        is only counted. Whether observers watch attempts is asked once for the batch."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        watched = self._hooks.watches_attempts()
        registrations = self._app.registration
        handling = self._handling
        attempts = []
        for head in heads:
            if head.dead_lettered:
                self.stats.dead_lettered += 1
                self._hooks.dead_lettered_on_claim(head)
                log.warning(
                    "%s:%s@%d dead-lettered (leases lapsed)",
                    *_where(head),
                    extra={**fields(head, LEASES_LAPSED), "outcome": "dead_lettered"},
                )
                continue
            registration = registrations(head.consumer)
            if registration is None:  # claim_any was told our consumers: a store bug
                log.error(
                    "claimed %s:%s@%d, a consumer this app does not serve",
                    *_where(head),
                    extra=fields(head, "a consumer this app does not serve"),
                )
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
            timeout = registration.timeout
            attempt.timeout = self._default_timeout if timeout is None else timeout
            head_key = key[:4]
            earlier = handling.get(head_key)
            if earlier is not None and not _handler_over(earlier):
                # Its lease lapsed (an outage, a stalled loop) while it ran: it is stale now,
                # and this attempt's handler waits for it (one handler per head at a time).
                attempt.after = earlier
                self.supersede(earlier)
                log.warning(
                    "%s claimed while %s still runs here; it starts once that one has ended",
                    attempt.describe(),
                    earlier.describe(),
                    extra=fields(head),
                )
            handling[head_key] = attempt
            self._running_handlers += 1  # counted now: the claimer reads it before the task runs
            running_of = self._running_of
            running_of[head.consumer] = running_of.get(head.consumer, 0) + 1
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
        """Shutdown: cut a running handler short; the worker then hands its claim back. An
        attempt ``pinned`` by a handler thread is left alone: its claim stays held."""
        if attempt.stage != "running" or attempt.superseded or self.pinned(attempt):
            return
        attempt.releasing = True
        if not _cut_short(attempt):  # its thread started just now
            attempt.releasing = False

    def pinned(self, attempt: Attempt) -> bool:
        """Whether a handler of the attempt's head runs in a thread of this worker: its own,
        or an earlier attempt's it waits for. Its claim must not be handed back before
        that returns, or another worker could run the head beside it."""
        current: Attempt | None = attempt
        while current is not None:
            thread = current.thread
            if thread is not None and not thread.done():
                return True
            current = current.after
        return False

    @property
    def running(self) -> int:
        """Handlers running now (claimed attempts whose handler has not returned)."""
        return self._running_handlers

    def running_of(self, consumer: str) -> int:
        """Handlers of ``consumer`` running now (counted like ``running``)."""
        return self._running_of.get(consumer, 0)

    def close(self) -> None:
        executor, self._executor = self._executor, None
        if executor is not None:  # threads still running a sync handler finish alone
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
                    # cut short before it started: the handler never runs
                    if attempt.releasing or attempt.superseded:
                        raise asyncio.CancelledError
                    registration = attempt.registration
                    attempt.in_handler = True
                    if attempt.after is not None:
                        await self._wait_for_earlier(attempt)
                    if attempt.timeout is not None:
                        attempt.timer = asyncio.get_running_loop().call_later(
                            attempt.timeout, self._time_out, attempt
                        )
                    if registration.is_async:
                        result: Any = registration.handler(head)
                    else:
                        result = await self._call_sync(attempt, registration, head)
                    if type(result) is CoroutineType or inspect.isawaitable(result):
                        result = await result
                finally:
                    self._handler_ended(attempt)
                    attempt.in_handler = False
                    if attempt.cancels:  # ours, now delivered: only a caller's remains
                        _uncancel(attempt)
                    self._running_handlers -= 1
                    self._running_of[attempt.key[1]] -= 1
                    if self._running_handlers == 0:
                        self.batcher.flush_now()  # nothing else could join the batch
                    self._on_handler_done()
            except asyncio.CancelledError as error:
                if _being_cancelled():
                    raise
                if attempt.superseded:
                    self.stats.superseded += 1
                    attempt.outcome = "superseded"
                    log.info(
                        "%s superseded; its handler was cancelled",
                        attempt.describe(),
                        extra=fields(head),
                    )
                elif attempt.timed_out:
                    await self._fail_timed_out(attempt, error)
                elif attempt.releasing:
                    attempt.stage = "released"
                    attempt.outcome = "released"
                    log.info(
                        "%s cut short by the shutdown; to be released",
                        attempt.describe(),
                        extra=fields(head),
                    )
                else:  # the handler raised CancelledError itself: a failure like any other
                    await self._fail(attempt, error, describe_error(error))
                return
            except Exception as error:
                if attempt.timed_out and not attempt.superseded:
                    await self._fail_timed_out(attempt, error)
                else:
                    await self._fail(attempt, error, describe_error(error))
                return
            if attempt.superseded:  # the renewal said so while the result was on its way
                self.stats.superseded += 1
                attempt.outcome = "superseded"
                return
            if attempt.timed_out:  # a sync handler's thread, or a handler that swallowed
                await self._fail_timed_out(attempt, None)  # the cancel, returned too late
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
                log.warning(
                    "%s: completion not sent before shutdown",
                    attempt.describe(),
                    extra=fields(head, "completion not sent before shutdown"),
                )
                return
            except A2Error as error:  # refused on its own: e.g. returned ids clash with stored ones
                await self._fail(attempt, error, f"completion refused: {error}")
                return
            except Exception as error:
                self.stats.store_errors += 1
                attempt.outcome, attempt.error = "abandoned", error
                log.error(
                    "%s: completion not acknowledged (%r)",
                    attempt.describe(),
                    error,
                    extra=fields(head, error),
                )
                return
            if isinstance(outcome, Completed):
                self.stats.completed += 1
                attempt.outcome = "completed"
            else:
                self.stats.superseded += 1
                attempt.outcome = "superseded"
                log.info(
                    "%s superseded; its result was discarded",
                    attempt.describe(),
                    extra=fields(head),
                )
        except Exception as error:
            self.stats.store_errors += 1
            attempt.outcome, attempt.error = "abandoned", error
            log.exception(
                "attempt %s ended in error; its lease will lapse",
                attempt.describe(),
                extra=fields(attempt.head, error),
            )
        finally:
            if on_done is not None:
                on_done(attempt)

    async def _call_sync(self, attempt: Attempt, registration: Registration, head: Head) -> Any:
        """A sync handler, in a thread of the worker's pool (with this task's context).

        Only the attempt's task being cancelled outright (a shutdown leaving the thread
        behind) stops the wait; ``_cut_short`` cancels the call only before it starts.
        """
        if self._executor is None:
            self._executor = ThreadPoolExecutor(
                max_workers=self._concurrency, thread_name_prefix="a2pg-handler"
            )
        call = functools.partial(contextvars.copy_context().run, registration.handler, head)
        thread = attempt.thread = self._executor.submit(call)
        return await asyncio.wrap_future(thread)

    def _handler_ended(self, attempt: Attempt) -> None:
        """The handler section of the attempt's task is left: its timer is stopped and, unless
        a thread still runs its handler (the task was cancelled outright), the head is free
        for a later attempt."""
        timer = attempt.timer
        if timer is not None:
            timer.cancel()
            attempt.timer = None
        thread = attempt.thread
        if thread is not None and not thread.done():
            return  # a later attempt of the head waits for the thread itself
        attempt.handled = True
        head_key = attempt.key[:4]
        if self._handling.get(head_key) is attempt:
            earlier = attempt.after  # set while it waited: it was cut short meanwhile
            while earlier is not None and _handler_over(earlier):
                earlier = earlier.after
            if earlier is None:
                del self._handling[head_key]
            else:  # the head still runs here: the next claim of it waits for that one
                self._handling[head_key] = earlier
        end = attempt.handler_end
        if end is not None and not end.done():
            end.set_result(None)

    async def _wait_for_earlier(self, attempt: Attempt) -> None:
        """Waits until no earlier attempt of the head runs a handler here (see ``after``)."""
        earlier = attempt.after
        while earlier is not None:
            await _handler_end(earlier)
            earlier = earlier.after
        attempt.after = None

    def _time_out(self, attempt: Attempt) -> None:
        """The attempt's timeout passed: an async handler is cancelled (the attempt then
        fails); a sync one cannot be, so the attempt fails once its thread returns. While
        the handler goes on, a WARNING says so once per timeout (an async handler that
        ignores being cancelled is cancelled again), so a hung one is never silent."""
        attempt.timer = None
        if not attempt.in_handler or attempt.superseded or attempt.releasing:
            return
        timeout = attempt.timeout
        assert timeout is not None
        first = not attempt.timed_out
        if first:
            attempt.timed_out = True
            self.stats.timed_out += 1
        if not _cut_short(attempt):
            log.warning(
                "%s ran past its %gs timeout (%.1fs since its claim); a sync handler's "
                "thread cannot be stopped: its head stays claimed until the thread returns, "
                "then the attempt fails",
                attempt.describe(),
                timeout,
                attempt.elapsed(),
                extra=fields(attempt.head, f"AttemptTimeout: ran past its {timeout:g}s timeout"),
            )
        elif not first:
            log.warning(
                "%s still runs %.1fs after its claim, past its %gs timeout: its handler "
                "ignores being cancelled; cancelled again",
                attempt.describe(),
                attempt.elapsed(),
                timeout,
                extra=fields(attempt.head, f"AttemptTimeout: ran past its {timeout:g}s timeout"),
            )
        attempt.timer = asyncio.get_running_loop().call_later(timeout, self._time_out, attempt)

    async def _fail_timed_out(self, attempt: Attempt, cause: BaseException | None) -> None:
        """Fails the attempt with ``AttemptTimeout``; ``cause`` is how its handler ended (the
        cancellation, with where it was, or what it raised after its timeout)."""
        thread = attempt.thread
        ran = thread is not None and not thread.cancelled()
        what = "its thread returned late" if ran else "was cancelled"
        error = AttemptTimeout(
            f"{attempt.describe()}: the handler of consumer '{attempt.head.consumer}' ran "
            f"past its {attempt.timeout:g}s timeout and {what} "
            f"({attempt.elapsed():.1f}s after the claim)"
        )
        error.__cause__ = cause
        await self._fail(attempt, error, describe_error(error))

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
            except Exception as lost:
                if refused(lost):  # the store's answer; STORE_UNAVAILABLE is an outage
                    raise
                log.info(
                    "%s: recording the failure failed (%r); again",
                    attempt.describe(),
                    lost,
                    extra=fields(head, lost),
                )
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
                extra={**fields(head, error), "outcome": "failed"},
            )
        elif result.outcome == "dead_lettered":
            self.stats.dead_lettered += 1
            log.error(
                "%s dead-lettered after %d failures: %r",
                attempt.describe(),
                result.failure_count,
                error,
                exc_info=error,
                extra={**fields(head, error), "outcome": "dead_lettered"},
            )
        else:
            self.stats.superseded += 1


def _make_completion() -> Callable[[AttemptKey, Sequence[NewEvent]], Completion]:
    """``Completion(*key, events)``, built as ``contract.values`` builds events: a frozen
    dataclass's ``__init__`` sets each field through ``object.__setattr__``, and setting
    the slots of ``object.__new__(Completion)`` makes the same value in about half the
    time (one per attempt). A ``Completion`` of another shape gets its ``__init__``."""
    names = (
        "session_id", "consumer", "lane", "index", "attempt", "events", "consumers", "trace_parent"
    )  # fmt: skip
    setters = _slot_setters(Completion, names)
    if not setters:
        return lambda key, events: Completion(
            *key, events, trace_parent=propagation.current() if events else None
        )
    set_sid, set_consumer, set_lane, set_index, set_attempt, set_events, set_consumers = setters[:7]
    set_trace = setters[7]
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
        # The attempt span is current here (hooks.attempt wraps the run): the returned
        # events carry its context, as an append's carry the append span's.
        set_trace(made, propagation.current() if events else None)
        return made

    return completion


_completion = _make_completion()


def describe_error(error: BaseException, limit: int = DEFAULT_LIMITS.max_error_length) -> str:
    """The traceback as error text; when too long, its end (where the error is) is kept."""
    text = "".join(traceback.format_exception(error))
    if len(text) <= limit:
        return text
    return "...\n" + text[-(limit - 4) :]


def _cut_short(attempt: Attempt) -> bool:
    """Cancels the attempt's task while its handler (or its wait for an earlier attempt)
    runs in it; a task not yet started sees ``releasing`` or ``superseded`` when it
    starts. A sync handler's call is cancelled only while it waits for a thread: False
    when the handler runs in one, which nothing can stop."""
    thread = attempt.thread
    if thread is not None:
        return thread.cancel() or thread.done()
    task = attempt.task
    if attempt.in_handler and task is not None and task.cancel():
        attempt.cancels += 1
    return True


def _handler_over(attempt: Attempt) -> bool:
    """Whether no handler of ``attempt`` runs, nor will start."""
    thread = attempt.thread
    if thread is not None:
        return thread.done()
    task = attempt.task
    return attempt.handled or task is None or task.done()


async def _handler_end(attempt: Attempt) -> None:
    """Returns once ``_handler_over(attempt)``; cancelling the wait leaves the handler be."""
    while not _handler_over(attempt):
        thread = attempt.thread
        if thread is not None:  # a thread: wait for it, whatever its task does
            await asyncio.wait([asyncio.wrap_future(thread)])
            continue
        end = attempt.handler_end
        if end is None:
            end = attempt.handler_end = asyncio.get_running_loop().create_future()
        task = attempt.task
        assert task is not None
        await asyncio.wait([end, task], return_when=asyncio.FIRST_COMPLETED)


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
